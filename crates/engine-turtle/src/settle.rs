//! Write path step 8 (docs/ARCHITECTURE.md, "turtle"): settling. Once no finalized table
//! waits, the worker flushes the tree's buffers toward its leaves a step at a time while the
//! `settle` knob asks for it (`Settle`: by the smoothed shares of scans and writes, always, or
//! never), then checkpoints the settled tree; `Compact` maintenance settles until nothing is
//! buffered. Every step holds `apply_lock`, as the apply does.

use std::sync::atomic::Ordering::Relaxed;

use strata_core::Result;

use crate::engine::Inner;
use crate::options::Settle;

impl Inner {
    /// While `settle_fraction` says so and no table waits, the tree's buffers are flushed
    /// toward its leaves a step at a time until each node buffers at most that fraction of the
    /// leaf bytes below it; then the settled tree is checkpointed (at the same WAL lsn: it
    /// holds no new write). A table finalized meanwhile goes first.
    pub(crate) fn settle_while_due(&self) -> Result<()> {
        let mut settled = false;
        while let Some(fraction) = self.settle_fraction() {
            if self.signals.stop_requested() || !self.tables.read().finalized.is_empty() {
                break;
            }
            let _one_at_a_time = self.apply_lock.lock();
            if self.writes.state().is_closed() || !self.tables.read().finalized.is_empty() {
                break;
            }
            // A poisoned engine changes nothing more on disk.
            self.writes.state().check_not_poisoned()?;
            if !self.settle_step(fraction)? {
                break;
            }
            settled = true;
        }
        if settled {
            let _one_at_a_time = self.apply_lock.lock();
            self.checkpoint_settled()?;
        }
        Ok(())
    }

    /// `Compact`: every table applied, then the tree settled until no node buffers anything,
    /// under `apply_lock` throughout (writers go on until the finalized list is full), then
    /// checkpointed.
    pub(crate) fn compact_now(&self) -> Result<()> {
        self.checkpoint_now()?;
        let _one_at_a_time = self.apply_lock.lock();
        while !self.writes.state().is_closed() {
            self.writes.state().check_not_poisoned()?;
            if !self.settle_step(0.0)? {
                break;
            }
        }
        self.checkpoint_settled()?;
        self.writes.check_usable()
    }

    /// One `Tree::settle_step` (`change_tree`); the caller holds `apply_lock`. Whether anything
    /// moved.
    fn settle_step(&self, fraction: f64) -> Result<bool> {
        let stepped =
            self.change_tree("settling the tree", |tree, spill| tree.settle_step(fraction, Some(spill)))?;
        if stepped {
            self.counters.settle_steps.fetch_add(1, Relaxed);
            self.spill_if_over()?;
        }
        Ok(stepped)
    }

    /// A checkpoint of the settled tree at the last checkpoint's WAL lsn (the tree holds the
    /// same writes), unless the engine closed meanwhile (or failed: then the error); the caller
    /// holds `apply_lock`.
    fn checkpoint_settled(&self) -> Result<()> {
        if self.writes.state().is_closed() {
            return Ok(());
        }
        self.writes.state().check_not_poisoned()?;
        let lsn = self.checkpoint_lsn.load(Relaxed);
        self.write_checkpoint(lsn).map_err(|e| self.writes.poison(e))?;
        self.resize_block_cache();
        Ok(())
    }

    /// The fraction the worker settles the tree to now (`Settle`): by the smoothed write share
    /// (`distance::settle_fraction`; nothing before the first window), the least one, or none.
    fn settle_fraction(&self) -> Option<f64> {
        match self.tuner.settle() {
            Settle::Auto => self.tuner.shares().and_then(crate::distance::settle_fraction),
            Settle::Always => Some(crate::distance::MIN_SETTLE_FRACTION),
            Settle::Off => None,
        }
    }
}
