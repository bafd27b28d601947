//! Byte layout of WAL segments and records; see `docs/format/wal.md`.
//!
//! Decoding never panics: every length is checked against the bytes at hand.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

use std::ops::Range;

use crate::Lsn;

pub const SEGMENT_MAGIC: [u8; 8] = *b"STRWAL01";
/// Version written into new segment headers. Version 2 segments belong to a log that keeps a
/// WAL state file (`state.rs`); version 1 segments (written before it existed) are still read.
pub const FORMAT_VERSION: u32 = 2;
/// Segments of this version or later belong to a log with a WAL state file.
pub const STATE_KEEPING_VERSION: u32 = 2;
/// The oldest segment header version still read.
pub const OLDEST_FORMAT_VERSION: u32 = 1;
pub const SEGMENT_HEADER_BYTES: usize = 32;
pub const RECORD_HEADER_BYTES: usize = 24;
pub const RECORD_ALIGNMENT_BYTES: usize = 8;
/// An all-zero record header written after the last record of every write.
pub const END_MARKER_BYTES: usize = RECORD_HEADER_BYTES;
pub const END_MARKER: [u8; END_MARKER_BYTES] = [0; END_MARKER_BYTES];
/// Bit 31 of `payload_len` marks a durability marker record (empty payload, never replayed).
pub const DURABILITY_MARKER_FLAG: u32 = 1 << 31;
/// The largest payload of one record: what fits in `payload_len` below [`DURABILITY_MARKER_FLAG`].
pub const MAX_PAYLOAD_BYTES: usize = (DURABILITY_MARKER_FLAG - 1) as usize;

/// (offset, size) of each segment header field.
pub mod segment_field {
    pub const MAGIC: (usize, usize) = (0, 8);
    pub const FORMAT_VERSION: (usize, usize) = (8, 4);
    pub const HEADER_CRC: (usize, usize) = (12, 4);
    pub const SEGMENT_ID: (usize, usize) = (16, 8);
    pub const FIRST_LSN: (usize, usize) = (24, 8);
}

/// (offset, size) of each record header field; the payload follows at `RECORD_HEADER_BYTES`.
pub mod record_field {
    pub const CRC: (usize, usize) = (0, 4);
    pub const PAYLOAD_LEN: (usize, usize) = (4, 4);
    pub const LSN: (usize, usize) = (8, 8);
    pub const SYNCED_LSN: (usize, usize) = (16, 8);
}

const CRC_MASK_DELTA: u32 = 0xa282_ead8;

/// leveldb's checksum mask: rotate right by 15, add a constant.
pub fn mask_crc(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(CRC_MASK_DELTA)
}

#[cfg(test)]
pub fn unmask_crc(masked: u32) -> u32 {
    masked.wrapping_sub(CRC_MASK_DELTA).rotate_left(15)
}

/// Bytes a record with this payload occupies on disk, padding included.
pub fn record_bytes(payload_len: usize) -> usize {
    (RECORD_HEADER_BYTES + payload_len).next_multiple_of(RECORD_ALIGNMENT_BYTES)
}

fn read_u32(bytes: &[u8], (offset, _): (usize, usize)) -> Option<u32> {
    let field = bytes.get(offset..offset.checked_add(4)?)?;
    Some(u32::from_le_bytes(field.try_into().ok()?))
}

fn read_u64(bytes: &[u8], (offset, _): (usize, usize)) -> Option<u64> {
    let field = bytes.get(offset..offset.checked_add(8)?)?;
    Some(u64::from_le_bytes(field.try_into().ok()?))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    pub segment_id: u64,
    pub first_lsn: Lsn,
    /// The header's format version: [`FORMAT_VERSION`] when encoding.
    pub version: u32,
}

impl SegmentHeader {
    pub fn encode(&self) -> [u8; SEGMENT_HEADER_BYTES] {
        let mut out = [0u8; SEGMENT_HEADER_BYTES];
        out[..8].copy_from_slice(&SEGMENT_MAGIC);
        out[8..12].copy_from_slice(&self.version.to_le_bytes());
        out[16..24].copy_from_slice(&self.segment_id.to_le_bytes());
        out[24..32].copy_from_slice(&self.first_lsn.to_le_bytes());
        let crc = segment_header_crc(&out);
        out[12..16].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes and checks a header read from the file of segment `expected_id`. The error says
    /// what is wrong with it.
    pub fn decode(bytes: &[u8], expected_id: u64) -> Result<SegmentHeader, String> {
        let header = bytes.get(..SEGMENT_HEADER_BYTES).ok_or_else(|| {
            format!("segment header needs {SEGMENT_HEADER_BYTES} bytes, file has {}", bytes.len())
        })?;
        let (magic_offset, magic_bytes) = segment_field::MAGIC;
        if header.get(magic_offset..magic_offset + magic_bytes) != Some(SEGMENT_MAGIC.as_slice()) {
            return Err("bad segment magic".to_string());
        }
        let version = read_u32(header, segment_field::FORMAT_VERSION).unwrap_or(0);
        if !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(format!("unsupported segment format version {version}"));
        }
        let stored_crc = read_u32(header, segment_field::HEADER_CRC).unwrap_or(0);
        if stored_crc != segment_header_crc(header) {
            return Err("segment header checksum mismatch".to_string());
        }
        let segment_id = read_u64(header, segment_field::SEGMENT_ID).unwrap_or(0);
        let first_lsn = read_u64(header, segment_field::FIRST_LSN).unwrap_or(0);
        if segment_id != expected_id {
            return Err(format!("segment header names segment {segment_id}, file name says {expected_id}"));
        }
        if first_lsn == 0 || first_lsn > crate::MAX_LSN {
            return Err(format!("segment header has first lsn {first_lsn}, outside 1..=2^63-1"));
        }
        Ok(SegmentHeader { segment_id, first_lsn, version })
    }
}

/// Masked crc of header bytes 0..12 followed by 16..32. `header` must hold at least 32 bytes;
/// shorter input yields a checksum that matches nothing encoded.
fn segment_header_crc(header: &[u8]) -> u32 {
    let (Some(before), Some(after)) = (header.get(..12), header.get(16..SEGMENT_HEADER_BYTES)) else {
        return 0;
    };
    mask_crc(crc32c::crc32c_append(crc32c::crc32c(before), after))
}

/// Appends one encoded data record (header, payload, zero padding) to `out`.
/// The caller guarantees `payload.len() <= MAX_PAYLOAD_BYTES` and `synced_lsn < lsn`.
pub fn encode_record(lsn: Lsn, synced_lsn: Lsn, payload: &[u8], out: &mut Vec<u8>) {
    debug_assert!(payload.len() <= MAX_PAYLOAD_BYTES);
    encode(lsn, synced_lsn, payload.len() as u32, payload, out);
}

/// Appends one encoded durability marker: a record with an empty payload whose `synced_lsn` says
/// that every lsn up to it was durable before the marker was written. The caller guarantees
/// `synced_lsn < lsn`.
pub fn encode_durability_marker(lsn: Lsn, synced_lsn: Lsn, out: &mut Vec<u8>) {
    encode(lsn, synced_lsn, DURABILITY_MARKER_FLAG, &[], out);
}

fn encode(lsn: Lsn, synced_lsn: Lsn, payload_len_field: u32, payload: &[u8], out: &mut Vec<u8>) {
    debug_assert!(synced_lsn < lsn);
    let mut header = [0u8; RECORD_HEADER_BYTES];
    header[4..8].copy_from_slice(&payload_len_field.to_le_bytes());
    header[8..16].copy_from_slice(&lsn.to_le_bytes());
    header[16..24].copy_from_slice(&synced_lsn.to_le_bytes());
    let crc = mask_crc(crc32c::crc32c_append(crc32c::crc32c(&header[4..]), payload));
    header[..4].copy_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(payload);
    out.resize(out.len() + (record_bytes(payload.len()) - RECORD_HEADER_BYTES - payload.len()), 0);
}

/// What sits at one record position of a segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordSlot {
    /// The position is exactly the end of the bytes.
    EndOfFile,
    /// An all-zero record header: the end marker or preallocated space.
    EndMarker,
    /// A record that passes every check. `payload` indexes the input slice (empty for a marker).
    Valid {
        lsn: Lsn,
        synced_lsn: Lsn,
        payload: Range<usize>,
        record_bytes: usize,
        is_durability_marker: bool,
    },
    /// Anything else; the text says what is wrong.
    Invalid(String),
}

/// Decodes the record starting at `offset` of `bytes` (a whole segment file). Recovery reads
/// segments in windows and uses [`decode_record_in`]; tests check it against this.
#[cfg(test)]
pub fn decode_record(bytes: &[u8], offset: usize) -> RecordSlot {
    decode_record_in(bytes.get(offset..).unwrap_or_default(), bytes.len(), offset)
}

/// `decode_record` for a caller holding only part of a segment file of `file_len` bytes: `rest`
/// holds the file's bytes from `offset` on, at least as many as [`record_bytes_needed`] says (or
/// up to the end of the file). Given that, the result is exactly what `decode_record` returns on
/// the whole file; a shorter `rest` yields `Invalid`, never a panic. `payload` is a range of file
/// offsets.
pub fn decode_record_in(rest: &[u8], file_len: usize, offset: usize) -> RecordSlot {
    let Some(bytes_left) = file_len.checked_sub(offset) else {
        return RecordSlot::Invalid(format!("record offset {offset} is past the end of the file"));
    };
    if bytes_left == 0 {
        return RecordSlot::EndOfFile;
    }
    if bytes_left < RECORD_HEADER_BYTES {
        return RecordSlot::Invalid(format!("truncated record header: {bytes_left} bytes left in the file"));
    }
    let Some(header) = rest.get(..RECORD_HEADER_BYTES) else {
        return RecordSlot::Invalid(format!("record header at offset {offset} was not read"));
    };
    if header.iter().all(|&b| b == 0) {
        return RecordSlot::EndMarker;
    }
    let fields = (
        read_u32(header, record_field::CRC),
        read_u32(header, record_field::PAYLOAD_LEN),
        read_u64(header, record_field::LSN),
        read_u64(header, record_field::SYNCED_LSN),
    );
    let (Some(stored_crc), Some(payload_len_field), Some(lsn), Some(synced_lsn)) = fields else {
        return RecordSlot::Invalid("unreadable record header".to_string());
    };
    let is_durability_marker = payload_len_field & DURABILITY_MARKER_FLAG != 0;
    let payload_len = (payload_len_field & !DURABILITY_MARKER_FLAG) as usize;
    if is_durability_marker && payload_len != 0 {
        return RecordSlot::Invalid(format!("durability marker claims a payload of {payload_len} bytes"));
    }
    let total_bytes = record_bytes(payload_len);
    if total_bytes > bytes_left {
        return RecordSlot::Invalid(format!(
            "record of {total_bytes} bytes runs past the end of the file ({bytes_left} bytes left)"
        ));
    }
    let Some(record) = rest.get(..total_bytes) else {
        return RecordSlot::Invalid(format!("record bytes from offset {offset} were not read"));
    };
    let payload_end = RECORD_HEADER_BYTES + payload_len;
    let (Some(payload), Some(padding)) =
        (record.get(RECORD_HEADER_BYTES..payload_end), record.get(payload_end..))
    else {
        return RecordSlot::Invalid("record length is inconsistent".to_string());
    };
    if padding.iter().any(|&b| b != 0) {
        return RecordSlot::Invalid("non-zero record padding".to_string());
    }
    let covered = header.get(4..).unwrap_or_default();
    if mask_crc(crc32c::crc32c_append(crc32c::crc32c(covered), payload)) != stored_crc {
        return RecordSlot::Invalid(format!("record checksum mismatch (header says lsn {lsn})"));
    }
    if synced_lsn >= lsn {
        return RecordSlot::Invalid(format!("record lsn {lsn} claims synced lsn {synced_lsn}"));
    }
    let payload_start = offset + RECORD_HEADER_BYTES;
    RecordSlot::Valid {
        lsn,
        synced_lsn,
        payload: payload_start..payload_start + payload_len,
        record_bytes: total_bytes,
        is_durability_marker,
    }
}

/// How many bytes from a record's start [`decode_record_in`] needs to decide about it, given the
/// first bytes there (`start`: a header's worth, or fewer at the end of the file) and the bytes
/// the file holds from there: the header, and the whole record its `payload_len` claims unless
/// that runs past the end of the file (garbage can claim up to `record_bytes(MAX_PAYLOAD_BYTES)`).
pub fn record_bytes_needed(start: &[u8], bytes_left: usize) -> usize {
    match read_u32(start, record_field::PAYLOAD_LEN) {
        Some(payload_len_field) => {
            let payload_len = (payload_len_field & !DURABILITY_MARKER_FLAG) as usize;
            // A marker with a payload is rejected on its header alone: read no more of it.
            let bad_marker = payload_len_field & DURABILITY_MARKER_FLAG != 0 && payload_len != 0;
            let claimed = record_bytes(payload_len);
            if bad_marker || claimed > bytes_left {
                RECORD_HEADER_BYTES
            } else {
                claimed
            }
        }
        None => RECORD_HEADER_BYTES,
    }
}

/// Length of the record at `offset` in a buffer of records this process encoded, or `None` when
/// fewer than a header's bytes remain.
pub fn encoded_record_bytes_at(bytes: &[u8], offset: usize) -> Option<usize> {
    let header = bytes.get(offset..offset.checked_add(RECORD_HEADER_BYTES)?)?;
    Some(record_bytes((read_u32(header, record_field::PAYLOAD_LEN)? & !DURABILITY_MARKER_FLAG) as usize))
}

#[cfg(test)]
mod tests {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    /// A checksum-valid header whose first lsn is past the lsn space is refused: an empty such
    /// segment would be continued at that lsn, and the next append would overflow.
    #[test]
    fn a_header_first_lsn_past_the_lsn_space_is_refused() {
        for (first_lsn, ok) in
            [(0, false), (1, true), (crate::MAX_LSN, true), (crate::MAX_LSN + 1, false), (u64::MAX, false)]
        {
            let bytes = SegmentHeader { segment_id: 3, first_lsn, version: FORMAT_VERSION }.encode();
            assert_eq!(SegmentHeader::decode(&bytes, 3).is_ok(), ok, "first lsn {first_lsn}");
        }
    }

    /// Rows `| offset | size | field | ... |` of the table under `heading` in wal.md.
    fn documented_fields(doc: &str, heading: &str) -> Vec<(usize, String, String)> {
        let section = doc.split(heading).nth(1).unwrap_or_else(|| panic!("wal.md lacks {heading:?}"));
        let mut rows = Vec::new();
        for line in section.lines().skip(1) {
            if line.starts_with('#') {
                break;
            }
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            if cells.len() < 4 {
                continue;
            }
            let Ok(offset) = cells[1].parse::<usize>() else { continue };
            rows.push((offset, cells[2].to_string(), cells[3].trim_matches('`').to_string()));
        }
        rows
    }

    #[test]
    fn documented_offsets_match_the_code() {
        let doc = include_str!("../../../docs/format/wal.md");
        let header = documented_fields(doc, "## Segment header");
        let expected_header = [
            (segment_field::MAGIC, "magic"),
            (segment_field::FORMAT_VERSION, "format_version"),
            (segment_field::HEADER_CRC, "header_crc"),
            (segment_field::SEGMENT_ID, "segment_id"),
            (segment_field::FIRST_LSN, "first_lsn"),
        ];
        assert_eq!(header.len(), expected_header.len(), "{header:?}");
        for ((offset, size, name), ((code_offset, code_size), code_name)) in
            header.iter().zip(expected_header)
        {
            assert_eq!(
                (*offset, size.as_str(), name.as_str()),
                (code_offset, code_size.to_string().as_str(), code_name)
            );
        }
        let end = segment_field::FIRST_LSN.0 + segment_field::FIRST_LSN.1;
        assert_eq!(end, SEGMENT_HEADER_BYTES);
        assert!(doc.contains(&format!("Every segment starts with a {SEGMENT_HEADER_BYTES}-byte header")));

        let record = documented_fields(doc, "## Record");
        assert_eq!(record.len(), 5, "{record:?}");
        let expected_record = [
            (record_field::CRC, "crc"),
            (record_field::PAYLOAD_LEN, "payload_len"),
            (record_field::LSN, "lsn"),
            (record_field::SYNCED_LSN, "synced_lsn"),
        ];
        for ((offset, size, name), ((code_offset, code_size), code_name)) in
            record.iter().zip(expected_record)
        {
            assert_eq!(
                (*offset, size.as_str(), name.as_str()),
                (code_offset, code_size.to_string().as_str(), code_name)
            );
        }
        let payload_row = &record[expected_record.len()];
        assert_eq!((payload_row.0, payload_row.2.as_str()), (RECORD_HEADER_BYTES, "payload"));
        assert_eq!(record_field::SYNCED_LSN.0 + record_field::SYNCED_LSN.1, RECORD_HEADER_BYTES);
        assert!(doc.contains(&format!("Each record is a {RECORD_HEADER_BYTES}-byte header")));
        assert!(doc.contains(&format!("next multiple of {RECORD_ALIGNMENT_BYTES}")));
        assert!(doc.contains(&format!("{END_MARKER_BYTES} zero bytes")));
        assert!(doc.contains(&format!("ASCII `{}`", std::str::from_utf8(&SEGMENT_MAGIC).unwrap())));
        assert!(doc.contains(&format!("currently `{FORMAT_VERSION}`")));
        assert!(doc.contains(&format!("+ 0x{CRC_MASK_DELTA:08x}")));
        assert!(
            doc.contains(&format!("bit 31 (`0x{DURABILITY_MARKER_FLAG:08x}`) set marks a durability marker"))
        );
        assert!(doc.contains(&format!("at most `0x{MAX_PAYLOAD_BYTES:08x}`")));
        assert!(doc.contains(&format!("`payload_len` is\nexactly `0x{DURABILITY_MARKER_FLAG:08x}`")));
    }

    #[test]
    fn encoded_fields_sit_at_the_documented_offsets() {
        let header = SegmentHeader {
            segment_id: 0x0102_0304_0506_0708,
            first_lsn: 0x1112_1314_1516_1718,
            version: FORMAT_VERSION,
        }
        .encode();
        let field = |(o, s): (usize, usize)| &header[o..o + s];
        assert_eq!(field(segment_field::MAGIC), b"STRWAL01");
        assert_eq!(field(segment_field::FORMAT_VERSION), &2u32.to_le_bytes());
        assert_eq!(field(segment_field::SEGMENT_ID), &0x0102_0304_0506_0708u64.to_le_bytes());
        assert_eq!(field(segment_field::FIRST_LSN), &0x1112_1314_1516_1718u64.to_le_bytes());
        let mut covered = header[..12].to_vec();
        covered.extend_from_slice(&header[16..]);
        assert_eq!(field(segment_field::HEADER_CRC), &mask_crc(crc32c::crc32c(&covered)).to_le_bytes());

        let mut record = Vec::new();
        encode_record(7, 5, b"abc", &mut record);
        let field = |(o, s): (usize, usize)| &record[o..o + s];
        assert_eq!(record.len(), 32);
        assert_eq!(field(record_field::PAYLOAD_LEN), &3u32.to_le_bytes());
        assert_eq!(field(record_field::LSN), &7u64.to_le_bytes());
        assert_eq!(field(record_field::SYNCED_LSN), &5u64.to_le_bytes());
        assert_eq!(&record[24..27], b"abc");
        assert_eq!(&record[27..], &[0; 5]);
        let crc = mask_crc(crc32c::crc32c(&record[4..27]));
        assert_eq!(field(record_field::CRC), &crc.to_le_bytes());

        let mut marker = Vec::new();
        encode_durability_marker(9, 8, &mut marker);
        let field = |(o, s): (usize, usize)| &marker[o..o + s];
        assert_eq!(marker.len(), RECORD_HEADER_BYTES);
        assert_eq!(field(record_field::PAYLOAD_LEN), &0x8000_0000u32.to_le_bytes());
        assert_eq!(field(record_field::LSN), &9u64.to_le_bytes());
        assert_eq!(field(record_field::SYNCED_LSN), &8u64.to_le_bytes());
        let crc = mask_crc(crc32c::crc32c(&marker[4..24]));
        assert_eq!(field(record_field::CRC), &crc.to_le_bytes());
    }

    #[test]
    fn durability_markers_decode_as_markers_and_only_without_payload() {
        assert!(MAX_PAYLOAD_BYTES < DURABILITY_MARKER_FLAG as usize);
        let mut bytes = Vec::new();
        encode_durability_marker(5, 4, &mut bytes);
        encode_record(6, 5, &[], &mut bytes);
        assert_eq!(
            decode_record(&bytes, 0),
            RecordSlot::Valid {
                lsn: 5,
                synced_lsn: 4,
                payload: 24..24,
                record_bytes: 24,
                is_durability_marker: true
            }
        );
        assert!(matches!(
            decode_record(&bytes, 24),
            RecordSlot::Valid { lsn: 6, is_durability_marker: false, .. }
        ));
        assert_eq!(encoded_record_bytes_at(&bytes, 0), Some(24));

        // A marker flag on a record with a payload is invalid even with a matching checksum.
        let mut flagged = Vec::new();
        encode_record(7, 6, b"12345678", &mut flagged);
        flagged[4..8].copy_from_slice(&(8 | DURABILITY_MARKER_FLAG).to_le_bytes());
        let crc = mask_crc(crc32c::crc32c(&flagged[4..32]));
        flagged[..4].copy_from_slice(&crc.to_le_bytes());
        assert!(
            matches!(decode_record(&flagged, 0), RecordSlot::Invalid(msg) if msg.contains("marker")),
            "{:?}",
            decode_record(&flagged, 0)
        );
        for bit in 0..8 * RECORD_HEADER_BYTES {
            let mut damaged = bytes.clone();
            damaged[bit / 8] ^= 1 << (bit % 8);
            assert!(
                matches!(decode_record(&damaged, 0), RecordSlot::Invalid(_) | RecordSlot::EndMarker),
                "flip of bit {bit} of a marker went unnoticed"
            );
        }
    }

    #[test]
    fn mask_round_trips_and_changes_the_value() {
        for crc in [0u32, 1, 0xdead_beef, u32::MAX] {
            assert_eq!(unmask_crc(mask_crc(crc)), crc);
            assert_ne!(mask_crc(crc), crc);
        }
    }

    #[test]
    fn segment_header_round_trip_and_rejections() {
        let header = SegmentHeader { segment_id: 9, first_lsn: 100, version: FORMAT_VERSION };
        let bytes = header.encode();
        assert_eq!(SegmentHeader::decode(&bytes, 9), Ok(header));
        assert!(SegmentHeader::decode(&bytes, 8).unwrap_err().contains("names segment 9"));
        assert!(SegmentHeader::decode(&bytes[..31], 9).is_err());
        for byte in 0..SEGMENT_HEADER_BYTES {
            let mut damaged = bytes;
            damaged[byte] ^= 0x10;
            assert!(SegmentHeader::decode(&damaged, 9).is_err(), "flip in byte {byte} accepted");
        }
        let zero_lsn = SegmentHeader { segment_id: 9, first_lsn: 0, version: FORMAT_VERSION }.encode();
        assert!(SegmentHeader::decode(&zero_lsn, 9).is_err());
        // Segments written before the WAL state file (version 1) are still read; newer are not.
        let old = SegmentHeader { segment_id: 9, first_lsn: 5, version: 1 };
        assert_eq!(SegmentHeader::decode(&old.encode(), 9), Ok(old));
        let newer = SegmentHeader { segment_id: 9, first_lsn: 5, version: FORMAT_VERSION + 1 };
        assert!(SegmentHeader::decode(&newer.encode(), 9).unwrap_err().contains("version 3"));
    }

    #[test]
    fn record_round_trip_for_many_sizes() {
        for len in [0usize, 1, 7, 8, 9, 100, 4096] {
            let payload: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let mut bytes = vec![0xAB; 8];
            encode_record(42, 40, &payload, &mut bytes);
            assert_eq!(bytes.len(), 8 + record_bytes(len));
            assert_eq!(bytes.len() % 8, 0);
            assert_eq!(encoded_record_bytes_at(&bytes, 8), Some(record_bytes(len)));
            match decode_record(&bytes, 8) {
                RecordSlot::Valid {
                    lsn,
                    synced_lsn,
                    payload: range,
                    record_bytes: n,
                    is_durability_marker,
                } => {
                    assert_eq!(
                        (lsn, synced_lsn, n, is_durability_marker),
                        (42, 40, record_bytes(len), false)
                    );
                    assert_eq!(&bytes[range], payload.as_slice());
                }
                other => panic!("len {len}: {other:?}"),
            }
            assert_eq!(decode_record(&bytes, bytes.len()), RecordSlot::EndOfFile);
        }
    }

    #[test]
    fn end_marker_and_damage_are_recognised() {
        let mut bytes = Vec::new();
        encode_record(3, 2, b"payload!", &mut bytes);
        bytes.extend_from_slice(&END_MARKER);
        let first_len = record_bytes(8);
        assert_eq!(decode_record(&bytes, first_len), RecordSlot::EndMarker);
        for byte in 0..first_len {
            for bit in 0..8 {
                let mut damaged = bytes.clone();
                damaged[byte] ^= 1 << bit;
                assert!(
                    matches!(decode_record(&damaged, 0), RecordSlot::Invalid(_)),
                    "flip of bit {bit} in byte {byte} went unnoticed"
                );
            }
        }
        assert!(matches!(decode_record(&bytes[..20], 0), RecordSlot::Invalid(_)));
        assert!(matches!(decode_record(&bytes[..first_len - 1], 0), RecordSlot::Invalid(_)));
        assert!(matches!(decode_record(&bytes, bytes.len() + 8), RecordSlot::Invalid(_)));
        let mut bad_synced = Vec::new();
        encode_record(3, 2, b"", &mut bad_synced);
        bad_synced[16..24].copy_from_slice(&3u64.to_le_bytes());
        let crc = mask_crc(crc32c::crc32c(&bad_synced[4..24]));
        bad_synced[..4].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(decode_record(&bad_synced, 0), RecordSlot::Invalid(msg) if msg.contains("synced")));
    }

    #[test]
    fn decoder_never_panics_on_mutated_or_random_bytes() {
        let mut rng = SmallRng::seed_from_u64(0x5eed_0001);
        let mut base =
            SegmentHeader { segment_id: 1, first_lsn: 1, version: FORMAT_VERSION }.encode().to_vec();
        for lsn in 1..=20u64 {
            if lsn % 5 == 0 {
                encode_durability_marker(lsn, lsn - 1, &mut base);
                continue;
            }
            let payload: Vec<u8> = (0..rng.gen_range(0..64)).map(|_| rng.gen()).collect();
            encode_record(lsn, lsn - 1, &payload, &mut base);
        }
        for round in 0..3000 {
            let mut bytes = base.clone();
            match round % 4 {
                0 => {
                    for _ in 0..rng.gen_range(1..8) {
                        let i = rng.gen_range(0..bytes.len());
                        bytes[i] = rng.gen();
                    }
                }
                1 => bytes.truncate(rng.gen_range(0..bytes.len())),
                2 => {
                    let i = rng.gen_range(0..bytes.len() - 4);
                    bytes[i..i + 4].copy_from_slice(&rng.gen::<u32>().to_le_bytes());
                }
                _ => bytes = (0..rng.gen_range(0..300)).map(|_| rng.gen()).collect(),
            }
            let _ = SegmentHeader::decode(&bytes, 1);
            let mut offset = SEGMENT_HEADER_BYTES;
            while let RecordSlot::Valid { record_bytes, .. } = decode_record(&bytes, offset) {
                offset += record_bytes;
            }
            for offset in (0..bytes.len() + 16).step_by(8) {
                let _ = decode_record(&bytes, offset);
                let _ = encoded_record_bytes_at(&bytes, offset);
            }
        }
    }
}
