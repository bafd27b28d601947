#![no_main]
//! Damage to TreeLine's double-write area, its entries and the page images the open writes back in
//! place (docs/format/treeline.md; the seed store is taken before close, so it holds images):
//! edited, optionally resealed (`strata_fuzz::targets::TREELINE_DWB`), then opened, read, scanned
//! and verified (`strata_fuzz::damaged_store` says what is a bug).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| strata_fuzz::damaged_store(&strata_fuzz::targets::TREELINE_DWB, data));
