#![no_main]
//! Damage to engine `flex`'s WAL segments as FlexDB replays them: open, read, scan and verify never panic and never return a value a key
//! never held (`strata_fuzz::damaged_store`).

use libfuzzer_sys::fuzz_target;
use strata::EngineKind;

fuzz_target!(|data: &[u8]| strata_fuzz::damaged_store(
    EngineKind::Flex,
    |n| n.starts_with("flexdb-wal-"),
    data
));
