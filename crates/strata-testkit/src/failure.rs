use std::any::Any;
use std::collections::VecDeque;
use std::fmt;

/// How many recent operations a failure report shows.
const RECENT_OPS_SHOWN: usize = 20;

/// A check that found the engine misbehaving: what, where, and how to replay it.
#[derive(Clone, Debug)]
pub struct Failure {
    /// The check and target, e.g. `"conformance memory/sim"`.
    pub check: String,
    pub seed: u64,
    /// Index of the operation that exposed the problem, when the check runs a numbered sequence.
    pub op_index: Option<u64>,
    /// What differed: expected vs actual, keys escaped.
    pub description: String,
    /// The last operations before the failure, oldest first.
    pub recent_ops: Vec<String>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[strata-testkit] {} FAILED, seed={}", self.check, self.seed)?;
        if let Some(index) = self.op_index {
            write!(f, " at op #{index}")?;
        }
        writeln!(f, "\n{}", self.description)?;
        if !self.recent_ops.is_empty() {
            writeln!(f, "last {} ops (oldest first):", self.recent_ops.len())?;
            for op in &self.recent_ops {
                writeln!(f, "  {op}")?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for Failure {}

impl Failure {
    /// Panics with the full report and the command that replays the seed.
    pub(crate) fn raise(&self) -> ! {
        panic!("{self}replay: {}", crate::seed::replay_line(self.seed))
    }
}

/// The last few operations of a run, for failure reports.
#[derive(Debug, Default)]
pub(crate) struct History {
    recent: VecDeque<String>,
}

impl History {
    pub(crate) fn push(&mut self, line: String) {
        if self.recent.len() == RECENT_OPS_SHOWN {
            self.recent.pop_front();
        }
        self.recent.push_back(line);
    }

    pub(crate) fn lines(&self) -> Vec<String> {
        self.recent.iter().cloned().collect()
    }
}

/// The message of a caught panic.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string panic payload>".to_string()
    }
}

/// Runs `f`, turning a panic into its message.
pub(crate) fn catch<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .map_err(|payload| panic_message(payload.as_ref()))
}
