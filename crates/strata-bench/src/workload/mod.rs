//! What a benchmark does: YCSB's core workloads A–F, named custom mixes and `--mix` mixes,
//! request distributions, record shapes, and the deterministic per-thread operation traces.

pub mod choosers;
pub mod keys;
pub mod skew;
pub mod skewed;
pub mod trace;
pub mod zipfian;

pub use choosers::Distribution;
pub use keys::{ClusteredInserts, KeyFormat, KeySpec, ValueSpec};
pub use trace::{Op, ThreadTrace, TraceParams};

/// The operations a trace is made of (YCSB's, with read-modify-write as one operation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpKind {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
}

impl OpKind {
    pub const ALL: [OpKind; 5] =
        [OpKind::Read, OpKind::Update, OpKind::Insert, OpKind::Scan, OpKind::ReadModifyWrite];

    pub fn name(self) -> &'static str {
        match self {
            OpKind::Read => "read",
            OpKind::Update => "update",
            OpKind::Insert => "insert",
            OpKind::Scan => "scan",
            OpKind::ReadModifyWrite => "rmw",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }

    fn parse(name: &str) -> Option<OpKind> {
        match name {
            "read" => Some(OpKind::Read),
            "update" => Some(OpKind::Update),
            "insert" => Some(OpKind::Insert),
            "scan" => Some(OpKind::Scan),
            "rmw" | "readmodifywrite" | "read-modify-write" => Some(OpKind::ReadModifyWrite),
            _ => None,
        }
    }
}

/// Operation proportions, indexed by `OpKind::index`; they sum to 1.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OpMix {
    proportions: [f64; 5],
}

impl OpMix {
    /// From `(kind, weight)` pairs; weights are normalised. Errors on negative or all-zero weights.
    pub fn new(weights: &[(OpKind, f64)]) -> Result<Self, String> {
        let mut proportions = [0.0; 5];
        for &(kind, w) in weights {
            if !(w.is_finite() && w >= 0.0) {
                return Err(format!("weight {w} for {} must be a non-negative number", kind.name()));
            }
            proportions[kind.index()] += w;
        }
        let sum: f64 = proportions.iter().sum();
        if sum <= 0.0 {
            return Err("an operation mix needs at least one positive weight".into());
        }
        for p in &mut proportions {
            *p /= sum;
        }
        Ok(OpMix { proportions })
    }

    /// Parses `read=70,update=20,scan=10` (weights are normalised, so percentages or ratios).
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut weights = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, weight) = part
                .split_once('=')
                .ok_or_else(|| format!("--mix {text:?}: expected op=weight pairs like read=70,update=30"))?;
            let kind = OpKind::parse(name.trim()).ok_or_else(|| {
                format!(
                    "--mix {text:?}: unknown operation {name:?}; expected read, update, insert, scan or rmw"
                )
            })?;
            let weight: f64 =
                weight.trim().parse().map_err(|_| format!("--mix {text:?}: {weight:?} is not a number"))?;
            weights.push((kind, weight));
        }
        OpMix::new(&weights).map_err(|e| format!("--mix {text:?}: {e}"))
    }

    pub fn proportion(&self, kind: OpKind) -> f64 {
        self.proportions[kind.index()]
    }

    /// YCSB `DiscreteGenerator.nextValue` given a uniform draw `u` in [0, 1).
    pub fn pick(&self, mut u: f64) -> OpKind {
        for kind in OpKind::ALL {
            let p = self.proportions[kind.index()];
            if u < p {
                return kind;
            }
            u -= p;
        }
        // Rounding left u just above the last positive proportion.
        OpKind::ALL.into_iter().rev().find(|k| self.proportions[k.index()] > 0.0).unwrap_or(OpKind::Read)
    }

    /// e.g. `read 95%, insert 5%`.
    pub fn describe(&self) -> String {
        OpKind::ALL
            .iter()
            .filter(|k| self.proportion(**k) > 0.0)
            .map(|k| format!("{} {}%", k.name(), fmt_percent(self.proportion(*k) * 100.0)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn fmt_percent(p: f64) -> String {
    if (p - p.round()).abs() < 1e-9 {
        format!("{p:.0}")
    } else {
        format!("{p:.2}")
    }
}

/// One run phase: a mix plus the distribution YCSB's workload file names for it.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    pub name: String,
    pub mix: OpMix,
    /// The workload file's `requestdistribution`; `--distribution` overrides it.
    pub default_distribution: DistributionKind,
    /// A distribution named with the workload (`e@uniform`, and `age`), which `--distribution`
    /// does not override.
    pub fixed_distribution: Option<DistributionKind>,
    /// `age`: one update per loaded record, whatever `--ops` or `--duration` say (the TreeLine
    /// paper ages every store this way before measuring).
    pub aging: bool,
}

/// A distribution without parameters (those come from the command line).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DistributionKind {
    Uniform,
    Zipfian,
    ZipfianPlain,
    Scattered,
    Latest,
    Hotspot,
}

impl DistributionKind {
    /// The `--distribution` spelling.
    pub fn name(self) -> &'static str {
        match self {
            DistributionKind::Uniform => "uniform",
            DistributionKind::Zipfian => "zipfian",
            DistributionKind::ZipfianPlain => "zipfian-plain",
            DistributionKind::Scattered => "scattered",
            DistributionKind::Latest => "latest",
            DistributionKind::Hotspot => "hotspot",
        }
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "uniform" => Ok(DistributionKind::Uniform),
            "zipfian" => Ok(DistributionKind::Zipfian),
            "zipfian-plain" => Ok(DistributionKind::ZipfianPlain),
            "scattered" => Ok(DistributionKind::Scattered),
            "latest" => Ok(DistributionKind::Latest),
            "hotspot" => Ok(DistributionKind::Hotspot),
            _ => {
                Err(format!(
                    "unknown --distribution {text:?}; expected zipfian, zipfian-plain, scattered, uniform, latest or hotspot"
                ))
            }
        }
    }
}

/// Named workloads: YCSB's core workloads (workloads/workload{a..f}) and custom mixes.
pub const NAMED_WORKLOADS: [(&str, &str); 12] = [
    ("a", "YCSB A: update heavy (read 50%, update 50%), zipfian"),
    ("b", "YCSB B: read mostly (read 95%, update 5%), zipfian"),
    ("c", "YCSB C: read only, zipfian"),
    ("d", "YCSB D: read latest (read 95%, insert 5%), latest"),
    ("e", "YCSB E: short ranges (scan 95% of 1..=100 records, insert 5%), zipfian"),
    ("f", "YCSB F: read-modify-write (read 50%, rmw 50%), zipfian"),
    ("read50-insert50", "read 50%, insert 50%, zipfian"),
    ("update100", "update 100%, zipfian"),
    ("rmw100", "read-modify-write 100%, zipfian"),
    ("insert100", "insert 100%"),
    ("scan100", "scan 100% of 1..=100 records, zipfian"),
    ("age", "ages the store: one uniform update per loaded record (TreeLine §5.1's checkpoints)"),
];

impl Workload {
    /// A named workload (see `NAMED_WORKLOADS`), optionally with its own distribution:
    /// `NAME@DISTRIBUTION` (`e@uniform`).
    pub fn named(name: &str) -> Result<Workload, String> {
        if let Some((base, distribution)) = name.split_once('@') {
            let mut workload = Workload::named(base)?;
            workload.fixed_distribution = Some(DistributionKind::parse(distribution)?);
            workload.name = name.to_string();
            return Ok(workload);
        }
        use OpKind::*;
        let (weights, dist): (&[(OpKind, f64)], _) = match name {
            "a" => (&[(Read, 0.5), (Update, 0.5)], DistributionKind::Zipfian),
            "b" => (&[(Read, 0.95), (Update, 0.05)], DistributionKind::Zipfian),
            "c" => (&[(Read, 1.0)], DistributionKind::Zipfian),
            "d" => (&[(Read, 0.95), (Insert, 0.05)], DistributionKind::Latest),
            "e" => (&[(Scan, 0.95), (Insert, 0.05)], DistributionKind::Zipfian),
            "f" => (&[(Read, 0.5), (ReadModifyWrite, 0.5)], DistributionKind::Zipfian),
            "read50-insert50" => (&[(Read, 0.5), (Insert, 0.5)], DistributionKind::Zipfian),
            "update100" => (&[(Update, 1.0)], DistributionKind::Zipfian),
            "rmw100" => (&[(ReadModifyWrite, 1.0)], DistributionKind::Zipfian),
            "insert100" => (&[(Insert, 1.0)], DistributionKind::Zipfian),
            "scan100" => (&[(Scan, 1.0)], DistributionKind::Zipfian),
            "age" => {
                return Ok(Workload {
                    name: name.to_string(),
                    mix: OpMix::new(&[(Update, 1.0)])?,
                    default_distribution: DistributionKind::Uniform,
                    fixed_distribution: Some(DistributionKind::Uniform),
                    aging: true,
                })
            }
            _ => {
                let names: Vec<&str> = NAMED_WORKLOADS.iter().map(|(n, _)| *n).collect();
                return Err(format!(
                    "unknown workload {name:?}; expected load, {}, or mix (with --mix)",
                    names.join(", ")
                ));
            }
        };
        Ok(Workload {
            name: name.to_string(),
            mix: OpMix::new(weights)?,
            default_distribution: dist,
            fixed_distribution: None,
            aging: false,
        })
    }

    /// The `--mix` workload (zipfian unless `--distribution` says otherwise).
    pub fn custom(mix: OpMix) -> Workload {
        Workload {
            name: "mix".into(),
            mix,
            default_distribution: DistributionKind::Zipfian,
            fixed_distribution: None,
            aging: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ycsb_workloads_have_ycsb_proportions() {
        let w = |n| Workload::named(n).unwrap();
        assert_eq!(w("a").mix.proportion(OpKind::Update), 0.5);
        assert_eq!(w("b").mix.proportion(OpKind::Read), 0.95);
        assert_eq!(w("c").mix.proportion(OpKind::Read), 1.0);
        assert_eq!(w("d").default_distribution, DistributionKind::Latest);
        assert_eq!(w("e").mix.proportion(OpKind::Scan), 0.95);
        assert_eq!(w("f").mix.proportion(OpKind::ReadModifyWrite), 0.5);
        for (name, _) in NAMED_WORKLOADS {
            assert!(Workload::named(name).is_ok(), "{name}");
        }
        assert!(Workload::named("g").is_err());
        let e_uniform = w("e@uniform");
        assert_eq!(
            (e_uniform.name.as_str(), e_uniform.fixed_distribution),
            ("e@uniform", Some(DistributionKind::Uniform))
        );
        assert_eq!(e_uniform.mix.proportion(OpKind::Scan), 0.95);
        assert!(Workload::named("e@sideways").is_err() && Workload::named("g@uniform").is_err());
        let age = w("age");
        assert!(age.aging && age.fixed_distribution == Some(DistributionKind::Uniform));
        assert_eq!(age.mix.proportion(OpKind::Update), 1.0);
    }

    #[test]
    fn mix_parsing() {
        let m = OpMix::parse("read=70,update=20,scan=10").unwrap();
        assert!((m.proportion(OpKind::Scan) - 0.1).abs() < 1e-12);
        assert_eq!(m.describe(), "read 70%, update 20%, scan 10%");
        assert!(OpMix::parse("read=1,rmw=1").unwrap().proportion(OpKind::ReadModifyWrite) == 0.5);
        for bad in ["", "read", "read=x", "jump=5", "read=-1", "read=0"] {
            assert!(OpMix::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn pick_follows_cumulative_proportions() {
        let m = OpMix::parse("read=50,insert=50").unwrap();
        assert_eq!(m.pick(0.0), OpKind::Read);
        assert_eq!(m.pick(0.4999), OpKind::Read);
        assert_eq!(m.pick(0.5), OpKind::Insert);
        assert_eq!(m.pick(0.99999), OpKind::Insert);
        assert_eq!(m.pick(1.0), OpKind::Insert);
    }
}
