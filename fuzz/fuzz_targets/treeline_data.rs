#![no_main]
//! Damage to TreeLine's data file, its header and its base and overflow pages (docs/format/treeline.md): open, read, scan and verify never panic and never return a value a key
//! never held (`strata_fuzz::damaged_store`).

use libfuzzer_sys::fuzz_target;
use strata::EngineKind;

fuzz_target!(|data: &[u8]| strata_fuzz::damaged_store(EngineKind::Treeline, |n| n == "treeline-data", data));
