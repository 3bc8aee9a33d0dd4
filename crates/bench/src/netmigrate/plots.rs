//! The PNGs of the NetMigrate experiments: throughput, p50 and p99 timelines
//! of every protocol (Figs. 4-6), bars per filter size or group size (Tables
//! 2, 3), and bars per write ratio and source budget (Tables 4-7).

use std::path::{Path, PathBuf};

use locus_kvmigrate::measure::IntervalStats;
use locus_plot::{BarChart, LineChart, Series};

use super::cases::{BUDGETS_PCT, WRITE_RATIOS};
use super::{Experiment, Row};
use crate::Result;

/// A plotted figure of a row.
type RowMetric = fn(&Row) -> f64;

/// Draws the experiment's figures as `BASE-FIGURE.png` in `dir`; returns their paths.
pub(super) fn plot(exp: Experiment, rows: &[Row], dir: &Path, base: &str) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    let mut out = |name: &str| {
        let p = dir.join(format!("{base}-{name}.png"));
        written.push(p.clone());
        p
    };
    match exp {
        Experiment::Overall => {
            type Metric = fn(&IntervalStats) -> f64;
            let metrics: [(&str, &str, &str, Metric); 3] = [
                (
                    "throughput",
                    "Fig. 4: throughput during migration (YCSB-B)",
                    "K ops/s",
                    |b| b.ops_per_s / 1000.0,
                ),
                ("p50", "Fig. 5: median latency (YCSB-B)", "p50 (us)", |b| {
                    b.p50_us as f64
                }),
                (
                    "p99",
                    "Fig. 6: 99th percentile latency (YCSB-B)",
                    "p99 (us)",
                    |b| b.p99_us as f64,
                ),
            ];
            for (name, title, y, f) in metrics {
                let series = rows
                    .iter()
                    .map(|r| Series {
                        label: format!("{} ({} ms)", r.label, r.migration_ms),
                        points: r
                            .timeline
                            .iter()
                            .flatten()
                            .filter(|b| b.ops > 0 || name == "throughput")
                            .map(|b| (b.start_ms as f64 / 1000.0, f(b)))
                            .collect(),
                    })
                    .collect();
                LineChart {
                    title: title.into(),
                    x_label: "time since load start (s); migration starts after the warm-up".into(),
                    y_label: y.into(),
                    x_log: false,
                    y_log: false,
                    series,
                }
                .write_png(&out(name))?;
            }
        }
        Experiment::Filters | Experiment::Groups => {
            let groups: Vec<String> = rows.iter().map(|r| r.label.clone()).collect();
            let (t2, t3) = if exp == Experiment::Filters {
                ("Table 2", "BF, CBF size")
            } else {
                ("Table 3", "group size")
            };
            let charts: [(&str, String, &str, RowMetric); 3] = [
                (
                    "throughput",
                    format!("{t2}: throughput during migration by {t3}"),
                    "K ops/s",
                    |r| r.avg_ops_per_s_migrating / 1000.0,
                ),
                (
                    "p99",
                    format!("{t2}: mean p99 during migration by {t3}"),
                    "p99 (us)",
                    |r| r.p99_us_migrating,
                ),
                (
                    "client-bw",
                    format!("{t2}: client-side extra bandwidth by {t3}"),
                    "% of client bytes",
                    |r| r.client_extra_pct,
                ),
            ];
            for (name, title, y, f) in charts {
                BarChart {
                    title,
                    y_label: y.into(),
                    groups: groups.clone(),
                    series: vec![("netmigrate".into(), rows.iter().map(f).collect())],
                }
                .write_png(&out(name))?;
            }
        }
        Experiment::Bandwidth | Experiment::Budgets => {
            let mut labels: Vec<String> = Vec::new();
            for r in rows {
                if !labels.contains(&r.label) {
                    labels.push(r.label.clone());
                }
            }
            let cells: Vec<(f64, u8)> = WRITE_RATIOS
                .iter()
                .flat_map(|&w| BUDGETS_PCT.iter().map(move |&b| (w, b)))
                .collect();
            let groups: Vec<String> = cells
                .iter()
                .map(|(w, b)| format!("w{:.0} b{b}", w * 100.0))
                .collect();
            let charts: Vec<(&str, &str, &str, RowMetric)> = if exp == Experiment::Bandwidth {
                vec![
                    (
                        "client",
                        "Table 4: client-side extra bandwidth (write % / source budget %)",
                        "% of client bytes",
                        |r| r.client_extra_pct,
                    ),
                    (
                        "server",
                        "Table 4: server-side extra bandwidth (write % / source budget %)",
                        "% of server bytes",
                        |r| r.server_extra_pct,
                    ),
                ]
            } else {
                vec![
                    (
                        "throughput",
                        "Table 5: throughput during migration (write % / source budget %)",
                        "K ops/s",
                        |r| r.avg_ops_per_s_migrating / 1000.0,
                    ),
                    (
                        "p50",
                        "Table 6: mean median latency during migration",
                        "p50 (us)",
                        |r| r.p50_us_migrating,
                    ),
                    (
                        "p99",
                        "Table 7: mean p99 latency during migration",
                        "p99 (us)",
                        |r| r.p99_us_migrating,
                    ),
                    (
                        "time",
                        "migration time (write % / source budget %)",
                        "ms",
                        |r| r.migration_ms as f64,
                    ),
                ]
            };
            for (name, title, y, f) in charts {
                let series = labels
                    .iter()
                    .map(|l| {
                        let vals = cells
                            .iter()
                            .map(|&(w, b)| {
                                rows.iter()
                                    .find(|r| {
                                        &r.label == l
                                            && r.write_ratio == w
                                            && r.source_budget_pct == b
                                    })
                                    .map_or(0.0, f)
                            })
                            .collect();
                        (l.clone(), vals)
                    })
                    .collect();
                BarChart {
                    title: title.into(),
                    y_label: y.into(),
                    groups: groups.clone(),
                    series,
                }
                .write_png(&out(name))?;
            }
        }
    }
    Ok(written)
}
