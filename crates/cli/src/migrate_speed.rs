//! `locus bench migrate-speed` (Pragh 6, Fig. 13): values migrated per second
//! and network bytes per second, for payloads from 64 B to 64 KB, with one and
//! two migration threads, on the in-process fabric (default latency model) and
//! on TCP loopback.
//!
//! Setup per measurement: a 2-machine cluster (plus a third for the second
//! thread's source on TCP, so sources never collide); `n` values of the payload
//! size are loaded on machine 1; each migration thread acts as machine 0 and
//! migrates its share with the pipelined `migrate_batch`. Rates are counted
//! over the migration phase only; bytes are the fabric's remote payload bytes
//! in that phase (both directions, all operations: lookups, copies,
//! invalidations, CASes, reclaim appends).

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use locus_fabric::counting::{Counting, Locality};
use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_fabric::tcp::{loopback_cluster_with, TcpConfig};
use locus_fabric::Fabric;
use locus_store::{Key, Migration, Store, StoreConfig};
use serde::Serialize;

#[derive(Args, Debug)]
pub struct MigrateSpeedArgs {
    /// quick (seconds) or full (more values per measurement).
    #[arg(long, default_value = "quick")]
    pub preset: String,
    /// Print the rows as JSON.
    #[arg(long)]
    pub json: bool,
    /// Directory to write migrate-speed.json into.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Skip the TCP rows.
    #[arg(long)]
    pub no_tcp: bool,
}

#[derive(Serialize, Debug, Clone)]
pub struct Row {
    pub fabric: String,
    pub threads: usize,
    pub payload_bytes: u64,
    pub values: u64,
    pub values_per_s: f64,
    pub bytes_per_s: f64,
    pub elapsed_s: f64,
}

const PAYLOADS: [u64; 6] = [64, 256, 1024, 4096, 16384, 65536];

fn config(values: u64, payload: u64) -> StoreConfig {
    let per_value = payload + 64;
    StoreConfig {
        buckets_per_machine: (values / 2).max(64).next_power_of_two(),
        value_region_bytes: (values * per_value * 2 + (64 << 20)).next_multiple_of(8),
        reclaim_ring_entries: values.max(1024),
        ..StoreConfig::default()
    }
}

/// `n` values for this payload size: enough to take a measurable time, bounded in memory.
fn count(payload: u64, full: bool) -> u64 {
    let budget: u64 = if full { 256 << 20 } else { 48 << 20 };
    let cap = if full { 200_000 } else { 40_000 };
    (budget / payload).clamp(256, cap)
}

/// The ids of a value whose payload is `payload` bytes (8 bytes of count and flags, then u32 ids).
fn list(payload: u64, v: u32) -> Vec<u32> {
    (0..(payload.saturating_sub(8) / 4) as u32)
        .map(|i| v ^ i)
        .collect()
}

fn measure<F: Fabric>(
    nodes: &[Store<F>],
    remote_bytes: &dyn Fn() -> u64,
    threads: usize,
    payload: u64,
    n: u64,
) -> Result<Row, String> {
    // Values homed on machine 1 (v % machines == 1) are loaded by machine 1.
    let machines = nodes[0].machines() as u32;
    let vertices: Vec<u32> = (0..n as u32).map(|i| i * machines + 1).collect();
    {
        let mut w = nodes[1].worker(1).map_err(|e| e.to_string())?;
        for &v in &vertices {
            w.put(v, &list(payload, v)).map_err(|e| e.to_string())?;
        }
    }
    let before = remote_bytes();
    let t0 = Instant::now();
    let moved: Result<u64, String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let share: Vec<Key> = vertices
                    .iter()
                    .skip(t)
                    .step_by(threads)
                    .map(|&v| Key::part(v, 0))
                    .collect();
                let node = &nodes[0];
                s.spawn(move || -> Result<u64, String> {
                    let mut w = node.worker(0).map_err(|e| e.to_string())?;
                    let mut moved = 0;
                    for chunk in share.chunks(4096) {
                        let out = w.migrate_batch(chunk).map_err(|e| e.to_string())?;
                        moved += out
                            .iter()
                            .filter(|m| matches!(m, Migration::Moved { .. }))
                            .count() as u64;
                    }
                    Ok(moved)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a migration thread panicked".into()))
            })
            .sum()
    });
    let elapsed = t0.elapsed().as_secs_f64();
    let moved = moved?;
    if moved != n {
        return Err(format!("only {moved} of {n} values migrated"));
    }
    let bytes = remote_bytes() - before;
    Ok(Row {
        fabric: String::new(),
        threads,
        payload_bytes: payload,
        values: n,
        values_per_s: n as f64 / elapsed,
        bytes_per_s: bytes as f64 / elapsed,
        elapsed_s: elapsed,
    })
}

/// Values per second against payload size, one line per fabric and thread count (Fig. 13).
fn plot(rows: &[Row], path: &std::path::Path) -> Result<(), String> {
    let mut series = Vec::new();
    for fabric in ["local", "tcp"] {
        for threads in [1usize, 2] {
            let points: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| r.fabric == fabric && r.threads == threads)
                .map(|r| (r.payload_bytes as f64, r.values_per_s))
                .collect();
            if !points.is_empty() {
                let label = format!(
                    "{fabric}, {threads} thread{}",
                    if threads == 1 { "" } else { "s" }
                );
                series.push(locus_plot::Series { label, points });
            }
        }
    }
    locus_plot::LineChart {
        title: "Split-migration speed".into(),
        x_label: "payload (bytes)".into(),
        y_label: "values migrated per second".into(),
        x_log: true,
        y_log: true,
        series,
    }
    .write_png(path)
    .map_err(|e| e.to_string())
}

pub fn run(a: MigrateSpeedArgs) -> Result<(), String> {
    let full = match a.preset.as_str() {
        "quick" => false,
        "full" => true,
        other => return Err(format!("--preset {other}: expected quick or full")),
    };
    let mut rows = Vec::new();
    for threads in [1usize, 2] {
        for payload in PAYLOADS {
            let n = count(payload, full);
            eprintln!("local, {threads} thread(s), {payload} B x {n} ...");
            let fabric = Counting::new(
                LocalFabric::new(LocalConfig {
                    pin_memory: true,
                    ..LocalConfig::with_machines(2)
                })
                .map_err(|e| e.to_string())?,
            );
            let store =
                Store::create(fabric.clone(), config(n, payload)).map_err(|e| e.to_string())?;
            let counters = fabric.counters().clone();
            let bytes = move || counters.total().bytes_total(Locality::Remote);
            let mut row = measure(&[store.clone(), store], &bytes, threads, payload, n)?;
            row.fabric = "local".into();
            rows.push(row);
        }
    }
    if !a.no_tcp {
        for threads in [1usize, 2] {
            for payload in PAYLOADS {
                let n = count(payload, false).min(if full { 20_000 } else { 4_000 });
                eprintln!("tcp, {threads} thread(s), {payload} B x {n} ...");
                let nodes: Vec<Counting<_>> = loopback_cluster_with(TcpConfig {
                    machines: 2,
                    pin_memory: true,
                    ..TcpConfig::default()
                })
                .map_err(|e| e.to_string())?
                .into_iter()
                .map(Counting::new)
                .collect();
                let stores = nodes
                    .iter()
                    .map(|f| Store::create(f.clone(), config(n, payload)))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| e.to_string())?;
                let counters = nodes[0].counters().clone();
                // Machine 0 issues every migration operation: its remote bytes are the traffic.
                let bytes = move || counters.snapshot()[0].bytes_total(Locality::Remote);
                let mut row = measure(&stores, &bytes, threads, payload, n)?;
                row.fabric = "tcp".into();
                rows.push(row);
            }
        }
    }
    let json = serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?;
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let path = dir.join("migrate-speed.json");
        std::fs::write(&path, &json)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        eprintln!("wrote {}", path.display());
        let png = dir.join("migrate-speed.png");
        plot(&rows, &png)?;
        eprintln!("wrote {}", png.display());
    }
    if a.json {
        println!("{json}");
    } else {
        println!(
            "{:<6} {:>7} {:>9} {:>8} {:>14} {:>12}",
            "fabric", "threads", "payload", "values", "values/s", "MB/s"
        );
        for r in &rows {
            println!(
                "{:<6} {:>7} {:>9} {:>8} {:>14.0} {:>12.1}",
                r.fabric,
                r.threads,
                r.payload_bytes,
                r.values,
                r.values_per_s,
                r.bytes_per_s / 1e6
            );
        }
    }
    Ok(())
}
