#![no_main]
//! Damage to laser's WAL segments (docs/format/wal.md, values docs/format/laser.md): edited,
//! optionally resealed (`strata_fuzz::targets::LASER_WAL`), then opened, read, scanned and
//! verified (`strata_fuzz::damaged_store` says what is a bug).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| strata_fuzz::damaged_store(&strata_fuzz::targets::LASER_WAL, data));
