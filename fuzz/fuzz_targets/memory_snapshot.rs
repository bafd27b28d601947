#![no_main]
//! Damage to engine `memory`'s snapshots (docs/format/memory-snapshot.md): edited, optionally
//! resealed (`strata_fuzz::targets::MEMORY_SNAPSHOT`), then opened, read, scanned and verified
//! (`strata_fuzz::damaged_store` says what is a bug).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| strata_fuzz::damaged_store(&strata_fuzz::targets::MEMORY_SNAPSHOT, data));
