//! One key-value record in the table file (docs/format/flexdb.md): crc32c, varint key and value
//! lengths (§5.1), key, value. The checksum covers everything after itself, so it stays valid when
//! insert-range and collapse-range move the record.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

use strata_core::{Key, Value};

/// Largest key a record may hold (also the engine's `max_key_bytes`).
pub const MAX_KEY_BYTES: usize = 4096;
/// Largest value a record may hold (also the engine's `max_value_bytes`).
pub const MAX_VALUE_BYTES: usize = 64 << 10;
const CRC_BYTES: usize = 4;
const MAX_VARINT_BYTES: usize = 5;
/// The longest possible record.
pub const MAX_RECORD_BYTES: usize = CRC_BYTES + 2 * MAX_VARINT_BYTES + MAX_KEY_BYTES + MAX_VALUE_BYTES;

/// Encoded size of a record.
pub fn encoded_len(key: &[u8], value: &[u8]) -> usize {
    CRC_BYTES + varint_len(key.len()) + varint_len(value.len()) + key.len() + value.len()
}

/// Appends the record for `key`/`value` to `out`.
pub fn encode_into(key: &[u8], value: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; CRC_BYTES]);
    put_varint(key.len(), out);
    put_varint(value.len(), out);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    let crc = crc32c::crc32c(out.get(start + CRC_BYTES..).unwrap_or_default());
    if let Some(slot) = out.get_mut(start..start + CRC_BYTES) {
        slot.copy_from_slice(&crc.to_le_bytes());
    }
}

#[cfg(test)]
pub fn encode(key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(encoded_len(key, value));
    encode_into(key, value, &mut out);
    out
}

/// The parsed header of a record at the start of a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub header_len: usize,
    pub key_len: usize,
    pub value_len: usize,
}

impl Header {
    pub fn record_len(&self) -> usize {
        self.header_len + self.key_len + self.value_len
    }
}

/// What the first bytes of a buffer say.
#[derive(Debug, PartialEq, Eq)]
pub enum HeaderParse {
    /// The buffer ends inside the header.
    Incomplete,
    Complete(Header),
}

/// Parses the header at the start of `buf`. Errors describe structural damage.
pub fn parse_header(buf: &[u8]) -> Result<HeaderParse, String> {
    let Some(rest) = buf.get(CRC_BYTES..) else { return Ok(HeaderParse::Incomplete) };
    let Some((key_len, a)) = get_varint(rest)? else { return Ok(HeaderParse::Incomplete) };
    let Some((value_len, b)) = get_varint(rest.get(a..).unwrap_or_default())? else {
        return Ok(HeaderParse::Incomplete);
    };
    if key_len > MAX_KEY_BYTES {
        return Err(format!("key length {key_len} exceeds {MAX_KEY_BYTES}"));
    }
    if value_len > MAX_VALUE_BYTES {
        return Err(format!("value length {value_len} exceeds {MAX_VALUE_BYTES}"));
    }
    Ok(HeaderParse::Complete(Header { header_len: CRC_BYTES + a + b, key_len, value_len }))
}

/// Decodes and checks the record at the start of `buf`; returns it and its encoded length.
pub fn decode(buf: &[u8]) -> Result<(Key, Value, usize), String> {
    let header = check(buf)?;
    let record_len = header.record_len();
    let key_end = header.header_len + header.key_len;
    let key = buf.get(header.header_len..key_end).unwrap_or_default().to_vec();
    let value = buf.get(key_end..record_len).unwrap_or_default().to_vec();
    Ok((key, value, record_len))
}

/// Parses and checksum-verifies the record at the start of `buf` without copying it out.
pub fn check(buf: &[u8]) -> Result<Header, String> {
    let header = match parse_header(buf)? {
        HeaderParse::Complete(h) => h,
        HeaderParse::Incomplete => return Err("record header runs past the end of its range".into()),
    };
    let record_len = header.record_len();
    let Some(record) = buf.get(..record_len) else {
        return Err(format!("record of {record_len} bytes runs past the end of its range"));
    };
    let stored = record.get(..CRC_BYTES).and_then(|b| <[u8; 4]>::try_from(b).ok()).map(u32::from_le_bytes);
    let computed = crc32c::crc32c(record.get(CRC_BYTES..).unwrap_or_default());
    if stored != Some(computed) {
        return Err(format!("record checksum mismatch (stored {stored:08x?}, computed {computed:08x})"));
    }
    Ok(header)
}

fn varint_len(mut v: usize) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

fn put_varint(mut v: usize, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// `Ok(None)` when `buf` ends inside the varint; an error when it is longer than 5 bytes.
fn get_varint(buf: &[u8]) -> Result<Option<(usize, usize)>, String> {
    let mut value = 0usize;
    for (i, &byte) in buf.iter().enumerate().take(MAX_VARINT_BYTES) {
        value |= usize::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(Some((value, i + 1)));
        }
    }
    if buf.len() >= MAX_VARINT_BYTES {
        return Err("varint longer than 5 bytes".into());
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_including_empty_value_and_empty_key() {
        for (k, v) in
            [(&b"key"[..], &b"value"[..]), (b"", b""), (b"k", b""), (&[7u8; 300][..], &[1u8; 200][..])]
        {
            let bytes = encode(k, v);
            assert_eq!(bytes.len(), encoded_len(k, v));
            let (key, value, len) = decode(&bytes).unwrap();
            assert_eq!((key.as_slice(), value.as_slice(), len), (k, v, bytes.len()));
        }
    }

    /// Checks the layout documented in docs/format/flexdb.md.
    #[test]
    fn layout_matches_format_doc() {
        let bytes = encode(b"ab", &[9u8; 200]);
        assert_eq!(&bytes[0..4], &crc32c::crc32c(&bytes[4..]).to_le_bytes());
        assert_eq!(bytes[4], 2);
        assert_eq!(&bytes[5..7], &[0xc8, 0x01]); // 200 as LEB128
        assert_eq!(&bytes[7..9], b"ab");
        assert_eq!(bytes.len(), 9 + 200);
    }

    #[test]
    fn damage_is_an_error_never_a_panic() {
        let bytes = encode(b"some key", b"some value");
        for len in 0..bytes.len() {
            assert!(decode(&bytes[..len]).is_err(), "prefix of {len} bytes decoded");
        }
        for i in 0..bytes.len() * 8 {
            let mut bad = bytes.clone();
            bad[i / 8] ^= 1 << (i % 8);
            assert!(decode(&bad).is_err(), "bit flip {i} went unnoticed");
        }
        assert!(decode(&[0xff; 32]).is_err());
    }
}
