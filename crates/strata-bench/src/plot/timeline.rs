//! `timeline.{svg,png}`: throughput over time, one panel per workload that has `--timeline`
//! series, one line per engine (colours as in the bar charts).

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{draw_legend, short_number, Chart, COLORS};

const PANEL_HEIGHT_PX: u32 = 300;

/// Workloads (indices into `chart.workloads`) with at least one timeline.
fn panels(chart: &Chart) -> Vec<usize> {
    (0..chart.workloads.len())
        .filter(|&w| chart.series.iter().any(|s| s.timelines.get(w).is_some_and(|t| !t.is_empty())))
        .collect()
}

/// Image height, or `None` when no result has a timeline.
pub fn height_px(chart: &Chart) -> Option<u32> {
    let n = panels(chart).len() as u32;
    (n > 0).then_some(n * PANEL_HEIGHT_PX)
}

pub fn draw<DB: DrawingBackend>(chart: &Chart, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| format!("drawing the timeline chart: {e}");
    root.fill(&WHITE).map_err(err)?;
    let (width, _) = root.dim_in_pixel();
    let (plots, legend) = root.split_horizontally(width.saturating_sub(chart.legend_width_px()));
    draw_legend(&legend, chart).map_err(err)?;
    let interval = chart.timeline_interval_secs.unwrap_or(1.0);
    let panels = panels(chart);
    for (area, &w) in plots.split_evenly((panels.len(), 1)).iter().zip(&panels) {
        let lines = chart.series.iter().map(|s| s.timelines.get(w).map(Vec::as_slice).unwrap_or(&[]));
        let longest = lines.clone().map(<[f64]>::len).max().unwrap_or(0).max(1);
        let top = lines.clone().flatten().copied().fold(0.0, f64::max).max(1e-9) * 1.1;
        let title = format!("{}: throughput per {interval} s (ops/s)", chart.workloads[w]);
        let mut ctx = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..longest as f64 * interval, 0.0..top)
            .map_err(err)?;
        ctx.configure_mesh()
            .x_desc("seconds into the phase")
            .y_label_formatter(&|v| short_number(*v))
            .label_style(("sans-serif", 13))
            .draw()
            .map_err(err)?;
        for (i, line) in lines.enumerate() {
            let color = COLORS[i % COLORS.len()];
            // Each interval's rate is plotted at the interval's end.
            let points = line.iter().enumerate().map(|(k, v)| ((k + 1) as f64 * interval, *v));
            ctx.draw_series(LineSeries::new(points, color.stroke_width(2))).map_err(err)?;
        }
    }
    Ok(())
}
