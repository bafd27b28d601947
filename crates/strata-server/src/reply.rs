//! Replies, written in RESP2 or RESP3 (chosen per connection by `HELLO`).

use std::io::Write;

#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `+OK`
    Simple(&'static str),
    /// `+text` built at run time (e.g. `TYPE`'s answer).
    Status(String),
    /// `-ERR ...`: the text includes its prefix (`ERR`, `WRONGTYPE`, `NOAUTH`...).
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    /// A missing value: `$-1` in RESP2, `_` in RESP3.
    Nil,
    /// A missing array: `*-1` in RESP2, `_` in RESP3.
    NilArray,
    Array(Vec<Reply>),
    /// A map in RESP3; a flat array of keys and values in RESP2.
    Map(Vec<(Reply, Reply)>),
    /// A double in RESP3 (`,`); a bulk string in RESP2.
    Double(f64),
    /// No reply at all (SHUTDOWN closes the connection instead).
    Silent,
}

pub const OK: Reply = Reply::Simple("OK");

impl Reply {
    pub fn error(text: impl Into<String>) -> Reply {
        Reply::Error(text.into())
    }

    /// `-ERR <text>`
    pub fn err(text: impl std::fmt::Display) -> Reply {
        Reply::Error(format!("ERR {text}"))
    }

    pub fn bulk(bytes: impl Into<Vec<u8>>) -> Reply {
        Reply::Bulk(bytes.into())
    }

    pub fn optional(value: Option<Vec<u8>>) -> Reply {
        value.map_or(Reply::Nil, Reply::Bulk)
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// Appends the encoding for a client speaking protocol `resp` (2 or 3).
    pub fn encode(&self, resp: u8, out: &mut Vec<u8>) {
        match self {
            Reply::Simple(text) => simple(out, b'+', text.as_bytes()),
            Reply::Status(text) => simple(out, b'+', text.as_bytes()),
            Reply::Error(text) => simple(out, b'-', text.as_bytes()),
            Reply::Int(n) => header(out, b':', *n),
            Reply::Bulk(bytes) => bulk(out, bytes),
            Reply::Nil if resp >= 3 => out.extend_from_slice(b"_\r\n"),
            Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
            Reply::NilArray if resp >= 3 => out.extend_from_slice(b"_\r\n"),
            Reply::NilArray => out.extend_from_slice(b"*-1\r\n"),
            Reply::Array(items) => {
                header(out, b'*', items.len() as i64);
                items.iter().for_each(|item| item.encode(resp, out));
            }
            Reply::Map(pairs) => {
                if resp >= 3 {
                    let _ = write!(out, "%{}\r\n", pairs.len());
                } else {
                    let _ = write!(out, "*{}\r\n", pairs.len() * 2);
                }
                for (key, value) in pairs {
                    key.encode(resp, out);
                    value.encode(resp, out);
                }
            }
            Reply::Double(x) if resp >= 3 => {
                let _ = write!(out, ",{}\r\n", format_double(*x));
            }
            Reply::Double(x) => bulk(out, format_double(*x).as_bytes()),
            Reply::Silent => {}
        }
    }
}

fn simple(out: &mut Vec<u8>, kind: u8, text: &[u8]) {
    out.push(kind);
    // A status line cannot hold a line break: Redis replaces them with spaces.
    out.extend(text.iter().map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }));
    out.extend_from_slice(b"\r\n");
}

/// `kind`, `n` in decimal, CRLF: without `fmt`, which costs more than the rest of a small reply.
fn header(out: &mut Vec<u8>, kind: u8, n: i64) {
    out.push(kind);
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn bulk(out: &mut Vec<u8>, bytes: &[u8]) {
    header(out, b'$', bytes.len() as i64);
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

/// A double as Redis prints one for humans: no exponent, no trailing zeros, `inf`/`-inf`.
pub fn format_double(x: f64) -> String {
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if x == 0.0 {
        return "0".into(); // never "-0"
    }
    format!("{x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(reply: &Reply, resp: u8) -> String {
        let mut out = Vec::new();
        reply.encode(resp, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn nulls_maps_and_doubles_differ_by_protocol() {
        assert_eq!(encoded(&Reply::Nil, 2), "$-1\r\n");
        assert_eq!(encoded(&Reply::Nil, 3), "_\r\n");
        assert_eq!(encoded(&Reply::NilArray, 2), "*-1\r\n");
        let map = Reply::Map(vec![(Reply::bulk("f"), Reply::Int(1))]);
        assert_eq!(encoded(&map, 2), "*2\r\n$1\r\nf\r\n:1\r\n");
        assert_eq!(encoded(&map, 3), "%1\r\n$1\r\nf\r\n:1\r\n");
        assert_eq!(encoded(&Reply::Double(1.5), 3), ",1.5\r\n");
        assert_eq!(encoded(&Reply::Double(1.5), 2), "$3\r\n1.5\r\n");
    }

    #[test]
    fn integers_and_lengths_print_in_decimal() {
        for n in [0, 7, -7, 10, 1234567890, i64::MAX, i64::MIN] {
            assert_eq!(encoded(&Reply::Int(n), 2), format!(":{n}\r\n"));
        }
        assert_eq!(encoded(&Reply::bulk(vec![b'x'; 12]), 2), format!("$12\r\n{}\r\n", "x".repeat(12)));
        assert_eq!(
            encoded(&Reply::Array(vec![Reply::Nil; 100]), 2),
            format!("*100\r\n{}", "$-1\r\n".repeat(100))
        );
    }

    #[test]
    fn status_lines_never_carry_a_line_break() {
        assert_eq!(encoded(&Reply::err("bad\r\nthing"), 2), "-ERR bad  thing\r\n");
    }

    #[test]
    fn doubles_print_without_exponent_or_negative_zero() {
        assert_eq!(format_double(1e20), "100000000000000000000");
        assert_eq!(format_double(-0.0), "0");
        assert_eq!(format_double(10.5), "10.5");
    }
}
