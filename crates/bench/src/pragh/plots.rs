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
/// (issue 13, requirement 7). One series per scheme: each run is a share
/// of the median of its own scheme, scope (`scope`, `uniform --scopes`) and
/// replica budget (`replica-budget`), so a scheme's scopes and budgets share
/// its series and the chart stays within the plot's series limit however
/// many ran. `None` if no run has the probe or no such group has three
/// runs.
pub(super) fn plot_host(
    dir: &std::path::Path,
    name: &str,
    run_rows: &[Vec<Row>],
) -> Result<Option<PathBuf>> {
    let series = host_series(run_rows);
    if series.is_empty() {
        return Ok(None);
    }
    let path = dir.join(format!("{name}-host.png"));
    locus_plot::LineChart {
        title: format!("{name}: each run against the host's core-to-core handoff"),
        x_label: "cache line round trip between the two cores (ns)".into(),
        y_label: "throughput / its scheme's median (per scope, budget)".into(),
        x_log: false,
        y_log: false,
        series,
    }
    .write_png(&path)?;
    Ok(Some(path))
}

/// The host chart's series: per scheme, (handoff, throughput over its
/// group's median) for every run of a group of three runs or more, in order
/// of handoff.
fn host_series(run_rows: &[Vec<Row>]) -> Vec<locus_plot::Series> {
    // (scheme, scope, replica budget) -> (handoff, throughput) of each run.
    type Group = (String, Option<u64>, u64);
    let mut groups: Vec<(Group, Vec<(f64, f64)>)> = Vec::new();
    for r in run_rows.iter().flatten() {
        if r.measure_host_handoff_ns <= 0.0 || r.throughput_qps <= 0.0 {
            continue;
        }
        let key = (r.scheme.clone(), r.scope, r.replica_budget_bytes);
        let point = (r.measure_host_handoff_ns, r.throughput_qps);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, pts)) => pts.push(point),
            None => groups.push((key, vec![point])),
        }
    }
    let mut schemes: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for ((scheme, _, _), pts) in groups {
        if pts.len() < 3 {
            continue;
        }
        let mut q: Vec<f64> = pts.iter().map(|p| p.1).collect();
        q.sort_by(f64::total_cmp);
        let median = q[q.len() / 2];
        let shares = pts.iter().map(|&(h, t)| (h, t / median));
        match schemes.iter_mut().find(|(l, _)| *l == scheme) {
            Some((_, all)) => all.extend(shares),
            None => schemes.push((scheme, shares.collect())),
        }
    }
    schemes
        .into_iter()
        .map(|(label, mut points)| {
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            locus_plot::Series { label, points }
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A run's row with only what the host chart reads set.
    fn run_row(scheme: &str, scope: Option<u64>, qps: f64, handoff_ns: f64) -> Row {
        budget_row(scheme, scope, 0, qps, handoff_ns)
    }

    fn budget_row(scheme: &str, scope: Option<u64>, budget: u64, qps: f64, handoff_ns: f64) -> Row {
        let mut v = serde_json::json!({
            "scheme": scheme, "scope": scope, "throughput_qps": qps, "p50_us": 1.0,
            "p99_us": 1.0, "p999_us": 1.0, "remote_rate": 0.0, "remote_gets": 0.0,
            "gets_per_query": 1.0, "migrated_fraction": 0.0, "values_moved": 0,
            "bytes_moved": 0, "vs_orig": 1.0, "vs_ideal": 1.0, "machines": 8, "threads": 2,
            "queries": 1, "updates": 0, "update_p50_us": 0.0, "update_p99_us": 0.0,
            "update_p999_us": 0.0, "forwarded_share": 0.0, "warm_s": 1.0,
            "warm_rounds_approved": [0, 0], "migrations_approved": 0,
            "contended_decisions": 0, "replica_bytes": 0, "replica_bytes_machine_max": 0,
            "replica_share": 0.0, "replica_budget_bytes": budget, "graph_value_bytes": 1,
            "measure_machine_share": 1.0, "measure_background_share": 0.0,
            "measure_worker_preempted": 0, "measure_cpu_s": {}, "measure_host_probe_ns": 4.0,
            "measure_host_handoff_ns": handoff_ns, "measure_steal_share": 0.0,
            "measure_parts": 8, "placement_after": null, "runs": 1,
        });
        for f in [
            "throughput_qps_range",
            "vs_orig_range",
            "vs_ideal_range",
            "remote_rate_range",
            "remote_gets_range",
            "migrated_fraction_range",
        ] {
            v[f] = serde_json::json!([1.0, 1.0]);
        }
        serde_json::from_value(v).unwrap()
    }

    /// `bench pragh scope` runs five schemes at four scopes: twenty
    /// (scheme, scope) groups, twice the plot's series limit. The host chart
    /// draws one series per scheme, each run a share of its own scope's
    /// median. (It drew a series per scheme and scope and failed the
    /// command after its runs: stop 56.)
    #[test]
    fn the_host_chart_of_a_scope_run_has_a_series_per_scheme() {
        let schemes = ["Ideal", "Orig", "Split+Cache", "Replica", "Shard"];
        let scopes = [1 << 10, 1 << 12, 1 << 14, 1 << 16];
        let mut run_rows = Vec::new();
        for run in 0..3u32 {
            let mut rows = Vec::new();
            for (i, s) in schemes.iter().enumerate() {
                for (j, &scope) in scopes.iter().enumerate() {
                    // Scopes far apart in throughput; runs 10% apart.
                    let qps = 1e3 * (1 + i) as f64 * (1 + 10 * j) as f64 * (1.0 + 0.1 * run as f64);
                    rows.push(run_row(s, Some(scope), qps, 100.0 + 50.0 * run as f64));
                }
            }
            run_rows.push(rows);
        }
        assert!(schemes.len() * scopes.len() > locus_plot::SERIES_COUNT_MAX);
        let dir = tempfile::tempdir().unwrap();
        let path = plot_host(dir.path(), "pragh-scope", &run_rows)
            .unwrap()
            .expect("every scheme and scope has three runs");
        assert!(std::fs::metadata(&path).unwrap().len() > 0);
        let series = host_series(&run_rows);
        assert_eq!(series.len(), schemes.len());
        for s in &series {
            assert_eq!(s.points.len(), scopes.len() * 3, "{}", s.label);
        }
    }

    /// Groups of fewer than three runs are left out; with none left there
    /// is no chart.
    #[test]
    fn the_host_chart_needs_three_runs_of_a_scheme_and_scope() {
        let run_rows: Vec<Vec<Row>> = (0..2)
            .map(|_| vec![run_row("Orig", Some(1024), 1e4, 120.0)])
            .collect();
        let dir = tempfile::tempdir().unwrap();
        assert!(plot_host(dir.path(), "pragh-scope", &run_rows)
            .unwrap()
            .is_none());
    }

    /// `replica-budget` runs Replica at seven budgets under one name: each
    /// run is a share of its own budget's median, not of all budgets' (which
    /// would draw the budgets' differences as the host's).
    #[test]
    fn the_host_chart_takes_each_budget_against_its_own_median() {
        let budgets = [0u64, 1 << 10, 1 << 14, 1 << 18];
        let run_rows: Vec<Vec<Row>> = (0..3)
            .map(|run| {
                budgets
                    .iter()
                    .enumerate()
                    .map(|(i, &b)| {
                        let qps = 1e4 * (1 + 3 * i) as f64 * [1.0, 1.05, 0.95][run];
                        budget_row("Replica", None, b, qps, 100.0 + run as f64)
                    })
                    .collect()
            })
            .collect();
        let series = host_series(&run_rows);
        assert_eq!(series.len(), 1);
        assert_eq!(series[0].points.len(), 12);
        for &(_, share) in &series[0].points {
            assert!((0.94..=1.06).contains(&share), "{share}");
        }
    }
}
