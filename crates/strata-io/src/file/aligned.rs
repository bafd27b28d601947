//! A heap buffer aligned for O_DIRECT I/O.

use std::alloc::{self, Layout};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// Alignment O_DIRECT needs for buffer addresses, file offsets and lengths. 4096 covers every
/// common logical block size (512 and 4096).
pub const DIRECT_IO_ALIGNMENT_BYTES: usize = 4096;

/// A zeroed heap buffer whose address and length are multiples of [`DIRECT_IO_ALIGNMENT_BYTES`].
pub struct AlignedBuf {
    /// Invariant: allocated by `alloc_zeroed(layout(capacity_bytes))`, owned by this value, and
    /// never aliased outside borrows of `self`.
    ptr: NonNull<u8>,
    len: usize,
    /// `max(len, DIRECT_IO_ALIGNMENT_BYTES)`: never zero, so the allocation is never zero-sized.
    capacity_bytes: usize,
}

// SAFETY: `AlignedBuf` uniquely owns its allocation (like `Vec<u8>`); shared access only reads.
unsafe impl Send for AlignedBuf {}
// SAFETY: `&AlignedBuf` only allows reads of initialised bytes.
unsafe impl Sync for AlignedBuf {}

fn layout(capacity_bytes: usize) -> Layout {
    match Layout::from_size_align(capacity_bytes, DIRECT_IO_ALIGNMENT_BYTES) {
        Ok(layout) => layout,
        Err(_) => panic!("AlignedBuf of {capacity_bytes} bytes exceeds isize::MAX"),
    }
}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes rounded up to the alignment.
    ///
    /// # Panics
    /// Like `Vec::with_capacity`, if the rounded length exceeds `isize::MAX`; aborts if the
    /// allocation fails.
    pub fn new(len: usize) -> AlignedBuf {
        let Some(len) = len.checked_next_multiple_of(DIRECT_IO_ALIGNMENT_BYTES) else {
            panic!("AlignedBuf of {len} bytes overflows usize when rounded up to the alignment");
        };
        let capacity_bytes = len.max(DIRECT_IO_ALIGNMENT_BYTES);
        let layout = layout(capacity_bytes);
        // SAFETY: `layout` has a non-zero size (capacity_bytes >= DIRECT_IO_ALIGNMENT_BYTES).
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, len, capacity_bytes }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` points to `capacity_bytes >= len` initialised (zeroed) bytes owned by self;
        // the shared borrow of self prevents mutation for the slice's lifetime.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`; the exclusive borrow of self makes the slice unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: `ptr` was allocated in `new` with exactly this layout and is freed only here.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), layout(self.capacity_bytes)) }
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
    }
}

impl fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AlignedBuf").field("len", &self.len).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_is_rounded_up_and_address_is_aligned() {
        for (asked, expected) in [(0, 0), (1, 4096), (4096, 4096), (4097, 8192), (10_000, 12_288)] {
            let buf = AlignedBuf::new(asked);
            assert_eq!(buf.len(), expected, "len for {asked}");
            assert_eq!(buf.as_ptr() as usize % DIRECT_IO_ALIGNMENT_BYTES, 0, "address for {asked}");
            assert!(buf.iter().all(|&b| b == 0), "zeroed for {asked}");
        }
        assert!(AlignedBuf::new(0).is_empty());
    }

    #[test]
    fn writes_are_visible_through_every_view() {
        let mut buf = AlignedBuf::new(5000);
        buf[4999] = 7;
        buf.as_mut_slice()[0] = 1;
        assert_eq!(buf.as_slice()[4999], 7);
        assert_eq!(buf[0], 1);
        assert_eq!(buf.iter().map(|&b| u32::from(b)).sum::<u32>(), 8);
    }

    #[test]
    fn is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<AlignedBuf>();
    }
}
