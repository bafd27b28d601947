#![no_main]
//! laser's own table against a model of rows: inserts, partial updates, deletes, projected gets,
//! scans as rows and as column vectors, compactions, layout changes, reopens
//! (`strata_fuzz::laser_table_ops`).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| strata_fuzz::laser_table_ops(data));
