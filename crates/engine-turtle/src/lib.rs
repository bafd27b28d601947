//! Strata engine `turtle` (TurtleKV, ../shared/papers/turtlekv.txt), being built: the TurtleTree
//! (`tree`) checkpointed into `turtle-pages` (`pages`). docs/research/turtle-design.md is the
//! plan; the engine (WAL, Big MemTable, registration as `turtle`) follows.

pub mod pages;
pub mod tree;
