//! Fanning a slice out over a few scoped threads, for work that waits on the device (chunk
//! reads, hot-chain lookups that may read old records), so the reads are in flight together.

use strata_core::{Error, Result};

/// `map` applied to `items` in order: inline below `min_parallel` items, else split into up to
/// `threads` contiguous parts, one scoped thread each. The results keep the items' order; the
/// first error (or a panicked part, reported as `what` panicking) is returned.
pub fn map_parts<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    min_parallel: usize,
    what: &str,
    map: impl Fn(&[T]) -> Result<Vec<R>> + Sync,
) -> Result<Vec<R>> {
    if items.len() < min_parallel.max(2) || threads < 2 {
        return map(items);
    }
    let per_part = items.len().div_ceil(threads);
    let map = &map;
    let parts: Vec<Result<Vec<R>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = items.chunks(per_part).map(|part| scope.spawn(move || map(part))).collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(Error::invalid(format!("{what} panicked")))))
            .collect()
    });
    let mut out = Vec::with_capacity(items.len());
    for part in parts {
        out.extend(part?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_keep_the_order_and_the_first_error_wins() {
        let items: Vec<u32> = (0..1000).collect();
        let doubled = map_parts(&items, 4, 10, "doubler", |p| Ok(p.iter().map(|i| i * 2).collect())).unwrap();
        assert_eq!(doubled, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        let failed = map_parts(&items, 4, 10, "checker", |p| {
            if p.contains(&600) {
                Err(Error::invalid("600"))
            } else {
                Ok(p.to_vec())
            }
        });
        assert!(failed.is_err());
        let panicked = map_parts(&items, 4, 10, "the reader", |p| -> Result<Vec<u32>> {
            assert!(!p.contains(&999), "boom");
            Ok(p.to_vec())
        });
        assert!(panicked.unwrap_err().to_string().contains("the reader panicked"));
    }
}
