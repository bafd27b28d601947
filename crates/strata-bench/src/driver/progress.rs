//! The progress bar (indicatif, on stderr; invisible when stderr is not a terminal or `--quiet`).

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct Progress {
    bar: Option<ProgressBar>,
    by_time: bool,
}

impl Progress {
    /// Counts operations up to `total_ops`, or (for `--duration`) elapsed time.
    pub fn new(label: &str, total_ops: Option<u64>, duration: Option<Duration>, quiet: bool) -> Progress {
        if quiet {
            return Progress { bar: None, by_time: false };
        }
        let (len, by_time) = match (total_ops, duration) {
            (_, Some(d)) => (d.as_millis() as u64, true),
            (Some(n), None) => (n, false),
            (None, None) => (0, false),
        };
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr_with_hz(5));
        let template = if by_time {
            "{prefix} [{bar:25}] {elapsed_precise} {msg}"
        } else {
            "{prefix} [{bar:25}] {human_pos}/{human_len} {msg}"
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(label.to_string());
        Progress { bar: Some(bar), by_time }
    }

    pub fn update(&self, ops_done: u64, elapsed: Duration) {
        if let Some(bar) = &self.bar {
            let rate = ops_done as f64 / elapsed.as_secs_f64().max(1e-9);
            if self.by_time {
                bar.set_position(elapsed.as_millis() as u64);
                bar.set_message(format!("{} ops, {}", crate::report::fmt_count(ops_done), rate_text(rate)));
            } else {
                bar.set_position(ops_done);
                bar.set_message(rate_text(rate));
            }
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// `470.8k ops/s`: short enough for an 80-column terminal line.
fn rate_text(ops_per_sec: f64) -> String {
    if ops_per_sec >= 1e6 {
        format!("{:.2}M ops/s", ops_per_sec / 1e6)
    } else if ops_per_sec >= 1e3 {
        format!("{:.1}k ops/s", ops_per_sec / 1e3)
    } else {
        format!("{ops_per_sec:.0} ops/s")
    }
}
