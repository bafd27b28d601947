#![no_main]
//! Damage to TreeLine's double-write area, its entries and the page images the open writes back in place (docs/format/treeline.md; the seed store is taken before close, so it holds images): open, read, scan and verify never panic and never return a value a key
//! never held (`strata_fuzz::damaged_store`).

use libfuzzer_sys::fuzz_target;
use strata::EngineKind;

fuzz_target!(|data: &[u8]| strata_fuzz::damaged_store(EngineKind::Treeline, |n| n == "treeline-dwb", data));
