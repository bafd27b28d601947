//! INFO's text: `# Section` headers and `name:value` lines, as Redis prints them.

use std::fmt::Write;
use std::sync::atomic::Ordering;

use crate::keyspace::{key_record, now_ms, Entry, KEY_PREFIX};
use crate::state::ServerState;

const SECTIONS: [&str; 6] = ["server", "clients", "stats", "persistence", "keyspace", "engine"];

/// The sections asked for (none, `default`, `all` or `everything`: every one).
pub fn render(server: &ServerState, asked: &[String]) -> strata::Result<String> {
    let all =
        asked.is_empty() || asked.iter().any(|s| matches!(s.as_str(), "all" | "default" | "everything"));
    let mut out = String::new();
    for section in SECTIONS {
        if all || asked.iter().any(|s| s == section) {
            if !out.is_empty() {
                out.push_str("\r\n");
            }
            render_section(server, section, &mut out)?;
        }
    }
    Ok(out)
}

fn render_section(server: &ServerState, section: &str, out: &mut String) -> strata::Result<()> {
    let mut title: Vec<char> = section.chars().collect();
    title[0] = title[0].to_ascii_uppercase();
    let _ = write!(out, "# {}\r\n", title.into_iter().collect::<String>());
    let c = &server.counters;
    let line = |out: &mut String, name: &str, value: &dyn std::fmt::Display| {
        let _ = write!(out, "{name}:{value}\r\n");
    };
    let db = server.keyspace.db();
    match section {
        "server" => {
            line(out, "redis_version", &"7.0.0");
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
        "keyspace" => keyspace_line(server, out)?,
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
        let now = now_ms();
        for item in db.range(key_record(b"")..vec![KEY_PREFIX + 1])? {
            let Some(entry) = Entry::decode(&item?.1) else { continue };
            let at = entry.expire_at_ms();
            if at == 0 || at > now {
                keys += 1;
                expires += u64::from(at != 0);
            }
        }
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
