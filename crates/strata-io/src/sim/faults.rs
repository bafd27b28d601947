//! Which counted operation fails: the armed faults and the operation counters they refer to.

use super::{Fault, FaultKind};

/// What a counted operation is, for the three counters faults refer to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum OpClass {
    /// open, read_at, remove, rename.
    Other,
    /// write_at, set_len, allocate.
    Write,
    /// A file sync or sync_dir.
    Sync,
}

/// The outcome of a fault that fired on an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Fired {
    pub kind: FaultKind,
    /// A `FailSync` fired: the data the sync would have made durable never becomes durable.
    pub loses_unsynced: bool,
}

#[derive(Clone, Copy, Debug)]
struct Armed {
    fault: Fault,
    /// Index (in the fault's own counter) of the first operation that fails.
    first_failing: u64,
}

#[derive(Debug, Default)]
pub(super) struct FaultPlan {
    armed: Vec<Armed>,
    ops: u64,
    writes: u64,
    syncs: u64,
    /// Operations an armed fault failed, since the plan was made.
    fired: u64,
}

impl FaultPlan {
    pub fn arm(&mut self, fault: Fault) {
        let first_failing = match fault {
            Fault::FailOp { after_ops, .. } => self.ops.saturating_add(after_ops),
            Fault::FailWrite { after_writes, .. } => self.writes.saturating_add(after_writes),
            Fault::FailSync { after_syncs } => self.syncs.saturating_add(after_syncs),
        };
        self.armed.push(Armed { fault, first_failing });
    }

    pub fn clear(&mut self) {
        self.armed.clear();
    }

    pub fn op_count(&self) -> u64 {
        self.ops
    }

    pub fn fired_count(&self) -> u64 {
        self.fired
    }

    /// Counts one operation and says which fault (if any) it fails with. A non-sticky fault is
    /// disarmed once it fires. When several fire at once, the first armed one picks the kind.
    pub fn on_op(&mut self, class: OpClass) -> Option<Fired> {
        let op = next(&mut self.ops);
        let write = (class == OpClass::Write).then(|| next(&mut self.writes));
        let sync = (class == OpClass::Sync).then(|| next(&mut self.syncs));
        let mut fired: Option<Fired> = None;
        self.armed.retain(|armed| {
            let reached = |index: Option<u64>| index.is_some_and(|i| i >= armed.first_failing);
            let (hit, kind, sticky, loses_unsynced) = match armed.fault {
                // Whatever fault fails a sync (this one or `FailSync`), the unsynced writes are
                // lost: Linux marks their pages clean without writing them, so a retried sync
                // does not make them durable.
                Fault::FailOp { kind, sticky, .. } => {
                    (reached(Some(op)), kind, sticky, class == OpClass::Sync)
                }
                Fault::FailWrite { kind, sticky, .. } => (reached(write), kind, sticky, false),
                Fault::FailSync { .. } => (reached(sync), FaultKind::Eio, false, true),
            };
            if hit {
                let outcome = fired.get_or_insert(Fired { kind, loses_unsynced: false });
                outcome.loses_unsynced |= loses_unsynced;
            }
            !hit || sticky
        });
        self.fired += u64::from(fired.is_some());
        fired
    }
}

fn next(counter: &mut u64) -> u64 {
    let index = *counter;
    *counter += 1;
    index
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(plan: &mut FaultPlan, classes: &[OpClass]) -> Vec<Option<Fired>> {
        classes.iter().map(|&c| plan.on_op(c)).collect()
    }

    const EIO: Option<Fired> = Some(Fired { kind: FaultKind::Eio, loses_unsynced: false });

    #[test]
    fn fail_op_fires_once_unless_sticky() {
        let mut plan = FaultPlan::default();
        plan.on_op(OpClass::Other);
        plan.arm(Fault::FailOp { after_ops: 2, kind: FaultKind::Eio, sticky: false });
        let got = run(&mut plan, &[OpClass::Other, OpClass::Write, OpClass::Sync, OpClass::Other]);
        // It hit a sync: the sync's data is lost, as after any failed fsync.
        let eio_losing = Some(Fired { kind: FaultKind::Eio, loses_unsynced: true });
        assert_eq!(got, vec![None, None, eio_losing, None]);
        plan.arm(Fault::FailOp { after_ops: 1, kind: FaultKind::Eio, sticky: true });
        let got = run(&mut plan, &[OpClass::Other, OpClass::Other, OpClass::Write]);
        assert_eq!(got, vec![None, EIO, EIO]);
        plan.clear();
        assert_eq!(plan.on_op(OpClass::Other), None);
        assert_eq!(plan.op_count(), 9);
    }

    #[test]
    fn fail_write_and_fail_sync_count_their_own_class() {
        let mut plan = FaultPlan::default();
        plan.arm(Fault::FailWrite { after_writes: 1, kind: FaultKind::Enospc, sticky: false });
        plan.arm(Fault::FailSync { after_syncs: 0 });
        let classes = [OpClass::Other, OpClass::Write, OpClass::Other, OpClass::Write, OpClass::Sync];
        let got = run(&mut plan, &classes);
        let enospc = Some(Fired { kind: FaultKind::Enospc, loses_unsynced: false });
        let lost = Some(Fired { kind: FaultKind::Eio, loses_unsynced: true });
        assert_eq!(got, vec![None, None, None, enospc, lost]);
        assert_eq!(run(&mut plan, &[OpClass::Write, OpClass::Sync]), vec![None, None]);
    }
}
