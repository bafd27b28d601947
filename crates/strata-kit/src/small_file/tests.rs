use strata_io::MemStorage;

use super::*;

fn format(crc: CrcLayout, payload_bytes: Option<usize>) -> SmallFileFormat {
    SmallFileFormat { magic: b"TESTFILE", versions: 2..=3, crc, payload_bytes }
}

const LAYOUTS: [CrcLayout; 3] =
    [CrcLayout::Trailing, CrcLayout::AfterVersionOverPayload, CrcLayout::AfterVersionOverRest];

#[test]
fn each_layout_puts_the_fields_where_its_doc_says() {
    let payload = b"payload bytes";
    let end = OVERHEAD_BYTES + payload.len();
    for crc in LAYOUTS {
        let bytes = format(crc, None).encode(3, payload);
        assert_eq!(bytes.len(), end);
        assert_eq!(&bytes[0..8], b"TESTFILE");
        assert_eq!(&bytes[8..12], &3u32.to_le_bytes());
        let (crc_at, payload_at, covered) = match crc {
            CrcLayout::Trailing => (end - 4, 12, crc32c::crc32c(&bytes[..end - 4])),
            CrcLayout::AfterVersionOverPayload => (12, 16, crc32c::crc32c(&bytes[16..])),
            CrcLayout::AfterVersionOverRest => {
                (12, 16, crc32c::crc32c_append(crc32c::crc32c(&bytes[..12]), &bytes[16..]))
            }
        };
        assert_eq!(&bytes[crc_at..crc_at + 4], &covered.to_le_bytes(), "{crc:?}");
        assert_eq!(&bytes[payload_at..payload_at + payload.len()], payload, "{crc:?}");
        let decoded = format(crc, None).decode("f", &bytes).unwrap();
        assert_eq!(
            (decoded.version, decoded.payload, decoded.payload_offset),
            (3, &payload[..], payload_at as u64)
        );
    }
}

#[test]
fn failures_name_the_file_and_the_offset_of_the_bad_field() {
    let at = |e: Error| match e {
        Error::Corruption { file, offset, .. } if file == "the-file" => offset,
        other => panic!("{other:?}"),
    };
    for crc in LAYOUTS {
        let f = format(crc, Some(8));
        let good = f.encode(2, b"12345678");
        assert_eq!(at(f.decode("the-file", &good[..good.len() - 1]).unwrap_err()), 0, "truncated");
        assert_eq!(at(f.decode("the-file", &[good.as_slice(), b"x"].concat()).unwrap_err()), 0, "too long");
        let mut bad = good.clone();
        bad[3] ^= 1;
        assert_eq!(at(f.decode("the-file", &bad).unwrap_err()), 0, "magic");
        let mut bad = good.clone();
        bad[20] ^= 1; // a payload byte in every layout
        let crc_at = if crc == CrcLayout::Trailing { 20 } else { 12 };
        assert_eq!(at(f.decode("the-file", &bad).unwrap_err()), crc_at, "{crc:?}");
        // Variable size: anything shorter than the overhead is truncated.
        let any = format(crc, None);
        for len in 0..OVERHEAD_BYTES {
            assert_eq!(at(any.decode("the-file", &good[..len]).unwrap_err()), 0);
        }
    }
}

#[test]
fn versions_outside_the_range_are_incompatible_not_corrupt() {
    for crc in LAYOUTS {
        for version in [0, 1, 4] {
            let err = format(crc, None).decode("f", &format(crc, None).encode(version, b"p")).unwrap_err();
            assert!(
                matches!(&err, Error::Incompatible(m) if m.contains(&format!("version {version}"))),
                "{err}"
            );
        }
    }
}

#[test]
fn every_bit_flip_and_truncation_is_an_error_not_a_panic() {
    for crc in LAYOUTS {
        // One readable version: in AfterVersionOverPayload the version is outside the checksum,
        // and a flip there must still be refused, as an unreadable version.
        let f = SmallFileFormat { versions: 2..=2, ..format(crc, None) };
        let good = f.encode(2, b"some payload");
        for bit in 0..good.len() * 8 {
            let mut bad = good.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(f.decode("f", &bad).is_err(), "{crc:?} bit {bit}");
        }
        for len in 0..good.len() {
            let _ = f.decode("f", &good[..len]); // variable size: some prefixes are errors, none panics
        }
    }
}

#[test]
fn store_then_load_round_trips_and_a_missing_file_is_none() {
    let storage = MemStorage::new();
    let f = format(CrcLayout::Trailing, None);
    assert_eq!(f.load(&storage, "small").unwrap(), None);
    f.store(&storage, "small", 2, b"one").unwrap();
    f.store(&storage, "small", 3, b"two!").unwrap();
    assert_eq!(f.load(&storage, "small").unwrap(), Some((3, b"two!".to_vec())));
    assert_eq!(storage.list().unwrap(), vec!["small".to_string()], "no temporary file left");
}

#[test]
fn a_payload_written_in_place_encodes_as_the_same_payload_passed_whole() {
    let payload: Vec<u8> = (0..300u32).map(|i| (i * 7) as u8).collect();
    for crc in LAYOUTS {
        let f = format(crc, None);
        let in_place = f.encode_with(3, 10, |out| {
            out.extend_from_slice(&payload[..100]);
            out.extend_from_slice(&payload[100..]);
        });
        assert_eq!(in_place, f.encode(3, &payload), "{crc:?}");
        assert_eq!(f.decode("x", &in_place).unwrap().payload, &payload[..], "{crc:?}");
    }
}
