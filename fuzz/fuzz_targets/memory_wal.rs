#![no_main]
//! Damage to the shared WAL's segments and records (docs/format/wal.md) and the batches in them, as
//! engine `memory` replays them: edited, optionally resealed (`strata_fuzz::targets::MEMORY_WAL`),
//! then opened, read, scanned and verified (`strata_fuzz::damaged_store` says what is a bug).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| strata_fuzz::damaged_store(&strata_fuzz::targets::MEMORY_WAL, data));
