//! One client connection: read what has arrived, run every complete request in it, write the
//! replies, repeat. Commands run on the runtime's workers (`--threads`), not in blocking
//! sections: more threads in the engine than cores only park and wake each other in its write
//! path, and a hand-off to a blocking thread per pipeline costs more than most commands
//! (docs/benchmarks.md, "`strata serve` against redis-server"). A blocking pop that must wait
//! leaves the worker and waits here as a task.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::TcpStream;

use crate::cmd_list::retry_blocked_pop;
use crate::command::execute;
use crate::keyspace::{with_clock_snapshot, PendingBarrier};
use crate::reply::Reply;
use crate::resp::{ParseLimits, RequestParser};
use crate::state::{ServerState, Session};

/// Bytes asked of the socket per read.
const READ_CHUNK_BYTES: usize = 16 * 1024;

/// Input a blocked client may send ahead of its pop's answer; past it the connection stops
/// reading, so the client's further requests wait in its socket (TCP backpressure), not here.
const BLOCKED_INPUT_BYTES: usize = 4 * READ_CHUNK_BYTES;

/// A blocked pop tries again at least this often, for the ways a list can appear that do not
/// notify (RENAME or COPY onto a waited key).
const BLOCKED_RETRY: Duration = Duration::from_millis(100);

/// Serves one client until it leaves, is idle past `timeout`, breaks the protocol, or the
/// server shuts down.
pub async fn serve_client(stream: TcpStream, state: Arc<ServerState>) {
    let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    let _ = stream.set_nodelay(true);
    let (mut reader, mut writer) = stream.into_split();
    let mut conn = Connection::new(state.new_session(peer));
    let mut shutdown = state.shutdown_signal();
    loop {
        let more_to_run = if conn.session.blocked.is_some() {
            wait_while_blocked(&state, &mut conn, &mut reader).await
        } else {
            conn.input.reserve(READ_CHUNK_BYTES);
            let idle_secs = state.settings.read().timeout_secs;
            let read = reader.read_buf(&mut conn.input);
            let outcome = tokio::select! {
                r = with_idle_limit(read, idle_secs) => r,
                _ = shutdown.wait_for(|stopping| *stopping) => None,
            };
            matches!(outcome, Some(Ok(n)) if n > 0).then_some(true)
        };
        match more_to_run {
            None => break,
            Some(true) => conn.run_requests_together(&state).await,
            Some(false) => {}
        }
        if !conn.output.is_empty() {
            if writer.write_all(&conn.output).await.is_err() {
                break;
            }
            conn.output.clear();
        }
        if conn.session.close_after_reply {
            break;
        }
    }
    let _ = writer.shutdown().await;
    state.counters.connected_clients.fetch_sub(1, Ordering::Relaxed);
}

/// Waits for a push, the pop's deadline, shutdown or more input, then tries the blocked pop
/// again, appending its reply once it has one. `Some(true)`: the pop is answered and the rest
/// of the pipeline may run; `Some(false)`: still blocked; `None`: the client left.
async fn wait_while_blocked(
    state: &ServerState,
    conn: &mut Connection,
    reader: &mut OwnedReadHalf,
) -> Option<bool> {
    let _waiting = state.list_pushes.wait();
    let pushed = state.list_pushes.notified();
    tokio::pin!(pushed);
    pushed.as_mut().enable();
    // A push between the last try and `enable` notified no one: try once more first.
    if answer_blocked_pop(state, conn) {
        return Some(true);
    }
    let deadline = conn.session.blocked.as_ref().and_then(|b| b.deadline);
    let pause =
        deadline.map_or(BLOCKED_RETRY, |d| d.saturating_duration_since(Instant::now()).min(BLOCKED_RETRY));
    let mut shutdown = state.shutdown_signal();
    let room = conn.input.len() < BLOCKED_INPUT_BYTES;
    conn.input.reserve(READ_CHUNK_BYTES);
    tokio::select! {
        _ = pushed => {}
        _ = tokio::time::sleep(pause) => {}
        _ = shutdown.wait_for(|stopping| *stopping) => {}
        // Requests after the pop wait in `input`; an end of input is the client leaving.
        read = reader.read_buf(&mut conn.input), if room => {
            if !matches!(read, Ok(n) if n > 0) {
                return None;
            }
        }
    }
    Some(answer_blocked_pop(state, conn))
}

/// Retries the blocked pop as a pipeline of its own (one durability barrier); true once it
/// answered.
fn answer_blocked_pop(state: &ServerState, conn: &mut Connection) -> bool {
    let session = &mut conn.session;
    let (reply, barrier) = state.keyspace.with_deferred_durability(|| retry_blocked_pop(state, session));
    let Some(reply) = reply else { return false };
    match barrier {
        Ok(()) => reply.encode(session.resp, &mut conn.output),
        Err(e) => {
            Reply::err(format!("the write was not made durable: {e}")).encode(session.resp, &mut conn.output)
        }
    }
    true
}

/// `None` when the client stayed silent for `idle_secs` (0: no limit).
async fn with_idle_limit<F: std::future::Future>(read: F, idle_secs: u64) -> Option<F::Output> {
    if idle_secs == 0 {
        return Some(read.await);
    }
    tokio::time::timeout(Duration::from_secs(idle_secs), read).await.ok()
}

/// What a client connection keeps between reads: its session, the parser's state for a request
/// arriving in pieces, the bytes read and not yet parsed, and the replies not yet written.
pub(crate) struct Connection {
    pub session: Session,
    parser: RequestParser,
    pub input: Vec<u8>,
    pub output: Vec<u8>,
}

/// What `run_deferred` ran: where its replies start in `output`, and how many there are.
struct Ran {
    start: usize,
    replies: usize,
}

impl Connection {
    pub fn new(session: Session) -> Connection {
        Connection {
            session,
            parser: RequestParser::default(),
            input: Vec::with_capacity(READ_CHUNK_BYTES),
            output: Vec::new(),
        }
    }

    /// Parses and runs every complete request in `input`, appending the replies to `output`. A
    /// protocol error is answered and closes the connection; the requests before it still run.
    /// Their writes share one durability barrier (`Keyspace::with_deferred_durability`); if it
    /// fails, every reply of the batch becomes that error, since none of its writes is known
    /// durable.
    pub fn run_requests(&mut self, state: &ServerState) {
        let (ran, pending) = self.run_deferred(state);
        let barrier = pending.map_or(Ok(()), |p| state.keyspace.complete_barrier(p));
        self.settle(ran, barrier);
    }

    /// `run_requests` for a connection task: before its own barrier it lets the other clients'
    /// tasks run theirs, so that one barrier (one write to the OS, or one fdatasync under
    /// `sync`) covers many clients' pipelines, as Redis writes its append-only file once per
    /// event loop.
    async fn run_requests_together(&mut self, state: &ServerState) {
        let (ran, pending) = self.run_deferred(state);
        let Some(pending) = pending else { return };
        if !state.keyspace.is_covered(pending) {
            tokio::task::yield_now().await;
        }
        self.settle(ran, state.keyspace.complete_barrier(pending));
    }

    fn run_deferred(&mut self, state: &ServerState) -> (Ran, Option<PendingBarrier>) {
        let start = self.output.len();
        let (replies, pending) = state.keyspace.defer_durability(|| {
            with_clock_snapshot(|| state.keyspace.linger_locks(|| self.parse_and_run(state)))
        });
        (Ran { start, replies }, pending)
    }

    /// A failed barrier turns every reply of its pipeline into the error.
    fn settle(&mut self, ran: Ran, barrier: strata::Result<()>) {
        if let Err(e) = barrier {
            self.output.truncate(ran.start);
            let failed = Reply::err(format!("the write was not made durable: {e}"));
            (0..ran.replies).for_each(|_| failed.encode(self.session.resp, &mut self.output));
        }
    }

    /// Returns how many replies it appended.
    fn parse_and_run(&mut self, state: &ServerState) -> usize {
        let (max_bulk_bytes, max_request_bytes) = {
            let settings = state.settings.read();
            (settings.proto_max_bulk_len.min(i64::MAX as u64) as i64, settings.max_request_bytes)
        };
        let session = &mut self.session;
        let (mut replies, mut at, mut tick) = (0, 0, Instant::now());
        while !session.close_after_reply && session.blocked.is_none() {
            let limits =
                ParseLimits { max_bulk_bytes, max_request_bytes, authenticated: session.authenticated };
            match self.parser.next_at(&self.input, &mut at, limits) {
                Ok(Some(args)) => {
                    let reply = execute(state, session, args, &mut tick);
                    if session.blocked.is_some() {
                        // A blocking pop waits; the requests after it run once it is answered.
                        break;
                    }
                    reply.encode(session.resp, &mut self.output);
                }
                Ok(None) => break,
                Err(protocol) => {
                    Reply::err(protocol.0).encode(session.resp, &mut self.output);
                    session.close_after_reply = true;
                }
            }
            replies += 1;
        }
        // Once per read, not per request: the unparsed rest moves to the front.
        self.input.drain(..at);
        replies
    }
}
