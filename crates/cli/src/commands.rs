//! `locus generate`, `locus load`, `locus query`.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use locus_client::proto::{Reply, Request};
use locus_graph::{input, Adjacency, CsrOptions, Format, Lists, LoadOptions, Rmat, RmatConfig};
use serde::Serialize;

use locus_node::embedded::{self as cluster, rmat_csr};
use locus_node::progress::Reporter;

use crate::ClusterFlags;

#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// R-MAT scale: 2^scale vertices (1..=30).
    #[arg(long, default_value_t = 16)]
    pub scale: u32,
    /// Edges per vertex.
    #[arg(long, default_value_t = 16)]
    pub edge_factor: u32,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Keep Graph500's vertex numbering unpermuted (hubs at low ids).
    #[arg(long)]
    pub no_permute: bool,
    /// Output format: text (SNAP) or binary (GridGraph u32 pairs). Default: from the extension.
    #[arg(long)]
    pub format: Option<Format>,
    /// Output file.
    #[arg(long, short)]
    pub out: PathBuf,
}

pub fn generate(a: GenerateArgs) -> crate::CliResult {
    let rmat = Rmat::new(RmatConfig {
        scale: a.scale,
        edge_factor: a.edge_factor,
        seed: a.seed,
        permute: !a.no_permute,
        ..RmatConfig::default()
    })
    .map_err(|e| e.to_string())?;
    let format = Format::resolve(a.format, &a.out);
    let t0 = Instant::now();
    let n = input::write_rmat(&a.out, format, &rmat, locus_graph::default_threads())
        .map_err(|e| e.to_string())?;
    println!(
        "wrote {} edges over {} vertices to {} ({format}) in {:.1} s",
        n,
        rmat.vertex_count(),
        a.out.display(),
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

#[derive(Args, Debug)]
pub struct LoadArgs {
    /// Edge list: SNAP text (`src dst` per line, `#` comments) or GridGraph binary (u32 pairs).
    pub file: PathBuf,
    /// Input format; default: binary for .bin/.u32/.gridgraph, text otherwise.
    #[arg(long)]
    pub format: Option<Format>,
    /// Reject vertex ids above this.
    #[arg(long)]
    pub max_vertex_id: Option<u32>,
    /// Keep edges directed (default: store both directions, drop duplicates and self loops).
    #[arg(long)]
    pub directed: bool,
    /// Drop a weight column (a third text column, `.wel`, valued `.mtx`):
    /// the store keeps no weights, and without this flag weighted input is refused.
    #[arg(long)]
    pub ignore_weights: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
    /// Load into a running cluster (its cluster file) instead of an embedded one.
    #[arg(long = "cluster", value_name = "FILE")]
    pub remote: Option<PathBuf>,
    #[command(flatten)]
    pub cluster: ClusterFlags,
}

#[derive(Serialize)]
struct MachineSummary {
    machine: u8,
    vertices: u64,
    key_region_bytes: u64,
    value_bytes: u64,
}

#[derive(Serialize)]
struct LoadSummary {
    file: String,
    input_edges: u64,
    /// The largest vertex id with an edge (ids need not be dense).
    largest_id: Option<u32>,
    vertices_with_edges: u64,
    stored_edges: u64,
    max_degree: u64,
    machines: Vec<MachineSummary>,
    parse_s: f64,
    load_s: f64,
}

/// Reads and validates an edge list into adjacency lists of the vertices
/// with edges (memory proportional to the edges, whatever the ids); nothing
/// is loaded on error.
pub fn read_graph(
    file: &PathBuf,
    format: Option<Format>,
    max_vertex_id: Option<u32>,
    directed: bool,
    ignore_weights: bool,
) -> Result<(u64, Adjacency), String> {
    let mut opts = LoadOptions {
        ignore_weights,
        ..LoadOptions::default()
    };
    if let Some(m) = max_vertex_id {
        opts.max_vertex_id = m;
    }
    let list = input::load(file, format, &opts).map_err(|e| e.to_string())?;
    let csr_opts = if directed {
        CsrOptions {
            symmetrize: false,
            ..CsrOptions::default()
        }
    } else {
        CsrOptions::default()
    };
    let edges = list.edge_count();
    Ok((edges, Adjacency::from_edge_list(&list, csr_opts)))
}

pub fn load(a: LoadArgs) -> crate::CliResult {
    if let Some(cluster) = &a.remote {
        return crate::remote::load(
            cluster,
            &a.file,
            a.format,
            a.max_vertex_id,
            a.directed,
            a.ignore_weights,
            a.json,
        );
    }
    let c = a.cluster.resolve()?;
    let t0 = Instant::now();
    let (input_edges, g) = read_graph(
        &a.file,
        a.format,
        a.max_vertex_id,
        a.directed,
        a.ignore_weights,
    )?;
    let parse_s = t0.elapsed().as_secs_f64();
    let machines = c.cluster.machines;
    let e = cluster::build(&g, machines, &c, &Reporter::terminal())?;
    let mut per = vec![0u64; machines];
    for i in 0..g.entries() {
        per[e.stores.owner(g.vertex(i)) as usize] += 1;
    }
    let summary = LoadSummary {
        file: a.file.display().to_string(),
        input_edges,
        largest_id: g.entries().checked_sub(1).map(|i| g.vertex(i)),
        vertices_with_edges: g.vertices_with_edges(),
        stored_edges: g.stored_edges(),
        max_degree: g.max_degree(),
        machines: e
            .stores
            .usage()
            .into_iter()
            .map(|u| MachineSummary {
                machine: u.machine,
                vertices: per[u.machine as usize],
                key_region_bytes: u.key_region_bytes,
                value_bytes: u.value_live_bytes,
            })
            .collect(),
        parse_s,
        load_s: e.load_s,
    };
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&summary).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    println!(
        "{}: {} edges read in {:.1} s",
        summary.file, summary.input_edges, parse_s
    );
    println!(
        "vertices: {} with edges (largest id {}); stored edges: {}{}; max degree: {}",
        summary.vertices_with_edges,
        summary
            .largest_id
            .map_or_else(|| "-".to_string(), |v| v.to_string()),
        summary.stored_edges,
        if a.directed {
            ""
        } else {
            " (both directions, duplicates and self loops dropped)"
        },
        summary.max_degree
    );
    println!("loaded into {machines} machine(s) in {:.1} s", e.load_s);
    println!(
        "{:>8} {:>12} {:>14} {:>14}",
        "machine", "vertices", "key bytes", "value bytes"
    );
    for m in &summary.machines {
        println!(
            "{:>8} {:>12} {:>14} {:>14}",
            m.machine, m.vertices, m.key_region_bytes, m.value_bytes
        );
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct QueryArgs {
    /// Edge list to load (default: the config's R-MAT graph).
    #[arg(long)]
    pub graph: Option<PathBuf>,
    /// R-MAT scale to generate when no --graph is given.
    #[arg(long)]
    pub scale: Option<u32>,
    /// Input format of --graph.
    #[arg(long)]
    pub format: Option<Format>,
    /// Drop a weight column of --graph (weighted input is refused without it).
    #[arg(long)]
    pub ignore_weights: bool,
    /// Start vertex.
    #[arg(long)]
    pub vertex: u32,
    /// Hops.
    #[arg(long, default_value_t = 2)]
    pub hops: u32,
    /// Neighbours followed per vertex per hop.
    #[arg(long, default_value_t = 100)]
    pub k: usize,
    /// How many of the distinct vertices reached to print (--json lists all).
    #[arg(long, default_value_t = 20)]
    pub show: usize,
    /// Print the result as JSON, with every distinct vertex reached.
    #[arg(long)]
    pub json: bool,
    /// Query a running cluster (its cluster file) instead of an embedded one.
    #[arg(long = "cluster", value_name = "FILE", conflicts_with_all = ["graph", "scale"])]
    pub remote: Option<PathBuf>,
    #[command(flatten)]
    pub cluster: ClusterFlags,
}

/// What `locus query` found and what it cost.
#[derive(Serialize)]
struct QueryResult {
    vertex: u32,
    hops: u32,
    k: usize,
    home_machine: u8,
    machines: usize,
    /// Distinct vertices reached at the last hop.
    distinct_count: usize,
    /// Vertices reached at the last hop, counting each path (a multiset).
    with_repeats: usize,
    micros: f64,
    local_ops: u64,
    remote_ops: u64,
    remote_rate: f64,
    /// The distinct vertices reached, in increasing order.
    distinct: Vec<u32>,
}

pub fn query(a: QueryArgs) -> crate::CliResult {
    if let Some(file) = &a.remote {
        return crate::remote::query(file, a.vertex, a.hops, a.k, a.show, a.json);
    }
    let mut c = a.cluster.resolve()?;
    if let Some(s) = a.scale {
        c.graph.scale = s;
    }
    if a.hops == 0 || a.hops > 8 {
        return Err(format!("--hops {} must be 1..=8", a.hops).into());
    }
    let machines = c.cluster.machines;
    let e = match &a.graph {
        Some(f) => {
            let g = read_graph(f, a.format, None, false, a.ignore_weights)?.1;
            if g.neighbors(a.vertex).is_empty() {
                return Err(format!("vertex {} has no edges in {}", a.vertex, f.display()).into());
            }
            cluster::build(&g, machines, &c, &Reporter::terminal())?
        }
        None => {
            let csr = rmat_csr(&c.graph)?;
            if a.vertex as u64 >= csr.vertex_count() {
                return Err(format!(
                    "vertex {} is not in the graph (ids 0..{})",
                    a.vertex,
                    csr.vertex_count()
                )
                .into());
            }
            cluster::build(&csr, machines, &c, &Reporter::terminal())?
        }
    };
    // The query `locus server` answers: a KHOP request to the vertex's
    // home node, through the same `Node::handle`.
    let home = e.stores.owner(a.vertex);
    let node = &e.nodes[home as usize];
    let mut session = node.session();
    let hops = u8::try_from(a.hops).expect("checked to be 1..=8");
    let k = u32::try_from(a.k).map_err(|_| format!("--k {} is too large", a.k))?;
    let reply = node.handle(
        &mut session,
        Request::Khop {
            vertex: a.vertex,
            hops,
            k,
        },
        u64::MAX,
    );
    let reply = match reply {
        Reply::Khop(r) => r,
        Reply::Error { message, .. } => return Err(message.into()),
        other => return Err(format!("unexpected reply to KHOP: {other:?}").into()),
    };
    let (local_ops, remote_ops) = (reply.local_ops, reply.remote_ops);
    let distinct = reply.distinct;
    let with_repeats = reply.with_repeats as usize;
    let r = QueryResult {
        vertex: a.vertex,
        hops: a.hops,
        k: a.k,
        home_machine: home,
        machines,
        distinct_count: distinct.len(),
        with_repeats,
        micros: reply.elapsed_ns as f64 / 1e3,
        local_ops,
        remote_ops,
        remote_rate: remote_ops as f64 / (local_ops + remote_ops).max(1) as f64,
        distinct,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(());
    }
    println!(
        "{}-hop from vertex {} (home machine {home} of {machines}), {} neighbours per hop:",
        a.hops, a.vertex, a.k
    );
    println!(
        "  {} distinct vertices reached ({} counting repeats) in {:.1} us",
        r.distinct_count, r.with_repeats, r.micros
    );
    println!(
        "  one-sided operations: {} local, {} remote ({:.1}% remote)",
        r.local_ops,
        r.remote_ops,
        r.remote_rate * 100.0
    );
    let shown: Vec<String> = r
        .distinct
        .iter()
        .take(a.show)
        .map(|v| v.to_string())
        .collect();
    println!(
        "  {} {}: {}{}",
        if shown.len() < r.distinct_count {
            "first"
        } else {
            "all"
        },
        shown.len(),
        shown.join(" "),
        if r.distinct_count > a.show {
            " ... (--json lists all)"
        } else {
            ""
        }
    );
    Ok(())
}
