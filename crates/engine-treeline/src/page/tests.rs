use std::collections::BTreeMap;

use proptest::prelude::*;

use super::layout::{self as l, PageSize};
use super::*;
use crate::model::SegmentModel;

const FILE: &str = "treeline.data";

fn head(pages: u8) -> PageKind {
    let model =
        (pages > 1).then_some(SegmentModel { prefix_len: 2, base: 7, slope: 0.5, intercept: 0.25, pages });
    PageKind::SegmentHead { pages, production_id: 42, model }
}

fn page(lower: &[u8], upper: Option<&[u8]>) -> Page {
    Page::new(PageSize::DEFAULT, head(1), lower, upper).unwrap()
}

fn reopen(p: &mut Page) -> Page {
    Page::open(p.seal().to_vec(), FILE, 8192).unwrap()
}

fn keys(p: &Page) -> Vec<Vec<u8>> {
    p.iter().map(|e| e.key()).collect()
}

/// Re-seals raw bytes after a test edits them, so structural checks (not the CRC) are exercised.
fn reseal(bytes: &mut [u8]) {
    let crc = crc32c::crc32c(&bytes[4..]);
    bytes[..4].copy_from_slice(&crc.to_le_bytes());
}

mod offsets {
    use super::*;

    fn u16le(b: &[u8], at: usize) -> u16 {
        u16::from_le_bytes([b[at], b[at + 1]])
    }

    fn u64le(b: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
    }

    #[test]
    fn header_fields_sit_at_documented_offsets() {
        let mut p = Page::new(PageSize::DEFAULT, head(4), b"user:100", Some(b"user:200")).unwrap();
        p.set_overflow(Some(77)).unwrap();
        assert_eq!(p.put(b"user:150", b"value").unwrap(), PutOutcome::Inserted);
        let b = p.seal().to_vec();
        assert_eq!(u32::from_le_bytes(b[0..4].try_into().unwrap()), crc32c::crc32c(&b[4..]));
        assert_eq!(&b[4..6], b"TL");
        assert_eq!(b[6], 1, "version");
        assert_eq!(b[7], 1, "kind head");
        assert_eq!(b[8], 12, "page size log2");
        assert_eq!(b[9], 0, "flags");
        assert_eq!(b[10], 4, "segment pages");
        assert_eq!(b[11], 0, "page index");
        assert_eq!(u16le(&b, 12), 1, "record count");
        assert_eq!(u16le(&b, 14), 5, "prefix len of user:100 / user:200");
        assert_eq!(u16le(&b, 16), 8);
        assert_eq!(u16le(&b, 18), 8);
        // The record is suffix "150" + "value" = 8 bytes at the end of the page.
        assert_eq!(u32::from_le_bytes(b[20..24].try_into().unwrap()), 4096 - 8, "heap start");
        assert_eq!(u32::from_le_bytes(b[24..28].try_into().unwrap()), 0, "fragmented");
        assert_eq!(&b[28..32], &[0; 4]);
        assert_eq!(u64le(&b, 32), 77, "overflow page");
        assert_eq!(u64le(&b, 40), 42, "production id");
        assert_eq!(u64le(&b, 48), 7, "model base");
        assert_eq!(f64::from_bits(u64le(&b, 56)), 0.5, "slope");
        assert_eq!(f64::from_bits(u64le(&b, 64)), 0.25, "intercept");
        assert_eq!(u16le(&b, 72), 2, "model prefix len");
        assert_eq!(&b[74..80], &[0; 6]);
        assert_eq!(&b[80..88], b"user:100");
        assert_eq!(&b[88..96], b"user:200");
        // Slot 0 at 96: offset, suffix len, value len, head.
        assert_eq!(u16le(&b, 96), 4096 - 8);
        assert_eq!(u16le(&b, 98), 3);
        assert_eq!(u16le(&b, 100), 5);
        assert_eq!(&b[102..106], b"150\0");
        assert_eq!(&b[4088..4096], b"150value");
    }

    #[test]
    fn member_overflow_and_unbounded_fields() {
        let mut m = Page::new(
            PageSize::new(8192).unwrap(),
            PageKind::SegmentMember { pages: 8, index: 3 },
            b"a",
            None,
        )
        .unwrap();
        let b = m.seal().to_vec();
        assert_eq!((b[7], b[8], b[9], b[10], b[11]), (2, 13, 1, 8, 3));
        assert_eq!((u16le(&b, 14), u16le(&b, 18)), (0, 0), "no prefix, no upper fence");
        assert!(b[32..80].iter().all(|&x| x == 0));
        let mut o = Page::new_overflow_for(&m).unwrap();
        let b = o.seal().to_vec();
        assert_eq!((b[7], b[10], b[11]), (3, 0, 0));
        assert_eq!(&b[80..81], b"a");
    }

    #[test]
    fn records_are_appended_toward_the_slots_in_insertion_order() {
        let mut p = page(b"", None);
        p.put(b"b", b"1").unwrap();
        p.put(b"a", b"22").unwrap();
        let b = p.seal().to_vec();
        assert_eq!(&b[4094..4096], b"b1", "first insert at the very end");
        assert_eq!(&b[4091..4094], b"a22", "second insert below it");
        // Slots are key-sorted: "a" first.
        assert_eq!(u16le(&b, 80), 4091);
        assert_eq!(u16le(&b, 90), 4094);
    }
}

#[test]
fn put_get_update_delete() {
    let mut p = page(b"k", Some(b"l"));
    assert_eq!(p.put(b"k1", b"one").unwrap(), PutOutcome::Inserted);
    assert_eq!(p.put(b"k", b"").unwrap(), PutOutcome::Inserted, "the lower fence itself, empty value");
    assert_eq!(p.put(b"k1", b"uno").unwrap(), PutOutcome::Updated, "same length: in place");
    assert_eq!(p.fragmented_bytes(), 0);
    assert_eq!(p.put(b"k1", b"eins!").unwrap(), PutOutcome::Updated);
    assert_eq!(p.fragmented_bytes(), 2 + 3, "fences k/l share no prefix: suffix \"k1\" + old value");
    assert_eq!(p.get(b"k1").and_then(Stored::inline), Some(&b"eins!"[..]));
    assert_eq!(p.get(b"k").and_then(Stored::inline), Some(&b""[..]));
    assert_eq!(p.get(b"k2").and_then(Stored::inline), None);
    assert_eq!(p.get(b"z").and_then(Stored::inline), None, "outside the fences");
    assert!(p.put(b"l", b"x").is_err(), "upper fence is exclusive");
    assert!(p.put(b"j", b"x").is_err());
    assert!(p.delete(b"k1"));
    assert!(!p.delete(b"k1"));
    assert_eq!(p.record_count(), 1);
    let q = reopen(&mut p);
    assert_eq!(keys(&q), vec![b"k".to_vec()]);
    assert_eq!(q.prefix(), b"");
}

#[test]
fn empty_key_and_empty_record_round_trip() {
    let mut p = page(b"", Some(b"\x01"));
    assert_eq!(p.put(b"", b"").unwrap(), PutOutcome::Inserted);
    assert_eq!(p.put(b"\0", b"v").unwrap(), PutOutcome::Inserted);
    let q = reopen(&mut p);
    assert_eq!(q.get(b"").and_then(Stored::inline), Some(&b""[..]));
    assert_eq!(q.get(b"\0").and_then(Stored::inline), Some(&b"v"[..]));
    assert_eq!(keys(&q), vec![b"".to_vec(), b"\0".to_vec()]);
}

#[test]
fn rejects_oversized_records_and_bad_fences() {
    let mut p = page(b"", None);
    assert!(p.put(&[1u8; 257], b"").is_err());
    assert!(p.put(&[1u8; 256], &[0u8; 1742 - 256]).is_ok());
    assert!(p.put(&[2u8; 10], &[0u8; 1733]).is_err());
    assert!(Page::new(PageSize::DEFAULT, head(1), b"b", Some(b"a")).is_err());
    assert!(Page::new(PageSize::DEFAULT, head(1), b"b", Some(b"b")).is_err());
    assert!(Page::new(PageSize::DEFAULT, head(1), &[0u8; 257], None).is_err());
    assert!(Page::new(PageSize::DEFAULT, head(3), b"", None).is_err());
    assert!(Page::new(
        PageSize::DEFAULT,
        PageKind::SegmentHead { pages: 2, production_id: 1, model: None },
        b"",
        None
    )
    .is_err());
    assert!(Page::new(PageSize::DEFAULT, PageKind::SegmentMember { pages: 4, index: 4 }, b"", None).is_err());
    let mut o = Page::new(PageSize::DEFAULT, PageKind::Overflow, b"", None).unwrap();
    assert!(o.set_overflow(Some(3)).is_err());
    assert!(o.set_production_id(3).is_err());
    assert!(p.set_overflow(Some(0)).is_err());
}

#[test]
fn two_maximal_records_fit_beside_maximal_fences() {
    for log2 in 12..=16u8 {
        let size = PageSize::from_log2(log2).unwrap();
        let mk = size.max_key_bytes();
        let lower = vec![0u8; mk];
        let upper = vec![0xffu8; mk];
        let mut p = Page::new(size, head(1), &lower, Some(&upper)).unwrap();
        let value_len = size.max_record_bytes() - mk;
        let mut k1 = vec![1u8; mk];
        assert_eq!(p.put(&k1, &vec![7u8; value_len]).unwrap(), PutOutcome::Inserted);
        k1[mk - 1] = 2;
        assert_eq!(p.put(&k1, &vec![8u8; value_len]).unwrap(), PutOutcome::Inserted, "page {log2}");
        assert_eq!(reopen(&mut p).record_count(), 2);
    }
}

#[test]
fn fills_up_then_no_room_leaves_page_unchanged_and_compaction_reclaims() {
    let mut p = page(b"", None);
    let mut i = 0u32;
    while p.put(&i.to_be_bytes(), &[9u8; 60]).unwrap() == PutOutcome::Inserted {
        i += 1;
    }
    let before = p.clone().into_sealed_bytes();
    assert_eq!(p.put(&i.to_be_bytes(), &[9u8; 60]).unwrap(), PutOutcome::NoRoom);
    assert!(matches!(p.put(&0u32.to_be_bytes(), &[9u8; 2000]), Err(strata_core::Error::InvalidArgument(_))));
    assert_eq!(p.clone().into_sealed_bytes(), before, "NoRoom changed nothing");
    // Delete every other record, then a larger value only fits after compaction.
    for k in (0..i).step_by(2) {
        assert!(p.delete(&k.to_be_bytes()));
    }
    let free = p.free_bytes();
    assert_eq!(p.put(&1u32.to_be_bytes(), &[5u8; 600]).unwrap(), PutOutcome::Updated);
    assert_eq!(p.fragmented_bytes(), 0, "the update compacted the page");
    assert_eq!(p.free_bytes(), free - (600 - 60));
    assert_eq!(p.get(&1u32.to_be_bytes()).and_then(Stored::inline), Some(&[5u8; 600][..]));
    let q = reopen(&mut p);
    assert_eq!(q.record_count(), (i / 2) as usize);
}

#[test]
fn iteration_forward_reverse_and_from_keys() {
    let mut p = page(b"b", Some(b"f"));
    for k in [&b"c"[..], b"b", b"e", b"d", b"dd"] {
        p.put(k, k).unwrap();
    }
    let all: Vec<Vec<u8>> = keys(&p);
    assert_eq!(all, vec![b"b".to_vec(), b"c".to_vec(), b"d".to_vec(), b"dd".to_vec(), b"e".to_vec()]);
    let rev: Vec<Vec<u8>> = p.iter().rev().map(|e| e.key()).collect();
    assert_eq!(rev, all.iter().rev().cloned().collect::<Vec<_>>());
    let from: Vec<Vec<u8>> = p.iter_from(b"cz").map(|e| e.key()).collect();
    assert_eq!(from, vec![b"d".to_vec(), b"dd".to_vec(), b"e".to_vec()]);
    let back: Vec<Vec<u8>> = p.iter_through(b"d").rev().map(|e| e.key()).collect();
    assert_eq!(back, vec![b"d".to_vec(), b"c".to_vec(), b"b".to_vec()]);
    assert_eq!(p.iter_from(b"a").count(), 5);
    assert_eq!(p.iter_from(b"f").count(), 0);
    assert_eq!(p.iter_through(b"a").count(), 0);
    assert_eq!(p.iter_through(b"zz").count(), 5);
    assert!(p.iter().all(|e| e.value == Stored::Inline(e.key().as_slice())));
}

#[test]
fn every_single_byte_flip_is_corruption_with_file_and_offset() {
    let mut p = page(b"a", Some(b"q"));
    p.put(b"hello", b"world").unwrap();
    let good = p.seal().to_vec();
    for at in (0..good.len()).step_by(7) {
        let mut bad = good.clone();
        bad[at] ^= 0x20;
        match Page::open(bad, FILE, 4096 * 9) {
            Err(strata_core::Error::Corruption { file, offset, .. }) => {
                assert_eq!(file, FILE);
                assert_eq!(offset, 4096 * 9, "checksum failures name the page offset");
            }
            other => panic!("flip at {at}: {other:?}"),
        }
    }
    assert!(Page::open(vec![0u8; 4096], FILE, 0).unwrap_err().is_corruption(), "never-written page");
    assert!(Page::open(good[..4000].to_vec(), FILE, 0).unwrap_err().is_corruption());
}

type Damage = Box<dyn Fn(&mut Vec<u8>)>;

#[test]
fn structural_damage_is_reported_at_the_field() {
    let mut p = page(b"a", Some(b"q"));
    p.put(b"b", b"1").unwrap();
    p.put(b"c", b"2").unwrap();
    let good = p.seal().to_vec();
    let slot0 = l::HEADER_LEN + 2;
    let cases: Vec<(usize, Damage)> = vec![
        (l::MAGIC, Box::new(|b| b[4] = b'X')),
        (l::VERSION, Box::new(|b| b[6] = 2)),
        (l::KIND, Box::new(|b| b[7] = 9)),
        (l::PAGE_SIZE_LOG2, Box::new(|b| b[8] = 13)),
        (l::FLAGS, Box::new(|b| b[9] = 4)),
        (l::SEGMENT_PAGES, Box::new(|b| b[10] = 3)),
        (l::PREFIX_LEN, Box::new(|b| b[14] = 1)),
        (l::HEAP_START, Box::new(|b| b[20..24].copy_from_slice(&50u32.to_le_bytes()))),
        (l::FRAGMENTED, Box::new(|b| b[24] = 1)),
        (l::RESERVED_A, Box::new(|b| b[30] = 1)),
        (l::MODEL_BASE, Box::new(|b| b[50] = 1)),
        (slot0 + l::SLOT_HEAD, Box::new(move |b| b[slot0 + l::SLOT_HEAD] = b'z')),
        (slot0, Box::new(move |b| b[slot0..slot0 + 2].copy_from_slice(&9000u16.to_le_bytes()))),
        // Swap the two slots: keys no longer increasing.
        (
            slot0 + l::SLOT_LEN,
            Box::new(move |b| {
                let (s0, s1) = (b[slot0..slot0 + 10].to_vec(), b[slot0 + 10..slot0 + 20].to_vec());
                b[slot0..slot0 + 10].copy_from_slice(&s1);
                b[slot0 + 10..slot0 + 20].copy_from_slice(&s0);
            }),
        ),
        // Point slot 1 at slot 0's record: overlap (and wrong key order).
        (
            slot0 + l::SLOT_LEN,
            Box::new(move |b| {
                let off = [b[slot0], b[slot0 + 1]];
                b[slot0 + 10..slot0 + 12].copy_from_slice(&off);
                let h = b[slot0 + 6..slot0 + 10].to_vec();
                b[slot0 + 16..slot0 + 20].copy_from_slice(&h);
            }),
        ),
    ];
    for (field, damage) in cases {
        let mut bad = good.clone();
        damage(&mut bad);
        reseal(&mut bad);
        let err = Page::open(bad, FILE, 1 << 20).unwrap_err();
        let strata_core::Error::Corruption { offset, what, .. } = err else { panic!("{err:?}") };
        assert_eq!(offset, (1 << 20) + field as u64, "{what}");
    }
}

#[test]
fn fence_violation_after_resealing_is_caught() {
    let mut p = page(b"a", Some(b"q"));
    p.put(b"b", b"1").unwrap();
    let mut bad = p.seal().to_vec();
    // Record bytes are at the end: change key "b" to "z" (and its head) — outside [a, q).
    bad[4094] = b'z';
    bad[l::HEADER_LEN + 2 + l::SLOT_HEAD] = b'z';
    reseal(&mut bad);
    assert!(Page::open(bad, FILE, 0).unwrap_err().to_string().contains("fences"));
}

#[derive(Clone, Debug)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Compact,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    let key = proptest::collection::vec(prop_oneof![Just(b'm'), Just(b'n'), any::<u8>()], 0..6)
        .prop_map(|k| [b"m".to_vec(), k].concat());
    let value = proptest::collection::vec(any::<u8>(), 0..300);
    prop_oneof![
        6 => (key.clone(), value).prop_map(|(k, v)| Op::Put(k, v)),
        3 => key.prop_map(Op::Delete),
        1 => Just(Op::Compact),
        1 => Just(Op::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// The page behaves like a sorted map (with a capacity), across compactions and reopens.
    #[test]
    fn page_matches_a_btreemap(ops in proptest::collection::vec(op(), 1..120)) {
        let mut p = page(b"m", Some(b"mo"));
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Put(k, v) => {
                    let in_range = k.as_slice() < &b"mo"[..];
                    match p.put(&k, &v) {
                        Ok(PutOutcome::Inserted) => prop_assert!(model.insert(k, v).is_none()),
                        Ok(PutOutcome::Updated) => prop_assert!(model.insert(k, v).is_some()),
                        Ok(PutOutcome::NoRoom) => {
                            let need = k.len() - 1 + v.len() + if model.contains_key(&k) { 0 } else { l::SLOT_LEN };
                            let old = model.get(&k).map_or(0, |o| k.len() - 1 + o.len());
                            prop_assert!(p.free_bytes() + old < need);
                        }
                        Err(_) => prop_assert!(!in_range),
                    }
                }
                Op::Delete(k) => prop_assert_eq!(p.delete(&k), model.remove(&k).is_some()),
                Op::Compact => {
                    let free = p.free_bytes();
                    p.compact();
                    prop_assert_eq!(p.free_bytes(), free);
                    prop_assert_eq!(p.fragmented_bytes(), 0);
                }
                Op::Reopen => p = reopen(&mut p),
            }
            prop_assert_eq!(p.record_count(), model.len());
        }
        let got: Vec<(Vec<u8>, Vec<u8>)> = reopen(&mut p).iter().map(|e| (e.key(), e.value.inline().unwrap().to_vec())).collect();
        let want: Vec<(Vec<u8>, Vec<u8>)> = model.clone().into_iter().collect();
        prop_assert_eq!(&got, &want);
        for (k, v) in &model {
            prop_assert_eq!(p.get(k).and_then(Stored::inline), Some(v.as_slice()));
        }
        let used: usize = model.iter().map(|(k, v)| l::SLOT_LEN + k.len() - 1 + v.len()).sum();
        prop_assert_eq!(p.free_bytes() + used, 4096 - l::HEADER_LEN - 3);
    }

    /// Arbitrary bytes with a valid checksum never panic the decoder.
    #[test]
    fn garbage_with_a_valid_checksum_never_panics(
        edits in proptest::collection::vec((0usize..4096, any::<u8>()), 1..40),
    ) {
        let mut p = page(b"a", Some(b"q"));
        for k in [&b"b"[..], b"c", b"dd", b"e"] {
            p.put(k, b"value").unwrap();
        }
        let mut bytes = p.seal().to_vec();
        for (at, v) in edits {
            bytes[at] = v;
        }
        reseal(&mut bytes);
        if let Ok(q) = Page::open(bytes, FILE, 0) {
            // Whatever survives validation is a consistent page.
            let ks: Vec<Vec<u8>> = q.iter().map(|e| e.key()).collect();
            prop_assert!(ks.windows(2).all(|w| w[0] < w[1]));
            prop_assert!(ks.iter().all(|k| q.covers(k) && q.get(k).and_then(Stored::inline).is_some()));
        }
    }
}

/// docs/format/treeline.md, slot `value_len`: bit 15 marks a blob reference (24 value bytes).
#[test]
fn a_blob_reference_sets_bit_15_of_value_len_and_round_trips() {
    use crate::blob::{BlobRef, REF_FIRST_PAGE, REF_LEN};
    let kind = PageKind::SegmentHead { pages: 1, production_id: 1, model: None };
    let mut p = Page::new(PageSize::DEFAULT, kind, b"", None).unwrap();
    let r = BlobRef { first_page: 7, value_len: 5000, crc: 0xDEAD, blob_id: 99 };
    p.put_stored(b"big", Stored::Blob(r)).unwrap();
    p.put(b"small", b"v").unwrap();
    let bytes = p.clone().into_sealed_bytes();
    let slot0 = l::HEADER_LEN; // no fences: slot 0 ("big") starts right after the header
    assert_eq!(l::u16_at(&bytes, slot0 + l::SLOT_VALUE_LEN), Some(0x8000 | REF_LEN as u16));
    assert_eq!(l::u16_at(&bytes, slot0 + l::SLOT_LEN + l::SLOT_VALUE_LEN), Some(1));
    let value_at = usize::from(l::u16_at(&bytes, slot0).unwrap()) + 3;
    assert_eq!(&bytes[value_at..value_at + REF_LEN], &r.encode());
    let reopened = Page::open(bytes.clone(), "f", 0).unwrap();
    assert_eq!(reopened.get(b"big"), Some(Stored::Blob(r)));
    assert_eq!(reopened.get(b"small"), Some(Stored::Inline(b"v")));
    // Replacing the reference with an inline value (and back) keeps the page valid.
    let mut q = reopened.clone();
    q.put(b"big", b"now inline").unwrap();
    assert_eq!(q.get(b"big"), Some(Stored::Inline(b"now inline")));
    q.put_stored(b"big", Stored::Blob(r)).unwrap();
    assert_eq!(Page::open(q.into_sealed_bytes(), "f", 0).unwrap().get(b"big"), Some(Stored::Blob(r)));
    // A flagged value of another length, or a reference to page 0, is corruption at its field.
    let reseal = |mut b: Vec<u8>| {
        let crc = crc32c::crc32c(&b[4..]);
        b[..4].copy_from_slice(&crc.to_le_bytes());
        b
    };
    let mut wrong_len = bytes.clone();
    wrong_len[slot0 + l::SLOT_VALUE_LEN..slot0 + l::SLOT_VALUE_LEN + 2]
        .copy_from_slice(&(0x8000u16 | 19).to_le_bytes());
    let err = Page::open(reseal(wrong_len), "f", 4096).unwrap_err();
    assert!(err.is_corruption(), "{err:?}");
    let mut page_zero = bytes;
    page_zero[value_at + REF_FIRST_PAGE..value_at + REF_FIRST_PAGE + 8].copy_from_slice(&0u64.to_le_bytes());
    let err = Page::open(reseal(page_zero), "f", 4096).unwrap_err();
    assert!(
        matches!(&err, strata_core::Error::Corruption { offset, .. } if *offset == 4096 + value_at as u64),
        "{err:?}"
    );
}
