//! What one `strata bench` invocation runs, validated: built by `cli` and `repro`, read by the
//! runner and by the kill-and-reopen measurement.

use std::path::PathBuf;
use std::time::Duration;

use crate::workload::trace::TraceParams;
use crate::workload::{Distribution, DistributionKind, KeySpec, ValueSpec, Workload};

/// Everything a run needs, validated (see `cli`).
#[derive(Clone, Debug)]
pub struct BenchConfig {
    pub engines: Vec<String>,
    /// Run phases after the load, in order (empty: load only).
    pub workloads: Vec<Workload>,
    pub records: u64,
    /// Operations per run phase over all threads; `None` with `duration`.
    pub ops: Option<u64>,
    pub duration: Option<Duration>,
    /// `--timeline`: also record throughput per interval of this length.
    pub timeline_interval: Option<Duration>,
    pub threads: u32,
    pub distribution: Option<DistributionKind>,
    pub zipf_theta: f64,
    pub hotspot_keys_fraction: f64,
    pub hotspot_ops_fraction: f64,
    pub keys: KeySpec,
    pub values: ValueSpec,
    pub preset: Option<String>,
    /// `None`: a quarter of the loaded data (so the default run is larger than memory).
    pub memory_budget_bytes: Option<u64>,
    pub direct_io: bool,
    pub sync_writes: bool,
    pub seed: u64,
    pub max_scan_length: u32,
    /// Parent of the run's temporary directory (default: the system temp dir).
    pub dir: Option<PathBuf>,
    pub quiet: bool,
    pub drop_caches: bool,
    /// `--reopen-after-kill`: also time a reopen after a SIGKILL that follows the load.
    pub reopen_after_kill: bool,
    /// `--load-mode bulk`: the records sorted by key through each adapter's `bulk_load` (one
    /// thread) instead of puts from every thread.
    pub bulk_load: bool,
    /// `--from-checkpoint`: each measured workload starts from a copy of the store as the load
    /// and the aging workloads left it, closed (TreeLine §5, "Checkpoints"); otherwise the
    /// workloads run one after another on one open store.
    pub from_checkpoint: bool,
    pub custom_mix: Option<String>,
    /// `--repeat`: rounds of every engine (≥ 1).
    pub repeat: u32,
    pub command_line: Vec<String>,
}

impl BenchConfig {
    /// Estimated key + value bytes the load writes.
    pub fn loaded_bytes_estimate(&self) -> u64 {
        self.records.saturating_mul(self.record_bytes_estimate())
    }

    pub fn effective_memory_budget_bytes(&self) -> u64 {
        self.memory_budget_bytes.unwrap_or_else(|| (self.loaded_bytes_estimate() / 4).max(1 << 20))
    }

    pub(crate) fn trace_params(&self) -> TraceParams {
        TraceParams {
            seed: self.seed,
            records: self.records,
            threads: self.threads,
            values: self.values,
            max_scan_length: self.max_scan_length,
        }
    }

    pub(crate) fn distribution_for(&self, workload: &Workload) -> Distribution {
        match workload.fixed_distribution.or(self.distribution).unwrap_or(workload.default_distribution) {
            DistributionKind::Uniform => Distribution::Uniform,
            DistributionKind::Zipfian => Distribution::Zipfian { theta: self.zipf_theta },
            DistributionKind::ZipfianPlain => Distribution::ZipfianPlain { theta: self.zipf_theta },
            DistributionKind::Scattered => Distribution::Scattered { theta: self.zipf_theta },
            DistributionKind::Latest => Distribution::Latest { theta: self.zipf_theta },
            DistributionKind::Hotspot => Distribution::Hotspot {
                keys_fraction: self.hotspot_keys_fraction,
                ops_fraction: self.hotspot_ops_fraction,
            },
        }
    }

    pub(crate) fn record_bytes_estimate(&self) -> u64 {
        (self.keys.typical_key_bytes() as f64 + self.values.mean_bytes()).round() as u64
    }
}
