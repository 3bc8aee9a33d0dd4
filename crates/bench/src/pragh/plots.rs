//! PNG plots of the Pragh experiments: throughput and remote rate per scheme
//! (Fig. 10), per scope (Fig. 11), the update-latency CDF (Fig. 12), and
//! throughput timelines (Figs. 14, 15).

use super::timeline::Timeline;
use super::Row;
use std::path::PathBuf;

use crate::Result;

pub(super) fn plot_timelines(dir: &std::path::Path, name: &str, tls: &[Timeline]) -> Result<()> {
    locus_plot::LineChart {
        title: format!("{name}: throughput timeline"),
        x_label: "time (s)".into(),
        y_label: "queries per second".into(),
        x_log: false,
        y_log: false,
        series: tls
            .iter()
            .map(|t| locus_plot::Series {
                label: format!("{} ({})", t.scheme, t.mode),
                points: t
                    .points
                    .iter()
                    .map(|pt| (pt.t_s, pt.throughput_qps))
                    .collect(),
            })
            .collect(),
    }
    .write_png(&dir.join(format!("{name}.png")))?;
    Ok(())
}

/// Each run's throughput, as a share of its scheme's median, against how
/// long a cache line took between the two cores around it
/// (`measure_host_handoff_ns`): whether a scheme's spread follows the host
/// (issue 13, requirement 7). `None` if no run has the probe or no scheme
/// has three runs.
pub(super) fn plot_host(
    dir: &std::path::Path,
    name: &str,
    run_rows: &[Vec<Row>],
) -> Result<Option<PathBuf>> {
    let mut schemes: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for r in run_rows.iter().flatten() {
        if r.measure_host_handoff_ns <= 0.0 || r.throughput_qps <= 0.0 {
            continue;
        }
        let label = match r.scope {
            Some(s) => format!("{} @{s}", r.scheme),
            None => r.scheme.clone(),
        };
        let point = (r.measure_host_handoff_ns, r.throughput_qps);
        match schemes.iter_mut().find(|(l, _)| *l == label) {
            Some((_, pts)) => pts.push(point),
            None => schemes.push((label, vec![point])),
        }
    }
    schemes.retain(|(_, pts)| pts.len() >= 3);
    if schemes.is_empty() {
        return Ok(None);
    }
    let series = schemes
        .into_iter()
        .map(|(label, mut pts)| {
            let mut q: Vec<f64> = pts.iter().map(|p| p.1).collect();
            q.sort_by(f64::total_cmp);
            let median = q[q.len() / 2];
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            locus_plot::Series {
                label,
                points: pts.iter().map(|&(h, t)| (h, t / median)).collect(),
            }
        })
        .collect();
    let path = dir.join(format!("{name}-host.png"));
    locus_plot::LineChart {
        title: format!("{name}: each run against the host's core-to-core handoff"),
        x_label: "cache line round trip between the two cores (ns)".into(),
        y_label: "throughput / the scheme's median".into(),
        x_log: false,
        y_log: false,
        series,
    }
    .write_png(&path)?;
    Ok(Some(path))
}

/// PNG plots of an experiment's rows: throughput and remote rate per scheme
/// (Fig. 10), per scope (Fig. 11), or the update-latency CDF (Fig. 12).
pub(super) fn plot_rows(dir: &std::path::Path, name: &str, rows: &[Row]) -> Result<Vec<PathBuf>> {
    let mut wrote = Vec::new();
    let mut at = |file: String| {
        let p = dir.join(file);
        wrote.push(p.clone());
        p
    };
    let mut schemes: Vec<String> = Vec::new();
    for r in rows {
        if !schemes.contains(&r.scheme) {
            schemes.push(r.scheme.clone());
        }
    }
    if rows.iter().any(|r| r.scope.is_some()) {
        let line = |y: &dyn Fn(&Row) -> f64| -> Vec<locus_plot::Series> {
            schemes
                .iter()
                .map(|s| locus_plot::Series {
                    label: s.clone(),
                    points: rows
                        .iter()
                        .filter(|r| &r.scheme == s)
                        .map(|r| (r.scope.unwrap_or(1) as f64, y(r)))
                        .collect(),
                })
                .collect()
        };
        locus_plot::LineChart {
            title: "Throughput by scope of start vertices (Pragh Fig. 11a)".into(),
            x_label: "scope (start vertices)".into(),
            y_label: "queries per second".into(),
            x_log: true,
            y_log: true,
            series: line(&|r| r.throughput_qps.max(1e-3)),
        }
        .write_png(&at(format!("{name}-throughput.png")))?;
        // Pragh's Fig. 11a draws the speedup after migration: each run's own
        // ratio to its round's Orig, so rows measured with different
        // binaries or on a faster minute of the host still line up.
        if rows.iter().any(|r| r.scheme == "Orig") {
            locus_plot::LineChart {
                title: "Speedup over Orig by scope of start vertices (Pragh Fig. 11a)".into(),
                x_label: "scope (start vertices)".into(),
                y_label: "throughput / Orig's in the same round".into(),
                x_log: true,
                y_log: false,
                series: line(&|r| r.vs_orig),
            }
            .write_png(&at(format!("{name}-speedup.png")))?;
        }
        locus_plot::LineChart {
            title: "Remote accesses by scope (Pragh Fig. 11b)".into(),
            x_label: "scope (start vertices)".into(),
            y_label: "remote one-sided operations (%)".into(),
            x_log: true,
            y_log: false,
            series: line(&|r| r.remote_rate * 100.0),
        }
        .write_png(&at(format!("{name}-remote.png")))?;
        // The same in the placement bound's unit (issue 13, req. 2).
        locus_plot::LineChart {
            title: "Remote GETs by scope (Pragh Fig. 11b, in GETs)".into(),
            x_label: "scope (start vertices)".into(),
            y_label: "remote GETs (%)".into(),
            x_log: true,
            y_log: false,
            series: line(&|r| r.remote_gets * 100.0),
        }
        .write_png(&at(format!("{name}-remote-gets.png")))?;
        return Ok(wrote);
    }
    // Checked after scope rows, which have a Replica row per scope too.
    if rows.iter().filter(|r| r.scheme == "Replica").count() > 1 {
        // replica-budget: throughput against the replica memory it used.
        let replica: Vec<&Row> = rows.iter().filter(|r| r.scheme == "Replica").collect();
        let share = |r: &Row| r.replica_share * 100.0;
        let x_max = replica.iter().map(|r| share(r)).fold(0.0, f64::max);
        let mut series = vec![
            locus_plot::Series {
                label: "Replica (median)".into(),
                points: replica
                    .iter()
                    .map(|r| (share(r), r.throughput_qps))
                    .collect(),
            },
            locus_plot::Series {
                label: "Replica (min)".into(),
                points: replica
                    .iter()
                    .map(|r| (share(r), r.throughput_qps_range[0]))
                    .collect(),
            },
            locus_plot::Series {
                label: "Replica (max)".into(),
                points: replica
                    .iter()
                    .map(|r| (share(r), r.throughput_qps_range[1]))
                    .collect(),
            },
        ];
        for r in rows.iter().filter(|r| r.scheme != "Replica") {
            series.push(locus_plot::Series {
                label: r.scheme.clone(),
                points: vec![(0.0, r.throughput_qps), (x_max, r.throughput_qps)],
            });
        }
        locus_plot::LineChart {
            title: "Replica: throughput against replica memory".into(),
            x_label: "replica bytes (% of the graph's value bytes)".into(),
            y_label: "queries per second".into(),
            x_log: false,
            y_log: false,
            series,
        }
        .write_png(&at(format!("{name}.png")))?;
        return Ok(wrote);
    }
    locus_plot::BarChart {
        title: format!("{name}: throughput by scheme"),
        y_label: "queries per second".into(),
        groups: rows.iter().map(|r| r.scheme.clone()).collect(),
        series: vec![(
            "throughput".into(),
            rows.iter().map(|r| r.throughput_qps).collect(),
        )],
    }
    .write_png(&at(format!("{name}-throughput.png")))?;
    locus_plot::BarChart {
        title: format!("{name}: remote accesses and median latency"),
        y_label: "remote ops (%) / p50 latency (us / 10)".into(),
        groups: rows.iter().map(|r| r.scheme.clone()).collect(),
        series: vec![
            (
                "remote (%)".into(),
                rows.iter().map(|r| r.remote_rate * 100.0).collect(),
            ),
            (
                "p50 (us / 10)".into(),
                rows.iter().map(|r| r.p50_us / 10.0).collect(),
            ),
        ],
    }
    .write_png(&at(format!("{name}-remote.png")))?;
    let cdfs: Vec<locus_plot::Series> = rows
        .iter()
        .filter(|r| !r.update_latencies_us.is_empty())
        .map(|r| locus_plot::cdf_series(r.scheme.clone(), &r.update_latencies_us))
        .collect();
    if !cdfs.is_empty() {
        locus_plot::LineChart {
            title: "Update latency CDF (Pragh Fig. 12a)".into(),
            x_label: "update latency (us)".into(),
            y_label: "fraction of updates".into(),
            x_log: true,
            y_log: false,
            series: cdfs,
        }
        .write_png(&at(format!("{name}-update-cdf.png")))?;
    }
    Ok(wrote)
}
