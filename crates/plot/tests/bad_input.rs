//! Bad data and unwritable paths are errors that name the file, series and point, and
//! leave neither a half-written chart nor a `.partial` file behind.

mod common;

use locus_plot::{BarChart, LineChart, PlotError, Series, SERIES_COUNT_MAX, SERIES_POINTS_MAX};

fn line(x_log: bool, y_log: bool, points: &[(f64, f64)]) -> LineChart {
    LineChart {
        title: "t".into(),
        x_label: "x".into(),
        y_label: "y".into(),
        x_log,
        y_log,
        series: vec![Series {
            label: "get".into(),
            points: points.to_vec(),
        }],
    }
}

#[test]
fn non_finite_values_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nan.png");
    let err = line(false, false, &[(1.0, 1.0), (f64::NAN, 2.0)])
        .write_png(&path)
        .unwrap_err();
    assert!(
        matches!(
            err,
            PlotError::NonFinite {
                index: 1,
                axis: "x",
                ..
            }
        ),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(message.contains(&*path.to_string_lossy()), "{message}");
    assert!(
        message.contains("\"get\"") && message.contains("point 1"),
        "{message}"
    );
    let err = line(false, false, &[(1.0, f64::INFINITY)])
        .write_png(&path)
        .unwrap_err();
    assert!(
        matches!(err, PlotError::NonFinite { axis: "y", .. }),
        "{err:?}"
    );
    assert!(!path.exists());
    common::assert_no_partial(&path);
}

#[test]
fn non_positive_values_on_log_axes_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.png");
    let err = line(true, false, &[(64.0, 1.0), (0.0, 1.0)])
        .write_png(&path)
        .unwrap_err();
    assert!(
        matches!(
            err,
            PlotError::NonPositiveOnLogAxis {
                index: 1,
                axis: "x",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("x_log = false"), "{err}");
    let err = line(false, true, &[(-1.0, -5.0)])
        .write_png(&path)
        .unwrap_err();
    assert!(
        matches!(err, PlotError::NonPositiveOnLogAxis { axis: "y", .. }),
        "{err:?}"
    );
    // The same values are fine on linear axes.
    line(false, false, &[(0.0, -5.0)]).write_png(&path).unwrap();
    common::assert_png(&path);
}

#[test]
fn bar_values_must_match_groups_and_be_finite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bars.png");
    let mut chart = BarChart {
        title: "t".into(),
        y_label: "y".into(),
        groups: vec!["a".into(), "b".into()],
        series: vec![("s".into(), vec![1.0])],
    };
    let err = chart.write_png(&path).unwrap_err();
    assert!(
        matches!(
            err,
            PlotError::BarShape {
                values_count: 1,
                groups_count: 2,
                ..
            }
        ),
        "{err:?}"
    );
    chart.series[0].1 = vec![1.0, f64::NAN];
    let err = chart.write_png(&path).unwrap_err();
    assert!(
        matches!(err, PlotError::NonFinite { index: 1, .. }),
        "{err:?}"
    );
    assert!(!path.exists());
}

#[test]
fn limits_are_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("many.png");
    let mut chart = line(false, false, &[]);
    chart.series = vec![Series::default(); SERIES_COUNT_MAX + 1];
    let err = chart.write_png(&path).unwrap_err();
    assert!(
        matches!(err, PlotError::TooMany { what: "series", .. }),
        "{err:?}"
    );
    let points = vec![(1.0, 1.0); SERIES_POINTS_MAX + 1];
    let err = line(false, false, &points).write_png(&path).unwrap_err();
    assert!(matches!(err, PlotError::TooMany { .. }), "{err:?}");
}

#[test]
fn unwritable_path_is_an_io_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing-dir").join("chart.png");
    let err = line(false, false, &[(1.0, 1.0)])
        .write_png(&path)
        .unwrap_err();
    assert!(matches!(err, PlotError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("missing-dir"), "{err}");
}

#[test]
fn failed_rename_keeps_the_old_file_and_removes_the_partial() {
    let dir = tempfile::tempdir().unwrap();
    // A directory in the way makes the final rename fail after the PNG was written.
    let path = dir.path().join("in-the-way.png");
    std::fs::create_dir(&path).unwrap();
    std::fs::write(path.join("keep"), b"x").unwrap();
    let err = line(false, false, &[(1.0, 1.0)])
        .write_png(&path)
        .unwrap_err();
    assert!(matches!(err, PlotError::Io { .. }), "{err:?}");
    assert!(path.join("keep").exists());
    common::assert_no_partial(&path);
}
