//! The estimate of the cold log's live bytes behind the default cold→cold trigger
//! (`ColdTrigger::SpaceAmplification`: a round is due when the cold log exceeds twice the
//! estimate plus a few pages).
//!
//! What a byte of the cold log is: live if its record is the newest of its key in the cold log
//! (what cold→cold ConditionalInsert copies), dead otherwise. Nothing learns that a cold record
//! died when it dies (a hot→cold append of a newer version does not look at the older one), so
//! the estimate is measured, not counted: a complete cold→cold round over the oldest `R` bytes
//! copies forward exactly the live records of that range, which take `C` bytes of log (their
//! copies, page padding included). After the round the log holds those copies (live) and the
//! `U` bytes it did not scan (from the end of the range to the tail before the round), which are
//! assumed as live as the range was:
//!
//!   estimate = C + U × min(C, R) / R
//!
//! Set only by complete rounds; hot→cold appends leave it alone, so a log that only grows reaches
//! the trigger (twice the estimate) and is measured again. Why this cannot loop:
//! - a round that finds its range all live sets the estimate to about the whole log, so the next
//!   round waits until the log has doubled (rounds over an all-live log: one per doubling);
//! - a round that finds its range less than half live reclaims more than half of what it read,
//!   so rounds run back to back only while they reclaim.
//!
//! Under uniform overwrites the oldest range is the least live part of the log (it had the most
//! time to be superseded), so the estimate errs low: the log is compacted a little early rather
//! than late. Where the oldest part is the livelier one (a set written once and never again,
//! then overwrites of other keys) the estimate errs high, and the log may grow to several times
//! its live bytes while rounds move the live oldest part to the tail; once they reach the
//! garbage behind it they find it dead and run back to back (measured with 4 KiB pages: 10,000
//! keys written once, then 60,000 overwrites of 2,000 other keys peaked at 5.5× live, 3.5× at
//! the end). The estimate is persisted in the checkpoint (`cold_live_estimate_bytes`, describing
//! the checkpointed cold range); a checkpoint without one (0, written by an older version)
//! makes the first round after open a measuring round.

/// The cold log's estimated live bytes after a complete cold→cold round that compacted
/// `compacted_bytes` (> 0) of log, whose copies took `copied_bytes` of log at the tail, and left
/// `unscanned_bytes` of log (from the end of the range to the tail before the round) unread.
pub fn estimate_after_round(compacted_bytes: u64, copied_bytes: u64, unscanned_bytes: u64) -> u64 {
    if compacted_bytes == 0 {
        return copied_bytes.saturating_add(unscanned_bytes);
    }
    // Copies can take a little more log than their originals (page padding falls differently).
    let live_in_range = u128::from(copied_bytes.min(compacted_bytes));
    let unscanned_live = u128::from(unscanned_bytes) * live_in_range / u128::from(compacted_bytes);
    copied_bytes.saturating_add(u64::try_from(unscanned_live).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::ColdTrigger;

    #[test]
    fn the_unscanned_rest_is_taken_as_live_as_the_compacted_range() {
        assert_eq!(estimate_after_round(1000, 250, 4000), 250 + 1000);
        assert_eq!(estimate_after_round(1000, 0, 4000), 0);
        assert_eq!(estimate_after_round(1000, 1000, 4000), 5000);
        assert_eq!(estimate_after_round(1000, 1100, 4000), 1100 + 4000, "padding: capped at all live");
        assert_eq!(estimate_after_round(0, 0, 4000), 4000);
        assert_eq!(estimate_after_round(u64::MAX, u64::MAX, u64::MAX), u64::MAX);
    }

    /// A round that finds its range all live is not followed by another until the log doubled;
    /// one that finds it less than half live may be (it reclaimed more than half of it).
    #[test]
    fn an_all_live_round_backs_off_until_the_log_doubles() {
        let trigger = ColdTrigger::SpaceAmplification { slack_bytes: 4 << 12 };
        let (range, rest) = (200 << 12, 800 << 12);
        let all_live = estimate_after_round(range, range, rest);
        let after = range + rest;
        assert!(!trigger.is_due(after, all_live));
        assert!(!trigger.is_due(2 * after, all_live) && trigger.is_due(2 * after + (5 << 12), all_live));
        let mostly_dead = estimate_after_round(range, range / 4, rest);
        assert!(trigger.is_due(range / 4 + rest, mostly_dead));
    }
}
