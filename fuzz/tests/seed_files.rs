//! The seed stores hold every kind of file the damage targets pick from.

use strata::EngineKind;

#[test]
fn seed_stores_hold_their_files() {
    for kind in [EngineKind::Memory, EngineKind::Flex, EngineKind::F2] {
        let seed = strata_fuzz::seed_store(kind);
        let names: Vec<String> = seed.files.iter().map(|(n, b)| format!("{n} ({} B)", b.len())).collect();
        println!("{kind}: {}", names.join(", "));
        assert!(seed.files.iter().any(|(n, _)| n == "STRATA-MANIFEST"), "{kind}");
    }
}
