//! `strata bench` as scripts use it.

use std::process::{Command, Output};

fn strata(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata")).args(args).output().expect("run strata")
}

fn assert_usage_error(o: &Output, needle: &str) {
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "error must be one line: {err}");
    assert!(err.contains(needle), "stderr {err:?} lacks {needle:?}");
}

/// A Strata engine kind this build does not implement yet, if any is left.
fn unimplemented_kind() -> Option<&'static str> {
    strata::EngineKind::ALL.into_iter().find(|k| !k.is_available()).map(|k| k.name())
}

#[test]
fn a_tiny_bench_runs_and_lists_unsupported_engines() {
    let tmp = tempfile::tempdir().unwrap();
    let engines = match unimplemented_kind() {
        Some(kind) => format!("memory,{kind}"),
        None => "memory".to_string(),
    };
    let o = strata(&[
        "bench",
        "--engines",
        &engines,
        "--workload",
        "a,c",
        "--records",
        "2000",
        "--ops",
        "2000",
        "--quiet",
        "--no-drop-caches",
        "--dir",
        tmp.path().to_str().unwrap(),
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}{}", String::from_utf8_lossy(&o.stderr));
    if let Some(kind) = unimplemented_kind() {
        assert!(out.contains(&format!("{kind:<10} unsupported")), "{out}");
    }
    assert!(out.contains("\na: YCSB A") && out.contains("\nc: YCSB C"), "{out}");
    assert!(o.stderr.is_empty(), "--quiet prints nothing on stderr");
}

#[test]
fn bench_help_and_bad_arguments() {
    let o = strata(&["bench", "--help"]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("--engines"));
    assert_usage_error(&strata(&["bench", "--records", "lots"]), "--records");
    assert_usage_error(&strata(&["bench", "--workload", "q"]), "unknown workload");
    assert_usage_error(&strata(&["bench", "--bogus"]), "--bogus");
    #[cfg(not(feature = "rocksdb"))]
    assert_usage_error(&strata(&["bench", "--engines", "rocksdb"]), "--features rocksdb");
}

#[test]
fn repro_help_and_bad_arguments() {
    let o = strata(&["repro", "--help"]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("--quick"));
    assert_usage_error(&strata(&["repro", "nosuchpaper"]), "unknown paper");
    assert_usage_error(&strata(&["repro", "f2", "--repeat", "0"]), "--repeat");
    assert_usage_error(&strata(&["repro", "f2", "--rocksdb", "lmdb"]), "--rocksdb");
    assert_usage_error(&strata(&["repro"]), "PAPER");
    #[cfg(not(feature = "rocksdb"))]
    assert_usage_error(&strata(&["repro", "f2"]), "--features rocksdb");
}

#[test]
fn a_tiny_bench_prints_the_measured_skew_and_repeat_medians() {
    let tmp = tempfile::tempdir().unwrap();
    let o = strata(&[
        "bench",
        "--engines",
        "memory,btreemap",
        "--workload",
        "c",
        "--records",
        "2000",
        "--ops",
        "2000",
        "--distribution",
        "scattered",
        "--repeat",
        "2",
        "--quiet",
        "--no-drop-caches",
        "--dir",
        tmp.path().to_str().unwrap(),
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        out.contains("skew (scattered, measured on the trace): top 1% / 10% / 18% of keys got "),
        "{out}"
    );
    assert!(out.contains("over 2 rounds: median (min–max)"), "{out}");
}

/// `age` runs one uniform update per loaded record whatever --ops says, and NAME@DISTRIBUTION
/// keeps its own distribution under --distribution.
#[test]
fn aging_runs_one_update_per_record_and_a_workload_keeps_its_own_distribution() {
    let tmp = tempfile::tempdir().unwrap();
    let o = strata(&[
        "bench",
        "--engines",
        "memory",
        "--workload",
        "load,age,c@uniform",
        "--records",
        "1500",
        "--ops",
        "400",
        "--distribution",
        "scattered",
        "--quiet",
        "--no-drop-caches",
        "--dir",
        tmp.path().to_str().unwrap(),
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("skew (uniform, measured on the trace)"), "{out}");
    assert!(!out.contains("skew (scattered"), "{out}");
    // The latency table: "memory  age  update  1,500 ...", "memory  c@uniform  read  400 ...".
    let count = |workload: &str, op: &str| {
        out.lines().find_map(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            (cells.get(1) == Some(&workload) && cells.get(2) == Some(&op))
                .then(|| cells.get(3).map(|c| c.to_string()))
        })
    };
    assert_eq!(count("age", "update").flatten().as_deref(), Some("1,500"), "{out}");
    assert_eq!(count("c@uniform", "read").flatten().as_deref(), Some("400"), "{out}");
}

#[test]
fn a_bulk_load_loads_every_record_through_the_engines_bulk_path() {
    let tmp = tempfile::tempdir().unwrap();
    let o = strata(&[
        "bench",
        "--engines",
        "treeline,memory",
        "--workload",
        "c@uniform",
        "--records",
        "3000",
        "--ops",
        "600",
        "--load-mode",
        "bulk",
        "--quiet",
        "--no-drop-caches",
        "--dir",
        tmp.path().to_str().unwrap(),
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("load order bulk"), "{out}");
    assert!(out.contains("load phase: bulk-load every record in key order"), "{out}");
    // The I/O table's rows (the latency table's have the op third) end with reads that found
    // nothing: every read finds its record.
    let io_rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|cells| cells.get(1) == Some(&"c@uniform") && cells.get(2) != Some(&"read"))
        .collect();
    assert_eq!(io_rows.len(), 2, "{out}");
    assert!(io_rows.iter().all(|cells| cells.last() == Some(&"0")), "{out}");
}

#[test]
fn an_unknown_load_mode_or_insert_key_placement_is_a_usage_error() {
    let o = strata(&["bench", "--engines", "memory", "--load-mode", "sideways"]);
    assert_usage_error(&o, "--load-mode");
    let o = strata(&["bench", "--engines", "memory", "--insert-keys", "everywhere"]);
    assert_usage_error(&o, "--insert-keys");
}
