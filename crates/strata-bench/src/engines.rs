//! Which engines `--engines` can name, and how each is opened: Strata's engine kinds through the
//! public `strata::Db` API, the in-process baselines, and the peers compiled into this build.

use std::str::FromStr;

use strata::{Db, Durability, EngineKind, Options};

use crate::adapter::{KvAdapter, OpenParams};
use crate::baseline::{BTreeMapBaseline, NullBaseline};
use crate::peers;

/// Where an engine name comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineSource {
    Strata(EngineKind),
    /// An in-process data structure, not a store: no files, nothing survives `close`.
    Baseline,
    Peer,
}

impl EngineSource {
    /// Whether data survives close + reopen (so reopen time means something).
    pub fn is_persistent(self) -> bool {
        !matches!(self, EngineSource::Baseline)
    }
}

/// Knobs by name and value, as `strata::Options::engine_option` takes them.
pub type EngineOptions = Vec<(String, String)>;

/// An `--engines` entry: an engine name, then for a Strata engine any knobs as `:name=value`
/// (`flex:max_interval_records=64:cache_bytes=64MiB`), so two settings of one engine can run
/// side by side in one invocation. The whole entry names the engine in every report.
pub fn split_spec(spec: &str) -> Result<(&str, EngineOptions), String> {
    let mut parts = spec.split(':');
    let name = parts.next().unwrap_or_default();
    let options = parts
        .map(|part| {
            strata::parse_engine_option(part).ok_or_else(|| {
                format!("engine {spec:?}: expected NAME:OPTION=VALUE[:OPTION=VALUE..], got {part:?}")
            })
        })
        .collect::<Result<EngineOptions, String>>()?;
    if let Some(repeated) = strata::repeated_option_name(&options) {
        return Err(format!("engine {spec:?}: option '{repeated}' is given twice"));
    }
    Ok((name, options))
}

/// Resolves `--engines` entries up front. Unknown names and peers missing from this build are errors
/// (one sentence naming the feature that builds them); Strata kinds that are not implemented yet
/// resolve fine and report `unsupported` when opened. Options (see `split_spec`) are checked by
/// the engine when it opens.
pub fn resolve(spec: &str) -> Result<EngineSource, String> {
    let (name, options) = split_spec(spec)?;
    let source = resolve_name(name)?;
    if !options.is_empty() && !matches!(source, EngineSource::Strata(_)) {
        return Err(format!("engine {spec:?}: only Strata engines take options here; '{name}' takes none"));
    }
    Ok(source)
}

fn resolve_name(name: &str) -> Result<EngineSource, String> {
    if let Ok(kind) = EngineKind::from_str(name) {
        return Ok(EngineSource::Strata(kind));
    }
    if BASELINE_NAMES.contains(&name) {
        return Ok(EngineSource::Baseline);
    }
    if peers::peer_names().contains(&name) {
        return Ok(EngineSource::Peer);
    }
    if let Some(feature) = peers::feature_for(name) {
        return Err(format!(
            "engine '{name}' is not compiled into this build; build it with `cargo build --release -p strata-cli --features {feature}` \
             (or all peers: `bash scripts/install-peer-deps.sh`)"
        ));
    }
    Err(format!("unknown engine {name:?}; known engines: {}", all_engine_names().join(", ")))
}

pub const BASELINE_NAMES: [&str; 2] = ["btreemap", "null"];

/// Every engine name, with whether this build can run it.
pub fn all_engine_names() -> Vec<String> {
    let mut names: Vec<String> = EngineKind::ALL.iter().map(|k| k.name().to_string()).collect();
    names.extend(BASELINE_NAMES.iter().map(|s| s.to_string()));
    names.extend(peers::all_peer_names().iter().map(|s| s.to_string()));
    names
}

/// One line per engine for `--list-engines`.
pub fn engine_listing() -> Vec<String> {
    let mut lines = Vec::new();
    for kind in EngineKind::ALL {
        let status = if kind.is_available() { "available" } else { "unsupported (not implemented yet)" };
        lines.push(format!("{:<10} strata engine, {status}", kind.name()));
    }
    lines
        .push(format!("{:<10} baseline: std BTreeMap behind a RwLock, in process (not a store)", "btreemap"));
    lines.push(format!("{:<10} baseline: does nothing; measures the harness itself", "null"));
    for name in peers::all_peer_names() {
        let status = if peers::peer_names().contains(name) {
            "available".to_string()
        } else {
            format!("not built (cargo feature `{}`)", peers::feature_for(name).unwrap_or(name))
        };
        lines.push(format!("{name:<10} peer, {status}"));
    }
    lines
}

/// Why an engine could not be opened.
#[derive(Debug)]
pub enum OpenError {
    /// Known, but this build cannot run it (e.g. a Strata kind not implemented yet).
    Unsupported(String),
    Failed(String),
}

pub fn open(name: &str, source: EngineSource, params: &OpenParams) -> Result<Box<dyn KvAdapter>, OpenError> {
    match source {
        EngineSource::Strata(kind) => {
            let (_, options) = split_spec(name).map_err(OpenError::Failed)?;
            StrataAdapter::open(kind, name, &options, params).map(|a| Box::new(a) as Box<dyn KvAdapter>)
        }
        EngineSource::Baseline => match name {
            "btreemap" => Ok(Box::new(BTreeMapBaseline::default())),
            _ => Ok(Box::new(NullBaseline)),
        },
        EngineSource::Peer => match peers::open_peer(name, params) {
            Some(Ok(adapter)) => Ok(adapter),
            Some(Err(e)) => Err(OpenError::Failed(one_line(&format!("{e:#}")))),
            None => Err(OpenError::Unsupported(format!("peer '{name}' is not compiled into this build"))),
        },
    }
}

/// Collapses a multi-line message to one line.
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A Strata engine through the public `Db` API, exactly as an application would use it.
pub struct StrataAdapter {
    db: Db,
    name: String,
    durability: Durability,
    config: Vec<(String, String)>,
}

impl StrataAdapter {
    /// Opens `kind` with the engine `options` (`name=value` knobs) and reports it as `name`.
    pub fn open(
        kind: EngineKind,
        name: &str,
        engine_options: &[(String, String)],
        params: &OpenParams,
    ) -> Result<StrataAdapter, OpenError> {
        let durability = if params.sync_writes { Durability::Sync } else { Durability::Buffered };
        let mut options = Options::new(kind)
            .memory_budget_bytes(params.memory_budget_bytes)
            .direct_io(params.direct_io)
            .default_durability(durability);
        for (n, v) in engine_options {
            options = options.engine_option(n, v);
        }
        let db = Db::open(&params.dir, options).map_err(|e| match e {
            strata::Error::Unsupported(msg) => OpenError::Unsupported(msg),
            other => OpenError::Failed(one_line(&other.to_string())),
        })?;
        let config = vec![
            ("api".into(), "strata::Db (public API)".into()),
            ("engine".into(), kind.name().into()),
            ("memory_budget_bytes".into(), params.memory_budget_bytes.to_string()),
            ("direct_io".into(), params.direct_io.to_string()),
            (
                "durability".into(),
                match durability {
                    Durability::Sync => {
                        "Durability::Sync: on stable storage (fdatasync) before each write returns".into()
                    }
                    _ => "Durability::Buffered: handed to the OS before each write returns (no fsync)".into(),
                },
            ),
            ("rmw".into(), "Db::rmw (atomic read-modify-write)".into()),
            ("scan".into(), "Db::range(start..).take(n)".into()),
            ("bulk load".into(), "Db::bulk_load (--load-mode bulk)".into()),
        ];
        let mut config = config;
        if !engine_options.is_empty() {
            let knobs: Vec<String> = engine_options.iter().map(|(n, v)| format!("{n}={v}")).collect();
            config.insert(2, ("engine_options".into(), knobs.join(", ")));
        }
        Ok(StrataAdapter { db, name: name.to_string(), durability, config })
    }
}

impl KvAdapter for StrataAdapter {
    fn name(&self) -> &str {
        &self.name
    }

    fn config_description(&self) -> Vec<(String, String)> {
        self.config.clone()
    }

    fn get(&self, key: &[u8]) -> anyhow::Result<Option<usize>> {
        Ok(self.db.get(key)?.map(|v| v.len()))
    }

    fn put(&self, key: &[u8], value: &[u8]) -> anyhow::Result<()> {
        Ok(self.db.put_with(key, value, self.durability)?)
    }

    fn delete(&self, key: &[u8]) -> anyhow::Result<()> {
        Ok(self.db.delete_with(key, self.durability)?)
    }

    fn scan(&self, start: &[u8], count: usize) -> anyhow::Result<usize> {
        let mut read = 0;
        for item in self.db.range(start..)?.take(count) {
            item?;
            read += 1;
        }
        Ok(read)
    }

    fn read_modify_write(&self, key: &[u8], value: &[u8]) -> anyhow::Result<()> {
        self.db.rmw_with(key, |_old| Some(value.to_vec()), self.durability)?;
        Ok(())
    }

    fn flush(&self) -> anyhow::Result<()> {
        Ok(self.db.flush()?)
    }

    fn bulk_load(&self, records: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>) -> anyhow::Result<u64> {
        Ok(self.db.bulk_load(records)?)
    }

    fn engine_stats(&self) -> Option<strata::Stats> {
        self.db.stats().ok()
    }

    fn close(self: Box<Self>) -> anyhow::Result<()> {
        Ok(self.db.close()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_or_explain() {
        assert_eq!(resolve("memory").unwrap(), EngineSource::Strata(EngineKind::Memory));
        assert_eq!(resolve("flex").unwrap(), EngineSource::Strata(EngineKind::Flex));
        assert_eq!(resolve("btreemap").unwrap(), EngineSource::Baseline);
        let err = resolve("nosuch").unwrap_err();
        assert!(err.contains("unknown engine") && err.contains("memory"), "{err}");
        if !peers::peer_names().contains(&"rocksdb") {
            let err = resolve("rocksdb").unwrap_err();
            assert!(err.contains("--features rocksdb"), "{err}");
        }
    }

    #[test]
    fn strata_engines_take_options_that_name_them_and_reach_the_engine() {
        let spec = "flex:max_interval_records=4:cache_bytes=1MiB";
        assert_eq!(resolve(spec).unwrap(), EngineSource::Strata(EngineKind::Flex));
        let (name, options) = split_spec(spec).unwrap();
        assert_eq!(name, "flex");
        assert_eq!(options[1], ("cache_bytes".to_string(), "1MiB".to_string()));
        for bad in ["flex:", "flex:max_interval_records", "flex:=4", "flex:max_interval_records="] {
            assert!(resolve(bad).unwrap_err().contains("expected NAME:OPTION=VALUE"), "{bad}");
        }
        assert!(resolve("btreemap:x=1").unwrap_err().contains("takes none"));
        assert!(resolve("flex:cache_bytes=1MiB:cache_bytes=2MiB").unwrap_err().contains("given twice"));

        let tmp = tempfile::tempdir().unwrap();
        let params = |dir: &str| OpenParams {
            dir: tmp.path().join(dir),
            memory_budget_bytes: 16 << 20,
            direct_io: false,
            sync_writes: false,
            threads: 1,
        };
        let source = EngineSource::Strata(EngineKind::Flex);
        let Ok(adapter) = open(spec, source, &params("a")) else { panic!("{spec} did not open") };
        assert_eq!(adapter.name(), spec);
        let stats = adapter.engine_stats().unwrap();
        assert_eq!(stats.counter("memory.cache_capacity_bytes"), Some(1 << 20));
        assert!(adapter.config_description().iter().any(|(k, v)| k == "engine_options" && v.contains("=4")));
        adapter.close().unwrap();
        match open("flex:max_interval_records=1", source, &params("b")) {
            Err(OpenError::Failed(m)) => assert!(m.contains("max_interval_records"), "{m}"),
            _ => panic!("an out-of-range option opened"),
        }
    }

    #[test]
    fn unimplemented_strata_kinds_open_as_unsupported() {
        // Whichever kinds this build does not implement yet (none, once all five exist).
        for kind in EngineKind::ALL.into_iter().filter(|k| !k.is_available()) {
            let tmp = tempfile::tempdir().unwrap();
            let params = OpenParams {
                dir: tmp.path().join("db"),
                memory_budget_bytes: 1 << 20,
                direct_io: false,
                sync_writes: false,
                threads: 1,
            };
            let result = open(kind.name(), EngineSource::Strata(kind), &params);
            assert!(matches!(result, Err(OpenError::Unsupported(_))), "{kind}");
        }
    }
}
