//! Engine-specific knobs passed by name (`EngineConfig::engine_options`), so one API and one
//! benchmark command line can tune any engine: `max_interval_records=64` for flex,
//! `read_cache_bytes=64MiB` for f2. An engine reads the names it knows with the typed getters and
//! then calls `finish`, which refuses every other name with a message listing the known ones: a
//! misspelt knob is an error, never silently ignored.

use crate::{Error, Result};

/// Reads one engine's knobs out of `EngineConfig::engine_options`.
pub struct EngineOptionReader<'a> {
    engine: &'a str,
    given: &'a [(String, String)],
    known: Vec<&'static str>,
}

impl<'a> EngineOptionReader<'a> {
    /// Refuses a name given twice (which value was meant is unclear).
    pub fn new(engine: &'a str, given: &'a [(String, String)]) -> Result<Self> {
        if let Some(name) = repeated_option_name(given) {
            return Err(Error::invalid(format!("engine option '{name}' is given twice")));
        }
        Ok(EngineOptionReader { engine, given, known: Vec::new() })
    }

    /// A runtime knob's new value (`Maintenance::set_option`), read as at open: one size within
    /// `range`, with the same error text an open would give.
    pub fn runtime_bytes(
        engine: &str,
        name: &'static str,
        value: &str,
        range: std::ops::RangeInclusive<u64>,
    ) -> Result<u64> {
        Self::runtime(engine, name, value, |reader| reader.bytes(name, range))
    }

    /// A runtime knob's new value: `auto` or one size within `range` (see `bytes_or_auto`).
    pub fn runtime_bytes_or_auto(
        engine: &str,
        name: &'static str,
        value: &str,
        range: std::ops::RangeInclusive<u64>,
    ) -> Result<AutoOr<u64>> {
        Self::runtime(engine, name, value, |reader| reader.bytes_or_auto(name, range))
    }

    /// A runtime knob's new value: one of `choices` (see `choice`).
    pub fn runtime_choice(
        engine: &str,
        name: &'static str,
        value: &str,
        choices: &[&'static str],
    ) -> Result<&'static str> {
        Self::runtime(engine, name, value, |reader| reader.choice(name, choices))
    }

    /// One knob's value read by `read`, as an open would read it.
    fn runtime<T>(
        engine: &str,
        name: &'static str,
        value: &str,
        read: impl FnOnce(&mut EngineOptionReader<'_>) -> Result<Option<T>>,
    ) -> Result<T> {
        let given = [(name.to_string(), value.to_string())];
        let mut reader = EngineOptionReader::new(engine, &given)?;
        let read = read(&mut reader)?;
        reader.finish()?;
        read.ok_or_else(|| Error::invalid(format!("{engine} engine option {name} needs a value")))
    }

    fn raw(&mut self, name: &'static str) -> Option<&'a str> {
        self.known.push(name);
        self.given.iter().find(|(n, _)| n == name).map(|(_, v)| v.trim())
    }

    fn bad(&self, name: &str, value: &str, expected: &str) -> Error {
        Error::invalid(format!("{} engine option {name}={value:?}: expected {expected}", self.engine))
    }

    /// A size within `range`: `65536`, `64KiB`, `16MiB`, `1GiB` (binary multipliers; `B`/`iB`
    /// optional).
    pub fn bytes(&mut self, name: &'static str, range: std::ops::RangeInclusive<u64>) -> Result<Option<u64>> {
        let Some(value) = self.raw(name) else { return Ok(None) };
        self.size_within(name, value, range, "").map(Some)
    }

    /// `value` as a size within `range`; the error names what was expected, after `or_else`.
    fn size_within(
        &self,
        name: &str,
        value: &str,
        range: std::ops::RangeInclusive<u64>,
        or_else: &str,
    ) -> Result<u64> {
        match parse_bytes(value) {
            Some(n) if range.contains(&n) => Ok(n),
            _ => Err(self.bad(
                name,
                value,
                &format!(
                    "{or_else}a size from {} to {} bytes, like 65536, 64KiB or 16MiB",
                    range.start(),
                    range.end()
                ),
            )),
        }
    }

    /// `auto` (the engine chooses, and keeps choosing) or a size within `range`, as `bytes`.
    pub fn bytes_or_auto(
        &mut self,
        name: &'static str,
        range: std::ops::RangeInclusive<u64>,
    ) -> Result<Option<AutoOr<u64>>> {
        let Some(value) = self.raw(name) else { return Ok(None) };
        if value == "auto" {
            return Ok(Some(AutoOr::Auto));
        }
        self.size_within(name, value, range, "auto or ").map(|n| Some(AutoOr::Fixed(n)))
    }

    /// A whole number within `range`.
    pub fn count(&mut self, name: &'static str, range: std::ops::RangeInclusive<u64>) -> Result<Option<u64>> {
        let Some(value) = self.raw(name) else { return Ok(None) };
        match value.replace('_', "").parse::<u64>() {
            Ok(n) if range.contains(&n) => Ok(Some(n)),
            _ => Err(self.bad(
                name,
                value,
                &format!("a whole number from {} to {}", range.start(), range.end()),
            )),
        }
    }

    /// A fraction strictly above 0 and at most 1.
    pub fn fraction(&mut self, name: &'static str) -> Result<Option<f64>> {
        let Some(value) = self.raw(name) else { return Ok(None) };
        match value.parse::<f64>() {
            Ok(x) if x > 0.0 && x <= 1.0 => Ok(Some(x)),
            _ => Err(self.bad(name, value, "a fraction in (0, 1]")),
        }
    }

    /// One of the words in `choices`.
    pub fn choice(&mut self, name: &'static str, choices: &[&'static str]) -> Result<Option<&'static str>> {
        let Some(value) = self.raw(name) else { return Ok(None) };
        match choices.iter().find(|c| **c == value) {
            Some(choice) => Ok(Some(choice)),
            None => Err(self.bad(name, value, &format!("one of {}", choices.join(", ")))),
        }
    }

    /// The value as given (trimmed), for a knob with its own syntax (laser's `schema`).
    pub fn text(&mut self, name: &'static str) -> Option<&'a str> {
        self.raw(name)
    }

    /// The error for `name=value` that does not parse, saying what was `expected`.
    pub fn invalid(&self, name: &str, value: &str, expected: &str) -> Error {
        self.bad(name, value, expected)
    }

    /// `true` or `false`.
    pub fn flag(&mut self, name: &'static str) -> Result<Option<bool>> {
        let Some(value) = self.raw(name) else { return Ok(None) };
        match value {
            "true" => Ok(Some(true)),
            "false" => Ok(Some(false)),
            _ => Err(self.bad(name, value, "true or false")),
        }
    }

    /// Refuses the names no getter asked for.
    pub fn finish(self) -> Result<()> {
        let Some((name, _)) = self.given.iter().find(|(n, _)| !self.known.contains(&n.as_str())) else {
            return Ok(());
        };
        let known = if self.known.is_empty() {
            "it takes none".to_string()
        } else {
            format!("known: {}", self.known.join(", "))
        };
        Err(Error::invalid(format!("engine {} has no option '{name}' ({known})", self.engine)))
    }
}

/// A knob the engine may choose itself (`auto`) or that is fixed at the value given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutoOr<T> {
    Auto,
    Fixed(T),
}

/// One knob as typed on a command line: `NAME=VALUE`, both trimmed and non-empty.
pub fn parse_engine_option(text: &str) -> Option<(String, String)> {
    let (name, value) = text.split_once('=')?;
    let (name, value) = (name.trim(), value.trim());
    (!name.is_empty() && !value.is_empty()).then(|| (name.to_string(), value.to_string()))
}

/// The first name that appears twice among `options`.
pub fn repeated_option_name(options: &[(String, String)]) -> Option<&str> {
    options.iter().enumerate().find_map(|(i, (name, _))| {
        options.iter().skip(i + 1).any(|(other, _)| other == name).then_some(name.as_str())
    })
}

/// `65536`, `64KiB`, `64k`, `16MiB`, `1GiB`, `1.5GiB`, `0`: binary multipliers, whole bytes.
pub fn parse_bytes(text: &str) -> Option<u64> {
    let t = text.trim().to_ascii_lowercase().replace('_', "");
    let t = t.strip_suffix("ib").or_else(|| t.strip_suffix('b')).unwrap_or(&t);
    let (digits, shift) = match t.char_indices().last() {
        Some((i, 'k')) => (&t[..i], 10),
        Some((i, 'm')) => (&t[..i], 20),
        Some((i, 'g')) => (&t[..i], 30),
        Some((i, 't')) => (&t[..i], 40),
        _ => (t, 0),
    };
    let value: f64 = digits.trim().parse().ok()?;
    let bytes = value * (1u64 << shift) as f64;
    (value.is_finite() && bytes >= 0.0 && bytes < u64::MAX as f64 / 2.0 && bytes.fract() == 0.0)
        .then_some(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
    }

    #[test]
    fn typed_getters_read_known_names_and_finish_refuses_the_rest() {
        let g = given(&[("cache_bytes", "64MiB"), ("records", "48"), ("on", "true"), ("share", "0.5")]);
        let mut r = EngineOptionReader::new("flex", &g).unwrap();
        assert_eq!(r.bytes("cache_bytes", 0..=1 << 30).unwrap(), Some(64 << 20));
        assert_eq!(r.count("records", 2..=1 << 20).unwrap(), Some(48));
        assert_eq!(r.flag("on").unwrap(), Some(true));
        assert_eq!(r.fraction("share").unwrap(), Some(0.5));
        assert_eq!(r.bytes("absent", 0..=1).unwrap(), None);
        r.finish().unwrap();

        let g = given(&[("max_interval_record", "64")]);
        let mut r = EngineOptionReader::new("flex", &g).unwrap();
        assert_eq!(r.count("max_interval_records", 2..=100).unwrap(), None);
        let err = r.finish().unwrap_err().to_string();
        assert!(
            err.contains("no option 'max_interval_record'") && err.contains("max_interval_records"),
            "{err}"
        );

        let g = given(&[("anything", "1")]);
        let err = EngineOptionReader::new("memory", &g).unwrap().finish().unwrap_err().to_string();
        assert!(err.contains("memory") && err.contains("takes none"), "{err}");
    }

    #[test]
    fn a_size_or_auto_reads_either_and_refuses_the_rest() {
        let g = given(&[("a", "auto"), ("b", " 1MiB ")]);
        let mut r = EngineOptionReader::new("turtle", &g).unwrap();
        assert_eq!(r.bytes_or_auto("a", 0..=1 << 30).unwrap(), Some(AutoOr::Auto));
        assert_eq!(r.bytes_or_auto("b", 0..=1 << 30).unwrap(), Some(AutoOr::Fixed(1 << 20)));
        assert_eq!(r.bytes_or_auto("c", 0..=1 << 30).unwrap(), None);
        r.finish().unwrap();
        let runtime = |value| EngineOptionReader::runtime_bytes_or_auto("turtle", "d", value, 1..=1 << 20);
        assert_eq!(runtime("auto").unwrap(), AutoOr::Auto);
        assert_eq!(runtime("4KiB").unwrap(), AutoOr::Fixed(4 << 10));
        for bad in ["automatic", "2MiB", "0"] {
            let err = runtime(bad).unwrap_err().to_string();
            assert!(err.contains(&format!("d={bad:?}")) && err.contains("auto or a size"), "{err}");
        }
    }

    #[test]
    fn a_choice_is_one_of_its_words() {
        let g = given(&[("mode", " off ")]);
        let mut r = EngineOptionReader::new("turtle", &g).unwrap();
        assert_eq!(r.choice("mode", &["auto", "off"]).unwrap(), Some("off"));
        assert_eq!(r.choice("other", &["auto"]).unwrap(), None);
        r.finish().unwrap();
        let runtime = |value| EngineOptionReader::runtime_choice("turtle", "mode", value, &["auto", "off"]);
        assert_eq!(runtime("auto").unwrap(), "auto");
        let err = runtime("Off").unwrap_err().to_string();
        assert!(err.contains("mode=\"Off\"") && err.contains("one of auto, off"), "{err}");
    }

    #[test]
    fn bad_values_and_repeated_names_are_clear_errors() {
        let g = given(&[("n", "1"), ("n", "2")]);
        assert!(EngineOptionReader::new("f2", &g).is_err());
        for (name, value) in [
            ("b", "lots"),
            ("b", "-1"),
            ("b", "0.3"),
            ("b", "2MiB"),
            ("c", "1"),
            ("c", "x"),
            ("f", "0"),
            ("t", "yes"),
        ] {
            let g = given(&[(name, value)]);
            let mut r = EngineOptionReader::new("f2", &g).unwrap();
            let err = match name {
                "b" => r.bytes("b", 0..=1 << 20).unwrap_err(),
                "c" => r.count("c", 2..=8).unwrap_err(),
                "f" => r.fraction("f").unwrap_err(),
                _ => r.flag("t").unwrap_err(),
            };
            assert!(err.to_string().contains(&format!("{name}={value:?}")), "{err}");
        }
    }

    #[test]
    fn command_line_knobs_need_a_name_and_a_value() {
        assert_eq!(parse_engine_option(" cache_bytes = 1MiB "), Some(("cache_bytes".into(), "1MiB".into())));
        for bad in ["cache_bytes", "=1", "cache_bytes=", " = "] {
            assert_eq!(parse_engine_option(bad), None, "{bad}");
        }
        assert_eq!(repeated_option_name(&given(&[("a", "1"), ("b", "2"), ("a", "3")])), Some("a"));
        assert_eq!(repeated_option_name(&given(&[("a", "1"), ("b", "2")])), None);
    }

    #[test]
    fn sizes_take_binary_suffixes() {
        assert_eq!(parse_bytes("65536"), Some(65536));
        assert_eq!(parse_bytes("64KiB"), Some(64 << 10));
        assert_eq!(parse_bytes("64k"), Some(64 << 10));
        assert_eq!(parse_bytes("1.5GiB"), Some(3 << 29));
        assert_eq!(parse_bytes("16 MB"), Some(16 << 20));
        assert_eq!(parse_bytes("0"), Some(0));
        assert_eq!(parse_bytes("0.5"), None);
        assert_eq!(parse_bytes("-1"), None);
        assert_eq!(parse_bytes("9223372036854775808"), None); // 2^63: sums of two would overflow
        assert_eq!(parse_bytes(""), None);
    }
}
