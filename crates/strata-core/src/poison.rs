//! Sticky failure state: once a write or a sync fails, the durable state is unknown, so every
//! later operation of the thing that failed (a WAL, a file, an engine) returns
//! [`Error::Poisoned`] until it is reopened. One copy for every engine and shared crate.

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{Acquire, Release};
use std::sync::OnceLock;

use crate::{Error, Result};

/// A poison flag with the first failure's text.
///
/// Invariants:
/// - The first [`Poison::poison`] call's error text is kept; later causes are dropped (they are
///   usually consequences of the first).
/// - The cause is recorded *before* the flag is set (`Release`), and [`Poison::check`] reads the
///   flag with `Acquire`: whoever sees the flag sees the cause. So a caller that poisons under a
///   lock and then releases it orders the poisoning before anything that takes the lock next
///   (the WAL relies on this for `sync_gate`).
/// - No lock is held by `poison`, `check` or `error`, so they may be called under any lock.
#[derive(Debug, Default)]
pub struct Poison {
    poisoned: AtomicBool,
    cause: OnceLock<String>,
    /// Put before the cause in `Error::Poisoned` ("WAL: ..."), naming what was poisoned.
    label: &'static str,
}

impl Poison {
    /// A clean state whose errors say only the cause.
    pub const fn new() -> Poison {
        Poison::labelled("")
    }

    /// A clean state whose errors read `"{label}: {cause}"` (an empty label adds nothing).
    pub const fn labelled(label: &'static str) -> Poison {
        Poison { poisoned: AtomicBool::new(false), cause: OnceLock::new(), label }
    }

    /// Records `error` as the cause unless one is recorded already, and returns it for the caller
    /// that hit it (`.map_err(|e| poison.poison(e))`).
    pub fn poison(&self, error: Error) -> Error {
        self.record(&error);
        error
    }

    /// [`Poison::poison`] for an error the caller keeps. A `Poisoned` error (a lower layer's,
    /// such as the WAL's) gives its own cause, so the text does not nest "poisoned by an earlier
    /// failure" twice.
    pub fn record(&self, error: &Error) {
        self.record_text(|| match error {
            Error::Poisoned(cause) => cause.clone(),
            other => other.to_string(),
        });
    }

    /// Records a cause given as text (unless one is recorded already).
    pub fn record_text(&self, cause: impl FnOnce() -> String) {
        // `get_or_init` returns only once the winner's text is stored, so the flag below is never
        // set before a cause is readable.
        self.cause.get_or_init(cause);
        self.poisoned.store(true, Release);
    }

    /// True once poisoned (one atomic load: cheap enough for every hot-path operation).
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Acquire)
    }

    /// `Err(Error::Poisoned(..))` once poisoned, else `Ok(())`.
    pub fn check(&self) -> Result<()> {
        match self.error() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// The error every later operation returns, `None` while not poisoned.
    pub fn error(&self) -> Option<Error> {
        if !self.is_poisoned() {
            return None;
        }
        let cause = self.cause().unwrap_or("unknown cause");
        Some(Error::Poisoned(match self.label {
            "" => cause.to_string(),
            label => format!("{label}: {cause}"),
        }))
    }

    /// The first failure's text (without the label), `None` while not poisoned.
    pub fn cause(&self) -> Option<&str> {
        if !self.is_poisoned() {
            return None;
        }
        self.cause.get().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_until_poisoned_then_sticky_with_the_first_cause() {
        let p = Poison::labelled("WAL");
        assert!(p.check().is_ok() && p.error().is_none() && p.cause().is_none());
        let returned = p.poison(Error::invalid("first"));
        assert!(matches!(returned, Error::InvalidArgument(ref m) if m == "first"));
        p.record(&Error::invalid("second"));
        let err = p.check().unwrap_err();
        assert!(matches!(&err, Error::Poisoned(m) if m == "WAL: invalid argument: first"), "{err}");
        assert_eq!(p.cause(), Some("invalid argument: first"));
        assert!(p.is_poisoned());
    }

    #[test]
    fn a_poisoned_error_as_the_cause_does_not_nest() {
        let wal = Poison::labelled("WAL");
        wal.record_text(|| "disk full".into());
        let engine = Poison::labelled("engine");
        engine.record(&wal.error().unwrap());
        assert!(matches!(engine.error(), Some(Error::Poisoned(m)) if m == "engine: WAL: disk full"));
    }

    #[test]
    fn unlabelled_errors_carry_the_cause_only() {
        let p = Poison::new();
        p.record_text(|| "disk gone".into());
        assert!(matches!(p.error(), Some(Error::Poisoned(m)) if m == "disk gone"));
    }

    #[test]
    fn concurrent_poisoners_leave_exactly_one_cause() {
        let p = std::sync::Arc::new(Poison::new());
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let p = p.clone();
                std::thread::spawn(move || {
                    p.record_text(|| format!("cause {i}"));
                    // Whoever sees the flag sees a cause.
                    assert!(p.cause().is_some());
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(p.cause().is_some_and(|c| c.starts_with("cause ")));
    }
}
