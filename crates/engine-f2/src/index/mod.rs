//! The two hash indexes: the latch-free in-memory hot-log index and the two-level cold-log index.

pub mod cold;
pub mod hot;
