//! WAL batch replay: every engine logs one encoded [`WriteBatch`] per WAL record
//! (docs/format/write-batch.md) and, at open, re-applies the records after its own durable
//! state. This opens the log, decodes each record and hands the batch to the engine; a record
//! whose checksum is valid but whose payload is not a batch is reported as corruption of the
//! segment file that holds it, at the record's offset.

use std::sync::Arc;

use strata_core::batch_codec::decode_batch;
use strata_core::{Error, Result, WriteBatch};
use strata_io::Storage;
use strata_wal::{Lsn, RecordLocation, RecoveryReport, Wal, WalOptions};

/// What [`open_wal`] returns: the open log, its recovery report, and the encoded bytes of the
/// records replayed (engines count them towards their next snapshot or checkpoint).
#[derive(Debug)]
pub struct ReplayedWal {
    pub wal: Wal,
    pub report: RecoveryReport,
    pub payload_bytes: u64,
}

/// Opens the WAL in `storage` (see [`Wal::open_located`]) and calls `apply(lsn, batch)` for every
/// record with `lsn >= min_lsn`, in lsn order. A payload that is not a valid batch ends the
/// open with `Error::Corruption { file: <segment>, offset: <record offset>, .. }`; an error from
/// `apply` ends it with that error. When it fails, `apply` may have seen a prefix of the
/// records: discard what it built.
pub fn open_wal(
    storage: Arc<dyn Storage>,
    opts: WalOptions,
    min_lsn: Lsn,
    apply: &mut dyn FnMut(Lsn, WriteBatch) -> Result<()>,
) -> Result<ReplayedWal> {
    let mut payload_bytes = 0u64;
    let (wal, report) = Wal::open_located(storage, opts, min_lsn, &mut |at, payload| {
        let batch = decode_record(at, payload)?;
        payload_bytes += payload.len() as u64;
        apply(at.lsn, batch)
    })?;
    Ok(ReplayedWal { wal, report, payload_bytes })
}

/// Decodes one replayed record as a batch; a bad one is corruption of its segment at its offset.
pub fn decode_record(at: &RecordLocation<'_>, payload: &[u8]) -> Result<WriteBatch> {
    decode_batch(payload).map_err(|what| {
        Error::corruption(at.file, at.offset, format!("record lsn {} holds a bad batch: {what}", at.lsn))
    })
}

#[cfg(test)]
mod tests {
    use strata_core::batch_codec::encode_batch;
    use strata_io::MemStorage;

    use super::*;

    fn batch(i: u8) -> WriteBatch {
        let mut b = WriteBatch::new();
        b.put(vec![i], vec![i; usize::from(i)]).delete(vec![i, i]);
        b
    }

    #[test]
    fn replays_every_batch_in_order_from_min_lsn() {
        let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
        let opened = open_wal(storage.clone(), WalOptions::default(), 1, &mut |_, _| Ok(())).unwrap();
        for i in 1..=5 {
            opened.wal.append(&encode_batch(&batch(i))).unwrap();
        }
        opened.wal.close().unwrap();
        let mut seen = Vec::new();
        let reopened = open_wal(storage, WalOptions::default(), 3, &mut |lsn, b| {
            seen.push((lsn, b));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, (3..=5).map(|i| (i, batch(i as u8))).collect::<Vec<_>>());
        let expected: usize = (3..=5).map(|i| encode_batch(&batch(i)).len()).sum();
        assert_eq!(reopened.payload_bytes, expected as u64);
        assert_eq!(reopened.report.records_replayed, 3);
    }

    /// A record whose checksum is valid but whose payload is not a batch is reported at the
    /// segment file and offset of that record, not at a made-up file name and offset 0.
    #[test]
    fn a_checksum_valid_bad_batch_is_corruption_at_its_segment_and_offset() {
        let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
        let opts = WalOptions::default();
        let opened = open_wal(storage.clone(), opts.clone(), 1, &mut |_, _| Ok(())).unwrap();
        opened.wal.append(&encode_batch(&batch(1))).unwrap();
        opened.wal.append(&encode_batch(&batch(2))).unwrap();
        let bad_lsn = opened.wal.append(b"\x01\0\0\0\x09 not a batch").unwrap();
        opened.wal.close().unwrap();
        // Where the WAL itself says that record is.
        let mut located = None;
        Wal::open_located(storage.clone(), opts.clone(), 1, &mut |at, _| {
            if at.lsn == bad_lsn {
                located = Some((at.file.to_string(), at.offset));
            }
            Ok(())
        })
        .unwrap();
        let (file, offset) = located.unwrap();
        // docs/format/wal.md: 32-byte segment header, then 24-byte record headers + payload,
        // each record padded to 8 bytes.
        let record = |i| (24 + encode_batch(&batch(i)).len()).next_multiple_of(8) as u64;
        assert_eq!(offset, 32 + record(1) + record(2));
        assert!(opts.parse_segment_name(&file).is_some(), "{file}");

        let mut applied = 0;
        let err = open_wal(storage, opts, 1, &mut |_, _| {
            applied += 1;
            Ok(())
        })
        .unwrap_err();
        assert_eq!(applied, 2);
        match err {
            Error::Corruption { file: f, offset: o, what } => {
                assert_eq!((f, o), (file, offset));
                assert!(what.contains(&format!("lsn {bad_lsn}")), "{what}");
            }
            other => panic!("expected corruption, got {other}"),
        }
    }

    #[test]
    fn an_apply_error_ends_the_open_with_that_error() {
        let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
        let opened = open_wal(storage.clone(), WalOptions::default(), 1, &mut |_, _| Ok(())).unwrap();
        opened.wal.append(&encode_batch(&batch(1))).unwrap();
        opened.wal.close().unwrap();
        let err =
            open_wal(storage, WalOptions::default(), 1, &mut |_, _| Err(Error::invalid("no"))).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    }
}
