/// Printable ASCII as is (backslash doubled), everything else as `\xNN`, so one record is one line
/// and binary data survives a round trip through text.
pub fn bytes(b: &[u8]) -> String {
    let mut out = String::with_capacity(b.len());
    for &c in b {
        match c {
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(char::from(c)),
            _ => out.push_str(&format!("\\x{c:02x}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn escapes_tabs_newlines_and_backslashes() {
        assert_eq!(super::bytes(b"a\tb\nc\\d\xff"), "a\\x09b\\x0ac\\\\d\\xff");
    }
}
