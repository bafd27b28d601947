//! Whether an engine may still be used: not closed, not poisoned. Every read, write and scan of
//! an engine starts with [`OpenState::check`].

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;

use strata_core::{Error, Poison, Result};

/// An engine's closed flag and its poison (the first failure after which its state is unknown).
#[derive(Debug, Default)]
pub struct OpenState {
    closed: AtomicBool,
    poison: Poison,
}

impl OpenState {
    /// Open and clean; poisoned errors read `"{label}: {cause}"` (an empty label adds nothing).
    pub const fn labelled(label: &'static str) -> OpenState {
        OpenState { closed: AtomicBool::new(false), poison: Poison::labelled(label) }
    }

    /// `Err(Closed)` once closed, else `Err(Poisoned)` once poisoned, else `Ok`.
    pub fn check(&self) -> Result<()> {
        if self.closed.load(Relaxed) {
            return Err(Error::Closed);
        }
        self.poison.check()
    }

    /// Records `error` as the poison's cause (unless one is recorded) and returns it.
    pub fn poison(&self, error: Error) -> Error {
        self.poison.poison(error)
    }

    /// `Err(Poisoned)` once poisoned, closed or not: a close reports an earlier failure, and a
    /// write applied while the engine closes still lands unless it is poisoned.
    pub fn check_not_poisoned(&self) -> Result<()> {
        self.poison.check()
    }

    pub fn is_poisoned(&self) -> bool {
        self.poison.is_poisoned()
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Relaxed)
    }

    /// Marks the engine closed; true for the call that closed it (false once closed already),
    /// so exactly one caller runs the close.
    pub fn mark_closed(&self) -> bool {
        !self.closed.swap(true, Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_wins_over_poisoned_and_only_the_first_close_counts() {
        let state = OpenState::labelled("engine");
        assert!(state.check().is_ok());
        let returned = state.poison(Error::invalid("disk gone"));
        assert!(matches!(returned, Error::InvalidArgument(_)));
        assert!(
            matches!(state.check(), Err(Error::Poisoned(m)) if m == "engine: invalid argument: disk gone")
        );
        assert!(state.mark_closed());
        assert!(!state.mark_closed());
        assert!(matches!(state.check(), Err(Error::Closed)));
        assert!(state.is_poisoned() && state.is_closed());
    }
}
