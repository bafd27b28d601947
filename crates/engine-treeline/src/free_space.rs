//! placeholder
/// A page's number in the data file; page `id` lives at byte `id * page_size`. Id 0 is reserved.
pub type PageId = u64;
