#![no_main]
//! Damage to TurtleKV's WAL (docs/format/wal.md): edited, optionally resealed
//! (`strata_fuzz::targets::TURTLE_WAL`), then opened, read, scanned and verified
//! (`strata_fuzz::damaged_store` says what is a bug).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| strata_fuzz::damaged_store(&strata_fuzz::targets::TURTLE_WAL, data));
