//! `locus bench failover` (issue 60, requirement 6): what a kill -9 of a
//! server costs a cluster that keeps each slot on R servers.
//!
//! One run of one replication factor R: `locus cluster up --servers N
//! --replication R` (etcd, coordinators, write-ahead logs with `sync =
//! "always"`), an R-MAT graph loaded over the client, then the closed-loop
//! load of `locus bench elastic` (two-hop queries with 5% unique edge
//! inserts, [`Load`]) for `phase_s` seconds: the steady phase, whose
//! throughput and latency of each kind are the row's. Then server
//! [`VICTIM`] is killed with SIGKILL while the load runs, and a probe
//! thread sweeps reads over every vertex (in batches, at a survivor) until
//! one full sweep succeeds with every read (`answer_s`, from the kill to the end of that sweep; the
//! sweep's own length is `probe_sweep_s`). With R = 1 no sweep can
//! succeed: the probe gives up after [`LEASE_S`] x 3 + `phase_s` and the row
//! says `answer_s: null`. The load goes on `phase_s` more seconds, then
//! stops; every acknowledged insert is read back, and every vertex's list
//! is checked against the loaded graph.
//!
//! R values are interleaved across runs (run 1: R1, R2, R3; run 2: ...).
//! `--out DIR` writes `failover.json` and `failover-timeline.png` (the
//! first run of each R, throughput in 100 ms bins around the kill).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use locus_client::proto::ErrorCode;
use locus_client::{Client, ClientConfig};
use locus_graph::Csr;
use locus_node::embedded_config::GraphSection;
use serde::Serialize;

use crate::cluster::rmat_csr;
use crate::elastic::{ok_latencies_ns, ops_per_s, unread, write_timeline, Load, Mix, BIN_MS};

/// The first unique id of the mixed phase's inserts (the writes-only
/// phase's start at 0 and stay far below it).
const FAILOVER_FIRST_ID: u64 = 1 << 28;
use crate::output::{MachineMeta, OutDir, Spread};
use crate::processes::UpCluster;
use crate::{BenchError, Reporter, Result};

/// The server killed in every run.
pub const VICTIM: u8 = 1;
/// The etcd lease of `locus cluster up`'s servers (its `LEASE_TTL_S`): a
/// killed server's slots fail over once it has run out.
pub const LEASE_S: u64 = 3;
/// Deadline of the probe's reads: a read of a dead server fails at once
/// (nothing listens), a read of a live one answers well within this.
const PROBE_DEADLINE: Duration = Duration::from_secs(1);
/// Vertices per read of the probe (one LISTS request).
const PROBE_BATCH: usize = 1024;
/// Pause after a failed probe read before the next sweep.
const PROBE_PAUSE: Duration = Duration::from_millis(20);
/// What `violations` counts.
pub const VIOLATIONS_CHECKED: &str =
    "vertices that answered the final read without an edge of the loaded graph";

/// Settings of `locus bench failover`.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    /// Replication factors, in the order each run measures them.
    pub replication: Vec<u8>,
    /// Servers of each cluster.
    pub servers: usize,
    /// R-MAT scale of the graph.
    pub scale: u32,
    /// Closed-loop client threads of each phase.
    pub clients: usize,
    /// Seconds of each phase: inserts alone, two-hops alone, the mixed load
    /// before the kill, and after every vertex answers.
    pub phase_s: u64,
    /// The clusters' `cluster up --sync` (`always` or `interval`).
    pub sync: String,
    /// Runs (at least 3 for a median with a spread).
    pub runs: usize,
    /// The `locus` executable.
    #[serde(skip)]
    pub exe: PathBuf,
}

impl Settings {
    /// Rejects settings that cannot work, naming the flag.
    pub fn validate(&self) -> Result<()> {
        if self.replication.is_empty() || self.replication.iter().any(|r| !(1..=3).contains(r)) {
            return Err(BenchError::setting(
                "--replication",
                format!("{:?}", self.replication),
                "must list factors 1..=3",
            ));
        }
        let r_max = usize::from(*self.replication.iter().max().unwrap_or(&1));
        if !(2..=8).contains(&self.servers) || self.servers < r_max {
            return Err(BenchError::setting(
                "--servers",
                self.servers,
                "must be 2..=8 (server 1 is killed) and at least the largest --replication",
            ));
        }
        if !(8..=22).contains(&self.scale) {
            return Err(BenchError::setting("--scale", self.scale, "must be 8..=22"));
        }
        if !(1..=64).contains(&self.clients) || !(1..=600).contains(&self.phase_s) {
            return Err(BenchError::setting(
                "--clients, --phase-s",
                format!("{}, {}", self.clients, self.phase_s),
                "clients must be 1..=64, phase 1..=600 s",
            ));
        }
        if !["always", "interval"].contains(&self.sync.as_str()) {
            return Err(BenchError::setting(
                "--sync",
                &self.sync,
                "must be always or interval",
            ));
        }
        if !(1..=20).contains(&self.runs) {
            return Err(BenchError::setting("--runs", self.runs, "must be 1..=20"));
        }
        Ok(())
    }

    /// How long the probe tries before it says the cluster never answered.
    pub fn answer_cap(&self) -> Duration {
        Duration::from_secs(3 * LEASE_S + self.phase_s)
    }
}

/// One run of one replication factor.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Servers holding each slot.
    pub replication: u8,
    /// Which time this factor runs within its run (1-based): a factor
    /// listed twice in `--replication` is its own A/A control.
    pub pass: usize,
    /// Run number (1-based).
    pub run: usize,
    /// Servers of the cluster.
    pub servers: usize,
    /// Acknowledged inserts per second, inserts alone.
    pub update_ops_s: f64,
    /// Two-hop queries answered per second, two-hops alone.
    pub khop_ops_s: f64,
    /// Insert latency, inserts alone: median (ms).
    pub update_p50_ms: f64,
    /// 99th percentile (ms).
    pub update_p99_ms: f64,
    /// Two-hop latency, two-hops alone: median (ms).
    pub khop_p50_ms: f64,
    /// 99th percentile (ms).
    pub khop_p99_ms: f64,
    /// Seconds from the kill to the end of the first probe sweep in which
    /// every vertex answered; `None` if none did within the cap.
    pub answer_s: Option<f64>,
    /// How long that sweep took (part of `answer_s`).
    pub probe_sweep_s: Option<f64>,
    /// Whether the slot table names no slot of the killed server at the end.
    pub failed_over: bool,
    /// Operations per second of the mixed load (two-hops, 5% inserts)
    /// before the kill.
    pub mixed_ops_s: f64,
    /// Operations that failed, over the run (every phase).
    pub failed_ops: u64,
    /// Operations of the mixed load that succeeded.
    pub ops: u64,
    /// Inserts acknowledged.
    pub acknowledged_writes: u64,
    /// Acknowledged inserts that do not read back at the end (missing, or
    /// their vertex does not answer).
    pub lost_acknowledged_writes: u64,
    /// Of those, the ones whose vertex did not answer (R = 1: on the dead
    /// server; its write-ahead log still holds them).
    pub unreadable_acknowledged_writes: u64,
    /// See [`VIOLATIONS_CHECKED`].
    pub violations: u64,
    /// Vertices whose final read failed.
    pub unreadable_vertices: u64,
    /// Failures by reason (digits masked), most frequent first, at most 8.
    pub failure_reasons: Vec<(String, u64)>,
}

/// The runs of one replication factor.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Servers holding each slot.
    pub replication: u8,
    /// As in [`Row::pass`].
    pub pass: usize,
    /// Runs.
    pub runs: usize,
    /// Steady-phase figures over the runs.
    pub update_ops_s: Spread,
    /// As above.
    pub khop_ops_s: Spread,
    /// As above.
    pub update_p99_ms: Spread,
    /// As above.
    pub khop_p99_ms: Spread,
    /// Over the runs in which every vertex answered.
    pub answer_s: Option<Spread>,
    /// Runs whose slots failed over.
    pub failed_over_runs: usize,
    /// Over the runs.
    pub failed_ops: Spread,
    /// Over the runs.
    pub lost_acknowledged_writes: Spread,
    /// Over the runs.
    pub violations: Spread,
}

/// One run's throughput around the kill.
#[derive(Debug, Clone, Serialize)]
pub struct Timeline {
    /// Servers holding each slot.
    pub replication: u8,
    /// Run number.
    pub run: usize,
    /// Operations that succeeded per second, in [`BIN_MS`] bins from the
    /// start of the load.
    pub ops_per_s: Vec<f64>,
    /// The kill, seconds from the start of the load.
    pub kill_s: f64,
    /// Every vertex answered, seconds after the kill.
    pub answer_s: Option<f64>,
}

/// What `locus bench failover` measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The settings.
    pub settings: Settings,
    /// The server killed.
    pub victim: u8,
    /// The lease after which its slots fail over (s).
    pub lease_s: u64,
    /// What `violations` counts.
    pub violations_checked: &'static str,
    /// Every run.
    pub rows: Vec<Row>,
    /// Median, min and max per replication factor.
    pub summary: Vec<Summary>,
    /// Every run's throughput timeline.
    pub timelines: Vec<Timeline>,
    /// The machine.
    pub machine: MachineMeta,
}

impl Report {
    /// Writes `failover.json` and `failover-timeline.png` into `dir`.
    pub fn write(&self, dir: &std::path::Path) -> Result<Vec<PathBuf>> {
        use locus_plot::Series;
        let mut out = OutDir::create(dir)?;
        out.json("failover.json", self)?;
        let png = out.path("failover-timeline.png");
        let mut series = Vec::new();
        let mut high: f64 = 1.0;
        for t in self.timelines.iter().filter(|t| t.run == 1) {
            let points: Vec<(f64, f64)> = t
                .ops_per_s
                .iter()
                .enumerate()
                .map(|(i, &y)| (i as f64 * BIN_MS as f64 / 1e3 - t.kill_s, y))
                .collect();
            high = points.iter().map(|p| p.1).fold(high, f64::max);
            let answered = t
                .answer_s
                .map_or("not all answer".into(), |a| format!("all answer {a:.1} s"));
            series.push(Series {
                label: format!("R={} ({answered})", t.replication),
                points,
            });
        }
        series.push(Series {
            label: format!("kill -9 server {}", self.victim),
            points: vec![(0.0, 0.0), (0.0, high)],
        });
        let title = format!(
            "locus bench failover, R-MAT {}, {} servers: ops/s in {} ms bins",
            self.settings.scale, self.settings.servers, BIN_MS
        );
        write_timeline(&mut out, png, title, "seconds since the kill", series)
    }
}

/// Ops per second, p50 and p99 (ms) of the samples that ended in `[a, b)` ns.
fn steady(samples: &[crate::elastic::Sample], a: u64, b: u64) -> (f64, f64, f64) {
    use locus_workloads::traversal::percentile_us;
    let lat = ok_latencies_ns(samples, a, b);
    let secs = (b.saturating_sub(a)) as f64 / 1e9;
    (
        lat.len() as f64 / secs.max(1e-9),
        percentile_us(&lat, 0.5) / 1e3,
        percentile_us(&lat, 0.99) / 1e3,
    )
}

/// Whether a read's outcome is an answer (a vertex without edges was never
/// loaded: the server's "unknown vertex" is a right answer).
fn answered<T>(r: &locus_client::Result<T>) -> bool {
    match r {
        Ok(_) => true,
        Err(e) => e.code() == Some(ErrorCode::UnknownVertex),
    }
}

/// Seconds from `killed` to the end of the first sweep of reads over all
/// `n` vertices in which every read answered, and that sweep's seconds;
/// `None` if no sweep did within `cap`. A sweep reads [`PROBE_BATCH`]
/// vertices per LISTS request at `reader` (a survivor; it reads each
/// vertex at its primary, as any read does), so the sweep is short beside
/// the failover it times. A sweep that meets a failure ends there; the
/// next one starts at the batch that failed (so it is asked first) and
/// wraps around.
fn probe(c: &Client, reader: u8, n: u32, killed: Instant, cap: Duration) -> Option<(f64, f64)> {
    let batches: Vec<Vec<u32>> = (0..n)
        .collect::<Vec<u32>>()
        .chunks(PROBE_BATCH)
        .map(<[u32]>::to_vec)
        .collect();
    let mut first = 0usize;
    loop {
        let began = Instant::now();
        let failed = (0..batches.len())
            .map(|i| (first + i) % batches.len())
            .find(|&b| !answered(&c.lists(reader, &batches[b])));
        match failed {
            None => {
                return Some((
                    killed.elapsed().as_secs_f64(),
                    began.elapsed().as_secs_f64(),
                ))
            }
            Some(v) => first = v,
        }
        if killed.elapsed() >= cap {
            return None;
        }
        std::thread::sleep(PROBE_PAUSE);
    }
}

fn kill9(pid: u32) -> Result<()> {
    let pid = i32::try_from(pid).map_err(|_| BenchError::Measurement {
        experiment: "failover",
        what: format!("pid {pid} out of range"),
    })?;
    // SAFETY: a signal to a server process this run's cluster started.
    if unsafe { libc::kill(pid, libc::SIGKILL) } != 0 {
        return Err(BenchError::Measurement {
            experiment: "failover",
            what: format!("kill -9 {pid}: {}", std::io::Error::last_os_error()),
        });
    }
    Ok(())
}

/// Vertices whose final read lacks an edge of `csr`, and vertices whose
/// read failed.
fn check_graph(c: &Client, csr: &Csr) -> (u64, u64) {
    let (mut violations, mut unreadable) = (0, 0);
    for v in 0..csr.vertex_count() as u32 {
        let want = csr.neighbors(v);
        match c.neighbors(v, 0) {
            Ok(got) => {
                let got: std::collections::HashSet<u32> = got.into_iter().collect();
                if want.iter().any(|u| !got.contains(u)) {
                    violations += 1;
                }
            }
            Err(e) if e.code() == Some(ErrorCode::UnknownVertex) => {
                if !want.is_empty() {
                    violations += 1;
                }
            }
            Err(_) => unreadable += 1,
        }
    }
    (violations, unreadable)
}

/// One run of factor `rf`.
fn one_run(s: &Settings, csr: &Csr, rf: u8, run: usize, r: &Reporter) -> Result<(Row, Timeline)> {
    let (servers, factor) = (s.servers.to_string(), rf.to_string());
    let cluster = UpCluster::up(
        &s.exe,
        "failover",
        &[
            "--servers",
            &servers,
            "--replication",
            &factor,
            "--sync",
            &s.sync,
        ],
        r,
    )?;
    let file = cluster.file_path();
    let config = ClientConfig {
        deadline: Duration::from_secs(10),
        ..ClientConfig::default()
    };
    let client = Client::from_file(&file, config.clone())?;
    r.note(format!(
        "run {run}, R={rf}: loading R-MAT {} over the client",
        s.scale
    ));
    crate::client_bench::load_csr(&client, csr, 2, r)?;
    let pid = cluster.server_pid(VICTIM)?;
    let n = csr.vertex_count() as u32;
    let phase = Duration::from_secs(s.phase_s);
    // Each kind alone first (a two-hop then never waits behind its
    // thread's insert, and the inserts have the servers to themselves).
    let alone = |mix: Mix, first_id: u64| -> Result<crate::elastic::Done> {
        r.note(format!(
            "run {run}, R={rf}: {mix:?} alone for {} s",
            s.phase_s
        ));
        let load = Load::from_id(n, first_id);
        let clients = (0..s.clients)
            .map(|_| Client::from_file(&file, config.clone()))
            .collect::<locus_client::Result<Vec<_>>>()?;
        std::thread::scope(|sc| {
            let handles: Vec<_> = clients
                .iter()
                .enumerate()
                .map(|(c, cl)| {
                    let load = &load;
                    sc.spawn(move || load.client_as(c, cl, mix))
                })
                .collect();
            std::thread::sleep(phase);
            load.stop();
            for h in handles {
                h.join().expect("a client thread does not panic");
            }
        });
        Ok(load.done())
    };
    // Two-hops first: each factor's reads then see the same graph (the
    // inserts alone add more edges where they are faster).
    let reads = alone(Mix::Reads, 0)?;
    let writes = alone(Mix::Writes, 0)?;
    let phase_ns = phase.as_nanos() as u64;
    let load = Load::from_id(n, FAILOVER_FIRST_ID);
    let probe_config = ClientConfig {
        deadline: PROBE_DEADLINE,
        connect_timeout: PROBE_DEADLINE,
        ..ClientConfig::default()
    };
    let (kill_ns, answer) = std::thread::scope(|sc| -> Result<_> {
        let mut handles = Vec::new();
        let mut timed = || -> Result<(u64, Option<(f64, f64)>)> {
            for c in 0..s.clients {
                let (load, cl) = (&load, Client::from_file(&file, config.clone())?);
                handles.push(sc.spawn(move || load.client(c, &cl)));
            }
            let prober = Client::from_file(&file, probe_config.clone())?;
            std::thread::sleep(phase);
            r.note(format!(
                "run {run}, R={rf}: kill -9 of server {VICTIM} (pid {pid})"
            ));
            kill9(pid)?;
            let (kill_ns, killed) = (load.now_ns(), Instant::now());
            let cap = s.answer_cap();
            let reader = ((usize::from(VICTIM) + 1) % s.servers) as u8;
            let answer = sc
                .spawn(move || probe(&prober, reader, n, killed, cap))
                .join()
                .expect("the probe does not panic");
            match answer {
                Some((a, sweep)) => r.note(format!(
                    "run {run}, R={rf}: every vertex answered {a:.2} s after the kill (its sweep {sweep:.2} s)"
                )),
                None => r.note(format!(
                    "run {run}, R={rf}: not every vertex answers {:.0} s after the kill",
                    cap.as_secs_f64()
                )),
            }
            std::thread::sleep(phase);
            Ok((kill_ns, answer))
        };
        let out = timed();
        // Whatever failed, the clients stop before the scope joins them.
        load.stop();
        for h in handles {
            h.join().expect("a client thread does not panic");
        }
        out
    })?;
    let done = load.done();
    let table = client.refresh_slot_table(0)?;
    let failed_over = (0..table.slots()).all(|x| table.owner_of_slot(x) != Some(VICTIM));
    // The inserts of the writes-only phase must survive the kill too.
    let acked = [writes.acked.as_slice(), &done.acked].concat();
    let (missing, unreadable) = unread(&client, &acked);
    let (violations, unreadable_vertices) = check_graph(&client, csr);
    drop(cluster);
    let (update_ops_s, update_p50_ms, update_p99_ms) = steady(&writes.inserts, 0, phase_ns);
    let (khop_ops_s, khop_p50_ms, khop_p99_ms) = steady(&reads.khops, 0, phase_ns);
    let (mixed_ops_s, _, _) = steady(&[done.khops.as_slice(), &done.inserts].concat(), 0, kill_ns);
    let failed_alone = [&writes.inserts, &reads.khops]
        .iter()
        .map(|x| x.iter().filter(|o| !o.2).count() as u64)
        .sum::<u64>();
    let all = [done.khops, done.inserts].concat();
    let row = Row {
        replication: rf,
        pass: 1,
        run,
        servers: s.servers,
        update_ops_s,
        khop_ops_s,
        update_p50_ms,
        update_p99_ms,
        khop_p50_ms,
        khop_p99_ms,
        answer_s: answer.map(|a| a.0),
        probe_sweep_s: answer.map(|a| a.1),
        failed_over,
        mixed_ops_s,
        failed_ops: all.iter().filter(|x| !x.2).count() as u64 + failed_alone,
        ops: all.iter().filter(|x| x.2).count() as u64,
        acknowledged_writes: acked.len() as u64,
        lost_acknowledged_writes: missing + unreadable,
        unreadable_acknowledged_writes: unreadable,
        violations,
        unreadable_vertices,
        failure_reasons: done.reasons,
    };
    let timeline = Timeline {
        replication: rf,
        run,
        ops_per_s: ops_per_s(&all),
        kill_s: kill_ns as f64 / 1e9,
        answer_s: row.answer_s,
    };
    Ok((row, timeline))
}

/// Which time `factors[i]` comes up in `factors` (1-based).
fn pass_of(factors: &[u8], i: usize) -> usize {
    factors[..=i].iter().filter(|&&f| f == factors[i]).count()
}

/// Median, min and max per factor and pass, in the order of `s.replication`.
fn summarize(s: &Settings, rows: &[Row]) -> Vec<Summary> {
    s.replication
        .iter()
        .enumerate()
        .map(|(i, &rf)| {
            let pass = pass_of(&s.replication, i);
            let of = rows
                .iter()
                .filter(|x| x.replication == rf && x.pass == pass);
            let spread = |f: &dyn Fn(&Row) -> f64| Spread::of(of.clone().map(f));
            let answers: Vec<f64> = of.clone().filter_map(|x| x.answer_s).collect();
            Summary {
                replication: rf,
                pass,
                runs: of.clone().count(),
                update_ops_s: spread(&|x| x.update_ops_s),
                khop_ops_s: spread(&|x| x.khop_ops_s),
                update_p99_ms: spread(&|x| x.update_p99_ms),
                khop_p99_ms: spread(&|x| x.khop_p99_ms),
                answer_s: (!answers.is_empty()).then(|| Spread::of(answers)),
                failed_over_runs: of.clone().filter(|x| x.failed_over).count(),
                failed_ops: spread(&|x| x.failed_ops as f64),
                lost_acknowledged_writes: spread(&|x| x.lost_acknowledged_writes as f64),
                violations: spread(&|x| x.violations as f64),
            }
        })
        .collect()
}

/// Runs `locus bench failover`.
pub fn run(s: &Settings, r: &Reporter) -> Result<Report> {
    s.validate()?;
    let mut machine = MachineMeta::start();
    let csr = rmat_csr(&GraphSection {
        scale: s.scale,
        ..GraphSection::default()
    })?;
    let (mut rows, mut timelines) = (Vec::new(), Vec::new());
    let bar = r.bar((s.runs * s.replication.len()) as u64, "failover runs");
    for run in 1..=s.runs {
        for (i, &rf) in s.replication.iter().enumerate() {
            let pass = pass_of(&s.replication, i);
            let (mut row, timeline) = one_run(s, &csr, rf, run, r)?;
            row.pass = pass;
            rows.push(row);
            timelines.push(timeline);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    machine.finish();
    Ok(Report {
        summary: summarize(s, &rows),
        settings: s.clone(),
        victim: VICTIM,
        lease_s: LEASE_S,
        violations_checked: VIOLATIONS_CHECKED,
        rows,
        timelines,
        machine,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_factor_listed_twice_has_two_passes() {
        let f = [1, 2, 1, 3];
        let passes: Vec<usize> = (0..f.len()).map(|i| super::pass_of(&f, i)).collect();
        assert_eq!(passes, [1, 1, 2, 1]);
    }
}
