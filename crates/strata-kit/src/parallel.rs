//! Fanning a slice out over a few scoped threads, for work that waits on the device (f2's chunk
//! reads and hot-chain lookups, treeline's write-back page reads and writes), so the I/Os are in
//! flight together. Every thread is joined, also after an error: a scoped thread left unjoined is
//! detached, and its exit (thread-local destructors) can outlast the call (the leak check of the
//! `treeline_data` fuzz target caught a hand-rolled version that returned at the first error).

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

    /// Regression (the `treeline_data` fuzz target's leak report): after an early error every
    /// other part's thread has exited, thread-local destructors included, before the call
    /// returns. A version that returned at the first failed part left them to finish detached.
    #[test]
    fn an_error_returns_only_after_every_thread_has_exited() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static EXITED: AtomicUsize = AtomicUsize::new(0);
        struct OnExit;
        impl Drop for OnExit {
            fn drop(&mut self) {
                std::thread::sleep(std::time::Duration::from_millis(30));
                EXITED.fetch_add(1, Ordering::SeqCst);
            }
        }
        thread_local! { static EXIT: OnExit = const { OnExit }; }
        let items: Vec<u32> = (0..4).collect();
        let failed = map_parts(&items, 4, 2, "a part", |p| {
            if p.contains(&0) {
                return Err(Error::invalid("the first part fails at once"));
            }
            EXIT.with(|_| ());
            Ok(p.to_vec())
        });
        assert!(failed.is_err());
        assert_eq!(EXITED.load(Ordering::SeqCst), 3, "threads still exiting after the call returned");
    }
}
