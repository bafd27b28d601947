//! Reorganization (paper §4.5): Phase I picks the pre segments around a full one, Phase II/III
//! fits models (`plan_segments`) and writes the post segments into free space, Phase IV swaps the
//! index. Crash safety needs no log of its own: pre segments stay untouched and are reused only
//! after the next checkpoint (`MaintState::freed_since_checkpoint`), post segments are reached
//! only through the in-memory index until a checkpoint persists it, and every record a post
//! segment holds beyond the checkpoint's pages is in the WAL after it. So a crash at any point
//! recovers the checkpoint's segments and replays the WAL over them: nothing lost, nothing
//! duplicated (post segments written since are free space again).

use std::collections::BTreeMap;

use strata_core::{Durability, Error, Key, Result};

use super::forecast_room::InsertOutlook;
use super::write_back::parallel_io;
use super::{Counters, MaintState, Store};
use crate::data_file::DataFile;
use crate::forecast::{epsilon_for, goal_for};
use crate::free_space::{PageId, SegmentSlot};
use crate::index::SegmentEntry;
use crate::key_projection::{common_prefix, project};
use crate::model::{plan_segments, PlanConfig, SegmentPlan};
use crate::page::layout::{HEADER_LEN, SLOT_LEN};
use crate::page::{Page, PageKind, PutOutcome, StoredValue};
use crate::record_cache::DirtyRecord;

/// A base page and its overflow page, if it has one.
type PagePair = (Page, Option<Page>);

/// Fewest dirty records a reorganization piece takes (`Store::piece_records`).
const MIN_PIECE_RECORDS: usize = 64;

/// The post segments of a reorganization's pieces, in key order, and the pieces written.
type PostPieces = (Vec<(Key, SegmentEntry)>, Vec<WrittenPiece>);

/// A key range whose dirty records a reorganization wrote into post segments, every write up
/// to `up_to_lsn` among them (`Store::mark_pieces_written`).
struct WrittenPiece {
    lower: Key,
    upper: Option<Key>,
    up_to_lsn: u64,
}

/// A post segment built in memory: base pages, and overflow pages by base page index.
pub(super) struct BuiltSegment {
    lower: Key,
    plan: SegmentPlan,
    base: Vec<Page>,
    overflow: Vec<Option<Page>>,
}

/// The key range and records a reorganization plans segments over.
struct SegmentBounds<'a> {
    lower: &'a [u8],
    upper: Option<&'a [u8]>,
    records: &'a [(Key, StoredValue)],
    projections: &'a [u64],
}

impl<'a> SegmentBounds<'a> {
    /// The keys planned segment `i` of `plans` covers: from its first record (the range's lower
    /// bound for the first) to the next segment's first record (the range's upper bound for the
    /// last).
    fn of(&self, plans: &[SegmentPlan], i: usize) -> (&'a [u8], Option<&'a [u8]>) {
        let first_key = |plan: &SegmentPlan| self.records.get(plan.first_index).map(|(k, _)| k.as_slice());
        let lower = if i == 0 { self.lower } else { plans.get(i).and_then(first_key).unwrap_or(self.lower) };
        let upper = match plans.get(i + 1) {
            Some(next) => first_key(next),
            None => self.upper,
        };
        (lower, upper)
    }
}

/// Segments' base pages bound for consecutive slots, gathered into one write of up to
/// `max_bytes`: a bulk load and a reorganization that grows the file allocate contiguous slots,
/// and one large sequential write costs the device far less than a write per segment (up to 16
/// pages).
struct ContiguousWrites {
    first_page: PageId,
    bytes: Vec<u8>,
    /// `contiguous_write_bytes`; the buffer is reserved to it at once (grown by doubling, it
    /// held its old and new allocations together: 6 MiB at a 4 MiB write).
    max_bytes: usize,
}

/// Largest write `ContiguousWrites` gathers at large budgets.
const CONTIGUOUS_WRITE_BYTES: usize = 4 << 20;

/// The largest gathered write for `config`'s budget: `CONTIGUOUS_WRITE_BYTES`, at most a quarter
/// of the buffer reserve (at a 9.2 MiB budget 294 KiB; 4 MiB from a 128 MiB budget).
fn contiguous_write_bytes(config: &strata_core::EngineConfig) -> usize {
    let quarter_reserve =
        usize::try_from(crate::options::buffer_reserve_bytes(config) / 4).unwrap_or(usize::MAX);
    quarter_reserve.min(CONTIGUOUS_WRITE_BYTES)
}

impl ContiguousWrites {
    fn new(max_bytes: usize) -> ContiguousWrites {
        ContiguousWrites { first_page: 0, bytes: Vec::new(), max_bytes }
    }

    fn write(&mut self, data: &DataFile, first_page: PageId, bytes: &[u8]) -> Result<()> {
        let page_bytes = data.page_size().bytes();
        let next_page = self.first_page + (self.bytes.len() / page_bytes) as u64;
        let joins = !self.bytes.is_empty() && first_page == next_page;
        if !joins || self.bytes.len() + bytes.len() > self.max_bytes {
            self.flush(data)?;
            self.first_page = first_page;
        }
        if self.bytes.capacity() < self.max_bytes {
            self.bytes.reserve_exact(self.max_bytes.max(bytes.len()) - self.bytes.len());
        }
        self.bytes.extend_from_slice(bytes);
        Ok(())
    }

    fn flush(&mut self, data: &DataFile) -> Result<()> {
        if !self.bytes.is_empty() {
            data.write_page(self.first_page, &self.bytes)?;
            self.bytes.clear();
        }
        Ok(())
    }
}

/// Goal, error bound and count cap of one reorganization.
#[derive(Clone, Copy)]
struct Sizing {
    goal: usize,
    /// The model's error bound ±ε (records). A model that misplaces records by up to ε fills a
    /// page with up to `goal + 2ε` records, so ε is that of the unlowered goal and at most half
    /// the goal: room a forecast leaves is not taken back by a sloppier model (the paper's code
    /// keeps ε fixed too), and no page is planned empty.
    epsilon: u32,
    max_records_per_page: usize,
}

impl Sizing {
    /// The sizing with `goal` lowered (or kept) to `goal`, ε no larger than it allows.
    fn with_goal(self, goal: usize) -> Sizing {
        let half_goal = u32::try_from(goal / 2).unwrap_or(u32::MAX).max(1);
        Sizing { goal, epsilon: self.epsilon.min(half_goal), ..self }
    }
}

impl Store {
    /// Reorganizes the segment starting at `full_lower` and its neighbours with overflow pages,
    /// writing back every dirty record of their range with them: the post segments are planned
    /// around all the records the range holds (a hot spot's inserts may still be in the record
    /// cache, and pages planned around only those on disk would give its new keys too few
    /// pages), and those records are marked clean afterwards. The range is planned and written
    /// in pieces of a bounded number of dirty records (`write_post_pieces`), so a wide range
    /// (a young store's first segment covers every key) never copies the whole cache.
    pub fn reorganize(&self, maint: &mut MaintState, full_lower: &[u8]) -> Result<()> {
        // Phase I: range detection.
        let (pre, upper) = self.pre_segments(full_lower);
        let lower = pre.first().map(|(k, _)| k.clone()).unwrap_or_default();
        // Phases II and III.
        let on_pages = self.pre_records(maint, &pre)?;
        let (post, written) = self.write_post_pieces(maint, &lower, upper.as_deref(), on_pages)?;
        // Phase IV: the index swap (readers of pre segments finish first: they hold the lock).
        {
            let mut index = self.index.write();
            for (lower, _) in &pre {
                index.remove(lower);
            }
            for (lower, entry) in &post {
                index.insert(lower.clone(), entry.clone());
            }
            self.index_memory_bytes.store(index.memory_bytes(), std::sync::atomic::Ordering::Relaxed);
        }
        for (_, entry) in &pre {
            maint.freed_since_checkpoint.push(entry.slot());
            let overflow = entry.overflow.iter().filter(|&&id| id != 0);
            maint
                .freed_since_checkpoint
                .extend(overflow.map(|&first_page| SegmentSlot { first_page, pages: 1 }));
        }
        let c = &self.counters;
        Counters::add(&c.reorganizations, 1);
        Counters::add(&c.pre_segments_reorganized, pre.len() as u64);
        Counters::add(&c.reorganization_pieces, written.len() as u64);
        Counters::add(&c.post_segments_written, post.len() as u64);
        Counters::add(
            &c.multi_page_segments_written,
            post.iter().filter(|(_, e)| e.pages > 1).count() as u64,
        );
        self.mark_pieces_written(&written);
        Ok(())
    }

    /// Phases II and III over `lower..upper` in pieces: each takes the next run of at most
    /// `piece_records` dirty records from the cache (made durable in the WAL first: no page may
    /// hold a write the WAL could lose), merges them over `on_pages` (the pre pages' records, in
    /// key order) within its bounds, and plans and writes its post segments before the next
    /// piece is taken. Returns the post segments in key order and the pieces written.
    fn write_post_pieces(
        &self,
        maint: &mut MaintState,
        lower: &[u8],
        upper: Option<&[u8]>,
        on_pages: Vec<(Key, StoredValue)>,
    ) -> Result<PostPieces> {
        let limit = self.piece_records();
        let mut on_pages = on_pages.into_iter().peekable();
        let (mut post, mut written) = (Vec::new(), Vec::new());
        let mut piece_lower = lower.to_vec();
        loop {
            // Every write up to `seen_lsn` is in the cache now, so `dirty_in` below takes each of
            // them that is still dirty in the piece (`mark_pieces_written` relies on it).
            let seen_lsn = self.applied.lsn();
            let piece_upper: Option<Key> =
                self.cache.dirty_run_end(&piece_lower, upper, limit).or_else(|| upper.map(<[u8]>::to_vec));
            let pending = self.cache.dirty_in(&piece_lower, piece_upper.as_deref());
            if let Some(newest_lsn) = pending.iter().map(|r| r.lsn).max() {
                self.writes.wal().commit(newest_lsn, Durability::Sync)?;
            }
            let below_upper = |(k, _): &(Key, StoredValue)| piece_upper.as_ref().is_none_or(|u| k < u);
            let piece_on_pages: Vec<(Key, StoredValue)> =
                std::iter::from_fn(|| on_pages.next_if(below_upper)).collect();
            let records = self.with_pending(maint, piece_on_pages, pending)?;
            let built =
                self.build_post_segments(maint, &piece_lower, piece_upper.as_deref(), &records, true)?;
            drop(records);
            post.extend(self.write_post_segments(maint, built)?);
            let next_lower = piece_upper.clone().filter(|u| Some(u.as_slice()) != upper);
            written.push(WrittenPiece { lower: piece_lower, upper: piece_upper, up_to_lsn: seen_lsn });
            match next_lower {
                Some(next) => piece_lower = next,
                None => return Ok((post, written)),
            }
        }
    }

    /// Dirty records per reorganization piece: about an eighth of the buffer reserve at the
    /// cache's mean entry size, at least `MIN_PIECE_RECORDS`.
    fn piece_records(&self) -> usize {
        let records = self.cache.totals().records.max(1);
        let mean_entry_bytes = (self.cache.used_bytes() / records).max(1);
        let piece_bytes = crate::options::buffer_reserve_bytes(&self.config) / 8;
        usize::try_from(piece_bytes / mean_entry_bytes).unwrap_or(usize::MAX).max(MIN_PIECE_RECORDS)
    }

    /// After the index swap: the pieces' dirty records become clean unless written again since
    /// they were taken (`RecordCache::mark_clean_in`); readers may cache page reads again only
    /// after the epoch bumped first.
    fn mark_pieces_written(&self, written: &[WrittenPiece]) {
        self.page_write_epoch.fetch_add(1, std::sync::atomic::Ordering::Release);
        let cleaned: u64 =
            written.iter().map(|p| self.cache.mark_clean_in(&p.lower, p.upper.as_deref(), p.up_to_lsn)).sum();
        Counters::add(&self.counters.records_written_back, cleaned);
    }

    /// Phase I: the full segment and its neighbours up to `reorg_radius` away on each side, out to
    /// the farthest one with an overflow page (contiguous in key order), taking neighbours only
    /// while their pages fit half the buffer reserve (the memory budget). Returns them in key
    /// order and the upper bound of the last.
    fn pre_segments(&self, full_lower: &[u8]) -> (Vec<(Key, SegmentEntry)>, Option<Key>) {
        let index = self.index.read();
        let page_bytes = self.page_size().bytes() as u64;
        let mut budget_bytes = crate::options::buffer_reserve_bytes(&self.config) / 2;
        let mut fits = |entry: &SegmentEntry| {
            let pages = u64::from(entry.pages) + entry.overflow.iter().filter(|&&o| o != 0).count() as u64;
            let fit = pages * page_bytes <= budget_bytes;
            budget_bytes = budget_bytes.saturating_sub(pages * page_bytes);
            fit
        };
        let (mut first, mut last) = (full_lower.to_vec(), full_lower.to_vec());
        for toward_lower in [true, false] {
            let mut cursor = full_lower.to_vec();
            for _ in 0..self.options.reorg_radius {
                let next = if toward_lower { index.before(&cursor) } else { index.upper_of(&cursor) };
                let Some(next) = next.cloned() else { break };
                let Some((_, entry, _)) = index.segment_of(&next) else { break };
                if !fits(entry) {
                    break;
                }
                if entry.has_overflow() {
                    if toward_lower {
                        first = next.clone();
                    } else {
                        last = next.clone();
                    }
                }
                cursor = next;
            }
        }
        let pre: Vec<(Key, SegmentEntry)> = index
            .iter()
            .skip_while(|(k, _)| **k < first)
            .take_while(|(k, _)| **k <= last)
            .map(|(k, e)| (k.clone(), e.clone()))
            .collect();
        (pre, index.upper_of(&last).cloned())
    }

    /// Every record of the pre segments' pages, in key order. Each base page is read before its
    /// overflow page and a key already taken is kept: where both pages of a pair hold a key, the
    /// base page's record wins, as in `get`, scans and write-back (which updates the base page's
    /// copy when it has one).
    fn pre_records(
        &self,
        maint: &mut MaintState,
        pre: &[(Key, SegmentEntry)],
    ) -> Result<Vec<(Key, StoredValue)>> {
        let mut records: BTreeMap<Key, StoredValue> = BTreeMap::new();
        for pairs in self.read_pre_pages(pre)? {
            for (base, overflow) in pairs {
                // The pair's keys lie within its fences, so base before overflow per pair keeps
                // the base page's record wherever both hold a key.
                for page in std::iter::once(&base).chain(overflow.as_ref()) {
                    for e in page.iter() {
                        match records.entry(e.key()) {
                            std::collections::btree_map::Entry::Vacant(v) => {
                                v.insert(e.value.to_owned_value());
                            }
                            // The overflow page's copy is dropped: so is its run.
                            std::collections::btree_map::Entry::Occupied(o) => {
                                let dropped =
                                    e.value.blob().filter(|&r| o.get().as_stored().blob() != Some(r));
                                dropped.into_iter().for_each(|r| self.release(maint, r));
                            }
                        }
                    }
                }
            }
        }
        Ok(records.into_iter().collect())
    }

    /// `on_pages` with `pending` applied over them, merged in key order (both are in key order,
    /// each key once); a pending put of a key no page held is an insert, counted by the
    /// forecaster.
    fn with_pending(
        &self,
        maint: &mut MaintState,
        on_pages: Vec<(Key, StoredValue)>,
        pending: Vec<DirtyRecord>,
    ) -> Result<Vec<(Key, StoredValue)>> {
        let blobs = self.blobs_for(maint, &pending)?;
        let mut records = Vec::with_capacity(on_pages.len() + pending.len());
        let mut on_pages = on_pages.into_iter().peekable();
        for (record, blob) in pending.into_iter().zip(blobs) {
            records.extend(std::iter::from_fn(|| on_pages.next_if(|(k, _)| *k < record.key)));
            let replaced = on_pages.next_if(|(k, _)| *k == record.key).map(|(_, v)| v);
            let replaced_blob = replaced.as_ref().and_then(|v| v.as_stored().blob());
            if let Some(r) = replaced_blob.filter(|&r| blob != Some(r)) {
                self.release(maint, r);
            }
            Self::placed(maint, &record.key, blob);
            let Some(value) = record.value else { continue };
            if let (None, Some(forecaster)) = (&replaced, &mut maint.forecaster) {
                forecaster.record_insert_key(&record.key);
            }
            records.push((record.key, blob.map_or(StoredValue::Inline(value), StoredValue::Blob)));
        }
        records.extend(on_pages);
        Ok(records)
    }

    /// Every page pair of the pre segments, checked, by segment in key order: each segment's
    /// base pages in one sequential read, the segments spread over the write-back's I/O threads
    /// (read one page at a time, a reorganization of sixteen segments waited on the device for
    /// each page in turn).
    fn read_pre_pages(&self, pre: &[(Key, SegmentEntry)]) -> Result<Vec<Vec<PagePair>>> {
        parallel_io(pre, |(_, entry)| {
            let bases = self.data.read_pages(entry.first_page, usize::from(entry.pages))?;
            let mut pairs = Vec::with_capacity(bases.len());
            for (i, base) in bases.into_iter().enumerate() {
                self.check_page_identity(&base, entry.base_page(i), entry, i)?;
                let overflow = self.read_checked_overflow(entry, i, &base)?;
                pairs.push((base, overflow));
            }
            Ok(pairs)
        })
    }

    /// The bytes the models skip: the common prefix of the range's bounds, or, when a bound is
    /// open (the index's first or last segment), of the records' first and last keys, so keys
    /// sharing a long prefix still project to distinct values there. Capped so a page fence (the
    /// prefix and up to 8 projection bytes) stays within the key size limit. A later key of the
    /// range outside that prefix still lands right: the model only picks a page, fences decide.
    fn model_prefix<'a>(
        &self,
        lower: &'a [u8],
        upper: Option<&[u8]>,
        records: &'a [(Key, StoredValue)],
    ) -> &'a [u8] {
        let cap = self.page_size().max_key_bytes() - 8;
        let (from, common) = match (upper, records.first(), records.last()) {
            (Some(upper), _, _) if !lower.is_empty() => (lower, common_prefix(lower, upper)),
            (_, Some((first, _)), Some((last, _))) => (first.as_slice(), common_prefix(first, last)),
            _ => (lower, 0),
        };
        from.get(..common.min(cap)).unwrap_or_default()
    }

    /// The goal (from the knob or 70% of what fits a page at the set's average record size), its
    /// ε (the knob's, or half the room the goal leaves) and the hard per-page record cap.
    fn sizing(&self, lower: &[u8], upper: Option<&[u8]>, records: &[(Key, StoredValue)]) -> Sizing {
        let prefix_len = self.model_prefix(lower, upper, records).len();
        let count = records.len().max(1);
        let record_bytes: usize = records
            .iter()
            .map(|(k, v)| k.len().saturating_sub(prefix_len) + v.as_stored().page_bytes())
            .sum();
        let per_record = record_bytes / count + 1 + SLOT_LEN;
        let usable =
            self.page_size().bytes() - HEADER_LEN - 2 * lower.len().min(self.page_size().max_key_bytes());
        let cap = (usable / per_record).clamp(1, self.page_size().max_records());
        let goal = self.options.goal.unwrap_or(cap * 7 / 10).clamp(1, cap);
        let epsilon = self.options.epsilon.unwrap_or_else(|| epsilon_for(goal, cap));
        Sizing { goal, epsilon, max_records_per_page: cap }
    }

    /// Base and overflow pages the index references.
    fn index_pages(&self) -> u64 {
        let (base, overflow) = self.index.read().page_counts();
        base + overflow
    }

    /// Phases II/III in memory: plans segments (with `forecast`, room for forecast inserts where
    /// `forecast_room.rs` finds some) and places the records on their pages. A page whose
    /// records overflow its bytes gets an overflow page; if even that is full, the plan is
    /// redone with half the goal (at goal 1 the cap is 1 record per page, which always fits).
    pub(super) fn build_post_segments(
        &self,
        maint: &mut MaintState,
        lower: &[u8],
        upper: Option<&[u8]>,
        records: &[(Key, StoredValue)],
        forecast: bool,
    ) -> Result<Vec<BuiltSegment>> {
        let prefix = self.model_prefix(lower, upper, records);
        let prefix_len = prefix.len();
        let projections: Vec<u64> = records.iter().map(|(k, _)| project(k, prefix_len)).collect();
        let mut sizing = self.sizing(lower, upper, records);
        // Pages the index references, read once (a walk of every segment), only to forecast.
        let index_pages = (forecast && maint.forecaster.is_some()).then(|| self.index_pages());
        loop {
            let config = PlanConfig {
                goal: sizing.goal,
                epsilon: sizing.epsilon,
                max_records_per_page: sizing.max_records_per_page,
                prefix_len: prefix_len as u16,
                max_segment_pages: if self.options.page_grouping { 16 } else { 1 },
            };
            let mut plans = plan_segments(&projections, config)?;
            let outlook = maint.forecaster.as_ref().zip(index_pages).and_then(|(forecaster, pages)| {
                // Pages are filled to about the goal (between it and the cap, less where room
                // was left), so the store holds about its pages times the goal records.
                let store_records = (pages * sizing.goal as u64) as f64;
                InsertOutlook::new(forecaster, store_records, self.options.forecast_future_epochs)
            });
            if let Some(outlook) = outlook {
                let bounds = SegmentBounds { lower, upper, records, projections: &projections };
                plans = self.with_forecast_room(plans, &outlook, &bounds, sizing, config)?;
            }
            if let Some(built) = self.place_records(maint, &plans, records, lower, upper, prefix)? {
                return Ok(built);
            }
            if sizing.goal == 1 && sizing.max_records_per_page == 1 {
                return Err(Error::corruption(
                    "treeline reorganization",
                    0,
                    "one record per page does not fit",
                ));
            }
            sizing = sizing.with_goal((sizing.goal / 2).max(1));
            if sizing.goal == 1 {
                sizing.max_records_per_page = 1;
            }
        }
    }

    /// Plans each segment that `outlook` forecasts excess inserts for again, on its own, at the
    /// goal that leaves room for them; the others stay as planned.
    fn with_forecast_room(
        &self,
        plans: Vec<SegmentPlan>,
        outlook: &InsertOutlook<'_>,
        bounds: &SegmentBounds<'_>,
        sizing: Sizing,
        config: PlanConfig,
    ) -> Result<Vec<SegmentPlan>> {
        let mut out = Vec::with_capacity(plans.len());
        for (i, plan) in plans.iter().enumerate() {
            let (lower, upper) = bounds.of(&plans, i);
            let excess = outlook.excess_inserts(lower, upper, plan.record_count);
            let goal = goal_for(plan.record_count, excess, sizing.goal);
            // Room means more pages: a goal lowered only as far as the records' own rounding (17
            // records on 1 page "at goal 17") changes nothing.
            let more_pages = plan.record_count.div_ceil(goal) > plan.record_count.div_ceil(sizing.goal);
            let keys = bounds.projections.get(plan.first_index..plan.first_index + plan.record_count);
            let (true, Some(keys)) = (more_pages, keys) else {
                out.push(*plan);
                continue;
            };
            Counters::add(&self.counters.forecast_lowered_goals, 1);
            let lowered = sizing.with_goal(goal);
            let config = PlanConfig { goal, epsilon: lowered.epsilon, ..config };
            let replanned = plan_segments(keys, config)?;
            out.extend(
                replanned
                    .into_iter()
                    .map(|p| SegmentPlan { first_index: p.first_index + plan.first_index, ..p }),
            );
        }
        Ok(out)
    }

    /// Builds every planned segment's pages; `None` when some base and overflow page pair cannot
    /// hold its records. An empty set becomes one empty one-page segment over the whole range.
    fn place_records(
        &self,
        maint: &mut MaintState,
        plans: &[SegmentPlan],
        records: &[(Key, StoredValue)],
        lower: &[u8],
        upper: Option<&[u8]>,
        prefix: &[u8],
    ) -> Result<Option<Vec<BuiltSegment>>> {
        let empty = [SegmentPlan { first_index: 0, record_count: 0, page_count: 1, model: None }];
        let plans = if plans.is_empty() { &empty[..] } else { plans };
        let first_key = |plan: Option<&SegmentPlan>| {
            plan.and_then(|p| records.get(p.first_index)).map(|(k, _)| k.clone())
        };
        let mut built = Vec::with_capacity(plans.len());
        for (i, plan) in plans.iter().enumerate() {
            let seg_lower = if i == 0 { lower.to_vec() } else { first_key(Some(plan)).unwrap_or_default() };
            let seg_upper = match plans.get(i + 1) {
                Some(next) => first_key(Some(next)),
                None => upper.map(<[u8]>::to_vec),
            };
            let fences = plan.page_lower_fences(prefix, &seg_lower);
            let production_id = maint.take_production_id();
            let segment_records =
                records.get(plan.first_index..plan.first_index + plan.record_count).unwrap_or_default();
            match self.fill_segment(plan, &fences, seg_upper.as_deref(), production_id, segment_records)? {
                Some((base, overflow)) => {
                    built.push(BuiltSegment { lower: seg_lower, plan: *plan, base, overflow })
                }
                None => return Ok(None),
            }
        }
        Ok(Some(built))
    }

    /// The pages of one post segment with its records placed by fences (which agree with the
    /// model: `page_lower_fences`).
    #[allow(clippy::type_complexity)]
    fn fill_segment(
        &self,
        plan: &SegmentPlan,
        fences: &[Key],
        upper: Option<&[u8]>,
        production_id: u64,
        records: &[(Key, StoredValue)],
    ) -> Result<Option<(Vec<Page>, Vec<Option<Page>>)>> {
        let pages = plan.page_count as u8;
        let mut base = Vec::with_capacity(fences.len());
        for (i, lower) in fences.iter().enumerate() {
            let page_upper = fences.get(i + 1).map(Vec::as_slice).or(upper);
            let kind = if i == 0 {
                PageKind::SegmentHead { pages, production_id, model: plan.model }
            } else {
                PageKind::SegmentMember { pages, index: i as u8 }
            };
            base.push(Page::new(self.page_size(), kind, lower, page_upper)?);
        }
        let mut overflow: Vec<Option<Page>> = vec![None; base.len()];
        for (key, value) in records {
            let i = fences.partition_point(|f| f.as_slice() <= key.as_slice()).saturating_sub(1);
            let (Some(page), Some(extra)) = (base.get_mut(i), overflow.get_mut(i)) else { continue };
            if page.put_stored(key, value.as_stored())? != PutOutcome::NoRoom {
                continue;
            }
            let extra = match extra {
                Some(o) => o,
                None => extra.insert(Page::new_overflow_for(page)?),
            };
            if extra.put_stored(key, value.as_stored())? == PutOutcome::NoRoom {
                return Ok(None);
            }
        }
        Ok(Some((base, overflow)))
    }

    /// Phase III's writes: each segment's base pages in one sequential write into a free slot,
    /// overflow pages into free pages. No sync: until a checkpoint persists the index that
    /// references them, recovery never reads them.
    pub(super) fn write_post_segments(
        &self,
        maint: &mut MaintState,
        built: Vec<BuiltSegment>,
    ) -> Result<Vec<(Key, SegmentEntry)>> {
        let mut post = Vec::with_capacity(built.len());
        let mut pending = ContiguousWrites::new(contiguous_write_bytes(&self.config));
        for segment in built {
            let slot = maint.free.allocate(segment.plan.page_count as u8)?;
            let production_id = match segment.base.first().map(Page::kind) {
                Some(PageKind::SegmentHead { production_id, .. }) => production_id,
                _ => 0,
            };
            let mut entry = SegmentEntry::new(slot, segment.plan.model, production_id);
            let mut bytes = Vec::with_capacity(segment.base.len() * self.page_size().bytes());
            for (i, (mut page, extra)) in segment.base.into_iter().zip(segment.overflow).enumerate() {
                if let Some(extra) = extra {
                    let id: PageId = maint.free.allocate(1)?.first_page;
                    self.data.write_page(id, &extra.into_sealed_bytes())?;
                    page.set_overflow(Some(id))?;
                    if let Some(o) = entry.overflow.get_mut(i) {
                        *o = id;
                    }
                    Counters::add(&self.counters.overflow_pages_created, 1);
                }
                bytes.extend_from_slice(page.seal());
            }
            pending.write(&self.data, slot.first_page, &bytes)?;
            post.push((segment.lower, entry));
        }
        pending.flush(&self.data)?;
        Ok(post)
    }
}

#[cfg(test)]
mod tests {
    use super::{contiguous_write_bytes, ContiguousWrites, Sizing, CONTIGUOUS_WRITE_BYTES};
    use crate::data_file::DataFile;
    use crate::page::PageSize;

    #[test]
    fn gathered_writes_follow_the_budget_and_never_grow_past_their_size() {
        let at = |budget: u64| {
            contiguous_write_bytes(&strata_core::EngineConfig {
                memory_budget_bytes: budget,
                ..Default::default()
            })
        };
        assert_eq!(at(128 << 20), CONTIGUOUS_WRITE_BYTES);
        assert_eq!(at(8 << 20), 256 << 10, "a quarter of a 1 MiB reserve");
        let storage = strata_io::MemStorage::new();
        let data = DataFile::create(&storage, PageSize::DEFAULT, false).unwrap();
        let mut writes = ContiguousWrites::new(3 * 4096);
        for first_page in 1..=7 {
            writes.write(&data, first_page, &[first_page as u8; 4096]).unwrap();
            assert!(writes.bytes.capacity() <= 3 * 4096, "reserved once, exactly");
        }
        writes.flush(&data).unwrap();
        for page in 1..=7u8 {
            assert_eq!(data.read_raw(u64::from(page)).unwrap(), vec![page; 4096], "page {page}");
        }
    }

    /// Regression: a goal lowered for forecast inserts keeps the ε of the full goal; with the
    /// lowered goal's, `(cap - goal) / 2`, the model could fill a page up to the cap and the
    /// room was gone (at 2M × 64 B, 8× the overflow pages with forecasting on).
    #[test]
    fn a_lowered_goal_keeps_its_epsilon_and_at_most_half_the_goal() {
        let sizing = Sizing { goal: 38, epsilon: 8, max_records_per_page: 55 };
        let lowered = sizing.with_goal(24);
        assert_eq!((lowered.goal, lowered.epsilon, lowered.max_records_per_page), (24, 8, 55));
        assert!(lowered.goal + 2 * lowered.epsilon as usize <= 40, "room for the forecast stays");
        assert_eq!(sizing.with_goal(10).epsilon, 5, "no more than half the goal");
        assert_eq!(sizing.with_goal(1).epsilon, 1);
    }
}
