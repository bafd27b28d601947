#![no_main]
//! Damage to f2's hot log segments and records (docs/format/f2-logs.md): open, read, scan and verify never panic and never return a value a key
//! never held (`strata_fuzz::damaged_store`).

use libfuzzer_sys::fuzz_target;
use strata::EngineKind;

fuzz_target!(|data: &[u8]| strata_fuzz::damaged_store(
    EngineKind::F2,
    |n| n.starts_with("f2-hot-") && n.ends_with(".seg"),
    data
));
