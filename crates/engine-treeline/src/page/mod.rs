//! TreeLine's slotted data page (adapted from LeanStore's B-tree node layout, paper §4.4): fences
//! with prefix compression, a sorted slot array from the front, records appended at the back.
//! Byte layout: docs/format/treeline.md.

mod iter;
pub mod layout;
mod slotted;
mod validate;

#[cfg(test)]
mod tests;

pub use iter::Iter;
pub use layout::PageSize;
pub use slotted::{Entry, Page, PageKind, PutOutcome, Stored, StoredValue};
