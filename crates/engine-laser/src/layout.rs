//! The store's columns and its per-level column-group layout (paper §3.2): level 0 holds whole
//! rows; every level below splits the columns into groups, each stored as its own sorted run
//! with the key beside the group's values, and obeying CG containment: a group at level `i` is
//! a subset of one group at level `i − 1`.
//!
//! A plain key-value store (no `schema`) has one column of any width and one group per level.

use std::fmt::Write as _;

use strata_core::{Error, Result, Schema};

/// A column's index in the schema.
pub type ColumnId = u16;

/// The most columns a schema may have (a group's masks and the manifest count them in `u16`).
pub const MAX_COLUMNS: usize = 4096;

/// The widths of the store's columns: fixed per column (a table), or one column of any width
/// (a key-value store).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Columns {
    Bytes,
    Fixed(Vec<usize>),
}

impl Columns {
    pub fn of_schema(schema: Option<&Schema>) -> Columns {
        match schema {
            None => Columns::Bytes,
            Some(s) => Columns::Fixed(s.columns().iter().map(|c| c.width_bytes).collect()),
        }
    }

    pub fn count(&self) -> usize {
        match self {
            Columns::Bytes => 1,
            Columns::Fixed(widths) => widths.len(),
        }
    }

    /// Every column, as one set (a whole row).
    pub fn all(&self) -> ColumnSet {
        ColumnSet::new((0..self.count() as ColumnId).collect(), self)
    }
}

/// Some columns, ascending, with where each sits in a row of just these columns. Invariant:
/// `ids` ascend strictly and name columns of the store; `offsets[j]` is the sum of the widths
/// before `ids[j]`, `row_bytes` the sum of all. `variable`: the key-value store's one column,
/// whose value has any width.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnSet {
    ids: Vec<ColumnId>,
    offsets: Vec<usize>,
    widths: Vec<usize>,
    row_bytes: usize,
    variable: bool,
}

impl ColumnSet {
    /// The set of `ids` (ascending, each a column of `columns`).
    pub fn new(ids: Vec<ColumnId>, columns: &Columns) -> ColumnSet {
        let widths: Vec<usize> = match columns {
            Columns::Bytes => vec![0; ids.len()],
            Columns::Fixed(all) => ids.iter().map(|&id| all[usize::from(id)]).collect(),
        };
        let mut offsets = Vec::with_capacity(ids.len());
        let mut row_bytes = 0;
        for w in &widths {
            offsets.push(row_bytes);
            row_bytes += w;
        }
        ColumnSet { ids, offsets, widths, row_bytes, variable: matches!(columns, Columns::Bytes) }
    }

    pub fn ids(&self) -> &[ColumnId] {
        &self.ids
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_variable(&self) -> bool {
        self.variable
    }

    /// Bytes of a row of these columns (0 for the variable column).
    pub fn row_bytes(&self) -> usize {
        self.row_bytes
    }

    /// Where column `j` of the set (its position, not its id) sits in the set's row.
    pub fn range(&self, j: usize) -> std::ops::Range<usize> {
        self.offsets[j]..self.offsets[j] + self.widths[j]
    }

    /// The position of column `id` in the set.
    pub fn position(&self, id: ColumnId) -> Option<usize> {
        self.ids.binary_search(&id).ok()
    }

    pub fn intersects(&self, other: &ColumnSet) -> bool {
        self.ids.iter().any(|id| other.position(*id).is_some())
    }

    /// The columns of both, as a set.
    pub fn intersection(&self, other: &ColumnSet, columns: &Columns) -> ColumnSet {
        ColumnSet::new(self.ids.iter().copied().filter(|id| other.position(*id).is_some()).collect(), columns)
    }

    pub fn is_subset_of(&self, other: &ColumnSet) -> bool {
        self.ids.iter().all(|id| other.position(*id).is_some())
    }
}

/// The groups of every level below level 0, as column id lists: `levels[0]` is level 1's, and a
/// level deeper than the list has the last level's groups. Invariant: every level's groups
/// partition the columns, and each group is a subset of one group of the level above (level 1
/// under level 0's single row group).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    levels: Vec<Vec<Vec<ColumnId>>>,
}

impl Layout {
    /// Rows at every level: one group of every column.
    pub fn rows(column_count: usize) -> Layout {
        Layout { levels: vec![vec![(0..column_count as ColumnId).collect()]] }
    }

    /// The groups of `level` (1 and deeper).
    pub fn groups(&self, level: usize) -> &[Vec<ColumnId>] {
        let i = level.saturating_sub(1).min(self.levels.len() - 1);
        &self.levels[i]
    }

    /// How many levels the layout spells out (deeper ones repeat the last).
    pub fn levels_given(&self) -> usize {
        self.levels.len()
    }

    /// Parses the `layout` option for `column_count` columns: levels 1, 2, … separated by `/`,
    /// each `row` (one group), `column` (a group per column) or groups separated by `|`, each a
    /// comma list of column indices and ranges (`0-14|15-29`). The last level's groups go on
    /// below it.
    pub fn parse(text: &str, column_count: usize) -> Result<Layout> {
        let mut levels = Vec::new();
        for (i, spec) in text.split('/').enumerate() {
            let groups = parse_level(spec.trim(), column_count)
                .map_err(|e| Error::invalid(format!("laser layout {text:?}, level {}: {e}", i + 1)))?;
            levels.push(groups);
        }
        let layout = Layout { levels };
        layout.check(column_count)?;
        Ok(layout)
    }

    /// Checks the invariant (partitions, containment) for `column_count` columns.
    pub fn check(&self, column_count: usize) -> Result<()> {
        if self.levels.is_empty() {
            return Err(Error::invalid("a laser layout needs at least one level"));
        }
        let mut above: Vec<Vec<ColumnId>> = vec![(0..column_count as ColumnId).collect()];
        for (i, groups) in self.levels.iter().enumerate() {
            let mut seen = vec![false; column_count];
            for group in groups {
                if group.is_empty() || group.windows(2).any(|w| w[0] >= w[1]) {
                    return Err(Error::invalid(format!(
                        "laser layout level {}: a group is empty or unsorted",
                        i + 1
                    )));
                }
                for &id in group {
                    let slot = seen.get_mut(usize::from(id)).ok_or_else(|| {
                        Error::invalid(format!("laser layout level {}: no column {id}", i + 1))
                    })?;
                    if std::mem::replace(slot, true) {
                        return Err(Error::invalid(format!(
                            "laser layout level {}: column {id} twice",
                            i + 1
                        )));
                    }
                }
                if !above.iter().any(|parent| group.iter().all(|id| parent.contains(id))) {
                    return Err(Error::invalid(format!(
                        "laser layout level {}: group {} is not within one group of the level above \
                         (column-group containment)",
                        i + 1,
                        group_text(group)
                    )));
                }
            }
            if let Some(missing) = seen.iter().position(|s| !s) {
                return Err(Error::invalid(format!(
                    "laser layout level {}: column {missing} in no group",
                    i + 1
                )));
            }
            above = groups.clone();
        }
        Ok(())
    }

    /// The layout in `parse`'s syntax.
    pub fn to_text(&self) -> String {
        let levels: Vec<String> = self
            .levels
            .iter()
            .map(|groups| groups.iter().map(|g| group_text(g)).collect::<Vec<_>>().join("|"))
            .collect();
        levels.join("/")
    }
}

fn parse_level(spec: &str, column_count: usize) -> std::result::Result<Vec<Vec<ColumnId>>, String> {
    match spec {
        "row" => Ok(vec![(0..column_count as ColumnId).collect()]),
        "column" => Ok((0..column_count as ColumnId).map(|id| vec![id]).collect()),
        _ => spec.split('|').map(parse_columns).collect(),
    }
}

/// A comma list of column indices and ranges (`0-14,20`), ascending (a column given twice
/// stays twice: a layout refuses it).
pub fn parse_columns(text: &str) -> std::result::Result<Vec<ColumnId>, String> {
    let mut ids = Vec::new();
    for part in text.split(',').map(str::trim) {
        let (from, to) = part.split_once('-').unwrap_or((part, part));
        let parse = |s: &str| {
            s.trim().parse::<ColumnId>().map_err(|_| format!("{part:?} is not a column index or range"))
        };
        let (from, to) = (parse(from)?, parse(to)?);
        if from > to {
            return Err(format!("range {part:?} runs backwards"));
        }
        ids.extend(from..=to);
    }
    ids.sort_unstable();
    Ok(ids)
}

/// A group in the layout syntax: runs of consecutive columns as ranges.
pub fn group_text(group: &[ColumnId]) -> String {
    let mut text = String::new();
    let mut i = 0;
    while i < group.len() {
        let mut j = i;
        while j + 1 < group.len() && group[j + 1] == group[j] + 1 {
            j += 1;
        }
        if !text.is_empty() {
            text.push(',');
        }
        let _ = if i == j { write!(text, "{}", group[i]) } else { write!(text, "{}-{}", group[i], group[j]) };
        i = j + 1;
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_parse_and_print_back() {
        let layout = Layout::parse("row/0-14|15-29/0-14|15-19|20-29/column", 30).unwrap();
        assert_eq!(layout.groups(1), &[(0..30).collect::<Vec<ColumnId>>()]);
        assert_eq!(layout.groups(3).len(), 3);
        assert_eq!(layout.groups(4).len(), 30);
        assert_eq!(layout.groups(9).len(), 30, "deeper levels repeat the last");
        assert_eq!(
            layout.to_text(),
            format!(
                "0-29/0-14|15-29/0-14|15-19|20-29/{}",
                (0..30).map(|i| i.to_string()).collect::<Vec<_>>().join("|")
            )
        );
        assert_eq!(Layout::parse(&layout.to_text(), 30).unwrap(), layout);
        assert_eq!(Layout::parse("0,2|1,3", 4).unwrap().groups(1), &[vec![0, 2], vec![1, 3]]);
    }

    #[test]
    fn layouts_that_break_containment_or_miss_columns_are_refused() {
        let refused = |text: &str| match Layout::parse(text, 4) {
            Err(Error::InvalidArgument(m)) => m,
            other => panic!("{text}: {other:?}"),
        };
        assert!(refused("0-1|2-3/1-2|0|3").contains("containment"));
        assert!(refused("0-2").contains("column 3 in no group"));
        assert!(refused("0-3|1").contains("twice"));
        assert!(refused("0-4").contains("no column 4"));
        assert!(refused("a-b").contains("not a column index"));
        assert!(refused("3-1").contains("backwards"));
    }

    #[test]
    fn column_sets_place_their_columns_in_a_row_of_their_own() {
        let columns = Columns::Fixed(vec![4, 8, 2, 1]);
        let set = ColumnSet::new(vec![1, 3], &columns);
        assert_eq!((set.row_bytes(), set.range(1)), (9, 8..9));
        assert_eq!(set.position(3), Some(1));
        assert_eq!(set.position(2), None);
        let all = columns.all();
        assert!(set.is_subset_of(&all) && set.intersects(&all));
        assert_eq!(all.intersection(&set, &columns), set);
    }
}
