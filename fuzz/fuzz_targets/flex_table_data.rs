#![no_main]
//! Damage to FlexFile's data file: the table's records and intervals (docs/format/flexfile.md, flexdb.md): open, read, scan and verify never panic and never return a value a key
//! never held (`strata_fuzz::damaged_store`).

use libfuzzer_sys::fuzz_target;
use strata::EngineKind;

fuzz_target!(|data: &[u8]| strata_fuzz::damaged_store(EngineKind::Flex, |n| n == "flexdb-table.data", data));
