//! Insert forecasting (paper §4.6); being written.
