//! The byte form of a [`WriteBatch`] (docs/format/write-batch.md), used as a WAL record payload.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

use crate::{BatchOp, WriteBatch};

const TAG_PUT: u8 = 1;
const TAG_DELETE: u8 = 2;

/// Encodes `batch`; `encoded_len` bytes exactly.
pub fn encode_batch(batch: &WriteBatch) -> Vec<u8> {
    let mut out = Vec::with_capacity(encoded_len(batch));
    out.extend_from_slice(&(batch.len() as u32).to_le_bytes());
    for op in batch.ops() {
        match op {
            BatchOp::Put { key, value } => {
                out.push(TAG_PUT);
                out.extend_from_slice(&(key.len() as u32).to_le_bytes());
                out.extend_from_slice(key);
                out.extend_from_slice(&(value.len() as u32).to_le_bytes());
                out.extend_from_slice(value);
            }
            BatchOp::Delete { key } => {
                out.push(TAG_DELETE);
                out.extend_from_slice(&(key.len() as u32).to_le_bytes());
                out.extend_from_slice(key);
            }
        }
    }
    out
}

pub fn encoded_len(batch: &WriteBatch) -> usize {
    4 + batch.ops().iter().map(|op| 5 + op.key().len() + op.value().map_or(0, |v| 4 + v.len())).sum::<usize>()
}

/// Decodes an encoded batch. The error text says what is wrong and at which byte offset.
pub fn decode_batch(bytes: &[u8]) -> Result<WriteBatch, String> {
    let mut reader = Reader { bytes, pos: 0 };
    let count = reader.u32()?;
    let mut batch = WriteBatch::new();
    for _ in 0..count {
        let tag_pos = reader.pos;
        let tag = reader.take(1)?.first().copied().unwrap_or_default();
        let key_len = reader.u32()? as usize;
        let key = reader.take(key_len)?.to_vec();
        match tag {
            TAG_PUT => {
                let value_len = reader.u32()? as usize;
                let value = reader.take(value_len)?.to_vec();
                batch.push(BatchOp::Put { key, value });
            }
            TAG_DELETE => {
                batch.push(BatchOp::Delete { key });
            }
            other => return Err(format!("unknown operation tag {other} at byte {tag_pos}")),
        }
    }
    if reader.pos != bytes.len() {
        return Err(format!("{} trailing bytes after {count} operations", bytes.len() - reader.pos));
    }
    Ok(batch)
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8], String> {
        let end = self.pos.checked_add(len).filter(|&end| end <= self.bytes.len());
        let slice = end.and_then(|end| self.bytes.get(self.pos..end));
        match slice {
            Some(s) => {
                self.pos += len;
                Ok(s)
            }
            None => Err(format!("truncated: need {len} bytes at byte {} of {}", self.pos, self.bytes.len())),
        }
    }

    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes(b.try_into().map_err(|_| "short u32".to_string())?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> WriteBatch {
        let mut b = WriteBatch::new();
        b.put(b"k1".to_vec(), b"v1".to_vec()).delete(b"k2".to_vec()).put(b"".to_vec(), b"".to_vec());
        b
    }

    #[test]
    fn round_trip() {
        let b = sample();
        let bytes = encode_batch(&b);
        assert_eq!(bytes.len(), encoded_len(&b));
        assert_eq!(decode_batch(&bytes).unwrap(), b);
    }

    /// Checks the layout documented in docs/format/write-batch.md.
    #[test]
    fn layout_matches_format_doc() {
        let mut b = WriteBatch::new();
        b.put(b"ab".to_vec(), b"xyz".to_vec()).delete(b"c".to_vec());
        let bytes = encode_batch(&b);
        assert_eq!(&bytes[0..4], &2u32.to_le_bytes());
        assert_eq!(bytes[4], 1);
        assert_eq!(&bytes[5..9], &2u32.to_le_bytes());
        assert_eq!(&bytes[9..11], b"ab");
        assert_eq!(&bytes[11..15], &3u32.to_le_bytes());
        assert_eq!(&bytes[15..18], b"xyz");
        assert_eq!(bytes[18], 2);
        assert_eq!(&bytes[19..23], &1u32.to_le_bytes());
        assert_eq!(&bytes[23..24], b"c");
        assert_eq!(bytes.len(), 24);
    }

    #[test]
    fn truncation_and_garbage_are_errors_not_panics() {
        let bytes = encode_batch(&sample());
        for len in 0..bytes.len() {
            assert!(decode_batch(&bytes[..len]).is_err(), "prefix of {len} bytes decoded");
        }
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert!(decode_batch(&trailing).is_err());
        let mut bad_tag = bytes;
        bad_tag[4] = 9;
        assert!(decode_batch(&bad_tag).is_err());
        assert!(decode_batch(&[0xff; 16]).is_err());
    }
}
