//! Connection and server commands: PING, ECHO, HELLO, AUTH, SELECT, QUIT, INFO, CONFIG, CLIENT,
//! COMMAND, SHUTDOWN, SAVE, TIME, FUNCTION FLUSH.

use std::sync::atomic::Ordering;

use crate::command::{int_arg, syntax_error, CmdResult, Ctx, COMMANDS};
use crate::glob;
use crate::info;
use crate::reply::{Reply, OK};
use crate::state::{Settings, IGNORED_SETTINGS};

pub fn ping(_ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    match &args[1..] {
        [] => Ok(Reply::Simple("PONG")),
        [message] => Ok(Reply::Bulk(message.clone())),
        _ => Err(Reply::err("wrong number of arguments for 'ping' command")),
    }
}

pub fn echo(_ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Bulk(args[1].clone()))
}

pub fn select(_ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    match int_arg(&args[1])? {
        0 => Ok(OK),
        _ => Err(Reply::err("DB index is out of range")),
    }
}

pub fn quit(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    ctx.session.close_after_reply = true;
    Ok(OK)
}

/// Compares without an early exit, so the time taken does not tell how much of a guess matched.
fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    let folded = given.iter().zip(expected).fold(0u8, |acc, (a, b)| acc | (a ^ b));
    folded == 0 && given.len() == expected.len()
}

/// Checks `password` (for user `default`, the only user) and marks the session authenticated.
fn authenticate(ctx: &mut Ctx, user: Option<&[u8]>, password: &[u8]) -> Result<(), Reply> {
    let Some(expected) = ctx.server.settings.read().requirepass.clone() else {
        return Err(Reply::err(
            "AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
        ));
    };
    let user_ok = user.is_none_or(|u| u == b"default");
    if !(user_ok && same_secret(password, &expected)) {
        return Err(Reply::error("WRONGPASS invalid username-password pair or user is disabled."));
    }
    ctx.session.authenticated = true;
    Ok(())
}

pub fn auth(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    match &args[1..] {
        [password] => authenticate(ctx, None, password)?,
        [user, password] => authenticate(ctx, Some(user), password)?,
        _ => return Err(syntax_error()),
    }
    Ok(OK)
}

/// HELLO [protover [AUTH user pass] [SETNAME name]]
pub fn hello(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let mut resp = ctx.session.resp;
    if let Some(version) = args.get(1) {
        resp = match int_arg(version) {
            Ok(v @ 2..=3) => v as u8,
            Ok(_) => return Err(Reply::error("NOPROTO unsupported protocol version")),
            Err(e) => return Err(e),
        };
    }
    let mut i = 2;
    let mut name = None;
    while i < args.len() {
        match args[i].to_ascii_lowercase().as_slice() {
            b"auth" if i + 2 < args.len() => {
                authenticate(ctx, Some(&args[i + 1]), &args[i + 2])?;
                i += 3;
            }
            b"setname" if i + 1 < args.len() => {
                name = Some(valid_client_name(&args[i + 1])?);
                i += 2;
            }
            _ => return Err(syntax_error()),
        }
    }
    if !ctx.session.authenticated {
        return Err(Reply::error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"));
    }
    ctx.session.resp = resp;
    if name.is_some() {
        ctx.session.name = name;
    }
    let field = |k: &str, v: Reply| (Reply::bulk(k), v);
    Ok(Reply::Map(vec![
        field("server", Reply::bulk("strata")),
        field("version", Reply::bulk(env!("CARGO_PKG_VERSION"))),
        field("proto", Reply::Int(i64::from(resp))),
        field("id", Reply::Int(ctx.session.id as i64)),
        field("mode", Reply::bulk("standalone")),
        field("role", Reply::bulk("master")),
        field("modules", Reply::Array(Vec::new())),
    ]))
}

fn valid_client_name(name: &[u8]) -> Result<Vec<u8>, Reply> {
    if name.iter().any(|&b| !(b'!'..=b'~').contains(&b)) {
        return Err(Reply::err("Client names cannot contain spaces, newlines or special characters."));
    }
    Ok(name.to_vec())
}

pub fn client(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    match (sub.as_str(), &args[2..]) {
        ("id", []) => Ok(Reply::Int(ctx.session.id as i64)),
        ("getname", []) => Ok(Reply::optional(ctx.session.name.clone())),
        ("setname", [name]) => {
            let name = valid_client_name(name)?;
            ctx.session.name = (!name.is_empty()).then_some(name);
            Ok(OK)
        }
        // Client libraries announce themselves (redis-py, Jedis); nothing to keep.
        ("setinfo", [_, _]) | ("no-evict", [_]) | ("no-touch", [_]) => Ok(OK),
        ("info", []) | ("list", _) => Ok(Reply::bulk(client_line(ctx))),
        _ => Err(Reply::err(format!(
            "unknown subcommand or wrong number of arguments for '{sub}'. Try CLIENT HELP."
        ))),
    }
}

fn client_line(ctx: &Ctx) -> String {
    let name = ctx.session.name.as_deref().map(String::from_utf8_lossy).unwrap_or_default();
    format!("id={} addr={} name={} db=0 resp={}\n", ctx.session.id, ctx.session.peer, name, ctx.session.resp)
}

pub fn info(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let sections: Vec<String> =
        args[1..].iter().map(|a| String::from_utf8_lossy(a).to_ascii_lowercase()).collect();
    Ok(Reply::bulk(info::render(ctx.server, &sections)?))
}

/// The settings CONFIG GET knows, as (name, value) text.
fn config_values(settings: &Settings, ctx: &Ctx) -> Vec<(&'static str, String)> {
    let durability = format!("{:?}", ctx.ks().durability()).to_ascii_lowercase();
    vec![
        (
            "requirepass",
            settings.requirepass.as_deref().map(String::from_utf8_lossy).unwrap_or_default().into_owned(),
        ),
        ("maxclients", settings.maxclients.to_string()),
        ("timeout", settings.timeout_secs.to_string()),
        ("proto-max-bulk-len", settings.proto_max_bulk_len.to_string()),
        ("client-query-buffer-limit", settings.max_request_bytes.to_string()),
        ("port", ctx.server.port.to_string()),
        ("databases", "1".into()),
        // Persistence is the engine's: there are no snapshots to schedule, and the WAL is always on.
        ("save", String::new()),
        ("appendonly", "yes".into()),
        ("appendfsync", if durability == "sync" { "always".into() } else { "no".into() }),
        ("strata-engine", ctx.ks().db().kind().to_string()),
        ("strata-durability", durability),
    ]
}

pub fn config(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    match sub.as_str() {
        "get" if args.len() >= 3 => {
            let settings = ctx.server.settings.read().clone();
            let mut pairs = Vec::new();
            let ignored = settings.ignored.iter().map(|(n, v)| (n.clone(), v.clone()));
            let known =
                config_values(&settings, ctx).into_iter().map(|(n, v)| (n.to_string(), v.into_bytes()));
            for (name, value) in known.filter(|(n, _)| !settings.ignored.contains_key(n)).chain(ignored) {
                if args[2..].iter().any(|p| glob::matches(&p.to_ascii_lowercase(), name.as_bytes())) {
                    pairs.push((Reply::bulk(name), Reply::bulk(value)));
                }
            }
            Ok(Reply::Map(pairs))
        }
        "set" if args.len() >= 4 && args.len().is_multiple_of(2) => config_set(ctx, &args[2..]),
        "resetstat" if args.len() == 2 => {
            let c = &ctx.server.counters;
            for counter in [
                &c.commands_processed,
                &c.expired_keys,
                &c.keyspace_hits,
                &c.keyspace_misses,
                &c.connections_received,
                &c.rejected_connections,
            ] {
                counter.store(0, Ordering::Relaxed);
            }
            Ok(OK)
        }
        "rewrite" => Err(Reply::err("The server is running without a config file")),
        _ => Err(Reply::err(format!(
            "unknown subcommand or wrong number of arguments for '{sub}'. Try CONFIG HELP."
        ))),
    }
}

/// CONFIG SET name value [name value ...]: all or none applied.
fn config_set(ctx: &mut Ctx, pairs: &[Vec<u8>]) -> CmdResult {
    let mut settings = ctx.server.settings.read().clone();
    for pair in pairs.chunks(2) {
        let name = String::from_utf8_lossy(&pair[0]).to_ascii_lowercase();
        let number = || -> Result<u64, Reply> {
            let n = int_arg(&pair[1])?;
            u64::try_from(n).map_err(|_| Reply::err(format!("CONFIG SET failed (possibly related to argument '{name}') - argument must be a positive integer")))
        };
        match name.as_str() {
            "requirepass" => settings.requirepass = (!pair[1].is_empty()).then(|| pair[1].clone()),
            "maxclients" => settings.maxclients = number()?.max(1),
            "timeout" => settings.timeout_secs = number()?,
            "proto-max-bulk-len" => settings.proto_max_bulk_len = number()?.max(1024 * 1024),
            "client-query-buffer-limit" => settings.max_request_bytes = number()?.max(1024 * 1024),
            _ if IGNORED_SETTINGS.iter().any(|p| glob::matches(p.as_bytes(), name.as_bytes())) => {
                settings.ignored.insert(name, pair[1].clone());
            }
            _ => {
                return Err(Reply::err(format!(
                    "Unknown option or number of arguments for CONFIG SET - '{name}'"
                )))
            }
        }
    }
    *ctx.server.settings.write() = settings;
    Ok(OK)
}

pub fn command(_ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    let sub = args.get(1).map(|s| String::from_utf8_lossy(s).to_ascii_lowercase());
    let named = |names: &[Vec<u8>]| -> Vec<&'static crate::command::Spec> {
        names.iter().filter_map(|n| crate::command::find(n)).collect()
    };
    match sub.as_deref() {
        None => Ok(Reply::Array(COMMANDS.iter().map(command_info).collect())),
        Some("count") => Ok(Reply::Int(COMMANDS.len() as i64)),
        Some("list") => Ok(Reply::Array(COMMANDS.iter().map(|s| Reply::bulk(s.name)).collect())),
        Some("info") => Ok(Reply::Array(named(&args[2..]).into_iter().map(command_info).collect())),
        // Minimal docs: a known command maps to an empty description.
        Some("docs") => {
            let specs = if args.len() > 2 { named(&args[2..]) } else { COMMANDS.iter().collect() };
            Ok(Reply::Map(specs.into_iter().map(|s| (Reply::bulk(s.name), Reply::Map(Vec::new()))).collect()))
        }
        Some(other) => Err(Reply::err(format!("unknown subcommand '{other}'. Try COMMAND HELP."))),
    }
}

fn command_info(spec: &crate::command::Spec) -> Reply {
    let flag = if spec.writes { "write" } else { "readonly" };
    let first_key = i64::from(!matches!(spec.name, "ping" | "echo" | "hello" | "auth" | "select" | "quit"));
    Reply::Array(vec![
        Reply::bulk(spec.name),
        Reply::Int(i64::from(spec.arity)),
        Reply::Array(vec![Reply::Status(flag.into())]),
        Reply::Int(first_key),
        Reply::Int(first_key),
        Reply::Int(first_key),
    ])
}

/// SHUTDOWN [NOSAVE|SAVE|NOW|FORCE]: makes everything acknowledged durable, then stops the
/// server; like Redis, it closes the connection without a reply when it succeeds.
pub fn shutdown(ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    ctx.ks().db().flush().map_err(|e| Reply::err(format!("Errors trying to SHUTDOWN: {e}")))?;
    ctx.server.request_shutdown();
    ctx.session.close_after_reply = true;
    Ok(Reply::Silent)
}

pub fn save(ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    ctx.ks().db().flush()?;
    Ok(if args[0].eq_ignore_ascii_case(b"bgsave") { Reply::Simple("Background saving started") } else { OK })
}

pub fn time(_ctx: &mut Ctx, _args: &[Vec<u8>]) -> CmdResult {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    Ok(Reply::Array(vec![
        Reply::bulk(now.as_secs().to_string()),
        Reply::bulk(now.subsec_micros().to_string()),
    ]))
}

/// There are no functions; FUNCTION FLUSH (which test suites send first) has nothing to do.
pub fn function(_ctx: &mut Ctx, args: &[Vec<u8>]) -> CmdResult {
    if args[1].eq_ignore_ascii_case(b"flush") && args.len() <= 3 {
        return Ok(OK);
    }
    Err(Reply::err("functions and scripts are not supported by strata serve"))
}
