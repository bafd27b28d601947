//! The seed stores of one fuzz build, kept on disk so a crash input replays against the store it
//! was found with.
//!
//! A seed store is built by running an engine, whose background workers make its file layout
//! differ from run to run; an input that damages one byte of one layout means nothing to another.
//! So the first process of a build stores the seed store it built beside the executable, in a
//! directory named by the executable's size and modification time, and every later process of
//! the same build (the other jobs of a long run, the replay of an artifact) uses the stored one.
//! A rebuild names a new directory, so a changed engine never reads a seed its old code wrote.
//!
//! Creation is all or nothing: the store is written to a temporary file and hard-linked to its
//! name, which fails if another process got there first; either way the process then reads the
//! file under the name, so concurrent processes agree. A cache that cannot be written or read
//! leaves the process with the store it built: fuzzing goes on, only replays may differ.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::PathBuf;
use std::time::UNIX_EPOCH;

use crate::SeedStore;

const MAGIC: &[u8; 16] = b"strata-fuzz-sd02";

/// The stored seed store named `name` of this build, storing `build()`'s first if there is none.
pub fn load_or_store(name: &str, build: impl FnOnce() -> SeedStore) -> SeedStore {
    let Some(path) = cache_dir().map(|dir| dir.join(format!("{name}.seed"))) else { return build() };
    if let Some(stored) = fs::read(&path).ok().and_then(|bytes| decode(&bytes)) {
        return stored;
    }
    let built = build();
    let temp = path.with_extension(format!("seed.{}", std::process::id()));
    let linked = fs::write(&temp, encode(&built)).and_then(|()| fs::hard_link(&temp, &path));
    let _ = fs::remove_file(&temp);
    if linked.is_err() && !path.exists() {
        return built;
    }
    fs::read(&path).ok().and_then(|bytes| decode(&bytes)).unwrap_or(built)
}

/// `<executable's directory>/seed-stores/<executable>-<size>-<mtime>`, created if missing; the
/// directories of the executable's earlier builds are removed (their inputs no longer replay).
fn cache_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let meta = fs::metadata(&exe).ok()?;
    let mtime_nanos = meta.modified().ok()?.duration_since(UNIX_EPOCH).ok()?.as_nanos();
    let exe_name = exe.file_name()?.to_string_lossy().into_owned();
    let build = format!("{exe_name}-{}-{mtime_nanos}", meta.len());
    let parent = exe.parent()?.join("seed-stores");
    let dir = parent.join(&build);
    if !dir.exists() {
        for old in fs::read_dir(&parent).into_iter().flatten().flatten() {
            let name = old.file_name().to_string_lossy().into_owned();
            if name.strip_prefix(&exe_name).is_some_and(|rest| rest.starts_with('-')) && name != build {
                let _ = fs::remove_dir_all(old.path());
            }
        }
    }
    fs::create_dir_all(&dir).ok()?;
    Some(dir)
}

/// Magic, then the files (count; each name and bytes), then the history (count; each key and its
/// values), then the final contents (count; each key and value), then 1 for a clean seed, else
/// 0; every count and length a little-endian u64.
fn encode(seed: &SeedStore) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    let put = |bytes: &[u8], out: &mut Vec<u8>| {
        out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        out.extend_from_slice(bytes);
    };
    out.extend_from_slice(&(seed.files.len() as u64).to_le_bytes());
    for (name, bytes) in &seed.files {
        put(name.as_bytes(), &mut out);
        put(bytes, &mut out);
    }
    out.extend_from_slice(&(seed.history.len() as u64).to_le_bytes());
    for (key, values) in &seed.history {
        put(key, &mut out);
        out.extend_from_slice(&(values.len() as u64).to_le_bytes());
        for value in values {
            put(value, &mut out);
        }
    }
    out.extend_from_slice(&(seed.last.len() as u64).to_le_bytes());
    for (key, value) in &seed.last {
        put(key, &mut out);
        put(value, &mut out);
    }
    out.extend_from_slice(&u64::from(seed.clean).to_le_bytes());
    out
}

/// The seed store `encode` wrote, or `None` for anything else.
fn decode(bytes: &[u8]) -> Option<SeedStore> {
    let mut reader = Reader(bytes.strip_prefix(MAGIC.as_slice())?);
    let mut files = Vec::new();
    for _ in 0..reader.u64()? {
        let name = String::from_utf8(reader.bytes()?.to_vec()).ok()?;
        files.push((name, reader.bytes()?.to_vec()));
    }
    let mut history: BTreeMap<Vec<u8>, BTreeSet<Vec<u8>>> = BTreeMap::new();
    for _ in 0..reader.u64()? {
        let key = reader.bytes()?.to_vec();
        let values = (0..reader.u64()?).map(|_| reader.bytes().map(<[u8]>::to_vec)).collect::<Option<_>>()?;
        history.insert(key, values);
    }
    let mut last = BTreeMap::new();
    for _ in 0..reader.u64()? {
        let key = reader.bytes()?.to_vec();
        last.insert(key, reader.bytes()?.to_vec());
    }
    let clean = match reader.u64()? {
        0 => false,
        1 => true,
        _ => return None,
    };
    reader.0.is_empty().then_some(SeedStore { files, history, last, clean })
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn u64(&mut self) -> Option<u64> {
        let (head, tail) = self.0.split_first_chunk::<8>()?;
        self.0 = tail;
        Some(u64::from_le_bytes(*head))
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = usize::try_from(self.u64()?).ok()?;
        let (head, tail) = (self.0.get(..len)?, self.0.get(len..)?);
        self.0 = tail;
        Some(head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_store_decodes_to_what_was_encoded_and_damage_is_refused() {
        let mut history = BTreeMap::new();
        history.insert(b"k".to_vec(), BTreeSet::from([b"v1".to_vec(), Vec::new()]));
        let last = BTreeMap::from([(b"k".to_vec(), b"v1".to_vec())]);
        let files = vec![("a".into(), vec![1, 2, 3]), ("b".into(), Vec::new())];
        let seed = SeedStore { files, history, last, clean: true };
        let bytes = encode(&seed);
        let back = decode(&bytes).expect("decodes");
        assert_eq!(back.files, seed.files);
        assert_eq!(back.history, seed.history);
        assert_eq!(back.last, seed.last);
        assert!(back.clean);
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_none(), "a store cut to {cut} bytes decoded");
        }
        assert!(decode(&[bytes.as_slice(), &[0]].concat()).is_none(), "trailing bytes decoded");
    }
}
