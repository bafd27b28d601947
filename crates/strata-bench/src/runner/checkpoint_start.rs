//! `--from-checkpoint`: every measured workload starts from the same closed store, as TreeLine's
//! §5 ("Checkpoints") ran each experiment against a copy of one loaded and aged database. The
//! aging workloads run on the loaded store; it is settled (`KvAdapter::settle`: an LSM finishes
//! its pending compactions) and closed (so whatever an engine holds only in memory — dirty
//! cached records, a memtable — is on disk), and its directory copied aside. Each
//! measured workload then runs on a fresh copy, opened anew: no workload inherits the write-back
//! or compaction debt of the one before it, and each starts with a cold cache on both sides.

use std::path::{Path, PathBuf};

use super::phases::{numbered_phases, EngineRun, Progress};
use super::say;
use crate::adapter::{KvAdapter, OpenParams};
use crate::config::BenchConfig;
use crate::engines::{self, EngineSource, OpenError};
use crate::metrics;
use crate::report::PhaseResult;
use crate::workload::Workload;

/// Runs the aging prefix of `config.workloads` on `adapter`, then each other workload on a fresh
/// copy of the store it left. Returns the adapter still open (to be closed by the caller) and
/// whether a phase failed; `Err` when the store could not be closed, copied or reopened (the
/// adapter is then gone).
pub(super) fn run_workloads(
    config: &BenchConfig,
    dir: &Path,
    adapter: Box<dyn KvAdapter>,
    reopen: &Reopen<'_>,
    results: &mut Vec<PhaseResult>,
) -> Result<(Box<dyn KvAdapter>, bool), String> {
    let phases = numbered_phases(config);
    let aging = phases.iter().take_while(|(_, w)| w.aging).count();
    let (aging_phases, measured) = phases.split_at(aging);
    let mut progress = Progress::after_load(config, results);
    let failed = EngineRun::new(config, reopen.name, dir, adapter.as_ref()).run_phases(
        aging_phases,
        &mut progress,
        results,
    );
    let Some((last, before_last)) = measured.split_last().filter(|_| !failed) else {
        return Ok((adapter, failed));
    };
    let settling = std::time::Instant::now();
    adapter.settle().map_err(|e| format!("settling before the checkpoint copy failed: {e:#}"))?;
    say(config, &format!("{}: settled in {:.1} s", reopen.name, settling.elapsed().as_secs_f64()));
    adapter.close().map_err(|e| format!("close before the checkpoint copy failed: {e:#}"))?;
    let checkpoint = CheckpointDir::take(dir)?;
    let copy = CopyRun { config, dir, checkpoint: &checkpoint, reopen, progress: &progress };
    for phase in before_last {
        let (adapter, failed) = copy.run(phase, results)?;
        if failed {
            return Ok((adapter, true));
        }
        close(adapter)?;
    }
    copy.run(last, results)
}

/// How to open the engine again (`--from-checkpoint` reopens it for every measured workload).
pub(super) struct Reopen<'a> {
    pub name: &'a str,
    pub source: EngineSource,
    pub params: &'a OpenParams,
}

/// One measured workload on a fresh copy of the checkpoint.
struct CopyRun<'a> {
    config: &'a BenchConfig,
    dir: &'a Path,
    checkpoint: &'a CheckpointDir,
    reopen: &'a Reopen<'a>,
    /// As the aging phases left it: every copy starts from there.
    progress: &'a Progress,
}

impl CopyRun<'_> {
    /// Restores the copy, opens it and runs `phase`; returns the open adapter and whether the
    /// phase failed.
    fn run(
        &self,
        phase: &(u32, &Workload),
        results: &mut Vec<PhaseResult>,
    ) -> Result<(Box<dyn KvAdapter>, bool), String> {
        let name = self.reopen.name;
        self.checkpoint.restore_into(self.dir)?;
        if self.config.drop_caches {
            // Best effort, as after the load (whose note says whether it can).
            let _ = metrics::drop_page_cache();
        }
        say(self.config, &format!("{name}: workload {} from the checkpoint copy", phase.1.name));
        let adapter = engines::open(name, self.reopen.source, self.reopen.params).map_err(|e| match e {
            OpenError::Unsupported(m) | OpenError::Failed(m) => format!("reopen of the checkpoint copy: {m}"),
        })?;
        let failed = EngineRun::new(self.config, name, self.dir, adapter.as_ref()).run_phases(
            std::slice::from_ref(phase),
            &mut self.progress.clone(),
            results,
        );
        Ok((adapter, failed))
    }
}

fn close(adapter: Box<dyn KvAdapter>) -> Result<(), String> {
    adapter.close().map_err(|e| format!("close after a workload failed: {e:#}"))
}

/// The closed store's copy, beside the run's directory; removed when dropped.
struct CheckpointDir {
    path: PathBuf,
}

impl CheckpointDir {
    fn take(dir: &Path) -> Result<CheckpointDir, String> {
        let path = dir.with_extension("checkpoint");
        let _ = std::fs::remove_dir_all(&path);
        copy_dir(dir, &path).map_err(|e| format!("copying {} to {}: {e}", dir.display(), path.display()))?;
        Ok(CheckpointDir { path })
    }

    /// Replaces `dir` with a fresh copy of the checkpoint.
    fn restore_into(&self, dir: &Path) -> Result<(), String> {
        std::fs::remove_dir_all(dir).map_err(|e| format!("removing {}: {e}", dir.display()))?;
        copy_dir(&self.path, dir)
            .map_err(|e| format!("copying {} to {}: {e}", self.path.display(), dir.display()))
    }
}

impl Drop for CheckpointDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Copies the files and directories under `from` to a new directory `to`.
fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        match entry.file_type()?.is_dir() {
            true => copy_dir(&entry.path(), &target)?,
            false => {
                std::fs::copy(entry.path(), &target)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_copy_restores_the_directory_as_it_was() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("0-engine");
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("data"), b"aged").unwrap();
        std::fs::write(dir.join("sub/wal"), b"log").unwrap();
        let checkpoint = CheckpointDir::take(&dir).unwrap();
        std::fs::write(dir.join("data"), b"changed by a workload").unwrap();
        std::fs::write(dir.join("new-file"), b"x").unwrap();
        checkpoint.restore_into(&dir).unwrap();
        assert_eq!(std::fs::read(dir.join("data")).unwrap(), b"aged");
        assert_eq!(std::fs::read(dir.join("sub/wal")).unwrap(), b"log");
        assert!(!dir.join("new-file").exists());
        let copy = checkpoint.path.clone();
        drop(checkpoint);
        assert!(!copy.exists());
    }
}
