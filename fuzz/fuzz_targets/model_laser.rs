#![no_main]
//! Engine `laser` against a `BTreeMap`: puts, deletes, rmw, gets, scans and reopens
//! (`strata_fuzz::model_ops`).

use libfuzzer_sys::fuzz_target;
use strata::EngineKind;

fuzz_target!(|data: &[u8]| strata_fuzz::model_ops(EngineKind::Laser, data));
