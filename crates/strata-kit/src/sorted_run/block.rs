//! Blocks: entries with prefix-compressed keys, a restart array and its count
//! (docs/format/sorted-run.md, "Block"). `BlockBuilder` writes one; `Block` reads one whose
//! checksum the caller has checked, and still never panics on bad bytes: every length is checked
//! and a malformed block is an error string (the reader adds the file and offset).

use std::cmp::Ordering;

use super::{varint, EntryKind};

/// Builds one block; keys must be added in strictly ascending order (the run writer checks).
#[derive(Debug)]
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    restart_interval: usize,
    since_restart: usize,
    last_key: Vec<u8>,
    entries: usize,
}

impl BlockBuilder {
    /// `restart_interval`: entries between two keys stored whole (at least 1).
    pub fn new(restart_interval: usize) -> BlockBuilder {
        BlockBuilder {
            buf: Vec::new(),
            restarts: Vec::new(),
            restart_interval: restart_interval.max(1),
            since_restart: 0,
            last_key: Vec::new(),
            entries: 0,
        }
    }

    pub fn add(&mut self, key: &[u8], kind: EntryKind, value: &[u8]) {
        let shared = if self.since_restart == 0 || self.since_restart >= self.restart_interval {
            self.restarts.push(self.buf.len() as u32);
            self.since_restart = 0;
            0
        } else {
            self.last_key.iter().zip(key).take_while(|(a, b)| a == b).count()
        };
        varint::put(&mut self.buf, shared as u64);
        varint::put(&mut self.buf, (key.len() - shared) as u64);
        varint::put(&mut self.buf, value.len() as u64);
        self.buf.push(kind.to_byte());
        self.buf.extend_from_slice(&key[shared..]);
        self.buf.extend_from_slice(value);
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.since_restart += 1;
        self.entries += 1;
    }

    pub fn entries(&self) -> usize {
        self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// The block's size if it were finished now.
    pub fn size_bytes(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    /// The last key added (empty when none).
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// The finished block; the builder is empty again.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        for restart in &self.restarts {
            out.extend_from_slice(&restart.to_le_bytes());
        }
        out.extend_from_slice(&(self.restarts.len() as u32).to_le_bytes());
        self.restarts.clear();
        self.since_restart = 0;
        self.last_key.clear();
        self.entries = 0;
        out
    }
}

/// One entry's fields as they lie in the block.
struct RawEntry {
    shared: usize,
    /// Offset of the key's unshared bytes.
    suffix_start: usize,
    suffix_len: usize,
    kind: EntryKind,
    value_start: usize,
    value_len: usize,
    /// Offset of the next entry.
    next: usize,
}

/// The entry at `at`, checked to end at or before `end`.
fn raw_entry(bytes: &[u8], at: usize, end: usize) -> Result<RawEntry, String> {
    let bad = |what: &str| format!("block entry at byte {at}: {what}");
    let (shared, p) = varint::get_u32(bytes, at).ok_or_else(|| bad("bad shared length"))?;
    let (suffix_len, p) = varint::get_u32(bytes, p).ok_or_else(|| bad("bad key length"))?;
    let (value_len, p) = varint::get_u32(bytes, p).ok_or_else(|| bad("bad value length"))?;
    let kind = bytes.get(p).and_then(|&b| EntryKind::from_byte(b)).ok_or_else(|| bad("bad kind"))?;
    let suffix_start = p + 1;
    let value_start = suffix_start.checked_add(suffix_len).ok_or_else(|| bad("key overflows"))?;
    let next = value_start.checked_add(value_len).ok_or_else(|| bad("value overflows"))?;
    if next > end {
        return Err(bad("runs past the entries"));
    }
    if kind == EntryKind::Delete && value_len != 0 {
        return Err(bad("a delete with a value"));
    }
    Ok(RawEntry { shared, suffix_start, suffix_len, kind, value_start, value_len, next })
}

/// A block read back: its bytes and where its restart array starts.
#[derive(Clone, Debug)]
pub struct Block {
    bytes: Vec<u8>,
    /// Offset of the restart array = end of the entries.
    entries_end: usize,
    restart_count: usize,
}

/// Every entry of a block, decoded: keys in one buffer, values as ranges of the block.
#[derive(Clone, Debug, Default)]
pub struct DecodedBlock {
    keys: Vec<u8>,
    entries: Vec<DecodedEntry>,
    bytes: Vec<u8>,
}

/// One entry of a `DecodedBlock`: the end of its key in `keys`, its kind, its value's range in the
/// block. Offsets are `u32` (a block's length is a `u32` in its handle; decoding refuses keys
/// past 4 GiB): 16 bytes an entry instead of 32, a tenth of a cached block of 128-byte records.
#[derive(Clone, Copy, Debug)]
struct DecodedEntry {
    key_end: u32,
    value_start: u32,
    value_len: u32,
    kind: EntryKind,
}

impl DecodedBlock {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes of memory held: the block, the keys and the per-entry table, as allocated.
    pub fn memory_bytes(&self) -> usize {
        self.bytes.capacity()
            + self.keys.capacity()
            + self.entries.capacity() * std::mem::size_of::<DecodedEntry>()
    }

    /// Entry `i`: key, kind, value.
    #[inline]
    pub fn entry(&self, i: usize) -> (&[u8], EntryKind, &[u8]) {
        let e = self.entries[i];
        let key_start = if i == 0 { 0 } else { self.entries[i - 1].key_end as usize };
        let value_start = e.value_start as usize;
        (
            &self.keys[key_start..e.key_end as usize],
            e.kind,
            &self.bytes[value_start..value_start + e.value_len as usize],
        )
    }

    /// The first entry whose key is not below `key` (`len()` when none).
    pub fn lower_bound(&self, key: &[u8]) -> usize {
        self.partition_point(|k| k < key)
    }

    /// The first entry whose key is above `key` (`len()` when none).
    pub fn upper_bound(&self, key: &[u8]) -> usize {
        self.partition_point(|k| k <= key)
    }

    /// The first entry whose key fails `before` (which holds for a prefix of the entries).
    fn partition_point(&self, before: impl Fn(&[u8]) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.entries.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if before(self.entry(mid).0) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

impl Block {
    /// Checks the restart count and array (ascending offsets inside the entries); entries are
    /// checked as they are read.
    pub fn parse(bytes: Vec<u8>) -> Result<Block, String> {
        let count_at = bytes.len().checked_sub(4).ok_or("block shorter than its restart count")?;
        let restart_count = strata_core::le_bytes::u32_at(&bytes, count_at).unwrap_or(0) as usize;
        let entries_end = restart_count
            .checked_mul(4)
            .and_then(|n| count_at.checked_sub(n))
            .ok_or_else(|| format!("{restart_count} restarts do not fit a block of {} bytes", bytes.len()))?;
        if restart_count == 0 && entries_end != 0 {
            return Err("entries without a restart".into());
        }
        let block = Block { bytes, entries_end, restart_count };
        let mut previous = None;
        for i in 0..restart_count {
            let offset = block.restart(i);
            if offset >= entries_end || previous.is_some_and(|p| offset <= p) || (i == 0 && offset != 0) {
                return Err(format!("restart {i} at byte {offset} is out of order or outside the entries"));
            }
            previous = Some(offset);
        }
        Ok(block)
    }

    fn restart(&self, i: usize) -> usize {
        strata_core::le_bytes::u32_at(&self.bytes, self.entries_end + 4 * i).unwrap_or(0) as usize
    }

    /// The key stored whole at restart `i`.
    fn restart_key(&self, i: usize) -> Result<&[u8], String> {
        let at = self.restart(i);
        let raw = raw_entry(&self.bytes, at, self.entries_end)?;
        if raw.shared != 0 {
            return Err(format!("restart entry at byte {at} shares a prefix"));
        }
        Ok(&self.bytes[raw.suffix_start..raw.suffix_start + raw.suffix_len])
    }

    /// The entry of `key`: its kind and value. Binary search over the restarts, then a scan of
    /// one restart interval.
    pub fn get(&self, key: &[u8]) -> Result<Option<(EntryKind, &[u8])>, String> {
        if self.restart_count == 0 {
            return Ok(None);
        }
        // The last restart whose key is not above `key`.
        let (mut lo, mut hi) = (0, self.restart_count);
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if self.restart_key(mid)? <= key {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let end = if hi < self.restart_count { self.restart(hi) } else { self.entries_end };
        let mut at = self.restart(lo);
        let mut current: Vec<u8> = Vec::new();
        while at < end {
            let raw = raw_entry(&self.bytes, at, self.entries_end)?;
            rebuild_key(&mut current, &raw, &self.bytes, at)?;
            match current.as_slice().cmp(key) {
                Ordering::Less => at = raw.next,
                Ordering::Equal => {
                    return Ok(Some((
                        raw.kind,
                        &self.bytes[raw.value_start..raw.value_start + raw.value_len],
                    )))
                }
                Ordering::Greater => return Ok(None),
            }
        }
        Ok(None)
    }

    /// Every entry, checked: keys strictly ascending, whole at every restart and only there
    /// shared with nothing.
    pub fn decode(self) -> Result<DecodedBlock, String> {
        let mut out = DecodedBlock::default();
        // Whole keys take at most what the entries take, prefix-compressed, times a restart
        // interval's sharing; this covers the usual case without regrowing.
        out.keys.reserve(self.entries_end * 2);
        out.entries.reserve(self.restart_count * 16);
        let mut at = 0;
        let mut next_restart = 0;
        // Where the previous key starts in `out.keys` (it ends at the buffer's end).
        let mut previous_start = 0;
        while at < self.entries_end {
            let raw = raw_entry(&self.bytes, at, self.entries_end)?;
            let at_restart = next_restart < self.restart_count && self.restart(next_restart) == at;
            if at_restart {
                next_restart += 1;
                if raw.shared != 0 {
                    return Err(format!("restart entry at byte {at} shares a prefix"));
                }
            }
            let start = out.keys.len();
            append_key(&mut out.keys, previous_start, &raw, &self.bytes, at)?;
            // The keys share `raw.shared` bytes: the rest orders them.
            if !out.entries.is_empty()
                && out.keys[previous_start + raw.shared..start] >= out.keys[start + raw.shared..]
            {
                return Err(format!("block entry at byte {at}: keys out of order"));
            }
            previous_start = start;
            let offset =
                |n: usize| u32::try_from(n).map_err(|_| format!("block entry at byte {at}: past 4 GiB"));
            out.entries.push(DecodedEntry {
                key_end: offset(out.keys.len())?,
                value_start: offset(raw.value_start)?,
                value_len: offset(raw.value_len)?,
                kind: raw.kind,
            });
            at = raw.next;
        }
        if next_restart != self.restart_count {
            return Err("a restart offset is not at an entry".into());
        }
        // A cached block lives long: give back what the reservation guessed too much.
        out.keys.shrink_to_fit();
        out.entries.shrink_to_fit();
        out.bytes = self.bytes;
        Ok(out)
    }
}

/// Replaces `current` (the previous key) by this entry's key.
fn rebuild_key(current: &mut Vec<u8>, raw: &RawEntry, bytes: &[u8], at: usize) -> Result<(), String> {
    if raw.shared > current.len() {
        return Err(format!("block entry at byte {at}: shares more than the previous key"));
    }
    current.truncate(raw.shared);
    current.extend_from_slice(&bytes[raw.suffix_start..raw.suffix_start + raw.suffix_len]);
    Ok(())
}

/// Appends this entry's key to `keys`, whose last key (the previous entry's) starts at
/// `previous_start`: its shared prefix, then the entry's suffix.
fn append_key(
    keys: &mut Vec<u8>,
    previous_start: usize,
    raw: &RawEntry,
    bytes: &[u8],
    at: usize,
) -> Result<(), String> {
    if raw.shared > keys.len() - previous_start {
        return Err(format!("block entry at byte {at}: shares more than the previous key"));
    }
    keys.extend_from_within(previous_start..previous_start + raw.shared);
    keys.extend_from_slice(&bytes[raw.suffix_start..raw.suffix_start + raw.suffix_len]);
    Ok(())
}

#[cfg(test)]
mod memory_tests {
    use super::*;

    /// Found by heaptrack: decoding reserved twice the block's size for its keys and kept it,
    /// while `memory_bytes` counted only the keys' length, so a block cache held about 2.5 times
    /// its capacity (100 MB live for 40 MB counted).
    #[test]
    fn a_decoded_block_counts_what_it_holds_and_holds_little_spare() {
        let mut builder = BlockBuilder::new(16);
        for i in 0..30u32 {
            builder.add(format!("key{i:05}").as_bytes(), EntryKind::Put, &[7u8; 120]);
        }
        let decoded = Block::parse(builder.finish()).unwrap().decode().unwrap();
        let entry_bytes = std::mem::size_of::<DecodedEntry>();
        assert_eq!(entry_bytes, 16);
        assert_eq!(
            decoded.memory_bytes(),
            decoded.bytes.capacity() + decoded.keys.capacity() + decoded.entries.capacity() * entry_bytes
        );
        let used = decoded.bytes.len() + decoded.keys.len() + decoded.entries.len() * entry_bytes;
        assert!(decoded.memory_bytes() <= used + used / 8, "{} held for {used}", decoded.memory_bytes());
    }
}
