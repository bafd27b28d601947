#![no_main]
//! TreeLine's blob runs and references decoded from raw input (`strata_fuzz::treeline_blob`);
//! damage to runs inside a real store is the `treeline_data` target's.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| strata_fuzz::treeline_blob(data));
