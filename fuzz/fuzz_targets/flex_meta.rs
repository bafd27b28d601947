#![no_main]
//! Damage to FlexDB's meta file (docs/format/flexdb.md): open, read, scan and verify never panic and never return a value a key
//! never held (`strata_fuzz::damaged_store`).

use libfuzzer_sys::fuzz_target;
use strata::EngineKind;

fuzz_target!(|data: &[u8]| strata_fuzz::damaged_store(EngineKind::Flex, |n| n == "flexdb-meta", data));
