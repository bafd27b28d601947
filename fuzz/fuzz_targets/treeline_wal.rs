#![no_main]
//! Damage to engine `treeline`'s WAL segments as treeline replays them into its record cache: open, read, scan and verify never panic and never return a value a key
//! never held (`strata_fuzz::damaged_store`).

use libfuzzer_sys::fuzz_target;
use strata::EngineKind;

fuzz_target!(|data: &[u8]| strata_fuzz::damaged_store(
    EngineKind::Treeline,
    |n| n.starts_with("treeline-wal-"),
    data
));
