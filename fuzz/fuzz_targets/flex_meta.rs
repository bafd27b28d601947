#![no_main]
//! Damage to FlexDB's meta file (docs/format/flexdb.md): edited, optionally resealed
//! (`strata_fuzz::targets::FLEX_META`), then opened, read, scanned and verified
//! (`strata_fuzz::damaged_store` says what is a bug).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| strata_fuzz::damaged_store(&strata_fuzz::targets::FLEX_META, data));
