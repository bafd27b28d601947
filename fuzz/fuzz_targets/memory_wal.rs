#![no_main]
//! Damage to the shared WAL's segments and records (docs/format/wal.md) and the batches in them, as engine `memory` replays them: open, read, scan and verify never panic and never return a value a key
//! never held (`strata_fuzz::damaged_store`).

use libfuzzer_sys::fuzz_target;
use strata::EngineKind;

fuzz_target!(|data: &[u8]| strata_fuzz::damaged_store(EngineKind::Memory, |n| n.starts_with("wal-"), data));
