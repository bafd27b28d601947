//! `strata serve`: the Redis-protocol server (crate `strata-server`) over a store directory.

use std::io::Write;
use std::path::PathBuf;

use strata::{Db, Durability, EngineKind, Error, Options};
use strata_server::{ServeConfig, Server};

#[derive(clap::Args)]
pub struct ServeArgs {
    /// The store's directory; created when `--engine` is given and it holds no store.
    dir: PathBuf,
    /// Engine for a new store: memory, treeline, turtle, laser, flex or f2 (an existing store's
    /// manifest names its own; a different one here is an error).
    #[arg(long)]
    engine: Option<EngineKind>,
    /// Address to listen on. Loopback by default: set --requirepass before listening elsewhere.
    #[arg(long, default_value = "127.0.0.1")]
    bind: String,
    #[arg(long, default_value_t = 6379)]
    port: u16,
    /// Clients must AUTH with this password first (visible to `ps`: prefer CONFIG SET
    /// requirepass from a trusted client on shared machines).
    #[arg(long)]
    requirepass: Option<String>,
    /// When a write is acknowledged: `sync` (on disk: survives power loss), `buffered` (handed to
    /// the OS: survives the server's crash) or `none` (may wait in memory until the next flush).
    #[arg(long, default_value = "buffered", value_parser = durability)]
    durability: Durability,
    /// The store's memory budget, e.g. 256MiB (the engine's default when absent).
    #[arg(long, value_parser = bytes)]
    memory_budget: Option<u64>,
    #[arg(long, default_value_t = 10_000)]
    maxclients: u64,
    /// Close clients idle this many seconds (0: never).
    #[arg(long, default_value_t = 0)]
    timeout: u64,
    /// Largest single argument of a request.
    #[arg(long, default_value = "512MiB", value_parser = bytes)]
    proto_max_bulk_len: u64,
    /// Largest request, its arguments together (Redis's client-query-buffer-limit).
    #[arg(long, default_value = "1GiB", value_parser = bytes)]
    max_request_bytes: u64,
    /// Threads that run clients' commands (0: one fewer than the cores, at least one).
    #[arg(long, default_value_t = 0)]
    threads: usize,
}

fn durability(text: &str) -> Result<Durability, String> {
    match text {
        "sync" => Ok(Durability::Sync),
        "buffered" => Ok(Durability::Buffered),
        "none" => Ok(Durability::None),
        _ => Err(format!("expected sync, buffered or none, got {text:?}")),
    }
}

fn bytes(text: &str) -> Result<u64, String> {
    strata::parse_bytes(text).ok_or_else(|| format!("expected a size like 64MiB, got {text:?}"))
}

/// Opens (or creates) the store, serves until SHUTDOWN / SIGTERM / SIGINT, then closes it.
pub fn run(args: ServeArgs, knobs: &[(String, String)]) -> Result<(), Error> {
    let mut options = match args.engine {
        Some(kind) => Options::new(kind),
        None => Options::existing(),
    };
    if let Some(budget) = args.memory_budget {
        options = options.memory_budget_bytes(budget);
    }
    let options = knobs.iter().fold(options, |o, (n, v)| o.engine_option(n, v));
    let db = Db::open(&args.dir, options)?;
    let kind = db.kind();
    let config = ServeConfig {
        bind: args.bind,
        port: args.port,
        requirepass: args.requirepass.map(String::into_bytes),
        durability: args.durability,
        maxclients: args.maxclients,
        timeout_secs: args.timeout,
        proto_max_bulk_len: args.proto_max_bulk_len,
        max_request_bytes: args.max_request_bytes,
        worker_threads: args.threads,
    };
    let durability = config.durability;
    let server = Server::bind(db, config)?;
    // Not eprintln!: a closed stderr (a supervisor that stopped reading) must not stop the server.
    let _ = writeln!(
        std::io::stderr(),
        "strata serve: '{kind}' store {} on {} (durability {durability:?}); SHUTDOWN or SIGTERM stops it",
        args.dir.display(),
        server.local_addr()
    );
    server.run()?;
    let _ = writeln!(std::io::stderr(), "strata serve: stopped; the store is flushed and closed");
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn durability_names_parse_and_others_are_refused() {
        assert_eq!(super::durability("sync"), Ok(strata::Durability::Sync));
        assert!(super::durability("always").is_err());
    }
}
