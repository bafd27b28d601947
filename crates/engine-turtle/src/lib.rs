//! Strata engine `turtle` (TurtleKV, ../shared/papers/turtlekv.txt), being built: so far the
//! TurtleTree in memory (`tree`). docs/research/turtle-design.md is the plan; the engine (WAL,
//! Big MemTable, checkpoints, registration as `turtle`) follows.

pub mod tree;
