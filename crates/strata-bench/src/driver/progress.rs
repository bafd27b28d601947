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
            "{prefix:>24} [{bar:30}] {elapsed_precise} {msg}"
        } else {
            "{prefix:>24} [{bar:30}] {human_pos}/{human_len} ops {msg}"
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
                bar.set_message(format!("{ops_done} ops, {rate:.0} ops/s"));
            } else {
                bar.set_position(ops_done);
                bar.set_message(format!("{rate:.0} ops/s"));
            }
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
