//! Which record an operation touches: YCSB's request distributions over "logical" key indexes
//! `0..known`, where `0..records` are the loaded records and later indexes are this thread's own
//! inserts, oldest first (see `trace.rs` for why inserts are per thread).

use rand::Rng;

use super::skewed::{PlainZipfian, ScatteredZipfian};
use super::zipfian::{ScrambledZipfian, Zipfian};

/// The request distribution named on the command line.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
#[serde(tag = "name", rename_all = "lowercase")]
pub enum Distribution {
    /// Every loaded record equally likely (YCSB `uniform`; run-phase inserts are not chosen).
    Uniform,
    /// YCSB `zipfian`: `ScrambledZipfianGenerator` with constant θ.
    Zipfian { theta: f64 },
    /// `zipfian-plain`: a zipfian θ over exactly the loaded records, ranks permuted onto them
    /// (`skewed.rs`); run-phase inserts are not chosen.
    #[serde(rename = "zipfian-plain")]
    ZipfianPlain { theta: f64 },
    /// `scattered`: ycsbr's `ScatteredZipfianChooser` (TreeLine's generator, `skewed.rs`).
    Scattered { theta: f64 },
    /// YCSB `latest`: `SkewedLatestGenerator`, zipfian over recency; the newest record is hottest.
    Latest { theta: f64 },
    /// YCSB `hotspot`: `ops_fraction` of the operations go to the first `keys_fraction` of the
    /// loaded records (which are spread over the key space when keys are hashed).
    Hotspot { keys_fraction: f64, ops_fraction: f64 },
}

impl Distribution {
    pub fn name(&self) -> &'static str {
        match self {
            Distribution::Uniform => "uniform",
            Distribution::Zipfian { .. } => "zipfian",
            Distribution::ZipfianPlain { .. } => "zipfian-plain",
            Distribution::Scattered { .. } => "scattered",
            Distribution::Latest { .. } => "latest",
            Distribution::Hotspot { .. } => "hotspot",
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Distribution::Uniform => "uniform".into(),
            Distribution::Zipfian { theta } => format!("zipfian θ={theta} (YCSB scrambled)"),
            Distribution::ZipfianPlain { theta } => format!("zipfian-plain θ={theta}"),
            Distribution::Scattered { theta } => format!("scattered zipfian θ={theta} (ycsbr)"),
            Distribution::Latest { theta } => format!("latest θ={theta}"),
            Distribution::Hotspot { keys_fraction, ops_fraction } => {
                format!(
                    "hotspot {:.0}% of ops on {:.0}% of keys",
                    ops_fraction * 100.0,
                    keys_fraction * 100.0
                )
            }
        }
    }
}

/// Per-thread key chooser state.
#[derive(Clone, Debug)]
pub enum KeyChooser {
    Uniform {
        records: u64,
    },
    /// Drawn over `records + expected inserts` and redrawn while the index is not yet inserted,
    /// as YCSB's `nextKeynum` does.
    Zipfian(ScrambledZipfian),
    ZipfianPlain(PlainZipfian),
    Scattered(ScatteredZipfian),
    Latest(SkewedLatest),
    Hotspot(Hotspot),
}

impl KeyChooser {
    /// `records` ≥ 1; `expected_inserts` sizes the zipfian's range like YCSB's
    /// `insertproportion * operationcount * 2`.
    pub fn new(distribution: Distribution, records: u64, expected_inserts: u64, known: u64) -> Self {
        match distribution {
            Distribution::Uniform => KeyChooser::Uniform { records },
            Distribution::Zipfian { theta } => {
                KeyChooser::Zipfian(ScrambledZipfian::new(records + expected_inserts + 1, theta))
            }
            Distribution::ZipfianPlain { theta } => {
                KeyChooser::ZipfianPlain(PlainZipfian::new(records, theta))
            }
            Distribution::Scattered { theta } => KeyChooser::Scattered(ScatteredZipfian::new(known, theta)),
            Distribution::Latest { theta } => KeyChooser::Latest(SkewedLatest::new(known, theta)),
            Distribution::Hotspot { keys_fraction, ops_fraction } => {
                KeyChooser::Hotspot(Hotspot::new(records, keys_fraction, ops_fraction))
            }
        }
    }

    /// A logical index in `0..known` (`known` ≥ 1).
    pub fn next<R: Rng + ?Sized>(&mut self, rng: &mut R, known: u64) -> u64 {
        match self {
            KeyChooser::Uniform { records } => rng.gen_range(0..(*records).min(known).max(1)),
            KeyChooser::Zipfian(z) => loop {
                let index = z.next(rng);
                if index < known {
                    return index;
                }
            },
            KeyChooser::ZipfianPlain(z) => z.next(rng).min(known - 1),
            KeyChooser::Scattered(s) => s.next(rng, known),
            KeyChooser::Latest(l) => l.next(rng, known),
            KeyChooser::Hotspot(h) => h.next(rng).min(known - 1),
        }
    }
}

/// YCSB `SkewedLatestGenerator`: `last - zipfian.nextLong(last)` where `last` is the newest
/// inserted index; the zipfian's ζ grows with the insert count.
#[derive(Clone, Debug)]
pub struct SkewedLatest {
    zipfian: Option<Zipfian>,
}

impl SkewedLatest {
    pub fn new(known: u64, theta: f64) -> Self {
        // YCSB: `new ZipfianGenerator(basis.lastValue())` — over `last` items, last = known - 1.
        let last = known.saturating_sub(1);
        SkewedLatest { zipfian: (last >= 2).then(|| Zipfian::new(last, theta)) }
    }

    pub fn next<R: Rng + ?Sized>(&mut self, rng: &mut R, known: u64) -> u64 {
        let last = known.saturating_sub(1);
        match &mut self.zipfian {
            Some(z) if last >= 2 => last - z.next_with_count(rng, last).min(last),
            // Too few records for a zipfian: any of them.
            _ => rng.gen_range(0..=last),
        }
    }
}

/// YCSB `HotspotIntegerGenerator` over `0..records`.
#[derive(Clone, Debug)]
pub struct Hotspot {
    hot_items: u64,
    cold_items: u64,
    ops_fraction: f64,
}

impl Hotspot {
    pub fn new(records: u64, keys_fraction: f64, ops_fraction: f64) -> Self {
        let hot_items = (records as f64 * keys_fraction) as u64;
        Hotspot { hot_items, cold_items: records - hot_items, ops_fraction }
    }

    pub fn hot_items(&self) -> u64 {
        self.hot_items
    }

    pub fn next<R: Rng + ?Sized>(&mut self, rng: &mut R) -> u64 {
        let hot = rng.gen::<f64>() < self.ops_fraction;
        if (hot && self.hot_items > 0) || self.cold_items == 0 {
            rng.gen_range(0..self.hot_items.max(1))
        } else {
            self.hot_items + rng.gen_range(0..self.cold_items)
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn uniform_is_flat_by_chi_square() {
        let mut rng = SmallRng::seed_from_u64(3);
        let buckets = 100u64;
        let mut chooser = KeyChooser::new(Distribution::Uniform, buckets, 0, buckets);
        let draws = 200_000u64;
        let mut counts = vec![0u64; buckets as usize];
        for _ in 0..draws {
            counts[chooser.next(&mut rng, buckets) as usize] += 1;
        }
        let expected = (draws / buckets) as f64;
        let chi2: f64 = counts.iter().map(|&c| (c as f64 - expected).powi(2) / expected).sum();
        // 99 degrees of freedom: mean 99, the 99.9th percentile is ~149.
        assert!(chi2 < 149.0, "chi-square {chi2}");
        assert!(chi2 > 50.0, "chi-square {chi2} is suspiciously small");
    }

    #[test]
    fn hotspot_sends_the_configured_fraction_to_the_hot_set() {
        let mut rng = SmallRng::seed_from_u64(5);
        let records = 10_000;
        let mut chooser = KeyChooser::new(
            Distribution::Hotspot { keys_fraction: 0.2, ops_fraction: 0.8 },
            records,
            0,
            records,
        );
        let draws = 200_000;
        let hot = (0..draws).filter(|_| chooser.next(&mut rng, records) < 2_000).count();
        let f = hot as f64 / draws as f64;
        assert!((f - 0.8).abs() < 0.005, "hot fraction {f}");
    }

    /// SkewedLatest: the newest record is the most popular, with P = 1/ζ(last, θ), and
    /// popularity decays with age.
    #[test]
    fn latest_prefers_recent_inserts() {
        let mut rng = SmallRng::seed_from_u64(9);
        let mut known = 10_000u64;
        let mut chooser = KeyChooser::new(Distribution::Latest { theta: 0.99 }, known, 0, known);
        let draws = 200_000;
        let (mut newest, mut recent_10, mut oldest_half) = (0, 0, 0);
        for i in 0..draws {
            if i % 100 == 0 {
                known += 1; // an insert happened
            }
            let index = chooser.next(&mut rng, known);
            assert!(index < known);
            newest += u32::from(index == known - 1);
            recent_10 += u32::from(index + 10 >= known);
            oldest_half += u32::from(index < known / 2);
        }
        let f_newest = f64::from(newest) / draws as f64;
        let p = 1.0 / super::super::zipfian::zeta(11_000, 0.99);
        assert!((f_newest - p).abs() < 0.01, "newest {f_newest} vs ~{p}");
        assert!(f64::from(recent_10) / draws as f64 > 0.25);
        assert!(f64::from(oldest_half) / (draws as f64) < 0.1);
    }

    #[test]
    fn zipfian_chooser_never_returns_uninserted_indexes() {
        let mut rng = SmallRng::seed_from_u64(1);
        let mut chooser = KeyChooser::new(Distribution::Zipfian { theta: 0.99 }, 1000, 1000, 1000);
        for known in 1000..1500 {
            assert!(chooser.next(&mut rng, known) < known);
        }
    }
}
