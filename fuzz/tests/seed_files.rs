//! The seed stores hold every kind of file the damage targets pick from.

use strata::EngineKind;

#[test]
fn seed_stores_hold_their_files() {
    for kind in [EngineKind::Memory, EngineKind::Flex, EngineKind::F2, EngineKind::Treeline] {
        let seed = strata_fuzz::seed_store(kind);
        let names: Vec<String> = seed.files.iter().map(|(n, b)| format!("{n} ({} B)", b.len())).collect();
        println!("{kind}: {}", names.join(", "));
        assert!(seed.files.iter().any(|(n, _)| n == "STRATA-MANIFEST"), "{kind}");
    }
}

/// Treeline's seed (taken before close) holds a data file of many pages, a checkpoint, WAL
/// records after it and double-write images: every file its damage targets pick from.
#[test]
fn treeline_seed_holds_pages_dwb_images_and_wal_records() {
    let seed = strata_fuzz::seed_store(EngineKind::Treeline);
    let len = |pick: fn(&str) -> bool| -> usize {
        seed.files.iter().filter(|(n, _)| pick(n)).map(|(_, b)| b.len()).sum()
    };
    assert!(len(|n| n == "treeline-data") >= 16 * 4096, "treeline-data");
    assert!(len(|n| n == "treeline-checkpoint") > 0, "treeline-checkpoint");
    assert!(len(|n| n == "treeline-forecast") > 0, "treeline-forecast");
    assert!(len(|n| n == "treeline-dwb") >= 4096, "treeline-dwb holds no image");
    assert!(len(|n| n.starts_with("treeline-wal-")) > 0, "treeline WAL");
}
