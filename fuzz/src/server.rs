//! The `server_requests` harness: client bytes through `strata serve`'s request parser and
//! commands.

use std::sync::Arc;

use strata::storage::MemStorage;
use strata::{Db, EngineKind, Options};
use strata_server::resp::{encode_request, ParseLimits, ProtocolError, RequestParser};

const LIMITS: ParseLimits = ParseLimits { max_bulk_bytes: 1 << 20, max_request_bytes: 4 << 20, authenticated: true };

/// What parsing a byte stream yields: its requests, then the protocol error that ended it, if any.
fn parse_in_chunks(input: &[u8], chunk_bytes: usize) -> (Vec<Vec<Vec<u8>>>, Option<ProtocolError>) {
    let mut parser = RequestParser::default();
    let (mut buffer, mut requests) = (Vec::new(), Vec::new());
    for chunk in input.chunks(chunk_bytes.max(1)) {
        buffer.extend_from_slice(chunk);
        loop {
            match parser.next(&mut buffer, LIMITS) {
                Ok(Some(args)) => requests.push(args),
                Ok(None) => break,
                Err(e) => return (requests, Some(e)),
            }
        }
    }
    (requests, None)
}

/// Bugs: the parser's result depends on how the bytes were split into reads (beyond an error
/// found earlier or later in a stream cut short), a request re-encoded as multibulk parses to
/// other arguments, or a panic anywhere in the parser or a command (the fuzzer's crash).
pub fn server_requests(data: &[u8]) {
    let Some((&split, input)) = data.split_first() else { return };
    let whole = parse_in_chunks(input, input.len());
    let split = parse_in_chunks(input, usize::from(split % 64) + 1);
    assert_eq!(whole.0, split.0, "requests differ when read in pieces");
    assert_eq!(whole.1, split.1, "protocol errors differ when read in pieces");
    for args in &whole.0 {
        let (again, error) = parse_in_chunks(&encode_request(args), usize::MAX);
        assert_eq!((again, error), (vec![args.clone()], None), "a request does not survive re-encoding");
    }
    let kind = if split.0.len().is_multiple_of(2) { EngineKind::Memory } else { EngineKind::F2 };
    let db = Db::open("fuzz", Options::new(kind).memory_budget_bytes(8 << 20).storage(Arc::new(MemStorage::new())))
        .expect("an in-memory store opens");
    strata_server::fuzzing::serve_bytes(db, input).expect("the server runs and closes its store");
}
