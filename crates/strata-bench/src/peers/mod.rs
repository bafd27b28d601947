//! Peer engines — the stores users pick today — driven through the same [`KvAdapter`] as Strata's
//! engines. Each lives behind a cargo feature of the same name (`peers` enables all) so the default
//! build compiles none of them; `scripts/install-peer-deps.sh` installs what they need and builds
//! them.
//!
//! Every adapter maps [`OpenParams`] onto the engine's own knobs and lists each choice in
//! `config_description`. Shared conventions:
//! - no compression anywhere, so every engine stores the same bytes;
//! - `get` ends with an owned copy of the value, like `strata::Db::get` (engines that lend out
//!   borrowed bytes copy them; engines that return owned buffers do not copy again);
//! - `flush` makes everything written so far durable; `close` flushes and releases the files.

use crate::adapter::{KvAdapter, OpenParams};

#[cfg(feature = "fjall")]
mod fjall;
#[cfg(feature = "lmdb")]
mod lmdb;
#[cfg(feature = "redb")]
mod redb;
#[cfg(feature = "rocksdb")]
mod rocksdb;
#[cfg(feature = "sled")]
mod sled;

/// Every peer this crate knows, with the cargo feature that compiles it in.
const PEER_FEATURES: [(&str, &str); 8] = [
    ("rocksdb", "rocksdb"),
    ("rocksdb-weak", "rocksdb"),
    ("rocksdb-point", "rocksdb"),
    ("rocksdb-blob", "rocksdb"),
    ("lmdb", "lmdb"),
    ("redb", "redb"),
    ("fjall", "fjall"),
    ("sled", "sled"),
];

const ALL_PEER_NAMES: [&str; 8] =
    ["rocksdb", "rocksdb-weak", "rocksdb-point", "rocksdb-blob", "lmdb", "redb", "fjall", "sled"];

const COMPILED_PEER_NAMES: &[&str] = &[
    #[cfg(feature = "rocksdb")]
    "rocksdb",
    #[cfg(feature = "rocksdb")]
    "rocksdb-weak",
    #[cfg(feature = "rocksdb")]
    "rocksdb-point",
    #[cfg(feature = "rocksdb")]
    "rocksdb-blob",
    #[cfg(feature = "lmdb")]
    "lmdb",
    #[cfg(feature = "redb")]
    "redb",
    #[cfg(feature = "fjall")]
    "fjall",
    #[cfg(feature = "sled")]
    "sled",
];

/// Peers compiled into this build (by cargo feature), in a fixed order.
pub fn peer_names() -> &'static [&'static str] {
    COMPILED_PEER_NAMES
}

/// Every peer name, compiled in or not.
pub fn all_peer_names() -> &'static [&'static str] {
    &ALL_PEER_NAMES
}

/// The cargo feature of `strata-bench` that compiles peer `name` in; `None` for unknown names.
pub fn feature_for(name: &str) -> Option<&'static str> {
    PEER_FEATURES.iter().find(|(peer, _)| *peer == name).map(|(_, feature)| *feature)
}

/// Opens peer `name` in `params.dir`. `None` when the name is unknown or its feature is not
/// compiled into this build (see [`feature_for`]).
pub fn open_peer(name: &str, params: &OpenParams) -> Option<anyhow::Result<Box<dyn KvAdapter>>> {
    // `params` is unused when no peer is compiled in.
    let _ = params;
    match name {
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Some(rocksdb::RocksDbAdapter::open(params, rocksdb::Tuning::Tuned).map(boxed)),
        #[cfg(feature = "rocksdb")]
        "rocksdb-weak" => Some(rocksdb::RocksDbAdapter::open(params, rocksdb::Tuning::Weak).map(boxed)),
        #[cfg(feature = "rocksdb")]
        "rocksdb-point" => {
            Some(rocksdb::RocksDbAdapter::open(params, rocksdb::Tuning::WeakPointLookup).map(boxed))
        }
        #[cfg(feature = "rocksdb")]
        "rocksdb-blob" => Some(rocksdb::RocksDbAdapter::open(params, rocksdb::Tuning::TunedBlobs).map(boxed)),
        #[cfg(feature = "lmdb")]
        "lmdb" => Some(lmdb::LmdbAdapter::open(params).map(boxed)),
        #[cfg(feature = "redb")]
        "redb" => Some(redb::RedbAdapter::open(params).map(boxed)),
        #[cfg(feature = "fjall")]
        "fjall" => Some(fjall::FjallAdapter::open(params).map(boxed)),
        #[cfg(feature = "sled")]
        "sled" => Some(sled::SledAdapter::open(params).map(boxed)),
        _ => None,
    }
}

#[cfg(any(feature = "rocksdb", feature = "lmdb", feature = "redb", feature = "fjall", feature = "sled"))]
fn boxed<A: KvAdapter + 'static>(adapter: A) -> Box<dyn KvAdapter> {
    Box::new(adapter)
}

/// One `config_description` entry.
#[cfg(any(feature = "rocksdb", feature = "lmdb", feature = "redb", feature = "fjall", feature = "sled"))]
fn setting(name: &str, value: impl Into<String>) -> (String, String) {
    (name.to_owned(), value.into())
}

/// `bytes` for humans: `64 MiB`, `1.5 GiB`, `512 B`.
#[cfg(any(feature = "rocksdb", feature = "lmdb", feature = "redb", feature = "fjall", feature = "sled"))]
fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut scaled = bytes as f64 / 1024.0;
    let mut unit = UNITS[0];
    for next in &UNITS[1..] {
        if scaled < 1024.0 {
            break;
        }
        scaled /= 1024.0;
        unit = next;
    }
    if scaled.fract() == 0.0 {
        format!("{scaled:.0} {unit}")
    } else {
        format!("{scaled:.1} {unit}")
    }
}

/// Ends a point read the way `strata::Db::get` does, with an owned copy of the value; returns its
/// length.
#[cfg(any(feature = "rocksdb", feature = "lmdb", feature = "redb"))]
fn owned_len(value: &[u8]) -> usize {
    std::hint::black_box(value.to_vec()).len()
}

/// Consumes one scanned record the way `strata::Iter` hands them out: owned key and value.
#[cfg(any(feature = "rocksdb", feature = "lmdb", feature = "redb"))]
fn read_record(key: &[u8], value: &[u8]) {
    std::hint::black_box((key.to_vec(), value.to_vec()));
}

/// `usize` from a byte count, saturating on 32-bit targets.
#[cfg(any(feature = "rocksdb", feature = "redb"))]
fn bytes_usize(bytes: u64) -> usize {
    usize::try_from(bytes).unwrap_or(usize::MAX)
}

/// How the LSM peers (RocksDB, fjall) split the memory budget: a third for memtables (two of
/// `memtable_bytes` each: one active, one being flushed), the rest for the block cache.
#[cfg(any(feature = "rocksdb", feature = "fjall"))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LsmMemorySplit {
    memtable_bytes: u64,
    memtable_count: u32,
    block_cache_bytes: u64,
}

#[cfg(any(feature = "rocksdb", feature = "fjall"))]
impl LsmMemorySplit {
    /// Floors for tiny budgets (tests, smoke runs): smaller memtables only flush tinier files.
    /// `config_description` reports the sizes actually used.
    const MIN_MEMTABLE_BYTES: u64 = 256 << 10;
    const MIN_BLOCK_CACHE_BYTES: u64 = 256 << 10;

    fn of_budget(memory_budget_bytes: u64) -> Self {
        let memtable_count = 2;
        let memtable_bytes =
            (memory_budget_bytes / 3 / u64::from(memtable_count)).max(Self::MIN_MEMTABLE_BYTES);
        let block_cache_bytes = memory_budget_bytes
            .saturating_sub(memtable_bytes * u64::from(memtable_count))
            .max(Self::MIN_BLOCK_CACHE_BYTES);
        LsmMemorySplit { memtable_bytes, memtable_count, block_cache_bytes }
    }

    fn describe(&self) -> String {
        format!(
            "{} block cache + {} x {} memtables (1/3 of the budget to memtables, the rest to the cache)",
            format_bytes(self.block_cache_bytes),
            self.memtable_count,
            format_bytes(self.memtable_bytes)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_peer_has_a_feature_and_compiled_peers_are_known() {
        for name in all_peer_names() {
            // Variants of a peer (`rocksdb-point`) come with the peer's own feature.
            let feature = feature_for(name).unwrap_or_else(|| panic!("{name} has no feature"));
            assert!(name.starts_with(feature), "{name} is built by feature {feature}");
        }
        assert_eq!(feature_for("rocksdb-point"), Some("rocksdb"));
        assert_eq!(feature_for("rocksdb-weak"), Some("rocksdb"));
        assert_eq!(feature_for("memory"), None);
        assert_eq!(feature_for(""), None);
        for name in peer_names() {
            assert!(all_peer_names().contains(name), "{name}");
        }
    }

    #[test]
    fn unknown_or_uncompiled_peers_open_to_none() {
        let dir = tempfile::tempdir().unwrap();
        let params_in = |subdir: &str| OpenParams {
            dir: dir.path().join(subdir),
            memory_budget_bytes: 8 << 20,
            direct_io: false,
            sync_writes: false,
            threads: 1,
        };
        assert!(open_peer("no-such-engine", &params_in("unknown")).is_none());
        assert!(open_peer("RocksDB", &params_in("upper")).is_none(), "names are exact");
        for name in all_peer_names() {
            match open_peer(name, &params_in(name)) {
                None => assert!(!peer_names().contains(name), "{name} is compiled in but did not open"),
                Some(opened) => {
                    assert!(peer_names().contains(name), "{name} opened but is not listed");
                    opened.unwrap().close().unwrap();
                }
            }
        }
    }

    #[cfg(any(feature = "rocksdb", feature = "fjall"))]
    #[test]
    fn lsm_split_stays_within_budget_and_has_floors() {
        let split = LsmMemorySplit::of_budget(96 << 20);
        assert_eq!(split.memtable_bytes, 16 << 20);
        assert_eq!(split.memtable_count, 2);
        assert_eq!(split.block_cache_bytes, 64 << 20);
        let tiny = LsmMemorySplit::of_budget(0);
        assert_eq!(tiny.memtable_bytes, LsmMemorySplit::MIN_MEMTABLE_BYTES);
        assert_eq!(tiny.block_cache_bytes, LsmMemorySplit::MIN_BLOCK_CACHE_BYTES);
        let one_mib = LsmMemorySplit::of_budget(1 << 20);
        let used = one_mib.memtable_bytes * u64::from(one_mib.memtable_count) + one_mib.block_cache_bytes;
        assert!(used <= 1 << 20, "{one_mib:?}");
    }

    #[cfg(any(feature = "rocksdb", feature = "lmdb", feature = "redb", feature = "fjall", feature = "sled"))]
    #[test]
    fn byte_counts_format_for_humans() {
        assert_eq!(format_bytes(512), "512 B");
        assert_eq!(format_bytes(64 << 20), "64 MiB");
        assert_eq!(format_bytes(3 << 29), "1.5 GiB");
        assert_eq!(format_bytes(64 << 30), "64 GiB");
    }
}
