//! The engines this build holds: one line per engine crate, each behind the facade's cargo
//! feature of the same name (all on by default). Adding an engine: its crate exports a
//! `FACTORY: strata_kit::EngineFactory`, and one line here names it.

use strata_kit::EngineFactory;

use crate::EngineKind;

static ENGINES: &[&EngineFactory] = &[
    #[cfg(feature = "memory")]
    &engine_memory::FACTORY,
    #[cfg(feature = "flex")]
    &engine_flex::FACTORY,
    #[cfg(feature = "f2")]
    &engine_f2::FACTORY,
    #[cfg(feature = "treeline")]
    &engine_treeline::FACTORY,
    #[cfg(feature = "turtle")]
    &engine_turtle::FACTORY,
    #[cfg(feature = "laser")]
    &engine_laser::FACTORY,
];

/// The factory of `kind`, if this build holds it.
pub(crate) fn factory(kind: EngineKind) -> Option<&'static EngineFactory> {
    ENGINES.iter().copied().find(|f| f.name == kind.name())
}

/// The factory whose engine writes files named like `file_name`, if this build holds one.
pub(crate) fn factory_owning_file(file_name: &str) -> Option<&'static EngineFactory> {
    ENGINES.iter().copied().find(|f| f.owns_file(file_name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registered_factory_names_an_engine_kind_once() {
        for f in ENGINES {
            let kind: EngineKind = f.name.parse().expect("a factory's name is an EngineKind name");
            assert!(kind.is_available());
            assert_eq!(ENGINES.iter().filter(|g| g.name == f.name).count(), 1, "{} registered twice", f.name);
        }
    }

    #[test]
    fn every_engine_s_files_belong_to_it_alone() {
        for f in ENGINES {
            assert!(!f.file_patterns.is_empty(), "{} names no file patterns", f.name);
            for (prefix, suffix) in f.file_patterns {
                let name = format!("{prefix}0000000000000001{suffix}");
                let owners: Vec<&str> =
                    ENGINES.iter().filter(|g| g.owns_file(&name)).map(|g| g.name).collect();
                assert_eq!(owners, [f.name], "{name} is claimed by {owners:?}");
                assert_eq!(EngineKind::owning_file(&name).map(EngineKind::name), Some(f.name));
            }
        }
        assert_eq!(EngineKind::owning_file("snapshot-2024.png"), None);
    }
}
