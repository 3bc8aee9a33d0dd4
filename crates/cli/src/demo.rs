//! `locus demo`: flags and printing; the runs are `locus_bench::demo`.

use clap::Args;
use locus_bench::config::Dist;
use locus_bench::demo::{self, DemoEvent, DemoReport, DemoRow, DemoSettings, Second};
use locus_bench::pragh::Scheme;
use locus_bench::Reporter;

use crate::{CliResult, ClusterFlags};

#[derive(Args, Debug)]
pub struct DemoArgs {
    #[command(flatten)]
    pub cluster: ClusterFlags,
    /// R-MAT scale: 2^scale vertices, 16 * 2^scale edges.
    #[arg(long)]
    pub scale: Option<u32>,
    /// Two-hop queries to run per scheme.
    #[arg(long)]
    pub queries: Option<usize>,
    /// Neighbours per hop.
    #[arg(long)]
    pub k: Option<usize>,
    /// Draw start vertices uniformly instead of Zipf(0.99) over 1024 vertices.
    #[arg(long)]
    pub uniform: bool,
    /// Pipeline the second hop's reads instead of one GET at a time.
    #[arg(long)]
    pub pipelined: bool,
    /// Migrating schemes to show after Ideal and Hash-N (comma-separated:
    /// Split, Split+Cache, Replica), or `none`.
    #[arg(long, value_delimiter = ',', default_value = "Split+Cache,Replica")]
    pub schemes: Vec<String>,
    /// A migrating scheme's recovery stops after this many seconds if
    /// throughput has not settled.
    #[arg(long, value_name = "S", default_value_t = 20.0)]
    pub settle_s: f64,
    /// The coordinator's monitoring interval (Pragh uses 10 s).
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    pub interval_ms: u64,
    /// Print the results as JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: DemoArgs) -> CliResult {
    let mut c = a.cluster.resolve()?;
    if let Some(s) = a.scale {
        c.graph.scale = s;
    }
    if let Some(q) = a.queries {
        c.workload.queries = q;
    }
    if let Some(k) = a.k {
        c.workload.k = k;
    }
    if a.uniform {
        c.workload.dist = Dist::Uniform;
    }
    if a.pipelined {
        c.workload.pipelined = true;
    }
    let mut s = DemoSettings::new(c);
    s.settle_s_max = a.settle_s;
    s.interval_ms = a.interval_ms;
    s.migrating = if a.schemes.len() == 1 && a.schemes[0].eq_ignore_ascii_case("none") {
        Vec::new()
    } else {
        a.schemes
            .iter()
            .map(|n| Scheme::parse(n))
            .collect::<locus_bench::Result<_>>()?
    };
    s.validate()?;
    let report = if a.json {
        demo::run(&s, &Reporter::terminal(), &mut |_| {})?
    } else {
        let mut p = Printer::new(&s);
        demo::run(&s, &Reporter::terminal(), &mut |e| p.event(e))?
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        summary(&s, &report);
    }
    Ok(())
}

/// Prints each result as the demo measures it.
struct Printer {
    settings: DemoSettings,
    ideal_qps: f64,
    rows: usize,
}

const TABLE_HEADER: &str =
    "scheme         machines  load(s)  throughput/s   p50(us)   p99(us) p99.9(us)  remote";
const BAR_CELLS: usize = 24;

impl Printer {
    fn new(s: &DemoSettings) -> Printer {
        Printer {
            settings: s.clone(),
            ideal_qps: 0.0,
            rows: 0,
        }
    }

    fn event(&mut self, e: DemoEvent<'_>) {
        let c = &self.settings.config;
        match e {
            DemoEvent::Graph {
                vertices,
                edges,
                max_degree,
                gen_s,
            } => {
                println!(
                    "R-MAT scale {} ({vertices} vertices, {edges} stored edges, max degree {max_degree}), generated in {gen_s:.1} s",
                    c.graph.scale
                );
                let w = &c.workload;
                println!(
                    "{} two-hop queries per scheme, {} neighbours per hop, starts {}, {}; {} worker threads; remote latency {} ns + payload at {} B/s",
                    w.queries,
                    w.k,
                    match w.dist {
                        Dist::Zipf => format!("Zipf({}) over {} vertices", w.zipf_theta, w.scope),
                        Dist::Uniform => "uniform".to_string(),
                    },
                    if w.pipelined { "second hop pipelined" } else { "one GET at a time" },
                    c.threads(),
                    c.cluster.latency_ns,
                    c.cluster.bandwidth_bytes_per_s
                );
                println!();
                println!("{TABLE_HEADER}");
            }
            DemoEvent::Row(r) => {
                self.rows += 1;
                if self.rows == 1 {
                    self.ideal_qps = r.report.throughput_qps;
                }
                // The migrating schemes' rows come in the final table.
                if self.rows <= 2 {
                    println!("{}", row_line(r));
                }
                if self.rows == 2 {
                    println!();
                    println!(
                        "{} runs at {:.1}% of Ideal's throughput: {:.1}% of its one-sided operations are remote.",
                        r.scheme,
                        100.0 * r.report.throughput_qps / self.ideal_qps.max(1e-9),
                        r.report.remote_rate * 100.0
                    );
                }
            }
            DemoEvent::Migrating(s) => {
                println!();
                let what = match s {
                    Scheme::Replica => {
                        "hot values move to the machines that read them, and values several machines read get read-only replicas"
                    }
                    Scheme::Split => "hot values move to the machines that read them (no location cache)",
                    _ => "hot values move to the machines that read them",
                };
                println!(
                    "{} on the same {} machines and queries: {what}",
                    s.name(),
                    c.cluster.machines
                );
                println!(
                    "  {:>4} {:>11}  {:<w$} {:>5}  {:>7}  {:>12}",
                    "t",
                    "queries/s",
                    "of Ideal",
                    "",
                    "remote",
                    "values moved",
                    w = BAR_CELLS
                );
            }
            DemoEvent::Second(_, sec) => println!("{}", self.second_line(sec)),
            DemoEvent::Settled(_, rec) => match (rec.migration_began_s, rec.settled_after_s) {
                (Some(b), Some(t)) => println!(
                    "  settled after {t} s (values began to move in second {b}; throughput stopped rising)"
                ),
                (Some(b), None) => println!(
                    "  not settled after {:.0} s (values began to move in second {b}); measuring as it is",
                    self.settings.settle_s_max
                ),
                (None, _) => println!(
                    "  no value moved in {:.0} s: migration never began; measuring as it is",
                    self.settings.settle_s_max
                ),
            },
        }
    }

    fn second_line(&self, s: &Second) -> String {
        let share = s.throughput_qps / self.ideal_qps.max(1e-9);
        let filled = ((share * BAR_CELLS as f64).round() as usize).min(BAR_CELLS);
        format!(
            "  {:>3}s {:>11.0}  {}{} {:>4.0}%  {:>6.1}%  {:>12}",
            s.t_s,
            s.throughput_qps,
            "█".repeat(filled),
            "░".repeat(BAR_CELLS - filled),
            share * 100.0,
            s.remote_rate * 100.0,
            s.values_moved
        )
    }
}

fn row_line(r: &DemoRow) -> String {
    format!(
        "{:<14} {:>8} {:>8.1} {:>13.0} {:>9.1} {:>9.1} {:>9.1} {:>6.1}%",
        r.scheme,
        r.machines,
        r.load_s,
        r.report.throughput_qps,
        r.report.p50_us,
        r.report.p99_us,
        r.report.p999_us,
        r.report.remote_rate * 100.0
    )
}

/// The before/after table, a sparkline per migrating scheme, and warnings.
fn summary(s: &DemoSettings, report: &DemoReport) {
    let ideal = report.rows.first().map_or(1.0, |r| r.report.throughput_qps);
    if report.rows.len() > 2 {
        println!();
        println!(
            "before and after, the same {} queries:",
            s.config.workload.queries
        );
        println!(
            "{:<14} {:>13} {:>9} {:>9} {:>8} {:>13} {:>9}",
            "scheme", "throughput/s", "p50(us)", "p99(us)", "remote", "values moved", "of Ideal"
        );
        for r in report.rows.iter().skip(1) {
            println!(
                "{:<14} {:>13.0} {:>9.1} {:>9.1} {:>7.1}% {:>13} {:>8.1}%",
                r.scheme,
                r.report.throughput_qps,
                r.report.p50_us,
                r.report.p99_us,
                r.report.remote_rate * 100.0,
                r.values_moved,
                100.0 * r.report.throughput_qps / ideal.max(1e-9)
            );
        }
        println!();
        for rec in &report.recoveries {
            println!(
                "{:<14} {}  (queries/s per second, Ideal = top)",
                rec.scheme,
                sparkline(rec.seconds.iter().map(|x| x.throughput_qps), ideal)
            );
        }
    }
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
}

/// One block character per value, scaled so that `top` is the highest block.
fn sparkline(values: impl Iterator<Item = f64>, top: f64) -> String {
    const BLOCKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    values
        .map(|v| {
            let i = (v / top.max(1e-9) * (BLOCKS.len() - 1) as f64).round();
            BLOCKS[(i.max(0.0) as usize).min(BLOCKS.len() - 1)]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparkline_scales_to_the_top() {
        assert_eq!(
            sparkline([0.0, 50.0, 100.0, 200.0].into_iter(), 100.0),
            "▁▅██"
        );
    }
}
