//! Reopening replays exactly what was appended, in order, across rollovers, recycling and
//! truncation; `min_lsn` skips what the engine already has.

mod common;

use std::sync::Arc;

use common::*;
use strata_core::{Durability, Error};
use strata_io::{MemStorage, Storage};
use strata_wal::{WalOptions, MIN_SEGMENT_BYTES};

const MAX_PAYLOAD: usize = 300;

fn mem() -> Arc<dyn Storage> {
    Arc::new(MemStorage::new())
}

#[test]
fn reopen_replays_every_record_in_order_across_many_rollovers() {
    let storage = mem();
    let opts = small_opts(4096);
    let (wal, report, replayed) = open(&storage, &opts, 1).unwrap();
    assert!(replayed.is_empty());
    assert_eq!((report.last_lsn, report.next_lsn, report.segments_read), (0, 1, 0));
    let durabilities = [Durability::None, Durability::Buffered, Durability::Sync];
    for i in 1..=2000u64 {
        let lsn = wal.append(&payload(i, MAX_PAYLOAD)).unwrap();
        assert_eq!(lsn, i);
        wal.commit(lsn, durabilities[(i % 3) as usize]).unwrap();
    }
    let stats = wal.stats();
    assert!(stats.segments_created > 30, "{stats:?}");
    assert_eq!(stats.records_appended, 2000);
    wal.close().unwrap();
    assert!(matches!(wal.append(b"late"), Err(Error::Closed)));
    assert!(matches!(wal.sync(), Err(Error::Closed)));
    wal.close().unwrap();

    // close() ended the log with a durability marker at lsn 2001: checked, never replayed.
    let (wal, report, replayed) = open(&storage, &opts, 1).unwrap();
    assert_replayed_range(&replayed, 1, 2000, MAX_PAYLOAD);
    assert_eq!((report.records_replayed, report.last_lsn, report.next_lsn), (2000, 2001, 2002));
    assert_eq!(report.torn_tail_bytes_dropped, 0);
    assert_eq!(report.segments_read as usize, segment_names(storage.as_ref(), &opts).len());
    assert_eq!(wal.last_lsn(), 2001);
    assert_eq!(wal.durable_lsn(), 2001);
    let before = segment_names(storage.as_ref(), &opts);
    let last_segment_bytes = read_file(storage.as_ref(), before.last().unwrap());
    assert_eq!(wal.append(b"after reopen").unwrap(), 2002);
    assert_eq!(wal.sync().unwrap(), 2002);
    assert_eq!(wal.last_lsn(), 2003, "sync() appended a durability marker");
    assert_eq!(
        segment_names(storage.as_ref(), &opts),
        before,
        "appends after open continue the last segment"
    );
    let continued = read_file(storage.as_ref(), before.last().unwrap());
    let positions = record_positions(&continued);
    let lsns: Vec<u64> = positions.iter().map(|p| p.1).collect();
    assert_eq!(lsns[lsns.len() - 3..], [2001, 2002, 2003]);
    assert!(positions.len() > record_positions(&last_segment_bytes).len());
    drop(wal);
    let (_wal, _, replayed) = open(&storage, &opts, 1990).unwrap();
    assert_eq!(replayed.len(), 12);
    assert_eq!(replayed.last().unwrap(), &(2002, b"after reopen".to_vec()));
}

#[test]
fn every_segment_fits_its_size_and_every_record_is_aligned() {
    let storage = mem();
    let opts = WalOptions { preallocate: false, ..small_opts(4096) };
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    for i in 1..=500u64 {
        wal.append(&payload(i, MAX_PAYLOAD)).unwrap();
        if i % 7 == 0 {
            wal.commit(i, Durability::Buffered).unwrap();
        }
    }
    wal.close().unwrap();
    let mut next_lsn = 1;
    for name in segment_names(storage.as_ref(), &opts) {
        let bytes = read_file(storage.as_ref(), &name);
        assert!(bytes.len() as u64 <= opts.segment_bytes, "{name} has {} bytes", bytes.len());
        for (offset, lsn, synced) in record_positions(&bytes) {
            assert_eq!(offset % 8, 0);
            assert_eq!(lsn, next_lsn);
            assert!(synced < lsn);
            assert_eq!(is_durability_marker_at(&bytes, offset), lsn == 501, "lsn {lsn}");
            next_lsn += 1;
        }
    }
    assert_eq!(next_lsn, 502, "500 records and the marker close() wrote");
}

#[test]
fn oversized_and_empty_records_round_trip() {
    let storage = mem();
    let opts = small_opts(MIN_SEGMENT_BYTES.max(4096));
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    let big: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    let records = [b"".to_vec(), b"small".to_vec(), big.clone(), b"".to_vec(), big.clone(), b"tail".to_vec()];
    for record in &records {
        let lsn = wal.append(record).unwrap();
        wal.commit(lsn, Durability::Buffered).unwrap();
    }
    wal.close().unwrap();
    let (_wal, _, replayed) = open(&storage, &opts, 1).unwrap();
    let payloads: Vec<Vec<u8>> = replayed.into_iter().map(|(_, p)| p).collect();
    assert_eq!(payloads, records);
}

#[test]
fn durability_none_stays_in_memory_until_the_buffer_fills() {
    let storage = mem();
    let opts = WalOptions { buffer_bytes: 2000, ..small_opts(64 << 10) };
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    let writes_before = storage.io_stats().write_ops;
    for _ in 0..10 {
        let lsn = wal.append(&[7u8; 100]).unwrap();
        wal.commit(lsn, Durability::None).unwrap();
    }
    assert_eq!(storage.io_stats().write_ops, writes_before, "no I/O below buffer_bytes");
    for _ in 0..10 {
        wal.append(&[7u8; 100]).unwrap();
    }
    assert!(storage.io_stats().write_ops > writes_before, "a full buffer is written out");
    assert!(storage.io_stats().write_ops <= writes_before + 5);
    let stats = wal.stats();
    assert_eq!(stats.syncs, 1, "only the new segment's creation synced: {stats:?}");
}

#[test]
fn commit_checks_its_arguments() {
    let storage = mem();
    let (wal, _, _) = open(&storage, &small_opts(4096), 1).unwrap();
    assert!(matches!(wal.commit(1, Durability::Sync), Err(Error::InvalidArgument(_))));
    assert_eq!(wal.sync().unwrap(), 0);
    let lsn = wal.append(b"x").unwrap();
    wal.commit(lsn, Durability::Sync).unwrap();
    wal.commit(lsn, Durability::Sync).unwrap();
    assert_eq!(wal.durable_lsn(), 1);
    let tiny = WalOptions { segment_bytes: 64, ..WalOptions::default() };
    assert!(matches!(open(&storage, &tiny, 1), Err(Error::InvalidArgument(_))));
}

#[test]
fn min_lsn_skips_old_records_and_can_move_the_next_lsn_forward() {
    let storage = mem();
    let opts = small_opts(4096);
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    for i in 1..=600u64 {
        wal.append(&payload(i, MAX_PAYLOAD)).unwrap();
    }
    wal.close().unwrap();

    let (wal, report, replayed) = open(&storage, &opts, 500).unwrap();
    assert_replayed_range(&replayed, 500, 600, MAX_PAYLOAD);
    let all_segments = segment_names(storage.as_ref(), &opts).len() as u64;
    assert!(report.segments_read < all_segments / 2, "segments before min_lsn are not read: {report:?}");
    drop(wal);

    let (wal, report, replayed) = open(&storage, &opts, 1000).unwrap();
    assert!(replayed.is_empty());
    assert_eq!((report.last_lsn, report.next_lsn), (601, 1000), "lsn 601 is close()'s marker");
    assert_eq!(wal.append(b"jump").unwrap(), 1000);
    wal.close().unwrap();
    assert_eq!(
        segment_names(storage.as_ref(), &opts).len(),
        1,
        "the segments, all below min_lsn, were released at open (tests/behind_checkpoint.rs); \
         skipped lsns cannot continue the last segment: a new one starts at min_lsn"
    );
    let (_wal, _, replayed) = open(&storage, &opts, 1000).unwrap();
    assert_eq!(replayed, vec![(1000, b"jump".to_vec())]);
    strata_wal::Wal::verify(storage.as_ref(), &opts).unwrap();
}

#[test]
fn truncate_before_releases_only_fully_covered_segments_and_recycles_them() {
    let storage = mem();
    let opts = WalOptions { recycle_segments: 2, ..small_opts(4096) };
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    let mut truncated_to = 1;
    let mut appended = Vec::new();
    for i in 1..=3000u64 {
        let lsn = wal.append(&payload(i, MAX_PAYLOAD)).unwrap();
        appended.push((lsn, payload(i, MAX_PAYLOAD)));
        if i % 250 == 0 {
            let synced = wal.sync().unwrap();
            truncated_to = synced - 100;
            wal.truncate_before(truncated_to).unwrap();
            let names = segment_names(storage.as_ref(), &opts);
            let first = read_file(storage.as_ref(), &names[0]);
            let first_lsn = u64::from_le_bytes(first[24..32].try_into().unwrap());
            assert!(first_lsn <= truncated_to, "segment holding lsn {truncated_to} was released");
            if names.len() > 1 {
                let second = read_file(storage.as_ref(), &names[1]);
                let second_first_lsn = u64::from_le_bytes(second[24..32].try_into().unwrap());
                assert!(second_first_lsn > truncated_to, "segment {} could have been released", names[0]);
            }
            assert!(free_names(storage.as_ref(), &opts).len() <= 2);
        }
    }
    let stats = wal.stats();
    assert!(stats.segments_recycled > 5, "{stats:?}");
    assert!(stats.segments_removed > 0, "{stats:?}");
    assert_eq!(free_names(storage.as_ref(), &opts).len(), 2);
    let (log_files, free_files) = wal.segment_counts();
    assert_eq!(log_files, segment_names(storage.as_ref(), &opts).len());
    assert_eq!(free_files, 2);
    wal.close().unwrap();

    let (_wal, _, replayed) = open(&storage, &opts, truncated_to).unwrap();
    assert_replayed_from(&replayed, &appended, truncated_to);
    let err = open(&storage, &opts, 1).unwrap_err();
    assert!(matches!(err, Error::Corruption { .. }), "records below a truncation are missing: {err}");
}

#[test]
fn truncate_never_releases_the_last_segment() {
    let storage = mem();
    let opts = small_opts(4096);
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    for i in 1..=100u64 {
        wal.append(&payload(i, MAX_PAYLOAD)).unwrap();
    }
    wal.sync().unwrap();
    wal.truncate_before(u64::MAX).unwrap();
    assert_eq!(segment_names(storage.as_ref(), &opts).len(), 1);
    wal.close().unwrap();
    assert!(matches!(wal.truncate_before(1), Err(Error::Closed)));
    let (wal, report, _) = open(&storage, &opts, 101).unwrap();
    assert_eq!(report.next_lsn, 102, "lsn 101 is sync()'s marker");
    wal.truncate_before(u64::MAX).unwrap();
    assert_eq!(segment_names(storage.as_ref(), &opts).len(), 1, "the newest segment survives reopen");
}

#[test]
fn recycled_segments_left_from_an_earlier_run_are_reused() {
    let storage = mem();
    let opts = WalOptions { recycle_segments: 3, ..small_opts(4096) };
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    for i in 1..=400u64 {
        wal.append(&payload(i, MAX_PAYLOAD)).unwrap();
    }
    let last = wal.sync().unwrap();
    wal.truncate_before(last).unwrap();
    wal.close().unwrap();
    assert_eq!(free_names(storage.as_ref(), &opts).len(), 3);

    let (wal, _, replayed) = open(&storage, &opts, last).unwrap();
    assert_eq!(replayed, vec![(last, payload(last, MAX_PAYLOAD))]);
    let mut appended = replayed;
    for i in 401..=700u64 {
        let lsn = wal.append(&payload(i, MAX_PAYLOAD)).unwrap();
        appended.push((lsn, payload(i, MAX_PAYLOAD)));
    }
    wal.close().unwrap();
    assert_eq!(wal.stats().segments_recycled, 3);
    assert!(free_names(storage.as_ref(), &opts).is_empty());
    let (_wal, _, replayed) = open(&storage, &opts, last).unwrap();
    assert_replayed_from(&replayed, &appended, last);
}

/// `Wal::set_segment_bytes` while open: segments started later roll over at the new size, the
/// `.free` files kept under the old one are cut to it when reused, a size below the minimum is
/// refused, and the log replays whole across the change.
#[test]
fn segments_take_a_size_set_while_open() {
    let storage = mem();
    let opts = WalOptions { recycle_segments: 2, ..small_opts(16 << 10) };
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    let mut appended = Vec::new();
    let mut append = |wal: &strata_wal::Wal, i: u64| {
        let lsn = wal.append(&payload(i, MAX_PAYLOAD)).unwrap();
        appended.push((lsn, payload(i, MAX_PAYLOAD)));
    };
    for i in 1..=400u64 {
        append(&wal, i);
    }
    let synced = wal.sync().unwrap();
    wal.truncate_before(synced).unwrap();
    let big_free = free_names(storage.as_ref(), &opts);
    assert_eq!(big_free.len(), 2);
    assert!(big_free.iter().all(|n| read_file(storage.as_ref(), n).len() > 4096));
    assert!(wal.set_segment_bytes(strata_wal::MIN_SEGMENT_BYTES - 1).is_err());
    wal.set_segment_bytes(4096).unwrap();
    assert_eq!(wal.segment_bytes(), 4096);
    for i in 401..=800u64 {
        append(&wal, i);
    }
    wal.sync().unwrap();
    assert_eq!(wal.stats().segments_recycled, 2, "the kept files were reused");
    let names = segment_names(storage.as_ref(), &opts);
    let larger: Vec<&String> =
        names.iter().filter(|n| read_file(storage.as_ref(), n).len() > 4096 + MAX_PAYLOAD).collect();
    assert!(larger.len() <= 1, "only the segment active at the change may be larger: {larger:?}");
    assert!(names.len() > 10, "4 KiB segments rolled over: {names:?}");
    wal.close().unwrap();
    let (_wal, _, replayed) = open(&storage, &opts, synced).unwrap();
    assert_replayed_from(&replayed, &appended, synced);
}

#[test]
fn a_replay_error_aborts_open() {
    let storage = mem();
    let opts = small_opts(4096);
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    for i in 1..=10u64 {
        wal.append(&payload(i, MAX_PAYLOAD)).unwrap();
    }
    wal.close().unwrap();
    let mut seen = 0;
    let result = strata_wal::Wal::open(storage.clone(), opts, 1, &mut |lsn, _| {
        seen += 1;
        if lsn == 4 {
            return Err(Error::invalid("engine rejects lsn 4"));
        }
        Ok(())
    });
    assert!(matches!(result, Err(Error::InvalidArgument(msg)) if msg.contains("lsn 4")));
    assert_eq!(seen, 4);
}

#[test]
fn durability_markers_are_written_by_sync_and_close_only_when_needed_and_never_replayed() {
    let storage = mem();
    let opts = small_opts(4096);
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    assert_eq!(wal.sync().unwrap(), 0);
    assert_eq!((wal.last_lsn(), wal.stats().durability_markers_appended), (0, 0), "nothing to cover");
    assert!(storage.list().unwrap().is_empty());

    wal.append(b"a").unwrap();
    wal.append(b"b").unwrap();
    assert_eq!(wal.sync().unwrap(), 2);
    assert_eq!((wal.last_lsn(), wal.durable_lsn()), (3, 3), "marker 3 is durable");
    assert_eq!(wal.sync().unwrap(), 3);
    assert_eq!(wal.last_lsn(), 3, "a marker covers everything durable: no second one");

    let c = wal.append(b"c").unwrap();
    wal.commit(c, Durability::Sync).unwrap();
    assert_eq!(wal.last_lsn(), 4, "commit(Sync) writes no marker");
    wal.close().unwrap();
    assert_eq!(wal.last_lsn(), 5, "close() covers what the Sync commit made durable");
    assert_eq!(wal.stats().durability_markers_appended, 2);
    assert_eq!(wal.stats().records_appended, 3);

    let bytes = read_file(storage.as_ref(), "wal-0000000000000001.log");
    let positions = record_positions(&bytes);
    let layout: Vec<(u64, u64, bool)> = positions
        .iter()
        .map(|&(offset, lsn, synced)| (lsn, synced, is_durability_marker_at(&bytes, offset)))
        .collect();
    assert_eq!(layout, [(1, 0, false), (2, 0, false), (3, 2, true), (4, 3, false), (5, 4, true)]);

    let (wal, report, replayed) = open(&storage, &opts, 1).unwrap();
    assert_eq!(replayed, vec![(1, b"a".to_vec()), (2, b"b".to_vec()), (4, b"c".to_vec())]);
    assert_eq!((report.records_replayed, report.last_lsn, report.next_lsn), (3, 5, 6));
    wal.close().unwrap();
    assert_eq!(read_file(storage.as_ref(), "wal-0000000000000001.log"), bytes, "nothing new, no marker");
    let (_wal, _, replayed) = open(&storage, &opts, 3).unwrap();
    assert_eq!(replayed, vec![(4, b"c".to_vec())]);
}

/// `Wal::open_located` tells the replay callback each record's segment file and offset: the
/// lsn field of the record header there is the record's lsn, and its payload follows the
/// 24-byte header (docs/format/wal.md). So a caller can report a payload it cannot decode at
/// the right place. Records span several segments here.
#[test]
fn replay_locations_name_the_segment_file_and_the_record_offset() {
    let storage = mem();
    let opts = small_opts(4096);
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    for i in 1..=40u64 {
        wal.append(&payload(i, MAX_PAYLOAD)).unwrap();
    }
    wal.close().unwrap();
    let mut seen = Vec::new();
    strata_wal::Wal::open_located(storage.clone(), opts.clone(), 1, &mut |at, bytes| {
        seen.push((at.file.to_string(), at.offset, at.lsn, bytes.to_vec()));
        Ok(())
    })
    .unwrap();
    assert_eq!(seen.len(), 40);
    let files: std::collections::BTreeSet<_> = seen.iter().map(|s| s.0.clone()).collect();
    assert!(files.len() > 1, "the records should span several segments: {files:?}");
    for (file, offset, lsn, bytes) in &seen {
        assert!(opts.parse_segment_name(file).is_some(), "{file}");
        let contents = read_file(storage.as_ref(), file);
        let at = *offset as usize;
        assert_eq!(u64::from_le_bytes(contents[at + 8..at + 16].try_into().unwrap()), *lsn);
        assert_eq!(&contents[at + 24..at + 24 + bytes.len()], bytes.as_slice());
        assert_eq!(bytes, &payload(*lsn, MAX_PAYLOAD));
    }
}

/// A `min_lsn` past the lsn space (read by a caller from a damaged but checksum-valid file) is an
/// invalid argument at open, not an overflow at the first append.
#[test]
fn a_min_lsn_past_the_lsn_space_is_refused() {
    let storage = mem();
    let opts = small_opts(4096);
    for min_lsn in [strata_wal::MAX_LSN + 1, u64::MAX] {
        assert!(matches!(open(&storage, &opts, min_lsn), Err(Error::InvalidArgument(_))), "{min_lsn}");
    }
    let (wal, _, _) = open(&storage, &opts, strata_wal::MAX_LSN).unwrap();
    assert_eq!(wal.append(b"last").unwrap(), strata_wal::MAX_LSN);
}
