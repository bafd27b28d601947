//! Opening a page from untrusted bytes. Every check the format states (docs/format/treeline.md,
//! "Checksums and corruption") is made here, so a damaged page becomes
//! `Error::Corruption { file, offset, what }` — never a panic, never wrong data. A problem is
//! reported at the page's file offset plus the offset of the field that failed.

use strata_core::{Error, Result};

use super::layout::{self as l, PageSize};
use super::slotted::{check_kind, Page, PageKind};
use crate::key_projection::common_prefix;
use crate::model::SegmentModel;

/// A failed check: the offset inside the page and what was wrong.
type Bad = (usize, String);
type Check<T> = std::result::Result<T, Bad>;

fn bad<T>(at: usize, what: impl Into<String>) -> Check<T> {
    Err((at, what.into()))
}

fn byte(buf: &[u8], at: usize) -> Check<u8> {
    buf.get(at).copied().ok_or((at, "page truncated".to_string()))
}

fn u16f(buf: &[u8], at: usize) -> Check<usize> {
    l::u16_at(buf, at).map(usize::from).ok_or((at, "page truncated".to_string()))
}

fn u32f(buf: &[u8], at: usize) -> Check<usize> {
    l::u32_at(buf, at).map(|v| v as usize).ok_or((at, "page truncated".to_string()))
}

fn u64f(buf: &[u8], at: usize) -> Check<u64> {
    l::u64_at(buf, at).ok_or((at, "page truncated".to_string()))
}

impl Page {
    /// Opens a sealed page read from `file` at byte `offset`, validating everything.
    pub fn open(bytes: Vec<u8>, file: &str, offset: u64) -> Result<Page> {
        decode(bytes).map_err(|(at, what)| {
            Error::corruption(file, offset.saturating_add(at as u64), format!("treeline page: {what}"))
        })
    }
}

fn decode(buf: Vec<u8>) -> Check<Page> {
    let Ok(size) = PageSize::new(buf.len()) else {
        return bad(0, format!("{} bytes is not a valid page size", buf.len()));
    };
    let stored = u32f(&buf, l::CRC)? as u32;
    if crc32c::crc32c(buf.get(4..).unwrap_or(&[])) != stored {
        return bad(0, "checksum mismatch");
    }
    if buf.get(l::MAGIC..l::MAGIC + 2) != Some(&l::MAGIC_BYTES[..]) {
        return bad(l::MAGIC, "bad magic");
    }
    if byte(&buf, l::VERSION)? != l::FORMAT_VERSION {
        return bad(l::VERSION, format!("unknown format version {}", byte(&buf, l::VERSION)?));
    }
    if byte(&buf, l::PAGE_SIZE_LOG2)? != size.log2() {
        return bad(l::PAGE_SIZE_LOG2, "page size field does not match the page's length");
    }
    let flags = byte(&buf, l::FLAGS)?;
    if flags & !l::FLAG_UPPER_UNBOUNDED != 0 {
        return bad(l::FLAGS, format!("unknown flags {flags:#x}"));
    }
    let zeros = |at: usize, len: usize| buf.get(at..at + len).is_some_and(|b| b.iter().all(|&x| x == 0));
    if !zeros(l::RESERVED_A, 4) || !zeros(l::RESERVED_B, l::HEADER_LEN - l::RESERVED_B) {
        return bad(l::RESERVED_A, "reserved header bytes are not zero");
    }
    let kind = decode_kind(&buf, size)?;
    let overflow = u64f(&buf, l::OVERFLOW_PAGE)?;
    if overflow != 0 && kind == PageKind::Overflow {
        return bad(l::OVERFLOW_PAGE, "an overflow page points to an overflow page");
    }
    let page = decode_geometry(buf, size, kind, flags, overflow)?;
    check_slots(&page)?;
    Ok(page)
}

fn decode_kind(buf: &[u8], size: PageSize) -> Check<PageKind> {
    let pages = byte(buf, l::SEGMENT_PAGES)?;
    let index = byte(buf, l::PAGE_INDEX)?;
    let production_id = u64f(buf, l::PRODUCTION_ID)?;
    let model_zero = buf.get(l::MODEL_BASE..l::HEADER_LEN).is_some_and(|b| b.iter().all(|&x| x == 0));
    let kind = match byte(buf, l::KIND)? {
        l::KIND_HEAD if pages > 1 => {
            let model = SegmentModel {
                prefix_len: u16f(buf, l::MODEL_PREFIX_LEN)? as u16,
                base: u64f(buf, l::MODEL_BASE)?,
                slope: f64::from_bits(u64f(buf, l::MODEL_SLOPE)?),
                intercept: f64::from_bits(u64f(buf, l::MODEL_INTERCEPT)?),
                pages,
            };
            if usize::from(model.prefix_len) > size.max_key_bytes() {
                return bad(l::MODEL_PREFIX_LEN, "model prefix longer than the key limit");
            }
            PageKind::SegmentHead { pages, production_id, model: Some(model) }
        }
        l::KIND_HEAD => PageKind::SegmentHead { pages, production_id, model: None },
        l::KIND_MEMBER => PageKind::SegmentMember { pages, index },
        l::KIND_OVERFLOW if pages == 0 => PageKind::Overflow,
        l::KIND_OVERFLOW => return bad(l::SEGMENT_PAGES, "an overflow page has a segment page count"),
        other => return bad(l::KIND, format!("unknown page kind {other}")),
    };
    if let Err(what) = check_kind(&kind) {
        return bad(l::SEGMENT_PAGES, what);
    }
    let is_multi_head = matches!(kind, PageKind::SegmentHead { model: Some(_), .. });
    if !is_multi_head && !model_zero {
        return bad(l::MODEL_BASE, "model fields set on a page that has no model");
    }
    if !matches!(kind, PageKind::SegmentHead { .. }) && (production_id != 0 || index_is_set(&kind, index)) {
        return bad(l::PRODUCTION_ID, "production id or page index set on a page that has none");
    }
    Ok(kind)
}

fn index_is_set(kind: &PageKind, index: u8) -> bool {
    matches!(kind, PageKind::Overflow) && index != 0
}

fn decode_geometry(buf: Vec<u8>, size: PageSize, kind: PageKind, flags: u8, overflow: u64) -> Check<Page> {
    if matches!(kind, PageKind::SegmentHead { .. }) && byte(&buf, l::PAGE_INDEX)? != 0 {
        return bad(l::PAGE_INDEX, "a segment head has a page index");
    }
    let (count, prefix_len) = (u16f(&buf, l::RECORD_COUNT)?, u16f(&buf, l::PREFIX_LEN)?);
    let (lower_len, upper_len) = (u16f(&buf, l::LOWER_LEN)?, u16f(&buf, l::UPPER_LEN)?);
    let (heap_start, fragmented) = (u32f(&buf, l::HEAP_START)?, u32f(&buf, l::FRAGMENTED)?);
    let unbounded = flags & l::FLAG_UPPER_UNBOUNDED != 0;
    if lower_len > size.max_key_bytes() || upper_len > size.max_key_bytes() {
        return bad(l::LOWER_LEN, "fence longer than the key limit");
    }
    let lower = buf.get(l::HEADER_LEN..l::HEADER_LEN + lower_len).unwrap_or(&[]);
    let upper_at = l::HEADER_LEN + lower_len;
    let upper = buf.get(upper_at..upper_at + upper_len).unwrap_or(&[]);
    if unbounded && upper_len != 0 {
        return bad(l::UPPER_LEN, "an unbounded page has an upper fence");
    }
    if !unbounded && upper <= lower {
        return bad(upper_at, "upper fence is not above the lower fence");
    }
    let expected_prefix = if unbounded { 0 } else { common_prefix(lower, upper) };
    if prefix_len != expected_prefix {
        return bad(l::PREFIX_LEN, format!("prefix length {prefix_len}, fences share {expected_prefix}"));
    }
    let slots_end = upper_at + upper_len + count * l::SLOT_LEN;
    if slots_end > heap_start || heap_start > size.bytes() {
        return bad(l::HEAP_START, format!("heap start {heap_start} outside {slots_end}..={}", size.bytes()));
    }
    if fragmented > size.bytes() - heap_start {
        return bad(l::FRAGMENTED, "more fragmented bytes than the heap holds");
    }
    Ok(Page {
        buf,
        size,
        kind,
        upper_unbounded: unbounded,
        prefix_len,
        lower_len,
        upper_len,
        count,
        heap_start,
        fragmented,
        overflow: (overflow != 0).then_some(overflow),
    })
}

/// Checks every slot: bounds, head, fences, strict order, no overlap, exact byte accounting.
fn check_slots(page: &Page) -> Check<()> {
    let size = page.size;
    let lower_suffix = page.lower_fence().get(page.prefix_len..).unwrap_or(&[]);
    let upper_suffix = page.upper_fence().map(|u| u.get(page.prefix_len..).unwrap_or(&[]));
    let mut extents = Vec::with_capacity(page.count);
    let mut previous: Option<&[u8]> = None;
    for i in 0..page.count {
        let at = page.fences_end() + i * l::SLOT_LEN;
        let slot = page.slot(i);
        let len = slot.record_len();
        if page.prefix_len + slot.suffix_len > size.max_key_bytes()
            || page.prefix_len + len > size.max_record_bytes()
        {
            return bad(at, format!("slot {i} exceeds the key or record size limit"));
        }
        if slot.blob {
            let at_value = at + l::SLOT_VALUE_LEN;
            if slot.value_len != crate::blob::REF_LEN {
                return bad(at_value, format!("slot {i}: a blob reference of {} bytes", slot.value_len));
            }
            let value_at = slot.offset + slot.suffix_len;
            let reference = page.buf.get(value_at..value_at + slot.value_len).unwrap_or_default();
            if let Err((field, what)) = crate::blob::BlobRef::decode(reference) {
                return bad(value_at + field, format!("slot {i}: {what}"));
            }
        }
        if len == 0 && slot.offset != 0 {
            return bad(at, format!("slot {i}: an empty record must have offset 0"));
        }
        if len > 0 && (slot.offset < page.heap_start || slot.offset + len > size.bytes()) {
            return bad(at, format!("slot {i}: record {}+{len} outside the heap", slot.offset));
        }
        let suffix = page.suffix_of(&slot);
        if l::key_head(suffix) != slot.head {
            return bad(at + l::SLOT_HEAD, format!("slot {i}: key head does not match the key"));
        }
        if suffix < lower_suffix || upper_suffix.is_some_and(|u| suffix >= u) {
            return bad(at, format!("slot {i}: key outside the page's fences"));
        }
        if previous.is_some_and(|p| p >= suffix) {
            return bad(at, format!("slot {i}: keys not strictly increasing"));
        }
        previous = Some(suffix);
        if len > 0 {
            extents.push((slot.offset, slot.offset + len));
        }
    }
    check_extents(page, extents)
}

fn check_extents(page: &Page, mut extents: Vec<(usize, usize)>) -> Check<()> {
    extents.sort_unstable();
    let mut live = 0;
    let mut end_of_previous = 0;
    for &(start, end) in &extents {
        if start < end_of_previous {
            return bad(start, "two records overlap");
        }
        end_of_previous = end;
        live += end - start;
    }
    if live + page.fragmented != page.size.bytes() - page.heap_start {
        return bad(l::FRAGMENTED, "live and fragmented bytes do not add up to the heap");
    }
    Ok(())
}
