//! `locus bench elastic --redis-cluster`: what a Redis user would do instead,
//! beside Locus in the same run (issue 59, requirement 9). Stock
//! `redis-server`s in cluster mode (`locus_kvmigrate::redis::cluster`), the
//! same R-MAT graph stored the way a Redis user stores adjacency lists (one
//! string per vertex, key `v{id}`, its neighbours' ids as little-endian
//! `u32`s), the same kind of closed-loop load (two-hop queries of 10
//! neighbours per hop, 5% edge inserts by `APPEND`), and the same two
//! changes by Redis Cluster's own tool: a fourth node added (it joined the
//! cluster owning no slot, untimed) and `redis-cli --cluster rebalance
//! --cluster-use-empty-masters` moving slots to it, then node 0 drained
//! (`--cluster-weight <node 0>=0`).
//!
//! A two-hop query is the cluster client's: a GET of the start and then a
//! GET of each of its first 10 neighbours, one at a time (the neighbours'
//! keys are in other slots, so no multi-key command can read them at once).
//! The 16,384 slots start dealt over nodes 0-2 (moved before the graph is
//! loaded, so that costs nothing).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use locus_graph::Csr;
use locus_kvmigrate::redis::cluster::{key_slot, ClusterClient, ClusterNodes, SLOTS};
use locus_kvmigrate::resp::{Command, Config, Reply};

use crate::elastic::{window, xorshift, Row, Sample, Totals};
use crate::{BenchError, Reporter, Result};

/// Longest a `redis-cli --cluster` run may take before it is killed.
const TOOL_TIMEOUT_S: u64 = 1800;

fn failed(what: &str, e: impl std::fmt::Display) -> BenchError {
    BenchError::Measurement {
        experiment: "elastic (redis cluster)",
        what: format!("{what}: {e}"),
    }
}

fn key(v: u32) -> Vec<u8> {
    format!("v{v}").into_bytes()
}

fn ids(raw: &[u8]) -> impl Iterator<Item = u32> + '_ {
    raw.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
}

fn config() -> Config {
    Config {
        io_timeout_ms: 10_000,
        ..Config::default()
    }
}

/// Waits for a `redis-cli --cluster <command>` run; fails naming its output's end.
fn finish(
    nodes: &ClusterNodes,
    mut child: std::process::Child,
    command: &str,
    what: &str,
) -> Result<()> {
    let status = child.wait().map_err(|e| failed(what, e))?;
    if !status.success() {
        return Err(failed(
            what,
            format!("{status}: {}", nodes.tool_log_tail(command, 8)),
        ));
    }
    Ok(())
}

/// Runs the Redis Cluster rows on `csr` with `clients` closed-loop clients
/// and `phase` of load before and after each change.
pub fn run(
    redis_server: &std::path::Path,
    csr: &Csr,
    clients: usize,
    phase: Duration,
    r: &Reporter,
) -> Result<(Vec<Row>, Totals, crate::elastic::Timeline)> {
    let nodes = ClusterNodes::start(redis_server, 4, TOOL_TIMEOUT_S)
        .map_err(|e| failed("starting 4 redis-server nodes", e))?;
    // Node 0 owns every slot; deal them over nodes 0-2 while empty.
    for to in [1usize, 2] {
        let c = nodes
            .start_reshard(0, to, SLOTS / 3, TOOL_TIMEOUT_S)
            .map_err(|e| failed("dealing the slots", e))?;
        finish(&nodes, c, "reshard", "dealing the slots")?;
    }
    let seeds = nodes.addrs();
    let n = csr.vertex_count() as u32;
    r.note(format!("loading the graph into Redis Cluster ({n} keys)"));
    {
        let mut c = ClusterClient::connect(&seeds, config()).map_err(|e| failed("connect", e))?;
        for v in 0..n {
            let list = csr.neighbors(v);
            if list.is_empty() {
                continue;
            }
            let bytes: Vec<u8> = list.iter().flat_map(|u| u.to_le_bytes()).collect();
            c.set(&key(v), &bytes).map_err(|e| failed("loading", e))?;
        }
    }
    let stop = AtomicBool::new(false);
    let samples: Mutex<Vec<Sample>> = Mutex::default();
    let acked: Mutex<Vec<(u32, u32)>> = Mutex::default();
    let next_id = AtomicU64::new(0);
    let redirects = AtomicU64::new(0);
    let t0 = Instant::now();
    let mut rows = Vec::new();
    std::thread::scope(|sc| -> Result<()> {
        let mut handles = Vec::new();
        for cl in 0..clients {
            let (stop, samples, acked, next_id, redirects) =
                (&stop, &samples, &acked, &next_id, &redirects);
            let mut c =
                ClusterClient::connect(&seeds, config()).map_err(|e| failed("connect", e))?;
            handles.push(sc.spawn(move || {
                let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ ((cl as u64 + 1) * 7919);
                let mut mine = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    xorshift(&mut x);
                    let v = (x % u64::from(n)) as u32;
                    let t = Instant::now();
                    let ok = if x % 100 < 5 {
                        let u = n + next_id.fetch_add(1, Ordering::Relaxed) as u32;
                        let k = key(v);
                        let cmd = Command::new("APPEND").arg(&k).arg(u.to_le_bytes());
                        match c.call(&k, &cmd) {
                            Ok(Reply::Integer(_)) => {
                                acked.lock().unwrap().push((v, u));
                                true
                            }
                            _ => false,
                        }
                    } else {
                        (|| {
                            let Some(first) = c.get(&key(v)).ok()? else {
                                return Some(()); // no edges: a right answer
                            };
                            for u in ids(&first).take(10) {
                                c.get(&key(u)).ok()?;
                            }
                            Some(())
                        })()
                        .is_some()
                    };
                    mine.push((
                        t0.elapsed().as_nanos() as u64,
                        t.elapsed().as_nanos() as u64,
                        ok,
                    ));
                }
                samples.lock().unwrap().extend(mine);
                redirects.fetch_add(c.moved + c.asked + c.retried, Ordering::Relaxed);
            }));
        }
        let changes: [(&'static str, Vec<String>); 2] = [
            (
                "add node 3 (3 -> 4 nodes)",
                vec!["--cluster-use-empty-masters".into()],
            ),
            (
                "remove node 0 (4 -> 3 nodes)",
                vec!["--cluster-weight".into(), format!("{}=0", nodes.id(0))],
            ),
        ];
        let outcome = (|| -> Result<()> {
            for (change, args) in changes {
                std::thread::sleep(phase);
                let before = nodes.owners().map_err(|e| failed("CLUSTER SLOTS", e))?;
                let start = t0.elapsed();
                let child = nodes
                    .start_rebalance(&args, TOOL_TIMEOUT_S)
                    .map_err(|e| failed("rebalance", e))?;
                finish(&nodes, child, "rebalance", "redis-cli --cluster rebalance")?;
                let end = t0.elapsed();
                let after = nodes.owners().map_err(|e| failed("CLUSTER SLOTS", e))?;
                let moved: Vec<bool> = before.iter().zip(&after).map(|(a, b)| a != b).collect();
                let slots = moved.iter().filter(|&&m| m).count() as u64;
                let bytes: u64 = (0..n)
                    .filter(|&v| moved[key_slot(&key(v))])
                    .map(|v| 4 * csr.neighbors(v).len() as u64)
                    .sum();
                r.note(format!(
                    "redis cluster, {change}: {slots} slots, {bytes} bytes in {:.2} s",
                    (end - start).as_secs_f64()
                ));
                rows.push((change, start, end, slots, bytes));
            }
            std::thread::sleep(phase);
            Ok(())
        })();
        stop.store(true, Ordering::Relaxed);
        for h in handles {
            h.join().expect("a client thread does not panic");
        }
        outcome
    })?;
    let samples = samples.into_inner().unwrap();
    let phase_ns = phase.as_nanos() as u64;
    let moves: Vec<(u64, u64)> = rows
        .iter()
        .map(|(_, a, b, _, _)| (a.as_nanos() as u64, b.as_nanos() as u64))
        .collect();
    let timeline = crate::elastic::Timeline::of("redis cluster", &samples, &moves);
    let rows = rows
        .into_iter()
        .map(|(change, start, end, slots, bytes)| {
            let (a, b) = (start.as_nanos() as u64, end.as_nanos() as u64);
            let (before, p99_before) = window(&samples, a.saturating_sub(phase_ns), a);
            let (during, p99_during) = window(&samples, a, b);
            let (after, _) = window(&samples, b, b + phase_ns);
            Row {
                protocol: "redis cluster (redis-cli --cluster rebalance)",
                change,
                move_s: (b - a) as f64 / 1e9,
                slots,
                bytes_moved: bytes,
                throughput_before: before,
                throughput_during: during,
                throughput_after: after,
                p99_before_us: p99_before,
                p99_during_us: p99_during,
            }
        })
        .collect();
    let acked = acked.into_inner().unwrap();
    let mut c = ClusterClient::connect(&seeds, config()).map_err(|e| failed("connect", e))?;
    let mut lost = 0;
    for (v, u) in &acked {
        match c.get(&key(*v)) {
            Ok(Some(raw)) if ids(&raw).any(|x| x == *u) => {}
            _ => lost += 1,
        }
    }
    Ok((
        rows,
        Totals {
            ops: samples.iter().filter(|x| x.2).count() as u64,
            failed_ops: samples.iter().filter(|x| !x.2).count() as u64,
            retries: redirects.into_inner(),
            acknowledged_writes: acked.len() as u64,
            lost_acknowledged_writes: lost,
        },
        timeline,
    ))
}
