#![no_main]
//! Damage to TreeLine's checkpoint and the index in it (docs/format/treeline.md): edited,
//! optionally resealed (`strata_fuzz::targets::TREELINE_CHECKPOINT`), then opened, read, scanned
//! and verified (`strata_fuzz::damaged_store` says what is a bug).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| strata_fuzz::damaged_store(&strata_fuzz::targets::TREELINE_CHECKPOINT, data));
