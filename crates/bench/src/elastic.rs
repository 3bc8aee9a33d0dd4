//! `locus bench elastic` (issue 59, requirement 9): an R-MAT graph on 3
//! server processes started by `locus cluster up` (etcd, a coordinator), a
//! closed-loop load of two-hop queries with 5% edge inserts, and two moves
//! while it runs: a fourth server added (`cluster add-server
//! --no-rebalance`, untimed, then the slots balanced onto it) and server 0
//! removed (its slots balanced over the other three and the values it held
//! for them sent home, as `cluster remove-server` does before it stops the
//! process). The load's clients read the cluster file before server 3
//! existed: they find it through the slot table and SERVERS. Each move is
//! one row: seconds, slots and bytes moved, throughput and p99 before,
//! during and after it, retries and failed operations, and the
//! acknowledged inserts missing at the end.
//!
//! With a `redis-server` (`--redis-cluster`), Redis Cluster's own
//! `redis-cli --cluster rebalance` makes the same two changes under the
//! same kind of load, after the Locus cluster is down (`elastic_redis.rs`).
//!
//! `--out DIR` writes the report (`elastic.json`) and a timeline of each
//! system's throughput in 100 ms bins with its moves marked
//! (`elastic-timeline.png`). `--protocol stop-and-copy` runs the baseline
//! on Locus's own code: the same batches, but a new home serves a batch
//! only once the table names it and clients route by the table alone, so
//! a batch's updates wait from its GUARD to its commit (reads go on, by
//! the old home's markers, as with index moves). Not here: a
//! redirect-on-miss baseline (Redis Cluster's ASK names the target of
//! each key; Locus's refusals name no target a client could follow).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use locus_client::proto::ErrorCode;
use locus_client::{Client, ClientConfig};
use locus_membership::Membership;
use locus_server::moves::Mover;
use locus_server::ClusterFile;
use serde::Serialize;

use crate::cluster::rmat_csr;
use crate::processes::UpCluster;
use crate::{BenchError, Reporter, Result};
use locus_node::embedded_config::GraphSection;

/// How a run's moves go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MoveProtocol {
    /// Locus's: a handed batch is served by its new home before the
    /// commit, found by clients through the migration index.
    Index,
    /// The baseline: a batch's updates wait from GUARD to the commit.
    StopAndCopy,
}

impl MoveProtocol {
    /// The row's label.
    pub fn label(self) -> &'static str {
        match self {
            MoveProtocol::Index => {
                "locus (index moves: guarded, handed, served before the etcd commit)"
            }
            MoveProtocol::StopAndCopy => {
                "locus stop-and-copy (a batch's updates wait from its guard to its commit)"
            }
        }
    }
}

/// Settings of `locus bench elastic`.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    /// How the moves go.
    pub protocol: MoveProtocol,
    /// R-MAT scale of the graph.
    pub scale: u32,
    /// Closed-loop client threads.
    pub clients: usize,
    /// Seconds of load before and after each move.
    pub phase_s: u64,
    /// Slots per batch of a move.
    pub batch_slots: usize,
    /// The `locus` executable.
    #[serde(skip)]
    pub exe: PathBuf,
    /// Also run Redis Cluster's rows with this `redis-server`.
    pub redis_server: Option<PathBuf>,
}

/// Counts over one protocol's run.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Totals {
    /// Operations that succeeded.
    pub ops: u64,
    /// Operations that failed (after the client's bounded retries).
    pub failed_ops: u64,
    /// Retries (Locus: after `WRONG_HOME`; Redis: `MOVED`, `ASK` and `TRYAGAIN` followed).
    pub retries: u64,
    /// Inserts acknowledged.
    pub acknowledged_writes: u64,
    /// Acknowledged inserts missing from the final reads.
    pub lost_acknowledged_writes: u64,
}

/// One move under load.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// What moved.
    pub protocol: &'static str,
    /// The move.
    pub change: &'static str,
    /// Seconds the move took.
    pub move_s: f64,
    /// Slots moved.
    pub slots: u64,
    /// Bytes of values copied.
    pub bytes_moved: u64,
    /// Operations per second before, during and after the move.
    pub throughput_before: f64,
    /// During.
    pub throughput_during: f64,
    /// After.
    pub throughput_after: f64,
    /// p99 latency before the move (µs).
    pub p99_before_us: f64,
    /// p99 latency during the move (µs).
    pub p99_during_us: f64,
}

/// What a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The settings.
    pub settings: Settings,
    /// One row per move.
    pub rows: Vec<Row>,
    /// Operations that succeeded, over the run.
    pub ops: u64,
    /// Operations that failed (after the client's bounded retries).
    pub failed_ops: u64,
    /// Retries after `WRONG_HOME`, over the run.
    pub retries: u64,
    /// Updates the clients sent to a slot's new home by a move's migration
    /// index, before the table named it.
    pub hinted: u64,
    /// Inserts acknowledged.
    pub acknowledged_writes: u64,
    /// Acknowledged inserts missing from the final reads.
    pub lost_acknowledged_writes: u64,
    /// Failures by reason (digits masked), most frequent first, at most 8.
    pub failure_reasons: Vec<(String, u64)>,
    /// Redis Cluster's counts, with `--redis-cluster` (its rows are in `rows`).
    pub redis: Option<Totals>,
    /// Each system's throughput over its run, moves marked.
    pub timelines: Vec<Timeline>,
}

/// Width of a timeline bin.
pub const BIN_MS: u64 = 100;

/// One system's throughput over its run.
#[derive(Debug, Clone, Serialize)]
pub struct Timeline {
    /// Which system.
    pub system: &'static str,
    /// Operations that succeeded per second, in [`BIN_MS`] bins from the
    /// start of the load.
    pub ops_per_s: Vec<f64>,
    /// Each move's start and end, seconds from the start of the load.
    pub moves: Vec<(f64, f64)>,
}

impl Timeline {
    /// The timeline of `samples`, with `moves` (ns from the start).
    pub(crate) fn of(system: &'static str, samples: &[Sample], moves: &[(u64, u64)]) -> Timeline {
        Timeline {
            system,
            ops_per_s: ops_per_s(samples),
            moves: moves
                .iter()
                .map(|&(a, b)| (a as f64 / 1e9, b as f64 / 1e9))
                .collect(),
        }
    }
}

/// Operations of `samples` that succeeded per second, in [`BIN_MS`] bins
/// from the start of the load.
pub(crate) fn ops_per_s(samples: &[Sample]) -> Vec<f64> {
    let bin_ns = BIN_MS * 1_000_000;
    let end = samples.iter().map(|x| x.0).max().unwrap_or(0);
    let mut ops = vec![0u64; (end / bin_ns + 1) as usize];
    for x in samples.iter().filter(|x| x.2) {
        ops[(x.0 / bin_ns) as usize] += 1;
    }
    ops.iter()
        .map(|&n| n as f64 * 1e3 / BIN_MS as f64)
        .collect()
}

impl Report {
    /// Writes `elastic.json` and `elastic-timeline.png` into `dir`.
    pub fn write(&self, dir: &std::path::Path) -> Result<Vec<PathBuf>> {
        use locus_plot::Series;
        let mut out = crate::output::OutDir::create(dir)?;
        out.json("elastic.json", self)?;
        let png = out.path("elastic-timeline.png");
        let mut series = Vec::new();
        for t in &self.timelines {
            let points: Vec<(f64, f64)> = t
                .ops_per_s
                .iter()
                .enumerate()
                .map(|(i, &y)| (i as f64 * BIN_MS as f64 / 1e3, y))
                .collect();
            let high = points.iter().map(|p| p.1).fold(1.0, f64::max);
            let mut moves = vec![(0.0, 0.0)];
            for &(a, b) in &t.moves {
                moves.extend([(a, 0.0), (a, high), (b, high), (b, 0.0)]);
            }
            moves.push((points.last().map_or(0.0, |p| p.0), 0.0));
            series.push(Series {
                label: format!("{} ({} ms bins)", t.system, BIN_MS),
                points,
            });
            series.push(Series {
                label: format!("{}: moving", t.system),
                points: moves,
            });
        }
        let title = format!(
            "locus bench elastic, R-MAT {}: add a server, then remove one",
            self.settings.scale
        );
        write_timeline(
            &mut out,
            png,
            title,
            "time since the load started (s)",
            series,
        )
    }
}

/// Draws a throughput timeline (`series` of operations per second) as
/// `png` and returns every file `out` holds.
pub(crate) fn write_timeline(
    out: &mut crate::output::OutDir,
    png: PathBuf,
    title: String,
    x_label: &str,
    series: Vec<locus_plot::Series>,
) -> Result<Vec<PathBuf>> {
    locus_plot::LineChart {
        title,
        x_label: x_label.into(),
        y_label: "operations that succeeded per s".into(),
        series,
        ..locus_plot::LineChart::default()
    }
    .write_png(&png)?;
    out.wrote(png);
    Ok(out.written().to_vec())
}

/// The next step of a client's xorshift generator (which vertex, and
/// whether the operation is an insert).
pub(crate) fn xorshift(x: &mut u64) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
}

/// One operation: when it ended (ns since the start), its latency, whether it succeeded.
pub(crate) type Sample = (u64, u64, bool);

/// The latencies (ns, sorted) of the operations of `samples` that
/// succeeded and ended in `[a, b)` ns.
pub(crate) fn ok_latencies_ns(samples: &[Sample], a: u64, b: u64) -> Vec<u64> {
    let mut lat: Vec<u64> = samples
        .iter()
        .filter(|x| x.2 && x.0 >= a && x.0 < b)
        .map(|x| x.1)
        .collect();
    lat.sort_unstable();
    lat
}

/// Throughput (successful operations per second) and p99 latency (µs) of
/// the operations of `samples` that ended in `[a, b)` ns.
pub(crate) fn window(samples: &[Sample], a: u64, b: u64) -> (f64, f64) {
    let lat = ok_latencies_ns(samples, a, b);
    let secs = (b.saturating_sub(a)) as f64 / 1e9;
    let p99 = lat
        .get((lat.len() as f64 * 0.99) as usize)
        .or(lat.last())
        .map_or(0.0, |&ns| ns as f64 / 1e3);
    (lat.len() as f64 / secs.max(1e-9), p99)
}

/// A closed-loop load of two-hop queries (`KHOP 2 x 10`) with 5% inserts
/// of unique edges `v -> n + i`, shared by its client threads (`locus
/// bench elastic` and `locus bench failover`). Every operation is a
/// [`Sample`]; every acknowledged insert is kept for the read-back.
pub(crate) struct Load {
    n: u32,
    t0: Instant,
    stop: AtomicBool,
    next_id: AtomicU64,
    khops: Mutex<Vec<Sample>>,
    inserts: Mutex<Vec<Sample>>,
    acked: Mutex<Vec<(u32, u32)>>,
    reasons: Mutex<std::collections::BTreeMap<String, u64>>,
}

/// What one client thread of a [`Load`] sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mix {
    /// Two-hops with 5% inserts.
    Mixed,
    /// Two-hops only.
    Reads,
    /// Inserts only.
    Writes,
}

/// What a [`Load`] did.
pub(crate) struct Done {
    /// Two-hop queries.
    pub khops: Vec<Sample>,
    /// Inserts.
    pub inserts: Vec<Sample>,
    /// Inserts acknowledged.
    pub acked: Vec<(u32, u32)>,
    /// Failures by reason (digits masked), most frequent first, at most 8.
    pub reasons: Vec<(String, u64)>,
}

impl Load {
    /// A load over the `n` vertices of a loaded graph; its clock starts now.
    pub(crate) fn new(n: u32) -> Load {
        Load::from_id(n, 0)
    }

    /// [`Load::new`] whose unique inserted ids start at `n + first_id`
    /// (two loads on one graph must not insert the same edges).
    pub(crate) fn from_id(n: u32, first_id: u64) -> Load {
        Load {
            n,
            t0: Instant::now(),
            stop: AtomicBool::new(false),
            next_id: AtomicU64::new(first_id),
            khops: Mutex::default(),
            inserts: Mutex::default(),
            acked: Mutex::default(),
            reasons: Mutex::default(),
        }
    }

    /// Nanoseconds since the load's clock started.
    pub(crate) fn now_ns(&self) -> u64 {
        self.t0.elapsed().as_nanos() as u64
    }

    /// Client thread `c`'s loop through `cl`, until [`Load::stop`].
    pub(crate) fn client(&self, c: usize, cl: &Client) {
        self.client_as(c, cl, Mix::Mixed);
    }

    /// [`Load::client`] sending only what `mix` says.
    pub(crate) fn client_as(&self, c: usize, cl: &Client, mix: Mix) {
        let n = self.n;
        let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ c as u64;
        let (mut khops, mut inserts) = (Vec::new(), Vec::new());
        while !self.stop.load(Ordering::Relaxed) {
            xorshift(&mut x);
            let v = (x % u64::from(n)) as u32;
            let t = Instant::now();
            let insert = match mix {
                Mix::Mixed => x % 100 < 5,
                Mix::Reads => false,
                Mix::Writes => true,
            };
            let err = if insert {
                let u = n + self.next_id.fetch_add(1, Ordering::Relaxed) as u32;
                match cl.insert_edge(v, u) {
                    Ok(true) => {
                        self.acked.lock().unwrap().push((v, u));
                        None
                    }
                    Ok(false) => None,
                    Err(e) => Some(format!("insert: {e}")),
                }
            } else {
                match cl.khop(v, 2, 10) {
                    // R-MAT leaves some vertices without an edge: a right answer.
                    Err(e) if e.code() == Some(ErrorCode::UnknownVertex) => None,
                    r => r.err().map(|e| format!("two-hop: {e}")),
                }
            };
            let ok = err.is_none();
            if let Some(e) = err {
                let masked: String = e
                    .chars()
                    .map(|c| if c.is_ascii_digit() { '#' } else { c })
                    .collect();
                *self.reasons.lock().unwrap().entry(masked).or_insert(0) += 1;
            }
            let sample = (self.now_ns(), t.elapsed().as_nanos() as u64, ok);
            if insert { &mut inserts } else { &mut khops }.push(sample);
        }
        self.khops.lock().unwrap().extend(khops);
        self.inserts.lock().unwrap().extend(inserts);
    }

    /// Asks every client loop to end after its current operation.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// What the load did (once its clients have returned).
    pub(crate) fn done(self) -> Done {
        let mut reasons: Vec<(String, u64)> =
            self.reasons.into_inner().unwrap().into_iter().collect();
        reasons.sort_by_key(|r| std::cmp::Reverse(r.1));
        reasons.truncate(8);
        Done {
            khops: self.khops.into_inner().unwrap(),
            inserts: self.inserts.into_inner().unwrap(),
            acked: self.acked.into_inner().unwrap(),
            reasons,
        }
    }
}

/// The acknowledged inserts of `acked` that do not read back through
/// `client`: (read, but the edge is missing; the read failed).
pub(crate) fn unread(client: &Client, acked: &[(u32, u32)]) -> (u64, u64) {
    let (mut missing, mut failed) = (0, 0);
    for (v, u) in acked {
        match client.neighbors(*v, 0) {
            Ok(l) if l.contains(u) => {}
            Ok(_) => missing += 1,
            Err(_) => failed += 1,
        }
    }
    (missing, failed)
}

/// Runs `locus bench elastic`.
pub fn run(s: &Settings, r: &Reporter) -> Result<Report> {
    let child = |what: &str, e: String| BenchError::Measurement {
        experiment: "elastic",
        what: format!("{what}: {e}"),
    };
    let cluster = UpCluster::up(&s.exe, "elastic", &["--servers", "3", "--sync", "off"], r)?;
    let d = cluster.dir_str().to_string();
    let out = (|| -> Result<(Report, locus_graph::Csr)> {
        let file_path = cluster.file_path();
        let file =
            ClusterFile::load(&file_path).map_err(|e| child("the cluster file", e.to_string()))?;
        let config = ClientConfig {
            deadline: Duration::from_secs(10),
            follow_hints: s.protocol == MoveProtocol::Index,
            ..ClientConfig::default()
        };
        let client = Client::from_file(&file_path, config.clone())?;
        let etcd = file
            .etcd
            .as_ref()
            .ok_or_else(|| child("the cluster file", "no [etcd]".into()))?;
        let m = Membership::connect(&etcd.config()).map_err(|e| child("etcd", e.to_string()))?;
        let csr = rmat_csr(&GraphSection {
            scale: s.scale,
            ..GraphSection::default()
        })?;
        r.note(format!("loading R-MAT {} over the client", s.scale));
        crate::client_bench::load_csr(&client, &csr, 2, r)?;
        let load = Load::new(csr.vertex_count() as u32);
        let mut rows = Vec::new();
        let mut retries = 0;
        let mut hinted = 0;
        std::thread::scope(|sc| -> Result<()> {
            let mut handles = Vec::new();
            for c in 0..s.clients {
                let load = &load;
                let cl = Client::from_file(&file_path, config.clone())?;
                handles.push(sc.spawn(move || {
                    load.client(c, &cl);
                    let r = cl.routing();
                    (r.retries, r.hinted)
                }));
            }
            let phase = Duration::from_secs(s.phase_s);
            // Server 3 starts (untimed: no slot moves while it does); the
            // mover's client reads the file again to know it.
            cluster.locus(&[
                "cluster",
                "add-server",
                "--dir",
                &d,
                "--no-rebalance",
                "--lifetime-s",
                "1800",
            ])?;
            let client4 = Client::from_file(&file_path, config.clone())?;
            let mover4 = Mover::new(&client4, &m).serve_early(s.protocol == MoveProtocol::Index);
            for (change, members, leaving) in [
                ("add server 3 (3 -> 4 servers)", vec![0u8, 1, 2, 3], None),
                (
                    "remove server 0 (4 -> 3 servers)",
                    vec![1u8, 2, 3],
                    Some(0u8),
                ),
            ] {
                std::thread::sleep(phase);
                let start = load.now_ns();
                let (_, mut done) = mover4
                    .rebalance(&members, s.batch_slots, false, &mut |_, _| {})
                    .map_err(|e| child("the move", e.to_string()))?;
                if let Some(id) = leaving {
                    let (_, bytes) = mover4
                        .recall(id)
                        .map_err(|e| child("the recall", e.to_string()))?;
                    done.bytes += bytes;
                }
                let end = load.now_ns();
                r.note(format!(
                    "{change}: {} slots, {} bytes in {:.2} s",
                    done.slots,
                    done.bytes,
                    (end - start) as f64 / 1e9
                ));
                rows.push((change, start, end, done));
            }
            std::thread::sleep(phase);
            load.stop();
            for h in handles {
                let (r, n) = h.join().expect("a client thread does not panic");
                retries += r;
                hinted += n;
            }
            Ok(())
        })?;
        let Done {
            khops,
            inserts,
            acked,
            reasons,
        } = load.done();
        let samples = [khops, inserts].concat();
        let phase_ns = s.phase_s * 1_000_000_000;
        let window = |a: u64, b: u64| window(&samples, a, b);
        let out_rows = rows
            .iter()
            .map(|&(change, a, b, ref done)| {
                let (before, p99_before) = window(a.saturating_sub(phase_ns), a);
                let (during, p99_during) = window(a, b);
                let (after, _) = window(b, b + phase_ns);
                Row {
                    protocol: s.protocol.label(),
                    change,
                    move_s: (b - a) as f64 / 1e9,
                    slots: done.slots,
                    bytes_moved: done.bytes,
                    throughput_before: before,
                    throughput_during: during,
                    throughput_after: after,
                    p99_before_us: p99_before,
                    p99_during_us: p99_during,
                }
            })
            .collect();
        let (missing, unreadable) = unread(&client, &acked);
        let moves: Vec<(u64, u64)> = rows.iter().map(|&(_, a, b, _)| (a, b)).collect();
        let timeline = Timeline::of("locus", &samples, &moves);
        Ok(Report {
            failure_reasons: reasons,
            settings: s.clone(),
            rows: out_rows,
            ops: samples.iter().filter(|x| x.2).count() as u64,
            failed_ops: samples.iter().filter(|x| !x.2).count() as u64,
            retries,
            hinted,
            acknowledged_writes: acked.len() as u64,
            lost_acknowledged_writes: missing + unreadable,
            redis: None,
            timelines: vec![timeline],
        })
        .map(|rep| (rep, csr))
    })();
    drop(cluster);
    let (mut rep, csr) = out?;
    if let Some(bin) = &s.redis_server {
        let phase = Duration::from_secs(s.phase_s);
        let (rows, totals, timeline) = crate::elastic_redis::run(bin, &csr, s.clients, phase, r)?;
        rep.rows.extend(rows);
        rep.redis = Some(totals);
        rep.timelines.push(timeline);
    }
    Ok(rep)
}
