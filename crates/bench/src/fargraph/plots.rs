//! The PNG of each Fargraph+ experiment, drawn from its derived numbers:
//! Fig. 15 (bars per backend), Fig. 18 (time by far ratio), Fig. 19 (time by
//! chunk size), Table 4 (with and without buffering), Fig. 16 (threads).

use std::path::Path;

use locus_analytics::store::Backend;
use locus_plot::{BarChart, LineChart, Series};

use super::{Experiment, Report};
use crate::Result;

/// Draws `o`'s figure into `path` (atomically, by `locus-plot`).
pub(super) fn plot(o: &Report, path: &Path) -> Result<()> {
    let d = &o.derived;
    let by = |key: &str| d[key].as_array().cloned().unwrap_or_default();
    let num = |v: &serde_json::Value| v.as_f64().unwrap_or(f64::NAN);
    let scale = o.graph.scale;
    match o.experiment {
        Experiment::Overall => {
            let rows = by("by_algo");
            let groups = rows
                .iter()
                .map(|r| r["algo"].as_str().unwrap_or("?").to_string())
                .collect();
            let series = Backend::ALL
                .iter()
                .map(|k| {
                    (
                        k.name().to_string(),
                        rows.iter()
                            .map(|r| num(&r["normalised_to_oracle"][k.name()]))
                            .collect(),
                    )
                })
                .collect();
            BarChart {
                title: format!(
                    "Fig. 15: time at far ratio 0.8, normalised to Oracle (R-MAT {scale})"
                ),
                y_label: "time / Oracle time".into(),
                groups,
                series,
            }
            .write_png(path)?;
        }
        Experiment::Ratio => {
            let rows = by("by_ratio");
            let series = |key: &str, label: &str| Series {
                label: label.into(),
                points: rows
                    .iter()
                    .map(|r| (num(&r["far_ratio"]), num(&r[key])))
                    .collect(),
            };
            LineChart {
                title: format!("Fig. 18: BFS time by far-memory ratio (R-MAT {scale})"),
                x_label: "far-memory ratio".into(),
                y_label: "time (s)".into(),
                x_log: false,
                y_log: true,
                series: vec![
                    series("far_s", "far (Fargraph+)"),
                    series("paged_readahead_s", "paged, readahead 8"),
                    series("paged_no_readahead_s", "paged, no readahead"),
                    series("paged_vertices_s", "paged+vertices, ra 8"),
                ],
            }
            .write_png(path)?;
        }
        Experiment::Chunk => {
            let series = by("by_algo")
                .iter()
                .map(|a| Series {
                    label: a["algo"].as_str().unwrap_or("?").to_string(),
                    points: a["by_chunk"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default()
                        .iter()
                        .map(|r| (num(&r["chunk_bytes"]), num(&r["normalised_to_4k"])))
                        .collect(),
                })
                .collect();
            LineChart {
                title: format!(
                    "Fig. 19: far at ratio 0.8 by chunk size, normalised to 4 KB (R-MAT {scale})"
                ),
                x_label: "chunk (bytes)".into(),
                y_label: "time / time at 4 KB".into(),
                x_log: true,
                y_log: false,
                series,
            }
            .write_png(path)?;
        }
        Experiment::Buffering => {
            let rows = by("by_algo");
            BarChart {
                title: format!(
                    "Table 4: far at ratio 0.8 with and without double buffering (R-MAT {scale})"
                ),
                y_label: "time (s)".into(),
                groups: rows
                    .iter()
                    .map(|r| r["algo"].as_str().unwrap_or("?").to_string())
                    .collect(),
                series: vec![
                    (
                        "without buffering".into(),
                        rows.iter()
                            .map(|r| num(&r["without_buffering_s"]))
                            .collect(),
                    ),
                    (
                        "with buffering".into(),
                        rows.iter().map(|r| num(&r["with_buffering_s"])).collect(),
                    ),
                ],
            }
            .write_png(path)?;
        }
        Experiment::Threads => {
            let rows = by("by_algo");
            BarChart {
                title: format!("Fig. 16: far at ratio 0.8 by threads (R-MAT {scale})"),
                y_label: "time (s)".into(),
                groups: rows
                    .iter()
                    .map(|r| {
                        format!(
                            "{} (auto={})",
                            r["algo"].as_str().unwrap_or("?"),
                            r["auto_threads"]
                        )
                    })
                    .collect(),
                series: vec![
                    (
                        "1 thread".into(),
                        rows.iter().map(|r| num(&r["one_thread_s"])).collect(),
                    ),
                    (
                        "2 threads".into(),
                        rows.iter().map(|r| num(&r["two_threads_s"])).collect(),
                    ),
                    (
                        "auto".into(),
                        rows.iter().map(|r| num(&r["auto_s"])).collect(),
                    ),
                ],
            }
            .write_png(path)?;
        }
    }
    Ok(())
}
