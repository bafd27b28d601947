//! Engine `flex` (being written): FlexTree, FlexFile and FlexDB from the FlexFile paper
//! (`shared/papers/flexfile.txt`).

pub mod flexfile;
