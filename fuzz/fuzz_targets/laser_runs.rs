#![no_main]
//! Damage to laser's run files (docs/format/sorted-run.md, entries docs/format/laser.md): edited
//! (`strata_fuzz::targets::LASER_RUNS`), then opened, read, scanned and verified
//! (`strata_fuzz::damaged_store` says what is a bug).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| strata_fuzz::damaged_store(&strata_fuzz::targets::LASER_RUNS, data));
