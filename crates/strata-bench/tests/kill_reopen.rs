//! `--reopen-after-kill` through the command-line entry point. Its own test binary: the
//! measurement forks, which is only sound while the process has a single thread.

mod common;

use common::bench_json;

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
    ];
    let report = bench_json(&args, &data, &json);
    let engines = report["engines"].as_array().unwrap();
    let memory = &engines[0];
    assert!(memory["kill_reopen_ms"].as_f64().unwrap() > 0.0, "{memory}");
    assert!(memory["kill_reopen_sampled_reads_ms"].as_f64().unwrap() > 0.0, "{memory}");
    let note = memory["kill_reopen_note"].as_str().unwrap();
    assert!(note.contains("3000 of 3000 sampled keys found"), "{note}");
    // Not persistent: not measured.
    assert!(engines[1]["kill_reopen_ms"].is_null() && engines[1]["kill_reopen_note"].is_null());
    assert!(engines[1]["kill_reopen_sampled_reads_ms"].is_null());
    assert_eq!(std::fs::read_dir(&data).unwrap().count(), 0, "the kill directory is cleaned up");
}
