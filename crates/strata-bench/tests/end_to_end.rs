//! A tiny real benchmark through the command-line entry point: JSON fields, identical traces
//! across engines, clean-up, and plots.

use std::path::Path;
use std::process::ExitCode;

use serde_json::Value;

mod common;

use common::{bench, bench_json};

fn run_tiny(dir: &Path, json: &Path, engines: &str) -> Value {
    let args = [
        "--engines",
        engines,
        "--workload",
        "load,a,d,e",
        "--records",
        "3000",
        "--ops",
        "3000",
        "--threads",
        "2",
    ];
    bench_json(&args, dir, json)
}

#[test]
fn json_has_the_required_fields_and_data_is_cleaned_up() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let json = tmp.path().join("result.json");
    // Whichever Strata kind is not implemented yet must be listed as unsupported, not crash the run.
    let unimplemented = strata::EngineKind::ALL.into_iter().find(|k| !k.is_available());
    let engines = match unimplemented {
        Some(kind) => format!("memory,btreemap,{kind}"),
        None => "memory,btreemap".to_string(),
    };
    let report = run_tiny(&data, &json, &engines);

    for field in ["machine", "git", "workload", "engines", "results", "command_line"] {
        assert!(report.get(field).is_some(), "missing top-level {field}");
    }
    let machine = &report["machine"];
    assert!(machine["cores"].as_u64().unwrap() >= 1);
    assert!(machine["data_dir"]["fs_type"].is_string());

    let engines = report["engines"].as_array().unwrap();
    let status: Vec<&str> = engines.iter().map(|e| e["status"].as_str().unwrap()).collect();
    let mut expected = vec!["ok", "ok"];
    if unimplemented.is_some() {
        expected.push("unsupported");
    }
    assert_eq!(status, expected);
    assert!(engines[0]["config"].as_array().unwrap().iter().any(|s| s["name"] == "memory_budget_bytes"));
    assert!(engines[0]["reopen_ms"].as_f64().unwrap() > 0.0, "memory reopens from its files");
    assert_eq!(engines[0]["page_cache_dropped"], false);

    let results = report["results"].as_array().unwrap();
    assert_eq!(results.len(), 2 * 4, "2 runnable engines x (load + 3 workloads)");
    for r in results {
        for field in [
            "engine",
            "workload",
            "throughput_ops_per_sec",
            "latency_us",
            "read_bytes",
            "write_bytes",
            "disk_bytes",
            "peak_rss_bytes",
        ] {
            assert!(r.get(field).is_some(), "result lacks {field}: {r}");
        }
        for p in ["p50", "p99", "p99_9", "max"] {
            assert!(r["latency_us"][p].as_f64().unwrap() > 0.0, "{p} in {r}");
        }
        assert_eq!(r["status"], "ok");
        assert!(r["throughput_ops_per_sec"].as_f64().unwrap() > 0.0);
        assert!(r["peak_rss_bytes"].as_u64().unwrap() > 0);
        assert_eq!(r["not_found"], 0, "every read targets an existing record: {r}");
    }
    let memory_load = &results[0];
    assert_eq!(memory_load["workload"], "load");
    assert!(memory_load["disk_bytes"].as_u64().unwrap() > 0, "the memory engine writes a WAL");
    assert!(memory_load["write_amplification"].is_number());
    let counters = &memory_load["engine_io"]["counters_at_end"];
    assert!(
        counters["wal.records_appended"].as_u64().unwrap() > 0,
        "engine counters in the JSON: {counters}"
    );

    // Same trace for every engine: identical operation counts per type in each workload.
    let ops = |engine: &str, workload: &str| {
        let r = results.iter().find(|r| r["engine"] == engine && r["workload"] == workload).unwrap();
        r["latency_us_by_op"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(op, s)| (op.clone(), s["count"].clone()))
            .collect::<Vec<_>>()
    };
    for w in ["a", "d", "e"] {
        assert_eq!(ops("memory", w), ops("btreemap", w), "workload {w}");
    }
    assert!(results.iter().all(|r| r["throughput_vs_first"].is_number()));

    // Everything under --dir was removed; only the (empty) parent remains.
    assert_eq!(std::fs::read_dir(&data).unwrap().count(), 0);
}

#[test]
fn plot_writes_svg_and_png() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("run1.json");
    run_tiny(&tmp.path().join("data"), &json, "memory,btreemap");
    let out = tmp.path().join("plots");
    let code = bench(&["plot", json.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(code, ExitCode::SUCCESS);
    for name in ["throughput", "latency"] {
        let svg = std::fs::read_to_string(out.join(format!("{name}.svg"))).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("memory") && svg.contains("btreemap"), "{name}.svg");
        let png = std::fs::read(out.join(format!("{name}.png"))).unwrap();
        assert!(png.len() > 5_000, "{name}.png is {} bytes", png.len());
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    }
}

#[test]
fn bad_arguments_exit_2() {
    assert_eq!(bench(&["--records", "none"]), ExitCode::from(2));
    assert_eq!(bench(&["--engines", "memory,nosuch"]), ExitCode::from(2));
    assert_eq!(bench(&["plot"]), ExitCode::from(2));
}

#[test]
fn timeline_is_recorded_reported_and_plotted() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("timeline.json");
    let data = tmp.path().join("data");
    let args = [
        "--engines",
        "memory,btreemap",
        "--workload",
        "rmw100",
        "--records",
        "2000",
        "--duration",
        "0.6",
        "--timeline",
        "0.1",
    ];
    let report = bench_json(&args, &data, &json);
    for r in report["results"].as_array().unwrap().iter().filter(|r| r["workload"] == "rmw100") {
        assert_eq!(r["timeline_interval_secs"].as_f64(), Some(0.1));
        let series = r["timeline_ops_per_sec"].as_array().unwrap();
        assert!((5..=8).contains(&series.len()), "{} intervals", series.len());
        // One empty interval is tolerated: a snapshot or a descheduled process on a busy CI
        // machine can stall both workers for 0.1 s.
        let empty = series.iter().filter(|v| v.as_f64().unwrap() <= 0.0).count();
        assert!(empty <= 1, "{series:?}");
    }
    let out = tmp.path().join("plots");
    assert_eq!(bench(&["plot", json.to_str().unwrap(), "--out", out.to_str().unwrap()]), ExitCode::SUCCESS);
    let svg = std::fs::read_to_string(out.join("timeline.svg")).unwrap();
    assert!(svg.contains("rmw100: throughput per 0.1 s"), "timeline.svg lacks its panel title");
    assert!(svg.contains("<polyline") || svg.contains("<path"), "timeline.svg has no lines");
}

/// `--repeat 3` with two engines: rounds alternate A B A B A B, the JSON keeps every round's
/// results, ratios are within a round, and the summary holds median/min/max over the rounds;
/// every run phase carries its measured skew.
#[test]
fn repeat_alternates_engines_and_summarises_every_round() {
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("repeat.json");
    let args = [
        "--engines",
        "memory,btreemap",
        "--workload",
        "c",
        "--records",
        "2000",
        "--ops",
        "4000",
        "--distribution",
        "zipfian-plain",
        "--repeat",
        "3",
    ];
    let report = bench_json(&args, &tmp.path().join("data"), &json);
    assert_eq!(report["repeats"], 3);
    let order: Vec<(u64, &str)> = report["engines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["repeat"].as_u64().unwrap(), e["name"].as_str().unwrap()))
        .collect();
    assert_eq!(
        order,
        vec![(1, "memory"), (1, "btreemap"), (2, "memory"), (2, "btreemap"), (3, "memory"), (3, "btreemap")]
    );
    let results = report["results"].as_array().unwrap();
    assert_eq!(results.len(), 3 * 2 * 2, "rounds x engines x (load + c)");
    for r in results.iter().filter(|r| r["workload"] == "c") {
        let same_round_memory = results
            .iter()
            .find(|m| m["engine"] == "memory" && m["workload"] == "c" && m["repeat"] == r["repeat"])
            .unwrap();
        let want = r["throughput_ops_per_sec"].as_f64().unwrap()
            / same_round_memory["throughput_ops_per_sec"].as_f64().unwrap();
        assert!((r["throughput_vs_first"].as_f64().unwrap() - want).abs() < 1e-9, "{r}");
        assert_eq!(r["ops_by_thread"].as_array().unwrap().len(), 1);
        assert!(r.get("device_read_bytes_per_op").is_some());
    }
    let summary = report["summary"].as_array().unwrap();
    let row = summary.iter().find(|s| s["engine"] == "btreemap" && s["workload"] == "c").unwrap();
    assert_eq!(row["rounds"], 3);
    let ratios: Vec<f64> = results
        .iter()
        .filter(|r| r["engine"] == "btreemap" && r["workload"] == "c")
        .map(|r| r["throughput_vs_first"].as_f64().unwrap())
        .collect();
    let mut sorted = ratios.clone();
    sorted.sort_by(f64::total_cmp);
    let spread = &row["throughput_vs_first"];
    assert_eq!(spread["median"].as_f64().unwrap(), sorted[1]);
    assert_eq!(spread["min"].as_f64().unwrap(), sorted[0]);
    assert_eq!(spread["max"].as_f64().unwrap(), sorted[2]);
    let skew = report["skew"].as_array().unwrap();
    assert_eq!(skew.len(), 1);
    assert_eq!(skew[0]["workload"], "c");
    assert_eq!(skew[0]["distribution"], "zipfian-plain");
    assert_eq!(skew[0]["ops"], 4000);
    let top18 = skew[0]["top_shares"][2][1].as_f64().unwrap();
    assert!(top18 > 0.7 && top18 <= 1.0, "{top18}");
}

/// For each `d` (insert-heavy) phase of `age,d,d` on treeline, with or without
/// `--from-checkpoint`: the live user bytes (loaded plus inserted) it started from, i.e. its
/// live bytes at the end less what it inserted; and the aged store's live bytes.
fn live_bytes_before_insert_phases(from_checkpoint: bool) -> (Vec<u64>, u64) {
    let tmp = tempfile::tempdir().unwrap();
    let mut args =
        vec!["--engines", "treeline", "--workload", "age,d,d", "--records", "2000", "--ops", "1000"];
    if from_checkpoint {
        args.push("--from-checkpoint");
    }
    let report = bench_json(&args, tmp.path(), &tmp.path().join("r.json"));
    assert_eq!(report["workload"]["from_checkpoint"], from_checkpoint);
    let results = report["results"].as_array().unwrap();
    let phases: Vec<&str> = results.iter().map(|r| r["workload"].as_str().unwrap()).collect();
    assert_eq!(phases, ["load", "age", "d", "d"]);
    assert!(results.iter().all(|r| r["status"] == "ok"), "{results:?}");
    let live = |r: &Value| r["live_user_bytes"].as_u64().unwrap();
    let inserted = |r: &Value| r["user_bytes_written"].as_u64().unwrap();
    assert!(results.iter().filter(|r| r["workload"] == "d").all(|r| inserted(r) > 0));
    let before = results.iter().filter(|r| r["workload"] == "d").map(|r| live(r) - inserted(r)).collect();
    (before, live(&results[1]))
}

#[test]
fn from_checkpoint_starts_every_measured_workload_from_the_aged_store() {
    // One after another, the second `d` starts from the first's inserts; from the checkpoint,
    // both start from the aged store.
    let (before, aged) = live_bytes_before_insert_phases(false);
    assert_eq!(before[0], aged);
    assert!(before[1] > aged, "sequential: {before:?} after aging {aged}");
    let (before, aged) = live_bytes_before_insert_phases(true);
    assert_eq!(before, [aged, aged]);
}
