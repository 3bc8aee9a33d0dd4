//! Line charts (linear or log axes) and the CDF helper that feeds them.

use std::path::Path;

use plotters::prelude::*;

use crate::axis::Axis;
use crate::render::{self, LegendMark};
use crate::{PlotError, CDF_POINTS_MAX, SERIES_COUNT_MAX, SERIES_POINTS_MAX};

/// Series with at most this many points get a dot on each point (a single point is then
/// visible too); denser series are drawn as plain lines.
const MARKER_POINTS_MAX: usize = 64;

/// One named line: its points are joined in the order given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    /// Legend text; an empty label shows as "series N".
    pub label: String,
    /// `(x, y)` pairs, drawn in this order.
    pub points: Vec<(f64, f64)>,
}

/// A chart of one or more [`Series`] with a legend, optionally on log axes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LineChart {
    /// Text above the plot.
    pub title: String,
    /// Horizontal axis title, with units, e.g. `"payload (bytes)"`.
    pub x_label: String,
    /// Vertical axis title, with units, e.g. `"latency (us)"`.
    pub y_label: String,
    /// Draw x on a log scale; every x must then be > 0.
    pub x_log: bool,
    /// Draw y on a log scale; every y must then be > 0.
    pub y_log: bool,
    /// The lines, at most [`SERIES_COUNT_MAX`], each at most [`SERIES_POINTS_MAX`] points.
    pub series: Vec<Series>,
}

impl LineChart {
    /// Draws the chart and writes it to `path` as an 800x500 PNG (via `PATH.partial`).
    ///
    /// No series, or empty ones, give empty axes; a single point gets a range around it.
    /// Errors if a value is not finite, is <= 0 on a log axis, or a limit is exceeded.
    pub fn write_png(&self, path: &Path) -> Result<(), PlotError> {
        self.validate(path)?;
        let points = || self.series.iter().flat_map(|s| s.points.iter());
        let x = Axis::fit(points().map(|p| p.0), self.x_log);
        let y = Axis::fit(points().map(|p| p.1), self.y_log);
        let labels: Vec<String> = self
            .series
            .iter()
            .enumerate()
            .map(|(i, s)| render::legend_label(i, &s.label))
            .collect();
        render::write_png_with(path, |root| {
            let area = render::frame(root, &self.title, &labels, LegendMark::Line)?;
            let y_ticks: Vec<String> = y.bold.iter().map(|t| y.label(*t)).collect();
            let mut chart = ChartBuilder::on(&area)
                .margin(render::MARGIN_PX)
                .x_label_area_size(50)
                .y_label_area_size(render::y_label_area_px(&area, &y_ticks)?)
                .build_cartesian_2d(x.coord(), y.coord())?;
            let x_format = |t: &f64| x.label(*t);
            let y_format = |t: &f64| y.label(*t);
            chart
                .configure_mesh()
                .x_desc(self.x_label.as_str())
                .y_desc(self.y_label.as_str())
                .x_label_formatter(&x_format)
                .y_label_formatter(&y_format)
                .label_style(render::text_style(render::TICK_FONT_PX))
                .axis_desc_style(render::text_style(render::AXIS_DESC_FONT_PX))
                .bold_line_style(render::GRID_BOLD)
                .light_line_style(render::GRID_LIGHT)
                .axis_style(BLACK)
                .draw()?;
            for (i, series) in self.series.iter().enumerate() {
                let color = render::series_color(i);
                let plotted: Vec<(f64, f64)> = series
                    .points
                    .iter()
                    .map(|&(px, py)| (x.to_plot(px), y.to_plot(py)))
                    .collect();
                chart.draw_series(LineSeries::new(
                    plotted.iter().copied(),
                    color.stroke_width(2),
                ))?;
                if plotted.len() <= MARKER_POINTS_MAX {
                    chart.draw_series(
                        plotted
                            .iter()
                            .map(|&point| Circle::new(point, 3, color.filled())),
                    )?;
                }
            }
            Ok(())
        })
    }

    fn validate(&self, path: &Path) -> Result<(), PlotError> {
        render::check_count(path, "series", self.series.len(), SERIES_COUNT_MAX)?;
        for series in &self.series {
            render::check_count(
                path,
                "points in one series",
                series.points.len(),
                SERIES_POINTS_MAX,
            )?;
            for (index, &(px, py)) in series.points.iter().enumerate() {
                render::check_value(path, &series.label, index, "x", px, self.x_log)?;
                render::check_value(path, &series.label, index, "y", py, self.y_log)?;
            }
        }
        Ok(())
    }
}

/// The empirical CDF of `samples`: `(value, fraction of samples <= value)`, by value.
///
/// More than [`CDF_POINTS_MAX`] samples are thinned to that many evenly spaced ranks,
/// always keeping the smallest and largest. NaN and infinite samples are kept (they sort
/// to the ends), so [`LineChart::write_png`] reports them instead of hiding them.
pub fn cdf_series(label: impl Into<String>, samples: &[f64]) -> Series {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let point = |rank: usize| (sorted[rank - 1], rank as f64 / n as f64);
    let points = if n <= CDF_POINTS_MAX {
        (1..=n).map(point).collect()
    } else {
        (0..CDF_POINTS_MAX)
            .map(|k| point(1 + k * (n - 1) / (CDF_POINTS_MAX - 1)))
            .collect()
    };
    Series {
        label: label.into(),
        points,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdf_of_small_sample_keeps_every_point() {
        let s = cdf_series("a", &[3.0, 1.0, 2.0, 2.0]);
        assert_eq!(s.label, "a");
        assert_eq!(s.points, [(1.0, 0.25), (2.0, 0.5), (2.0, 0.75), (3.0, 1.0)]);
        assert!(cdf_series("empty", &[]).points.is_empty());
    }

    #[test]
    fn cdf_of_large_sample_is_thinned_but_keeps_the_ends() {
        let samples: Vec<f64> = (0..1_000_003).rev().map(f64::from).collect();
        let s = cdf_series("big", &samples);
        assert_eq!(s.points.len(), CDF_POINTS_MAX);
        assert_eq!(s.points[0], (0.0, 1.0 / 1_000_003.0));
        assert_eq!(*s.points.last().unwrap(), (1_000_002.0, 1.0));
        assert!(s
            .points
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1));
    }

    #[test]
    fn cdf_keeps_nan_at_the_end() {
        let mut samples = vec![1.0; 5000];
        samples.push(f64::NAN);
        let s = cdf_series("nan", &samples);
        assert!(s.points.last().unwrap().0.is_nan());
    }
}
