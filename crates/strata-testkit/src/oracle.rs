//! The model: a `BTreeMap` of what the engine must hold, plus what a crash may lose.
//!
//! After every durability point (a `Sync` write or `flush` that returned Ok, a clean close) the
//! whole model is durable. Write units applied after it are *pending*: a crash may keep any of
//! them. The pending-aware check (RocksDB db_stress's expected state, made stronger) then
//! requires, for prefix-consistent engines, that the recovered state equals the durable state
//! plus the first `p` pending units for some `p`; for other engines, that every key holds its
//! durable value or one of its pending values and no batch shows up only partly.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt::Write;

use strata_core::{Direction, Key, KeyRange, Value};

use crate::escape;
use crate::ops::Unit;

/// What a check read back from the engine: each key's value (`None` = absent).
pub(crate) type Observed = BTreeMap<Key, Option<Value>>;

/// Most differing keys a recovery failure lists.
const DIFFS_SHOWN: usize = 8;

#[derive(Debug, Default)]
pub(crate) struct Oracle {
    durable: BTreeMap<Key, Value>,
    /// Write units since the last durability point, oldest first.
    pending: Vec<Unit>,
    /// Indices into `pending` of units whose call returned `Err` (`apply_failed`): not in
    /// `current` (no reader on the same handle may see them), possibly in the files (a crash or
    /// a reopen after a failed close may bring them back, like any pending unit), and dropped,
    /// not made durable, by the next durability point that succeeds.
    failed: BTreeSet<usize>,
    /// `durable` with every pending unit applied: what reads must return until a crash.
    current: BTreeMap<Key, Value>,
    /// The first this many pending units were handed to the operating system (a `Buffered`
    /// write returned Ok after them): a restart without power loss keeps them all.
    handed_to_os: usize,
    /// Every value ever written per key, when tracked (bit-flip checks).
    written: Option<BTreeMap<Key, HashSet<Value>>>,
}

/// How a crash recovery related to the pending units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Recovery {
    pub(crate) pending_units: usize,
    /// Prefix-consistent: the `p` of the matching prefix. Otherwise: units whose value shows up
    /// on a key where no other write could explain it.
    pub(crate) recovered_units: usize,
}

impl Oracle {
    pub(crate) fn new() -> Oracle {
        Oracle::default()
    }

    pub(crate) fn track_written_values(&mut self) {
        self.written.get_or_insert_with(BTreeMap::new);
    }

    pub(crate) fn get(&self, key: &[u8]) -> Option<&Value> {
        self.current.get(key)
    }

    /// The model's answer to a range scan; empty for empty or inverted ranges.
    pub(crate) fn range(
        &self,
        range: &KeyRange,
        direction: Direction,
        limit: Option<usize>,
    ) -> Vec<(Key, Value)> {
        if range.is_empty() {
            return Vec::new();
        }
        let items = self.current.range::<[u8], _>(range.as_bounds());
        let limit = limit.unwrap_or(usize::MAX);
        let clone = |(k, v): (&Key, &Value)| (k.clone(), v.clone());
        match direction {
            Direction::Forward => items.take(limit).map(clone).collect(),
            Direction::Reverse => items.rev().take(limit).map(clone).collect(),
        }
    }

    /// Records a write unit the engine accepted (or failed: then it may or may not have landed).
    pub(crate) fn apply(&mut self, unit: Unit) {
        apply_unit(&mut self.current, &unit);
        self.note_written(&unit);
        self.pending.push(unit);
    }

    fn note_written(&mut self, unit: &Unit) {
        if let Some(written) = &mut self.written {
            for (key, value) in unit {
                if let Some(value) = value {
                    written.entry(key.clone()).or_default().insert(value.clone());
                }
            }
        }
    }

    /// Records a write unit whose call returned `Err`: pending (a crash may or may not keep it)
    /// but not applied to what reads must return.
    pub(crate) fn apply_failed(&mut self, unit: Unit) {
        self.failed.insert(self.pending.len());
        self.note_written(&unit);
        self.pending.push(unit);
    }

    /// Everything applied so far is durable; failed units are resolved as never written (a
    /// successful durability point after them must not have made them durable).
    pub(crate) fn mark_durable(&mut self) {
        for (index, unit) in self.pending.drain(..).enumerate() {
            if !self.failed.contains(&index) {
                apply_unit(&mut self.durable, &unit);
            }
        }
        self.failed.clear();
        self.handed_to_os = 0;
    }

    /// A `Buffered` write returned Ok: it and every unit before it are with the operating system.
    pub(crate) fn mark_handed_to_os(&mut self) {
        self.handed_to_os = self.pending.len();
    }

    #[cfg(test)]
    fn pending_units(&self) -> usize {
        self.pending.len()
    }

    /// Keys the model knows about: every durable key and every key a pending unit touches.
    pub(crate) fn known_keys(&self) -> BTreeSet<Key> {
        let mut keys: BTreeSet<Key> = self.durable.keys().cloned().collect();
        keys.extend(self.pending.iter().flat_map(|u| u.keys().cloned()));
        keys
    }

    /// True when `value` was written to `key` at some point (needs `track_written_values`).
    pub(crate) fn was_written(&self, key: &[u8], value: &[u8]) -> bool {
        self.written.as_ref().and_then(|w| w.get(key)).is_some_and(|values| values.contains(value))
    }

    /// Checks the state read back after a crash against the durable state and pending units.
    /// `observed` must hold every key of `known_keys()`.
    pub(crate) fn check_recovery(
        &self,
        observed: &Observed,
        prefix_consistent: bool,
    ) -> Result<Recovery, String> {
        if let Some(missing) = self.known_keys().into_iter().find(|k| !observed.contains_key(k)) {
            return Err(format!(
                "testkit bug: key {} was not read back after the crash",
                escape::key(&missing)
            ));
        }
        let recovered_units = if prefix_consistent {
            self.matching_prefix(observed, 0)?
        } else {
            self.check_per_key(observed)?
        };
        Ok(Recovery { pending_units: self.pending.len(), recovered_units })
    }

    /// `check_recovery` after a restart without power loss (a close that failed, a drop): a
    /// prefix-consistent engine must also keep every unit handed to the operating system, since
    /// the operating system still holds them (otherwise acknowledged `Buffered` writes could
    /// vanish here unnoticed).
    pub(crate) fn check_restart(
        &self,
        observed: &Observed,
        prefix_consistent: bool,
    ) -> Result<Recovery, String> {
        if !prefix_consistent {
            return self.check_recovery(observed, false);
        }
        self.check_recovery(observed, true)?;
        let recovered_units = self.matching_prefix(observed, self.handed_to_os).map_err(|what| {
            format!(
                "after a restart without power loss the first {} pending units (up to the last Buffered write \
                 that returned Ok) must all be there: {what}",
                self.handed_to_os
            )
        })?;
        Ok(Recovery { pending_units: self.pending.len(), recovered_units })
    }

    /// After a successful recovery check: the model becomes what the engine recovered.
    pub(crate) fn reset_to(&mut self, observed: &Observed) {
        self.current = observed.iter().filter_map(|(k, v)| Some((k.clone(), v.clone()?))).collect();
        self.durable = self.current.clone();
        self.pending.clear();
        self.failed.clear();
        self.handed_to_os = 0;
    }

    /// The smallest `p` such that durable + the first `p` pending units equals `observed`. With
    /// failed units pending, each of them may independently be in or out: one that failed
    /// before it was logged (an rmw whose read failed) never lands, while a later one that was
    /// logged before its apply failed may come back, so the accepted units form a prefix and
    /// the failed ones among them are free. At least `min_units` of them (counted over all
    /// pending units).
    fn matching_prefix(&self, observed: &Observed, min_units: usize) -> Result<usize, String> {
        let all: Vec<&Unit> = self.pending.iter().collect();
        let first = self.prefix_of(&all, observed, min_units);
        if first.is_ok() || self.failed.is_empty() {
            return first;
        }
        (min_units..=self.pending.len())
            .find(|&units| self.matches_with_failed_units_free(observed, units))
            .ok_or_else(|| first.unwrap_err())
    }

    /// Whether some choice of the failed units among the first `units` pending ones (each in or
    /// out, the accepted ones all in) turns durable into `observed`. Walks the units backwards,
    /// keeping a failed unit only if every observed key it writes that no later kept unit
    /// writes gets its observed value. Exact: keeping such a unit breaks no key and only covers
    /// more keys, which frees earlier units; dropping one that would leave a key wrong is
    /// forced in every solution whose later choices cover no more keys than these.
    fn matches_with_failed_units_free(&self, observed: &Observed, units: usize) -> bool {
        let mut covered: BTreeSet<&[u8]> = BTreeSet::new();
        for index in (0..units).rev() {
            let open: Vec<(&[u8], Option<&[u8]>)> = self.pending[index]
                .iter()
                .filter(|(key, _)| observed.contains_key(*key) && !covered.contains(key.as_slice()))
                .map(|(key, value)| (key.as_slice(), value.as_deref()))
                .collect();
            let all_right = open.iter().all(|(key, value)| observed[*key].as_deref() == *value);
            match (self.failed.contains(&index), all_right) {
                (_, true) => covered.extend(open.iter().map(|(key, _)| *key)),
                (true, false) => {}
                (false, false) => return false,
            }
        }
        observed
            .iter()
            .filter(|(key, _)| !covered.contains(key.as_slice()))
            .all(|(key, value)| self.durable.get(key).map(Vec::as_slice) == value.as_deref())
    }

    /// Tracks the number of mismatching keys while applying `units` one by one: O(total). The
    /// smallest matching prefix of at least `min_units` units.
    fn prefix_of(&self, units: &[&Unit], observed: &Observed, min_units: usize) -> Result<usize, String> {
        let mut model: BTreeMap<&[u8], Option<&[u8]>> =
            observed.keys().map(|k| (k.as_slice(), self.durable.get(k).map(Vec::as_slice))).collect();
        let observed_value = |k: &[u8]| observed.get(k).and_then(Option::as_deref);
        let mut mismatched = model.iter().filter(|(k, v)| observed_value(k) != **v).count();
        let mut closest = (mismatched, 0);
        if mismatched == 0 && min_units == 0 {
            return Ok(0);
        }
        for (i, unit) in units.iter().enumerate() {
            for (key, value) in *unit {
                let Some(slot) = model.get_mut(key.as_slice()) else { continue };
                let actual = observed_value(key);
                let was_equal = *slot == actual;
                *slot = value.as_deref();
                match (was_equal, *slot == actual) {
                    (true, false) => mismatched += 1,
                    (false, true) => mismatched -= 1,
                    _ => {}
                }
            }
            if mismatched == 0 && i + 1 >= min_units {
                return Ok(i + 1);
            }
            if mismatched < closest.0 {
                closest = (mismatched, i + 1);
            }
        }
        Err(self.describe_prefix_mismatch(observed, closest.1))
    }

    fn describe_prefix_mismatch(&self, observed: &Observed, prefix: usize) -> String {
        let mut model = self.durable.clone();
        for unit in self.pending.iter().take(prefix) {
            apply_unit(&mut model, unit);
        }
        let diffs: Vec<(&Key, Option<&[u8]>)> = observed
            .iter()
            .filter(|(k, v)| model.get(*k).map(Vec::as_slice) != v.as_deref())
            .map(|(k, v)| (k, v.as_deref()))
            .collect();
        let mut out = format!(
            "after the crash the recovered state is not the durable state plus any prefix of the {} pending \
             write units (writes since the last Sync write or flush); closest is the first {prefix} units, \
             which differ in {} keys:",
            self.pending.len(),
            diffs.len()
        );
        for (key, actual) in diffs.iter().take(DIFFS_SHOWN) {
            let expected = model.get(*key).map(Vec::as_slice);
            let _ = write!(
                out,
                "\n  key {}: expected {}, recovered {}{}",
                escape::key(key),
                escape::value(expected),
                escape::value(*actual),
                self.pending_writes_note(key)
            );
        }
        out
    }

    /// Weak mode: each key holds its durable value or one of its pending values, and no batch is
    /// partly applied. Returns the number of units that visibly landed.
    fn check_per_key(&self, observed: &Observed) -> Result<usize, String> {
        for (key, actual) in observed {
            let actual = actual.as_deref();
            let durable = self.durable.get(key).map(Vec::as_slice);
            let pending = self.pending.iter().filter_map(|u| u.get(key)).map(Option::as_deref);
            if durable != actual && !pending.clone().any(|v| v == actual) {
                return Err(format!(
                    "after the crash key {} holds {}, which is neither its durable value {} nor any of its \
                     pending values{}",
                    escape::key(key),
                    escape::value(actual),
                    escape::value(durable),
                    self.pending_writes_note(key)
                ));
            }
        }
        let mut visible_units = 0;
        for (index, unit) in self.pending.iter().enumerate() {
            let shows = |k: &Key, v: &Option<Value>| observed.get(k).is_some_and(|a| a == v);
            // Keys on which the unit's value is decisive: no later unit writes them, and no
            // earlier state could already hold the same value.
            let decisive: Vec<(&Key, &Option<Value>)> = unit
                .iter()
                .filter(|(k, v)| {
                    let later = self.pending.iter().skip(index + 1).any(|u| u.contains_key(*k));
                    let earlier = self.pending.iter().take(index).filter_map(|u| u.get(*k));
                    let durable = self.durable.get(*k).cloned();
                    !later && durable != **v && !earlier.clone().any(|e| e == *v)
                })
                .collect();
            let landed = decisive.iter().filter(|(k, v)| shows(k, v)).count();
            visible_units += usize::from(landed > 0);
            if landed > 0 && landed < decisive.len() {
                let mut out = format!(
                    "after the crash write batch #{index} of {} pending units is partly applied:",
                    self.pending.len()
                );
                for (key, value) in decisive.iter().take(DIFFS_SHOWN) {
                    let actual = observed.get(*key).and_then(Option::as_deref);
                    let _ = write!(
                        out,
                        "\n  key {}: batch wrote {}, recovered {}",
                        escape::key(key),
                        escape::value(value.as_deref()),
                        escape::value(actual)
                    );
                }
                return Err(out);
            }
        }
        Ok(visible_units)
    }

    /// `; pending writes: #2 -> 5B "..", #7 -> absent` for a key, or nothing.
    fn pending_writes_note(&self, key: &[u8]) -> String {
        let writes: Vec<String> = self
            .pending
            .iter()
            .enumerate()
            .filter_map(|(i, u)| Some(format!("#{i} -> {}", escape::value(u.get(key)?.as_deref()))))
            .take(4)
            .collect();
        if writes.is_empty() {
            String::new()
        } else {
            format!("; pending writes to it: {}", writes.join(", "))
        }
    }
}

fn apply_unit(map: &mut BTreeMap<Key, Value>, unit: &Unit) {
    for (key, value) in unit {
        match value {
            Some(v) => map.insert(key.clone(), v.clone()),
            None => map.remove(key),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(writes: &[(&str, Option<&str>)]) -> Unit {
        writes.iter().map(|(k, v)| (k.as_bytes().to_vec(), v.map(|v| v.as_bytes().to_vec()))).collect()
    }

    fn observed(pairs: &[(&str, Option<&str>)]) -> Observed {
        unit(pairs)
    }

    /// durable {a=1}; pending: [b=2], [a=3, c=4] (a batch), [b=absent].
    fn oracle() -> Oracle {
        let mut o = Oracle::new();
        o.apply(unit(&[("a", Some("1"))]));
        o.mark_durable();
        o.apply(unit(&[("b", Some("2"))]));
        o.apply(unit(&[("a", Some("3")), ("c", Some("4"))]));
        o.apply(unit(&[("b", None)]));
        o
    }

    #[test]
    fn every_prefix_is_accepted() {
        let o = oracle();
        let prefixes = [
            observed(&[("a", Some("1")), ("b", None), ("c", None)]),
            observed(&[("a", Some("1")), ("b", Some("2")), ("c", None)]),
            observed(&[("a", Some("3")), ("b", Some("2")), ("c", Some("4"))]),
            observed(&[("a", Some("3")), ("b", None), ("c", Some("4"))]),
        ];
        for (p, state) in prefixes.iter().enumerate() {
            let recovery = o.check_recovery(state, true).expect("a prefix");
            assert_eq!(recovery, Recovery { pending_units: 3, recovered_units: p });
            assert!(o.check_recovery(state, false).is_ok());
        }
    }

    #[test]
    fn a_hole_in_the_history_is_rejected_in_prefix_mode_only() {
        // Unit 2 (the batch) without unit 1 (b=2): not a prefix, but each key is plausible.
        let state = observed(&[("a", Some("3")), ("b", None), ("c", Some("4"))]);
        let mut o = Oracle::new();
        o.apply(unit(&[("b", Some("2"))]));
        o.apply(unit(&[("a", Some("3")), ("c", Some("4"))]));
        let err = o.check_recovery(&state, true).expect_err("not a prefix");
        assert!(err.contains("closest is the first 2 units") && err.contains("key \"b\""), "{err}");
        assert!(o.check_recovery(&state, false).is_ok());
    }

    #[test]
    fn lost_durable_data_is_rejected() {
        let o = oracle();
        let state = observed(&[("a", None), ("b", None), ("c", None)]);
        let err = o.check_recovery(&state, true).expect_err("durable a=1 lost");
        assert!(err.contains("key \"a\""), "{err}");
        let err = o.check_recovery(&state, false).expect_err("durable a=1 lost");
        assert!(err.contains("neither its durable value"), "{err}");
    }

    #[test]
    fn unknown_or_resurrected_keys_are_rejected() {
        let o = oracle();
        let state = observed(&[("a", Some("1")), ("b", None), ("c", None), ("zombie", Some("x"))]);
        assert!(o.check_recovery(&state, true).is_err());
        assert!(o.check_recovery(&state, false).is_err());
    }

    #[test]
    fn a_partly_applied_batch_is_rejected_in_both_modes() {
        let o = oracle();
        let torn = observed(&[("a", Some("3")), ("b", Some("2")), ("c", None)]);
        assert!(o.check_recovery(&torn, true).is_err());
        let err = o.check_recovery(&torn, false).expect_err("torn batch");
        assert!(err.contains("partly applied"), "{err}");
    }

    #[test]
    fn unread_keys_are_a_testkit_bug_not_a_pass() {
        let o = oracle();
        let err = o.check_recovery(&observed(&[("a", Some("1"))]), true).expect_err("b, c unread");
        assert!(err.contains("testkit bug"), "{err}");
    }

    #[test]
    fn reset_adopts_the_recovered_state() {
        let mut o = oracle();
        let state = observed(&[("a", Some("1")), ("b", Some("2")), ("c", None)]);
        o.reset_to(&state);
        assert_eq!(o.pending_units(), 0);
        assert_eq!(o.get(b"b"), Some(&b"2".to_vec()));
        assert_eq!(o.get(b"c"), None);
        assert!(o.check_recovery(&state, true).is_ok());
    }

    #[test]
    fn a_failed_unit_is_hidden_and_pending() {
        let mut o = Oracle::new();
        o.apply(unit(&[("a", Some("1"))]));
        o.mark_durable();
        o.apply_failed(unit(&[("a", None), ("b", Some("2"))]));
        o.apply(unit(&[("c", Some("3"))]));
        // Reads on the same handle: the failed batch is absent.
        assert_eq!(o.get(b"a"), Some(&b"1".to_vec()));
        assert_eq!(o.get(b"b"), None);
        // After a crash it may be back (logged before its sync failed) or not (never logged).
        let with = observed(&[("a", None), ("b", Some("2")), ("c", Some("3"))]);
        let without = observed(&[("a", Some("1")), ("b", None), ("c", Some("3"))]);
        assert!(o.check_recovery(&with, true).is_ok());
        assert!(o.check_recovery(&without, true).is_ok());
        let torn = observed(&[("a", None), ("b", None), ("c", Some("3"))]);
        assert!(o.check_recovery(&torn, true).is_err());
        // A later successful durability point resolves it as never written.
        o.mark_durable();
        assert!(o.check_recovery(&without, true).is_ok());
        assert!(o.check_recovery(&with, true).is_err());
    }

    /// failed_writes f2, seed 14911550128176238641: an rmw failed on a read, never logged; a
    /// later batch failed after it was logged and came back at the reopen.
    #[test]
    fn failed_units_come_back_independently_of_each_other() {
        let mut o = Oracle::new();
        o.apply(unit(&[("a", Some("1"))]));
        o.mark_durable();
        o.apply(unit(&[("c", Some("3"))]));
        o.apply_failed(unit(&[("a", None)]));
        o.apply_failed(unit(&[("b", Some("2")), ("d", Some("4"))]));
        for state in [
            observed(&[("a", Some("1")), ("b", Some("2")), ("c", Some("3")), ("d", Some("4"))]),
            observed(&[("a", None), ("b", None), ("c", Some("3")), ("d", None)]),
            observed(&[("a", None), ("b", Some("2")), ("c", Some("3")), ("d", Some("4"))]),
        ] {
            assert!(o.check_recovery(&state, true).is_ok(), "{state:?}");
        }
        let half_a_failed_batch =
            observed(&[("a", Some("1")), ("b", Some("2")), ("c", Some("3")), ("d", None)]);
        assert!(o.check_recovery(&half_a_failed_batch, true).is_err());
        let accepted_unit_lost =
            observed(&[("a", Some("1")), ("b", Some("2")), ("c", None), ("d", Some("4"))]);
        assert!(o.check_recovery(&accepted_unit_lost, true).is_err());
    }

    #[test]
    fn model_ranges_handle_inverted_bounds_limits_and_direction() {
        let o = oracle();
        let inverted = KeyRange::from_bounds(b"c".as_slice()..b"a".as_slice());
        assert!(o.range(&inverted, Direction::Forward, None).is_empty());
        let all = o.range(&KeyRange::all(), Direction::Reverse, Some(1));
        assert_eq!(all, vec![(b"c".to_vec(), b"4".to_vec())]);
    }
}
