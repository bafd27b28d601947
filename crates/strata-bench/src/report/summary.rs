//! `--repeat`: each (engine, workload)'s throughput, ratio to the first engine and device bytes
//! per operation as the median with min and max over the rounds. A ratio is taken within a round
//! (both engines ran back to back on the same trace), then summarised, so a slow round for both
//! engines does not widen the ratio's spread.

use serde::Serialize;

use super::PhaseResult;

/// Median, min and max of one quantity over the rounds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// `None` for no values. The median of an even count is the mean of the middle two.
    pub fn of(values: &[f64]) -> Option<Spread> {
        let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 };
        Some(Spread { median, min: sorted[0], max: sorted[n - 1] })
    }

    /// `1.93x (1.71–2.10)`, or just `1.93x` when min = max.
    pub fn describe_ratio(&self) -> String {
        if self.min == self.max {
            format!("{:.2}x", self.median)
        } else {
            format!("{:.2}x ({:.2}–{:.2})", self.median, self.min, self.max)
        }
    }
}

/// One engine on one workload over every round it succeeded in.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SummaryRow {
    pub engine: String,
    pub workload: String,
    /// Rounds with an `ok` result.
    pub rounds: u32,
    pub throughput_ops_per_sec: Spread,
    pub throughput_vs_first: Option<Spread>,
    pub device_read_bytes_per_op: Option<Spread>,
    pub device_write_bytes_per_op: Option<Spread>,
}

/// Rows in first-appearance order of (engine, workload).
pub fn summarise(results: &[PhaseResult]) -> Vec<SummaryRow> {
    let mut keys: Vec<(&str, &str)> = Vec::new();
    for r in results.iter().filter(|r| r.status == "ok") {
        if !keys.contains(&(r.engine.as_str(), r.workload.as_str())) {
            keys.push((&r.engine, &r.workload));
        }
    }
    keys.into_iter()
        .filter_map(|(engine, workload)| {
            let rows: Vec<&PhaseResult> = results
                .iter()
                .filter(|r| r.status == "ok" && r.engine == engine && r.workload == workload)
                .collect();
            let collect = |f: &dyn Fn(&PhaseResult) -> Option<f64>| -> Vec<f64> {
                rows.iter().filter_map(|r| f(r)).collect()
            };
            Some(SummaryRow {
                engine: engine.to_string(),
                workload: workload.to_string(),
                rounds: rows.len() as u32,
                throughput_ops_per_sec: Spread::of(&collect(&|r| Some(r.throughput_ops_per_sec)))?,
                throughput_vs_first: Spread::of(&collect(&|r| r.throughput_vs_first)),
                device_read_bytes_per_op: Spread::of(&collect(&|r| r.device_read_bytes_per_op)),
                device_write_bytes_per_op: Spread::of(&collect(&|r| r.device_write_bytes_per_op)),
            })
        })
        .collect()
}

/// The order `--repeat` runs engine entries in: round by round, every entry in `--engines` order
/// (A B A B ... for two engines). Items are (round from 1, entry index).
pub fn schedule(entries: usize, rounds: u32) -> Vec<(u32, usize)> {
    (1..=rounds).flat_map(|round| (0..entries).map(move |entry| (round, entry))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_alternates_engines_round_by_round() {
        assert_eq!(schedule(2, 3), vec![(1, 0), (1, 1), (2, 0), (2, 1), (3, 0), (3, 1)]);
        assert_eq!(schedule(3, 1), vec![(1, 0), (1, 1), (1, 2)]);
        assert!(schedule(0, 2).is_empty());
    }

    #[test]
    fn median_min_max() {
        let s = Spread::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        let even = Spread::of(&[4.0, 1.0, 2.0, 10.0]).unwrap();
        assert_eq!((even.median, even.min, even.max), (3.0, 1.0, 10.0));
        assert_eq!(Spread::of(&[]), None);
        assert_eq!(Spread::of(&[f64::NAN]), None);
        assert_eq!(Spread::of(&[2.0]).unwrap().describe_ratio(), "2.00x");
        assert_eq!(Spread::of(&[1.5, 2.0, 2.5]).unwrap().describe_ratio(), "2.00x (1.50–2.50)");
    }
}
