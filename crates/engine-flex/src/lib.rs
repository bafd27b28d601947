//! Engine `flex`: FlexTree, FlexFile and FlexDB from the FlexFile paper
//! (`shared/papers/flexfile.txt`).

mod contract;
mod engine;
#[cfg(feature = "experiments")]
pub mod experiments;
pub mod flexdb;
pub mod flexfile;
pub mod flextree;
mod io_kinds;

pub use contract::FACTORY;
pub use engine::{FlexEngine, LIMITS};
pub use flexdb::{FlexOptions, TableFileKind};
