//! One client connection: read what has arrived, run every complete request in it, write the
//! replies, repeat. Commands run on the runtime's worker (one per core), not in blocking
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
    let mut session = state.new_session(peer);
    let mut parser = RequestParser::default();
    let (mut input, mut output) = (Vec::with_capacity(READ_CHUNK_BYTES), Vec::new());
    let mut shutdown = state.shutdown_signal();
    loop {
        let more_to_run = if session.blocked.is_some() {
            wait_while_blocked(&state, &mut session, &mut reader, &mut input, &mut output).await
        } else {
            input.reserve(READ_CHUNK_BYTES);
            let idle_secs = state.settings.read().timeout_secs;
            let read = reader.read_buf(&mut input);
            let outcome = tokio::select! {
                r = with_idle_limit(read, idle_secs) => r,
                _ = shutdown.wait_for(|stopping| *stopping) => None,
            };
            matches!(outcome, Some(Ok(n)) if n > 0).then_some(true)
        };
        match more_to_run {
            None => break,
            Some(true) => {
                run_requests_together(&state, &mut session, &mut parser, &mut input, &mut output).await
            }
            Some(false) => {}
        }
        if !output.is_empty() {
            if writer.write_all(&output).await.is_err() {
                break;
            }
            output.clear();
        }
        if session.close_after_reply {
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
    session: &mut Session,
    reader: &mut OwnedReadHalf,
    input: &mut Vec<u8>,
    output: &mut Vec<u8>,
) -> Option<bool> {
    let _waiting = state.list_pushes.wait();
    let pushed = state.list_pushes.notified();
    tokio::pin!(pushed);
    pushed.as_mut().enable();
    // A push between the last try and `enable` notified no one: try once more first.
    if answer_blocked_pop(state, session, output) {
        return Some(true);
    }
    let deadline = session.blocked.as_ref().and_then(|b| b.deadline);
    let pause =
        deadline.map_or(BLOCKED_RETRY, |d| d.saturating_duration_since(Instant::now()).min(BLOCKED_RETRY));
    let mut shutdown = state.shutdown_signal();
    let room = input.len() < BLOCKED_INPUT_BYTES;
    input.reserve(READ_CHUNK_BYTES);
    tokio::select! {
        _ = pushed => {}
        _ = tokio::time::sleep(pause) => {}
        _ = shutdown.wait_for(|stopping| *stopping) => {}
        // Requests after the pop wait in `input`; an end of input is the client leaving.
        read = reader.read_buf(input), if room => {
            if !matches!(read, Ok(n) if n > 0) {
                return None;
            }
        }
    }
    Some(answer_blocked_pop(state, session, output))
}

/// Retries the blocked pop as a pipeline of its own (one durability barrier); true once it
/// answered.
fn answer_blocked_pop(state: &ServerState, session: &mut Session, output: &mut Vec<u8>) -> bool {
    let (reply, barrier) = state.keyspace.with_deferred_durability(|| retry_blocked_pop(state, session));
    let Some(reply) = reply else { return false };
    match barrier {
        Ok(()) => reply.encode(session.resp, output),
        Err(e) => Reply::err(format!("the write was not made durable: {e}")).encode(session.resp, output),
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

/// Parses and runs every complete request in `input`, appending the replies to `output`. A
/// protocol error is answered and closes the connection; the requests before it still run.
/// Their writes share one durability barrier (`Keyspace::with_deferred_durability`); if it
/// fails, every reply of the batch becomes that error, since none of its writes is known durable.
pub(crate) fn run_requests(
    state: &ServerState,
    session: &mut Session,
    parser: &mut RequestParser,
    input: &mut Vec<u8>,
    output: &mut Vec<u8>,
) {
    let (ran, pending) = run_deferred(state, session, parser, input, output);
    let barrier = pending.map_or(Ok(()), |p| state.keyspace.complete_barrier(p));
    settle(session, output, ran, barrier);
}

/// `run_requests` for a connection task: before its own barrier it lets the other clients'
/// tasks run theirs, so that one barrier (one write to the OS, or one fdatasync under `sync`)
/// covers many clients' pipelines, as Redis writes its append-only file once per event loop.
async fn run_requests_together(
    state: &ServerState,
    session: &mut Session,
    parser: &mut RequestParser,
    input: &mut Vec<u8>,
    output: &mut Vec<u8>,
) {
    let (ran, pending) = run_deferred(state, session, parser, input, output);
    let Some(pending) = pending else { return };
    if !state.keyspace.is_covered(pending) {
        tokio::task::yield_now().await;
    }
    settle(session, output, ran, state.keyspace.complete_barrier(pending));
}

/// What `run_deferred` ran: where its replies start in `output`, and how many there are.
struct Ran {
    start: usize,
    replies: usize,
}

fn run_deferred(
    state: &ServerState,
    session: &mut Session,
    parser: &mut RequestParser,
    input: &mut Vec<u8>,
    output: &mut Vec<u8>,
) -> (Ran, Option<PendingBarrier>) {
    let start = output.len();
    let (replies, pending) = state
        .keyspace
        .defer_durability(|| with_clock_snapshot(|| parse_and_run(state, session, parser, input, output)));
    (Ran { start, replies }, pending)
}

/// A failed barrier turns every reply of its pipeline into the error.
fn settle(session: &Session, output: &mut Vec<u8>, ran: Ran, barrier: strata::Result<()>) {
    if let Err(e) = barrier {
        output.truncate(ran.start);
        let failed = Reply::err(format!("the write was not made durable: {e}"));
        (0..ran.replies).for_each(|_| failed.encode(session.resp, output));
    }
}

/// Returns how many replies it appended.
fn parse_and_run(
    state: &ServerState,
    session: &mut Session,
    parser: &mut RequestParser,
    input: &mut Vec<u8>,
    output: &mut Vec<u8>,
) -> usize {
    let (max_bulk_bytes, max_request_bytes) = {
        let settings = state.settings.read();
        (settings.proto_max_bulk_len.min(i64::MAX as u64) as i64, settings.max_request_bytes)
    };
    let (mut replies, mut at, mut tick) = (0, 0, Instant::now());
    while !session.close_after_reply && session.blocked.is_none() {
        let limits = ParseLimits { max_bulk_bytes, max_request_bytes, authenticated: session.authenticated };
        match parser.next_at(input, &mut at, limits) {
            Ok(Some(args)) => {
                let reply = execute(state, session, &args, &mut tick);
                if session.blocked.is_some() {
                    // A blocking pop waits; the requests after it run once it is answered.
                    break;
                }
                reply.encode(session.resp, output);
            }
            Ok(None) => break,
            Err(protocol) => {
                Reply::err(protocol.0).encode(session.resp, output);
                session.close_after_reply = true;
            }
        }
        replies += 1;
    }
    // Once per read, not per request: the unparsed rest moves to the front.
    input.drain(..at);
    replies
}
