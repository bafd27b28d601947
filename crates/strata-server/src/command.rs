//! The command table and dispatch: arity, authentication and the unknown-command reply, as Redis
//! words them; each command's work is in the `cmd_*` modules.

use crate::reply::Reply;
use crate::state::{ServerState, Session};
use crate::{cmd_hash, cmd_keys, cmd_server, cmd_strings};

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
    // Keys.
    spec("del", -2, true, cmd_keys::del),
    spec("unlink", -2, true, cmd_keys::del),
    spec("exists", -2, false, cmd_keys::exists),
    spec("type", 2, false, cmd_keys::type_of),
    spec("rename", 3, true, cmd_keys::rename),
    spec("renamenx", 3, true, cmd_keys::renamenx),
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
];

pub fn find(name: &[u8]) -> Option<&'static Spec> {
    let name = std::str::from_utf8(name).ok()?;
    COMMANDS.iter().find(|s| s.name.eq_ignore_ascii_case(name))
}

/// Runs one request. `args` is never empty (the parser skips empty requests).
pub fn execute(server: &ServerState, session: &mut Session, args: &[Vec<u8>]) -> Reply {
    server.counters.commands_processed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let Some(spec) = find(&args[0]) else {
        return unknown_command(args);
    };
    let arity_ok = if spec.arity >= 0 {
        args.len() == spec.arity as usize
    } else {
        args.len() >= (-spec.arity) as usize
    };
    if !arity_ok {
        return Reply::err(format!("wrong number of arguments for '{}' command", spec.name));
    }
    if !session.authenticated && !matches!(spec.name, "auth" | "hello" | "quit") {
        return Reply::error("NOAUTH Authentication required.");
    }
    let mut ctx = Ctx { server, session };
    match (spec.handler)(&mut ctx, args) {
        Ok(reply) | Err(reply) => reply,
    }
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
    }
}
