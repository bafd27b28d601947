//! Parsers for command-line values. Every error is one sentence naming the flag.

/// `1000000`, `1_000_000`, `1M`, `500k`, `2G` (decimal multipliers).
pub fn count(flag: &str, text: &str) -> Result<u64, String> {
    let t = text.trim().replace('_', "");
    let (digits, multiplier) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1_000),
        Some((i, 'm' | 'M')) => (&t[..i], 1_000_000),
        Some((i, 'g' | 'G')) => (&t[..i], 1_000_000_000),
        _ => (t.as_str(), 1),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(multiplier))
        .ok_or_else(|| format!("{flag} {text:?}: expected a whole number like 1000000, 500k or 2M"))
}

/// `256MiB`, `1GiB`, `64M`, `512k`, `1048576` (binary multipliers; a trailing `B`/`iB` is optional).
pub fn bytes(flag: &str, text: &str) -> Result<u64, String> {
    let err = || format!("{flag} {text:?}: expected a size like 256MiB, 1GiB or 1048576");
    strata::parse_bytes(text).filter(|&b| b > 0).ok_or_else(err)
}

/// `--hotspot OPS,KEYS`: fraction of operations on the fraction of keys, e.g. `0.8,0.2`.
pub fn hotspot(text: &str) -> Result<(f64, f64), String> {
    let err = || format!("--hotspot {text:?}: expected OPS_FRACTION,KEYS_FRACTION like 0.8,0.2");
    let (ops, keys) = text.split_once(',').ok_or_else(err)?;
    let ops: f64 = ops.trim().parse().map_err(|_| err())?;
    let keys: f64 = keys.trim().parse().map_err(|_| err())?;
    let fraction = |x: f64| x > 0.0 && x < 1.0;
    if !(fraction(ops) && fraction(keys)) {
        return Err(format!("--hotspot {text:?}: both fractions must lie strictly between 0 and 1"));
    }
    Ok((ops, keys))
}

/// Seconds, fractional allowed.
pub fn seconds(flag: &str, text: &str) -> Result<std::time::Duration, String> {
    let secs: f64 = text
        .trim()
        .trim_end_matches('s')
        .parse()
        .map_err(|_| format!("{flag} {text:?}: expected seconds"))?;
    if !(secs.is_finite() && secs > 0.0 && secs < 1e7) {
        return Err(format!("{flag} {text:?}: expected a positive number of seconds"));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

/// A comma-separated list with empty items dropped.
pub fn list(text: &str) -> Vec<String> {
    text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts() {
        assert_eq!(count("--records", "1_000_000").unwrap(), 1_000_000);
        assert_eq!(count("--records", "2M").unwrap(), 2_000_000);
        assert_eq!(count("--records", "500k").unwrap(), 500_000);
        assert!(count("--records", "1.5").is_err());
        assert!(count("--records", "-3").is_err());
        assert!(count("--records", "").is_err());
        assert!(count("--records", "99999999999999G").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(bytes("--memory-budget", "256MiB").unwrap(), 256 << 20);
        assert_eq!(bytes("--memory-budget", "1GiB").unwrap(), 1 << 30);
        assert_eq!(bytes("--memory-budget", "64M").unwrap(), 64 << 20);
        assert_eq!(bytes("--memory-budget", "512kb").unwrap(), 512 << 10);
        assert_eq!(bytes("--memory-budget", "1.5G").unwrap(), 3 << 29);
        assert_eq!(bytes("--memory-budget", "4096").unwrap(), 4096);
        for bad in ["", "abc", "0", "-1M", "1X", "nan"] {
            assert!(bytes("--memory-budget", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn hotspots_and_seconds() {
        assert_eq!(hotspot("0.8,0.2").unwrap(), (0.8, 0.2));
        assert!(hotspot("0.8").is_err());
        assert!(hotspot("1.0,0.2").is_err());
        assert!(hotspot("a,b").is_err());
        assert_eq!(seconds("--duration", "1.5").unwrap().as_millis(), 1500);
        assert!(seconds("--duration", "0").is_err());
        assert!(seconds("--duration", "inf").is_err());
        assert_eq!(list("a, b,,c"), vec!["a", "b", "c"]);
    }
}
