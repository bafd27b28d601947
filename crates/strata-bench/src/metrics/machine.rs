//! Facts about the machine and the build that a result is only meaningful with.

use std::path::Path;
use std::process::Command;

#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct MachineInfo {
    pub cpu_model: Option<String>,
    /// Logical CPUs this process may run on.
    pub cores: usize,
    pub memory_bytes: Option<u64>,
    pub kernel: Option<String>,
    pub hostname: Option<String>,
    pub data_dir: DataDirInfo,
}

/// The file system holding the benchmark's data directory.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct DataDirInfo {
    pub path: String,
    pub mount_point: Option<String>,
    pub device: Option<String>,
    pub fs_type: Option<String>,
    /// From /sys/block/<dev>/queue/rotational when the device is found there.
    pub rotational: Option<bool>,
}

impl MachineInfo {
    pub fn collect(data_dir: &Path) -> MachineInfo {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        MachineInfo {
            cpu_model: cpuinfo
                .lines()
                .find_map(|l| l.strip_prefix("model name"))
                .and_then(|rest| rest.split_once(':'))
                .map(|(_, model)| model.trim().to_string()),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_bytes: meminfo
                .lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
                .map(|kib| kib * 1024),
            kernel: read_trimmed("/proc/sys/kernel/osrelease"),
            hostname: read_trimmed("/proc/sys/kernel/hostname"),
            data_dir: DataDirInfo::collect(data_dir),
        }
    }

    /// e.g. `Intel Xeon ..., 2 cores, 23.5 GiB RAM, Linux 6.1.0, data on ext4 /dev/vda`.
    pub fn one_line(&self) -> String {
        let mut parts = vec![
            self.cpu_model.clone().unwrap_or_else(|| "unknown CPU".into()),
            format!("{} cores", self.cores),
        ];
        if let Some(m) = self.memory_bytes {
            parts.push(format!("{:.1} GiB RAM", m as f64 / f64::from(1u32 << 30)));
        }
        if let Some(k) = &self.kernel {
            parts.push(format!("Linux {k}"));
        }
        let d = &self.data_dir;
        parts.push(format!(
            "data on {} {}",
            d.fs_type.as_deref().unwrap_or("unknown fs"),
            d.device.as_deref().unwrap_or("unknown device")
        ));
        parts.join(", ")
    }
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

impl DataDirInfo {
    /// The longest mount point in /proc/self/mounts that contains `dir`.
    pub fn collect(dir: &Path) -> DataDirInfo {
        let path = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        let mut info = DataDirInfo { path: path.display().to_string(), ..DataDirInfo::default() };
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let best = mounts
            .lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                Some((f.next()?, unescape_mount(f.next()?), f.next()?))
            })
            .filter(|(_, mount, _)| path.starts_with(mount))
            .max_by_key(|(_, mount, _)| mount.len());
        if let Some((device, mount, fs_type)) = best {
            info.mount_point = Some(mount);
            info.device = Some(device.to_string());
            info.fs_type = Some(fs_type.to_string());
            let base = device.rsplit('/').next().unwrap_or(device);
            info.rotational = read_trimmed(&format!("/sys/class/block/{base}/queue/rotational"))
                .or_else(|| {
                    // A partition: its disk is the parent directory in /sys/class/block.
                    let link = std::fs::canonicalize(format!("/sys/class/block/{base}")).ok()?;
                    let parent = link.parent()?.file_name()?.to_str()?.to_string();
                    read_trimmed(&format!("/sys/class/block/{parent}/queue/rotational"))
                })
                .map(|r| r == "1");
        }
        info
    }
}

/// /proc/self/mounts escapes spaces and friends as octal (`\040`).
fn unescape_mount(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut chars = field.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            let octal: String = chars.clone().take(3).collect();
            if let Ok(code) = u8::from_str_radix(&octal, 8) {
                out.push(char::from(code));
                for _ in 0..3 {
                    chars.next();
                }
                continue;
            }
        }
        out.push(c);
    }
    out
}

/// The commit of the source tree this binary was built from (`git rev-parse HEAD` there, not in
/// the current directory, which may be another repository) and whether it has local changes.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct GitInfo {
    pub commit: Option<String>,
    pub dirty: Option<bool>,
}

impl GitInfo {
    pub fn collect() -> GitInfo {
        let source_dir = env!("CARGO_MANIFEST_DIR");
        let run = |args: &[&str]| {
            Command::new("git")
                .arg("-C")
                .arg(source_dir)
                .args(args)
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        };
        let commit = run(&["rev-parse", "HEAD"]).filter(|c| !c.is_empty());
        let dirty = commit
            .as_ref()
            .and_then(|_| run(&["status", "--porcelain", "--untracked-files=no"]))
            .map(|s| !s.is_empty());
        GitInfo { commit, dirty }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_info_finds_the_basics() {
        let tmp = tempfile::tempdir().unwrap();
        let m = MachineInfo::collect(tmp.path());
        assert!(m.cores >= 1);
        assert!(m.memory_bytes.unwrap_or(0) > 0);
        assert!(m.data_dir.mount_point.is_some(), "{:?}", m.data_dir);
        assert!(!m.one_line().is_empty());
        assert_eq!(unescape_mount("/mnt/a\\040b"), "/mnt/a b");
    }
}
