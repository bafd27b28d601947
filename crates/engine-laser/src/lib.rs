//! Strata engine `laser` (in progress).

mod cells;
mod layout;
mod manifest;
mod options;
mod version;
