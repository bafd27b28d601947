//! `laser-manifest` (docs/format/laser.md, "laser-manifest"): the store's whole durable shape —
//! the last WAL record its runs hold, the next run id, the schema, the layout, and every run by
//! level and column group. Replaced atomically (`SmallFileFormat::store`) after the runs it
//! names are synced; a run file it does not name is a leftover, removed at open.

use strata_core::{Error, Result, Schema};
use strata_io::Storage;
use strata_kit::small_file::{CrcLayout, SmallFileFormat, OVERHEAD_BYTES};

use crate::layout::{ColumnId, Layout, MAX_COLUMNS};

pub const MANIFEST_FILE: &str = "laser-manifest";
const VERSION: u32 = 1;

fn format() -> SmallFileFormat {
    SmallFileFormat {
        magic: b"STRLASM1",
        versions: VERSION..=VERSION,
        crc: CrcLayout::AfterVersionOverPayload,
        payload_bytes: None,
    }
}

/// A run file: `laser-{id:016}.run`, `len_bytes` long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunMeta {
    pub id: u64,
    pub len_bytes: u64,
}

pub fn run_file_name(id: u64) -> String {
    format!("laser-{id:016}.run")
}

/// The run id of a run file's name.
pub fn parse_run_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("laser-")?.strip_suffix(".run")?;
    (digits.len() == 16).then(|| digits.parse().ok()).flatten()
}

/// One column group of a level: its columns (ascending) and its run, if it holds any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupMeta {
    pub columns: Vec<ColumnId>,
    pub run: Option<RunMeta>,
}

/// What the manifest records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// The runs hold every WAL record up to this one (replay starts after it).
    pub wal_lsn: u64,
    /// No run file has this id or a larger one.
    pub next_run_id: u64,
    /// `None`: a key-value store.
    pub schema: Option<Schema>,
    pub layout: Layout,
    /// Level 0's runs of whole rows, newest first.
    pub level0: Vec<RunMeta>,
    /// Levels 1, 2, …: their groups.
    pub levels: Vec<Vec<GroupMeta>>,
}

impl Manifest {
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend(self.wal_lsn.to_le_bytes());
        out.extend(self.next_run_id.to_le_bytes());
        let columns = self.schema.as_ref().map_or(&[][..], |s| s.columns());
        out.extend((columns.len() as u32).to_le_bytes());
        for column in columns {
            out.extend((column.name.len() as u16).to_le_bytes());
            out.extend(column.name.as_bytes());
            out.extend((column.width_bytes as u32).to_le_bytes());
        }
        let layout = self.layout.to_text();
        out.extend((layout.len() as u32).to_le_bytes());
        out.extend(layout.as_bytes());
        out.extend((self.level0.len() as u32).to_le_bytes());
        self.level0.iter().for_each(|run| encode_run(run, &mut out));
        out.extend((self.levels.len() as u32).to_le_bytes());
        for groups in &self.levels {
            out.extend((groups.len() as u32).to_le_bytes());
            for group in groups {
                out.extend((group.columns.len() as u32).to_le_bytes());
                group.columns.iter().for_each(|id| out.extend(id.to_le_bytes()));
                match &group.run {
                    Some(run) => {
                        out.push(1);
                        encode_run(run, &mut out);
                    }
                    None => out.push(0),
                }
            }
        }
        out
    }

    /// Durably replaces the manifest.
    pub fn store(&self, storage: &dyn Storage) -> Result<()> {
        format().store(storage, MANIFEST_FILE, VERSION, &self.encode())
    }

    /// The manifest, `None` for a store that has none yet.
    pub fn load(storage: &dyn Storage) -> Result<Option<Manifest>> {
        let Some((_, payload)) = format().load(storage, MANIFEST_FILE)? else { return Ok(None) };
        decode(&payload).map(Some)
    }
}

fn encode_run(run: &RunMeta, out: &mut Vec<u8>) {
    out.extend(run.id.to_le_bytes());
    out.extend(run.len_bytes.to_le_bytes());
}

/// Reads the payload front to back; every failure is corruption at its file offset.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn bad(&self, what: impl Into<String>) -> Error {
        Error::corruption(MANIFEST_FILE, (OVERHEAD_BYTES + self.at) as u64, what)
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|&end| end <= self.bytes.len());
        let end = end.ok_or_else(|| self.bad(format!("ends inside {what}")))?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8, what)?.try_into().unwrap_or_default()))
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4, what)?.try_into().unwrap_or_default()))
    }

    fn u16(&mut self, what: &str) -> Result<u16> {
        Ok(u16::from_le_bytes(self.take(2, what)?.try_into().unwrap_or_default()))
    }

    /// A count of items of at least `min_item_bytes` each, checked against what is left.
    fn count(&mut self, what: &str, min_item_bytes: usize) -> Result<usize> {
        let n = self.u32(what)? as usize;
        if n.saturating_mul(min_item_bytes) > self.bytes.len() - self.at {
            return Err(self.bad(format!("{what}: {n} do not fit the file")));
        }
        Ok(n)
    }

    fn run(&mut self) -> Result<RunMeta> {
        Ok(RunMeta { id: self.u64("a run id")?, len_bytes: self.u64("a run length")? })
    }
}

fn decode(payload: &[u8]) -> Result<Manifest> {
    let mut c = Cursor { bytes: payload, at: 0 };
    let wal_lsn = c.u64("the WAL position")?;
    if wal_lsn >= strata_wal::MAX_LSN {
        return Err(Error::corruption(
            MANIFEST_FILE,
            OVERHEAD_BYTES as u64,
            "WAL position past the lsn space",
        ));
    }
    let next_run_id = c.u64("the next run id")?;
    let schema = decode_schema(&mut c)?;
    let column_count = schema.as_ref().map_or(1, |s| s.columns().len());
    let layout_at = c.at;
    let layout_len = c.count("the layout", 1)?;
    let layout_text = std::str::from_utf8(c.take(layout_len, "the layout")?).map_err(|_| {
        Error::corruption(MANIFEST_FILE, (OVERHEAD_BYTES + layout_at) as u64, "layout not UTF-8")
    })?;
    let layout = Layout::parse(layout_text, column_count)
        .map_err(|e| Error::corruption(MANIFEST_FILE, (OVERHEAD_BYTES + layout_at) as u64, e.to_string()))?;
    let level0 = (0..c.count("level 0's runs", 16)?).map(|_| c.run()).collect::<Result<Vec<_>>>()?;
    let mut levels = Vec::new();
    for _ in 0..c.count("the levels", 4)? {
        let mut groups = Vec::new();
        for _ in 0..c.count("a level's groups", 5)? {
            let columns = (0..c.count("a group's columns", 2)?)
                .map(|_| c.u16("a column id"))
                .collect::<Result<Vec<ColumnId>>>()?;
            if columns.is_empty()
                || columns.windows(2).any(|w| w[0] >= w[1])
                || columns.iter().any(|&id| usize::from(id) >= column_count)
            {
                return Err(c.bad("a group's columns are empty, unsorted or unknown"));
            }
            let run = match c.take(1, "a group's run flag")?[0] {
                0 => None,
                1 => Some(c.run()?),
                _ => return Err(c.bad("a group's run flag is neither 0 nor 1")),
            };
            groups.push(GroupMeta { columns, run });
        }
        levels.push(groups);
    }
    if c.at != payload.len() {
        return Err(c.bad("bytes after the last level"));
    }
    Ok(Manifest { wal_lsn, next_run_id, schema, layout, level0, levels })
}

fn decode_schema(c: &mut Cursor<'_>) -> Result<Option<Schema>> {
    let at = c.at;
    let count = c.count("the schema's columns", 6)?;
    if count == 0 {
        return Ok(None);
    }
    if count > MAX_COLUMNS {
        return Err(c.bad(format!("{count} columns, more than {MAX_COLUMNS}")));
    }
    let mut columns = Vec::with_capacity(count);
    for _ in 0..count {
        let len = usize::from(c.u16("a column name's length")?);
        let name = String::from_utf8(c.take(len, "a column name")?.to_vec())
            .map_err(|_| c.bad("a column name not UTF-8"))?;
        let width = c.u32("a column width")? as usize;
        columns.push((name, width));
    }
    Schema::new(columns)
        .map(Some)
        .map_err(|e| Error::corruption(MANIFEST_FILE, (OVERHEAD_BYTES + at) as u64, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_io::{read_all, MemStorage, OpenOptions};

    fn sample() -> Manifest {
        Manifest {
            wal_lsn: 77,
            next_run_id: 9,
            schema: Some(Schema::new([("a", 4), ("bb", 8)]).unwrap()),
            layout: Layout::parse("row/column", 2).unwrap(),
            level0: vec![RunMeta { id: 8, len_bytes: 4096 }],
            levels: vec![
                vec![GroupMeta { columns: vec![0, 1], run: Some(RunMeta { id: 5, len_bytes: 8192 }) }],
                vec![
                    GroupMeta { columns: vec![0], run: None },
                    GroupMeta { columns: vec![1], run: Some(RunMeta { id: 7, len_bytes: 12288 }) },
                ],
            ],
        }
    }

    fn stored_bytes(manifest: &Manifest) -> Vec<u8> {
        let storage = MemStorage::new();
        manifest.store(&storage).unwrap();
        read_all(storage.open(MANIFEST_FILE, OpenOptions::existing()).unwrap().as_ref()).unwrap()
    }

    /// docs/format/laser.md, "laser-manifest": every field at its documented offset.
    #[test]
    fn manifest_offsets() {
        let bytes = stored_bytes(&sample());
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        let u16_at = |at: usize| u16::from_le_bytes(bytes[at..at + 2].try_into().unwrap());
        assert_eq!(&bytes[0..8], b"STRLASM1");
        assert_eq!(u32_at(8), 1);
        assert_eq!(u32_at(12), crc32c::crc32c(&bytes[16..]));
        assert_eq!((u64_at(16), u64_at(24)), (77, 9), "WAL lsn, next run id");
        assert_eq!(u32_at(32), 2, "columns");
        assert_eq!((u16_at(36), &bytes[38..39], u32_at(39)), (1, &b"a"[..], 4));
        assert_eq!((u16_at(43), &bytes[45..47], u32_at(47)), (2, &b"bb"[..], 8));
        assert_eq!(u32_at(51), 7, "layout text length");
        assert_eq!(&bytes[55..62], b"0-1/0|1");
        assert_eq!((u32_at(62), u64_at(66), u64_at(74)), (1, 8, 4096), "level 0: one run");
        assert_eq!((u32_at(82), u32_at(86)), (2, 1), "two levels; level 1 has one group");
        assert_eq!((u32_at(90), u16_at(94), u16_at(96), bytes[98]), (2, 0, 1, 1));
        assert_eq!((u64_at(99), u64_at(107)), (5, 8192));
        assert_eq!((u32_at(115), u32_at(119), u16_at(123), bytes[125]), (2, 1, 0, 0));
        assert_eq!((u32_at(126), u16_at(130), bytes[132], u64_at(133), u64_at(141)), (1, 1, 1, 7, 12288));
        assert_eq!(bytes.len(), 149);
    }

    #[test]
    fn manifests_round_trip_and_every_damaged_byte_is_refused() {
        for manifest in
            [sample(), Manifest { schema: None, layout: Layout::rows(1), levels: vec![], ..sample() }]
        {
            let storage = MemStorage::new();
            manifest.store(&storage).unwrap();
            assert_eq!(Manifest::load(&storage).unwrap(), Some(manifest.clone()));
            let file = storage.open(MANIFEST_FILE, OpenOptions::existing()).unwrap();
            let good = read_all(file.as_ref()).unwrap();
            for at in 0..good.len() {
                let mut bad = good.clone();
                bad[at] ^= 0x10;
                file.write_at(0, &bad).unwrap();
                assert!(Manifest::load(&storage).is_err(), "byte {at}");
            }
        }
    }

    #[test]
    fn run_file_names_parse_back() {
        assert_eq!(parse_run_file_name(&run_file_name(42)), Some(42));
        assert_eq!(parse_run_file_name("laser-manifest"), None);
        assert_eq!(parse_run_file_name("laser-12.run"), None);
    }
}
