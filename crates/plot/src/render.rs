//! What both chart kinds share: colours, font sizes, title and legend layout,
//! value checks, and the draw-into-memory / encode / rename-into-place sequence.

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::text::{self, GlyphText};
use crate::{PlotError, HEIGHT_PX, SERIES_COUNT_MAX, WIDTH_PX};

/// The in-memory drawing area, in pixel coordinates.
pub(crate) type Area<'a> = DrawingArea<GlyphText<BitMapBackend<'a>>, Shift>;
/// What plotters returns from drawing calls on [`Area`].
pub(crate) type DrawResult<T> =
    Result<T, DrawingAreaErrorKind<<BitMapBackend<'static> as DrawingBackend>::ErrorType>>;

pub(crate) const TITLE_FONT_PX: f64 = 22.0;
pub(crate) const AXIS_DESC_FONT_PX: f64 = 16.0;
pub(crate) const TICK_FONT_PX: f64 = 14.0;
const LEGEND_FONT_PX: f64 = 14.0;
const LEGEND_ROW_PX: i32 = 22;
/// Room left of a legend label for its line or box sample.
const LEGEND_MARK_PX: i32 = 30;
const LEGEND_PAD_PX: i32 = 10;
const LEGEND_WIDTH_PX_MAX: u32 = 240;
/// Longer legend labels are cut, with an ellipsis, to keep the plot area wide.
const LEGEND_LABEL_CHARS_MAX: usize = 28;
/// Gap between the title and the plot, and around the plot.
pub(crate) const MARGIN_PX: u32 = 12;

/// Tableau 10: distinct, colour-blind-friendlier hues, one per series.
const PALETTE: [RGBColor; SERIES_COUNT_MAX] = [
    RGBColor(0x4e, 0x79, 0xa7),
    RGBColor(0xf2, 0x8e, 0x2b),
    RGBColor(0xe1, 0x57, 0x59),
    RGBColor(0x76, 0xb7, 0xb2),
    RGBColor(0x59, 0xa1, 0x4f),
    RGBColor(0xed, 0xc9, 0x48),
    RGBColor(0xb0, 0x7a, 0xa1),
    RGBColor(0xff, 0x9d, 0xa7),
    RGBColor(0x9c, 0x75, 0x5f),
    RGBColor(0xba, 0xb0, 0xac),
];
pub(crate) const GRID_BOLD: RGBColor = RGBColor(0xd0, 0xd0, 0xd0);
pub(crate) const GRID_LIGHT: RGBColor = RGBColor(0xee, 0xee, 0xee);

/// The colour of series `index` (validated to be below [`SERIES_COUNT_MAX`]).
pub(crate) fn series_color(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

pub(crate) fn text_style(size_px: f64) -> TextStyle<'static> {
    (text::FONT_FAMILY, size_px).into_font().color(&BLACK)
}

/// How a series is shown in the legend.
#[derive(Clone, Copy)]
pub(crate) enum LegendMark {
    /// A line with a dot.
    Line,
    /// A filled square.
    Bar,
}

/// Draws the white background, the title and, on the right, a legend for `labels`
/// (coloured by position); returns the area left for the plot.
pub(crate) fn frame<'a>(
    root: &Area<'a>,
    title: &str,
    labels: &[String],
    mark: LegendMark,
) -> DrawResult<Area<'a>> {
    root.fill(&WHITE)?;
    let body = if title.is_empty() {
        root.margin(MARGIN_PX, 0, 0, 0)
    } else {
        root.margin(MARGIN_PX / 2, 0, 0, 0)
            .titled(title, text_style(TITLE_FONT_PX))?
    };
    if labels.is_empty() {
        return Ok(body);
    }
    let style = text_style(LEGEND_FONT_PX);
    let shown: Vec<String> = labels.iter().map(|l| shorten(l)).collect();
    let mut text_px_max = 0;
    for label in &shown {
        text_px_max = text_px_max.max(body.estimate_text_size(label, &style)?.0);
    }
    let width_px = (text_px_max + (LEGEND_MARK_PX + 2 * LEGEND_PAD_PX) as u32)
        .min(LEGEND_WIDTH_PX_MAX)
        + MARGIN_PX;
    let (plot, legend) = body.split_horizontally(WIDTH_PX - width_px);
    let legend = legend.margin(MARGIN_PX, 0, 0, MARGIN_PX);
    let box_height = LEGEND_ROW_PX * shown.len() as i32 + LEGEND_PAD_PX;
    let box_width = legend.dim_in_pixel().0 as i32;
    legend.draw(&Rectangle::new(
        [(0, 0), (box_width - 1, box_height)],
        ShapeStyle::from(&GRID_BOLD).stroke_width(1),
    ))?;
    for (i, label) in shown.iter().enumerate() {
        let color = series_color(i);
        let x = LEGEND_PAD_PX;
        let y = LEGEND_PAD_PX / 2 + LEGEND_ROW_PX * i as i32 + LEGEND_ROW_PX / 2;
        match mark {
            LegendMark::Line => {
                legend.draw(&PathElement::new(
                    vec![(x, y), (x + LEGEND_MARK_PX - 8, y)],
                    color.stroke_width(2),
                ))?;
                legend.draw(&Circle::new(
                    (x + (LEGEND_MARK_PX - 8) / 2, y),
                    3,
                    color.filled(),
                ))?;
            }
            LegendMark::Bar => {
                legend.draw(&Rectangle::new(
                    [(x + 4, y - 6), (x + 16, y + 6)],
                    color.filled(),
                ))?;
            }
        }
        legend.draw(&Text::new(
            label.as_str(),
            (x + LEGEND_MARK_PX, y),
            style.pos(Pos::new(HPos::Left, VPos::Center)),
        ))?;
    }
    Ok(plot)
}

/// The legend text for series `index`: its label, or a stand-in when empty.
pub(crate) fn legend_label(index: usize, label: &str) -> String {
    if label.is_empty() {
        format!("series {}", index + 1)
    } else {
        label.to_string()
    }
}

fn shorten(label: &str) -> String {
    if label.chars().count() <= LEGEND_LABEL_CHARS_MAX {
        return label.to_string();
    }
    let mut short: String = label.chars().take(LEGEND_LABEL_CHARS_MAX - 1).collect();
    short.push('…');
    short
}

/// Pixels needed left of the plot for tick labels `labels` plus the rotated axis title.
pub(crate) fn y_label_area_px(area: &Area, labels: &[String]) -> DrawResult<u32> {
    let style = text_style(TICK_FONT_PX);
    let mut width_px = 0;
    for label in labels {
        width_px = width_px.max(area.estimate_text_size(label, &style)?.0);
    }
    // Tick marks and gaps (~15 px) plus the axis title's line height (~25 px).
    Ok(width_px + 40)
}

/// Checks one plotted value: finite, and positive on a log axis.
pub(crate) fn check_value(
    path: &Path,
    series: &str,
    index: usize,
    axis: &'static str,
    value: f64,
    log: bool,
) -> Result<(), PlotError> {
    if !value.is_finite() {
        return Err(PlotError::NonFinite {
            path: path.to_path_buf(),
            series: series.to_string(),
            index,
            axis,
            value,
        });
    }
    if log && value <= 0.0 {
        return Err(PlotError::NonPositiveOnLogAxis {
            path: path.to_path_buf(),
            series: series.to_string(),
            index,
            axis,
            value,
        });
    }
    Ok(())
}

/// Errors unless `count <= max`.
pub(crate) fn check_count(
    path: &Path,
    what: &'static str,
    count: usize,
    max: usize,
) -> Result<(), PlotError> {
    if count > max {
        return Err(PlotError::TooMany {
            path: path.to_path_buf(),
            what,
            count,
            max,
        });
    }
    Ok(())
}

/// Runs `draw` on a blank in-memory image, encodes it as PNG and puts it at `path`.
///
/// The file is written as `PATH.partial` and renamed, so `path` either keeps its old
/// content or gets the whole new image; a failed write removes the partial file.
pub(crate) fn write_png_with(
    path: &Path,
    draw: impl FnOnce(&Area) -> DrawResult<()>,
) -> Result<(), PlotError> {
    text::register_font();
    let mut rgb = vec![0u8; WIDTH_PX as usize * HEIGHT_PX as usize * 3];
    {
        let backend = BitMapBackend::with_buffer(&mut rgb, (WIDTH_PX, HEIGHT_PX));
        let root = GlyphText::new(backend).into_drawing_area();
        draw(&root)
            .and_then(|()| root.present())
            .map_err(|e| PlotError::Draw {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
    }
    let png = encode_png(&rgb).map_err(|source| PlotError::Encode {
        path: path.to_path_buf(),
        source,
    })?;
    let partial = partial_path(path);
    let written = std::fs::write(&partial, &png).and_then(|()| std::fs::rename(&partial, path));
    if let Err(source) = written {
        // Best effort: the write or rename error is the one worth reporting.
        let _ = std::fs::remove_file(&partial);
        return Err(PlotError::Io {
            path: path.to_path_buf(),
            source,
        });
    }
    Ok(())
}

/// `PATH` with `.partial` appended to its file name.
pub(crate) fn partial_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".partial");
    PathBuf::from(name)
}

fn encode_png(rgb: &[u8]) -> Result<Vec<u8>, png::EncodingError> {
    let mut out = Vec::with_capacity(64 * 1024);
    let mut encoder = png::Encoder::new(&mut out, WIDTH_PX, HEIGHT_PX);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(rgb)?;
    writer.finish()?;
    Ok(out)
}
