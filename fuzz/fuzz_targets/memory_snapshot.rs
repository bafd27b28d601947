#![no_main]
//! Damage to engine `memory`'s snapshots (docs/format/memory-snapshot.md): open, read, scan and verify never panic and never return a value a key
//! never held (`strata_fuzz::damaged_store`).

use libfuzzer_sys::fuzz_target;
use strata::EngineKind;

fuzz_target!(|data: &[u8]| strata_fuzz::damaged_store(
    EngineKind::Memory,
    |n| n.starts_with("snapshot-"),
    data
));
