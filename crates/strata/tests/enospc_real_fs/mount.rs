//! A small tmpfs mounted for one test, unmounted by a guard (also when the test panics), and the
//! skip rule: without root, or when `mount` fails, the test prints why and returns without running.

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Set to `1` to turn a skip into a failure (a CI that must run the test on a real filesystem).
pub const REQUIRE_ENV: &str = "STRATA_REAL_FS_REQUIRED";

/// A tmpfs of a fixed size on a fresh temporary directory. Dropping it unmounts it (lazily if a
/// file is still open, e.g. while a panic unwinds past an engine whose threads still hold files)
/// and then removes the directory. Declare it before every `Db` on it, so it drops after them.
pub struct TmpfsMount {
    dir: Option<tempfile::TempDir>,
    path: PathBuf,
}

impl TmpfsMount {
    /// Mounts a tmpfs of `size_mib` MiB, or says why it cannot (the reason a skip prints).
    pub fn new(size_mib: u64) -> Result<TmpfsMount, String> {
        // /proc/self belongs to the process's effective uid: no libc call needed.
        let euid = std::fs::metadata("/proc/self")
            .map(|m| m.uid())
            .map_err(|e| format!("cannot read /proc/self: {e}"))?;
        if euid != 0 {
            return Err(format!("mounting a tmpfs needs root (effective uid is {euid})"));
        }
        let dir = tempfile::Builder::new()
            .prefix("strata-enospc-")
            .tempdir()
            .map_err(|e| format!("cannot create a mount point: {e}"))?;
        let path = dir.path().to_path_buf();
        let output = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_mib}m,mode=0700"), "strata-enospc"])
            .arg(&path)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(format!("mount -t tmpfs failed ({}): {}", output.status, stderr.trim()));
        }
        let mount = TmpfsMount { dir: Some(dir), path };
        // A mount that silently landed elsewhere (or a size the kernel rounded oddly) would make
        // the test meaningless: check that this directory is the filesystem of the asked size.
        let total = mount.total_bytes().map_err(|e| format!("statfs after mount: {e}"))?;
        if total != size_mib << 20 {
            return Err(format!("the tmpfs reports {total} bytes, not {size_mib} MiB"));
        }
        Ok(mount)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Size of the filesystem in bytes, from `df` (portable across libc-free test code).
    pub fn total_bytes(&self) -> std::io::Result<u64> {
        self.df_column("size")
    }

    /// Free bytes on the filesystem.
    pub fn free_bytes(&self) -> std::io::Result<u64> {
        self.df_column("avail")
    }

    fn df_column(&self, column: &str) -> std::io::Result<u64> {
        let out = Command::new("df").args(["-B1", &format!("--output={column}")]).arg(&self.path).output()?;
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .nth(1)
            .and_then(|l| l.trim().parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("unexpected df output: {text}")))
    }
}

impl Drop for TmpfsMount {
    fn drop(&mut self) {
        let unmounted = Command::new("umount").arg(&self.path).status().is_ok_and(|s| s.success());
        if !unmounted {
            // Busy (a file still open while a panic unwinds): detach now, the kernel frees the
            // tmpfs when the last file closes.
            let _ = Command::new("umount").arg("-l").arg(&self.path).status();
        }
        // The TempDir removes the (now empty) mount point.
        drop(self.dir.take());
    }
}

/// Mounts a tmpfs for `test`, or prints a SKIPPED line and returns `None` (panics instead when
/// [`REQUIRE_ENV`] is `1`). The line is written to the process's stderr directly, not through
/// `eprintln!`, so the test harness does not capture it: a skip is visible in every `cargo test`.
pub fn mount_or_skip(test: &str, size_mib: u64) -> Option<TmpfsMount> {
    match TmpfsMount::new(size_mib) {
        Ok(mount) => Some(mount),
        Err(reason) => {
            if std::env::var(REQUIRE_ENV).as_deref() == Ok("1") {
                panic!("{test}: cannot mount a tmpfs ({reason}) and {REQUIRE_ENV}=1");
            }
            let line = format!(
                "[enospc_real_fs] SKIPPED {test}: {reason}; this test needs root to mount a \
                 {size_mib} MiB tmpfs (run the tests as root, see docs/testing.md)\n"
            );
            let _ = std::io::stderr().write_all(line.as_bytes());
            None
        }
    }
}
