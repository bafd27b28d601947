//! Seed selection and replay. Every check prints the seed it runs; `STRATA_SEED=<u64>` replays
//! exactly that seed, `STRATA_SEEDS=<n>` runs n random seeds, `STRATA_OPS=<n>` overrides the
//! number of operations per seed.

use std::env;

/// Replays exactly this seed (decimal, or hex with `0x`).
pub const SEED_ENV: &str = "STRATA_SEED";
/// How many random seeds each check runs when `STRATA_SEED` is not set.
pub const SEEDS_ENV: &str = "STRATA_SEEDS";
/// Operations per seed, overriding each check's default.
pub const OPS_ENV: &str = "STRATA_OPS";

/// The seeds a check should run: `STRATA_SEED` alone if set, otherwise `STRATA_SEEDS` (or
/// `default_count`) fresh random seeds.
pub fn seeds(default_count: usize) -> Vec<u64> {
    if let Some(seed) = env_u64(SEED_ENV) {
        return vec![seed];
    }
    let count = env_u64(SEEDS_ENV).map_or(default_count, |n| usize::try_from(n).unwrap_or(usize::MAX));
    (0..count.max(1)).map(|_| rand::random::<u64>()).collect()
}

/// One seed: `STRATA_SEED` if set, otherwise a fresh random one.
pub fn single_seed() -> u64 {
    env_u64(SEED_ENV).unwrap_or_else(rand::random::<u64>)
}

/// Operations per seed: `STRATA_OPS` if set, otherwise `default_ops`.
pub fn ops_per_seed(default_ops: usize) -> usize {
    env_u64(OPS_ENV).map_or(default_ops, |n| usize::try_from(n).unwrap_or(usize::MAX))
}

/// The command that reruns the current test with `seed`, e.g.
/// `STRATA_SEED=42 cargo test -p engine-memory -- --exact conformance_sim`.
pub fn replay_line(seed: u64) -> String {
    let package = env::var("CARGO_PKG_NAME").map(|p| format!(" -p {p}")).unwrap_or_default();
    let thread = std::thread::current();
    let test = match thread.name() {
        Some(name) if name != "main" => format!(" -- --exact {name}"),
        _ => " -- <test name>".to_string(),
    };
    format!("{SEED_ENV}={seed} cargo test{package}{test}")
}

fn env_u64(name: &str) -> Option<u64> {
    let text = env::var(name).ok()?;
    match parse_u64(&text) {
        Some(n) => Some(n),
        None => panic!("{name}={text:?} is not a u64 (decimal, or hex with 0x)"),
    }
}

pub(crate) fn parse_u64(text: &str) -> Option<u64> {
    let text = text.trim();
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// Mixes a seed with a stream number so derived generators are independent.
pub(crate) fn derive(seed: u64, stream: u64) -> u64 {
    // SplitMix64 finalizer over the combined input.
    let mut z = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(0xD1B5_4A32_D192_ED03);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_decimal_and_hex() {
        assert_eq!(parse_u64("42"), Some(42));
        assert_eq!(parse_u64(" 0x2a "), Some(42));
        assert_eq!(parse_u64("18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64("forty-two"), None);
        assert_eq!(parse_u64("-1"), None);
    }

    #[test]
    fn derived_streams_differ() {
        assert_ne!(derive(1, 0), derive(1, 1));
        assert_ne!(derive(1, 0), derive(2, 0));
        assert_eq!(derive(7, 3), derive(7, 3));
    }
}
