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
];

/// The factory of `kind`, if this build holds it.
pub(crate) fn factory(kind: EngineKind) -> Option<&'static EngineFactory> {
    ENGINES.iter().copied().find(|f| f.name == kind.name())
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
}
