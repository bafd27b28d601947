#![no_main]
//! Damage to engine `f2`'s WAL segments as f2 replays them: open, read, scan and verify never panic and never return a value a key
//! never held (`strata_fuzz::damaged_store`).

use libfuzzer_sys::fuzz_target;
use strata::EngineKind;

fuzz_target!(|data: &[u8]| strata_fuzz::damaged_store(EngineKind::F2, |n| n.starts_with("f2wal-"), data));
