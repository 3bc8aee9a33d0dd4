//! Grouped bar charts give a valid PNG, including negative and degenerate data.

mod common;

use locus_plot::BarChart;

fn bars(groups: &[&str], series: &[(&str, &[f64])]) -> BarChart {
    BarChart {
        title: "throughput".into(),
        y_label: "Mops/s".into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        series: series
            .iter()
            .map(|(label, values)| (label.to_string(), values.to_vec()))
            .collect(),
    }
}

#[test]
fn grouped_bars() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bars.png");
    bars(
        &["A", "B", "C"],
        &[
            ("1 thread", &[1.0, 2.0, 3.0]),
            ("8 threads", &[6.0, 9.5, 14.0]),
        ],
    )
    .write_png(&path)
    .unwrap();
    common::assert_png(&path);
}

#[test]
fn negative_and_mixed_values() {
    let dir = tempfile::tempdir().unwrap();
    for (i, values) in [[-1.0, -2.0], [-1.0, 2.0], [0.0, 0.0]].iter().enumerate() {
        let path = dir.path().join(format!("signs{i}.png"));
        bars(&["x", "y"], &[("delta", values)])
            .write_png(&path)
            .unwrap();
        common::assert_png(&path);
    }
}

#[test]
fn no_groups_or_no_series_draw_empty_axes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no_groups.png");
    bars(&[], &[("empty", &[])]).write_png(&path).unwrap();
    common::assert_png(&path);
    let path = dir.path().join("no_series.png");
    bars(&["A", "B"], &[]).write_png(&path).unwrap();
    common::assert_png(&path);
}
