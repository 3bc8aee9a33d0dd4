//! PNG charts for benchmark output: data in, an 800x500 PNG out.
//!
//! Benchmarks (`locus bench ... --out DIR`) write their JSON and then hand the same
//! numbers to this crate, which draws a [`LineChart`] (optionally on log axes; a CDF is a
//! line chart built with [`cdf_series`]) or a grouped [`BarChart`].
//!
//! How it works: the input is validated first (finite values, positive values on log
//! axes, one bar value per group, the limits below), so bad data is a [`PlotError`] that
//! names the file, the series and the point, and never a panic or a misleading picture.
//! The chart is then drawn with `plotters` into an in-memory RGB buffer, encoded with
//! `png` to `PATH.partial` and renamed over `PATH`, so a failed plot leaves no half file.
//! Text uses DejaVu Sans, embedded in the binary and registered with plotters' `ab_glyph`
//! font table on first use, so no system font lookup happens (license:
//! `assets/LICENSE-DejaVu.txt`); a small backend decorator lays glyphs out itself because
//! plotters 0.3.7 misplaces them. Log axes put ticks on powers of two when the data spans
//! at most [`LOG2_TICKS_MAX`] of them (payload sizes), else on powers of ten.
//!
//! ```
//! use locus_plot::{cdf_series, LineChart, Series};
//!
//! let dir = tempfile::tempdir()?;
//! let chart = LineChart {
//!     title: "GET latency by payload size".into(),
//!     x_label: "payload (bytes)".into(),
//!     y_label: "latency (us)".into(),
//!     x_log: true,
//!     y_log: false,
//!     series: vec![Series {
//!         label: "tcp".into(),
//!         points: vec![(64.0, 11.0), (4096.0, 14.5), (65536.0, 40.0)],
//!     }],
//! };
//! chart.write_png(&dir.path().join("latency.png"))?;
//!
//! let cdf = LineChart {
//!     title: "GET latency CDF".into(),
//!     x_label: "latency (us)".into(),
//!     y_label: "fraction of ops".into(),
//!     x_log: false,
//!     y_log: false,
//!     series: vec![cdf_series("tcp", &[12.0, 11.0, 15.0, 40.0])],
//! };
//! cdf.write_png(&dir.path().join("latency_cdf.png"))?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod axis;
mod bar;
mod line;
mod render;
mod text;

use std::path::PathBuf;

pub use bar::BarChart;
pub use line::{cdf_series, LineChart, Series};

/// Width of every image this crate writes.
pub const WIDTH_PX: u32 = 800;
/// Height of every image this crate writes.
pub const HEIGHT_PX: u32 = 500;
/// Most series (lines, or bars per group) in one chart: one distinct colour each.
pub const SERIES_COUNT_MAX: usize = 10;
/// Most points in one line series; [`cdf_series`] thins its output to [`CDF_POINTS_MAX`].
pub const SERIES_POINTS_MAX: usize = 100_000;
/// Most points [`cdf_series`] returns: far more than the plot's 500 px of height resolve.
pub const CDF_POINTS_MAX: usize = 2_000;
/// Most groups (x categories) in one bar chart, so that their labels stay readable.
pub const BAR_GROUP_COUNT_MAX: usize = 32;
/// A log axis spanning at most this many powers of two is ticked at powers of two.
pub const LOG2_TICKS_MAX: usize = 12;

/// Why a chart could not be written. Every message starts with the output path.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlotError {
    /// A value is NaN or infinite.
    #[error(
        "plot {}: series {series:?} point {index} has {axis} = {value}; plotted values must be finite",
        .path.display()
    )]
    NonFinite {
        /// The chart that was being written.
        path: PathBuf,
        /// Label of the offending series.
        series: String,
        /// Index of the point (line chart) or group (bar chart) in that series.
        index: usize,
        /// `"x"` or `"y"`.
        axis: &'static str,
        /// The offending value.
        value: f64,
    },
    /// A value is zero or negative on an axis drawn in log scale.
    #[error(
        "plot {}: series {series:?} point {index} has {axis} = {value}, which a log axis cannot show; \
         drop non-positive points or set {axis}_log = false",
        .path.display()
    )]
    NonPositiveOnLogAxis {
        /// The chart that was being written.
        path: PathBuf,
        /// Label of the offending series.
        series: String,
        /// Index of the point in that series.
        index: usize,
        /// `"x"` or `"y"`.
        axis: &'static str,
        /// The offending value.
        value: f64,
    },
    /// A bar series does not have exactly one value per group.
    #[error(
        "plot {}: bar series {series:?} has {values_count} values for {groups_count} groups; \
         give exactly one value per group",
        .path.display()
    )]
    BarShape {
        /// The chart that was being written.
        path: PathBuf,
        /// Label of the offending series.
        series: String,
        /// Values the series has.
        values_count: usize,
        /// Groups the chart has.
        groups_count: usize,
    },
    /// The chart holds more of something than the crate's limits allow.
    #[error(
        "plot {}: {count} {what} exceeds the limit of {max}; split the data over several charts",
        .path.display()
    )]
    TooMany {
        /// The chart that was being written.
        path: PathBuf,
        /// What there is too much of, e.g. `"series"`.
        what: &'static str,
        /// How many there are.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// plotters failed while drawing into the in-memory buffer.
    #[error("plot {}: drawing failed: {message}", .path.display())]
    Draw {
        /// The chart that was being written.
        path: PathBuf,
        /// plotters' description of the failure.
        message: String,
    },
    /// The PNG encoder failed.
    #[error("plot {}: PNG encoding failed: {source}", .path.display())]
    Encode {
        /// The chart that was being written.
        path: PathBuf,
        /// The encoder's error.
        #[source]
        source: png::EncodingError,
    },
    /// Creating, writing or renaming the file failed (missing directory, permissions, full disk).
    #[error("plot {}: cannot write the file: {source}", .path.display())]
    Io {
        /// The chart that was being written.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}
