//! `strata bench`: a YCSB-style benchmark driver. It loads records, runs YCSB workloads A–F or
//! custom mixes against Strata engines (through the public `strata::Db` API), in-process baselines
//! and peer engines (cargo features), on one identical trace, and reports throughput, latency,
//! I/O, disk use, memory and amplification as a table, JSON and plots.

pub mod adapter;
pub mod peers;
pub mod workload;
