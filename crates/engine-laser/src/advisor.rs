//! The cost model and the design advisor (paper §5–§6): what a workload costs on a layout, per
//! level (equation 9), and the layout that costs least, level by level under CG containment
//! (§6.3: split the columns by the projections that co-access them, merge subsets when that is
//! cheaper, keep the cheapest partition).
//!
//! Costs are in the paper's units: block reads and writes per operation, with `B` whole rows to
//! a block and `T` the size ratio. A level's workload is what was served there: point reads and
//! their projections, scans with their projections and the entries they read at the level, and
//! updates with the columns they change; inserts cost every level by the number of its groups
//! (each row is merged about T times per level, its key once per group: `T·g/(B·c)` per row,
//! equation 9's first term).

use strata_core::{Error, Result};

use crate::layout::{group_text, parse_columns, ColumnId, Layout};

/// Atoms above which the advisor merges greedily instead of trying every partition (Bell(10)
/// = 115,975 partitions).
const EXHAUSTIVE_ATOMS: usize = 10;

/// The tree's shape as the model sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModelParams {
    /// c: columns of a row.
    pub columns: usize,
    /// T: size ratio.
    pub size_ratio: f64,
    /// B: whole rows (with their keys) in a block.
    pub rows_per_block: f64,
}

/// Operations of one kind with one projection, and how many.
#[derive(Clone, Debug, PartialEq)]
pub struct Access {
    /// Ascending column ids.
    pub columns: Vec<ColumnId>,
    pub count: f64,
    /// For scans: the entries each scan reads at the level (s_i); 1 otherwise.
    pub entries: f64,
}

/// What one level served (p_i, q_i, u_i with their projections).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LevelWorkload {
    pub reads: Vec<Access>,
    pub scans: Vec<Access>,
    pub updates: Vec<Access>,
}

/// A workload as the advisor takes it: rows inserted (w) and each level's accesses (`levels[0]`
/// is level 1).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Workload {
    pub inserts: f64,
    pub levels: Vec<LevelWorkload>,
}

/// A layout and what the model predicts it costs per level (level 1 first).
#[derive(Clone, Debug, PartialEq)]
pub struct Advice {
    pub layout: Layout,
    pub level_costs: Vec<f64>,
}

impl Advice {
    pub fn total_cost(&self) -> f64 {
        self.level_costs.iter().sum()
    }
}

/// Columns of `group` that `columns` (ascending) shares.
fn shares(group: &[ColumnId], columns: &[ColumnId]) -> bool {
    group.iter().any(|id| columns.binary_search(id).is_ok())
}

/// Equation 9: the cost of `workload` at one level laid out as `groups` (a partition of some
/// columns; accesses to other columns cost nothing here).
pub fn level_cost(
    params: &ModelParams,
    inserts: f64,
    workload: &LevelWorkload,
    groups: &[Vec<ColumnId>],
) -> f64 {
    let (t, b, c) = (params.size_ratio, params.rows_per_block, params.columns as f64);
    // E^g: the groups a projection needs; E^G: their sizes, each with its key.
    let needed = |columns: &[ColumnId]| groups.iter().filter(|g| shares(g, columns)).count() as f64;
    let volume = |columns: &[ColumnId]| {
        groups.iter().filter(|g| shares(g, columns)).map(|g| 1.0 + g.len() as f64).sum::<f64>()
    };
    // Equation 9's insert term: the layout-dependent part of equation 4 (keys stored per group).
    let writes = inserts * t * groups.len() as f64 / (b * c);
    let reads: f64 = workload.reads.iter().map(|a| a.count * needed(&a.columns)).sum();
    let scans: f64 = workload.scans.iter().map(|a| a.count * a.entries * volume(&a.columns) / (c * b)).sum();
    let updates: f64 = workload.updates.iter().map(|a| a.count * t * volume(&a.columns) / (c * b)).sum();
    writes + reads + scans + updates
}

/// The least-cost layout for `levels` levels below level 0 (level 0 stays rows), each level's
/// groups chosen within the groups of the level above.
pub fn advise(params: &ModelParams, workload: &Workload, levels: usize) -> Advice {
    let empty = LevelWorkload::default();
    let mut above: Vec<Vec<ColumnId>> = vec![(0..params.columns as ColumnId).collect()];
    let mut chosen = Vec::with_capacity(levels);
    let mut level_costs = Vec::with_capacity(levels);
    for level in 0..levels.max(1) {
        let served = workload.levels.get(level).unwrap_or(&empty);
        let mut groups = Vec::new();
        let mut cost = 0.0;
        for parent in &above {
            let (part, part_cost) = best_partition(params, workload.inserts, served, parent);
            groups.extend(part);
            cost += part_cost;
        }
        groups.sort();
        level_costs.push(cost);
        chosen.push(groups.clone());
        above = groups;
    }
    let text = chosen.iter().map(|groups| groups_text(groups)).collect::<Vec<_>>().join("/");
    let layout =
        Layout::parse(&text, params.columns).expect("the advisor's groups partition within their parents");
    Advice { layout, level_costs }
}

fn groups_text(groups: &[Vec<ColumnId>]) -> String {
    groups
        .iter()
        .map(|g| g.iter().map(|id| id.to_string()).collect::<Vec<_>>().join(","))
        .collect::<Vec<_>>()
        .join("|")
}

/// §6.3 step 1: `columns` split by every projection that touches them, into the smallest
/// subsets whose columns every operation reads together or not at all.
pub fn atoms(columns: &[ColumnId], workload: &LevelWorkload) -> Vec<Vec<ColumnId>> {
    let mut parts = vec![columns.to_vec()];
    let projections = workload.reads.iter().chain(&workload.scans).chain(&workload.updates);
    for access in projections {
        parts = parts
            .into_iter()
            .flat_map(|part| {
                let (inside, outside): (Vec<ColumnId>, Vec<ColumnId>) =
                    part.iter().partition(|id| access.columns.binary_search(id).is_ok());
                [inside, outside].into_iter().filter(|p| !p.is_empty())
            })
            .collect();
    }
    parts.sort();
    parts
}

/// Steps 2 and 3 within one parent group: the cheapest partition of `parent` into unions of its
/// atoms, every partition tried while there are few atoms, else atoms merged greedily while a
/// merge lowers the cost.
fn best_partition(
    params: &ModelParams,
    inserts: f64,
    workload: &LevelWorkload,
    parent: &[ColumnId],
) -> (Vec<Vec<ColumnId>>, f64) {
    let atoms = atoms(parent, workload);
    let cost = |groups: &[Vec<ColumnId>]| level_cost(params, inserts, workload, groups);
    if atoms.len() <= EXHAUSTIVE_ATOMS {
        let mut best: Option<(Vec<Vec<ColumnId>>, f64)> = None;
        for_each_partition(&atoms, &mut |groups| {
            let c = cost(groups);
            if best.as_ref().is_none_or(|(_, b)| c < *b - 1e-12) {
                best = Some((groups.to_vec(), c));
            }
        });
        return best.unwrap_or_else(|| (vec![parent.to_vec()], cost(&[parent.to_vec()])));
    }
    let mut groups = atoms;
    let mut current = cost(&groups);
    loop {
        let mut best: Option<(usize, usize, f64)> = None;
        for i in 0..groups.len() {
            for j in i + 1..groups.len() {
                let merged = merged_pair(&groups, i, j);
                let c = cost(&merged);
                if c < current - 1e-12 && best.is_none_or(|(_, _, b)| c < b) {
                    best = Some((i, j, c));
                }
            }
        }
        let Some((i, j, c)) = best else { return (groups, current) };
        groups = merged_pair(&groups, i, j);
        current = c;
    }
}

fn merged_pair(groups: &[Vec<ColumnId>], i: usize, j: usize) -> Vec<Vec<ColumnId>> {
    let mut out: Vec<Vec<ColumnId>> =
        groups.iter().enumerate().filter(|(k, _)| *k != i && *k != j).map(|(_, g)| g.clone()).collect();
    let mut union = [groups[i].clone(), groups[j].clone()].concat();
    union.sort_unstable();
    out.push(union);
    out
}

/// Calls `visit` with every partition of `atoms` into groups (each group the union of its
/// atoms, ascending).
fn for_each_partition(atoms: &[Vec<ColumnId>], visit: &mut dyn FnMut(&[Vec<ColumnId>])) {
    fn place(
        atoms: &[Vec<ColumnId>],
        at: usize,
        blocks: &mut Vec<Vec<ColumnId>>,
        visit: &mut dyn FnMut(&[Vec<ColumnId>]),
    ) {
        if at == atoms.len() {
            let mut groups: Vec<Vec<ColumnId>> = blocks.clone();
            groups.iter_mut().for_each(|g| g.sort_unstable());
            visit(&groups);
            return;
        }
        for b in 0..blocks.len() {
            blocks[b].extend_from_slice(&atoms[at]);
            place(atoms, at + 1, blocks, visit);
            let keep = blocks[b].len() - atoms[at].len();
            blocks[b].truncate(keep);
        }
        blocks.push(atoms[at].clone());
        place(atoms, at + 1, blocks, visit);
        blocks.pop();
    }
    place(atoms, 0, &mut Vec::new(), visit);
}

/// A workload trace: the tree's shape and what each level served, as `strata advise --trace`
/// reads it (docs/ARCHITECTURE.md, "laser", "The design advisor"). One item per line, `#`
/// starts a comment:
/// `columns C`, `size_ratio T`, `rows_per_block B`, `levels L`, `insert COUNT`,
/// `read LEVEL COUNT COLUMNS`, `scan LEVEL COUNT ENTRIES COLUMNS`, `update LEVEL COUNT COLUMNS`,
/// with COLUMNS a comma list of indices and ranges (`15-29`) and LEVEL from 1.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    pub params: ModelParams,
    pub levels: usize,
    pub workload: Workload,
}

impl Trace {
    pub fn parse(text: &str) -> Result<Trace> {
        let mut params = ModelParams { columns: 0, size_ratio: 2.0, rows_per_block: 0.0 };
        let mut levels = 0usize;
        let mut workload = Workload::default();
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let bad = |what: &str| Error::invalid(format!("trace line {}: {what}: {line:?}", n + 1));
            let words: Vec<&str> = line.split_whitespace().collect();
            let number = |i: usize| {
                words.get(i).and_then(|w| w.parse::<f64>().ok()).filter(|x| x.is_finite() && *x >= 0.0)
            };
            let count = |i: usize| number(i).ok_or_else(|| bad("expected a number"));
            match words[0] {
                "columns" => params.columns = count(1)? as usize,
                "size_ratio" => params.size_ratio = count(1)?,
                "rows_per_block" => params.rows_per_block = count(1)?,
                "levels" => levels = count(1)? as usize,
                "insert" => workload.inserts += count(1)?,
                kind @ ("read" | "scan" | "update") => {
                    let level = count(1)? as usize;
                    let (entries, at) = if kind == "scan" { (count(3)?, 4) } else { (1.0, 3) };
                    let mut columns = parse_columns(words.get(at).ok_or_else(|| bad("expected columns"))?)
                        .map_err(|e: String| bad(&e))?;
                    columns.dedup();
                    if level == 0 || columns.iter().any(|&c| usize::from(c) >= params.columns) {
                        return Err(bad("a level from 1 and columns of the `columns` line (given before)"));
                    }
                    if workload.levels.len() < level {
                        workload.levels.resize(level, LevelWorkload::default());
                    }
                    let access = Access { columns, count: count(2)?, entries };
                    let served = &mut workload.levels[level - 1];
                    match kind {
                        "read" => served.reads.push(access),
                        "scan" => served.scans.push(access),
                        _ => served.updates.push(access),
                    }
                }
                _ => return Err(bad("unknown item")),
            }
        }
        if params.columns == 0 || params.columns > crate::layout::MAX_COLUMNS {
            return Err(Error::invalid("a trace needs `columns C` (1 to 4096)"));
        }
        if params.rows_per_block <= 0.0 {
            params.rows_per_block = 4096.0 / (8.0 + 4.0 * params.columns as f64);
        }
        Ok(Trace { params, levels: levels.max(workload.levels.len()).max(1), workload })
    }

    /// The trace in `parse`'s syntax.
    pub fn to_text(&self) -> String {
        let p = &self.params;
        let mut out = format!(
            "columns {}\nsize_ratio {}\nrows_per_block {}\nlevels {}\ninsert {}\n",
            p.columns, p.size_ratio, p.rows_per_block, self.levels, self.workload.inserts
        );
        for (i, served) in self.workload.levels.iter().enumerate() {
            let level = i + 1;
            for a in &served.reads {
                out += &format!("read {level} {} {}\n", a.count, group_text(&a.columns));
            }
            for a in &served.scans {
                out += &format!("scan {level} {} {} {}\n", a.count, a.entries, group_text(&a.columns));
            }
            for a in &served.updates {
                out += &format!("update {level} {} {}\n", a.count, group_text(&a.columns));
            }
        }
        out
    }
}

/// The cost of `workload` on `layout`, per level (level 1 first), by equation 9.
pub fn layout_costs(params: &ModelParams, workload: &Workload, layout: &Layout, levels: usize) -> Vec<f64> {
    let empty = LevelWorkload::default();
    (1..=levels.max(1))
        .map(|l| {
            level_cost(
                params,
                workload.inserts,
                workload.levels.get(l - 1).unwrap_or(&empty),
                layout.groups(l),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(columns: &[ColumnId], count: f64, entries: f64) -> Access {
        Access { columns: columns.to_vec(), count, entries }
    }

    fn params() -> ModelParams {
        ModelParams { columns: 4, size_ratio: 2.0, rows_per_block: 40.0 }
    }

    /// §6.3's example: R = {a1..a4}, Π1 = {a2,a3,a4}, Π2 = {a1,a2}, Π3 = R split into
    /// {a1}, {a2}, {a3,a4}.
    #[test]
    fn atoms_split_as_in_the_paper() {
        let workload = LevelWorkload {
            reads: vec![
                access(&[1, 2, 3], 1.0, 1.0),
                access(&[0, 1], 1.0, 1.0),
                access(&[0, 1, 2, 3], 1.0, 1.0),
            ],
            ..LevelWorkload::default()
        };
        assert_eq!(atoms(&[0, 1, 2, 3], &workload), vec![vec![0], vec![1], vec![2, 3]]);
    }

    #[test]
    fn there_are_bell_number_partitions() {
        let atoms: Vec<Vec<ColumnId>> = (0..5).map(|i| vec![i]).collect();
        let mut n = 0;
        for_each_partition(&atoms, &mut |groups| {
            assert_eq!(groups.iter().map(Vec::len).sum::<usize>(), 5);
            n += 1;
        });
        assert_eq!(n, 52, "Bell(5)");
    }

    /// Equation 5 and 6 by hand: two groups {0,1} and {2,3}; a read of {0,2} needs both groups
    /// (E^g = 2), a scan of {0,1} one group of size 2 (E^G = 3).
    #[test]
    fn level_cost_follows_equation_nine() {
        let p = params();
        let groups = vec![vec![0, 1], vec![2, 3]];
        let reads = LevelWorkload { reads: vec![access(&[0, 2], 10.0, 1.0)], ..LevelWorkload::default() };
        assert_eq!(level_cost(&p, 0.0, &reads, &groups), 20.0);
        let scans = LevelWorkload { scans: vec![access(&[0, 1], 2.0, 400.0)], ..LevelWorkload::default() };
        assert!((level_cost(&p, 0.0, &scans, &groups) - 2.0 * 400.0 * 3.0 / (4.0 * 40.0)).abs() < 1e-9);
        let inserts = level_cost(&p, 100.0, &LevelWorkload::default(), &groups);
        assert!((inserts - 100.0 * 2.0 * 2.0 / (40.0 * 4.0)).abs() < 1e-9, "{inserts}");
    }

    /// Wide point reads on top, narrow scans below: rows where reads are served, the scanned
    /// columns in a group of their own where scans are, and containment kept.
    #[test]
    fn reads_keep_rows_and_narrow_scans_split_the_levels_they_serve() {
        let p = ModelParams { columns: 6, size_ratio: 2.0, rows_per_block: 30.0 };
        let all: Vec<ColumnId> = (0..6).collect();
        let top = LevelWorkload { reads: vec![access(&all, 1000.0, 1.0)], ..LevelWorkload::default() };
        let bottom =
            LevelWorkload { scans: vec![access(&[4, 5], 10.0, 100_000.0)], ..LevelWorkload::default() };
        let workload = Workload { inserts: 1000.0, levels: vec![top, bottom.clone(), bottom] };
        let advice = advise(&p, &workload, 3);
        assert_eq!(advice.layout.groups(1), std::slice::from_ref(&all));
        assert!(advice.layout.groups(2).contains(&vec![4, 5]), "{:?}", advice.layout);
        assert_eq!(advice.layout.groups(3), advice.layout.groups(2));
        advice.layout.check(6).unwrap();
        assert_eq!(advice.level_costs.len(), 3);
    }

    /// With more atoms than the exhaustive search takes, greedy merging still only lowers the
    /// cost: never worse than the atoms or the whole row.
    #[test]
    fn greedy_merging_never_costs_more_than_atoms_or_rows() {
        let p = ModelParams { columns: 30, size_ratio: 2.0, rows_per_block: 31.0 };
        let all: Vec<ColumnId> = (0..30).collect();
        let scans: Vec<Access> = (0..15).map(|i| access(&[2 * i, 2 * i + 1], 3.0, 50_000.0)).collect();
        let reads = vec![access(&all, 20_000.0, 1.0)];
        let served = LevelWorkload { reads, scans, updates: vec![] };
        let (groups, cost) = best_partition(&p, 1000.0, &served, &all);
        assert!(atoms(&all, &served).len() > EXHAUSTIVE_ATOMS);
        assert!(cost <= level_cost(&p, 1000.0, &served, &atoms(&all, &served)) + 1e-9);
        assert!(cost <= level_cost(&p, 1000.0, &served, std::slice::from_ref(&all)) + 1e-9);
        let mut covered: Vec<ColumnId> = groups.concat();
        covered.sort_unstable();
        assert_eq!(covered, all);
    }
}

#[cfg(test)]
mod trace_tests {
    use super::*;

    #[test]
    fn traces_parse_print_back_and_refuse_bad_lines() {
        let text = "# the paper's HTAP shape, scaled down\ncolumns 30\nlevels 4\ninsert 10000\n\
                    read 1 500 0-29\nread 3 500 15-29\nscan 4 12 200000 27-29\nupdate 2 100 5\n";
        let trace = Trace::parse(text).unwrap();
        assert_eq!((trace.params.columns, trace.levels, trace.workload.levels.len()), (30, 4, 4));
        assert_eq!(trace.workload.levels[3].scans[0].columns, vec![27, 28, 29]);
        assert_eq!(Trace::parse(&trace.to_text()).unwrap(), trace);
        for bad in [
            "read 1 5 0",
            "columns 4\nread 0 5 1",
            "columns 4\nread 1 5 9",
            "columns 4\nscan 1 5 x 1",
            "columns 4\nfly 1",
        ] {
            assert!(matches!(Trace::parse(bad), Err(Error::InvalidArgument(_))), "{bad}");
        }
    }

    /// The advisor's layout costs no more than rows or columns at every level of a trace.
    #[test]
    fn advice_never_costs_more_than_rows_or_columns() {
        let text = "columns 30\nlevels 6\ninsert 100000\nread 1 50000 0-29\nread 2 20000 0-29\n\
                    read 3 5000 15-29\nread 4 5000 15-29\nscan 5 12 3000000 27-29\nscan 6 12 6000000 20-29\n";
        let trace = Trace::parse(text).unwrap();
        let advice = advise(&trace.params, &trace.workload, trace.levels);
        for other in [Layout::rows(30), Layout::parse("column", 30).unwrap()] {
            let costs = layout_costs(&trace.params, &trace.workload, &other, trace.levels);
            assert!(advice.total_cost() <= costs.iter().sum::<f64>() + 1e-9, "{other:?}");
        }
        assert_eq!(advice.layout.groups(1), std::slice::from_ref(&(0..30).collect::<Vec<ColumnId>>()));
    }
}
