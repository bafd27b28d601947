#![no_main]
//! Damage to f2's cold log segments and records (docs/format/f2-logs.md): edited, optionally
//! resealed (`strata_fuzz::targets::F2_COLD_LOG`), then opened, read, scanned and verified
//! (`strata_fuzz::damaged_store` says what is a bug).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| strata_fuzz::damaged_store(&strata_fuzz::targets::F2_COLD_LOG, data));
