//! Grouped bar charts: one cluster of bars per x category, one bar per series.

use std::path::Path;

use plotters::prelude::*;

use crate::axis::{Axis, TickedRange};
use crate::render::{self, LegendMark};
use crate::{PlotError, BAR_GROUP_COUNT_MAX, SERIES_COUNT_MAX};

/// Share of each group's width left empty, split between its two sides.
const GROUP_GAP_FRACTION: f64 = 0.25;

/// Bars grouped by category: `series[j].1[i]` is series `j`'s value in group `i`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BarChart {
    /// Text above the plot.
    pub title: String,
    /// Vertical axis title, with units, e.g. `"throughput (Mops/s)"`.
    pub y_label: String,
    /// The x categories, left to right, at most [`BAR_GROUP_COUNT_MAX`].
    pub groups: Vec<String>,
    /// `(legend label, one value per group)`, at most [`SERIES_COUNT_MAX`] series.
    pub series: Vec<(String, Vec<f64>)>,
}

impl BarChart {
    /// Draws the chart and writes it to `path` as an 800x500 PNG (via `PATH.partial`).
    ///
    /// Bars grow from zero, so negative values point down. No groups or no series give
    /// empty axes. Errors if a value is not finite, a series does not have exactly one
    /// value per group, or a limit is exceeded.
    pub fn write_png(&self, path: &Path) -> Result<(), PlotError> {
        self.validate(path)?;
        let values = || self.series.iter().flat_map(|(_, v)| v.iter().copied());
        let fitted = Axis::fit(values().chain([0.0]), false);
        // Bars start at zero, so no margin below a zero baseline (or above a zero top).
        let y = match (values().all(|v| v >= 0.0), values().all(|v| v <= 0.0)) {
            (true, true) => Axis::with_range(0.0, 1.0, false),
            (true, false) => Axis::with_range(0.0, fitted.hi, false),
            (false, true) => Axis::with_range(fitted.lo, 0.0, false),
            (false, false) => fitted,
        };
        let groups_count = self.groups.len();
        let labels: Vec<String> = self
            .series
            .iter()
            .enumerate()
            .map(|(i, (label, _))| render::legend_label(i, label))
            .collect();
        render::write_png_with(path, |root| {
            let area = render::frame(root, &self.title, &labels, LegendMark::Bar)?;
            let y_ticks: Vec<String> = y.bold.iter().map(|t| y.label(*t)).collect();
            // Group i spans x in [i, i + 1); its label sits at the centre.
            let x_coord = TickedRange::new(
                0.0..groups_count.max(1) as f64,
                (0..groups_count).map(|i| i as f64 + 0.5).collect(),
                Vec::new(),
            );
            let mut chart = ChartBuilder::on(&area)
                .margin(render::MARGIN_PX)
                .x_label_area_size(35)
                .y_label_area_size(render::y_label_area_px(&area, &y_ticks)?)
                .build_cartesian_2d(x_coord, y.coord())?;
            let x_format = |t: &f64| {
                let index = t.floor();
                if index >= 0.0 && (index as usize) < groups_count {
                    self.groups[index as usize].clone()
                } else {
                    String::new()
                }
            };
            let y_format = |t: &f64| y.label(*t);
            chart
                .configure_mesh()
                .disable_x_mesh()
                .y_desc(self.y_label.as_str())
                .x_label_formatter(&x_format)
                .y_label_formatter(&y_format)
                .label_style(render::text_style(render::TICK_FONT_PX))
                .axis_desc_style(render::text_style(render::AXIS_DESC_FONT_PX))
                .bold_line_style(render::GRID_BOLD)
                .light_line_style(render::GRID_LIGHT)
                .axis_style(BLACK)
                .draw()?;
            let bar_width = (1.0 - GROUP_GAP_FRACTION) / self.series.len().max(1) as f64;
            for (j, (_, values)) in self.series.iter().enumerate() {
                let color = render::series_color(j);
                chart.draw_series(values.iter().enumerate().map(|(i, &v)| {
                    let left = i as f64 + GROUP_GAP_FRACTION / 2.0 + j as f64 * bar_width;
                    Rectangle::new([(left, 0.0), (left + bar_width, v)], color.filled())
                }))?;
            }
            if y.lo < 0.0 && 0.0 < y.hi {
                // Signed bars: mark the baseline they grow from.
                let right = groups_count.max(1) as f64;
                chart.draw_series(std::iter::once(PathElement::new(
                    vec![(0.0, 0.0), (right, 0.0)],
                    BLACK.stroke_width(1),
                )))?;
            }
            Ok(())
        })
    }

    fn validate(&self, path: &Path) -> Result<(), PlotError> {
        render::check_count(path, "series", self.series.len(), SERIES_COUNT_MAX)?;
        render::check_count(path, "groups", self.groups.len(), BAR_GROUP_COUNT_MAX)?;
        for (label, values) in &self.series {
            if values.len() != self.groups.len() {
                return Err(PlotError::BarShape {
                    path: path.to_path_buf(),
                    series: label.clone(),
                    values_count: values.len(),
                    groups_count: self.groups.len(),
                });
            }
            for (index, &v) in values.iter().enumerate() {
                render::check_value(path, label, index, "y", v, false)?;
            }
        }
        Ok(())
    }
}
