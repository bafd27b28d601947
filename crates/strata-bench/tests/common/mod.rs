//! Helpers shared by the bench's integration tests.
#![allow(dead_code)]

use std::path::Path;
use std::process::ExitCode;

use serde_json::Value;

/// Runs `strata bench` with `args` through the command-line entry point.
pub fn bench(args: &[&str]) -> ExitCode {
    strata_bench::cli::main_with_args(args.iter().map(|a| a.into()))
}

/// Runs `strata bench args…` quietly with its data under `dir`, the page cache left alone and the
/// report written to `json`; asserts it succeeded and returns the parsed report.
pub fn bench_json(args: &[&str], dir: &Path, json: &Path) -> Value {
    let (dir, json) = (dir.to_str().unwrap(), json.to_str().unwrap());
    let tail = ["--dir", dir, "--json", json, "--quiet", "--no-drop-caches"];
    let code = bench(&[args, &tail[..]].concat());
    assert_eq!(code, ExitCode::SUCCESS, "strata bench {args:?}");
    serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap()
}
