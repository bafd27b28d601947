//! Requests in the Redis serialization protocol: multibulk (`*N\r\n$len\r\n...`) and inline
//! (`SET k v\r\n`) commands, parsed incrementally as bytes arrive, with the limits and the error
//! texts of Redis (clients and Valkey's protocol tests match on them).

/// The longest inline command, or `*N` / `$len` header line, a client may send (Redis's
/// `PROTO_INLINE_MAX_SIZE`): beyond it without a line end the connection is desynchronised.
pub const MAX_INLINE_BYTES: usize = 64 * 1024;
/// Largest argument count of one request (Redis: `INT_MAX`).
pub const MAX_MULTIBULK_ARGS: i64 = i32::MAX as i64;
/// Before a client has authenticated: at most this many arguments and...
pub const UNAUTHENTICATED_MAX_ARGS: i64 = 10;
/// ...arguments of at most this many bytes (Redis's limits for unauthenticated clients).
pub const UNAUTHENTICATED_MAX_BULK_BYTES: i64 = 16 * 1024;

/// A request the connection cannot recover from: reply with it, then close.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl ProtocolError {
    fn new(what: impl Into<String>) -> Self {
        ProtocolError(format!("Protocol error: {}", what.into()))
    }
}

/// Limits the parser applies to the next request.
#[derive(Clone, Copy, Debug)]
pub struct ParseLimits {
    /// Largest single argument (Redis's `proto-max-bulk-len`).
    pub max_bulk_bytes: i64,
    /// Largest request, all its arguments together (Redis's `client-query-buffer-limit`).
    pub max_request_bytes: u64,
    pub authenticated: bool,
}

/// Parses requests out of a growing buffer. State survives between calls so that a request
/// arriving in many reads is not parsed again from its start each time.
/// The argument buffers kept between requests are at most this many, each at most
/// [`MAX_KEPT_ARG_BYTES`]: one large request does not hold its memory for the connection's life.
const MAX_KEPT_ARGS: usize = 64;
const MAX_KEPT_ARG_BYTES: usize = 64 * 1024;

#[derive(Default, Debug)]
pub struct RequestParser {
    /// Arguments still expected by the multibulk request under way, or 0 when none is.
    pending_args: usize,
    /// The request's arguments are `args[..filled]`; the buffers after them are kept for the
    /// next requests, so a pipeline of small requests parses without allocating.
    args: Vec<Vec<u8>>,
    filled: usize,
    /// Bytes of the arguments so far.
    args_bytes: u64,
}

impl RequestParser {
    /// Takes the next complete request from the front of `buf` (draining what it consumed).
    /// `Ok(None)`: more bytes are needed. An empty request (an empty line, `*0`, `*-1`) is
    /// consumed and skipped, as Redis does.
    pub fn next(
        &mut self,
        buf: &mut Vec<u8>,
        limits: ParseLimits,
    ) -> Result<Option<Vec<Vec<u8>>>, ProtocolError> {
        let mut at = 0;
        let result = self.next_at(buf, &mut at, limits).map(|args| args.map(<[Vec<u8>]>::to_vec));
        buf.drain(..at);
        result
    }

    /// `next` for a caller that drains `buf` itself, once for many requests: parses from `at`
    /// and moves `at` past what it consumed.
    pub fn next_at(
        &mut self,
        buf: &[u8],
        at: &mut usize,
        limits: ParseLimits,
    ) -> Result<Option<&[Vec<u8>]>, ProtocolError> {
        loop {
            if self.pending_args == 0 {
                match buf.get(*at) {
                    None => return Ok(None),
                    Some(b'*') => match self.multibulk_header(buf, at, limits)? {
                        Header::Incomplete => return Ok(None),
                        Header::Empty => continue,
                        Header::Args => {}
                    },
                    Some(_) => match inline_request(buf, at)? {
                        None => return Ok(None),
                        Some(args) if args.is_empty() => continue,
                        Some(args) => {
                            (self.filled, self.args) = (args.len(), args);
                            return Ok(Some(&self.args));
                        }
                    },
                }
            }
            while self.pending_args > 0 {
                match bulk(buf, at, limits, self.args_bytes)? {
                    None => return Ok(None),
                    Some(arg) => {
                        self.args_bytes += arg.len() as u64;
                        self.push_arg(arg);
                        self.pending_args -= 1;
                    }
                }
            }
            self.args_bytes = 0;
            return Ok(Some(&self.args[..self.filled]));
        }
    }

    fn multibulk_header(
        &mut self,
        buf: &[u8],
        at: &mut usize,
        limits: ParseLimits,
    ) -> Result<Header, ProtocolError> {
        let Some((line, next)) = line_at(buf, *at + 1) else {
            if buf.len() - *at > MAX_INLINE_BYTES {
                return Err(ProtocolError::new("too big mbulk count string"));
            }
            return Ok(Header::Incomplete);
        };
        let count = parse_i64(line).filter(|n| *n <= MAX_MULTIBULK_ARGS);
        let Some(count) = count else {
            return Err(ProtocolError::new("invalid multibulk length"));
        };
        if !limits.authenticated && count > UNAUTHENTICATED_MAX_ARGS {
            return Err(ProtocolError::new("unauthenticated multibulk length"));
        }
        *at = next;
        if count <= 0 {
            return Ok(Header::Empty);
        }
        self.pending_args = count as usize;
        self.begin_request();
        Ok(Header::Args)
    }

    /// Empties the argument list, letting go of what a large earlier request left.
    fn begin_request(&mut self) {
        self.filled = 0;
        self.args.truncate(MAX_KEPT_ARGS);
        for kept in &mut self.args {
            if kept.capacity() > MAX_KEPT_ARG_BYTES {
                *kept = Vec::new();
            }
        }
    }

    fn push_arg(&mut self, arg: &[u8]) {
        match self.args.get_mut(self.filled) {
            Some(kept) => {
                kept.clear();
                kept.extend_from_slice(arg);
            }
            None => self.args.push(arg.to_vec()),
        }
        self.filled += 1;
    }
}

enum Header {
    Incomplete,
    Empty,
    Args,
}

/// One `$len\r\n<bytes>\r\n` argument, or `None` if it has not all arrived; `request_bytes`
/// is what the request's earlier arguments hold.
fn bulk<'b>(
    buf: &'b [u8],
    at: &mut usize,
    limits: ParseLimits,
    request_bytes: u64,
) -> Result<Option<&'b [u8]>, ProtocolError> {
    let Some(&first) = buf.get(*at) else { return Ok(None) };
    if first != b'$' {
        return Err(ProtocolError::new(format!("expected '$', got '{}'", first as char)));
    }
    let Some((line, data_at)) = line_at(buf, *at + 1) else {
        if buf.len() - *at > MAX_INLINE_BYTES {
            return Err(ProtocolError::new("too big bulk count string"));
        }
        return Ok(None);
    };
    let len = parse_i64(line).filter(|n| (0..=limits.max_bulk_bytes).contains(n));
    let Some(len) = len else {
        return Err(ProtocolError::new("invalid bulk length"));
    };
    if !limits.authenticated && len > UNAUTHENTICATED_MAX_BULK_BYTES {
        return Err(ProtocolError::new("unauthenticated bulk length"));
    }
    if request_bytes + len as u64 > limits.max_request_bytes {
        return Err(ProtocolError::new("request larger than the server's limit (max-request-bytes)"));
    }
    let end = data_at + len as usize;
    if buf.len() < end + 2 {
        return Ok(None);
    }
    if &buf[end..end + 2] != b"\r\n" {
        return Err(ProtocolError::new("bulk argument not followed by CRLF"));
    }
    *at = end + 2;
    Ok(Some(&buf[data_at..end]))
}

/// An inline command: a line split into arguments the way `redis-cli` quotes them.
fn inline_request(buf: &[u8], at: &mut usize) -> Result<Option<Vec<Vec<u8>>>, ProtocolError> {
    let rest = &buf[*at..];
    let Some(newline) = rest.iter().position(|&b| b == b'\n') else {
        if rest.len() > MAX_INLINE_BYTES {
            return Err(ProtocolError::new("too big inline request"));
        }
        return Ok(None);
    };
    let mut line = &rest[..newline];
    if line.last() == Some(&b'\r') {
        line = &line[..line.len() - 1];
    }
    let args = split_inline_args(line).ok_or_else(|| ProtocolError::new("unbalanced quotes in request"))?;
    *at += newline + 1;
    Ok(Some(args))
}

/// A request as a client sends one: a multibulk of `args` (what every client library writes).
pub fn encode_request<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        let arg = arg.as_ref();
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// The line starting at `from` and the offset after its `\r\n`.
fn line_at(buf: &[u8], from: usize) -> Option<(&[u8], usize)> {
    let rest = buf.get(from..)?;
    let cr = rest.windows(2).position(|w| w == b"\r\n")?;
    Some((&rest[..cr], from + cr + 2))
}

fn parse_i64(text: &[u8]) -> Option<i64> {
    std::str::from_utf8(text).ok()?.parse().ok()
}

/// Splits an inline command into arguments: whitespace separates them; `"..."` takes escapes
/// (`\n`, `\r`, `\t`, `\b`, `\a`, `\\`, `\"`, `\xHH`), `'...'` only `\'`. `None`: a quote is
/// unbalanced or a closing quote is not followed by whitespace (Redis's `sdssplitargs`).
pub fn split_inline_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while i < line.len() && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == line.len() {
            return Some(args);
        }
        let (arg, next) = match line[i] {
            b'"' => double_quoted(line, i + 1)?,
            b'\'' => single_quoted(line, i + 1)?,
            _ => {
                let end =
                    line[i..].iter().position(|b| b.is_ascii_whitespace()).map_or(line.len(), |p| i + p);
                (line[i..end].to_vec(), end)
            }
        };
        if next < line.len() && !line[next].is_ascii_whitespace() {
            return None;
        }
        args.push(arg);
        i = next;
    }
}

fn double_quoted(line: &[u8], mut i: usize) -> Option<(Vec<u8>, usize)> {
    let mut arg = Vec::new();
    loop {
        match *line.get(i)? {
            b'"' => return Some((arg, i + 1)),
            b'\\'
                if i + 3 < line.len()
                    && line[i + 1] == b'x'
                    && hex_pair(line[i + 2], line[i + 3]).is_some() =>
            {
                arg.push(hex_pair(line[i + 2], line[i + 3])?);
                i += 4;
            }
            b'\\' if i + 1 < line.len() => {
                arg.push(match line[i + 1] {
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'b' => 8,
                    b'a' => 7,
                    other => other,
                });
                i += 2;
            }
            byte => {
                arg.push(byte);
                i += 1;
            }
        }
    }
}

fn single_quoted(line: &[u8], mut i: usize) -> Option<(Vec<u8>, usize)> {
    let mut arg = Vec::new();
    loop {
        match *line.get(i)? {
            b'\'' => return Some((arg, i + 1)),
            b'\\' if line.get(i + 1) == Some(&b'\'') => {
                arg.push(b'\'');
                i += 2;
            }
            byte => {
                arg.push(byte);
                i += 1;
            }
        }
    }
}

fn hex_pair(high: u8, low: u8) -> Option<u8> {
    let digit = |b: u8| (b as char).to_digit(16);
    Some((digit(high)? * 16 + digit(low)?) as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPEN: ParseLimits =
        ParseLimits { max_bulk_bytes: 512 << 20, max_request_bytes: 1 << 30, authenticated: true };

    fn parse_all(bytes: &[u8]) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
        let mut parser = RequestParser::default();
        let mut buf = bytes.to_vec();
        let mut out = Vec::new();
        while let Some(args) = parser.next(&mut buf, OPEN)? {
            out.push(args);
        }
        Ok(out)
    }

    fn words(args: &[&str]) -> Vec<Vec<u8>> {
        args.iter().map(|a| a.as_bytes().to_vec()).collect()
    }

    #[test]
    fn multibulk_and_inline_requests_parse_back_to_back() {
        let got = parse_all(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nSET a \"b c\"\r\n\r\n*0\r\nPING\n").unwrap();
        assert_eq!(got, vec![words(&["GET", "k"]), words(&["SET", "a", "b c"]), words(&["PING"])]);
    }

    /// Argument buffers are reused from request to request, but a large one is let go of, and
    /// a shorter request after a longer one sees only its own arguments.
    #[test]
    fn kept_argument_buffers_never_leak_into_a_request_or_keep_a_large_one() {
        let big = vec![b'x'; 2 * MAX_KEPT_ARG_BYTES];
        let mut input = encode_request(&[&b"SET"[..], b"k", &big]);
        input.extend(encode_request(&[&b"GET"[..], b"k"]));
        input.extend(encode_request(&[&b"DEL"[..], b"a", b"b"]));
        let mut parser = RequestParser::default();
        let mut at = 0;
        assert_eq!(parser.next_at(&input, &mut at, OPEN).unwrap().unwrap()[2].len(), big.len());
        assert_eq!(parser.next_at(&input, &mut at, OPEN).unwrap().unwrap(), words(&["GET", "k"]));
        assert!(parser.args.iter().all(|a| a.capacity() <= MAX_KEPT_ARG_BYTES), "the large buffer is kept");
        assert_eq!(parser.next_at(&input, &mut at, OPEN).unwrap().unwrap(), words(&["DEL", "a", "b"]));
        assert_eq!(at, input.len());
    }

    #[test]
    fn a_request_split_at_every_byte_parses_the_same() {
        let whole = b"*3\r\n$3\r\nSET\r\n$5\r\nkey\r\n\r\n$0\r\n\r\n";
        let mut parser = RequestParser::default();
        let mut buf = Vec::new();
        for (i, byte) in whole.iter().enumerate() {
            buf.push(*byte);
            let got = parser.next(&mut buf, OPEN).unwrap();
            assert_eq!(got.is_some(), i == whole.len() - 1, "byte {i}");
            if let Some(args) = got {
                assert_eq!(args, vec![b"SET".to_vec(), b"key\r\n".to_vec(), Vec::new()]);
            }
        }
        assert!(buf.is_empty());
    }

    #[test]
    fn malformed_requests_get_redis_error_texts() {
        let cases: [(&[u8], &str); 6] = [
            (b"*3000000000\r\n", "invalid multibulk length"),
            (b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n", "expected '$', got 'f'"),
            (b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$-10\r\n", "invalid bulk length"),
            (b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$blabla\r\n", "invalid bulk length"),
            (b"*1\r\n$2000000000\r\n", "invalid bulk length"),
            (b"set \"\"\"test-key\"\"\" test-value\r\n", "unbalanced quotes"),
        ];
        for (input, expected) in cases {
            let err = parse_all(input).unwrap_err();
            assert!(err.0.contains(expected), "{:?}: {}", String::from_utf8_lossy(input), err.0);
        }
        assert_eq!(parse_all(b"*-10\r\n").unwrap(), Vec::<Vec<Vec<u8>>>::new());
    }

    #[test]
    fn an_endless_line_is_a_protocol_error_not_a_growing_buffer() {
        for start in [&b"\x00"[..], b"*\x00", b"$\x00"] {
            let mut input = start.to_vec();
            input.extend(std::iter::repeat_n(b'A', MAX_INLINE_BYTES + 1));
            assert!(parse_all(&input).unwrap_err().0.starts_with("Protocol error: too big"));
        }
    }

    #[test]
    fn a_request_whose_arguments_add_up_past_the_limit_is_refused() {
        let limits = ParseLimits { max_request_bytes: 10, ..OPEN };
        let mut parser = RequestParser::default();
        let ok = parser.next(&mut b"*2\r\n$5\r\nhello\r\n$5\r\nworld\r\n".to_vec(), limits).unwrap();
        assert_eq!(ok.map(|a| a.len()), Some(2), "10 bytes: at the limit");
        let err = parser.next(&mut b"*3\r\n$5\r\nhello\r\n$5\r\nworld\r\n$1\r\n".to_vec(), limits);
        assert!(err.unwrap_err().0.contains("request larger"));
    }

    #[test]
    fn unauthenticated_clients_get_small_limits() {
        let closed = ParseLimits { authenticated: false, ..OPEN };
        let mut parser = RequestParser::default();
        let err = parser.next(&mut b"*100\r\n".to_vec(), closed).unwrap_err();
        assert!(err.0.contains("unauthenticated multibulk length"));
        let err = RequestParser::default().next(&mut b"*1\r\n$100000000\r\n".to_vec(), closed).unwrap_err();
        assert!(err.0.contains("unauthenticated bulk length"));
    }

    #[test]
    fn inline_quoting_follows_redis_cli() {
        let args = split_inline_args(br#"set "a\x41\n" 'it\'s' plain"#).unwrap();
        assert_eq!(args, vec![b"set".to_vec(), b"aA\n".to_vec(), b"it's".to_vec(), b"plain".to_vec()]);
        assert!(split_inline_args(br#""closed"glued"#).is_none());
        assert!(split_inline_args(br#"'open"#).is_none());
    }
}
