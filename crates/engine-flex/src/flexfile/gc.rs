//! Garbage collection and defragmentation (paper §4.1). Live data is capped at
//! `max_utilization_32nds`/32 of the non-reserved space and extents are at most 1/K of a
//! segment, so the emptiest used segment always holds at least two extents' worth of garbage:
//! relocating it frees a whole segment for less than one segment of copies. GC relocates into
//! the reserved segments; the freed victims become reusable after the log commit that records
//! the moves.

use strata_core::Result;

use super::file::{apply_to_tree, no_space_error, FlexFile, State};
use super::format::LogOp;
use super::TableFile;
use crate::flextree::Extent;
use crate::io_kinds::IoCause;

/// Victims chosen per scan of the tree.
const GC_BATCH_SEGMENTS: usize = 8;

impl FlexFile {
    /// Prepares for an operation that adds `incoming` bytes of data: refuses it (no-space error,
    /// nothing changed) past the utilization cap, and runs GC until enough segments are free.
    pub(crate) fn make_room(&self, st: &mut State, incoming: u64) -> Result<()> {
        let opts = &self.opts;
        let segment_bytes = st.space.segment_bytes;
        let usable_segments = st.space.max_segments.saturating_sub(opts.reserved_segments);
        let cap_bytes = usable_segments * segment_bytes / 32 * opts.max_utilization_32nds;
        if st.space.total_live_bytes + incoming > cap_bytes {
            return Err(no_space_error(format!(
                "flexfile: {incoming} more bytes would pass the data space cap of {cap_bytes} bytes ({} live)",
                st.space.total_live_bytes
            )));
        }
        // Rolling to a new segment wastes less than one extent, so a segment takes at least this.
        let per_segment = segment_bytes - u64::from(opts.max_extent_bytes);
        let need = incoming.saturating_sub(st.space.open_room_bytes()).div_ceil(per_segment);
        let mut low_util_rounds = 0;
        for _ in 0..2 * st.space.max_segments + 8 {
            let low_space = st.space.available_segments() < opts.reserved_segments + need;
            let used = st.space.used_segments();
            let low_util =
                used >= 4 && st.space.total_live_bytes * 100 < used * segment_bytes * opts.gc_trigger_percent;
            let gc_for_util = low_util && low_util_rounds < 1;
            if !(low_space || gc_for_util) {
                break;
            }
            if !low_space {
                low_util_rounds += 1;
            } else if !st.space.pending.is_empty() {
                self.commit_locked(st)?;
                continue;
            }
            // Low utilization alone cleans one segment per operation (amortized); low space
            // cleans in batches until enough segments are free.
            let victims = st.space.gc_victims(if low_space { GC_BATCH_SEGMENTS } else { 1 });
            if victims.is_empty() {
                break;
            }
            let started = std::time::Instant::now();
            let _collecting = IoCause::Gc.enter();
            let relocated = self.relocate_segments(st, &victims);
            st.stats.gc_micros += started.elapsed().as_micros() as u64;
            relocated?;
        }
        if st.space.available_segments() < need + 1 && st.space.pending.is_empty() {
            return Err(no_space_error(format!(
                "flexfile: no room for {incoming} bytes ({} free segments)",
                st.space.available_segments()
            )));
        }
        if st.space.available_segments() < need + 1 {
            self.commit_locked(st)?;
        }
        Ok(())
    }

    /// Garbage collection ahead of writes (FlexDB calls it between commit steps, where readers
    /// are not blocked by the table's write lock): while live data fills less than
    /// `gc_trigger_percent` + `GC_AHEAD_MARGIN_PERCENT` of the used segments, relocates the
    /// emptiest segments. Their extents are listed under the state *read* lock, up to
    /// `GC_BATCH_SEGMENTS` victims per walk of the tree (the walk is the long part), and moved one
    /// extent per hold of the write lock, so readers of the file wait for at most one extent's
    /// copy; an extent that changed in between is skipped (its segment is then simply not freed
    /// this time). The margin keeps the one-victim-per-operation GC of `make_room` from firing
    /// inside the writes that follow. Returns the segments cleaned.
    pub fn collect_garbage_ahead(&self) -> Result<u64> {
        const GC_AHEAD_MARGIN_PERCENT: u64 = 5;
        const MAX_SEGMENTS_PER_CALL: u64 = 64;
        let target_percent = self.opts.gc_trigger_percent + GC_AHEAD_MARGIN_PERCENT;
        let below_target = |st: &State| {
            let used = st.space.used_segments();
            used >= 4 && st.space.total_live_bytes * 100 < used * st.space.segment_bytes * target_percent
        };
        let _collecting = IoCause::Gc.enter();
        let mut cleaned = 0;
        while cleaned < MAX_SEGMENTS_PER_CALL {
            let batch = {
                let st = self.state.read();
                Self::check_usable(&st)?;
                if !below_target(&st) {
                    break;
                }
                let victims = st.space.gc_victims(GC_BATCH_SEGMENTS);
                if victims.is_empty() {
                    break;
                }
                victim_extents(&st, &victims)
            };
            for extents in batch {
                if cleaned >= MAX_SEGMENTS_PER_CALL || !below_target(&self.state.read()) {
                    return Ok(cleaned);
                }
                self.move_listed_extents(extents)?;
                cleaned += 1;
            }
        }
        Ok(cleaned)
    }

    /// Relocates `extents` (one victim segment's, listed earlier), one per hold of the write lock.
    /// The segment is counted as reclaimed once its last listed extent moved with none skipped
    /// before it (a skipped one leaves the segment in use), in that extent's own lock hold.
    fn move_listed_extents(&self, extents: Vec<Extent>) -> Result<()> {
        let mut all_moved = true;
        let last = extents.len().saturating_sub(1);
        for (i, e) in extents.into_iter().enumerate() {
            self.mutate(|this, st| {
                let mut now = Vec::new();
                st.tree.query(e.offset, e.len, &mut now);
                if now.as_slice() != [e] {
                    all_moved = false; // changed since it was listed
                    return Ok(());
                }
                let started = std::time::Instant::now();
                this.relocate(st, e.offset, e.len, e.addr)?;
                st.stats.gc_micros += started.elapsed().as_micros() as u64;
                if i == last && all_moved {
                    st.stats.gc_segments_reclaimed += 1;
                }
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Moves every live extent out of `victims` into the open segment.
    fn relocate_segments(&self, st: &mut State, victims: &[u64]) -> Result<()> {
        for e in victim_extents(st, victims).into_iter().flatten() {
            self.relocate(st, e.offset, e.len, e.addr)?;
        }
        st.stats.gc_segments_reclaimed += victims.len() as u64;
        Ok(())
    }

    /// Copies `len` live bytes at logical `offset` (physical `addr`) to the open segment and
    /// logs the move.
    fn relocate(&self, st: &mut State, offset: u64, len: u64, addr: u64) -> Result<()> {
        let max = u64::from(self.opts.max_extent_bytes);
        let mut done = 0;
        while done < len {
            let piece = (len - done).min(max);
            if st.space.open_room_bytes() < piece && st.space.available_segments() == 0 {
                if st.space.pending.is_empty() {
                    return Err(no_space_error(
                        "flexfile: garbage collection ran out of free segments".into(),
                    ));
                }
                self.commit_locked(st)?;
            }
            let mut buf = vec![0u8; piece as usize];
            st.space.read(addr + done, &mut buf, &*self.data)?;
            let new_addr = st.space.alloc(piece, &*self.data)?;
            st.space.append(&buf);
            st.space.add_live(new_addr, piece);
            st.space.remove_live(addr + done, piece);
            let op = LogOp::Relocate { offset: offset + done, len: piece, addr: new_addr };
            apply_to_tree(&mut st.tree, &op)?;
            st.log_buf.push(op);
            st.stats.gc_bytes_relocated += piece;
            done += piece;
        }
        Ok(())
    }

    /// `flexfile_defrag`: rewrites the data of `offset .. offset + len` into new segments, where
    /// logically contiguous extents become physically contiguous and merge (up to the extent
    /// limit). Extent starts only disappear, never appear, except at the range's ends.
    pub fn defrag(&self, offset: u64, len: u64) -> Result<()> {
        self.mutate(|this, st| {
            let end = offset.checked_add(len).filter(|&e| e <= st.tree.len());
            if end.is_none() {
                return Err(strata_core::Error::invalid(format!(
                    "flexfile defrag of {len} bytes at {offset} is past the end"
                )));
            }
            this.make_room(st, len)?;
            let mut mappings = Vec::new();
            st.tree.query(offset, len, &mut mappings);
            for m in mappings.iter().filter(|m| !m.is_hole()) {
                this.relocate(st, m.offset, m.len, m.addr)?;
            }
            Ok(())
        })
    }

    /// Convenience for tests and tools: the whole file's bytes.
    pub fn read_all(&self) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; self.len() as usize];
        let n = self.read(0, &mut buf)?;
        buf.truncate(n);
        Ok(buf)
    }
}

/// The live extents of each segment in `victims` (in that order), from one walk of the tree.
/// The walk visits every extent of the file, so the per-extent test is a direct table lookup
/// (victim index + 1 by segment id, 0 for other segments): a hash lookup per extent made the
/// walks a sixth of a 10M-record commit's time.
fn victim_extents(st: &State, victims: &[u64]) -> Vec<Vec<Extent>> {
    let segment_bytes = st.space.segment_bytes;
    let table_len = victims.iter().max().map_or(0, |&v| v as usize + 1);
    let mut victim_of_segment = vec![0usize; table_len];
    for (i, &v) in victims.iter().enumerate() {
        if let Some(slot) = victim_of_segment.get_mut(v as usize) {
            *slot = i + 1;
        }
    }
    let mut out = vec![Vec::new(); victims.len()];
    st.tree.for_each(|e| {
        if e.is_hole() {
            return;
        }
        let slot = usize::try_from(e.addr / segment_bytes).ok().and_then(|seg| victim_of_segment.get(seg));
        if let Some(&i) = slot.filter(|&&i| i > 0) {
            if let Some(list) = out.get_mut(i - 1) {
                list.push(e);
            }
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use strata_io::MemStorage;

    use super::super::{FlexFile, FlexFileOptions, TableFile};
    use super::*;

    /// One walk lists, per victim and in logical order, exactly the extents a brute-force filter
    /// of the whole tree finds in that segment (holes excluded), for victims in any order,
    /// including segments that hold nothing and the highest segment.
    #[test]
    fn victim_extents_lists_exactly_each_victims_live_extents() {
        let file = FlexFile::open(Arc::new(MemStorage::new()), "f", FlexFileOptions::for_tests()).unwrap();
        let mut rng = SmallRng::seed_from_u64(11);
        for _ in 0..400 {
            let at = rng.gen_range(0..=file.len());
            file.insert(at, &vec![rng.gen::<u8>(); rng.gen_range(1..3000)]).unwrap();
        }
        let st = file.state.read();
        let segment_bytes = st.space.segment_bytes;
        let mut all = Vec::new();
        st.tree.for_each(|e| all.push(e));
        let segments = all.iter().map(|e| e.addr / segment_bytes).max().unwrap();
        assert!(segments >= 8, "the data spans several segments");
        for victims in [vec![0], vec![segments, 3, 1], vec![5, 2, segments + 7, 4, 0, 6, 7, 1], vec![]] {
            let listed = victim_extents(&st, &victims);
            assert_eq!(listed.len(), victims.len());
            for (v, got) in victims.iter().zip(&listed) {
                let want: Vec<Extent> =
                    all.iter().copied().filter(|e| !e.is_hole() && e.addr / segment_bytes == *v).collect();
                assert_eq!(got, &want, "victim segment {v} of {victims:?}");
            }
            assert!(victims.is_empty() || listed.iter().any(|l| !l.is_empty()));
        }
    }
}
