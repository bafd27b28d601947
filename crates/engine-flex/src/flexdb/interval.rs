//! A decoded interval as the interval cache holds it (§5.3): the interval's bytes exactly as read
//! from the table file, plus where each record's key and value sit in them. Loading one is a
//! single checksum pass over the buffer and one small allocation, not two per record; a lookup is
//! a binary search over key slices of that buffer.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

use super::record;

/// Where one record sits in `IntervalData::bytes`: from the previous span's `end` (0 for the
/// first) to `key_start` is its header, `key_start..value_start` its key, `value_start..end` its
/// value. `u32` positions: `decode` refuses buffers of 4 GiB or more.
#[derive(Clone, Copy, Debug)]
pub struct Span {
    key_start: u32,
    value_start: u32,
    end: u32,
}

impl Span {
    fn key(self) -> std::ops::Range<usize> {
        self.key_start as usize..self.value_start as usize
    }

    fn value(self) -> std::ops::Range<usize> {
        self.value_start as usize..self.end as usize
    }
}

/// Invariant: the spans tile `bytes` in order, every record passed its checksum (or was encoded
/// here), keys strictly increase. Built by `decode`, or by `push_checked`/`push_new` from such.
#[derive(Clone, Debug, Default)]
pub struct IntervalData {
    bytes: Vec<u8>,
    spans: Vec<Span>,
}

/// Bytes counted per record for its span.
const SPAN_BYTES: u64 = std::mem::size_of::<Span>() as u64;
/// Per-interval overhead (Arc, two Vec headers, cache slot) counted against the cache budget.
const INTERVAL_OVERHEAD_BYTES: u64 = 96;

impl IntervalData {
    /// Checks every record of `bytes` (which must end on a record boundary) and that keys strictly
    /// increase. Errors carry the byte position of the bad record inside `bytes`.
    pub fn decode(bytes: Vec<u8>) -> Result<IntervalData, (usize, String)> {
        IntervalData::decode_reusing(bytes, Vec::new())
    }

    /// `decode`, keeping the spans in `spans` (cleared first): the buffer of an evicted interval
    /// (`into_buffers`), so a cache miss does not allocate.
    pub fn decode_reusing(bytes: Vec<u8>, mut spans: Vec<Span>) -> Result<IntervalData, (usize, String)> {
        if u32::try_from(bytes.len()).is_err() {
            return Err((0, format!("interval of {} bytes is larger than 4 GiB", bytes.len())));
        }
        spans.clear();
        let mut pos = 0;
        while pos < bytes.len() {
            let h = record::check(bytes.get(pos..).unwrap_or_default()).map_err(|e| (pos, e))?;
            let at = |offset: usize| (pos + offset) as u32; // < bytes.len(): checked above
            let span = Span {
                key_start: at(h.header_len),
                value_start: at(h.header_len + h.key_len),
                end: at(h.record_len()),
            };
            let key = bytes.get(span.key()).unwrap_or_default();
            if let Some(prev) = spans.last() {
                if bytes.get(prev.key()).unwrap_or_default() >= key {
                    return Err((pos, "keys out of order".into()));
                }
            } else {
                // Records of an interval are alike in size: one allocation, not log2(n) regrowths.
                spans.reserve_exact(bytes.len() / h.record_len().max(1) + 1);
            }
            spans.push(span);
            pos = span.end as usize;
        }
        Ok(IntervalData { bytes, spans })
    }

    /// The interval's two heap buffers, to decode another interval into.
    pub fn into_buffers(self) -> (Vec<u8>, Vec<Span>) {
        (self.bytes, self.spans)
    }

    /// An empty interval to build with `push_checked` and `push_new`.
    pub fn with_capacity(bytes: usize, records: usize) -> IntervalData {
        IntervalData { bytes: Vec::with_capacity(bytes), spans: Vec::with_capacity(records) }
    }

    /// Appends a copy of record `i` of `other` (checked when `other` was decoded). The caller
    /// keeps keys strictly increasing.
    pub fn push_checked(&mut self, other: &IntervalData, i: usize) {
        let Some(s) = other.spans.get(i) else { return };
        let from = other.record_start(i);
        let start = self.bytes.len();
        self.bytes.extend_from_slice(other.bytes.get(from..s.end as usize).unwrap_or_default());
        let moved = |at: u32| (at as usize - from + start) as u32;
        self.spans.push(Span {
            key_start: moved(s.key_start),
            value_start: moved(s.value_start),
            end: moved(s.end),
        });
    }

    /// Appends a new record for `key` and `value`. The caller keeps keys strictly increasing and
    /// the interval below 4 GiB (intervals are split far below that).
    pub fn push_new(&mut self, key: &[u8], value: &[u8]) {
        record::encode_into(key, value, &mut self.bytes);
        let end = self.bytes.len();
        let value_start = end - value.len();
        self.spans.push(Span {
            key_start: (value_start - key.len()) as u32,
            value_start: value_start as u32,
            end: end as u32,
        });
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The interval's bytes as stored in the table file.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn key(&self, i: usize) -> &[u8] {
        self.spans.get(i).and_then(|s| self.bytes.get(s.key())).unwrap_or_default()
    }

    pub fn value(&self, i: usize) -> &[u8] {
        self.spans.get(i).and_then(|s| self.bytes.get(s.value())).unwrap_or_default()
    }

    /// Byte position of record `i` inside the interval; the interval's size for `i == len()`.
    pub fn record_start(&self, i: usize) -> usize {
        match i.checked_sub(1) {
            None if self.spans.is_empty() => self.bytes.len(),
            None => 0,
            Some(prev) => self.spans.get(prev).map_or(self.bytes.len(), |s| s.end as usize),
        }
    }

    pub fn record_len(&self, i: usize) -> usize {
        self.spans.get(i).map_or(0, |s| s.end as usize - self.record_start(i))
    }

    /// `Ok(i)` if record `i` has `key`, else `Err(i)` where it would be inserted.
    pub fn find(&self, key: &[u8]) -> Result<usize, usize> {
        self.spans.binary_search_by(|s| self.bytes.get(s.key()).unwrap_or_default().cmp(key))
    }

    /// The number of leading records whose key satisfies `pred` (which must hold for a prefix).
    /// Checks both ends before searching: a scan's windows after its first start at an
    /// interval's first record and most end at its last, and a cached interval's bytes are
    /// usually not in the CPU cache, so each probe of a binary search is a cache miss.
    pub fn partition_point(&self, mut pred: impl FnMut(&[u8]) -> bool) -> usize {
        let mut holds = |s: &Span| pred(self.bytes.get(s.key()).unwrap_or_default());
        match (self.spans.first(), self.spans.last()) {
            (Some(first), _) if !holds(first) => 0,
            (_, Some(last)) if holds(last) => self.spans.len(),
            (None, _) | (_, None) => 0,
            _ => {
                let inner = self.spans.get(1..self.spans.len() - 1).unwrap_or_default();
                1 + inner.partition_point(holds)
            }
        }
    }

    /// (key, value) of every record, in key order.
    #[cfg(test)]
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&[u8], &[u8])> + '_ {
        (0..self.len()).map(move |i| (self.key(i), self.value(i)))
    }

    /// Of `memory_bytes`, the allocated bytes the interval does not use.
    pub fn slack_bytes(&self) -> u64 {
        (self.bytes.capacity() - self.bytes.len()) as u64
            + (self.spans.capacity() - self.spans.len()) as u64 * SPAN_BYTES
    }

    /// What the interval holds allocated: capacities, not lengths (a buffer reused from an evicted
    /// interval, or one the committer sized ahead, may be larger than its contents).
    pub fn memory_bytes(&self) -> u64 {
        INTERVAL_OVERHEAD_BYTES + self.bytes.capacity() as u64 + self.spans.capacity() as u64 * SPAN_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_finds_and_reports_bad_records_by_position() {
        let mut bytes = Vec::new();
        for k in [&b"a"[..], b"c", b"e"] {
            record::encode_into(k, &[k[0]; 10], &mut bytes);
        }
        let d = IntervalData::decode(bytes.clone()).unwrap();
        assert_eq!(d.len(), 3);
        assert_eq!(d.find(b"c"), Ok(1));
        assert_eq!(d.find(b"d"), Err(2));
        assert_eq!(d.value(2), &[b'e'; 10]);
        assert_eq!(d.record_start(3), bytes.len());
        assert_eq!(d.record_start(1), d.record_len(0));
        assert_eq!(d.iter().rev().map(|(k, _)| k.to_vec()).collect::<Vec<_>>(), [b"e", b"c", b"a"]);
        let second = d.record_start(1);
        let mut bad = bytes.clone();
        bad[second + 7] ^= 1;
        assert_eq!(IntervalData::decode(bad).unwrap_err().0, second);
        let mut unsorted = bytes[second..].to_vec();
        unsorted.extend_from_slice(&bytes[..second]);
        assert!(IntervalData::decode(unsorted).is_err());
        assert!(IntervalData::decode(bytes[..bytes.len() - 1].to_vec()).is_err());
        assert!(IntervalData::decode(Vec::new()).unwrap().is_empty());
        assert!(IntervalData::decode(vec![0x13; 64]).is_err());
    }

    #[test]
    fn partition_point_agrees_with_a_search_at_every_cut() {
        for n in 0..6u8 {
            let mut bytes = Vec::new();
            for k in 0..n {
                record::encode_into(&[2 * k + 1], b"v", &mut bytes);
            }
            let d = IntervalData::decode(bytes).unwrap();
            for cut in 0..=2 * n + 1 {
                let want = d.iter().filter(|(k, _)| k[0] < cut).count();
                assert_eq!(d.partition_point(|k| k[0] < cut), want, "{n} records, cut {cut}");
            }
        }
    }

    #[test]
    fn decode_requires_sorted_keys_and_points_at_the_first_out_of_order_record() {
        let mut buf = record::encode(b"b", b"1");
        buf.extend(record::encode(b"a", b"2"));
        assert_eq!(IntervalData::decode(buf).unwrap_err().0, record::encoded_len(b"b", b"1"));
    }
}
