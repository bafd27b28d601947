//! `strata bench`: a YCSB-style benchmark driver. It loads records, runs YCSB workloads A–F or
//! custom mixes against Strata engines (through the public `strata::Db` API), in-process baselines
//! and peer engines (cargo features), on one identical trace, and reports throughput, latency,
//! I/O, disk use, memory and amplification as a table, JSON and plots.
//!
//! Layout: `workload/` (what runs: mixes, distributions, keys, traces), `driver/` (threads,
//! histograms, progress), `metrics/` (/proc, disk, machine facts), `engines.rs` + `baseline.rs` +
//! `peers/` (what runs it), `config.rs` (one invocation's validated settings), `runner/` (one
//! invocation), `repro/` (`strata repro <paper>`), `kill_reopen.rs` (reopen after SIGKILL),
//! `report/` (table, JSON), `plot.rs`, `cli/`.

pub mod adapter;
pub mod baseline;
pub mod cli;
pub mod config;
pub mod driver;
pub mod engines;
pub mod htap;
pub mod kill_reopen;
pub mod metrics;
pub mod peers;
pub mod plot;
pub mod report;
pub mod repro;
pub mod runner;
pub mod workload;
