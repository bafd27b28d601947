#![no_main]
//! Damage to TreeLine's stored insert forecasts (docs/format/treeline.md): open, read, scan and verify never panic and never return a value a key
//! never held (`strata_fuzz::damaged_store`).

use libfuzzer_sys::fuzz_target;
use strata::EngineKind;

fuzz_target!(|data: &[u8]| strata_fuzz::damaged_store(
    EngineKind::Treeline,
    |n| n == "treeline-forecast",
    data
));
