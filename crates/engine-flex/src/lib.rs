//! Engine `flex` (being written): FlexTree, FlexFile and FlexDB from the FlexFile paper
//! (`shared/papers/flexfile.txt`).

mod engine;
pub mod flexdb;
pub mod flexfile;
pub mod flextree;

pub use engine::{FlexEngine, LIMITS};
pub use flexdb::{FlexOptions, TableFileKind};
