//! Human-readable renderings of keys, values and ranges for failure messages.

use std::fmt::Write;
use std::ops::Bound;

use strata_core::{Direction, KeyRange};

/// Longest prefix of a key shown before eliding.
const KEY_SHOWN_BYTES: usize = 40;
/// Longest prefix of a value shown before eliding.
const VALUE_SHOWN_BYTES: usize = 16;

/// `"ab/3"`, with non-printable bytes as `\xNN`; long keys are cut and their length shown.
pub(crate) fn key(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().min(KEY_SHOWN_BYTES) + 2);
    out.push('"');
    push_escaped(&mut out, bytes.get(..KEY_SHOWN_BYTES).unwrap_or(bytes));
    out.push('"');
    if bytes.len() > KEY_SHOWN_BYTES {
        let _ = write!(out, "..(len {})", bytes.len());
    }
    out
}

/// `absent`, or the value's length and its first bytes.
pub(crate) fn value(v: Option<&[u8]>) -> String {
    match v {
        None => "absent".to_string(),
        Some(bytes) => {
            let mut out = format!("{}B \"", bytes.len());
            push_escaped(&mut out, bytes.get(..VALUE_SHOWN_BYTES).unwrap_or(bytes));
            out.push('"');
            if bytes.len() > VALUE_SHOWN_BYTES {
                out.push_str("..");
            }
            out
        }
    }
}

/// `["a", "b") reverse`.
pub(crate) fn range(r: &KeyRange, direction: Direction) -> String {
    let start = match &r.start {
        Bound::Included(k) => format!("[{}", key(k)),
        Bound::Excluded(k) => format!("({}", key(k)),
        Bound::Unbounded => "(..".to_string(),
    };
    let end = match &r.end {
        Bound::Included(k) => format!("{}]", key(k)),
        Bound::Excluded(k) => format!("{})", key(k)),
        Bound::Unbounded => "..)".to_string(),
    };
    let dir = match direction {
        Direction::Forward => "forward",
        Direction::Reverse => "reverse",
    };
    format!("{start}, {end} {dir}")
}

fn push_escaped(out: &mut String, bytes: &[u8]) {
    for &b in bytes {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_elides() {
        assert_eq!(key(b"ab/3"), "\"ab/3\"");
        assert_eq!(key(b"a\x00\xff\""), "\"a\\x00\\xff\\\"\"");
        assert_eq!(key(&[b'x'; 50]), format!("\"{}\"..(len 50)", "x".repeat(40)));
        assert_eq!(value(None), "absent");
        assert_eq!(value(Some(b"")), "0B \"\"");
        assert_eq!(value(Some(&[b'v'; 20])), format!("20B \"{}\"..", "v".repeat(16)));
        let r = KeyRange::from_bounds(b"a".as_slice()..b"b".as_slice());
        assert_eq!(range(&r, Direction::Reverse), "[\"a\", \"b\") reverse");
    }
}
