//! The command table and dispatch: arity, authentication and the unknown-command reply, as Redis
//! words them; each command's work is in the `cmd_*` modules.

use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::reply::Reply;
use crate::state::{ServerState, Session};
use crate::{cmd_hash, cmd_keys, cmd_lcs, cmd_list, cmd_server, cmd_set, cmd_strings, cmd_zset};

/// What a command handler returns: its reply, or an error reply (`?` turns engine errors into
/// `-ERR ...`).
pub type CmdResult = Result<Reply, Reply>;

/// The context of one command.
pub struct Ctx<'a> {
    pub server: &'a ServerState,
    pub session: &'a mut Session,
}

impl Ctx<'_> {
    pub fn ks(&self) -> &crate::keyspace::Keyspace {
        &self.server.keyspace
    }
}

pub type Handler = fn(&mut Ctx, &[Vec<u8>]) -> CmdResult;

/// One command: its name (lower case), its arity the way Redis states it (`n`: exactly n
/// arguments counting the name; `-n`: at least n), whether it writes, and its handler.
pub struct Spec {
    pub name: &'static str,
    pub arity: i32,
    pub writes: bool,
    pub handler: Handler,
}

const fn spec(name: &'static str, arity: i32, writes: bool, handler: Handler) -> Spec {
    Spec { name, arity, writes, handler }
}

pub static COMMANDS: &[Spec] = &[
    // Connection and server.
    spec("ping", -1, false, cmd_server::ping),
    spec("echo", 2, false, cmd_server::echo),
    spec("hello", -1, false, cmd_server::hello),
    spec("auth", -2, false, cmd_server::auth),
    spec("select", 2, false, cmd_server::select),
    spec("quit", -1, false, cmd_server::quit),
    spec("dbsize", 1, false, cmd_keys::dbsize),
    spec("flushall", -1, true, cmd_keys::flushall),
    spec("flushdb", -1, true, cmd_keys::flushall),
    spec("info", -1, false, cmd_server::info),
    spec("config", -2, false, cmd_server::config),
    spec("client", -2, false, cmd_server::client),
    spec("command", -1, false, cmd_server::command),
    spec("shutdown", -1, false, cmd_server::shutdown),
    spec("save", 1, false, cmd_server::save),
    spec("bgsave", -1, false, cmd_server::save),
    spec("time", 1, false, cmd_server::time),
    spec("function", -2, false, cmd_server::function),
    spec("multi", 1, false, multi),
    spec("exec", 1, false, exec),
    spec("discard", 1, false, discard),
    spec("watch", -2, false, watch),
    spec("unwatch", 1, false, unwatch),
    // Strings.
    spec("get", 2, false, cmd_strings::get),
    spec("set", -3, true, cmd_strings::set),
    spec("setnx", 3, true, cmd_strings::setnx),
    spec("setex", 4, true, cmd_strings::setex),
    spec("psetex", 4, true, cmd_strings::psetex),
    spec("getset", 3, true, cmd_strings::getset),
    spec("getdel", 2, true, cmd_strings::getdel),
    spec("getex", -2, true, cmd_strings::getex),
    spec("mget", -2, false, cmd_strings::mget),
    spec("mset", -3, true, cmd_strings::mset),
    spec("msetnx", -3, true, cmd_strings::msetnx),
    spec("incr", 2, true, cmd_strings::incr),
    spec("decr", 2, true, cmd_strings::decr),
    spec("incrby", 3, true, cmd_strings::incrby),
    spec("decrby", 3, true, cmd_strings::decrby),
    spec("incrbyfloat", 3, true, cmd_strings::incrbyfloat),
    spec("append", 3, true, cmd_strings::append),
    spec("strlen", 2, false, cmd_strings::strlen),
    spec("getrange", 4, false, cmd_strings::getrange),
    spec("substr", 4, false, cmd_strings::getrange),
    spec("setrange", 4, true, cmd_strings::setrange),
    spec("setbit", 4, true, cmd_strings::setbit),
    spec("getbit", 3, false, cmd_strings::getbit),
    spec("lcs", -3, false, cmd_lcs::lcs),
    // Keys.
    spec("del", -2, true, cmd_keys::del),
    spec("unlink", -2, true, cmd_keys::del),
    spec("exists", -2, false, cmd_keys::exists),
    spec("type", 2, false, cmd_keys::type_of),
    spec("rename", 3, true, cmd_keys::rename),
    spec("renamenx", 3, true, cmd_keys::renamenx),
    spec("copy", -3, true, cmd_keys::copy),
    spec("randomkey", 1, false, cmd_keys::randomkey),
    spec("memory", -2, false, cmd_keys::memory),
    spec("keys", 2, false, cmd_keys::keys),
    spec("scan", -2, false, cmd_keys::scan),
    spec("expire", -3, true, cmd_keys::expire),
    spec("pexpire", -3, true, cmd_keys::pexpire),
    spec("expireat", -3, true, cmd_keys::expireat),
    spec("pexpireat", -3, true, cmd_keys::pexpireat),
    spec("ttl", 2, false, cmd_keys::ttl),
    spec("pttl", 2, false, cmd_keys::pttl),
    spec("expiretime", 2, false, cmd_keys::expiretime),
    spec("pexpiretime", 2, false, cmd_keys::pexpiretime),
    spec("persist", 2, true, cmd_keys::persist),
    // Hashes.
    spec("hset", -4, true, cmd_hash::hset),
    spec("hmset", -4, true, cmd_hash::hmset),
    spec("hsetnx", 4, true, cmd_hash::hsetnx),
    spec("hget", 3, false, cmd_hash::hget),
    spec("hmget", -3, false, cmd_hash::hmget),
    spec("hgetall", 2, false, cmd_hash::hgetall),
    spec("hkeys", 2, false, cmd_hash::hkeys),
    spec("hvals", 2, false, cmd_hash::hvals),
    spec("hdel", -3, true, cmd_hash::hdel),
    spec("hlen", 2, false, cmd_hash::hlen),
    spec("hstrlen", 3, false, cmd_hash::hstrlen),
    spec("hexists", 3, false, cmd_hash::hexists),
    spec("hincrby", 4, true, cmd_hash::hincrby),
    spec("hincrbyfloat", 4, true, cmd_hash::hincrbyfloat),
    spec("hrandfield", -2, false, cmd_hash::hrandfield),
    // Sets.
    spec("sadd", -3, true, cmd_set::sadd),
    spec("srem", -3, true, cmd_set::srem),
    spec("scard", 2, false, cmd_set::scard),
    spec("sismember", 3, false, cmd_set::sismember),
    spec("smismember", -3, false, cmd_set::smismember),
    spec("smembers", 2, false, cmd_set::smembers),
    spec("srandmember", -2, false, cmd_set::srandmember),
    spec("spop", -2, true, cmd_set::spop),
    // Lists.
    spec("rpush", -3, true, cmd_list::rpush),
    spec("lpush", -3, true, cmd_list::lpush),
    spec("rpushx", -3, true, cmd_list::rpushx),
    spec("lpushx", -3, true, cmd_list::lpushx),
    spec("lpop", -2, true, cmd_list::lpop),
    spec("rpop", -2, true, cmd_list::rpop),
    spec("llen", 2, false, cmd_list::llen),
    spec("lindex", 3, false, cmd_list::lindex),
    spec("lset", 4, true, cmd_list::lset),
    spec("lrange", 4, false, cmd_list::lrange),
    spec("blpop", -3, true, cmd_list::blpop),
    spec("brpop", -3, true, cmd_list::brpop),
    // Sorted sets.
    spec("zadd", -4, true, cmd_zset::zadd),
    spec("zrem", -3, true, cmd_zset::zrem),
    spec("zscore", 3, false, cmd_zset::zscore),
    spec("zcard", 2, false, cmd_zset::zcard),
    spec("zrange", -4, false, cmd_zset::zrange),
    spec("zrangebyscore", -4, false, cmd_zset::zrangebyscore),
];

/// Command names (lower case) to their index in `COMMANDS`.
static BY_NAME: std::sync::LazyLock<std::collections::HashMap<&'static str, usize>> =
    std::sync::LazyLock::new(|| COMMANDS.iter().enumerate().map(|(i, s)| (s.name, i)).collect());

/// The command called `name` (any case) and its index in `COMMANDS`.
pub fn find_indexed(name: &[u8]) -> Option<(usize, &'static Spec)> {
    const LONGEST_NAME_BYTES: usize = 16;
    if name.len() > LONGEST_NAME_BYTES {
        return None;
    }
    let mut lower = [0u8; LONGEST_NAME_BYTES];
    lower[..name.len()].copy_from_slice(name);
    lower[..name.len()].make_ascii_lowercase();
    let lower = std::str::from_utf8(&lower[..name.len()]).ok()?;
    BY_NAME.get(lower).map(|&i| (i, &COMMANDS[i]))
}

pub fn find(name: &[u8]) -> Option<&'static Spec> {
    find_indexed(name).map(|(_, spec)| spec)
}

/// Runs one request (or, inside MULTI, queues it). `args` is never empty (the parser skips
/// empty requests). `tick` is when the previous request of the pipeline ended (or the pipeline
/// began); the command's time in INFO commandstats runs from it, so one clock read per request
/// serves both ends.
pub fn execute(server: &ServerState, session: &mut Session, args: &[Vec<u8>], tick: &mut Instant) -> Reply {
    server.counters.commands_processed.fetch_add(1, Ordering::Relaxed);
    let (index, spec) = match checked_spec(args) {
        Ok(found) => found,
        Err(refused) => {
            session.queue_failed |= session.queued.is_some();
            return refused;
        }
    };
    if !session.authenticated && !matches!(spec.name, "auth" | "hello" | "quit") {
        server.command_stats[index].rejected_calls.fetch_add(1, Ordering::Relaxed);
        return Reply::error("NOAUTH Authentication required.");
    }
    if let Some(queue) = session.queued.as_mut().filter(|_| !TRANSACTION_CONTROL.contains(&spec.name)) {
        queue.push(args.to_vec());
        return Reply::Simple("QUEUED");
    }
    run(index, server, session, args, tick)
}

/// Commands that act at once inside MULTI instead of being queued.
const TRANSACTION_CONTROL: [&str; 5] = ["exec", "discard", "multi", "watch", "quit"];

/// The command `args` names, with a valid argument count.
fn checked_spec(args: &[Vec<u8>]) -> Result<(usize, &'static Spec), Reply> {
    let (index, spec) = find_indexed(&args[0]).ok_or_else(|| unknown_command(args))?;
    let arity_ok = if spec.arity >= 0 {
        args.len() == spec.arity as usize
    } else {
        args.len() >= (-spec.arity) as usize
    };
    if !arity_ok {
        return Err(Reply::err(format!("wrong number of arguments for '{}' command", spec.name)));
    }
    Ok((index, spec))
}

fn run(
    index: usize,
    server: &ServerState,
    session: &mut Session,
    args: &[Vec<u8>],
    tick: &mut Instant,
) -> Reply {
    let mut ctx = Ctx { server, session };
    let result = (COMMANDS[index].handler)(&mut ctx, args);
    let ended = Instant::now();
    let stats = &server.command_stats[index];
    stats.calls.fetch_add(1, Ordering::Relaxed);
    stats.usec.fetch_add(ended.saturating_duration_since(*tick).as_micros() as u64, Ordering::Relaxed);
    *tick = ended;
    match result {
        Ok(reply) if !reply.is_error() => reply,
        Ok(reply) | Err(reply) => {
            stats.failed_calls.fetch_add(1, Ordering::Relaxed);
            reply
        }
    }
}

fn multi(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    if ctx.session.queued.is_some() {
        return Err(Reply::err("MULTI calls can not be nested"));
    }
    ctx.session.queued = Some(Vec::new());
    ctx.session.queue_failed = false;
    Ok(crate::reply::OK)
}

/// Runs the queue holding every key, so no other client's command lands between its commands.
fn exec(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    let Some(queue) = ctx.session.queued.take() else {
        return Err(Reply::err("EXEC without MULTI"));
    };
    if std::mem::take(&mut ctx.session.queue_failed) {
        return Err(Reply::error("EXECABORT Transaction discarded because of previous errors."));
    }
    let (server, session) = (ctx.server, &mut *ctx.session);
    session.in_exec = true;
    let mut tick = Instant::now();
    let replies = server.keyspace.with_everything_locked(|| {
        let run_one = |args: &Vec<Vec<u8>>| match checked_spec(args) {
            Ok((index, _)) => run(index, server, session, args, &mut tick),
            Err(refused) => refused,
        };
        queue.iter().map(run_one).collect()
    });
    session.in_exec = false;
    Ok(Reply::Array(replies))
}

fn discard(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    if ctx.session.queued.take().is_none() {
        return Err(Reply::err("DISCARD without MULTI"));
    }
    ctx.session.queue_failed = false;
    Ok(crate::reply::OK)
}

fn watch(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    if ctx.session.queued.is_some() {
        return Err(Reply::err("WATCH inside MULTI is not allowed"));
    }
    Err(Reply::err("WATCH is not supported by strata serve (MULTI/EXEC is, and runs isolated)"))
}

/// Nothing is ever watched.
fn unwatch(_ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    Ok(crate::reply::OK)
}

fn unknown_command(args: &[Vec<u8>]) -> Reply {
    let shown: String =
        args[1..].iter().take(20).map(|a| format!("'{}' ", String::from_utf8_lossy(a))).collect();
    Reply::err(format!(
        "unknown command '{}', with args beginning with: {shown}",
        String::from_utf8_lossy(&args[0])
    ))
}

/// The argument as an `i64`, or Redis's error for one that is not.
pub fn int_arg(arg: &[u8]) -> Result<i64, Reply> {
    parse_int(arg).ok_or_else(|| Reply::err("value is not an integer or out of range"))
}

/// A decimal `i64` exactly as Redis reads one: no spaces, no `+`, no leading zeros.
pub fn parse_int(text: &[u8]) -> Option<i64> {
    let negative = text.first() == Some(&b'-');
    let digits = if negative { &text[1..] } else { text };
    let plain = !digits.is_empty() && digits.iter().all(u8::is_ascii_digit);
    if !plain || (digits.len() > 1 && digits[0] == b'0') || (negative && digits == b"0") {
        return None;
    }
    std::str::from_utf8(text).ok()?.parse().ok()
}

pub fn float_arg(arg: &[u8]) -> Result<f64, Reply> {
    parse_float(arg).ok_or_else(|| Reply::err("value is not a valid float"))
}

/// A finite double, without surrounding spaces (Redis refuses `" 1"` and `"nan"`).
pub fn parse_float(text: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(text).ok()?;
    if s.is_empty() || s.trim() != s {
        return None;
    }
    let x: f64 = s.parse().ok()?;
    (!x.is_nan()).then_some(x)
}

pub fn syntax_error() -> Reply {
    Reply::err("syntax error")
}

pub fn wrong_type() -> Reply {
    Reply::error("WRONGTYPE Operation against a key holding the wrong kind of value")
}

impl From<strata::Error> for Reply {
    fn from(e: strata::Error) -> Reply {
        Reply::err(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_parse_only_in_redis_canonical_form() {
        assert_eq!(parse_int(b"42"), Some(42));
        assert_eq!(parse_int(b"-7"), Some(-7));
        assert_eq!(parse_int(b"0"), Some(0));
        for bad in [&b""[..], b" 1", b"1 ", b"+1", b"01", b"-0", b"1.0", b"9223372036854775808", b"-"] {
            assert_eq!(parse_int(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(parse_int(b"-9223372036854775808"), Some(i64::MIN));
    }

    #[test]
    fn every_command_name_is_unique_and_lower_case() {
        let mut names: Vec<&str> = COMMANDS.iter().map(|s| s.name).collect();
        assert!(names.iter().all(|n| *n == n.to_ascii_lowercase()));
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len());
        assert!(COMMANDS
            .iter()
            .all(|s| find(s.name.to_uppercase().as_bytes()).is_some_and(|f| f.name == s.name)));
    }
}
