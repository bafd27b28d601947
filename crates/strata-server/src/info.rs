//! INFO's text: `# Section` headers and `name:value` lines, as Redis prints them.

use std::fmt::Write;
use std::sync::atomic::Ordering;

use crate::keyspace::now_ms;
use crate::state::ServerState;

/// Sections in print order; the last ones are printed only when asked for, or for `all` and
/// `everything` (as Redis does with commandstats).
const SECTIONS: [&str; 10] = [
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "keyspace",
    "engine",
    "commandstats",
];
const DEFAULT_SECTIONS: usize = 9;

/// The sections asked for (none or `default`: the default ones; `all` or `everything`: every one).
pub fn render(server: &ServerState, asked: &[String]) -> strata::Result<String> {
    let every = asked.iter().any(|s| matches!(s.as_str(), "all" | "everything"));
    let default = asked.is_empty() || asked.iter().any(|s| s == "default");
    let mut out = String::new();
    for (i, section) in SECTIONS.into_iter().enumerate() {
        if every || (default && i < DEFAULT_SECTIONS) || asked.iter().any(|s| s == section) {
            if !out.is_empty() {
                out.push_str("\r\n");
            }
            render_section(server, section, &mut out)?;
        }
    }
    Ok(out)
}

fn render_section(server: &ServerState, section: &str, out: &mut String) -> strata::Result<()> {
    let title = match section {
        "cpu" => "CPU".to_string(),
        other => other[..1].to_ascii_uppercase() + &other[1..],
    };
    let _ = write!(out, "# {title}\r\n");
    let c = &server.counters;
    let line = |out: &mut String, name: &str, value: &dyn std::fmt::Display| {
        let _ = write!(out, "{name}:{value}\r\n");
    };
    let db = server.keyspace.db();
    match section {
        "server" => {
            line(out, "redis_version", &"7.0.0");
            line(out, "redis_git_sha1", &"00000000");
            line(out, "redis_git_dirty", &0);
            line(out, "strata_version", &env!("CARGO_PKG_VERSION"));
            line(out, "strata_engine", &db.kind());
            line(out, "redis_mode", &"standalone");
            line(out, "process_id", &std::process::id());
            line(out, "tcp_port", &server.port);
            line(out, "uptime_in_seconds", &server.started.elapsed().as_secs());
        }
        "clients" => {
            line(out, "connected_clients", &c.connected_clients.load(Ordering::Relaxed));
            line(out, "maxclients", &server.settings.read().maxclients);
        }
        "stats" => {
            line(out, "total_connections_received", &c.connections_received.load(Ordering::Relaxed));
            line(out, "total_commands_processed", &c.commands_processed.load(Ordering::Relaxed));
            line(out, "rejected_connections", &c.rejected_connections.load(Ordering::Relaxed));
            line(out, "expired_keys", &c.expired_keys.load(Ordering::Relaxed));
            line(out, "keyspace_hits", &c.keyspace_hits.load(Ordering::Relaxed));
            line(out, "keyspace_misses", &c.keyspace_misses.load(Ordering::Relaxed));
        }
        "persistence" => {
            let durability = format!("{:?}", server.keyspace.durability()).to_ascii_lowercase();
            line(out, "loading", &0);
            line(out, "strata_durability", &durability);
        }
        "memory" => {
            line(out, "used_memory", &db.stats()?.memory_bytes);
            line(out, "used_memory_rss", &resident_bytes());
            line(out, "mem_allocator", &"libc");
        }
        // No replication: a primary with no replicas.
        "replication" => {
            line(out, "role", &"master");
            line(out, "connected_slaves", &0);
            line(out, "master_repl_offset", &0);
        }
        "cpu" => {
            let (user, system) = cpu_seconds();
            line(out, "used_cpu_sys", &format!("{system:.6}"));
            line(out, "used_cpu_user", &format!("{user:.6}"));
        }
        "keyspace" => keyspace_line(server, out)?,
        "commandstats" => command_lines(server, out),
        _ => engine_lines(server, out)?,
    }
    Ok(())
}

/// `db0:keys=N,expires=M,avg_ttl=0`, counted by a scan of the key records (ordered engines; an
/// unordered one reports the engine's own key count).
fn keyspace_line(server: &ServerState, out: &mut String) -> strata::Result<()> {
    let db = server.keyspace.db();
    let (mut keys, mut expires) = (0u64, 0u64);
    if server.keyspace.ordered() {
        server.keyspace.each_live_key(b"", false, now_ms(), |_, entry| {
            keys += 1;
            expires += u64::from(entry.expire_at_ms() != 0);
            true
        })?;
    } else {
        keys = db.stats()?.live_keys.unwrap_or(0).saturating_sub(1);
    }
    if keys > 0 {
        let _ = write!(out, "db0:keys={keys},expires={expires},avg_ttl=0\r\n");
    }
    Ok(())
}

/// The engine's own `Stats`: its counters under `strata_` names.
fn engine_lines(server: &ServerState, out: &mut String) -> strata::Result<()> {
    let stats = server.keyspace.db().stats()?;
    let _ = write!(out, "strata_memory_bytes:{}\r\n", stats.memory_bytes);
    let _ = write!(out, "strata_disk_bytes:{}\r\n", stats.disk_bytes);
    let _ = write!(out, "strata_user_bytes_written:{}\r\n", stats.user_bytes_written);
    let _ = write!(out, "strata_user_bytes_read:{}\r\n", stats.user_bytes_read);
    let _ = write!(out, "strata_device_bytes_written:{}\r\n", stats.io.bytes_written);
    let _ = write!(out, "strata_device_bytes_read:{}\r\n", stats.io.bytes_read);
    for (name, value) in &stats.engine_counters {
        let name: String = name.chars().map(|ch| if ch.is_ascii_alphanumeric() { ch } else { '_' }).collect();
        let _ = write!(out, "strata_{name}:{value}\r\n");
    }
    for notice in &stats.notices {
        let _ = write!(out, "strata_notice:{}\r\n", notice.replace(['\r', '\n'], " "));
    }
    Ok(())
}

/// `cmdstat_<name>:calls=..,usec=..,usec_per_call=..,rejected_calls=..,failed_calls=..` for
/// every command called or refused at least once.
fn command_lines(server: &ServerState, out: &mut String) {
    for (spec, stats) in crate::command::COMMANDS.iter().zip(&server.command_stats) {
        let calls = stats.calls.load(Ordering::Relaxed);
        let rejected = stats.rejected_calls.load(Ordering::Relaxed);
        if calls == 0 && rejected == 0 {
            continue;
        }
        let usec = stats.usec.load(Ordering::Relaxed);
        let per_call = if calls == 0 { 0.0 } else { usec as f64 / calls as f64 };
        let failed = stats.failed_calls.load(Ordering::Relaxed);
        let _ = write!(
            out,
            "cmdstat_{}:calls={calls},usec={usec},usec_per_call={per_call:.2},rejected_calls={rejected},failed_calls={failed}\r\n",
            spec.name
        );
    }
}

/// The process's resident set (bytes), from /proc; 0 where it cannot be read.
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    pages * 4096
}

/// User and system CPU seconds of the process, from /proc/self/stat (clock ticks of 1/100 s).
fn cpu_seconds() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0) / 100.0;
    (ticks(11), ticks(12))
}
