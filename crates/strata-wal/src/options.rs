use strata_core::{Error, RecoveryMode, Result};

use crate::format::{END_MARKER_BYTES, RECORD_HEADER_BYTES, SEGMENT_HEADER_BYTES};
use crate::Lsn;

/// Smallest accepted `segment_bytes`: a header, an end marker and a few small records.
pub const MIN_SEGMENT_BYTES: u64 = 256;

/// How the log is laid out and written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WalOptions {
    /// Target size of one segment file. A record goes into the active segment while it (and the
    /// end marker) fits; a single record larger than this gets a segment of its own.
    pub segment_bytes: u64,
    pub recovery_mode: RecoveryMode,
    /// Segments released by `truncate_before` kept (as `.free` files) for reuse instead of deleted.
    pub recycle_segments: usize,
    /// Reserve `segment_bytes` of disk (fallocate) when a segment is created.
    pub preallocate: bool,
    /// `Durability::None` appends are written to the OS once this many bytes are buffered.
    pub buffer_bytes: usize,
    /// Segment files are named `{file_prefix}{id:016}.log`.
    pub file_prefix: String,
}

impl Default for WalOptions {
    fn default() -> Self {
        WalOptions {
            segment_bytes: 64 << 20,
            recovery_mode: RecoveryMode::default(),
            recycle_segments: 2,
            preallocate: true,
            buffer_bytes: 1 << 20,
            file_prefix: "wal-".to_string(),
        }
    }
}

impl WalOptions {
    pub(crate) fn validate(&self) -> Result<()> {
        if self.segment_bytes < MIN_SEGMENT_BYTES {
            return Err(Error::invalid(format!(
                "WAL segment_bytes {} is below the minimum of {MIN_SEGMENT_BYTES}",
                self.segment_bytes
            )));
        }
        strata_io::check_name(&self.segment_name(0))?;
        if self.file_prefix.is_empty() || self.file_prefix.contains('.') {
            return Err(Error::invalid(format!(
                "WAL file_prefix {:?} must be non-empty and contain no '.'",
                self.file_prefix
            )));
        }
        Ok(())
    }

    /// The file name of segment `id`.
    pub fn segment_name(&self, id: u64) -> String {
        format!("{}{id:016}.log", self.file_prefix)
    }

    /// The file name of a released segment waiting for reuse.
    pub fn free_segment_name(&self, id: u64) -> String {
        format!("{}{id:016}.free", self.file_prefix)
    }

    /// The file name of the WAL state file (`{file_prefix}state`): which segments are live and
    /// how far each was synced (docs/format/wal.md, "WAL state file").
    pub fn state_file_name(&self) -> String {
        format!("{}state", self.file_prefix)
    }

    /// The segment id of a segment file name, or `None` for any other name.
    pub fn parse_segment_name(&self, name: &str) -> Option<u64> {
        parse_id(name.strip_prefix(&self.file_prefix)?.strip_suffix(".log")?)
    }

    /// The original segment id of a `.free` file name, or `None` for any other name.
    pub fn parse_free_segment_name(&self, name: &str) -> Option<u64> {
        parse_id(name.strip_prefix(&self.file_prefix)?.strip_suffix(".free")?)
    }

    /// Bytes available for records in one segment: what must stay free for the end marker.
    pub(crate) fn record_space_end(&self) -> u64 {
        self.segment_bytes - END_MARKER_BYTES as u64
    }
}

fn parse_id(digits: &str) -> Option<u64> {
    if digits.len() != 16 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

const _: () =
    assert!(MIN_SEGMENT_BYTES as usize > SEGMENT_HEADER_BYTES + END_MARKER_BYTES + RECORD_HEADER_BYTES);

/// What `Wal::open` found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Data records handed to the replay callback (those with `lsn >= min_lsn`; markers are
    /// never replayed).
    pub records_replayed: u64,
    /// Lsn of the last valid record in the log, data or marker (0 when it holds none).
    pub last_lsn: Lsn,
    /// The lsn the next append gets.
    pub next_lsn: Lsn,
    /// Bytes of a dropped torn tail: from the bad record to the last non-zero byte of its segment,
    /// plus the non-zero bytes of later segments that were removed. 0 when nothing was dropped.
    pub torn_tail_bytes_dropped: u64,
    /// Segment files read (segments wholly before `min_lsn` are skipped).
    pub segments_read: u64,
}

/// Counters since `open`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WalStats {
    /// Data records appended (durability markers not included).
    pub records_appended: u64,
    pub payload_bytes_appended: u64,
    /// Durability markers appended by `sync` and `close`.
    pub durability_markers_appended: u64,
    /// Bytes handed to the storage: records, end markers and segment headers.
    pub bytes_written: u64,
    /// Write calls that carried records.
    pub record_writes: u64,
    /// fdatasync calls on segment files (including those at rollover and segment creation).
    pub syncs: u64,
    /// `commit(.., Sync)` calls whose record was made durable by a sync (not already durable),
    /// including the commits of the durability markers `sync` and `close` write.
    pub sync_commits: u64,
    /// Syncs that made more than one waiting `commit(.., Sync)` durable at once.
    pub group_commits: u64,
    pub segments_created: u64,
    pub segments_recycled: u64,
    pub segments_removed: u64,
    /// Bytes of segment files and `.free` files on disk.
    pub disk_bytes: u64,
}

impl WalStats {
    /// The counters as `(name, value)` pairs prefixed with `wal.`, for `Stats::engine_counters`.
    pub fn counters(&self) -> Vec<(String, u64)> {
        [
            ("records_appended", self.records_appended),
            ("payload_bytes_appended", self.payload_bytes_appended),
            ("durability_markers_appended", self.durability_markers_appended),
            ("bytes_written", self.bytes_written),
            ("record_writes", self.record_writes),
            ("syncs", self.syncs),
            ("sync_commits", self.sync_commits),
            ("group_commits", self.group_commits),
            ("segments_created", self.segments_created),
            ("segments_recycled", self.segments_recycled),
            ("segments_removed", self.segments_removed),
            ("disk_bytes", self.disk_bytes),
        ]
        .into_iter()
        .map(|(name, value)| (format!("wal.{name}"), value))
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_foreign_names_are_ignored() {
        let opts = WalOptions::default();
        assert_eq!(opts.segment_name(7), "wal-0000000000000007.log");
        assert_eq!(opts.parse_segment_name("wal-0000000000000007.log"), Some(7));
        assert_eq!(opts.parse_free_segment_name(&opts.free_segment_name(12)), Some(12));
        for other in [
            "wal-7.log",
            "wal-000000000000000x.log",
            "xwal-0000000000000007.log",
            "wal-0000000000000007.free",
        ] {
            assert_eq!(opts.parse_segment_name(other), None, "{other}");
        }
        assert_eq!(opts.parse_free_segment_name("wal-0000000000000007.log"), None);
    }

    #[test]
    fn validation_rejects_bad_options() {
        assert!(WalOptions::default().validate().is_ok());
        let tiny = WalOptions { segment_bytes: 100, ..WalOptions::default() };
        assert!(matches!(tiny.validate(), Err(Error::InvalidArgument(_))));
        let slash = WalOptions { file_prefix: "a/b".into(), ..WalOptions::default() };
        assert!(matches!(slash.validate(), Err(Error::InvalidArgument(_))));
        let dot = WalOptions { file_prefix: "a.".into(), ..WalOptions::default() };
        assert!(matches!(dot.validate(), Err(Error::InvalidArgument(_))));
    }
}
