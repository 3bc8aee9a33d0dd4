//! `locus demo`: Ideal versus hash-partitioned, side by side, on one graph.

use std::time::Instant;

use clap::Args;
use locus_graph::{Csr, CsrOptions, Rmat, RmatConfig};
use locus_workloads::traversal::{run_two_hop, start_vertices, RunReport, StartDist, TwoHop};
use serde::Serialize;

use crate::cluster::{self, progress};
use crate::config::{Config, Dist};
use crate::ClusterFlags;

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
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
pub struct SchemeRow {
    pub scheme: String,
    pub machines: usize,
    pub load_s: f64,
    #[serde(flatten)]
    pub report: RunReport,
}

/// Builds the R-MAT graph of the config as a CSR (undirected, simple).
pub fn rmat_csr(c: &Config) -> Result<Csr, String> {
    let rmat = Rmat::new(RmatConfig {
        scale: c.graph.scale,
        edge_factor: c.graph.edge_factor,
        seed: c.graph.seed,
        ..RmatConfig::default()
    })
    .map_err(|e| e.to_string())?;
    Csr::from_rmat(&rmat, CsrOptions::default()).map_err(|e| e.to_string())
}

/// Loads the graph on `machines` machines and runs the config's two-hop workload.
pub fn run_scheme(name: &str, csr: &Csr, machines: usize, c: &Config) -> Result<SchemeRow, String> {
    let e = cluster::build(csr, machines, c)?;
    let dist = match c.workload.dist {
        Dist::Zipf => StartDist::Zipf {
            theta: c.workload.zipf_theta,
            scope: c.workload.scope,
        },
        Dist::Uniform => StartDist::Uniform,
    };
    let starts = start_vertices(
        csr.vertex_count(),
        c.workload.queries,
        dist,
        c.workload.seed,
        |v| csr.degree(v) > 0,
    )
    .map_err(|e| e.to_string())?;
    let pb = progress(starts.len() as u64, &format!("{name}: queries"));
    let report = run_two_hop(
        &e.store,
        e.fabric.counters(),
        c.threads(),
        &starts,
        TwoHop {
            k: c.workload.k,
            pipelined: c.workload.pipelined,
        },
        &|done| pb.set_position(done),
    )
    .map_err(|e| e.to_string())?;
    pb.finish_and_clear();
    Ok(SchemeRow {
        scheme: name.to_string(),
        machines,
        load_s: e.load_s,
        report,
    })
}

pub fn run(a: DemoArgs) -> Result<(), String> {
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
    c.validate()?;
    let t0 = Instant::now();
    let csr = rmat_csr(&c)?;
    let gen_s = t0.elapsed().as_secs_f64();
    let n = c.cluster.machines;
    let rows = vec![
        run_scheme("Ideal", &csr, 1, &c)?,
        run_scheme(&format!("Hash-{n}"), &csr, n, &c)?,
    ];
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    let w = &c.workload;
    println!(
        "R-MAT scale {} ({} vertices, {} stored edges, max degree {}), generated in {:.1} s",
        c.graph.scale,
        csr.vertex_count(),
        csr.edge_count(),
        csr.max_degree(),
        gen_s
    );
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
    println!(
        "{:<10} {:>8} {:>8} {:>14} {:>10} {:>10} {:>10} {:>12}",
        "scheme",
        "machines",
        "load(s)",
        "throughput/s",
        "p50(us)",
        "p99(us)",
        "p99.9(us)",
        "remote-rate"
    );
    for r in &rows {
        println!(
            "{:<10} {:>8} {:>8.1} {:>14.0} {:>10.1} {:>10.1} {:>10.1} {:>11.1}%",
            r.scheme,
            r.machines,
            r.load_s,
            r.report.throughput_qps,
            r.report.p50_us,
            r.report.p99_us,
            r.report.p999_us,
            r.report.remote_rate * 100.0
        );
    }
    let ideal = rows[0].report.throughput_qps;
    let hash = rows[1].report.throughput_qps;
    println!();
    println!(
        "Hash-{n} runs at {:.1}% of Ideal's throughput; {:.1}% of its one-sided operations are remote.",
        100.0 * hash / ideal,
        rows[1].report.remote_rate * 100.0,
    );
    println!(
        "Random placement makes {:.1}% of accesses remote; a query's first hop is always local (it runs on its\n\
         start vertex's home), which pulls the rate below that when start vertices have few neighbours.",
        100.0 * (1.0 - 1.0 / n as f64)
    );
    Ok(())
}
