//! Engine `f2` (being written).
