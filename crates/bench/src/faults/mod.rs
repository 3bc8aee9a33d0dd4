//! `locus bench faults` (issue 61, requirements 2-4): a cluster of server
//! processes with etcd and a coordinator in the fault lab, clients on the
//! host, a seeded nemesis, and a check of every history. The run's states
//! are in `docs/design.md` ("The fault lab"):
//!
//! ```text
//! SETUP -> RUNNING (clients || nemesis) -> HEAL -> FINAL READS -> CHECK -> REPORT
//! ```
//!
//! Modules: [`cluster`] the lab-backed cluster, [`clients`] the clients and
//! their record, [`nemesis`] the schedule and probes, [`elastic`] servers
//! joining and leaving, [`check`] the checks, [`report`] the report and its
//! files.
//!
//! `LOCUS_FAULTS_DROP_ACKED=1` (for testing the harness only) drops one
//! acknowledged insert from one final read: the run must then report a lost
//! write and a violation.

pub mod check;
pub mod clients;
pub mod cluster;
pub mod elastic;
pub mod nemesis;
pub mod report;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use locus_client::proto::{ErrorCode, Reply, Request};
use locus_workloads::history::{Call, Ret};
use serde::Serialize;

use self::check::FinalRead;
use self::clients::{checked_vertex, marker, target, Outcome, Recorder, Window};
use self::cluster::LabCluster;
pub use self::report::Report;
use crate::{BenchError, Reporter, Result};

/// The environment variable that makes the harness lose one acknowledged
/// insert on purpose (to show the check catches it).
pub const DROP_ACKED_ENV: &str = "LOCUS_FAULTS_DROP_ACKED";
/// Request deadline of the clients: a paused or cut server costs this long.
pub const CLIENT_DEADLINE: Duration = Duration::from_secs(2);
/// How long the final reads retry failed reads, in all.
pub const FINAL_RETRIES: Duration = Duration::from_secs(30);
/// Checked vertices operated on at once.
pub const WINDOW_VERTICES: u32 = 8;

/// Settings of `locus bench faults`.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    /// Servers, 3 to 5.
    pub servers: usize,
    /// Client threads.
    pub clients: usize,
    /// Seconds of faults and operations.
    pub duration_s: u64,
    /// Seed of the schedule and the operation mix.
    pub seed: u64,
    /// Slots move between the servers all along (issue 59), by
    /// `locus_server::moves`, a batch of 4 slots about every second.
    pub slot_moves: bool,
    /// Servers per slot (issue 60): above 1, the coordinator fails a dead
    /// server's slots over to their backups, and no server joins or leaves.
    pub replication: u8,
    /// The `locus` executable.
    #[serde(skip)]
    pub exe: PathBuf,
}

impl Settings {
    /// 3 servers, 4 clients, 60 s, the given seed.
    pub fn new(exe: PathBuf, seed: u64) -> Settings {
        Settings {
            servers: 3,
            clients: 4,
            duration_s: 60,
            seed,
            slot_moves: false,
            replication: 1,
            exe,
        }
    }

    /// Rejects settings that cannot work, naming the flag.
    pub fn validate(&self) -> Result<()> {
        if !(3..=5).contains(&self.servers) {
            return Err(BenchError::setting(
                "--servers",
                self.servers,
                "must be 3..=5",
            ));
        }
        if !(1..=64).contains(&self.clients) {
            return Err(BenchError::setting(
                "--clients",
                self.clients,
                "must be 1..=64",
            ));
        }
        if !(1..=3).contains(&self.replication) || usize::from(self.replication) > self.servers {
            return Err(BenchError::setting(
                "--replication",
                self.replication,
                "must be 1..=3 and at most --servers",
            ));
        }
        if !(10..=3600).contains(&self.duration_s) {
            return Err(BenchError::setting(
                "--duration-s",
                self.duration_s,
                "must be 10..=3600",
            ));
        }
        Ok(())
    }

    /// Checked vertices loaded: enough for the run's operations (a
    /// release build on two cores retires about 50 a second: 100 a second
    /// leaves room; the report says `vertices_exhausted` if they ran out).
    fn pool(&self) -> u32 {
        (self.duration_s as u32 * 100).clamp(512, 1 << 16)
    }
}

/// A seed from the clock (when none is given).
pub fn random_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(61, |d| d.as_nanos() as u64)
}

/// Runs `locus bench faults`.
pub fn run(s: &Settings, r: &Reporter) -> Result<Report> {
    s.validate()?;
    r.note(format!(
        "seed {} (replay the schedule with --seed {})",
        s.seed, s.seed
    ));
    let plan = if s.replication > 1 {
        nemesis::schedule_replicated(
            s.seed,
            s.duration_s,
            s.servers,
            s.servers + cluster::JOIN_IDS,
            usize::from(s.replication),
        )
    } else {
        nemesis::schedule(
            s.seed,
            s.duration_s,
            s.servers,
            s.servers + cluster::JOIN_IDS,
        )
    };
    let mut c = LabCluster::start(s, r)?;
    load(&c, s)?;
    r.note(format!(
        "cluster up ({} servers, etcd, coordinator; logs in {}); {} fault windows over {} s",
        s.servers,
        c.dir().display(),
        plan.len(),
        s.duration_s
    ));
    let rec = Recorder::new();
    let window = Window::new(WINDOW_VERTICES, s.pool());
    let stop = AtomicBool::new(false);
    let clients: Vec<_> = (0..s.clients)
        .map(|_| c.client(CLIENT_DEADLINE))
        .collect::<Result<_>>()?;
    let note = |line: String| r.note(line);
    let members = c.members().clone();
    let windows = std::thread::scope(|sc| {
        for (i, client) in clients.iter().enumerate() {
            let (window, rec, stop, members) = (&window, &rec, &stop, &members);
            sc.spawn(move || {
                clients::run_client(i, s.clients, members, client, window, rec, s.seed, stop)
            });
        }
        let mover = s.slot_moves.then(|| {
            let (client, etcd, stop, note, members) = (
                c.client(Duration::from_secs(10)),
                c.membership().clone(),
                &stop,
                &note,
                &members,
            );
            sc.spawn(move || mover(client, &etcd, s.seed, members, stop, note))
        });
        let plan_result = nemesis::run(&mut c, &plan, &rec, &note);
        // The rest of the duration, quiet.
        let end = Duration::from_secs(s.duration_s);
        let now = Duration::from_nanos(rec.now_ns());
        if plan_result.is_ok() {
            if let Some(d) = end.checked_sub(now) {
                std::thread::sleep(d);
            }
        }
        stop.store(true, Ordering::SeqCst);
        let moves = mover.map(|m| m.join().expect("the mover does not panic"));
        plan_result.map(|w| (w, moves))
    })?;
    let (windows, moves) = windows;
    let ops_end_ms = rec.now_ns() / 1_000_000;
    // HEAL: every cut and delay off, every process back.
    r.note("heal: cuts and delays off, processes restarted, waiting for every server");
    let lab_err = |e: locus_netlab::NetlabError| BenchError::Measurement {
        experiment: "faults",
        what: format!("the lab failed: {e}"),
    };
    c.lab().heal().map_err(lab_err)?;
    for node in 0..c.lab().nodes() {
        c.lab().clear_netem(node).map_err(lab_err)?;
    }
    c.wait_up(cluster::UP_WAIT)?;
    let finals = final_reads(&c, &rec, window.used())?;
    c.check()?;
    let migrations = migrations(&c);
    let failovers = (s.replication > 1)
        .then(|| elastic::failed_over(c.membership()))
        .flatten();
    drop(c);
    let (ops, retries) = rec.finish();
    let mut finals = finals;
    if std::env::var_os(DROP_ACKED_ENV).is_some() {
        drop_one_acked(&ops, &mut finals, r);
    }
    let checked = check::check(&ops, &finals, s.clients);
    let mut report = report::build(
        s,
        &ops,
        retries,
        windows,
        checked,
        migrations,
        ops_end_ms,
        window.exhausted.load(Ordering::SeqCst),
    );
    report.slot_moves = moves.transpose()?;
    report.failovers = failovers;
    Ok(report)
}

/// What the mover did.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct SlotMoves {
    /// Batches committed.
    pub committed: u64,
    /// Slots they moved.
    pub slots: u64,
    /// Vertices they moved.
    pub vertices: u64,
    /// Moves that failed (rolled back, or left for the next to settle).
    pub failed: u64,
    /// Batches an interrupted move left that a later one settled.
    pub settled: u64,
}

/// Moves a batch of 4 slots of a random member to another about every
/// second until `stop` (a failed move is counted and the next one settles
/// what it left); a join or leave holds the moves meanwhile.
fn mover(
    client: Result<locus_client::Client>,
    etcd: &locus_membership::Membership,
    seed: u64,
    members: &elastic::Members,
    stop: &AtomicBool,
    note: &dyn Fn(String),
) -> Result<SlotMoves> {
    use rand::{Rng, SeedableRng};
    let client = client?;
    let m = locus_server::moves::Mover::new(&client, etcd);
    // With replication, a rejoin whose learning could not be ended leaves
    // its goal for the coordinator (a failed plain move is rolled back by
    // its own run: no goal is kept).
    let replicated = locus_server::moves::Mover::new(&client, etcd).keeping_goal_on_error();
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed ^ 59);
    let mut out = SlotMoves::default();
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(rng.gen_range(500..1500)));
        let _moves = members.hold_moves();
        let ids = members.ids();
        if ids.len() < 2 {
            continue;
        }
        if ids.iter().any(|&id| id as usize >= client.machines()) {
            // A server joined: learn its address (SERVERS).
            let _ = client.learn_servers(ids[0]);
        }
        let Ok((_, table)) = m.table() else {
            out.failed += 1;
            continue;
        };
        let (a, b) = (rng.gen_range(0..ids.len()), rng.gen_range(1..ids.len()));
        let (from, to) = (ids[a], ids[(a + b) % ids.len()]);
        let owned: Vec<u32> = (0..table.slots())
            .filter(|&s| table.owner_of_slot(s) == Some(from))
            .collect();
        if owned.is_empty() {
            continue;
        }
        let slots: Vec<u32> = (0..4)
            .map(|_| owned[rng.gen_range(0..owned.len())])
            .collect();
        if table.replication() > 1 {
            // A copy to `to` where it backs none, then the handovers.
            match replicated.move_replicated(&slots, to, 4, &mut |_, _| {}) {
                Ok(d) => {
                    out.committed += d.rejoins + d.handovers;
                    out.slots += d.slots_handed;
                    out.vertices += d.vertices;
                }
                Err(e) => {
                    out.failed += 1;
                    note(format!("slot move from server {from} to {to} failed: {e}"));
                }
            }
            continue;
        }
        match m.move_slots(&slots, to, 4, &mut |_, _| {}) {
            Ok(d) => {
                out.committed += d.batches;
                out.slots += d.slots;
                out.vertices += d.vertices;
                out.settled += d.settled;
            }
            Err(e) => {
                out.failed += 1;
                note(format!("slot move from server {from} to {to} failed: {e}"));
            }
        }
    }
    Ok(out)
}

/// Loads every checked vertex with its marker, and each marker with its target.
fn load(c: &LabCluster, s: &Settings) -> Result<()> {
    let client = c.client(Duration::from_secs(30))?;
    // On a loaded host a server may have been failed over and restarted
    // before the load (NOT_READY until its failover ends), or its slots
    // moved (WRONG_HOME): the load is tried again with the table held then
    // (loading a list again changes nothing), a bounded number of times.
    let mut tries = 0;
    loop {
        match load_once(&client, s) {
            Ok(()) => return Ok(()),
            Err(e) if tries < LOAD_TRIES => {
                tries += 1;
                tracing::info!("the lab's load is tried again ({tries} of {LOAD_TRIES}): {e}");
                std::thread::sleep(Duration::from_millis(500));
                let _ = client.refresh_slot_table(0);
            }
            Err(e) => return Err(e),
        }
    }
}

/// Attempts at the lab's load before the run fails.
const LOAD_TRIES: u32 = 40;

fn load_once(client: &locus_client::Client, s: &Settings) -> Result<()> {
    let machines = client.machines() as u32;
    let mut batches: Vec<Vec<(u32, Vec<u32>)>> = vec![Vec::new(); machines as usize];
    for v in (0..s.pool()).map(checked_vertex) {
        batches[client.home(v) as usize].push((v, vec![marker(v, s.clients)]));
    }
    for v in 0..s.clients as u32 {
        let m = marker(v, s.clients);
        batches[client.home(m) as usize].push((m, vec![target(v, s.clients)]));
    }
    for (home, batch) in batches.into_iter().enumerate() {
        client.load_batch(home as u8, batch, Some(Duration::from_secs(60)))?;
    }
    Ok(())
}

/// Reads every vertex that was checked, after everything, at its home.
fn final_reads(c: &LabCluster, rec: &Recorder, used: u32) -> Result<Vec<FinalRead>> {
    let client = c.client(Duration::from_secs(10))?;
    let t0 = std::time::Instant::now();
    let mut out = Vec::with_capacity(used as usize);
    for v in (0..used).map(checked_vertex) {
        let mut tries = 0;
        loop {
            let (invoke, invoke_ns) = rec.tick();
            let r = client.call(
                client.home(v),
                &Request::Neighbors { vertex: v, k: 0 },
                None,
            );
            let (response, response_ns) = rec.tick();
            let list = match r {
                Ok(Reply::Neighbors(l)) => Ok(l),
                Ok(other) => Err(format!("unexpected reply {other:?}")),
                Err(e) if e.code() == Some(ErrorCode::UnknownVertex) => {
                    Err("the vertex is missing".to_string())
                }
                Err(e) => Err(e.to_string()),
            };
            // A server that was just restarted may still refuse, or a slot
            // moved (the table is fetched again); bounded retries, and
            // none past [`FINAL_RETRIES`] (a server gone for good would
            // otherwise cost every one of its vertices the full count).
            if list.is_err() && tries < 20 && t0.elapsed() < FINAL_RETRIES {
                tries += 1;
                let _ = client.refresh_slot_table(0);
                std::thread::sleep(Duration::from_millis(250));
                continue;
            }
            out.push(FinalRead {
                vertex: v,
                list,
                invoke,
                response,
                invoke_ns,
                response_ns,
            });
            break;
        }
    }
    Ok(out)
}

/// Migrations the servers report (`migrations_in` of STATS, counted since
/// each process started), summed; `None` if a server did not answer.
fn migrations(c: &LabCluster) -> Option<u64> {
    let client = c.client(Duration::from_secs(5)).ok()?;
    c.members()
        .ids()
        .into_iter()
        .map(|id| {
            let st = client.stats(id).ok()?;
            st["migrations_in"].as_u64()
        })
        .sum()
}

/// The harness's own fault (see [`DROP_ACKED_ENV`]): removes from a final
/// read one acknowledged insert that no delete touched.
fn drop_one_acked(ops: &[clients::Op], finals: &mut [FinalRead], r: &Reporter) {
    for op in ops {
        let (Call::Insert(u), Ret::Bool(true), Outcome::Ok) =
            (&op.event.call, &op.event.ret, &op.outcome)
        else {
            continue;
        };
        let v = op.event.vertex;
        let deleted = ops
            .iter()
            .any(|o| o.event.vertex == v && o.event.call == Call::Delete(*u));
        if deleted {
            continue;
        }
        if let Some(Ok(list)) = finals
            .iter_mut()
            .find(|f| f.vertex == v)
            .map(|f| f.list.as_mut())
        {
            if let Some(i) = list.iter().position(|x| x == u) {
                list.remove(i);
                r.note(format!(
                    "{DROP_ACKED_ENV}: dropped the acknowledged insert of {u} from vertex {v}'s final read"
                ));
                return;
            }
        }
    }
}
