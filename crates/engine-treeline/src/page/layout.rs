//! Byte offsets, sizes and limits of the slotted data page (docs/format/treeline.md, "Page
//! layout"). Every constant here is checked against encoded pages by `page::tests::offsets`.

use strata_core::{Error, Result};

pub const CRC: usize = 0;
pub const MAGIC: usize = 4;
pub const VERSION: usize = 6;
pub const KIND: usize = 7;
pub const PAGE_SIZE_LOG2: usize = 8;
pub const FLAGS: usize = 9;
pub const SEGMENT_PAGES: usize = 10;
pub const PAGE_INDEX: usize = 11;
pub const RECORD_COUNT: usize = 12;
pub const PREFIX_LEN: usize = 14;
pub const LOWER_LEN: usize = 16;
pub const UPPER_LEN: usize = 18;
pub const HEAP_START: usize = 20;
pub const FRAGMENTED: usize = 24;
pub const RESERVED_A: usize = 28;
pub const OVERFLOW_PAGE: usize = 32;
pub const PRODUCTION_ID: usize = 40;
pub const MODEL_BASE: usize = 48;
pub const MODEL_SLOPE: usize = 56;
pub const MODEL_INTERCEPT: usize = 64;
pub const MODEL_PREFIX_LEN: usize = 72;
pub const RESERVED_B: usize = 74;
/// Fixed header size; the lower fence starts here.
pub const HEADER_LEN: usize = 80;

pub const MAGIC_BYTES: [u8; 2] = *b"TL";
pub const FORMAT_VERSION: u8 = 1;
pub const KIND_HEAD: u8 = 1;
pub const KIND_MEMBER: u8 = 2;
pub const KIND_OVERFLOW: u8 = 3;
pub const FLAG_UPPER_UNBOUNDED: u8 = 1;

/// Slot size and field offsets within a slot.
pub const SLOT_LEN: usize = 10;
pub const SLOT_OFFSET: usize = 0;
pub const SLOT_SUFFIX_LEN: usize = 2;
pub const SLOT_VALUE_LEN: usize = 4;
pub const SLOT_HEAD: usize = 6;
/// Bit of the slot's `value_len` field saying the value bytes are a blob reference.
pub const SLOT_VALUE_BLOB_FLAG: usize = 0x8000;

/// Segment page counts allowed by the format (the paper's 1, 2, 4, 8, 16).
pub const SEGMENT_PAGE_COUNTS: [u8; 5] = [1, 2, 4, 8, 16];
pub const MAX_SEGMENT_PAGES: usize = 16;

pub fn is_segment_page_count(pages: u8) -> bool {
    SEGMENT_PAGE_COUNTS.contains(&pages)
}

/// A validated page size: a power of two from 4 KiB to 64 KiB, fixed when a store is created.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PageSize(u32);

impl PageSize {
    pub const MIN: usize = 4096;
    pub const MAX: usize = 65536;
    pub const DEFAULT: PageSize = PageSize(4096);

    pub fn new(bytes: usize) -> Result<PageSize> {
        if !(Self::MIN..=Self::MAX).contains(&bytes) || !bytes.is_power_of_two() {
            return Err(Error::invalid(format!(
                "treeline page size {bytes} is not a power of two from 4096 to 65536"
            )));
        }
        Ok(PageSize(bytes as u32))
    }

    pub fn bytes(self) -> usize {
        self.0 as usize
    }

    pub fn log2(self) -> u8 {
        self.0.trailing_zeros() as u8
    }

    pub fn from_log2(log2: u8) -> Option<PageSize> {
        let bytes = 1usize.checked_shl(u32::from(log2))?;
        PageSize::new(bytes).ok()
    }

    /// Largest key, in bytes: `P / 16` (256 for 4 KiB). Fences are keys, so they obey it too.
    pub fn max_key_bytes(self) -> usize {
        self.bytes() / 16
    }

    /// Largest key + value, in bytes: `(P − 80 − 2·P/16) / 2 − 10` (1742 for 4 KiB). Two such
    /// records (with their slots) fit on an empty page whose fences have the maximal length and
    /// share no prefix, so splitting a page always leaves each half able to take a record.
    pub fn max_record_bytes(self) -> usize {
        (self.bytes() - HEADER_LEN - 2 * self.max_key_bytes()) / 2 - SLOT_LEN
    }

    /// Upper bound on the records of one page (each needs at least a slot).
    pub fn max_records(self) -> usize {
        (self.bytes() - HEADER_LEN) / SLOT_LEN
    }

    /// The page size for records of these sizes (key + value bytes each): the smallest whose
    /// page holds [`RECORDS_PER_PAGE_TARGET`] records of the median size. Records so large that
    /// no size holds that many get the smallest pages, where each value is a blob run of its
    /// own and a page holds their references. A page of two or three records would make
    /// nearly every insert overflow its page and a third of them reorganize (1 KiB records on
    /// 4 KiB pages loaded at 0.37× the speed of 16 KiB pages, docs/benchmarks.md); larger
    /// pages than needed cost point reads bytes (a miss reads a whole page). No sizes: the
    /// default.
    pub fn for_record_bytes(sizes: &mut [usize]) -> PageSize {
        if sizes.is_empty() {
            return PageSize::DEFAULT;
        }
        let middle = sizes.len() / 2;
        let (_, &mut median, _) = sizes.select_nth_unstable(middle);
        let holds_target = |size: &PageSize| {
            (size.bytes() - HEADER_LEN) / median.saturating_add(SLOT_LEN) >= RECORDS_PER_PAGE_TARGET
        };
        (Self::MIN.ilog2()..=Self::MAX.ilog2())
            .filter_map(|log2| PageSize::new(1 << log2).ok())
            .find(holds_target)
            .unwrap_or(PageSize::DEFAULT)
    }
}

/// Records of the median size a page chosen by [`PageSize::for_record_bytes`] holds at least.
pub const RECORDS_PER_PAGE_TARGET: usize = 12;

/// Checks a key and value against the page size's limits, naming the bound that failed.
pub fn check_record_size(size: PageSize, key: &[u8], value: &[u8]) -> Result<()> {
    if key.len() > size.max_key_bytes() {
        return Err(Error::invalid(format!(
            "treeline key of {} bytes exceeds the limit of {} bytes for {}-byte pages",
            key.len(),
            size.max_key_bytes(),
            size.bytes()
        )));
    }
    if key.len() + value.len() > size.max_record_bytes() {
        return Err(Error::invalid(format!(
            "treeline record of {} key + {} value bytes exceeds the limit of {} bytes for {}-byte pages",
            key.len(),
            value.len(),
            size.max_record_bytes(),
            size.bytes()
        )));
    }
    Ok(())
}

/// The 4-byte key head stored in a slot: the first 4 suffix bytes, zero-padded, as a big-endian
/// integer. Order-preserving (a smaller head means a smaller suffix), so most binary-search steps
/// compare one integer instead of two slices.
pub fn key_head(suffix: &[u8]) -> u32 {
    let mut bytes = [0u8; 4];
    for (dst, src) in bytes.iter_mut().zip(suffix) {
        *dst = *src;
    }
    u32::from_be_bytes(bytes)
}

/// Reads a little-endian `u16` at `at`; `None` past the end of `buf` (never panics).
pub fn u16_at(buf: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(buf.get(at..at.checked_add(2)?)?.try_into().ok()?))
}

pub fn u32_at(buf: &[u8], at: usize) -> Option<u32> {
    strata_core::le_bytes::u32_at(buf, at)
}

pub fn u64_at(buf: &[u8], at: usize) -> Option<u64> {
    strata_core::le_bytes::u64_at(buf, at)
}

/// Writes `bytes` at `at` if they fit; returns whether they did. Callers write only inside
/// ranges they have checked, so `false` signals a broken invariant, reported by a debug assertion.
pub fn put_bytes(buf: &mut [u8], at: usize, bytes: &[u8]) -> bool {
    let Some(end) = at.checked_add(bytes.len()) else { return false };
    match buf.get_mut(at..end) {
        Some(dst) => {
            dst.copy_from_slice(bytes);
            true
        }
        None => {
            debug_assert!(false, "page write {at}..{end} outside a {}-byte buffer", buf.len());
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_for_each_page_size() {
        let four = PageSize::new(4096).unwrap();
        assert_eq!(four.max_key_bytes(), 256);
        assert_eq!(four.max_record_bytes(), 1742);
        let big = PageSize::new(65536).unwrap();
        assert_eq!(big.max_key_bytes(), 4096);
        assert_eq!(big.max_record_bytes(), 28622);
        for log2 in 12..=16u8 {
            let size = PageSize::from_log2(log2).unwrap();
            assert_eq!(size.log2(), log2);
            // Two maximal records and their slots fit beside maximal fences.
            let used = HEADER_LEN + 2 * size.max_key_bytes() + 2 * (SLOT_LEN + size.max_record_bytes());
            assert!(used <= size.bytes());
            assert!(size.max_record_bytes() < usize::from(u16::MAX));
            assert!(size.max_records() <= usize::from(u16::MAX));
        }
    }

    #[test]
    fn a_page_size_for_records_holds_a_dozen_of_the_median_size() {
        let choose = |sizes: &[usize]| PageSize::for_record_bytes(&mut sizes.to_vec()).bytes();
        assert_eq!(choose(&[]), 4096);
        assert_eq!(choose(&[88; 100]), 4096, "YCSB-like 64-byte values");
        assert_eq!(choose(&[124; 100]), 4096);
        assert_eq!(choose(&[500; 100]), 8192);
        assert_eq!(choose(&[1048; 100]), 16384, "1 KiB values: 15 per page, 7 on 8 KiB");
        assert_eq!(choose(&[2048; 100]), 32768);
        assert_eq!(choose(&[5000; 100]), 65536);
        assert_eq!(choose(&[8000; 100]), 4096, "values that become blob runs");
        let mut mixed = vec![1048; 99];
        mixed.push(16 << 20);
        assert_eq!(choose(&mixed), 16384, "one huge value does not move the median");
        for sizes in [&[1usize][..], &[0, 0, 0], &[usize::MAX / 4; 3]] {
            PageSize::for_record_bytes(&mut sizes.to_vec());
        }
    }

    #[test]
    fn rejects_bad_page_sizes() {
        for bad in [0, 1, 2048, 4095, 5000, 131072] {
            assert!(PageSize::new(bad).is_err(), "{bad}");
        }
        assert!(PageSize::from_log2(11).is_none());
        assert!(PageSize::from_log2(17).is_none());
        assert!(PageSize::from_log2(200).is_none());
    }

    #[test]
    fn key_head_orders_like_the_suffix() {
        assert!(key_head(b"") < key_head(b"\x01"));
        assert_eq!(key_head(b"abcd"), key_head(b"abcdz"));
        assert!(key_head(b"abc") < key_head(b"abd"));
        assert_eq!(key_head(b"ab"), 0x6162_0000);
    }
}
