//! `kit_tests!`: the kit's checks as `#[test]` functions, so an engine's test file is one target
//! and one macro call.

/// The libtest name of a test function declared in the module `module_path` (as `module_path!()`
/// gives it inside an integration test: the crate name first): `mod_a::mod_b::name`. The
/// process-kill harness re-runs the test binary with this name to start its child.
pub fn test_name(module_path: &str, function: &str) -> String {
    match module_path.split_once("::") {
        Some((_crate, modules)) => format!("{modules}::{function}"),
        None => function.to_string(),
    }
}

/// Declares `conformance_mem`, `conformance_sim`, `process_kill_crash`, `fault_injection`,
/// `failed_writes_stay_invisible`, `writes_in_flight_stay_invisible_and_in_log_order`, `bulk_load_matches_the_model`, `damaged_files_are_refused_or_lose_nothing` and, when `stress = (threads, ops_per_thread)` is given, `concurrency_stress`, each running the
/// kit's check on `$target` (an expression evaluated per test). Invoke it at the top of a test
/// file, or inside a `mod` to instantiate the kit for a second target.
#[macro_export]
macro_rules! kit_tests {
    ($target:expr, process_kill_cycles = $cycles:expr $(, stress = ($threads:expr, $ops:expr))? $(,)?) => {
        #[test]
        fn conformance_mem() {
            $crate::conformance::check(&$target, $crate::StorageKind::Mem);
        }

        #[test]
        fn conformance_sim() {
            $crate::conformance::check(&$target, $crate::StorageKind::Sim);
        }

        #[test]
        fn process_kill_crash() {
            let name = $crate::instantiate::test_name(module_path!(), "process_kill_crash");
            $crate::crash::process_kill(&$target, &name, $cycles);
        }

        #[test]
        fn fault_injection() {
            $crate::faults::check(&$target);
        }

        #[test]
        fn failed_writes_stay_invisible() {
            $crate::failed_writes::check(&$target);
        }

        #[test]
        fn writes_in_flight_stay_invisible_and_in_log_order() {
            $crate::in_flight::check(&$target);
        }

        #[test]
        fn bulk_load_matches_the_model() {
            $crate::bulk_load::check(&$target);
        }

        #[test]
        fn scans_are_point_in_time_where_declared() {
            $crate::point_in_time::check(&$target);
        }

        #[test]
        fn damaged_files_are_refused_or_lose_nothing() {
            $crate::damage::check(&$target);
        }

        $(
            #[test]
            fn concurrency_stress() {
                $crate::stress::check(&$target, $threads, $ops);
            }
        )?
    };
}

#[cfg(test)]
mod tests {
    #[test]
    fn test_names_drop_the_crate_and_keep_modules() {
        assert_eq!(super::test_name("kit", "process_kill_crash"), "process_kill_crash");
        assert_eq!(super::test_name("kit::naive", "process_kill_crash"), "naive::process_kill_crash");
    }
}
