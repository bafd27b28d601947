//! The result of one `strata bench` invocation: what ran, where, and every measurement. Serialised
//! as the `--json` file and rendered as the stdout table (`table.rs`).

pub mod summary;
pub mod table;

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::metrics::machine::{GitInfo, MachineInfo};
use crate::metrics::DiskUsage;

#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    pub tool: String,
    pub version: String,
    pub started_unix_secs: u64,
    pub command_line: Vec<String>,
    pub machine: MachineInfo,
    pub git: GitInfo,
    pub workload: WorkloadConfig,
    /// How to read `peak_rss_bytes`.
    pub peak_rss_note: String,
    /// `--repeat`: how many rounds ran; each round runs every engine once, in `--engines` order
    /// (A B A B ...), each on a fresh load.
    pub repeats: u32,
    /// One item per (round, engine entry).
    pub engines: Vec<EngineReport>,
    /// One item per (round, engine, phase) that ran: the load phase is workload `load`.
    pub results: Vec<PhaseResult>,
    /// The measured skew of each run phase's trace (identical for every engine and round).
    pub skew: Vec<crate::workload::skew::Skew>,
    /// Per (engine, workload): median, min and max over the rounds.
    pub summary: Vec<summary::SummaryRow>,
}

/// Everything that shapes the trace; identical for every engine of the invocation.
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadConfig {
    pub workloads: Vec<String>,
    pub records: u64,
    /// Operations per run phase (summed over threads), or `null` with `duration_secs`.
    pub ops_per_workload: Option<u64>,
    pub duration_secs: Option<f64>,
    pub threads: u32,
    pub distribution: Option<String>,
    pub zipf_theta: f64,
    pub hotspot_keys_fraction: f64,
    pub hotspot_ops_fraction: f64,
    pub key_format: String,
    pub key_bytes: Option<usize>,
    pub value_bytes_min: usize,
    pub value_bytes_max: usize,
    pub preset: Option<String>,
    /// `random`: hashed key numbers (YCSB insertorder=hashed); `seq`: keys ascend with insertion;
    /// `bulk …`: sorted through each engine's bulk path.
    pub load_order: String,
    /// Where inserted keys land: `spread` (YCSB) or `clustered …` (`--insert-keys`).
    pub insert_keys: String,
    /// `--from-checkpoint`: each measured workload ran on a copy of the closed, aged store.
    pub from_checkpoint: bool,
    pub max_scan_length: u32,
    pub seed: u64,
    pub memory_budget_bytes: u64,
    /// True when the budget was derived from the data size (no `--memory-budget`).
    pub memory_budget_auto: bool,
    /// Loaded key + value bytes divided by the memory budget (≥ 3 for a larger-than-memory run).
    pub data_to_budget_ratio: f64,
    pub direct_io: bool,
    pub sync_writes: bool,
    pub custom_mix: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct EngineReport {
    pub name: String,
    /// `--repeat` round, from 1.
    pub repeat: u32,
    /// `ok`, `unsupported` (this build cannot run it) or `error`.
    pub status: String,
    pub message: Option<String>,
    pub kind: String,
    /// Every configuration choice the adapter reports, in its order.
    pub config: Vec<Setting>,
    pub open_ms: Option<f64>,
    /// Flush + close at the end of the run.
    pub close_ms: Option<f64>,
    /// Opening the closed store again (recovery included).
    pub reopen_ms: Option<f64>,
    pub reopen_note: Option<String>,
    /// `--reopen-after-kill`: open time after a SIGKILL that followed the load (separate
    /// processes, a separate directory), and what the read-back of sampled keys found.
    pub kill_reopen_ms: Option<f64>,
    /// Reading the sampled keys back right after that reopen.
    pub kill_reopen_sampled_reads_ms: Option<f64>,
    pub kill_reopen_note: Option<String>,
    pub page_cache_dropped: bool,
    pub page_cache_note: String,
    /// RSS right after the peak was reset, before this engine opened (the harness's own share).
    pub baseline_rss_bytes: Option<u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Setting {
    pub name: String,
    pub value: String,
}

/// One phase of one engine.
#[derive(Clone, Debug, Serialize)]
pub struct PhaseResult {
    pub engine: String,
    pub workload: String,
    /// `--repeat` round, from 1.
    pub repeat: u32,
    pub description: String,
    /// `ok`, or `error` (the phase stopped at the first engine error).
    pub status: String,
    pub error: Option<String>,
    pub ops: u64,
    pub elapsed_secs: f64,
    pub throughput_ops_per_sec: f64,
    /// Throughput divided by the first engine's on the same workload in the same round.
    pub throughput_vs_first: Option<f64>,
    /// Operations each worker thread ran (the skew replay uses them).
    pub ops_by_thread: Vec<u64>,
    /// Device bytes read / written per operation (`read_bytes` / `ops`, `write_bytes` / `ops`).
    pub device_read_bytes_per_op: Option<f64>,
    pub device_write_bytes_per_op: Option<f64>,
    /// All operation types together.
    pub latency_us: LatencySummary,
    pub latency_us_by_op: BTreeMap<String, LatencySummary>,
    pub not_found: u64,
    pub scanned_records: u64,
    /// Device bytes this process read/wrote during the phase (/proc/self/io read_bytes/write_bytes).
    pub read_bytes: Option<u64>,
    pub write_bytes: Option<u64>,
    /// Bytes through read/write system calls, page cache included (/proc/self/io rchar/wchar).
    pub rchar_bytes: Option<u64>,
    pub wchar_bytes: Option<u64>,
    /// The engine's own storage counters (Strata engines), delta over the phase.
    pub engine_io: Option<EngineIo>,
    pub user_bytes_written: u64,
    pub user_bytes_read: u64,
    /// Estimated key + value bytes of live records after the phase.
    pub live_user_bytes: u64,
    /// Allocated bytes (st_blocks * 512) under the engine's directory after the phase.
    pub disk_bytes: u64,
    pub disk_apparent_bytes: u64,
    pub disk_files: u64,
    /// VmHWM at the end of the phase: the process's peak since this engine was opened.
    pub peak_rss_bytes: Option<u64>,
    pub write_amplification: Option<f64>,
    pub read_amplification: Option<f64>,
    pub space_amplification: Option<f64>,
    /// Load phase only: `flush()` after the last insert.
    pub flush_ms: Option<f64>,
    /// `--timeline`: the interval length, and operations/s of each interval in order (the last
    /// one may be shorter; its rate is over its own length).
    pub timeline_interval_secs: Option<f64>,
    pub timeline_ops_per_sec: Vec<f64>,
}

/// Percentiles of one histogram, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct LatencySummary {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub p99_9: f64,
    pub max: f64,
}

impl LatencySummary {
    /// `hist` holds nanoseconds (the driver's `LatencySet`).
    pub fn of(hist: &Histogram<u64>) -> LatencySummary {
        let us = |ns: u64| ns as f64 / 1000.0;
        LatencySummary {
            count: hist.len(),
            mean: hist.mean() / 1000.0,
            p50: us(hist.value_at_quantile(0.5)),
            p99: us(hist.value_at_quantile(0.99)),
            p99_9: us(hist.value_at_quantile(0.999)),
            max: us(hist.max()),
        }
    }
}

/// Deltas of `strata::Stats` over a phase.
#[derive(Clone, Debug, Default, Serialize)]
pub struct EngineIo {
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub read_ops: u64,
    pub write_ops: u64,
    pub sync_ops: u64,
    pub user_bytes_written: u64,
    pub user_bytes_read: u64,
    pub memory_bytes: u64,
    pub disk_bytes: u64,
    /// The engine's own counters (`Stats::engine_counters`) at the end of the phase: totals
    /// since open, not deltas (some are gauges), for diagnosis from the JSON.
    pub counters_at_end: BTreeMap<String, u64>,
    /// Device bytes over the phase by where they went and why, for engines that count them
    /// (`io.<file>.<cause>.read_bytes` / `write_bytes` counters, and the WAL's
    /// `wal.bytes_written`): `(where, read bytes, written bytes)` with `where` = "file cause".
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub device_bytes_by_cause: Vec<(String, u64, u64)>,
    /// What the engine asked the user to act on at the end of the phase (`Stats::notices`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notices_at_end: Vec<String>,
}

impl EngineIo {
    pub fn delta(before: &strata::Stats, after: &strata::Stats) -> EngineIo {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        EngineIo {
            bytes_read: d(after.io.bytes_read, before.io.bytes_read),
            bytes_written: d(after.io.bytes_written, before.io.bytes_written),
            read_ops: d(after.io.read_ops, before.io.read_ops),
            write_ops: d(after.io.write_ops, before.io.write_ops),
            sync_ops: d(after.io.sync_ops, before.io.sync_ops),
            user_bytes_written: d(after.user_bytes_written, before.user_bytes_written),
            user_bytes_read: d(after.user_bytes_read, before.user_bytes_read),
            memory_bytes: after.memory_bytes,
            disk_bytes: after.disk_bytes,
            counters_at_end: after.engine_counters.iter().cloned().collect(),
            device_bytes_by_cause: device_bytes_by_cause(before, after),
            notices_at_end: after.notices.clone(),
        }
    }
}

/// See [`EngineIo::device_bytes_by_cause`]; empty for engines without `io.*` counters.
fn device_bytes_by_cause(before: &strata::Stats, after: &strata::Stats) -> Vec<(String, u64, u64)> {
    let delta = |name: &str| {
        let value = |s: &strata::Stats| s.counter(name).unwrap_or(0);
        value(after).saturating_sub(value(before))
    };
    let mut places: Vec<(String, u64, u64)> = Vec::new();
    for (name, _) in &after.engine_counters {
        let Some(place) = name.strip_prefix("io.") else { continue };
        let (place, is_read) = match (place.strip_suffix(".read_bytes"), place.strip_suffix(".write_bytes")) {
            (Some(p), _) => (p, true),
            (_, Some(p)) => (p, false),
            _ => continue,
        };
        let place = place.replace('.', " ");
        let bytes = delta(name);
        let at = match places.iter().position(|(p, _, _)| *p == place) {
            Some(i) => i,
            None => {
                places.push((place, 0, 0));
                places.len() - 1
            }
        };
        if let Some((_, read, written)) = places.get_mut(at) {
            if is_read {
                *read += bytes;
            } else {
                *written += bytes;
            }
        }
    }
    // An engine that counts its WAL files itself (flex) has `wal <cause>` places already.
    if !places.is_empty() && !places.iter().any(|(p, _, _)| p.starts_with("wal ")) {
        places.push(("wal".into(), 0, delta("wal.bytes_written")));
    }
    places.retain(|(_, read, written)| read + written > 0);
    places
}

impl PhaseResult {
    pub fn set_disk(&mut self, usage: DiskUsage) {
        self.disk_bytes = usage.allocated_bytes;
        self.disk_apparent_bytes = usage.apparent_bytes;
        self.disk_files = usage.files;
    }
}

/// `1.5 GiB`, `120 B`.
pub fn fmt_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// `1,234,567`.
pub fn fmt_count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        let remaining = digits.len() - i;
        if i > 0 && remaining / 3 * 3 == remaining {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Microseconds with sensible precision.
pub fn fmt_us(us: f64) -> String {
    if us < 10.0 {
        format!("{us:.2}")
    } else if us < 1000.0 {
        format!("{us:.1}")
    } else {
        fmt_count(us.round() as u64)
    }
}

pub fn fmt_ratio(r: Option<f64>) -> String {
    r.map_or_else(|| "-".into(), |r| format!("{r:.2}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formatting() {
        assert_eq!(fmt_count(0), "0");
        assert_eq!(fmt_count(1234567), "1,234,567");
        assert_eq!(fmt_count(100), "100");
        assert_eq!(fmt_bytes(120), "120 B");
        assert_eq!(fmt_bytes(3 << 20), "3.0 MiB");
        assert_eq!(fmt_us(1.234), "1.23");
        assert_eq!(fmt_us(12345.6), "12,346");
        assert_eq!(fmt_ratio(None), "-");
    }

    #[test]
    fn device_bytes_by_cause_are_the_phase_deltas_of_io_counters_plus_the_wal() {
        let stats = |hot_read: u64, cold_write: u64, wal: u64| strata::Stats {
            engine_counters: vec![
                ("io.hot_log.user.reads".into(), 9),
                ("io.hot_log.user.read_bytes".into(), hot_read),
                ("io.hot_log.user.write_bytes".into(), 0),
                ("io.cold_log.hot_to_cold.write_bytes".into(), cold_write),
                ("wal.bytes_written".into(), wal),
                ("ops.appends".into(), 5),
            ],
            ..strata::Stats::default()
        };
        let rows = device_bytes_by_cause(&stats(100, 7, 50), &stats(4196, 7, 80));
        assert_eq!(rows, vec![("hot_log user".to_string(), 4096, 0), ("wal".to_string(), 0, 30)]);
        let without_io =
            strata::Stats { engine_counters: vec![("wal.bytes_written".into(), 9)], ..Default::default() };
        assert!(device_bytes_by_cause(&strata::Stats::default(), &without_io).is_empty());
    }
}
