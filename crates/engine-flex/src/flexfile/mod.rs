//! FlexFile (paper §4) and the `TableFile` interface FlexDB is written against.

mod api;
mod commit;
#[cfg(test)]
mod commit_tests;
mod file;
mod format;
mod gc;
mod options;
mod recover;
mod space;

pub use api::{LogMark, TableFile};
pub use file::{FlexFile, FlexFileStats};
pub use options::FlexFileOptions;
