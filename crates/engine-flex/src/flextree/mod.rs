//! FlexTree (paper §3): an extent index where insert-range and collapse-range cost O(log N)
//! because offsets are stored as partial offsets plus shift values on the search path.
//! `page` and `persist` store it copy-on-write in a FlexTree file (docs/format/flexfile.md).

mod leaf;
mod node;
pub(crate) mod page;
pub(crate) mod persist;
mod structure;
mod tree;

#[cfg(test)]
mod tests;

pub use node::{
    Extent, FlexTreeConfig, HOLE_ADDR, MAX_ENTRY_BYTES, MAX_INTERNAL_CAPACITY, MAX_LEAF_CAPACITY,
};
pub(crate) use tree::check_config as check_tree_config;
pub use tree::{FlexTree, MAX_LOGICAL_BYTES};
