//! `strata bench plot`: throughput and latency bar charts from `--json` result files, as SVG and
//! PNG (plotters; PNG text through ab_glyph with a TrueType font found on the system), and, for
//! runs with `--timeline`, throughput over time (`timeline.rs`).

mod timeline;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::ranged1d::{AsRangedCoord, SegmentedCoord, ValueFormatter};
use plotters::coord::types::RangedCoordusize;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// The subset of a result file the charts need.
#[derive(serde::Deserialize)]
struct ResultFile {
    results: Vec<ResultRow>,
}

#[derive(serde::Deserialize)]
struct ResultRow {
    engine: String,
    workload: String,
    #[serde(default)]
    status: Option<String>,
    throughput_ops_per_sec: f64,
    latency_us: Percentiles,
    #[serde(default)]
    timeline_interval_secs: Option<f64>,
    #[serde(default)]
    timeline_ops_per_sec: Vec<f64>,
}

#[derive(serde::Deserialize)]
struct Percentiles {
    p50: f64,
    p99: f64,
}

/// Bars to draw: one series per engine (per file when an engine appears in several files).
struct Chart {
    workloads: Vec<String>,
    series: Vec<Series>,
    /// The `--timeline` interval of the first result that has one.
    timeline_interval_secs: Option<f64>,
}

struct Series {
    label: String,
    /// Per workload: (throughput, p50 µs, p99 µs); medians over `--repeat` rounds.
    values: Vec<Option<(f64, f64, f64)>>,
    /// Per workload: throughput (min, max) over the rounds, drawn as a whisker when they differ.
    spreads: Vec<Option<(f64, f64)>>,
    /// Per workload: ops/s per timeline interval (empty without `--timeline`).
    timelines: Vec<Vec<f64>>,
}

/// Fonts tried in order; `STRATA_BENCH_FONT` overrides.
const FONT_CANDIDATES: [&str; 5] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",
];

/// Registers a system font as "sans-serif" once per process.
fn ensure_font() -> Result<(), String> {
    static FONT: OnceLock<Result<(), String>> = OnceLock::new();
    FONT.get_or_init(|| {
        let override_path = std::env::var("STRATA_BENCH_FONT").ok();
        let candidates = override_path.iter().map(String::as_str).chain(FONT_CANDIDATES);
        for path in candidates {
            if let Ok(bytes) = std::fs::read(path) {
                // plotters keeps fonts for the life of the process; this runs once.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return Ok(());
                }
            }
        }
        Err(format!(
            "no usable TrueType font found (tried {}); install fonts-dejavu-core or set STRATA_BENCH_FONT to a .ttf file",
            FONT_CANDIDATES.first().copied().unwrap_or_default()
        ))
    })
    .clone()
}

/// Width of the legend strip right of each chart, at least and at most.
const LEGEND_MIN_WIDTH_PX: u32 = 190;
const LEGEND_MAX_WIDTH_PX: u32 = 600;

impl Chart {
    /// The legend strip's width: room for the longest label (about 8 px a character at the
    /// legend's 15 px font, after the colour box), so `engine:knob=value` labels that differ
    /// only at their end are told apart.
    fn legend_width_px(&self) -> u32 {
        let longest = self.series.iter().map(|s| s.label.chars().count()).max().unwrap_or(0);
        (44 + 8 * longest as u32).clamp(LEGEND_MIN_WIDTH_PX, LEGEND_MAX_WIDTH_PX)
    }
}

/// Reads `files` and writes throughput.{svg,png} and latency.{svg,png} into `out`, and
/// timeline.{svg,png} when the files hold `--timeline` series.
pub fn plot(files: &[PathBuf], out: &Path) -> Result<Vec<PathBuf>, String> {
    let chart = load(files)?;
    ensure_font()?;
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    // Wide enough for ~40 px per bar (value labels fit), within sane image sizes.
    let width = (220 + chart.legend_width_px() + 40 * chart.slots() as u32).clamp(900, 3000);
    let mut written = Vec::new();
    // An SVG and a PNG of the same drawing (plotters backends are different types, so the drawing
    // code is instantiated once per backend).
    macro_rules! svg_and_png {
        ($name:expr, $size:expr, $draw:expr) => {{
            let (svg, png) = (out.join(format!("{}.svg", $name)), out.join(format!("{}.png", $name)));
            {
                let root = SVGBackend::new(&svg, $size).into_drawing_area();
                $draw(&root)?;
                root.present().map_err(|e| format!("writing {}: {e}", svg.display()))?;
            }
            {
                let root = BitMapBackend::new(&png, $size).into_drawing_area();
                $draw(&root)?;
                root.present().map_err(|e| format!("writing {}: {e}", png.display()))?;
            }
            written.push(svg);
            written.push(png);
        }};
    }
    for (name, height) in [("throughput", 560u32), ("latency", 900u32)] {
        svg_and_png!(name, (width, height), |root| draw(name, &chart, root));
    }
    if let Some(height) = timeline::height_px(&chart) {
        svg_and_png!("timeline", (1100, height), |root| timeline::draw(&chart, root));
    }
    Ok(written)
}

impl Chart {
    /// Bars plus one gap between workload clusters.
    fn slots(&self) -> usize {
        (self.workloads.len() * (self.series.len() + 1)).saturating_sub(1)
    }

    fn values<'a>(&'a self, pick: impl Fn((f64, f64, f64)) -> f64 + 'a) -> impl Iterator<Item = f64> + 'a {
        self.series.iter().flat_map(|s| s.values.iter().flatten()).map(move |v| pick(*v))
    }
}

fn load(files: &[PathBuf]) -> Result<Chart, String> {
    let mut parsed = Vec::new();
    for file in files {
        let text =
            std::fs::read_to_string(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let data: ResultFile = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not a strata bench result file: {e}", file.display()))?;
        let stem =
            file.file_stem().map_or_else(|| file.display().to_string(), |s| s.to_string_lossy().into_owned());
        parsed.push((stem, data));
    }
    let mut workloads: Vec<String> = Vec::new();
    let mut keys: Vec<(String, String)> = Vec::new(); // (engine, file stem)
    for (stem, data) in &parsed {
        for r in data.results.iter().filter(|r| r.status.as_deref().unwrap_or("ok") == "ok") {
            if !workloads.contains(&r.workload) {
                workloads.push(r.workload.clone());
            }
            if !keys.iter().any(|(e, s)| e == &r.engine && s == stem) {
                keys.push((r.engine.clone(), stem.clone()));
            }
        }
    }
    if workloads.is_empty() {
        return Err("the result files hold no successful results to plot".into());
    }
    let series = keys
        .iter()
        .map(|(engine, stem)| {
            let ambiguous = keys.iter().filter(|(e, _)| e == engine).count() > 1;
            let label = if ambiguous { format!("{engine} ({stem})") } else { engine.clone() };
            let rows = parsed.iter().filter(|(s, _)| s == stem).flat_map(|(_, d)| d.results.iter());
            let rows: Vec<&ResultRow> =
                rows.filter(|r| &r.engine == engine && r.status.as_deref().unwrap_or("ok") == "ok").collect();
            let row = |w: &String| rows.iter().find(|r| &r.workload == w);
            let rounds = |w: &String| rows.iter().filter(|r| &r.workload == w).copied().collect::<Vec<_>>();
            let values = workloads.iter().map(|w| median_values(&rounds(w))).collect();
            let spreads = workloads
                .iter()
                .map(|w| {
                    let tp: Vec<f64> = rounds(w).iter().map(|r| r.throughput_ops_per_sec).collect();
                    crate::report::summary::Spread::of(&tp).map(|s| (s.min, s.max))
                })
                .collect();
            let timelines = workloads
                .iter()
                .map(|w| row(w).map(|r| r.timeline_ops_per_sec.clone()).unwrap_or_default())
                .collect();
            Series { label, values, spreads, timelines }
        })
        .collect();
    let timeline_interval_secs = parsed
        .iter()
        .flat_map(|(_, d)| d.results.iter())
        .find(|r| !r.timeline_ops_per_sec.is_empty())
        .and_then(|r| r.timeline_interval_secs);
    Ok(Chart { workloads, series, timeline_interval_secs })
}

/// (throughput, p50, p99), each the median over the rows (the `--repeat` rounds of one engine).
fn median_values(rows: &[&ResultRow]) -> Option<(f64, f64, f64)> {
    use crate::report::summary::Spread;
    let median = |f: &dyn Fn(&ResultRow) -> f64| {
        Spread::of(&rows.iter().map(|r| f(r)).collect::<Vec<_>>()).map(|s| s.median)
    };
    Some((
        median(&|r| r.throughput_ops_per_sec)?,
        median(&|r| r.latency_us.p50)?,
        median(&|r| r.latency_us.p99)?,
    ))
}

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

fn draw<DB: DrawingBackend>(name: &str, chart: &Chart, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| format!("drawing the {name} chart: {e}");
    root.fill(&WHITE).map_err(err)?;
    let (width, _) = root.dim_in_pixel();
    let (plots, legend) = root.split_horizontally(width.saturating_sub(chart.legend_width_px()));
    draw_legend(&legend, chart).map_err(err)?;
    let throughput = |v: (f64, f64, f64)| v.0;
    let p50 = |v: (f64, f64, f64)| v.1;
    let p99 = |v: (f64, f64, f64)| v.2;
    if name == "throughput" {
        let highest_max = chart.series.iter().flat_map(|s| s.spreads.iter().flatten()).map(|s| s.1);
        let top = chart.values(throughput).chain(highest_max).fold(0.0, f64::max).max(1e-9) * 1.12;
        let title = if chart.series.iter().any(|s| s.spreads.iter().flatten().any(|(lo, hi)| lo < hi)) {
            "Throughput (ops/s, higher is better; median, whisker min–max)"
        } else {
            "Throughput (ops/s, higher is better)"
        };
        bars(&plots, chart, title, "ops/s", 0.0..top, 0.0, throughput)
    } else {
        // Log scale: tail latencies differ from medians by orders of magnitude.
        let (top, bottom) = plots.split_vertically(450);
        for (area, title, pick) in [
            (&top, "Latency p50 (µs, log scale, lower is better)", p50 as fn((f64, f64, f64)) -> f64),
            (&bottom, "Latency p99 (µs, log scale, lower is better)", p99),
        ] {
            let (lo, hi) = log_bounds(chart.values(pick));
            bars(area, chart, title, "µs", (lo..hi).log_scale(), lo, pick)?;
        }
        Ok(())
    }
}

/// Powers of ten around the positive values.
fn log_bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (min, max) =
        values.filter(|v| *v > 0.0).fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if max <= 0.0 {
        return (0.01, 1.0);
    }
    (10f64.powf(min.log10().floor()), 10f64.powf(max.log10().ceil()) * 1.5)
}

fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    chart: &Chart,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    area.draw(&Text::new("engine", (10, 40), ("sans-serif", 16).into_font()))?;
    for (i, series) in chart.series.iter().enumerate() {
        let y = 66 + 24 * i as i32;
        let color = COLORS[i % COLORS.len()];
        area.draw(&Rectangle::new([(10, y), (26, y + 16)], color.filled()))?;
        area.draw(&Text::new(series.label.clone(), (34, y), ("sans-serif", 15).into_font()))?;
    }
    Ok(())
}

/// Grouped bars: one cluster per workload, one bar per series; bars rise from `floor`.
fn bars<DB: DrawingBackend, Y>(
    area: &DrawingArea<DB, Shift>,
    chart: &Chart,
    title: &str,
    y_desc: &str,
    y_range: Y,
    floor: f64,
    pick: impl Fn((f64, f64, f64)) -> f64,
) -> Result<(), String>
where
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| format!("drawing '{title}': {e}");
    let slots = chart.slots();
    let mut ctx = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(80)
        .build_cartesian_2d((0..slots).into_segmented(), y_range)
        .map_err(err)?;
    ctx.configure_mesh()
        .disable_x_mesh()
        .light_line_style(WHITE)
        // Workload names are drawn below (centred per cluster); no per-bar tick labels. (A label
        // count of 0 makes plotters loop forever on integer ranges.)
        .x_labels(1)
        .x_label_formatter(&|_| String::new())
        .x_desc("workload")
        .y_desc(y_desc)
        .y_label_formatter(&|v| short_number(*v))
        .label_style(("sans-serif", 15))
        .draw()
        .map_err(err)?;
    for series in 0..chart.series.len() {
        draw_series_bars(&mut ctx, chart, series, title, floor, &pick)?;
    }
    draw_workload_names(area, &ctx, chart, title, floor)
}

/// The bar chart's coordinates: one segment per bar slot, `f64` upwards.
type BarContext<'a, DB, YC> = ChartContext<'a, DB, Cartesian2d<SegmentedCoord<RangedCoordusize>, YC>>;

/// Series `index`'s bar in every cluster it has a value for, each labelled with its value, and
/// on throughput charts the min–max whisker over the rounds.
fn draw_series_bars<DB: DrawingBackend, YC: Ranged<ValueType = f64>>(
    ctx: &mut BarContext<'_, DB, YC>,
    chart: &Chart,
    index: usize,
    title: &str,
    floor: f64,
    pick: &impl Fn((f64, f64, f64)) -> f64,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| format!("drawing '{title}': {e}");
    let series = &chart.series[index];
    let per_cluster = chart.series.len() + 1;
    let color = COLORS[index % COLORS.len()];
    let points: Vec<(usize, f64)> = series
        .values
        .iter()
        .enumerate()
        .filter_map(|(cluster, v)| Some((cluster * per_cluster + index, pick((*v)?))))
        .filter(|(_, value)| *value > floor)
        .collect();
    ctx.draw_series(points.iter().map(|&(slot, value)| {
        let mut bar = Rectangle::new(
            [(SegmentValue::Exact(slot), floor), (SegmentValue::Exact(slot + 1), value)],
            color.filled(),
        );
        bar.set_margin(0, 0, 3, 3);
        bar
    }))
    .map_err(err)?;
    // A value's label sits above its whisker, when it has one.
    let label_at = |slot: usize, value: f64| {
        let whisker_top = series.spreads.get(slot / per_cluster).copied().flatten().map_or(0.0, |s| s.1);
        if title.starts_with("Throughput") {
            value.max(whisker_top)
        } else {
            value
        }
    };
    let text_style =
        TextStyle::from(("sans-serif", 12).into_font()).pos(Pos::new(HPos::Center, VPos::Bottom));
    ctx.draw_series(points.iter().map(|&(slot, value)| {
        let at = (SegmentValue::CenterOf(slot), label_at(slot, value));
        Text::new(short_number(value), at, text_style.clone())
    }))
    .map_err(err)?;
    if title.starts_with("Throughput") {
        let whiskers = series.spreads.iter().enumerate().filter_map(|(cluster, spread)| {
            let (lo, hi) = (*spread)?;
            let at = SegmentValue::CenterOf(cluster * per_cluster + index);
            (lo < hi).then(|| PathElement::new(vec![(at.clone(), lo), (at, hi)], BLACK.stroke_width(2)))
        });
        ctx.draw_series(whiskers).map_err(err)?;
    }
    Ok(())
}

/// Workload names centred under each cluster, in the area's pixel space.
fn draw_workload_names<DB: DrawingBackend, YC: Ranged<ValueType = f64>>(
    area: &DrawingArea<DB, Shift>,
    ctx: &BarContext<'_, DB, YC>,
    chart: &Chart,
    title: &str,
    floor: f64,
) -> Result<(), String> {
    let per_cluster = chart.series.len() + 1;
    let (base_x, base_y) = area.get_base_pixel();
    let name_style = TextStyle::from(("sans-serif", 15).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
    for (cluster, workload) in chart.workloads.iter().enumerate() {
        let first = cluster * per_cluster;
        let (left, axis_y) = ctx.backend_coord(&(SegmentValue::Exact(first), floor));
        let (right, _) = ctx.backend_coord(&(SegmentValue::Exact(first + chart.series.len()), floor));
        let at = ((left + right) / 2 - base_x, axis_y - base_y + 8);
        area.draw(&Text::new(workload.clone(), at, name_style.clone()))
            .map_err(|e| format!("drawing '{title}': {e}"))?;
    }
    Ok(())
}

/// `1.23M`, `45.6k`, `7.89`.
fn short_number(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.2}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_numbers() {
        assert_eq!(short_number(1_234_567.0), "1.23M");
        assert_eq!(short_number(45_600.0), "45.6k");
        assert_eq!(short_number(7.891), "7.9");
        assert_eq!(short_number(0.5), "0.50");
    }

    #[test]
    fn the_legend_is_wide_enough_for_the_longest_label() {
        let series = |label: &str| Series {
            label: label.to_string(),
            values: Vec::new(),
            spreads: Vec::new(),
            timelines: Vec::new(),
        };
        let chart = |labels: &[&str]| Chart {
            workloads: Vec::new(),
            series: labels.iter().map(|l| series(l)).collect(),
            timeline_interval_secs: None,
        };
        assert_eq!(chart(&["turtle", "rocksdb"]).legend_width_px(), LEGEND_MIN_WIDTH_PX);
        let long = chart(&["turtle:checkpoint_distance=64MiB", "turtle:checkpoint_distance=200MiB"]);
        assert!(long.legend_width_px() >= 44 + 8 * 33, "{}", long.legend_width_px());
        assert_eq!(chart(&[&"x".repeat(500)]).legend_width_px(), LEGEND_MAX_WIDTH_PX);
    }

    #[test]
    fn bad_files_are_one_line_errors() {
        let tmp = tempfile::tempdir().unwrap();
        let bad = tmp.path().join("bad.json");
        std::fs::write(&bad, "{ not json").unwrap();
        let e = plot(&[bad], tmp.path()).unwrap_err();
        assert!(e.contains("not a strata bench result file") && !e.contains('\n'), "{e}");
        let e = plot(&[tmp.path().join("missing.json")], tmp.path()).unwrap_err();
        assert!(e.contains("cannot read"), "{e}");
        let empty = tmp.path().join("empty.json");
        std::fs::write(&empty, r#"{"results": []}"#).unwrap();
        assert!(plot(&[empty], tmp.path()).unwrap_err().contains("no successful results"));
    }
}
