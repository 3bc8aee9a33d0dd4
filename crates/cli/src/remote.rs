//! The commands that talk to a running cluster through `locus-client`:
//! `locus query --cluster`, `locus load --cluster`, `locus migrate`,
//! `locus stats`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use locus_client::load::{validate_file, BatchLimits, Batcher, Direction};
use locus_client::{Client, ClientConfig};
use locus_graph::input::{self, VisitError};
use locus_graph::{Format, LoadOptions};
use locus_node::progress::Reporter;
use serde::Serialize;

use crate::CliResult;

fn client(file: &Path) -> CliResult<Client> {
    Ok(Client::from_file(file, ClientConfig::default())?)
}

/// What `locus query --cluster` prints as JSON.
#[derive(Serialize)]
struct RemoteQuery {
    vertex: u32,
    hops: u32,
    k: usize,
    home: u8,
    machines: usize,
    /// The distinct vertices reached at the last hop, increasing.
    distinct: Vec<u32>,
    distinct_count: usize,
    with_repeats: u64,
    /// Time at the server.
    server_us: f64,
    /// Time at the client, network and protocol included.
    round_trip_us: f64,
    cost: Cost,
}

#[derive(Serialize)]
struct Cost {
    local_ops: u64,
    remote_ops: u64,
    local_bytes: u64,
    remote_bytes: u64,
    remote_rate: f64,
}

pub fn query(file: &Path, v: u32, hops: u32, k: usize, show: usize, json: bool) -> CliResult {
    if hops == 0 || hops > 8 {
        return Err(format!("--hops {hops} must be 1..=8").into());
    }
    let k32 = u32::try_from(k)
        .ok()
        .filter(|&k| (1..=locus_client::proto::K_MAX).contains(&k))
        .ok_or_else(|| format!("--k {k} must be 1..=1000000"))?;
    let c = client(file)?;
    let t0 = Instant::now();
    let r = c.khop(v, hops as u8, k32)?;
    let round_trip_us = t0.elapsed().as_secs_f64() * 1e6;
    let ops = r.local_ops + r.remote_ops;
    let q = RemoteQuery {
        vertex: v,
        hops,
        k,
        home: c.home(v),
        machines: c.machines(),
        distinct_count: r.distinct.len(),
        distinct: r.distinct,
        with_repeats: r.with_repeats,
        server_us: r.elapsed_ns as f64 / 1e3,
        round_trip_us,
        cost: Cost {
            local_ops: r.local_ops,
            remote_ops: r.remote_ops,
            local_bytes: r.local_bytes,
            remote_bytes: r.remote_bytes,
            remote_rate: if ops == 0 {
                0.0
            } else {
                r.remote_ops as f64 / ops as f64
            },
        },
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&q)?);
        return Ok(());
    }
    println!(
        "{hops}-hop from vertex {v} at server {} of {}, {k} neighbours per hop:",
        q.home, q.machines
    );
    println!(
        "  {} distinct vertices reached ({} counting repeats) in {:.1} us at the server, {:.1} us round trip",
        q.distinct_count, q.with_repeats, q.server_us, q.round_trip_us
    );
    println!(
        "  one-sided operations: {} local, {} remote ({:.1}% remote), {} remote bytes",
        q.cost.local_ops,
        q.cost.remote_ops,
        q.cost.remote_rate * 100.0,
        q.cost.remote_bytes
    );
    let shown: Vec<String> = q
        .distinct
        .iter()
        .take(show)
        .map(|v| v.to_string())
        .collect();
    println!(
        "  {} {}: {}{}",
        if shown.len() < q.distinct_count {
            "first"
        } else {
            "all"
        },
        shown.len(),
        shown.join(" "),
        if q.distinct_count > show {
            " ... (--json lists all)"
        } else {
            ""
        }
    );
    Ok(())
}

#[derive(Args, Debug)]
pub struct MigrateArgs {
    /// The cluster file.
    #[arg(long, value_name = "FILE")]
    pub cluster: PathBuf,
    /// The vertex whose value moves (every part).
    #[arg(long)]
    pub vertex: u32,
    /// The machine to move it to (it runs the migration, Pragh 4.1).
    #[arg(long)]
    pub to: u8,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn migrate(a: MigrateArgs) -> CliResult {
    let c = client(&a.cluster)?;
    if a.to as usize >= c.machines() {
        return Err(format!(
            "--to {}: the cluster has machines 0..{}",
            a.to,
            c.machines()
        )
        .into());
    }
    let before = c.locate(a.vertex)?;
    if !before.found {
        return Err(format!("vertex {} has no entry in the store", a.vertex).into());
    }
    let t0 = Instant::now();
    let m = c.migrate(a.vertex, a.to)?;
    let took_us = t0.elapsed().as_secs_f64() * 1e6;
    let after = c.locate(a.vertex)?;
    if a.json {
        println!(
            "{}",
            serde_json::json!({"vertex": a.vertex, "home": before.home, "was": before.holder,
                "is": after.holder, "parts_moved": m.parts, "bytes": m.bytes, "micros": took_us})
        );
        return Ok(());
    }
    println!(
        "vertex {} (home {}): was on machine {}, is on machine {}; {} part(s), {} bytes moved in {:.0} us",
        a.vertex, before.home, before.holder, after.holder, m.parts, m.bytes, took_us
    );
    Ok(())
}

#[derive(Args, Debug)]
pub struct StatsArgs {
    /// The cluster file.
    #[arg(long, value_name = "FILE")]
    pub cluster: PathBuf,
    /// Print JSON (one object per server).
    #[arg(long)]
    pub json: bool,
}

pub fn stats(a: StatsArgs) -> CliResult {
    let c = client(&a.cluster)?;
    let mut all = Vec::new();
    for id in 0..c.machines() as u8 {
        all.push(c.stats(id)?);
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&all)?);
        return Ok(());
    }
    for s in &all {
        println!(
            "server {} ({}, pid {}, up {:.0} s): {} vertices, {} keys ({} here, {} away), {} value bytes, cache hit {:.1}%, {} migrated in, {} replicas, reclaim backlog {}, {} clients",
            s["server"], s["address"].as_str().unwrap_or(""), s["pid"], s["uptime_s"].as_f64().unwrap_or(0.0),
            s["vertices"], s["keys"], s["values_here"], s["values_away"], s["value_live_bytes"],
            s["cache"]["hit_rate"].as_f64().unwrap_or(0.0) * 100.0, s["migrations_in"],
            s["replicas_held"], s["reclaim_backlog"], s["clients"]
        );
        println!(
            "  requests: {}  one-sided ops: {} local, {} remote",
            s["requests"], s["ops"]["local"], s["ops"]["remote"]
        );
    }
    Ok(())
}

/// `locus load --cluster FILE edges`: validate the whole file (a malformed
/// file loads nothing and names its line), then stream it in LOAD batches,
/// each to its vertices' home, each applied whole or not at all.
/// Refuses a graph whose largest vertex id `id_max` reaches the keys of the
/// RDF dataset the cluster holds (its catalog beside `cluster`), before
/// anything is sent: the two would overwrite each other's keys.
fn check_clear_of_rdf(cluster: &Path, file: &Path, id_max: u64) -> CliResult {
    let dir = locus_rdf::catalog::Catalog::dir_beside(cluster);
    let Some(base) = locus_rdf::catalog::Catalog::vertex_base_in(&dir)? else {
        return Ok(());
    };
    if base == 0 {
        return Err(format!(
            "{}: this cluster holds an RDF dataset laid out over the whole vertex id space (its catalog in {} has no base past the graph ids: an older format, or a dataset too large to share); load the graph into another cluster",
            file.display(),
            dir.display()
        )
        .into());
    }
    if id_max >= base {
        return Err(format!(
            "{}: vertex id {id_max} reaches the keys of the RDF dataset this cluster holds (from vertex {base}, its catalog in {}); a graph beside it needs ids below {base}",
            file.display(),
            dir.display()
        )
        .into());
    }
    Ok(())
}

pub fn load(
    cluster: &Path,
    file: &Path,
    format: Option<Format>,
    max_vertex_id: Option<u32>,
    directed: bool,
    ignore_weights: bool,
    json: bool,
) -> CliResult {
    let mut opts = LoadOptions {
        ignore_weights,
        ..LoadOptions::default()
    };
    if let Some(m) = max_vertex_id {
        opts.max_vertex_id = m;
    }
    let c = client(cluster)?;
    let t0 = Instant::now();
    let summary = validate_file(file, format, &opts)?;
    let validate_s = t0.elapsed().as_secs_f64();
    check_clear_of_rdf(cluster, file, summary.id_max.into())?;
    let direction = if directed {
        Direction::Directed
    } else {
        Direction::Undirected
    };
    let mut batcher = Batcher::with_table(&*c.slot_table()?, direction, BatchLimits::default())?;
    let reporter = if json {
        Reporter::quiet()
    } else {
        Reporter::terminal()
    };
    let bar = reporter.bar(summary.edges, "loading edges");
    // Vertices whose list changed, one bit per id: a vertex may be in many
    // batches, and counts once.
    let mut changed: Vec<u64> = Vec::new();
    let (mut vertices, mut added, mut batches) = (0u64, 0u64, 0u64);
    let t1 = Instant::now();
    let mut send = |b: locus_client::load::Batch| -> Result<(), String> {
        let what = b.to_string();
        let ids: Vec<u32> = b.vertices.iter().map(|(v, _)| *v).collect();
        let (_, e, flags) = c
            .load_batch_changed(
                b.home as u8,
                b.vertices,
                Some(std::time::Duration::from_secs(120)),
            )
            .map_err(|e| {
                // A server that failed under the batch may have logged it
                // (LOAD is one record: applied whole or not at all).
                let fate = match e {
                    locus_client::ClientError::Unavailable { .. } => {
                        "this one may or may not have been applied (its server failed under it; read it back once the server is up)"
                    }
                    _ => "this one was not applied",
                };
                format!(
                    "{what}: {e}; the {batches} batches before it ({vertices} vertices changed, {added} edges added) were acknowledged and stay loaded; {fate}"
                )
            })?;
        for (v, _) in ids.iter().zip(flags).filter(|(_, f)| *f) {
            let (word, bit) = (*v as usize / 64, v % 64);
            if word >= changed.len() {
                changed.resize(word + 1, 0);
            }
            vertices += (changed[word] >> bit & 1 == 0) as u64;
            changed[word] |= 1 << bit;
        }
        added += e;
        batches += 1;
        Ok(())
    };
    let visited = input::visit(file, format, &opts, |edge, at| {
        bar.inc(1);
        for b in batcher.push(edge, at) {
            send(b)?;
        }
        Ok::<(), String>(())
    });
    match visited {
        Ok(_) => {}
        Err(VisitError::Rejected { error, .. }) => return Err(error.into()),
        Err(e) => return Err(e.to_string().into()),
    }
    for b in batcher.finish() {
        send(b)?;
    }
    bar.finish_and_clear();
    let load_s = t1.elapsed().as_secs_f64();
    let out = serde_json::json!({
        "file": file.display().to_string(), "input_edges": summary.edges,
        "vertices_changed": vertices, "edges_added": added, "batches": batches,
        "validate_s": validate_s, "load_s": load_s,
        "edges_per_s": if load_s > 0.0 { summary.edges as f64 / load_s } else { 0.0 },
    });
    if json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!(
            "{}: {} edges validated in {:.1} s, loaded in {:.1} s ({:.0} edges/s) over {} batches: {} vertices changed, {} edges added{}",
            file.display(),
            summary.edges,
            validate_s,
            load_s,
            out["edges_per_s"].as_f64().unwrap_or(0.0),
            batches,
            vertices,
            added,
            if directed { "" } else { " (both directions)" }
        );
    }
    Ok(())
}

/// `locus edge insert|delete`.
#[derive(Args, Debug)]
pub struct EdgeArgs {
    #[command(subcommand)]
    op: EdgeOp,
}

#[derive(clap::Subcommand, Debug)]
enum EdgeOp {
    /// Add the edge FROM -> TO (creating FROM's entry if it has none).
    Insert(EdgeChange),
    /// Remove the edge FROM -> TO.
    Delete(EdgeChange),
}

#[derive(Args, Debug)]
struct EdgeChange {
    /// The cluster file.
    #[arg(long, value_name = "FILE")]
    cluster: PathBuf,
    /// Source vertex.
    from: u32,
    /// Target vertex.
    to: u32,
    /// Both directions (FROM -> TO and TO -> FROM), as an undirected graph
    /// loaded with `locus load --cluster` stores them.
    #[arg(long)]
    both: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub fn edge(a: EdgeArgs) -> CliResult {
    let (insert, e) = match a.op {
        EdgeOp::Insert(e) => (true, e),
        EdgeOp::Delete(e) => (false, e),
    };
    let c = client(&e.cluster)?;
    let apply = |x: u32, y: u32| {
        if insert {
            c.insert_edge(x, y)
        } else {
            c.delete_edge(x, y)
        }
    };
    let mut changed = vec![(e.from, e.to, apply(e.from, e.to)?)];
    if e.both && e.from != e.to {
        changed.push((e.to, e.from, apply(e.to, e.from)?));
    }
    if e.json {
        let rows: Vec<_> = changed
            .iter()
            .map(|(x, y, c)| serde_json::json!({"from": x, "to": y, "changed": c}))
            .collect();
        println!(
            "{}",
            serde_json::json!({"op": if insert { "insert" } else { "delete" }, "edges": rows})
        );
        return Ok(());
    }
    for (x, y, c) in changed {
        let what = match (insert, c) {
            (true, true) => "inserted",
            (true, false) => "was already there",
            (false, true) => "deleted",
            (false, false) => "was not there",
        };
        println!("edge {x} -> {y} {what}");
    }
    Ok(())
}

/// `locus vertex get` and `locus vertex delete`.
#[derive(Args, Debug)]
pub struct VertexArgs {
    #[command(subcommand)]
    op: VertexOp,
}

#[derive(clap::Subcommand, Debug)]
enum VertexOp {
    /// Read a vertex's neighbours: at its primary (linearizable), or with
    /// --read stale-ok from a backup of its slot (replication, issue 60),
    /// saying which.
    Get(VertexGet),
    /// Delete a vertex: its adjacency list, and with --both the edges of its
    /// neighbours that point at it.
    Delete(VertexDelete),
}

/// How a read may be answered.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum ReadMode {
    /// At the slot's primary: sees every acknowledged update.
    Linearizable,
    /// By a backup of the slot if one answers (it may lag the primary),
    /// else at the primary; the answer says which.
    StaleOk,
}

#[derive(Args, Debug)]
struct VertexGet {
    /// The cluster file.
    #[arg(long, value_name = "FILE")]
    cluster: PathBuf,
    /// The vertex.
    vertex: u32,
    /// Neighbours wanted (0: all).
    #[arg(long, default_value_t = 0)]
    k: u32,
    /// Where the read may be answered.
    #[arg(long, value_enum, default_value_t = ReadMode::Linearizable)]
    read: ReadMode,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct VertexDelete {
    /// The cluster file.
    #[arg(long, value_name = "FILE")]
    cluster: PathBuf,
    /// The vertex.
    vertex: u32,
    /// The graph stores both directions of every edge (as `locus load
    /// --cluster` does unless --directed): also delete NEIGHBOUR -> VERTEX
    /// for each of its neighbours. Interrupted, it can be run again.
    #[arg(long)]
    both: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

fn vertex_get(g: &VertexGet) -> CliResult {
    let c = client(&g.cluster)?;
    let (ids, from) = match g.read {
        ReadMode::Linearizable => (
            c.neighbors(g.vertex, g.k)?,
            locus_client::ReadFrom::Primary(c.home(g.vertex)),
        ),
        ReadMode::StaleOk => c.neighbors_stale_ok(g.vertex, g.k)?,
    };
    let (stale, server) = match from {
        locus_client::ReadFrom::Primary(id) => (false, id),
        locus_client::ReadFrom::Backup(id) => (true, id),
    };
    if g.json {
        println!(
            "{}",
            serde_json::json!({"vertex": g.vertex, "neighbors": ids,
                "from_backup": stale, "server": server})
        );
        return Ok(());
    }
    println!(
        "vertex {}: {} neighbours, read at {from}",
        g.vertex,
        ids.len()
    );
    let shown: Vec<String> = ids.iter().map(u32::to_string).collect();
    println!("  {}", shown.join(" "));
    Ok(())
}

pub fn vertex(a: VertexArgs) -> CliResult {
    let d = match a.op {
        VertexOp::Get(g) => return vertex_get(&g),
        VertexOp::Delete(d) => d,
    };
    let c = client(&d.cluster)?;
    let (list, reverse) = if d.both {
        c.delete_vertex_both(d.vertex)?
    } else {
        (c.delete_vertex(d.vertex)?, 0)
    };
    if d.json {
        println!(
            "{}",
            serde_json::json!({"vertex": d.vertex, "found": list.is_some(),
                "neighbors": list.as_deref().unwrap_or_default(),
                "reverse_edges_deleted": reverse})
        );
        return Ok(());
    }
    match list {
        None => println!("vertex {} has no entry: nothing deleted", d.vertex),
        Some(l) if d.both => println!(
            "deleted vertex {} ({} neighbours) and {reverse} edges pointing at it",
            d.vertex,
            l.len()
        ),
        Some(l) => println!(
            "deleted vertex {} ({} neighbours); edges of other vertices pointing at it stay (--both deletes them)",
            d.vertex,
            l.len()
        ),
    }
    Ok(())
}
