//! YCSB's zipfian generators (Gray et al., "Quickly generating billion-record synthetic
//! databases", SIGMOD 1994), ported from `site.ycsb.generator.{ZipfianGenerator,
//! ScrambledZipfianGenerator}` including their quirks, so traces have YCSB's skew.

use parking_lot::Mutex;
use rand::Rng;

use super::keys::fnv_hash64;

/// YCSB's default zipfian constant.
pub const DEFAULT_THETA: f64 = 0.99;

/// `ScrambledZipfianGenerator` draws from a zipfian over this many items and folds the result onto
/// the key range with FNV, so the popularity of the top keys does not depend on the record count.
pub const SCRAMBLED_ITEM_COUNT: u64 = 10_000_000_000;

/// YCSB's precomputed ζ(10^10, 0.99).
pub const SCRAMBLED_ZETAN_AT_DEFAULT_THETA: f64 = 26.469_028_201_783_02;

/// ζ(n, θ) = Σ_{i=1..n} 1/i^θ. Exact summation up to 10^7 terms; beyond that the first 10^6
/// terms are summed and the tail uses the Euler–Maclaurin formula (error far below 1e-9).
/// Memoised: every thread of every phase of every engine asks for the same few values, and one
/// costs up to 10^7 `powf` calls.
pub fn zeta(n: u64, theta: f64) -> f64 {
    static MEMO: Mutex<Vec<((u64, u64), f64)>> = Mutex::new(Vec::new());
    const MEMO_ENTRIES: usize = 64;
    if n <= 2 {
        return zeta_uncached(n, theta);
    }
    let key = (n, theta.to_bits());
    if let Some(&(_, z)) = MEMO.lock().iter().find(|(k, _)| *k == key) {
        return z;
    }
    let z = zeta_uncached(n, theta);
    let mut memo = MEMO.lock();
    if memo.len() >= MEMO_ENTRIES {
        memo.remove(0);
    }
    memo.push((key, z));
    z
}

fn zeta_uncached(n: u64, theta: f64) -> f64 {
    const EXACT_LIMIT: u64 = 10_000_000;
    if n <= EXACT_LIMIT {
        return zeta_range(0, n, theta, 0.0);
    }
    let m = 1_000_000u64;
    let head = zeta_range(0, m - 1, theta, 0.0);
    let (mf, nf) = (m as f64, n as f64);
    let f = |x: f64| x.powf(-theta);
    let d1 = |x: f64| -theta * x.powf(-theta - 1.0);
    let d3 = |x: f64| -theta * (theta + 1.0) * (theta + 2.0) * x.powf(-theta - 3.0);
    let integral = if (theta - 1.0).abs() < 1e-12 {
        (nf / mf).ln()
    } else {
        (nf.powf(1.0 - theta) - mf.powf(1.0 - theta)) / (1.0 - theta)
    };
    head + integral + (f(mf) + f(nf)) / 2.0 + (d1(nf) - d1(mf)) / 12.0 - (d3(nf) - d3(mf)) / 720.0
}

/// YCSB's incremental `zeta(st, n, theta, initialsum)`: adds the terms for items st+1..=n.
fn zeta_range(start: u64, n: u64, theta: f64, initial_sum: f64) -> f64 {
    let mut sum = initial_sum;
    for i in start..n {
        sum += 1.0 / ((i + 1) as f64).powf(theta);
    }
    sum
}

/// YCSB `ZipfianGenerator`: item 0 is the most popular; P(0) = 1/ζ(n, θ).
#[derive(Clone, Debug)]
pub struct Zipfian {
    /// Item count given at construction; YCSB keeps using it in `eta` when the count grows.
    items: u64,
    theta: f64,
    alpha: f64,
    zeta2theta: f64,
    /// 0.5^θ: YCSB recomputes it on every draw; it is constant.
    half_pow_theta: f64,
    zetan: f64,
    eta: f64,
    count_for_zeta: u64,
}

impl Zipfian {
    /// Zipfian over `0..items` (`items` ≥ 2, 0 < θ < 1).
    pub fn new(items: u64, theta: f64) -> Self {
        Self::with_zetan(items, theta, zeta(items, theta))
    }

    /// With ζ(items, θ) supplied (YCSB passes a precomputed constant for 10^10 items).
    pub fn with_zetan(items: u64, theta: f64, zetan: f64) -> Self {
        let zeta2theta = zeta(2, theta);
        let mut z = Zipfian {
            items,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zeta2theta,
            half_pow_theta: 0.5f64.powf(theta),
            zetan,
            eta: 0.0,
            count_for_zeta: items,
        };
        z.eta = z.eta_for(zetan);
        z
    }

    fn eta_for(&self, zetan: f64) -> f64 {
        (1.0 - (2.0 / self.items as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta2theta / zetan)
    }

    /// ycsbr's `IncreaseItemCountBy`/`SetItemCount`: the item count becomes `items` (≥ the
    /// current one), ζ is extended term by term and η follows the new count (YCSB's
    /// `next_with_count` keeps η at the construction-time count; ycsbr does not).
    pub fn grow_to(&mut self, items: u64) {
        if items <= self.items {
            return;
        }
        if items > self.count_for_zeta {
            self.zetan = zeta_range(self.count_for_zeta, items, self.theta, self.zetan);
            self.count_for_zeta = items;
        }
        self.items = items;
        self.eta = self.eta_for(self.zetan);
    }

    /// The item count draws are over.
    pub fn items(&self) -> u64 {
        self.items
    }

    /// ζ(n, θ) currently in use.
    pub fn zetan(&self) -> f64 {
        self.zetan
    }

    /// A draw over the construction-time item count.
    pub fn next<R: Rng + ?Sized>(&mut self, rng: &mut R) -> u64 {
        self.next_with_count(rng, self.items)
    }

    /// YCSB `nextLong(itemcount)`: a draw over `0..item_count`. A larger count extends ζ
    /// incrementally (the cost is one term per new item); a smaller one keeps the old ζ, as YCSB
    /// does with `allowitemcountdecrease = false`.
    pub fn next_with_count<R: Rng + ?Sized>(&mut self, rng: &mut R, item_count: u64) -> u64 {
        if item_count > self.count_for_zeta {
            self.zetan = zeta_range(self.count_for_zeta, item_count, self.theta, self.zetan);
            self.count_for_zeta = item_count;
            self.eta = self.eta_for(self.zetan);
        }
        let u: f64 = rng.gen();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + self.half_pow_theta {
            return 1;
        }
        (item_count as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64
    }
}

/// YCSB `ScrambledZipfianGenerator`: zipfian popularity over 10^10 items, folded onto
/// `0..item_count` with FNV so popular keys are spread over the key space.
#[derive(Clone, Debug)]
pub struct ScrambledZipfian {
    inner: Zipfian,
    item_count: u64,
}

impl ScrambledZipfian {
    pub fn new(item_count: u64, theta: f64) -> Self {
        let zetan = if theta == DEFAULT_THETA {
            SCRAMBLED_ZETAN_AT_DEFAULT_THETA
        } else {
            zeta(SCRAMBLED_ITEM_COUNT, theta)
        };
        ScrambledZipfian { inner: Zipfian::with_zetan(SCRAMBLED_ITEM_COUNT, theta, zetan), item_count }
    }

    pub fn next<R: Rng + ?Sized>(&mut self, rng: &mut R) -> u64 {
        fnv_hash64(self.inner.next(rng)) % self.item_count.max(1)
    }

    /// The item the underlying zipfian's most popular value (0) lands on.
    pub fn most_popular_item(&self) -> u64 {
        fnv_hash64(0) % self.item_count.max(1)
    }

    /// P(most popular underlying value) = 1/ζ(10^10, θ).
    pub fn top_probability(&self) -> f64 {
        1.0 / self.inner.zetan()
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn euler_maclaurin_zeta_matches_ycsb_constant_and_exact_sums() {
        let approx = zeta(SCRAMBLED_ITEM_COUNT, DEFAULT_THETA);
        assert!((approx - SCRAMBLED_ZETAN_AT_DEFAULT_THETA).abs() < 1e-7, "{approx}");
        // Cross the exact/approximate boundary: both methods agree.
        let n = 10_000_001;
        let exact = zeta_range(0, n, 0.8, 0.0);
        assert!((zeta(n, 0.8) - exact).abs() < 1e-8);
    }

    /// P(item 0) is exactly 1/ζ(n, θ) by construction (u·ζ < 1); check the sampler honours it.
    #[test]
    fn top_item_frequency_is_one_over_zeta() {
        let mut rng = SmallRng::seed_from_u64(7);
        for (items, theta) in [(1000u64, 0.99), (100_000, 0.99), (1000, 0.5)] {
            let mut z = Zipfian::new(items, theta);
            let draws = 200_000;
            let mut top = 0u64;
            let mut second = 0u64;
            for _ in 0..draws {
                let v = z.next(&mut rng);
                assert!(v < items);
                top += u64::from(v == 0);
                second += u64::from(v == 1);
            }
            let p0 = 1.0 / zeta(items, theta);
            let p1 = 2f64.powf(-theta) / zeta(items, theta);
            let (f0, f1) = (top as f64 / draws as f64, second as f64 / draws as f64);
            // 5 standard deviations of a binomial proportion.
            let tol = |p: f64| 5.0 * (p * (1.0 - p) / draws as f64).sqrt();
            assert!((f0 - p0).abs() < tol(p0), "items {items} θ {theta}: top {f0} vs {p0}");
            assert!((f1 - p1).abs() < tol(p1), "items {items} θ {theta}: second {f1} vs {p1}");
        }
    }

    #[test]
    fn scrambled_zipfian_hottest_key_has_ycsb_popularity() {
        let mut rng = SmallRng::seed_from_u64(11);
        let items = 100_000;
        let mut z = ScrambledZipfian::new(items, DEFAULT_THETA);
        let mut counts = vec![0u32; items as usize];
        let draws = 300_000;
        for _ in 0..draws {
            counts[z.next(&mut rng) as usize] += 1;
        }
        let (hottest, &hits) = counts.iter().enumerate().max_by_key(|(_, c)| **c).unwrap();
        assert_eq!(hottest as u64, z.most_popular_item());
        let p = z.top_probability();
        assert!((p - 1.0 / 26.469).abs() < 1e-4);
        let f = f64::from(hits) / draws as f64;
        // Other underlying values fold onto the same key too; that adds well under 0.5%.
        assert!(f > p - 5.0 * (p / draws as f64).sqrt() && f < p + 0.005, "{f} vs {p}");
        // Skewed, yet spread: many distinct keys are touched.
        assert!(counts.iter().filter(|&&c| c > 0).count() > 20_000);
    }

    #[test]
    fn growing_item_count_extends_zeta() {
        let mut z = Zipfian::new(1000, 0.99);
        let mut rng = SmallRng::seed_from_u64(1);
        for _ in 0..1000 {
            assert!(z.next_with_count(&mut rng, 2000) < 2000);
        }
        assert!((z.zetan() - zeta(2000, 0.99)).abs() < 1e-9);
    }
}
