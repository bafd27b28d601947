//! `--reopen-after-kill` through the command-line entry point. Its own test binary: the
//! measurement forks, which is only sound while the process has a single thread.

use std::process::ExitCode;

use serde_json::Value;

#[test]
fn reopen_after_kill_finds_every_loaded_key() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("kill.json");
    let data = tmp.path().join("data");
    let args = [
        "--engines",
        "memory,btreemap",
        "--workload",
        "load",
        "--records",
        "3000",
        "--threads",
        "2",
        "--reopen-after-kill",
        "--dir",
        data.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--quiet",
        "--no-drop-caches",
    ];
    let code = strata_bench::cli::main_with_args(args.iter().map(|a| a.into()));
    assert_eq!(code, ExitCode::SUCCESS);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let engines = report["engines"].as_array().unwrap();
    let memory = &engines[0];
    assert!(memory["kill_reopen_ms"].as_f64().unwrap() > 0.0, "{memory}");
    let note = memory["kill_reopen_note"].as_str().unwrap();
    assert!(note.contains("3000 of 3000 sampled keys found"), "{note}");
    // Not persistent: not measured.
    assert!(engines[1]["kill_reopen_ms"].is_null() && engines[1]["kill_reopen_note"].is_null());
    assert_eq!(std::fs::read_dir(&data).unwrap().count(), 0, "the kill directory is cleaned up");
}
