//! FlexFile (paper §4) and the `TableFile` interface FlexDB is written against.

mod api;

pub use api::TableFile;
