//! The shared kit's sorted runs (docs/format/sorted-run.md) under damage. The input's first part
//! is a model (keys, kinds, values) written as a run with small blocks, packed or aligned (a bit
//! of the first byte chooses); the rest edits the run's
//! bytes (xor at offsets), and a flag reseals every checksum the decoder would reach (footer,
//! filter, index, each data block the damaged index names), so damage gets behind the CRCs.
//!
//! Checks: no panic; every error is `Error::Corruption` naming the run; with no edit, or edits
//! that were not resealed and still opened and read cleanly, every entry is the model's exactly;
//! resealed, the run agrees with itself: a forward scan ascends strictly, the reverse scan is its
//! mirror, and a get of every scanned key returns the scanned entry, unless the filter rejects
//! the key (a filter damaged behind a valid checksum cannot be told from a real one: it can hide
//! keys from gets, never make values up).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use strata_core::{Direction, Error, Key, Result};
use strata_io::{MemStorage, OpenOptions, Storage, StorageFile};
use strata_kit::sorted_run::{varint, Entry, EntryKind, RunOptions, RunReader, RunWriter, FOOTER_BYTES};

const NAME: &str = "fuzz-run";

/// Up to 200 entries from the input: key length, key, kind, value length, value.
fn model_from(data: &mut &[u8]) -> BTreeMap<Key, Entry> {
    let mut model = BTreeMap::new();
    let take = |n: usize, data: &mut &[u8]| {
        let (head, rest) = data.split_at(n.min(data.len()));
        *data = rest;
        head.to_vec()
    };
    while model.len() < 200 {
        let Some((&header, rest)) = data.split_first() else { break };
        if header == 0xff {
            *data = rest;
            break;
        }
        *data = rest;
        let key = take(usize::from(header & 0x0f) + 1, data);
        let value_len = take(1, data).first().map_or(0, |&b| usize::from(b));
        let entry = match header >> 6 {
            0 => Entry::delete(),
            1 => Entry::merge(take(value_len, data)),
            _ => Entry::put(take(value_len, data)),
        };
        model.insert(key, entry);
    }
    model
}

/// `block_align_bytes` 1 writes packed blocks, 128 aligned ones (padding between blocks).
fn write(model: &BTreeMap<Key, Entry>, block_align_bytes: usize) -> Vec<u8> {
    let file = MemStorage::new().open(NAME, OpenOptions::create()).expect("mem file");
    let options =
        RunOptions { block_bytes: 128, restart_interval: 3, block_align_bytes, ..RunOptions::default() };
    let mut writer = RunWriter::new(file.clone(), 0, options).expect("writer");
    for (key, entry) in model {
        writer.add(key, entry.kind, &entry.value).expect("model keys ascend");
    }
    writer.finish().expect("finish");
    strata_io::read_all(file.as_ref()).expect("read back")
}

fn put_crc(bytes: &mut [u8], offset: u64, len: usize) {
    let Ok(start) = usize::try_from(offset) else { return };
    let Some(end) = start.checked_add(len) else { return };
    if end.checked_add(4).is_some_and(|e| e <= bytes.len()) {
        let crc = crc32c::crc32c(&bytes[start..end]);
        bytes[end..end + 4].copy_from_slice(&crc.to_le_bytes());
    }
}

/// Recomputes the checksums a reader checks, walking the (damaged) footer and index.
pub fn reseal(bytes: &mut [u8]) {
    let Some(footer_at) = bytes.len().checked_sub(FOOTER_BYTES) else { return };
    let crc = crc32c::crc32c(&bytes[footer_at..footer_at + 56]);
    bytes[footer_at + 56..footer_at + 60].copy_from_slice(&crc.to_le_bytes());
    let field = |at: usize| strata_core::le_bytes::u64_at(bytes, footer_at + at).unwrap_or(u64::MAX);
    let word = |at: usize| strata_core::le_bytes::u32_at(bytes, footer_at + at).unwrap_or(0) as usize;
    let (index_offset, index_len, filter_len, filter_offset) = (field(0), word(8), word(12), field(16));
    put_crc(bytes, filter_offset, filter_len);
    put_crc(bytes, index_offset, index_len);
    let Some(index) =
        usize::try_from(index_offset).ok().and_then(|s| bytes.get(s..s.checked_add(index_len)?))
    else {
        return;
    };
    let Ok(index) = strata_kit::sorted_run::Block::parse(index.to_vec()).and_then(|b| b.decode()) else {
        return;
    };
    for i in 0..index.len() {
        let (_, _, handle) = index.entry(i);
        let Some((offset, p)) = varint::get(handle, 0) else { continue };
        let Some((len, _)) = varint::get_u32(handle, p) else { continue };
        put_crc(bytes, offset, len);
    }
}

fn run_of(bytes: &[u8]) -> Result<Arc<RunReader>> {
    let file: Arc<dyn StorageFile> = MemStorage::new().open(NAME, OpenOptions::create())?;
    file.write_at(0, bytes)?;
    Ok(Arc::new(RunReader::open(file, NAME, 0, bytes.len() as u64)?))
}

/// The forward scan, the reverse scan, and per scanned key (then per model key) whether the
/// filter passes it and what a get returns.
type Reads = (Vec<(Key, Entry)>, Vec<(Key, Entry)>, Vec<(bool, Option<Entry>)>);

fn read_everything(bytes: &[u8], model: &BTreeMap<Key, Entry>) -> Result<Reads> {
    let run = run_of(bytes)?;
    let forward: Vec<_> =
        run.iter(Bound::Unbounded, Bound::Unbounded, Direction::Forward).collect::<Result<_>>()?;
    let reverse: Vec<_> =
        run.iter(Bound::Unbounded, Bound::Unbounded, Direction::Reverse).collect::<Result<_>>()?;
    let keys = forward.iter().map(|(k, _)| k).chain(model.keys());
    let gets = keys.map(|k| Ok((run.may_contain(k), run.get(k)?))).collect::<Result<_>>()?;
    Ok((forward, reverse, gets))
}

pub fn sorted_run(data: &[u8]) {
    let mut rest = data;
    let model = model_from(&mut rest);
    // Bit 4 of the first entry's header (unused by the model) chooses aligned blocks.
    let block_align_bytes = if data.first().is_some_and(|b| b & 0x10 != 0) { 128 } else { 1 };
    let pristine = write(&model, block_align_bytes);
    let Some((&flags, edits)) = rest.split_first() else {
        let (forward, _, _) = read_everything(&pristine, &model).expect("an undamaged run reads");
        assert_eq!(forward, model.into_iter().collect::<Vec<_>>());
        return;
    };
    let mut bytes = pristine.clone();
    for edit in edits.chunks_exact(3) {
        let offset = usize::from(u16::from_le_bytes([edit[0], edit[1]]));
        if let Some(byte) = bytes.get_mut(offset % pristine.len()) {
            *byte ^= edit[2];
        }
    }
    let resealed = flags & 1 == 1;
    if resealed {
        reseal(&mut bytes);
    }
    match read_everything(&bytes, &model) {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, NAME),
        Err(e) => panic!("damage gave an error that is not corruption: {e}"),
        Ok((forward, reverse, gets)) if !resealed || bytes == pristine => {
            assert_eq!(forward, model.iter().map(|(k, e)| (k.clone(), e.clone())).collect::<Vec<_>>());
            assert_eq!(reverse.len(), forward.len());
            let expected = forward.iter().map(|(_, e)| e).chain(model.values());
            assert!(gets.iter().zip(expected).all(|((_, g), e)| g.as_ref() == Some(e)));
        }
        Ok((forward, reverse, gets)) => {
            assert!(forward.windows(2).all(|w| w[0].0 < w[1].0), "a forward scan out of order");
            assert!(
                reverse.iter().rev().eq(forward.iter()),
                "the reverse scan is not the forward one reversed"
            );
            for ((key, entry), (passes_filter, got)) in forward.iter().zip(&gets) {
                let expected = passes_filter.then_some(entry);
                assert_eq!(got.as_ref(), expected, "a get of {key:?} disagrees with the scan");
            }
            assert!(forward.iter().all(|(_, e)| e.kind != EntryKind::Delete || e.value.is_empty()));
        }
    }
}
