//! Line charts: linear and log axes, CDFs, and degenerate data all give a valid PNG.

mod common;

use locus_plot::{cdf_series, LineChart, Series};

fn chart(x_log: bool, y_log: bool, series: Vec<Series>) -> LineChart {
    LineChart {
        title: "latency".into(),
        x_label: "payload (bytes)".into(),
        y_label: "latency (us)".into(),
        x_log,
        y_log,
        series,
    }
}

fn series(label: &str, points: &[(f64, f64)]) -> Series {
    Series {
        label: label.into(),
        points: points.to_vec(),
    }
}

#[test]
fn linear_axes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("linear.png");
    let c = chart(
        false,
        false,
        vec![
            series("a", &[(0.0, 1.0), (1.0, 3.0), (2.0, 2.0)]),
            series("b", &[(0.0, -1.0), (2.0, 0.5)]),
        ],
    );
    c.write_png(&path).unwrap();
    common::assert_png(&path);
}

#[test]
fn log_x_over_payload_sizes_and_log_log() {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0];
    let points: Vec<(f64, f64)> = sizes.iter().map(|&s| (s, 10.0 + s / 1000.0)).collect();
    for (x_log, y_log, name) in [(true, false, "logx.png"), (true, true, "loglog.png")] {
        let path = dir.path().join(name);
        chart(x_log, y_log, vec![series("tcp", &points)])
            .write_png(&path)
            .unwrap();
        common::assert_png(&path);
    }
}

#[test]
fn no_series_and_empty_series_draw_empty_axes() {
    let dir = tempfile::tempdir().unwrap();
    for (i, (x_log, series)) in [
        (false, vec![]),
        (true, vec![]),
        (true, vec![series("nothing yet", &[])]),
    ]
    .into_iter()
    .enumerate()
    {
        let path = dir.path().join(format!("empty{i}.png"));
        chart(x_log, x_log, series).write_png(&path).unwrap();
        common::assert_png(&path);
    }
}

#[test]
fn single_point_on_linear_and_log_axes() {
    let dir = tempfile::tempdir().unwrap();
    for (i, (log, point)) in [
        (false, (0.0, 0.0)),
        (false, (5.0, -3.0)),
        (true, (64.0, 12.5)),
    ]
    .into_iter()
    .enumerate()
    {
        let path = dir.path().join(format!("single{i}.png"));
        chart(log, log, vec![series("one", &[point])])
            .write_png(&path)
            .unwrap();
        common::assert_png(&path);
    }
}

#[test]
fn cdf_chart_with_thinned_samples() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cdf.png");
    let samples: Vec<f64> = (1..=20_000).map(|i| f64::from(i % 977) + 1.0).collect();
    chart(
        true,
        false,
        vec![cdf_series("get", &samples), cdf_series("put", &[5.0])],
    )
    .write_png(&path)
    .unwrap();
    common::assert_png(&path);
}

#[test]
fn extreme_magnitudes_do_not_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("extreme.png");
    chart(
        false,
        false,
        vec![series(
            "huge",
            &[(-f64::MAX, f64::MAX), (f64::MAX, -f64::MAX)],
        )],
    )
    .write_png(&path)
    .unwrap();
    common::assert_png(&path);
    let path = dir.path().join("extreme_log.png");
    chart(
        true,
        true,
        vec![series(
            "wide",
            &[(f64::MIN_POSITIVE, 1e-300), (f64::MAX, 1e300)],
        )],
    )
    .write_png(&path)
    .unwrap();
    common::assert_png(&path);
}

#[test]
fn rewriting_replaces_the_file_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("again.png");
    std::fs::write(&path, b"old contents").unwrap();
    chart(false, false, vec![series("a", &[(1.0, 1.0), (2.0, 4.0)])])
        .write_png(&path)
        .unwrap();
    common::assert_png(&path);
}
