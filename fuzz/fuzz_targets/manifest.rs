#![no_main]
//! Damage to the directory manifest (docs/format/manifest.md): edited, optionally resealed
//! (`strata_fuzz::targets::MANIFEST`), then opened, read, scanned and verified
//! (`strata_fuzz::damaged_store` says what is a bug).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| strata_fuzz::damaged_store(&strata_fuzz::targets::MANIFEST, data));
