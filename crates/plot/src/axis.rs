//! Axis ranges, tick positions and tick labels, computed without plotters.
//!
//! A log axis is drawn as a linear plotters axis over `log10(value)`: the points are
//! transformed before drawing, and the ticks are chosen here (powers of two or ten) and
//! labelled with the untransformed value. That keeps one coordinate type for all four
//! linear/log combinations and puts payload-size ticks on 64, 128, ... instead of 100, 1000.

use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::types::RangedCoordf64;

use crate::LOG2_TICKS_MAX;

/// Most bold (labelled) ticks on a linear axis or a powers-of-ten log axis.
const TICKS_MAX: usize = 10;
/// Share of the data span added as empty margin on each side of a linear or log axis.
const MARGIN_FRACTION: f64 = 0.05;

/// One axis in plot space (`log10(value)` on a log axis, `value` otherwise).
#[derive(Debug, Clone)]
pub(crate) struct Axis {
    pub(crate) lo: f64,
    pub(crate) hi: f64,
    log: bool,
    /// Labelled ticks, in plot space, ascending, all within `lo..=hi`.
    pub(crate) bold: Vec<f64>,
    /// Unlabelled grid lines, in plot space.
    pub(crate) light: Vec<f64>,
}

impl Axis {
    /// An axis covering `values` (already validated: finite, and positive if `log`) with a
    /// small margin. No values gives 0..1 (linear) or 1..10 (log); one distinct value gets
    /// a range around it.
    pub(crate) fn fit(values: impl Iterator<Item = f64>, log: bool) -> Axis {
        let mut min = f64::INFINITY;
        let mut max = f64::NEG_INFINITY;
        for v in values {
            debug_assert!(v.is_finite() && (!log || v > 0.0), "unvalidated value {v}");
            let t = if log { v.log10() } else { v };
            min = min.min(t);
            max = max.max(t);
        }
        let (lo, hi) = if min > max {
            (0.0, 1.0)
        } else if min == max {
            // log: a factor of two either side; linear: 10% of the value, or 1 around zero.
            let pad = if log {
                2f64.log10()
            } else if min == 0.0 {
                1.0
            } else {
                min.abs() * 0.1
            };
            (min - pad, max + pad)
        } else {
            // Halves first so that spans near f64::MAX do not overflow.
            let pad = (max / 2.0 - min / 2.0) * 2.0 * MARGIN_FRACTION;
            (min - pad, max + pad)
        };
        Axis::with_range(lo.max(f64::MIN), hi.min(f64::MAX), log)
    }

    /// An axis over exactly `lo..hi` in plot space.
    pub(crate) fn with_range(lo: f64, hi: f64, log: bool) -> Axis {
        assert!(
            lo < hi && lo.is_finite() && hi.is_finite(),
            "bad axis range {lo}..{hi}"
        );
        let (bold, light) = if log {
            log_ticks(lo, hi)
        } else {
            linear_ticks(lo, hi, TICKS_MAX)
        };
        Axis {
            lo,
            hi,
            log,
            bold,
            light,
        }
    }

    /// Maps a (validated) data value into plot space.
    pub(crate) fn to_plot(&self, v: f64) -> f64 {
        if self.log {
            v.log10()
        } else {
            v
        }
    }

    /// The tick label for a plot-space position.
    pub(crate) fn label(&self, t: f64) -> String {
        format_tick(if self.log { 10f64.powf(t) } else { t })
    }

    /// The plotters coordinate for this axis, with our ticks bound to it.
    pub(crate) fn coord(&self) -> TickedRange {
        TickedRange::new(self.lo..self.hi, self.bold.clone(), self.light.clone())
    }
}

/// A linear f64 plotters coordinate with fixed bold and light ticks.
///
/// plotters' own `WithKeyPoints<RangedCoordf64>` cannot take a custom label formatter
/// (its float formatting option has no `ValueFormatter`), hence this small type.
pub(crate) struct TickedRange {
    linear: RangedCoordf64,
    bold: Vec<f64>,
    light: Vec<f64>,
}

impl TickedRange {
    pub(crate) fn new(range: Range<f64>, bold: Vec<f64>, light: Vec<f64>) -> TickedRange {
        TickedRange {
            linear: range.into(),
            bold,
            light,
        }
    }
}

impl Ranged for TickedRange {
    // Labels always come from our formatter; this only satisfies plotters' bounds.
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.linear.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.light.clone()
        } else {
            self.bold.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.linear.range()
    }
}

/// Ticks at multiples of a 1/2/5 x 10^k step, at most `max_count` of them, inside `lo..=hi`;
/// light ticks subdivide each step.
pub(crate) fn linear_ticks(lo: f64, hi: f64, max_count: usize) -> (Vec<f64>, Vec<f64>) {
    let span = hi - lo;
    if !(span.is_finite() && span > 0.0) || max_count < 2 {
        return (vec![lo, hi], Vec::new());
    }
    let raw_step = span / (max_count - 1) as f64;
    let magnitude = 10f64.powf(raw_step.log10().floor());
    let (mantissa, light_div) = [(1.0, 5.0), (2.0, 4.0), (5.0, 5.0), (10.0, 5.0)]
        .into_iter()
        .find(|(m, _)| m * magnitude >= raw_step)
        .unwrap_or((10.0, 5.0));
    let step = mantissa * magnitude;
    let ticks_at = |step: f64| -> Vec<f64> {
        let first = (lo / step).ceil() as i64;
        let last = (hi / step).floor() as i64;
        // Multiplying an integer index keeps 0 exactly 0 (no "1e-17" labels).
        (first..=last).map(|k| k as f64 * step).collect()
    };
    (ticks_at(step), ticks_at(step / light_div))
}

/// Ticks for a log axis over `lo..hi` in log10 space.
fn log_ticks(lo: f64, hi: f64) -> (Vec<f64>, Vec<f64>) {
    const LOG10_2: f64 = std::f64::consts::LOG10_2;
    // Powers of two fit payload sizes (64, 128, ... 65536); tolerate rounding at the ends.
    let eps = 1e-9;
    let p2_first = (lo / LOG10_2 - eps).ceil() as i64;
    let p2_last = (hi / LOG10_2 + eps).floor() as i64;
    let p2_count = (p2_last - p2_first + 1).max(0) as usize;
    if (2..=LOG2_TICKS_MAX).contains(&p2_count) {
        let bold = (p2_first..=p2_last).map(|k| k as f64 * LOG10_2).collect();
        return (bold, Vec::new());
    }
    if p2_count > LOG2_TICKS_MAX {
        // Many octaves (latencies, op counts): powers of ten, thinned to TICKS_MAX labels,
        // with 2..9 x 10^k grid lines while every decade is labelled.
        let first = (lo - eps).ceil() as i64;
        let last = (hi + eps).floor() as i64;
        let count = (last - first + 1).max(1) as usize;
        let stride = count.div_ceil(TICKS_MAX) as i64;
        let bold: Vec<f64> = (first..=last)
            .filter(|k| (k - first) % stride == 0)
            .map(|k| k as f64)
            .collect();
        let mut light = Vec::new();
        if stride == 1 {
            for k in (first - 1)..=last {
                for m in 2..=9 {
                    let t = k as f64 + (m as f64).log10();
                    if lo <= t && t <= hi {
                        light.push(t);
                    }
                }
            }
        }
        return (bold, light);
    }
    // Less than two octaves: linear ticks on the values, placed on the log axis.
    let (v_lo, v_hi) = (10f64.powf(lo), 10f64.powf(hi));
    let (bold, light) = linear_ticks(v_lo, v_hi, 6);
    let to_log = |ticks: Vec<f64>| -> Vec<f64> {
        ticks
            .into_iter()
            .filter(|v| *v > 0.0)
            .map(f64::log10)
            .filter(|t| lo <= *t && *t <= hi)
            .collect()
    };
    (to_log(bold), to_log(light))
}

/// A short label: plain decimals with up to six significant digits, exponent form for
/// very large or small magnitudes, trailing zeros dropped.
pub(crate) fn format_tick(v: f64) -> String {
    if v == 0.0 {
        return "0".to_string();
    }
    let magnitude = v.abs();
    if !(1e-3..1e7).contains(&magnitude) {
        let s = format!("{v:.2e}");
        let (mantissa, exponent) = s.split_once('e').unwrap_or((&s, "0"));
        return format!("{}e{exponent}", trim_zeros(mantissa));
    }
    let decimals = (5 - magnitude.log10().floor() as i32).clamp(0, 8) as usize;
    trim_zeros(&format!("{v:.decimals$}")).to_string()
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(axis: &Axis) -> Vec<String> {
        axis.bold.iter().map(|t| axis.label(*t)).collect()
    }

    #[test]
    fn payload_sizes_get_power_of_two_ticks() {
        let axis = Axis::fit([64.0, 1024.0, 65536.0].into_iter(), true);
        assert_eq!(
            labels(&axis),
            [
                "64", "128", "256", "512", "1024", "2048", "4096", "8192", "16384", "32768",
                "65536"
            ]
        );
    }

    #[test]
    fn wide_log_range_gets_decades_and_light_lines() {
        let axis = Axis::fit([1e-6, 1e2].into_iter(), true);
        assert_eq!(
            labels(&axis),
            ["1e-6", "1e-5", "1e-4", "0.001", "0.01", "0.1", "1", "10", "100"]
        );
        assert!(!axis.light.is_empty());
        let axis = Axis::fit([1.0, 1e30].into_iter(), true);
        assert!(axis.bold.len() <= TICKS_MAX, "{:?}", labels(&axis));
    }

    #[test]
    fn narrow_log_range_falls_back_to_linear_ticks() {
        let axis = Axis::fit([3.0, 5.0].into_iter(), true);
        assert!(axis.bold.len() >= 2, "{:?}", labels(&axis));
        for t in &axis.bold {
            assert!(axis.lo <= *t && *t <= axis.hi);
        }
    }

    #[test]
    fn linear_ticks_are_round_and_inside() {
        let (bold, light) = linear_ticks(-0.05, 1.05, 10);
        let text: Vec<String> = bold.iter().map(|v| format_tick(*v)).collect();
        assert_eq!(text, ["0", "0.2", "0.4", "0.6", "0.8", "1"]);
        assert!(light.len() > bold.len());
        assert_eq!(linear_ticks(0.0, f64::INFINITY, 10).0.len(), 2);
    }

    #[test]
    fn degenerate_inputs_give_a_valid_range() {
        for (values, log) in [
            (vec![], false),
            (vec![], true),
            (vec![0.0], false),
            (vec![-5.0], false),
            (vec![42.0], true),
            (vec![f64::MAX, -f64::MAX], false),
            (vec![f64::MIN_POSITIVE, f64::MAX], true),
        ] {
            let axis = Axis::fit(values.iter().copied(), log);
            assert!(axis.lo < axis.hi, "{values:?} log={log}: {axis:?}");
        }
    }

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(format_tick(0.30000000000000004), "0.3");
        assert_eq!(format_tick(64.00000000000001), "64");
        assert_eq!(format_tick(2.5e-4), "2.5e-4");
        assert_eq!(format_tick(1.0e9), "1e9");
        assert_eq!(format_tick(-1500.0), "-1500");
        assert_eq!(format_tick(123456.7), "123457");
    }
}
