//! The record layout shared by the hot, cold and chunk logs (docs/format/f2-logs.md, "Record").
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

use strata_core::le_bytes::{u32_at, u64_at};

/// Bytes before the key.
pub const HEADER_BYTES: usize = 24;
/// Records start at multiples of this within a page.
pub const RECORD_ALIGN_BYTES: usize = 8;

pub const KIND_VALUE: u8 = 1;
pub const KIND_TOMBSTONE: u8 = 2;

const CRC_OFFSET: usize = 0;
const KEY_LEN_OFFSET: usize = 4;
const VALUE_LEN_OFFSET: usize = 8;
const KIND_OFFSET: usize = 12;
const PREV_OFFSET: usize = 16;
/// Read-cache records only (never persisted): non-zero = invalidated.
pub const INVALID_OFFSET: usize = 13;

/// Bytes a record occupies in a page, padding included.
pub fn stored_len(key_len: usize, value_len: usize) -> usize {
    (HEADER_BYTES + key_len + value_len).div_ceil(RECORD_ALIGN_BYTES) * RECORD_ALIGN_BYTES
}

/// The stored length of the record whose header starts `bytes`, from its length fields alone
/// (no other check); `None` if `bytes` is shorter than a header.
pub fn stored_len_of_header(bytes: &[u8]) -> Option<usize> {
    let header = bytes.get(..HEADER_BYTES)?;
    let len_at = |o: usize| u32_at(header, o).map(|n| n as usize);
    Some(stored_len(len_at(KEY_LEN_OFFSET)?, len_at(VALUE_LEN_OFFSET)?))
}

/// Encodes a record (padded to `stored_len`). `value` `None` is a tombstone. Its checksum is
/// left zero: the log that stores it seals it at the address it reserves (`seal`).
pub fn encode(key: &[u8], value: Option<&[u8]>, prev_address: u64) -> Vec<u8> {
    let value_bytes = value.unwrap_or_default();
    let mut out = Vec::with_capacity(stored_len(key.len(), value_bytes.len()));
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(&(value_bytes.len() as u32).to_le_bytes());
    out.push(if value.is_some() { KIND_VALUE } else { KIND_TOMBSTONE });
    out.extend_from_slice(&[0; 3]);
    out.extend_from_slice(&prev_address.to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value_bytes);
    out.resize(stored_len(key.len(), value_bytes.len()), 0);
    out
}

/// The checksum of a record stored at `address` whose body (header + key + value) is `body`:
/// CRC-32C of the address, then the body from byte 4. The address binds the record to where it
/// was written, so bytes moved within a log fail the check instead of reading as another record.
fn checksum_at(body: &[u8], address: u64) -> u32 {
    crc32c::crc32c_append(
        crc32c::crc32c(&address.to_le_bytes()),
        body.get(CRC_OFFSET + 4..).unwrap_or_default(),
    )
}

/// The body length (header + key + value) of the record `bytes` start with; `None` if they
/// cannot be a record.
pub fn body_len(bytes: &[u8]) -> Option<usize> {
    RecordView::parse(bytes).map(|v| v.body_len())
}

/// Writes the checksum of the record starting `record`, stored at `address`. False if the bytes
/// are not a record.
pub fn seal(record: &mut [u8], address: u64) -> bool {
    let Some(body_len) = body_len(record) else { return false };
    seal_body(record, body_len, address);
    true
}

/// `seal` for a record whose body length (`body_len`) the caller already has.
pub fn seal_body(record: &mut [u8], body_len: usize, address: u64) {
    let crc = checksum_at(record.get(..body_len).unwrap_or_default(), address);
    if let Some(slot) = record.get_mut(CRC_OFFSET..CRC_OFFSET + 4) {
        slot.copy_from_slice(&crc.to_le_bytes());
    }
}

/// Overwrites the value of the record at `address` in place (same length) and reseals it.
/// `record` starts at the record header. Returns false when the record does not hold a value of
/// that length.
#[expect(clippy::indexing_slicing, reason = "lengths are checked by the view before slicing")]
pub fn overwrite_value(record: &mut [u8], new_value: &[u8], address: u64) -> bool {
    let Some(view) = RecordView::parse(record) else { return false };
    if view.kind != KIND_VALUE || view.value.len() != new_value.len() {
        return false;
    }
    let start = HEADER_BYTES + view.key.len();
    let end = start + new_value.len();
    record[start..end].copy_from_slice(new_value);
    seal(record, address)
}

/// Rewrites the previous-address field of the record at `address` and reseals it.
#[expect(clippy::indexing_slicing, reason = "lengths are checked by the view before slicing")]
pub fn set_prev_address(record: &mut [u8], prev_address: u64, address: u64) -> bool {
    if RecordView::parse(record).is_none() {
        return false;
    }
    record[PREV_OFFSET..PREV_OFFSET + 8].copy_from_slice(&prev_address.to_le_bytes());
    seal(record, address)
}

pub fn is_invalid(record: &[u8]) -> bool {
    record.get(INVALID_OFFSET).is_some_and(|&b| b != 0)
}

/// A decoded record borrowing its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordView<'a> {
    pub crc: u32,
    pub kind: u8,
    pub prev_address: u64,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

/// What is at a position of a page.
#[derive(Debug, PartialEq, Eq)]
pub enum Slot<'a> {
    Record(RecordView<'a>),
    /// The rest of the page is padding.
    Padding,
}

impl<'a> RecordView<'a> {
    /// Structural decode (lengths and kind); `None` if the bytes cannot be a record.
    pub fn parse(bytes: &'a [u8]) -> Option<RecordView<'a>> {
        let header = bytes.get(..HEADER_BYTES)?;
        let crc = u32_at(header, CRC_OFFSET)?;
        let key_len = u32_at(header, KEY_LEN_OFFSET)? as usize;
        let value_len = u32_at(header, VALUE_LEN_OFFSET)? as usize;
        let kind = *header.get(KIND_OFFSET)?;
        if kind != KIND_VALUE && kind != KIND_TOMBSTONE {
            return None;
        }
        if kind == KIND_TOMBSTONE && value_len != 0 {
            return None;
        }
        let prev_address = u64_at(header, PREV_OFFSET)?;
        let key_end = HEADER_BYTES.checked_add(key_len)?;
        let value_end = key_end.checked_add(value_len)?;
        let key = bytes.get(HEADER_BYTES..key_end)?;
        let value = bytes.get(key_end..value_end)?;
        Some(RecordView { crc, kind, prev_address, key, value })
    }

    pub fn is_tombstone(&self) -> bool {
        self.kind == KIND_TOMBSTONE
    }

    /// Header + key + value bytes (what the checksum covers from offset 4).
    pub fn body_len(&self) -> usize {
        HEADER_BYTES + self.key.len() + self.value.len()
    }

    pub fn stored_len(&self) -> usize {
        stored_len(self.key.len(), self.value.len())
    }

    /// The value, or `None` for a tombstone.
    pub fn value_opt(&self) -> Option<&'a [u8]> {
        (!self.is_tombstone()).then_some(self.value)
    }
}

/// Decodes the slot at the start of `bytes` (the rest of a page). With `crc_address`, the
/// checksum is verified as that of a record stored at that address; `Err` carries what is wrong.
pub fn parse_slot(bytes: &[u8], crc_address: Option<u64>) -> Result<Slot<'_>, String> {
    if bytes.len() < HEADER_BYTES || bytes.get(KIND_OFFSET) == Some(&0) {
        return if bytes.iter().all(|&b| b == 0) {
            Ok(Slot::Padding)
        } else {
            Err("non-zero bytes in page padding".to_string())
        };
    }
    let view = RecordView::parse(bytes).ok_or_else(|| "malformed record header".to_string())?;
    if let Some(address) = crc_address {
        let body = bytes.get(..view.body_len()).ok_or_else(|| "record overruns its page".to_string())?;
        if checksum_at(body, address) != view.crc {
            return Err("record checksum mismatch".to_string());
        }
    }
    if view.stored_len() > bytes.len() {
        return Err("record overruns its page".to_string());
    }
    Ok(Slot::Record(view))
}

/// An owned copy of a record, as reads return it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedRecord {
    pub kind: u8,
    /// Only read-cache records are ever invalid.
    pub invalid: bool,
    pub prev_address: u64,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

impl OwnedRecord {
    pub fn from_view(v: &RecordView<'_>) -> OwnedRecord {
        OwnedRecord {
            kind: v.kind,
            invalid: false,
            prev_address: v.prev_address,
            key: v.key.to_vec(),
            value: v.value.to_vec(),
        }
    }

    pub fn value_opt(&self) -> Option<&[u8]> {
        (self.kind != KIND_TOMBSTONE).then_some(self.value.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_format_doc() {
        let bytes = encode(b"ab", Some(b"xyz"), 0x0102_0304_0506_0708);
        assert_eq!(bytes.len(), 32); // 24 + 2 + 3 = 29, padded to 32
        assert_eq!(&bytes[4..8], &2u32.to_le_bytes());
        assert_eq!(&bytes[8..12], &3u32.to_le_bytes());
        assert_eq!(bytes[12], KIND_VALUE);
        assert_eq!(&bytes[13..16], &[0, 0, 0]);
        assert_eq!(&bytes[16..24], &0x0102_0304_0506_0708u64.to_le_bytes());
        assert_eq!(&bytes[24..26], b"ab");
        assert_eq!(&bytes[26..29], b"xyz");
        assert_eq!(&bytes[29..32], &[0, 0, 0]);
        assert_eq!(&bytes[0..4], &[0; 4], "sealed by the log, not by encode");
        let mut sealed = bytes.clone();
        assert!(seal(&mut sealed, 0x4000));
        let crc = crc32c::crc32c_append(crc32c::crc32c(&0x4000u64.to_le_bytes()), &bytes[4..29]);
        assert_eq!(&sealed[0..4], &crc.to_le_bytes());
        assert_eq!(&sealed[4..], &bytes[4..]);
        let tomb = encode(b"k", None, 0);
        assert_eq!(tomb[12], KIND_TOMBSTONE);
        assert_eq!(&tomb[8..12], &0u32.to_le_bytes());
    }

    #[test]
    fn round_trip_and_in_place_update() {
        let mut bytes = encode(b"key", Some(b"value1"), 77);
        assert!(seal(&mut bytes, 640));
        let Slot::Record(v) = parse_slot(&bytes, Some(640)).unwrap() else { panic!() };
        assert_eq!((v.key, v.value, v.prev_address), (&b"key"[..], &b"value1"[..], 77));
        assert!(overwrite_value(&mut bytes, b"value2", 640));
        assert!(!overwrite_value(&mut bytes, b"longer value", 640));
        assert!(set_prev_address(&mut bytes, 99, 640));
        let Slot::Record(v) = parse_slot(&bytes, Some(640)).unwrap() else { panic!() };
        assert_eq!((v.value, v.prev_address), (&b"value2"[..], 99));
    }

    /// A record's checksum covers its address: bytes moved within a log segment leave whole,
    /// checksum-valid records at other records' addresses, which a read must refuse.
    #[test]
    fn a_record_read_at_another_address_fails_its_checksum() {
        let mut bytes = encode(b"key", Some(b"value"), 0);
        assert!(seal(&mut bytes, 4096));
        assert!(matches!(parse_slot(&bytes, Some(4096)), Ok(Slot::Record(_))));
        for elsewhere in [0, 64, 4088, 4104, 4096 + (1 << 32), 4096 << 20] {
            assert_eq!(parse_slot(&bytes, Some(elsewhere)), Err("record checksum mismatch".to_string()));
        }
        assert!(matches!(parse_slot(&bytes, None), Ok(Slot::Record(_))), "no check asked");
    }

    #[test]
    fn padding_and_garbage_never_panic() {
        assert_eq!(parse_slot(&[0u8; 40], Some(64)), Ok(Slot::Padding));
        assert_eq!(parse_slot(&[0u8; 5], Some(64)), Ok(Slot::Padding));
        assert!(parse_slot(&[0u8, 1, 0, 0, 0], Some(64)).is_err());
        let mut bytes = encode(b"key", Some(b"value"), 1);
        assert!(seal(&mut bytes, 64));
        for len in 0..bytes.len() {
            let _ = parse_slot(&bytes[..len], Some(64));
        }
        // Every bit of header, key and value is covered (the 3 padding bytes are not data).
        for bit in 0..29 * 8 {
            let mut b = bytes.clone();
            b[bit / 8] ^= 1 << (bit % 8);
            if let Ok(Slot::Record(v)) = parse_slot(&b, Some(64)) {
                panic!("flipped bit {bit} still decoded: {v:?}");
            }
        }
        let mut rng = 0x1234_5678u64;
        for _ in 0..2000 {
            let mut buf = [0u8; 64];
            for b in buf.iter_mut() {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                *b = rng as u8;
            }
            let _ = parse_slot(&buf, Some(64));
        }
    }
}
