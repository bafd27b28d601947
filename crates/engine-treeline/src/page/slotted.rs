//! The slotted data page: a sorted slot array growing from the front, records appended at the
//! back (docs/format/treeline.md). Opening untrusted bytes is in `validate.rs`.
//!
//! Invariants of every `Page` value (established by `new` and `open`, kept by every mutation):
//! * `buf.len() == size.bytes()`; the fences sit at `HEADER_LEN..fences_end()`.
//! * `slots_end() <= heap_start <= P`, and each slot's record lies in `heap_start..P` (or has no
//!   bytes and offset 0); records never overlap.
//! * Slot keys are strictly increasing and inside `[lower, upper)`.
//! * live record bytes + `fragmented == P − heap_start`.
//!
//! Header fields live in the struct while the page is in memory and are written into `buf` by
//! `seal`; the fences, slots and records live only in `buf`.

use std::cmp::Ordering;

use strata_core::{Error, Result};

use super::layout::{self as l, PageSize};
use crate::blob::{self, BlobRef};
use crate::free_space::PageId;
use crate::model::SegmentModel;

/// What a page is within the data file.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PageKind {
    /// First base page of a segment. `model` is `Some` exactly when `pages > 1`.
    SegmentHead { pages: u8, production_id: u64, model: Option<SegmentModel> },
    /// Base page `index` (1..pages) of a segment.
    SegmentMember { pages: u8, index: u8 },
    /// The overflow page of some base page (same fences).
    Overflow,
}

/// Result of [`Page::put`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PutOutcome {
    Inserted,
    Updated,
    /// Not enough free bytes even after compaction; the page is unchanged.
    NoRoom,
}

#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Slot {
    pub offset: usize,
    pub suffix_len: usize,
    /// Value bytes on the page (without the blob flag).
    pub value_len: usize,
    /// The value bytes are a blob reference (`value_len`'s bit 15).
    pub blob: bool,
    pub head: u32,
}

impl Slot {
    pub fn record_len(&self) -> usize {
        self.suffix_len + self.value_len
    }
}

/// An in-memory data page. See the module doc for its invariants.
#[derive(Clone, Debug)]
pub struct Page {
    pub(super) buf: Vec<u8>,
    pub(super) size: PageSize,
    pub(super) kind: PageKind,
    pub(super) upper_unbounded: bool,
    pub(super) prefix_len: usize,
    pub(super) lower_len: usize,
    pub(super) upper_len: usize,
    pub(super) count: usize,
    pub(super) heap_start: usize,
    pub(super) fragmented: usize,
    pub(super) overflow: Option<PageId>,
}

/// A record's value as its page holds it: the value itself, or the reference to its blob run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stored<'a> {
    Inline(&'a [u8]),
    Blob(BlobRef),
}

/// [`Stored`], owned (a reorganization's records, a write-back's prepared values).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoredValue {
    Inline(Vec<u8>),
    Blob(BlobRef),
}

impl Stored<'_> {
    /// Bytes the value takes on the page.
    pub fn page_bytes(&self) -> usize {
        match self {
            Stored::Inline(v) => v.len(),
            Stored::Blob(_) => blob::REF_LEN,
        }
    }

    pub fn to_owned_value(&self) -> StoredValue {
        match *self {
            Stored::Inline(v) => StoredValue::Inline(v.to_vec()),
            Stored::Blob(r) => StoredValue::Blob(r),
        }
    }

    pub fn blob(&self) -> Option<BlobRef> {
        match *self {
            Stored::Inline(_) => None,
            Stored::Blob(r) => Some(r),
        }
    }
}

impl<'a> Stored<'a> {
    /// The value bytes when they are on the page.
    pub fn inline(self) -> Option<&'a [u8]> {
        match self {
            Stored::Inline(v) => Some(v),
            Stored::Blob(_) => None,
        }
    }
}

impl StoredValue {
    pub fn as_stored(&self) -> Stored<'_> {
        match self {
            StoredValue::Inline(v) => Stored::Inline(v),
            StoredValue::Blob(r) => Stored::Blob(*r),
        }
    }
}

/// One record of a page: the key is `prefix ++ suffix`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry<'a> {
    pub prefix: &'a [u8],
    pub suffix: &'a [u8],
    pub value: Stored<'a>,
}

impl Entry<'_> {
    pub fn key(&self) -> Vec<u8> {
        [self.prefix, self.suffix].concat()
    }

    /// Orders this record's key (`prefix ++ suffix`) against `key` without building it.
    pub fn cmp_key(&self, key: &[u8]) -> Ordering {
        match key.strip_prefix(self.prefix) {
            Some(rest) => self.suffix.cmp(rest),
            None => self.prefix.iter().chain(self.suffix).cmp(key.iter()),
        }
    }

    /// Orders the keys of two records, which may carry different prefixes.
    pub fn cmp_entry(&self, other: &Entry<'_>) -> Ordering {
        match self.prefix == other.prefix {
            true => self.suffix.cmp(other.suffix),
            false => self.prefix.iter().chain(self.suffix).cmp(other.prefix.iter().chain(other.suffix)),
        }
    }
}

pub(super) fn check_kind(kind: &PageKind) -> std::result::Result<(), String> {
    match *kind {
        PageKind::SegmentHead { pages, model, .. } => {
            if !l::is_segment_page_count(pages) {
                return Err(format!("segment page count {pages} is not 1, 2, 4, 8 or 16"));
            }
            match model {
                None if pages == 1 => Ok(()),
                None => Err(format!("a {pages}-page segment needs a model")),
                Some(_) if pages == 1 => Err("a one-page segment has no model".into()),
                Some(m) if m.pages != pages || !m.is_well_formed() => {
                    Err(format!("model {m:?} is not valid for a {pages}-page segment"))
                }
                Some(_) => Ok(()),
            }
        }
        PageKind::SegmentMember { pages, index } => {
            if pages < 2 || !l::is_segment_page_count(pages) || index == 0 || index >= pages {
                return Err(format!("member page {index} of a {pages}-page segment is impossible"));
            }
            Ok(())
        }
        PageKind::Overflow => Ok(()),
    }
}

impl Page {
    /// An empty page with fences `[lower, upper)` (`upper = None`: unbounded).
    pub fn new(size: PageSize, kind: PageKind, lower: &[u8], upper: Option<&[u8]>) -> Result<Page> {
        check_kind(&kind).map_err(Error::invalid)?;
        let max_key = size.max_key_bytes();
        if lower.len() > max_key || upper.is_some_and(|u| u.len() > max_key) {
            return Err(Error::invalid(format!("treeline fence longer than the {max_key}-byte key limit")));
        }
        if upper.is_some_and(|u| u <= lower) {
            return Err(Error::invalid("treeline page fences must satisfy lower < upper"));
        }
        let upper_bytes = upper.unwrap_or(&[]);
        let prefix_len = upper.map_or(0, |u| crate::key_projection::common_prefix(lower, u));
        let mut buf = vec![0u8; size.bytes()];
        l::put_bytes(&mut buf, l::HEADER_LEN, lower);
        l::put_bytes(&mut buf, l::HEADER_LEN + lower.len(), upper_bytes);
        Ok(Page {
            buf,
            size,
            kind,
            upper_unbounded: upper.is_none(),
            prefix_len,
            lower_len: lower.len(),
            upper_len: upper_bytes.len(),
            count: 0,
            heap_start: size.bytes(),
            fragmented: 0,
            overflow: None,
        })
    }

    /// An empty overflow page for `base` (same fences, kind overflow).
    pub fn new_overflow_for(base: &Page) -> Result<Page> {
        Page::new(base.size, PageKind::Overflow, base.lower_fence(), base.upper_fence())
    }

    pub fn page_size(&self) -> PageSize {
        self.size
    }

    pub fn kind(&self) -> PageKind {
        self.kind
    }

    pub fn lower_fence(&self) -> &[u8] {
        self.buf.get(l::HEADER_LEN..l::HEADER_LEN + self.lower_len).unwrap_or(&[])
    }

    /// `None` when the page is the last of the key space.
    pub fn upper_fence(&self) -> Option<&[u8]> {
        let start = l::HEADER_LEN + self.lower_len;
        (!self.upper_unbounded).then(|| self.buf.get(start..start + self.upper_len).unwrap_or(&[]))
    }

    /// The bytes every key of this page starts with (stored keys omit them).
    pub fn prefix(&self) -> &[u8] {
        self.lower_fence().get(..self.prefix_len).unwrap_or(&[])
    }

    /// Whether `key` lies inside `[lower, upper)`.
    pub fn covers(&self, key: &[u8]) -> bool {
        key >= self.lower_fence() && self.upper_fence().is_none_or(|u| key < u)
    }

    pub fn record_count(&self) -> usize {
        self.count
    }

    /// Free bytes: the gap between slots and records plus fragmented record bytes.
    pub fn free_bytes(&self) -> usize {
        self.gap() + self.fragmented
    }

    /// Bytes inside the heap that belong to no record (reclaimed by [`Page::compact`]).
    pub fn fragmented_bytes(&self) -> usize {
        self.fragmented
    }

    pub fn overflow(&self) -> Option<PageId> {
        self.overflow
    }

    /// Links this base page to its overflow page (`None` unlinks). Overflow pages have none.
    pub fn set_overflow(&mut self, overflow: Option<PageId>) -> Result<()> {
        if matches!(self.kind, PageKind::Overflow) && overflow.is_some() {
            return Err(Error::invalid("an overflow page cannot have an overflow page"));
        }
        if overflow == Some(0) {
            return Err(Error::invalid("page id 0 is reserved and cannot be an overflow page"));
        }
        self.overflow = overflow;
        Ok(())
    }

    /// Sets the production id of a segment head (0 invalidates the segment, paper §4.5 Phase IV).
    pub fn set_production_id(&mut self, id: u64) -> Result<()> {
        match &mut self.kind {
            PageKind::SegmentHead { production_id, .. } => {
                *production_id = id;
                Ok(())
            }
            _ => Err(Error::invalid("only a segment's head page carries a production id")),
        }
    }

    pub(super) fn fences_end(&self) -> usize {
        l::HEADER_LEN + self.lower_len + self.upper_len
    }

    pub(super) fn slots_end(&self) -> usize {
        self.fences_end() + self.count * l::SLOT_LEN
    }

    fn gap(&self) -> usize {
        self.heap_start.saturating_sub(self.slots_end())
    }

    pub(super) fn slot(&self, i: usize) -> Slot {
        let at = self.fences_end() + i * l::SLOT_LEN;
        let field = |off: usize| usize::from(l::u16_at(&self.buf, at + off).unwrap_or(0));
        let value_field = field(l::SLOT_VALUE_LEN);
        Slot {
            offset: field(l::SLOT_OFFSET),
            suffix_len: field(l::SLOT_SUFFIX_LEN),
            value_len: value_field & !l::SLOT_VALUE_BLOB_FLAG,
            blob: value_field & l::SLOT_VALUE_BLOB_FLAG != 0,
            head: self
                .buf
                .get(at + l::SLOT_HEAD..at + l::SLOT_LEN)
                .map_or(0, |h| u32::from_be_bytes(h.try_into().unwrap_or([0; 4]))),
        }
    }

    fn write_slot(&mut self, i: usize, slot: Slot) {
        let at = self.fences_end() + i * l::SLOT_LEN;
        let mut bytes = [0u8; l::SLOT_LEN];
        // Lengths fit u16: keys and records are bounded by the page size limits (< 64 KiB), and
        // offsets are < P <= 65536 because a record with bytes starts below the page end.
        l::put_bytes(&mut bytes, l::SLOT_OFFSET, &(slot.offset as u16).to_le_bytes());
        l::put_bytes(&mut bytes, l::SLOT_SUFFIX_LEN, &(slot.suffix_len as u16).to_le_bytes());
        let value_field = slot.value_len | if slot.blob { l::SLOT_VALUE_BLOB_FLAG } else { 0 };
        l::put_bytes(&mut bytes, l::SLOT_VALUE_LEN, &(value_field as u16).to_le_bytes());
        l::put_bytes(&mut bytes, l::SLOT_HEAD, &slot.head.to_be_bytes());
        l::put_bytes(&mut self.buf, at, &bytes);
    }

    pub(super) fn suffix_of(&self, slot: &Slot) -> &[u8] {
        self.buf.get(slot.offset..slot.offset + slot.suffix_len).unwrap_or(&[])
    }

    fn value_bytes_of(&self, slot: &Slot) -> &[u8] {
        let start = slot.offset + slot.suffix_len;
        self.buf.get(start..start + slot.value_len).unwrap_or(&[])
    }

    /// A slot's value. A blob reference that does not decode (only an unvalidated page could
    /// hold one) becomes a reference to page 0, which no blob read accepts.
    fn value_of(&self, slot: &Slot) -> Stored<'_> {
        let bytes = self.value_bytes_of(slot);
        match slot.blob {
            false => Stored::Inline(bytes),
            true => Stored::Blob(BlobRef::decode(bytes).unwrap_or(BlobRef {
                first_page: 0,
                value_len: 0,
                crc: 0,
                blob_id: 0,
            })),
        }
    }

    /// The record in slot `i` (`i < record_count()`).
    pub fn entry(&self, i: usize) -> Entry<'_> {
        let slot = self.slot(i);
        Entry { prefix: self.prefix(), suffix: self.suffix_of(&slot), value: self.value_of(&slot) }
    }

    /// Binary search for a key suffix: `Ok(i)` if slot `i` holds it, `Err(i)` for its insert point.
    pub(super) fn search(&self, suffix: &[u8]) -> std::result::Result<usize, usize> {
        let head = l::key_head(suffix);
        let (mut lo, mut hi) = (0, self.count);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let slot = self.slot(mid);
            let ord = slot.head.cmp(&head).then_with(|| self.suffix_of(&slot).cmp(suffix));
            match ord {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }

    /// The suffix of an in-range key (the prefix is shared by every in-range key).
    fn suffix<'k>(&self, key: &'k [u8]) -> &'k [u8] {
        key.get(self.prefix_len..).unwrap_or(&[])
    }

    pub fn get(&self, key: &[u8]) -> Option<Stored<'_>> {
        if !self.covers(key) {
            return None;
        }
        let i = self.search(self.suffix(key)).ok()?;
        Some(self.value_of(&self.slot(i)))
    }

    /// Inserts or replaces `key`'s value, inline. See [`Page::put_stored`].
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<PutOutcome> {
        self.put_stored(key, Stored::Inline(value))
    }

    /// Inserts or replaces `key`'s value (inline or a blob reference). Errors: the key is outside
    /// the fences or the record is over the page size's limits. `NoRoom` leaves the page
    /// unchanged.
    pub fn put_stored(&mut self, key: &[u8], value: Stored<'_>) -> Result<PutOutcome> {
        let encoded_ref;
        let (bytes, blob) = match value {
            Stored::Inline(v) => (v, false),
            Stored::Blob(r) => {
                encoded_ref = r.encode();
                (&encoded_ref[..], true)
            }
        };
        l::check_record_size(self.size, key, bytes)?;
        if !self.covers(key) {
            return Err(Error::invalid("treeline page put of a key outside the page's fences"));
        }
        let suffix = self.suffix(key);
        let need = suffix.len() + bytes.len();
        match self.search(suffix) {
            Ok(i) => {
                let old = self.slot(i);
                if old.value_len == bytes.len() && old.blob == blob {
                    l::put_bytes(&mut self.buf, old.offset + old.suffix_len, bytes);
                    return Ok(PutOutcome::Updated);
                }
                if self.free_bytes() + old.record_len() < need {
                    return Ok(PutOutcome::NoRoom);
                }
                self.remove_slot(i);
                self.insert_at(i, suffix, bytes, blob);
                Ok(PutOutcome::Updated)
            }
            Err(i) => {
                if self.free_bytes() < need + l::SLOT_LEN || self.count >= usize::from(u16::MAX) {
                    return Ok(PutOutcome::NoRoom);
                }
                self.insert_at(i, suffix, bytes, blob);
                Ok(PutOutcome::Inserted)
            }
        }
    }

    /// Removes `key`; returns whether it was present. Its record's bytes become fragmented.
    pub fn delete(&mut self, key: &[u8]) -> bool {
        if !self.covers(key) {
            return false;
        }
        match self.search(self.suffix(key)) {
            Ok(i) => {
                self.remove_slot(i);
                true
            }
            Err(_) => false,
        }
    }

    /// Removes slot `i`, accounting its record as fragmented.
    fn remove_slot(&mut self, i: usize) {
        let old = self.slot(i);
        let start = self.fences_end() + (i + 1) * l::SLOT_LEN;
        let end = self.slots_end();
        self.buf.copy_within(start..end, start - l::SLOT_LEN);
        self.count -= 1;
        self.fragmented += old.record_len();
        if self.count == 0 {
            // An empty heap has nothing to keep: reclaim it without copying.
            self.heap_start = self.size.bytes();
            self.fragmented = 0;
        }
    }

    /// Appends a record and inserts its slot at `i`. The caller checked `free_bytes()` suffices.
    fn insert_at(&mut self, i: usize, suffix: &[u8], value: &[u8], blob: bool) {
        let need = suffix.len() + value.len();
        if self.gap() < need + l::SLOT_LEN {
            self.compact();
        }
        let offset = if need == 0 {
            0
        } else {
            self.heap_start -= need;
            l::put_bytes(&mut self.buf, self.heap_start, suffix);
            l::put_bytes(&mut self.buf, self.heap_start + suffix.len(), value);
            self.heap_start
        };
        let start = self.fences_end() + i * l::SLOT_LEN;
        let end = self.slots_end();
        self.buf.copy_within(start..end, start + l::SLOT_LEN);
        self.count += 1;
        let slot = Slot {
            offset,
            suffix_len: suffix.len(),
            value_len: value.len(),
            blob,
            head: l::key_head(suffix),
        };
        self.write_slot(i, slot);
    }

    /// Rewrites the live records contiguously at the end of the page (in key order), so all free
    /// bytes form one gap. Keys, values and order are unchanged; the freed bytes are zeroed.
    pub fn compact(&mut self) {
        if self.fragmented == 0 {
            return;
        }
        let old = self.buf.clone();
        let mut top = self.size.bytes();
        for i in (0..self.count).rev() {
            let mut slot = self.slot(i);
            let len = slot.record_len();
            if len > 0 {
                top -= len;
                let bytes = old.get(slot.offset..slot.offset + len).unwrap_or(&[]);
                l::put_bytes(&mut self.buf, top, bytes);
                slot.offset = top;
                self.write_slot(i, slot);
            }
        }
        let slots_end = self.slots_end();
        if let Some(freed) = self.buf.get_mut(slots_end..top) {
            freed.fill(0);
        }
        self.heap_start = top;
        self.fragmented = 0;
    }

    /// Writes the header fields and the checksum into the buffer and returns the page's bytes,
    /// ready to be written at the page's file offset.
    pub fn seal(&mut self) -> &[u8] {
        let header = self.encode_header();
        l::put_bytes(&mut self.buf, 0, &header);
        let crc = crc32c::crc32c(self.buf.get(4..).unwrap_or(&[]));
        l::put_bytes(&mut self.buf, l::CRC, &crc.to_le_bytes());
        &self.buf
    }

    /// Seals the page and hands its buffer over.
    pub fn into_sealed_bytes(mut self) -> Vec<u8> {
        self.seal();
        self.buf
    }

    fn encode_header(&self) -> [u8; l::HEADER_LEN] {
        let mut h = [0u8; l::HEADER_LEN];
        let mut put = |at: usize, bytes: &[u8]| {
            l::put_bytes(&mut h, at, bytes);
        };
        put(l::MAGIC, &l::MAGIC_BYTES);
        put(l::VERSION, &[l::FORMAT_VERSION]);
        let (kind, pages, index, production, model) = match self.kind {
            PageKind::SegmentHead { pages, production_id, model } => {
                (l::KIND_HEAD, pages, 0, production_id, model)
            }
            PageKind::SegmentMember { pages, index } => (l::KIND_MEMBER, pages, index, 0, None),
            PageKind::Overflow => (l::KIND_OVERFLOW, 0, 0, 0, None),
        };
        put(l::KIND, &[kind]);
        put(l::PAGE_SIZE_LOG2, &[self.size.log2()]);
        put(l::FLAGS, &[if self.upper_unbounded { l::FLAG_UPPER_UNBOUNDED } else { 0 }]);
        put(l::SEGMENT_PAGES, &[pages]);
        put(l::PAGE_INDEX, &[index]);
        put(l::RECORD_COUNT, &(self.count as u16).to_le_bytes());
        put(l::PREFIX_LEN, &(self.prefix_len as u16).to_le_bytes());
        put(l::LOWER_LEN, &(self.lower_len as u16).to_le_bytes());
        put(l::UPPER_LEN, &(self.upper_len as u16).to_le_bytes());
        put(l::HEAP_START, &(self.heap_start as u32).to_le_bytes());
        put(l::FRAGMENTED, &(self.fragmented as u32).to_le_bytes());
        put(l::OVERFLOW_PAGE, &self.overflow.unwrap_or(0).to_le_bytes());
        put(l::PRODUCTION_ID, &production.to_le_bytes());
        if let Some(m) = model {
            put(l::MODEL_BASE, &m.base.to_le_bytes());
            put(l::MODEL_SLOPE, &m.slope.to_bits().to_le_bytes());
            put(l::MODEL_INTERCEPT, &m.intercept.to_bits().to_le_bytes());
            put(l::MODEL_PREFIX_LEN, &m.prefix_len.to_le_bytes());
        }
        h
    }
}
