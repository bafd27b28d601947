//! The skewed distributions the papers used, beside YCSB's scrambled zipfian (`zipfian.rs`):
//!
//! - `zipfian-plain` ([`PlainZipfian`]): a zipfian θ over exactly the loaded records, rank `r`
//!   mapped to record `perm(r)` by a fixed pseudo-random permutation, so the hottest records are
//!   spread over the key space and every rank has its own record. The F2 paper's "90% of accesses
//!   to 18% of records" (§8.1) is this shape: θ 0.99 over 20M records gives the top 18% ~89%.
//! - `scattered` ([`ScatteredZipfian`]): ycsbr's `ScatteredZipfianChooser`, the generator
//!   TreeLine's benchmarks use: a zipfian over the current item count (loaded records plus this
//!   thread's inserts, growing with each insert), its rank hashed with unsigned FNV-1 (rank XOR a
//!   salt, 0 by default) and reduced to the item count with Lemire's multiply-shift. Ranks may
//!   collide on one record, which makes it slightly more skewed than `zipfian-plain`.
//!
//! YCSB's scrambled zipfian instead draws over 10^10 items and folds them onto the records, so at
//! 20M records its top 18% of keys get only ~71%.

use rand::Rng;

use super::keys::fnv1_64;
use super::zipfian::Zipfian;

/// A fixed bijection on `0..n`: a 4-round Feistel network over the smallest even number of bits
/// covering `n`, with cycle walking (values ≥ `n` are permuted again until they fall below `n`;
/// at most ~4 steps on average since the domain is < 4n).
#[derive(Clone, Debug)]
pub struct KeyPermutation {
    n: u64,
    half_bits: u32,
    keys: [u64; 4],
}

impl KeyPermutation {
    /// The permutation of `0..n` chosen by `seed` (n ≥ 1).
    pub fn new(n: u64, seed: u64) -> Self {
        let bits = 64 - n.saturating_sub(1).leading_zeros();
        let half_bits = bits.div_ceil(2).max(1);
        let mut keys = [0u64; 4];
        for (round, key) in keys.iter_mut().enumerate() {
            *key = mix64(seed ^ (round as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        }
        KeyPermutation { n: n.max(1), half_bits, keys }
    }

    /// The image of `x` (`x < n`).
    pub fn apply(&self, x: u64) -> u64 {
        debug_assert!(x < self.n);
        let mut y = self.feistel(x);
        while y >= self.n {
            y = self.feistel(y);
        }
        y
    }

    fn feistel(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half_bits) - 1;
        let (mut left, mut right) = (x >> self.half_bits, x & mask);
        for key in self.keys {
            let next = left ^ (mix64(right ^ key) & mask);
            left = right;
            right = next;
        }
        (left << self.half_bits) | right
    }
}

/// SplitMix64's finalizer.
fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The permutation seed of `zipfian-plain`: fixed, so every run (and every engine) has the same
/// hot records for the same record count.
pub const PLAIN_ZIPFIAN_SEED: u64 = 0x5EED_0FF2_2026;

/// `zipfian-plain`: YCSB's `ZipfianGenerator` (Gray et al.) over `0..records`, ranks permuted.
#[derive(Clone, Debug)]
pub struct PlainZipfian {
    zipfian: Option<Zipfian>,
    permutation: KeyPermutation,
}

impl PlainZipfian {
    /// Over `records` ≥ 1 loaded records (run-phase inserts are never chosen, as with `uniform`).
    pub fn new(records: u64, theta: f64) -> Self {
        PlainZipfian {
            zipfian: (records >= 2).then(|| Zipfian::new(records, theta)),
            permutation: KeyPermutation::new(records, PLAIN_ZIPFIAN_SEED),
        }
    }

    /// The record popularity rank `rank` maps to (rank 0 is the hottest).
    pub fn record_of_rank(&self, rank: u64) -> u64 {
        self.permutation.apply(rank)
    }

    pub fn next<R: Rng + ?Sized>(&mut self, rng: &mut R) -> u64 {
        match &mut self.zipfian {
            Some(z) => self.permutation.apply(z.next(rng)),
            None => 0,
        }
    }
}

/// `scattered`: ycsbr's `ScatteredZipfianChooser` with its default salt 0.
#[derive(Clone, Debug)]
pub struct ScatteredZipfian {
    zipfian: Option<Zipfian>,
    theta: f64,
    salt: u64,
}

impl ScatteredZipfian {
    /// Over `items` ≥ 1 (ycsbr's phase start: loaded records plus earlier inserts).
    pub fn new(items: u64, theta: f64) -> Self {
        ScatteredZipfian { zipfian: (items >= 2).then(|| Zipfian::new(items, theta)), theta, salt: 0 }
    }

    /// The index rank `rank` lands on when there are `items` items.
    pub fn index_of_rank(&self, rank: u64, items: u64) -> u64 {
        fast_range(fnv1_64(rank ^ self.salt), items)
    }

    /// A draw over `0..known`; the item count grows to `known` first (ycsbr raises it by one per
    /// insert), extending ζ and η as ycsbr's `IncreaseItemCountBy` does.
    pub fn next<R: Rng + ?Sized>(&mut self, rng: &mut R, known: u64) -> u64 {
        if known < 2 {
            return 0;
        }
        let zipfian = self.zipfian.get_or_insert_with(|| Zipfian::new(known, self.theta));
        zipfian.grow_to(known);
        let items = zipfian.items();
        let rank = zipfian.next(rng);
        self.index_of_rank(rank, items)
    }
}

/// Lemire's multiply-shift reduction of a 64-bit hash onto `0..n` (what ycsbr uses instead of `%`).
pub fn fast_range(hash: u64, n: u64) -> u64 {
    ((u128::from(hash) * u128::from(n)) >> 64) as u64
}

#[cfg(test)]
mod tests {
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    use super::super::zipfian::zeta;
    use super::*;

    #[test]
    fn permutations_are_bijections() {
        for n in [1u64, 2, 3, 1000, 1023, 1024, 1025, 65_537] {
            let p = KeyPermutation::new(n, PLAIN_ZIPFIAN_SEED);
            let mut seen = vec![false; n as usize];
            for x in 0..n {
                let y = p.apply(x);
                assert!(y < n, "n {n}: {x} -> {y}");
                assert!(!seen[y as usize], "n {n}: {y} hit twice");
                seen[y as usize] = true;
            }
        }
        // Spread: the 100 hottest ranks of 1M records do not sit in one corner of the key space.
        let p = KeyPermutation::new(1_000_000, PLAIN_ZIPFIAN_SEED);
        let top: Vec<u64> = (0..100).map(|r| p.apply(r)).collect();
        let below_half = top.iter().filter(|&&x| x < 500_000).count();
        assert!((30..=70).contains(&below_half), "{below_half} of 100 in the lower half");
    }

    /// Share of draws landing on the records of the `fraction` most popular ranks (found through
    /// the permutation, so sampling noise does not pick the keys), measured and analytic.
    fn measured_top_share(records: u64, theta: f64, fraction: f64, draws: u64) -> (f64, f64) {
        let mut z = PlainZipfian::new(records, theta);
        let mut rng = SmallRng::seed_from_u64(17);
        let top = (records as f64 * fraction).round() as u64;
        let mut hot = vec![false; records as usize];
        for rank in 0..top {
            hot[z.record_of_rank(rank) as usize] = true;
        }
        let hits = (0..draws).filter(|_| hot[z.next(&mut rng) as usize]).count();
        (hits as f64 / draws as f64, zeta(top, theta) / zeta(records, theta))
    }

    /// The measured top-18% share matches ζ(0.18·N, θ)/ζ(N, θ) at several N (the F2 paper's
    /// ~89% needs N = 20M; the same formula gives the smaller N's values).
    #[test]
    fn plain_zipfian_top_18_percent_share_matches_the_analytic_value() {
        for (records, theta) in [(10_000u64, 0.99), (100_000, 0.99), (200_000, 0.99), (100_000, 0.8)] {
            let (measured, analytic) = measured_top_share(records, theta, 0.18, 1_000_000);
            // Gray's sampler approximates the tail by a power law; it stays within one point.
            assert!(
                (measured - analytic).abs() < 0.01,
                "N {records} θ {theta}: measured {measured:.4} vs analytic {analytic:.4}"
            );
        }
        let at_20m = zeta(3_600_000, 0.99) / zeta(20_000_000, 0.99);
        assert!((at_20m - 0.893).abs() < 0.005, "F2's shape at 20M: {at_20m}");
    }

    /// The hottest rank lands on the permutation's image of 0, with P = 1/ζ(N, θ).
    #[test]
    fn plain_zipfian_hottest_record_is_the_image_of_rank_zero() {
        let records = 50_000;
        let mut z = PlainZipfian::new(records, 0.99);
        let mut rng = SmallRng::seed_from_u64(3);
        let draws = 200_000;
        let hottest = z.record_of_rank(0);
        let hits = (0..draws).filter(|_| z.next(&mut rng) == hottest).count();
        let p = 1.0 / zeta(records, 0.99);
        let f = hits as f64 / draws as f64;
        assert!((f - p).abs() < 5.0 * (p / draws as f64).sqrt(), "{f} vs {p}");
    }

    /// ycsbr's algorithm: index = (FNV-1(rank ^ salt) · items) >> 64 with unsigned FNV-1, over a
    /// zipfian whose item count grows with inserts.
    #[test]
    fn scattered_follows_ycsbr() {
        // FNV-1 64 of eight zero bytes (unsigned; YCSB's abs() variant differs only in sign).
        assert_eq!(fnv1_64(0), 0xA8C7_F832_281A_39C5);
        assert_eq!(super::super::keys::fnv_hash64(0), fnv1_64(0).wrapping_neg());
        assert_eq!(fast_range(u64::MAX, 1000), 999);
        assert_eq!(fast_range(0, 1000), 0);
        assert_eq!(fast_range(1 << 63, 1000), 500);
        let items = 100_000;
        let mut s = ScatteredZipfian::new(items, 0.99);
        let mut rng = SmallRng::seed_from_u64(5);
        let draws = 300_000;
        let mut counts = vec![0u32; items as usize];
        for _ in 0..draws {
            counts[s.next(&mut rng, items) as usize] += 1;
        }
        let hottest = s.index_of_rank(0, items);
        let (argmax, _) = counts.iter().enumerate().max_by_key(|(_, c)| **c).unwrap();
        assert_eq!(argmax as u64, hottest);
        // Same draws as the plain zipfian over the same ranks, so the same top-rank probability.
        let p = 1.0 / zeta(items, 0.99);
        let f = f64::from(counts[hottest as usize]) / draws as f64;
        assert!(f > p - 5.0 * (p / draws as f64).sqrt() && f < p + 0.005, "{f} vs {p}");
        // The item count grows with inserts: indexes reach the new items.
        let grown = items + 50_000;
        let beyond = (0..draws).filter(|_| s.next(&mut rng, grown) >= items).count();
        assert!(beyond > 0);
        assert!((0..1000).all(|_| s.next(&mut rng, grown) < grown));
        assert_eq!(s.zipfian.as_ref().unwrap().items(), grown);
    }

    /// Scattered is at least as skewed as plain (hash collisions merge ranks), and both far more
    /// than YCSB's scrambled zipfian at the same N.
    #[test]
    fn scattered_is_as_skewed_as_plain() {
        let items = 100_000u64;
        let draws = 500_000;
        let mut rng = SmallRng::seed_from_u64(9);
        let mut s = ScatteredZipfian::new(items, 0.99);
        let mut counts = vec![0u32; items as usize];
        for _ in 0..draws {
            counts[s.next(&mut rng, items) as usize] += 1;
        }
        counts.sort_unstable_by(|a, b| b.cmp(a));
        let top: u64 = counts[..18_000].iter().map(|&c| u64::from(c)).sum();
        let scattered = top as f64 / draws as f64;
        let (plain, _) = measured_top_share(items, 0.99, 0.18, draws);
        assert!(scattered > plain - 0.01, "scattered {scattered} vs plain {plain}");
    }
}
