//! What the process and the file system say, sampled around each phase: /proc/self/io byte
//! counters, resident memory, bytes on disk, and dropping the page cache.

pub mod machine;

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// `/proc/self/io`: bytes this process read and wrote. `read_bytes`/`write_bytes` are what reached
/// the block layer (page-cache misses; pages dirtied for writeback); `rchar`/`wchar` are every byte
/// passed to read/write system calls, cached or not.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcIo {
    pub rchar: u64,
    pub wchar: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

impl ProcIo {
    /// `None` where /proc/self/io is missing (not Linux, or restricted).
    pub fn sample() -> Option<ProcIo> {
        let text = std::fs::read_to_string("/proc/self/io").ok()?;
        Some(ProcIo {
            rchar: field(&text, "rchar:")?,
            wchar: field(&text, "wchar:")?,
            read_bytes: field(&text, "read_bytes:")?,
            write_bytes: field(&text, "write_bytes:")?,
        })
    }

    pub fn delta_since(&self, earlier: &ProcIo) -> ProcIo {
        ProcIo {
            rchar: self.rchar.saturating_sub(earlier.rchar),
            wchar: self.wchar.saturating_sub(earlier.wchar),
            read_bytes: self.read_bytes.saturating_sub(earlier.read_bytes),
            write_bytes: self.write_bytes.saturating_sub(earlier.write_bytes),
        }
    }
}

/// The number after `name` on its line (`name: 123 kB` style lines included).
fn field(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
}

/// Resident memory of the whole process (harness included), from /proc/self/status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rss {
    pub current_bytes: u64,
    /// VmHWM: the peak since the process started or since the last `reset_peak`.
    pub peak_bytes: u64,
}

impl Rss {
    pub fn sample() -> Option<Rss> {
        let text = std::fs::read_to_string("/proc/self/status").ok()?;
        Some(Rss {
            current_bytes: field(&text, "VmRSS:")? * 1024,
            peak_bytes: field(&text, "VmHWM:")? * 1024,
        })
    }

    /// Resets VmHWM to the current RSS (Linux ≥ 4.0: `echo 5 > /proc/self/clear_refs`), so each
    /// engine's peak is its own. False when the kernel refuses; the peak then includes earlier engines.
    pub fn reset_peak() -> bool {
        std::fs::write("/proc/self/clear_refs", "5").is_ok()
    }
}

/// Bytes the files under a directory occupy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DiskUsage {
    /// Allocated blocks (`st_blocks * 512`): what the device really holds.
    pub allocated_bytes: u64,
    /// Sum of file lengths (sparse and preallocated files make this differ from allocated).
    pub apparent_bytes: u64,
    pub files: u64,
}

impl DiskUsage {
    /// Walks `dir` recursively; unreadable entries count as zero.
    pub fn of(dir: &Path) -> DiskUsage {
        let mut usage = DiskUsage::default();
        let Ok(entries) = std::fs::read_dir(dir) else { return usage };
        for entry in entries.filter_map(Result::ok) {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                let sub = DiskUsage::of(&entry.path());
                usage.allocated_bytes += sub.allocated_bytes;
                usage.apparent_bytes += sub.apparent_bytes;
                usage.files += sub.files;
            } else {
                usage.allocated_bytes += meta.blocks() * 512;
                usage.apparent_bytes += meta.len();
                usage.files += 1;
            }
        }
        usage
    }
}

/// `sync; echo 1 > /proc/sys/vm/drop_caches`. Ok when the page cache was dropped; otherwise the
/// reason (not root, read-only /proc in a container, ...).
pub fn drop_page_cache() -> Result<(), String> {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "1").map_err(|e| {
        let who = if is_root() { "as root" } else { "not running as root" };
        format!("could not write /proc/sys/vm/drop_caches ({who}): {e}")
    })
}

pub fn is_root() -> bool {
    // SAFETY: geteuid(2) takes no arguments and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// `a / b`, or `None` when `b` is zero.
pub fn ratio(a: u64, b: u64) -> Option<f64> {
    (b > 0).then(|| a as f64 / b as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_io_and_rss_are_readable_on_linux() {
        let before = ProcIo::sample().expect("/proc/self/io");
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("f"), vec![7u8; 100_000]).unwrap();
        let after = ProcIo::sample().unwrap();
        assert!(after.delta_since(&before).wchar >= 100_000);
        let rss = Rss::sample().expect("/proc/self/status");
        assert!(rss.current_bytes > 0 && rss.peak_bytes >= rss.current_bytes);
    }

    #[test]
    fn disk_usage_counts_apparent_and_allocated_bytes() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("sub")).unwrap();
        std::fs::write(tmp.path().join("sub/a"), vec![1u8; 10_000]).unwrap();
        let sparse = std::fs::File::create(tmp.path().join("sparse")).unwrap();
        sparse.set_len(1 << 20).unwrap();
        let usage = DiskUsage::of(tmp.path());
        assert_eq!(usage.files, 2);
        assert_eq!(usage.apparent_bytes, 10_000 + (1 << 20));
        assert!(usage.allocated_bytes < usage.apparent_bytes);
    }

    #[test]
    fn field_parsing() {
        assert_eq!(field("VmHWM:\t  1234 kB\nVmRSS: 99 kB", "VmRSS:"), Some(99));
        assert_eq!(field("rchar: 5", "wchar:"), None);
        assert_eq!(ratio(3, 0), None);
    }
}
