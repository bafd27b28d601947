//! What the server shares between connections (settings, counters, SCAN cursors) and what each
//! connection keeps for itself.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use parking_lot::{Mutex, RwLock};

use crate::keyspace::Keyspace;

/// Settings `CONFIG GET`/`CONFIG SET` read and change while the server runs.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `None`: no password; every client is authenticated.
    pub requirepass: Option<Vec<u8>>,
    pub maxclients: u64,
    /// Close a client idle this long; 0 never.
    pub timeout_secs: u64,
    /// Largest single argument a request may carry.
    pub proto_max_bulk_len: u64,
    /// Largest request, its arguments together.
    pub max_request_bytes: u64,
    /// Redis tuning settings that have no meaning here (value encodings, lazy freeing, snapshot
    /// schedules), accepted and remembered so that scripts and test suites which set them run:
    /// `IGNORED_SETTINGS` lists them.
    pub ignored: std::collections::BTreeMap<String, Vec<u8>>,
}

/// Patterns of the Redis settings CONFIG SET accepts and ignores (docs/server.md).
pub const IGNORED_SETTINGS: [&str; 12] = [
    "*-max-listpack-*",
    "*-max-ziplist-*",
    "*-max-intset-entries",
    "list-compress-depth",
    "lazyfree-*",
    "hz",
    "dynamic-hz",
    "activedefrag",
    "save",
    "appendonly",
    "appendfsync",
    "latency-tracking",
];

#[derive(Default, Debug)]
pub struct Counters {
    pub connections_received: AtomicU64,
    pub connected_clients: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub commands_processed: AtomicU64,
    pub expired_keys: AtomicU64,
    pub keyspace_hits: AtomicU64,
    pub keyspace_misses: AtomicU64,
}

impl Counters {
    pub fn hit_or_miss(&self, hit: bool) {
        let counter = if hit { &self.keyspace_hits } else { &self.keyspace_misses };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// INFO commandstats' figures for one command.
#[derive(Default, Debug)]
pub struct CommandStats {
    pub calls: AtomicU64,
    pub usec: AtomicU64,
    /// Refused before running (arity, authentication).
    pub rejected_calls: AtomicU64,
    /// Ran and answered with an error.
    pub failed_calls: AtomicU64,
}

/// The most SCAN cursors remembered at once; the oldest is forgotten first.
const MAX_SCAN_CURSORS: usize = 16 * 1024;

/// SCAN's cursors. Redis's cursor is a position in its hash table; ours names the last key a
/// scan returned, so keys present for the whole scan are returned exactly once whatever is
/// written in between.
#[derive(Default)]
pub struct ScanCursors {
    next_id: u64,
    open: VecDeque<(u64, Vec<u8>)>,
}

impl ScanCursors {
    pub fn remember(&mut self, last_key: Vec<u8>) -> u64 {
        self.next_id += 1;
        if self.open.len() == MAX_SCAN_CURSORS {
            self.open.pop_front();
        }
        self.open.push_back((self.next_id, last_key));
        self.next_id
    }

    /// The key after which cursor `id` resumes, or `None` for a cursor this server never gave
    /// (or has forgotten). A cursor may be resumed again (a client retrying a call).
    pub fn resume(&self, id: u64) -> Option<Vec<u8>> {
        self.open.iter().find(|(i, _)| *i == id).map(|(_, key)| key.clone())
    }
}

pub struct ServerState {
    pub keyspace: Keyspace,
    pub settings: RwLock<Settings>,
    pub counters: Counters,
    pub cursors: Mutex<ScanCursors>,
    /// Indexed like `command::COMMANDS`.
    pub command_stats: Vec<CommandStats>,
    pub started: Instant,
    pub port: u16,
    next_client_id: AtomicU64,
    /// Wakes the clients blocked in BLPOP/BRPOP when a list grows.
    pub list_pushes: ListPushes,
    /// Set by SHUTDOWN or a signal: the accept loop and every connection stop.
    shutting_down: AtomicBool,
    shutdown: tokio::sync::watch::Sender<bool>,
}

impl ServerState {
    pub fn new(keyspace: Keyspace, settings: Settings, port: u16) -> ServerState {
        ServerState {
            keyspace,
            settings: RwLock::new(settings),
            counters: Counters::default(),
            cursors: Mutex::new(ScanCursors::default()),
            command_stats: crate::command::COMMANDS.iter().map(|_| CommandStats::default()).collect(),
            started: Instant::now(),
            port,
            next_client_id: AtomicU64::new(1),
            list_pushes: ListPushes::default(),
            shutting_down: AtomicBool::new(false),
            shutdown: tokio::sync::watch::Sender::new(false),
        }
    }

    pub fn new_session(&self, peer: String) -> Session {
        let authenticated = self.settings.read().requirepass.is_none();
        Session {
            id: self.next_client_id.fetch_add(1, Ordering::Relaxed),
            peer,
            name: None,
            resp: 2,
            authenticated,
            close_after_reply: false,
            queued: None,
            queue_failed: false,
            in_exec: false,
            blocked: None,
        }
    }

    pub fn request_shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        self.shutdown.send_replace(true);
    }

    /// Resolves (`changed()`) when shutdown is requested, also if it already was.
    pub fn shutdown_signal(&self) -> tokio::sync::watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }
}

/// One client connection's state.
#[derive(Debug)]
pub struct Session {
    pub id: u64,
    pub peer: String,
    pub name: Option<Vec<u8>>,
    /// Protocol version: 2 until `HELLO 3`.
    pub resp: u8,
    pub authenticated: bool,
    /// Close the connection once the current reply is written (QUIT, a protocol error).
    pub close_after_reply: bool,
    /// Inside MULTI: the commands queued for EXEC.
    pub queued: Option<Vec<Vec<Vec<u8>>>>,
    /// A command queued since MULTI was refused: EXEC discards the transaction.
    pub queue_failed: bool,
    /// EXEC is running the queue (blocking commands do not wait).
    pub in_exec: bool,
    /// Waiting in BLPOP/BRPOP: the connection runs nothing else until the pop is served or times
    /// out (later requests of its pipeline wait, as in Redis).
    pub blocked: Option<BlockedPop>,
}

/// A blocking pop that found every list empty.
#[derive(Debug)]
pub struct BlockedPop {
    pub keys: Vec<Vec<u8>>,
    pub from_head: bool,
    /// `None`: wait for ever.
    pub deadline: Option<Instant>,
}

/// Blocked clients and the pushes that wake them. A waiter counts itself in `waiting`, then
/// registers with `notify`, then tries its pop again; a push writes, releases its key lock, then
/// notifies if anyone waits. So a waiter either sees the push's element or is woken by it.
#[derive(Default)]
pub struct ListPushes {
    waiting: AtomicUsize,
    notify: tokio::sync::Notify,
}

impl ListPushes {
    /// After a list grew (with the key's lock released).
    pub fn pushed(&self) {
        if self.waiting.load(Ordering::SeqCst) > 0 {
            self.notify.notify_waiters();
        }
    }

    /// Counts a waiting client until the returned guard drops.
    pub fn wait(&self) -> WaitingClient<'_> {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        WaitingClient(self)
    }

    pub fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.notify.notified()
    }
}

pub struct WaitingClient<'a>(&'a ListPushes);

impl Drop for WaitingClient<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_resume_and_the_oldest_is_forgotten() {
        let mut cursors = ScanCursors::default();
        let first = cursors.remember(b"a".to_vec());
        assert_eq!(cursors.resume(first), Some(b"a".to_vec()));
        assert_eq!(cursors.resume(first + 1), None);
        let ids: Vec<u64> =
            (0..MAX_SCAN_CURSORS).map(|i| cursors.remember(i.to_string().into_bytes())).collect();
        assert_eq!(cursors.resume(first), None, "the oldest is forgotten");
        assert_eq!(cursors.resume(ids[0]), Some(b"0".to_vec()));
    }
}
