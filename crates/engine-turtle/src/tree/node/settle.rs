//! Settling at a node (`Tree::settle_step`; docs/ARCHITECTURE.md, turtle's write path step 8):
//! flushes while the buffer passes a fraction of the leaf bytes below the node, then rewrites
//! the segments those flushes left mostly flushed, then the children, top-down.

use std::sync::Arc;

use strata_core::Result;

use super::Node;
use crate::tree::{ApplyConfig, Leaf, Subtree};

/// A settling step at one node (`Node::settle_action`).
enum SettleAction {
    /// Flush this pivot.
    Flush(usize),
    /// Rewrite this segment (level, index) without its flushed entries.
    Rewrite(usize, usize),
}

impl Node {
    /// One step of settling (`Tree::settle_step`): this node's own step (`settle_action`) when
    /// it needs one, else the first child that needs settling settled one step; whether
    /// anything moved. Top-down, so what a flush carries into a child is settled from there by
    /// later steps.
    pub fn settle_step(&mut self, fraction: f64, config: &ApplyConfig) -> Result<bool> {
        match self.settle_action(fraction) {
            Some(SettleAction::Flush(i)) => {
                self.flush(i, config)?;
                return Ok(true);
            }
            Some(SettleAction::Rewrite(level, j)) => {
                let ranges = self.pivot_ranges();
                self.levels[level][j] =
                    self.levels[level][j].without_flushed(&ranges, config.run_block_bytes())?;
                self.drop_spent_segments();
                return Ok(true);
            }
            None => {}
        }
        for i in 0..self.children.len() {
            if !self.children[i].needs_settling(fraction) {
                continue;
            }
            let upper = self.pivot_range(i).1.map(<[u8]>::to_vec);
            let Subtree::Node(child) =
                std::mem::replace(&mut self.children[i], Subtree::Leaf(Leaf::empty()?))
            else {
                unreachable!("only a node buffers");
            };
            let mut child = Arc::unwrap_or_clone(child);
            child.set_upper(upper);
            child.settle_step(fraction, config)?;
            let parts = child.split_if_needed(config)?;
            self.splice_child(i, parts, config)?;
            return Ok(true);
        }
        Ok(false)
    }

    /// What settling does at this node: flush its fullest pivot while the buffer holds more
    /// than `fraction` of the leaf bytes below it; then rewrite, without its flushed entries,
    /// the segment whose flushed entries outweigh its unflushed ones the most (flushes raise
    /// bounds and leave the entries in the run: a settled buffer would otherwise keep most of
    /// its runs on disk for a few unflushed entries). `None`: nothing to do here.
    fn settle_action(&self, fraction: f64) -> Option<SettleAction> {
        let (i, _, buffered) = self.buffer_summary();
        if buffered > 0 && buffered as f64 > fraction * self.leaf_bytes_below() as f64 {
            return Some(SettleAction::Flush(i));
        }
        let ranges = self.pivot_ranges();
        let mut most: Option<(u64, usize, usize)> = None;
        for (level, segments) in self.levels.iter().enumerate() {
            for (j, segment) in segments.iter().enumerate() {
                let unflushed: u64 =
                    ranges.iter().map(|(l, u)| segment.unflushed_bytes(l, l, u.as_deref())).sum();
                let flushed = segment.view_bytes().saturating_sub(unflushed);
                let slack = segment.run().estimate_slack_bytes();
                if flushed > unflushed + slack && most.is_none_or(|(m, _, _)| flushed > m) {
                    most = Some((flushed, level, j));
                }
            }
        }
        most.map(|(_, level, j)| SettleAction::Rewrite(level, j))
    }

    /// Whether it, or a node below it, has a settling step to take (`settle_action`).
    pub fn needs_settling(&self, fraction: f64) -> bool {
        self.settle_action(fraction).is_some() || self.children.iter().any(|c| c.needs_settling(fraction))
    }
}
