//! `strata serve`: a Redis-protocol (RESP2/RESP3) server over any Strata engine, through the
//! facade's public API only. docs/server.md says what it supports and how it differs from Redis.
//!
//! ```no_run
//! use strata::{Db, EngineKind, Options};
//! use strata_server::{ServeConfig, Server};
//! # fn main() -> strata::Result<()> {
//! let db = Db::open("/tmp/strata-served", Options::new(EngineKind::Memory))?;
//! let server = Server::bind(db, ServeConfig::default())?; // 127.0.0.1:6379
//! println!("listening on {}", server.local_addr());
//! server.run()?; // until SHUTDOWN, SIGTERM or SIGINT; then flushes and closes the store
//! # Ok(()) }
//! ```

mod cmd_hash;
mod cmd_keys;
mod cmd_lcs;
mod cmd_list;
mod cmd_server;
mod cmd_set;
mod cmd_strings;
mod cmd_zset;
mod collection;
mod command;
mod conn;
mod expiry;
mod glob;
mod info;
mod key_locks;
pub mod keyspace;
pub mod reply;
pub mod resp;
mod state;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use strata::{Db, Durability, Error, Result};

use crate::keyspace::Keyspace;
use crate::state::{ServerState, Settings};

/// How the server listens and what it allows.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// Address to listen on; loopback by default (set a password before binding elsewhere).
    pub bind: String,
    /// 0 picks a free port (tests).
    pub port: u16,
    /// Every command but AUTH, HELLO and QUIT is refused until the client authenticates.
    pub requirepass: Option<Vec<u8>>,
    /// Durability of every write the server makes (the store's `Durability`).
    pub durability: Durability,
    pub maxclients: u64,
    /// Close clients idle this many seconds (0: never).
    pub timeout_secs: u64,
    /// Largest single argument of a request.
    pub proto_max_bulk_len: u64,
    /// Largest request, its arguments together (Redis's client-query-buffer-limit).
    pub max_request_bytes: u64,
    /// Threads that run clients' commands; 0: one fewer than the cores, at least one
    /// ([`default_worker_threads`]).
    pub worker_threads: usize,
}

/// One worker per core but one, at least one: the spare core runs the clients on the same
/// machine, the engine's background work (flushes, compaction, the expiry sweep) and the OS's
/// network stack. Workers beyond the cores the server can use only contend in the engine's
/// write path (docs/benchmarks.md, "One worker per core but one").
pub fn default_worker_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    cores.saturating_sub(1).max(1)
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            bind: "127.0.0.1".into(),
            port: 6379,
            requirepass: None,
            durability: Durability::Buffered,
            maxclients: 10_000,
            timeout_secs: 0,
            proto_max_bulk_len: 512 * 1024 * 1024,
            max_request_bytes: 1024 * 1024 * 1024,
            worker_threads: 0,
        }
    }
}

/// A bound server: `run` serves until shutdown.
pub struct Server {
    runtime: tokio::runtime::Runtime,
    listener: tokio::net::TcpListener,
    state: Arc<ServerState>,
}

/// Asks a running server to stop, from any thread (what SHUTDOWN and SIGTERM do).
#[derive(Clone)]
pub struct ShutdownHandle(Arc<ServerState>);

impl ShutdownHandle {
    pub fn shutdown(&self) {
        self.0.request_shutdown();
    }
}

impl Server {
    /// Takes over `db` and binds the listening socket (an address in use is an error here, not
    /// in `run`).
    pub fn bind(db: Db, config: ServeConfig) -> Result<Server> {
        let workers = match config.worker_threads {
            0 => default_worker_threads(),
            n => n,
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .thread_name("strata-serve")
            .build()
            .map_err(|e| Error::io("starting the server's runtime", e))?;
        let address = format!("{}:{}", config.bind, config.port);
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind(&address))
            .map_err(|e| Error::io(format!("listening on {address}"), e))?;
        let port = listener.local_addr().map_err(|e| Error::io("reading the bound address", e))?.port();
        let settings = Settings {
            requirepass: config.requirepass,
            maxclients: config.maxclients.max(1),
            timeout_secs: config.timeout_secs,
            proto_max_bulk_len: config.proto_max_bulk_len,
            max_request_bytes: config.max_request_bytes,
            ignored: Default::default(),
        };
        let keyspace = Keyspace::new(db, config.durability)?;
        Ok(Server { runtime, listener, state: Arc::new(ServerState::new(keyspace, settings, port)) })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().expect("a bound listener has an address")
    }

    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle(self.state.clone())
    }

    /// Serves until SHUTDOWN, SIGTERM, SIGINT or a `ShutdownHandle`; then waits for the clients'
    /// current requests, flushes and closes the store. Its error is the close's.
    pub fn run(self) -> Result<()> {
        let Server { runtime, listener, state } = self;
        let sweeper = {
            let state = state.clone();
            std::thread::Builder::new()
                .name("strata-expiry".into())
                .spawn(move || expiry::run_sweeper(&state))
                .map_err(|e| Error::io("starting the expiry sweeper", e))?
        };
        runtime.block_on(accept_until_shutdown(listener, state.clone()));
        // Clients see the shutdown at their next read; give their current pipelines time to end.
        runtime.shutdown_timeout(Duration::from_secs(5));
        let _ = sweeper.join();
        state.keyspace.db().close()
    }
}

async fn accept_until_shutdown(listener: tokio::net::TcpListener, state: Arc<ServerState>) {
    let signals = tokio::spawn(shutdown_on_signal(state.clone()));
    let mut shutdown = state.shutdown_signal();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.wait_for(|stopping| *stopping) => break,
        };
        let Ok((stream, _)) = accepted else { continue };
        state.counters.connections_received.fetch_add(1, Ordering::Relaxed);
        let connected = state.counters.connected_clients.fetch_add(1, Ordering::Relaxed);
        if connected >= state.settings.read().maxclients {
            state.counters.connected_clients.fetch_sub(1, Ordering::Relaxed);
            state.counters.rejected_connections.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(refuse(stream));
            continue;
        }
        tokio::spawn(conn::serve_client(stream, state.clone()));
    }
    signals.abort();
}

async fn refuse(mut stream: tokio::net::TcpStream) {
    use tokio::io::AsyncWriteExt;
    let _ = stream.write_all(b"-ERR max number of clients reached\r\n").await;
}

async fn shutdown_on_signal(state: Arc<ServerState>) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
    else {
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    state.request_shutdown();
}

/// For the fuzz target `server_requests` (fuzz/): bytes from a client, run as a connection runs
/// them against `db`; the reply bytes.
#[doc(hidden)]
pub mod fuzzing {
    use strata::{Db, Durability, Result};

    use crate::keyspace::{now_ms, Keyspace};
    use crate::state::{ServerState, Settings};

    pub fn serve_bytes(db: Db, input: &[u8]) -> Result<Vec<u8>> {
        let settings = Settings {
            requirepass: None,
            maxclients: 1,
            timeout_secs: 0,
            proto_max_bulk_len: 1 << 20,
            max_request_bytes: 4 << 20,
            ignored: Default::default(),
        };
        let state = ServerState::new(Keyspace::new(db, Durability::None)?, settings, 0);
        // Blocking pops see a shutting-down server and return at once.
        state.request_shutdown();
        let mut conn = crate::conn::Connection::new(state.new_session("fuzz".into()));
        conn.input = input.to_vec();
        conn.run_requests(&state);
        // Everything set to expire is due a day from now: the sweep deletes it.
        crate::expiry::sweep_once(&state, now_ms() + 86_400_000)?;
        state.keyspace.db().close()?;
        Ok(conn.output)
    }
}
