//! One client connection: read what has arrived, run every complete request in it (a pipeline
//! runs as one blocking section, so the engine is called off the async workers' hot path), write
//! the replies, repeat.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::command::execute;
use crate::reply::Reply;
use crate::resp::{ParseLimits, RequestParser};
use crate::state::{ServerState, Session};

/// Bytes asked of the socket per read.
const READ_CHUNK_BYTES: usize = 16 * 1024;

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
        input.reserve(READ_CHUNK_BYTES);
        let idle_secs = state.settings.read().timeout_secs;
        let read = reader.read_buf(&mut input);
        let outcome = tokio::select! {
            r = with_idle_limit(read, idle_secs) => r,
            _ = shutdown.wait_for(|stopping| *stopping) => None,
        };
        match outcome {
            Some(Ok(n)) if n > 0 => {}
            _ => break,
        }
        // Clients run commands one per core at a time: more threads in the engine at once only
        // park and wake each other in its write path (docs/benchmarks.md, "`strata serve`
        // against redis-server"); a client waiting here is a parked task, not a thread.
        let Ok(permit) = state.engine_permits.clone().acquire_owned().await else { break };
        session.permit = Some(permit);
        tokio::task::block_in_place(|| {
            run_requests(&state, &mut session, &mut parser, &mut input, &mut output)
        });
        session.permit = None;
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
    let start = output.len();
    let (replies, barrier) =
        state.keyspace.with_deferred_durability(|| parse_and_run(state, session, parser, input, output));
    if let Err(e) = barrier {
        output.truncate(start);
        let failed = Reply::err(format!("the write was not made durable: {e}"));
        (0..replies).for_each(|_| failed.encode(session.resp, output));
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
    let mut replies = 0;
    while !session.close_after_reply {
        let limits = ParseLimits { max_bulk_bytes, max_request_bytes, authenticated: session.authenticated };
        match parser.next(input, limits) {
            Ok(Some(args)) => execute(state, session, &args).encode(session.resp, output),
            Ok(None) => return replies,
            Err(protocol) => {
                Reply::err(protocol.0).encode(session.resp, output);
                session.close_after_reply = true;
            }
        }
        replies += 1;
    }
    replies
}
