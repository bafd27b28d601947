//! `strata advise --trace FILE`: LASER's design advisor (engine-laser's `advisor`, paper §6) on
//! a workload trace — the per-level layout it picks and its predicted cost beside rows and
//! columns at every level, and the `layout` option that creates a store with it.

use std::io::Write;
use std::path::Path;

use engine_laser::advisor::{advise, layout_costs, Trace};
use engine_laser::Layout;
use strata::Error;

/// Reads `trace`, runs the advisor over `levels` levels (default: the trace's) and prints the
/// layout per level with the model's predicted cost.
pub fn run(trace: &Path, levels: Option<usize>, out: &mut dyn Write) -> Result<(), Error> {
    let text = std::fs::read_to_string(trace)
        .map_err(|e| Error::invalid(format!("cannot read the trace {}: {e}", trace.display())))?;
    let trace = Trace::parse(&text)?;
    let levels = levels.unwrap_or(trace.levels).max(1);
    let advice = advise(&trace.params, &trace.workload, levels);
    let rows = layout_costs(&trace.params, &trace.workload, &Layout::rows(trace.params.columns), levels);
    let columns = Layout::parse("column", trace.params.columns)?;
    let columns = layout_costs(&trace.params, &trace.workload, &columns, levels);
    let io = |e: std::io::Error| Error::io("writing to stdout", e);
    let p = &trace.params;
    writeln!(
        out,
        "model: {} columns, T = {}, B = {:.1} rows per block, {levels} levels",
        p.columns, p.size_ratio, p.rows_per_block
    )
    .map_err(io)?;
    writeln!(out, "level  predicted cost: advised / rows / columns  groups").map_err(io)?;
    for level in 1..=levels {
        let groups: Vec<String> =
            advice.layout.groups(level).iter().map(|g| engine_laser::layout_group_text(g)).collect();
        writeln!(
            out,
            "{level:>5}  {:>12.1} / {:>12.1} / {:>12.1}  {}",
            advice.level_costs[level - 1],
            rows[level - 1],
            columns[level - 1],
            groups.join(" | ")
        )
        .map_err(io)?;
    }
    let total = |c: &[f64]| c.iter().sum::<f64>();
    writeln!(
        out,
        "total  {:>12.1} / {:>12.1} / {:>12.1}",
        advice.total_cost(),
        total(&rows),
        total(&columns)
    )
    .map_err(io)?;
    writeln!(out, "create with: --option layout={}", advice.layout.to_text()).map_err(io)?;
    Ok(())
}
