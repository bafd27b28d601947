#![no_main]
//! Client bytes through `strata serve`'s parser and commands (`strata_fuzz::server_requests`
//! says what is a bug).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| strata_fuzz::server_requests(data));
