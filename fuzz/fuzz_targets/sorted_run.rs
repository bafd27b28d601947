#![no_main]
//! The shared kit's sorted runs, written from a model in the input and then damaged and resealed
//! (`strata_fuzz::sorted_run`).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| strata_fuzz::sorted_run(data));
