//! Operations inside one leaf: insert with extent split and merge, collapse with splits at both
//! ends, and rebasing of the 32-bit partial offsets (paper §3.2, §3.3).

use super::node::{FlexTreeConfig, LeafEntry, HOLE_ADDR, MAX_ENTRY_BYTES};

/// `addr` advanced by `bytes` (a hole stays a hole).
pub(crate) fn addr_plus(addr: u64, bytes: u64) -> u64 {
    if addr == HOLE_ADDR {
        HOLE_ADDR
    } else {
        addr + bytes
    }
}

/// Subtracts the smallest partial offset from every entry; returns it (the parent adds it to the
/// leaf's shift so effective offsets stay the same).
pub(crate) fn rebase(entries: &mut [LeafEntry]) -> i64 {
    let Some(min) = entries.first().map(|e| e.partial_offset) else { return 0 };
    if min == 0 {
        return 0;
    }
    for entry in entries.iter_mut() {
        entry.partial_offset -= min;
    }
    i64::from(min)
}

fn can_merge(prev: &LeafEntry, len: u32, addr: u64, cfg: &FlexTreeConfig) -> bool {
    let total = u64::from(prev.len) + u64::from(len);
    if prev.addr == HOLE_ADDR || addr == HOLE_ADDR {
        return prev.addr == addr && total <= MAX_ENTRY_BYTES;
    }
    let same_region = match cfg.merge_boundary_bytes {
        0 => true,
        b => prev.addr / b == (addr + u64::from(len)).saturating_sub(1) / b,
    };
    total <= u64::from(cfg.max_merge_bytes)
        && prev.addr.checked_add(u64::from(prev.len)) == Some(addr)
        && same_region
}

/// What a leaf operation did that the parent must know.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LeafChange {
    /// Add to the leaf's shift in the parent (the leaf was rebased).
    pub base_delta: i64,
    pub rebased: bool,
}

/// Inserts an extent at `rel` (relative to the leaf's base), shifting the entries after it by
/// `len`. `rel` lies within the leaf's range (its start ..= its end); an empty leaf takes any `rel`.
pub(crate) fn insert(
    entries: &mut Vec<LeafEntry>,
    mut rel: i64,
    len: u32,
    addr: u64,
    cfg: &FlexTreeConfig,
) -> LeafChange {
    let mut change = LeafChange::default();
    let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
        entries.push(LeafEntry { partial_offset: 0, len, addr });
        change.base_delta = rel;
        return change;
    };
    let first_offset = i64::from(first.partial_offset);
    debug_assert!(rel >= first_offset && rel <= last.end(), "insert outside the leaf");
    rel = rel.clamp(first_offset, last.end());
    if last.end() + i64::from(len) > i64::from(cfg.rebase_threshold) && first_offset > 0 {
        change.base_delta = rebase(entries);
        change.rebased = true;
        rel -= change.base_delta;
    }
    let mut pos = entries.partition_point(|e| e.end() <= rel);
    if let Some(entry) = entries.get(pos).copied() {
        let start = i64::from(entry.partial_offset);
        if start < rel {
            let left_len = (rel - start) as u32;
            entries[pos].len = left_len;
            let right = LeafEntry {
                partial_offset: rel as u32,
                len: entry.len - left_len,
                addr: addr_plus(entry.addr, u64::from(left_len)),
            };
            entries.insert(pos + 1, right);
            pos += 1;
        }
    }
    let merged = match pos.checked_sub(1).and_then(|p| entries.get_mut(p)) {
        Some(prev) if prev.end() == rel && can_merge(prev, len, addr, cfg) => {
            prev.len += len;
            true
        }
        _ => false,
    };
    let shift_from = if merged {
        pos
    } else {
        entries.insert(pos, LeafEntry { partial_offset: rel as u32, len, addr });
        pos + 1
    };
    for entry in entries.iter_mut().skip(shift_from) {
        entry.partial_offset += len;
    }
    change
}

/// Removes bytes `rel .. rel + len` that lie in this leaf (splitting extents at both ends) and
/// shifts the entries after them back. Returns how many bytes were removed (the part of the range
/// inside the leaf).
pub(crate) fn collapse(entries: &mut Vec<LeafEntry>, rel: i64, len: i64) -> i64 {
    let Some(last) = entries.last() else { return 0 };
    let start = rel;
    let end = (rel + len).min(last.end());
    let removed = end - start;
    if removed <= 0 {
        return 0;
    }
    let mut kept = Vec::with_capacity(entries.len() + 1);
    for entry in entries.iter() {
        let (s, t) = (i64::from(entry.partial_offset), entry.end());
        if t <= start {
            kept.push(*entry);
        } else if s >= end {
            kept.push(LeafEntry { partial_offset: (s - removed) as u32, ..*entry });
        } else {
            if s < start {
                kept.push(LeafEntry { len: (start - s) as u32, ..*entry });
            }
            if t > end {
                kept.push(LeafEntry {
                    partial_offset: start as u32,
                    len: (t - end) as u32,
                    addr: addr_plus(entry.addr, (end - s) as u64),
                });
            }
        }
    }
    *entries = kept;
    removed
}
