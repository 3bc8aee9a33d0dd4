//! The simulated twin of a cluster (issue 58 req. 4; `docs/design.md`, "The
//! node, and its simulated twin"): three [`Node`]s on the seeded simulated
//! fabric, each hosting only its own machine, each with its write-ahead
//! log on a simulated disk ([`MemStorage`]), clients calling
//! [`Node::handle`], values migrating (the coordinator's policy over the
//! nodes' monitors, its approvals persisted before its executors move
//! them, and MIGRATE requests), and a nemesis
//! that, once per seed, either crashes a node (its memory dropped, its disk
//! keeping only what was synced, the last write possibly torn) or ends its
//! lease while it runs on (fenced: N1); the survivors take the membership
//! event (Pragh 5: mark it down, reload what it held from their logs),
//! the node restarts from its disk (N3), rejoins at a newer epoch, and the
//! survivors forget it again. The membership is etcd's stand-in behind the
//! trait `locus server` runs etcd through (`sim_cluster/membership.rs`):
//! nodes join by the server's `locus_node::member::join`, and each node's
//! member actor takes its watch's events in order, between other
//! operations, through the server's `locus_node::member::on_event`.
//!
//! One seed decides every interleaving, every clock reading, every flush of
//! a log (the logs flush in the calling actor, `locus_wal::Flusher::Caller`)
//! and the crash. The per-vertex histories are checked for linearizability
//! against an adjacency-list model (`locus-store`'s checker, included by
//! path); an operation whose node died before it answered, or that failed
//! after it may have applied, may have taken effect or not. So an
//! acknowledged update that the crash lost (acknowledged before its sync,
//! a sync skipped, the log not replayed) shows as a later read without it,
//! and a fenced node's stale read as a read from the past.
//!
//! A second test runs the same with a mover (`sim_cluster/mover.rs`):
//! slots move between the nodes by the MOVE steps `locus cluster move`
//! sends, committed in the shared table (etcd's `P/slots` stand-in) that
//! clients update by and a restarted node starts with, or rolled back when
//! a node of the batch died first. A third test runs that with node 2 not
//! there at first (the table deals the slots over nodes 0 and 1, as a
//! cluster made with room for more starts): the mover starts it (a server
//! added: a first epoch, an empty disk, the table adopted, joined) before
//! its moves.
//!
//! A fourth test keeps every slot on two nodes (issue 60, replication
//! factor 2): an update is acknowledged once its record is durable at the
//! slot's primary and its backup; when the nemesis's victim is down, a
//! failover driver (`sim_cluster/failover.rs`) commits the failed-over
//! table and has every live node take the FAIL_OVER and PROMOTE steps the
//! leading coordinator sends, so the victim's slots are served by their
//! backups before it restarts (with no slots: its former slots are the
//! backups' now). Then the rejoin driver (`sim_cluster/rejoin.rs`) makes it
//! a backup again of the slots left short of one, while the clients go on,
//! and the primary of some of them dies in turn and fails over to it.
//! Then the primaries are given back (`sim_cluster/handover.rs`), one
//! handover struck by a fault in three seeds of four.
//! `LOCUS_SIM_FAULT=skip-backups` (acknowledge without the backup's
//! record), `accept-stale` (a backup takes any primary epoch),
//! `adopt-without-promote`, `skip-learner` (a primary does not send a
//! learner its updates), `copy-overwrites`, `skip-resend-in-doubt` (a
//! handover leaves the backups without the old primary's lists of vertices
//! in doubt) or `skip-handover-markers` (an old primary gives its slots to
//! their backup without marking its keys MOVED) breaks a rule on purpose.
//!
//! `LOCUS_SIM_SEED=N` replays one seed; `LOCUS_SIM_SEEDS=K` runs K seeds
//! (default [`SEEDS_DEFAULT`]); a failure starts with `seed N:`.
//! `LOCUS_SIM_TRACE=1` prints each step of the nemesis and the drivers
//! with the history's sequence number when it began.

#[path = "sim_cluster/coordinator.rs"]
mod coordinator;
#[path = "sim_cluster/coverage.rs"]
mod coverage;
#[path = "sim_cluster/failover.rs"]
mod failover;
#[path = "sim_cluster/handover.rs"]
mod handover;
#[path = "sim_cluster/membership.rs"]
mod membership;
#[path = "sim_cluster/mover.rs"]
mod mover;
#[path = "sim_cluster/nemesis.rs"]
mod nemesis;
#[path = "sim_cluster/rejoin.rs"]
mod rejoin;
#[path = "sim_cluster/reshape.rs"]
mod reshape;
#[path = "sim_cluster/seeds.rs"]
mod seeds;

use coverage::Coverage;
use seeds::run_seeds;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use locus_client::proto::{ErrorCode, Reply, Request};
use locus_coordinator::executor::Executor;
use locus_coordinator::policy::{Event as PolicyEvent, PolicyConfig};
use locus_coordinator::DriverStats;
use locus_fabric::sim::{Actor, Sim, SimConfig, SimFabric, SimRng};
use locus_fabric::{Fabric, Fencing, MachineId, Port};
use locus_node::config::{DurabilitySection, NodeConfig, RecoverySection, StoreSection};
use locus_node::member::{self, MembershipStore};
use locus_node::node::RunsOn;
use locus_node::{LogParts, Node, NodeParts, Session};
use locus_store::{home_of, Key, SlotTable, VertexId};
use locus_wal::{Crash, MemStorage};
use locus_workloads::history::{check_all, Call, Event, Ret};

const MACHINES: usize = 3;
/// The node the mover starts during a run that has it join.
const JOINER: MachineId = 2;
const VERTICES: u32 = 6;
const CLIENTS_PER_NODE: usize = 2;
const OPS_PER_CLIENT: usize = 20;
const MIGRATIONS_PER_NODE: usize = 6;
/// Service rounds between two checkpoints of a node (D3 under the crash).
const CHECKPOINT_EVERY: u64 = 40;
const SEEDS_DEFAULT: u64 = 500;
const CLOCK_STEP_NS: u64 = 5_000;
const STEPS_MAX: u64 = 200_000;
/// No deadline: the simulated clock runs far ahead of any request.
const NO_DEADLINE: u64 = u64::MAX;

/// A vertex's list before the run.
fn initial_list(v: VertexId) -> Vec<VertexId> {
    (0..v % 3).map(|i| 100 + v * 10 + i).collect()
}

/// A node's settings; with replication, cache and reclaim leases that
/// outlive a failover (as Pragh's 60 s lease does on a real cluster), so a
/// location cached before the death may still be used after it (R4).
fn node_config_for(replicated: bool) -> NodeConfig {
    let mut c = node_config();
    if replicated {
        c.store.cache_lease_ms = Some(100);
        c.store.reclaim_lease_ms = 100;
    }
    c
}

/// Creates a node by its settings; a value invalid for longer than 4 ms
/// (a migration whose target died) is an error whatever the reclaim lease
/// (by default two leases: with replication's long ones, a read would
/// spin through most of a run). A forward unanswered for 50 ms fails (a
/// reply refused by a restarted sender's new incarnation, which the
/// replier's slow watcher still knows at its old epoch, is lost: a server
/// fails the update in doubt at its forward timeout, 30 s, longer than a
/// whole run here).
fn create_node(parts: NodeParts<SimFabric>) -> locus_node::Result<locus_node::Created<SimFabric>> {
    let mut store = parts.config.store.store_config();
    store.read_stall_ms = 4;
    store.forward_timeout_ms = 50;
    Node::create_with(parts, store)
}

fn node_config() -> NodeConfig {
    let mut c = NodeConfig {
        store: StoreSection::default(),
        durability: Some(DurabilitySection {
            sync: "always".into(),
            ..DurabilitySection::default()
        }),
        recovery: RecoverySection::default(),
        ..NodeConfig::default()
    };
    c.store.value_region_mb = Some(1);
    c.store.buckets = Some(4);
    c.store.overflow_buckets = Some(4);
    c.store.cache_mb = 1;
    // Leases of a few hundred scheduling points: entries expire within a run.
    c.store.cache_lease_ms = Some(2);
    c.store.reclaim_lease_ms = 2;
    c.store.hot_accesses = 3;
    c.policy.interval_ms = 1;
    c
}

/// The coordinator's policy, scaled to a run of a few thousand scheduling
/// points (an interval of 200) and a few hundred reads.
fn policy() -> PolicyConfig {
    PolicyConfig {
        interval_ms: 1,
        dwell_ms: 2,
        forget_after_ms: 5,
        count_min: 1,
        report_count_min: 1,
        lead_intervals: 1,
        move_cost_accesses: 1.0,
        significance_z: 0.0,
        ..PolicyConfig::default()
    }
}

/// What the nemesis does this seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// The node's process dies and its disk keeps what this crash keeps.
    Crash(Crash),
    /// The node's lease ends while it runs on (fenced, N1); it is then
    /// killed and restarted as a crash would be.
    LeaseLost,
    /// Replicated only: the node's process dies, and so does the first
    /// backup of its slots, which restarts (its replay done, not joined
    /// yet) while the victim's slots fail over to it: it must promote them
    /// when it joins (the fault lab's seed 6060, after etcd was cut off).
    BackupRestarting,
    /// Replicated only: the node's process dies (an update of it may be in
    /// its log but not at its backups), comes back before any failover and
    /// serves a while (its replay applied that update), then dies again
    /// and its slots fail over: its backups must hold what it served.
    CrashTwice,
}

/// One machine's slot: the node serving now, and its incarnation.
struct Slot {
    node: Mutex<Option<Arc<Node<SimFabric>>>>,
    /// Bumped when the node dies (a reply it sends after is lost) and when a
    /// new one starts.
    generation: AtomicU64,
    /// The disk; replaced by what a crash keeps of it.
    disk: Mutex<MemStorage>,
    /// The membership watch the node serving now opened when it joined.
    watch: Mutex<Option<usize>>,
}

struct Shared {
    seed: u64,
    fabric: SimFabric,
    slots: Vec<Slot>,
    seq: AtomicU64,
    log: Mutex<Vec<Event>>,
    clients_done: AtomicUsize,
    coverage: Mutex<Coverage>,
    /// The membership store (etcd's stand-in), with the coordinator's record.
    membership: membership::SimMembership,
    /// Approved migrations per target, for its executor.
    jobs: Vec<Mutex<VecDeque<Key>>>,
    /// What executors did, for the coordinator.
    results: Mutex<Vec<PolicyEvent>>,
    stats: DriverStats,
    /// What each client and the nemesis is doing (shown when a run fails).
    doing: Mutex<Vec<String>>,
    nemesis_done: std::sync::atomic::AtomicBool,
    /// While a node leaves and comes back (`sim_cluster/reshape.rs`).
    reshaping: std::sync::atomic::AtomicBool,
    /// Set while two nodes are down at once (`Fault::BackupRestarting`): a
    /// survivor's Pragh 5 recovery may then fail for want of the other,
    /// which a server logs and lives with (`server/src/member.rs`).
    two_down: std::sync::atomic::AtomicBool,
    /// The committed slot table (etcd's `P/slots`): clients update by it,
    /// the mover commits moves in it, a node starts with it.
    table: Mutex<SlotTable>,
    /// Whether node [`JOINER`] joins during the run (the mover starts it).
    join: bool,
    /// Scheduling points the mover waits between B's SERVE and the commit
    /// (B serves the slot ahead of the table meanwhile).
    serve_lead: u64,
    /// The slot handed, its old and its new home, from HAND to the commit:
    /// the hint a client's migration index gives (updates of it go to B).
    handed: Mutex<Option<(u32, MachineId, MachineId)>>,
    /// Whether the nemesis waits for a slot in a move and strikes its old
    /// or new home, and when.
    hunt: Hunt,
    /// Whether the mover dies in the middle of batches (at a seeded step)
    /// and a new driver settles what it left (design MV3: the coordinator).
    driver_dies: bool,
    /// Whether every slot has a backup, and the victim's slots fail over
    /// (issue 60).
    replicated: bool,
    /// Whether the vertices' first lists are in: with replication they are
    /// put during the run (a primary's put waits for its backup's
    /// service), and every other actor waits for them.
    loaded: std::sync::atomic::AtomicBool,
}

/// What a run has: slot moves, a node joining, replication.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Scenario {
    pub(crate) moves: bool,
    pub(crate) join: bool,
    pub(crate) replicated: bool,
}

/// The rules `LOCUS_SIM_FAULT` breaks on purpose (see the module doc).
fn faults_from_env() -> locus_node::Faults {
    let mut f = locus_node::Faults::default();
    if let Ok(v) = std::env::var("LOCUS_SIM_FAULT") {
        match v.as_str() {
            "skip-backups" => f.skip_backups = true,
            "accept-stale" => f.accept_stale_primary = true,
            "adopt-without-promote" => f.adopt_without_promote = true,
            "skip-learner" => f.skip_learner = true,
            "copy-overwrites" => f.copy_overwrites = true,
            "skip-resend-in-doubt" => f.skip_resend_in_doubt = true,
            "skip-handover-markers" => f.skip_handover_markers = true,
            // The twin's rejoin driver reads it (`sim_cluster/rejoin.rs`).
            "replace-without-copy" => {}
            other => panic!(
                "LOCUS_SIM_FAULT={other}: skip-backups, accept-stale, adopt-without-promote, skip-learner, copy-overwrites, skip-resend-in-doubt, skip-handover-markers or replace-without-copy"
            ),
        }
    }
    f
}

/// Where the nemesis strikes a move's old or new home (`Shared::hunt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hunt {
    /// Anywhere (the nemesis's own choice).
    No,
    /// Between TAKE and HAND (A's checks stand for the fences).
    BeforeHand,
    /// Between HAND and the commit (V2, V5).
    BeforeCommit,
}

impl Shared {
    fn doing(&self, who: usize, what: String) {
        if who == MACHINES * CLIENTS_PER_NODE && std::env::var_os("LOCUS_SIM_TRACE").is_some() {
            eprintln!("seq {}: {what}", self.seq.load(Ordering::Acquire));
        }
        self.doing.lock().unwrap()[who] = what;
    }
}

impl Shared {
    fn node(&self, m: MachineId) -> Option<(Arc<Node<SimFabric>>, u64)> {
        let slot = &self.slots[m as usize];
        let node = slot.node.lock().unwrap().clone()?;
        Some((node, slot.generation.load(Ordering::Acquire)))
    }

    /// Nodes up now.
    fn up_nodes(&self) -> usize {
        (0..MACHINES as MachineId)
            .filter(|&m| self.node(m).is_some())
            .count()
    }

    fn log_dir() -> std::path::PathBuf {
        std::path::PathBuf::from("/sim/log")
    }

    /// Starts machine `m`'s node at `epoch`: its regions, its log replayed
    /// from the disk (N3); returns it serving.
    fn start_node(&self, m: MachineId, epoch: u64) -> Result<Arc<Node<SimFabric>>, String> {
        let fabric = self
            .fabric
            .hosting_only(m)
            .map_err(|e| format!("m{m}: view: {e}"))?;
        fabric
            .set_own_epoch(m, epoch)
            .map_err(|e| format!("m{m}: own epoch: {e}"))?;
        // Peers' one-sided operations wait for its registration (fencing's
        // rule 4), as a server's do.
        fabric
            .hold_peers(m)
            .map_err(|e| format!("m{m}: hold: {e}"))?;
        let disk = self.slots[m as usize].disk.lock().unwrap().clone();
        let created = create_node(NodeParts {
            fabric,
            me: m,
            config: node_config_for(self.replicated),
            log: Some(LogParts {
                storage: Arc::new(disk),
                dir: Self::log_dir(),
                runs_on: RunsOn::Simulation,
            }),
            label: format!("node {m}"),
            counters: None,
        })
        .map_err(|e| format!("m{m}: create: {e}"))?;
        // The committed table before the replay, as a server adopts etcd's.
        created
            .store()
            .homes()
            .adopt(&self.table.lock().unwrap())
            .map_err(|e| format!("m{m}: table: {e}"))?;
        let mut w = created
            .store()
            .worker(m)
            .map_err(|e| format!("m{m}: worker: {e}"))?;
        let mut node = created
            .recover(&mut w)
            .map_err(|e| format!("m{m}: recover: {e}"))?;
        node.set_faults(faults_from_env());
        Ok(Arc::new(node))
    }

    /// Registers `node` (recovered) in the membership by the server's
    /// step (`member::join`) and makes it machine `m`'s serving node.
    fn join(&self, m: MachineId, node: Arc<Node<SimFabric>>) -> Result<(), String> {
        let epoch = node
            .store()
            .fabric()
            .own_epoch(m)
            .map_err(|e| format!("m{m}: own epoch: {e}"))?;
        let joined = member::join(&node, &self.membership, epoch, "sim")
            .map_err(|e| format!("m{m}: join: {e}"))?;
        // Tables committed since it adopted one before its replay, as a
        // server takes etcd's at its registration: a while after it, as a
        // server's next etcd call is (its peers may read it meanwhile).
        let mut session = node.session();
        let w = session
            .worker(&node)
            .map_err(|e| format!("m{m}: worker: {e}"))?;
        for _ in 0..self.seed % 40 {
            w.relax();
        }
        let committed = self.table.lock().unwrap().clone();
        node.adopt_committed(w, &committed)
            .map_err(|e| format!("m{m}: the committed table: {e}"))?;
        // Updates in doubt that its replay made visible reach its backups
        // before it serves (the twin, seed 45 of the rejoin scenario).
        let mut tries = 0;
        while let Err(e) = node.resend_replayed(w) {
            // A backup's service that is slow to answer: again, a while
            // later, as a server's registration retries.
            tries += 1;
            if tries >= 100 {
                return Err(format!("m{m}: resending the replayed: {e}"));
            }
            for _ in 0..20 {
                w.relax();
            }
        }
        let slot = &self.slots[m as usize];
        *slot.watch.lock().unwrap() = Some(joined.watch);
        *slot.node.lock().unwrap() = Some(node);
        slot.generation.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }
}

/// Puts every vertex's first list at its home.
fn load(s: &Shared) -> Result<(), String> {
    for v in 0..VERTICES {
        let home = s.table.lock().unwrap().owner_of(v);
        let (node, _) = s.node(home).expect("up");
        let mut sess = node.session();
        match node.handle(
            &mut sess,
            Request::Put {
                vertex: v,
                ids: initial_list(v),
            },
            NO_DEADLINE,
        ) {
            Reply::Put => {}
            r => return Err(format!("setup put of {v}: {r:?}")),
        }
    }
    Ok(())
}

/// Waits until the first lists are in (see [`Shared::loaded`]).
fn wait_loaded(s: &Shared, port: &mut <SimFabric as Fabric>::Port) {
    while !s.loaded.load(Ordering::Acquire) {
        port.relax();
    }
}

/// Records one operation.
#[allow(clippy::too_many_arguments)]
fn record(
    s: &Shared,
    client: usize,
    machine: MachineId,
    vertex: VertexId,
    call: Call,
    ret: Ret,
    invoke: u64,
    response: u64,
) {
    let now = s.fabric.now_ns();
    s.log.lock().unwrap().push(Event {
        vertex,
        client,
        machine,
        call,
        ret,
        invoke,
        response,
        invoke_ns: now,
        response_ns: now,
    });
}

/// What a reply to `call` means for the history: `None` for a request
/// that did nothing (refused, or failed before its record was durable: the
/// home logs before it applies, D1), `Ret::Unknown` for one in doubt (its
/// record durable, its apply failed).
fn outcome(call: &Call, reply: &Reply) -> Option<Ret> {
    Some(match (call, reply) {
        (Call::Read { .. }, Reply::Neighbors(l)) => Ret::List(l.clone()),
        (Call::Insert(_) | Call::Delete(_), Reply::Changed(c)) => Ret::Bool(*c),
        (Call::Read { .. }, Reply::Error { code, .. }) if *code == ErrorCode::UnknownVertex => {
            Ret::Missing
        }
        (_, Reply::Error { message, .. }) => {
            assert!(!message.contains("bypassed"), "{message}");
            if message.contains("is logged but applying it failed") || message.contains("in doubt")
            {
                Ret::Unknown
            } else {
                return None;
            }
        }
        (c, r) => panic!("a reply {r:?} to {c:?}"),
    })
}

/// A client: reads anywhere, updates at the vertex's home, each op one
/// request on a session of that node.
fn client(f: &SimFabric, s: &Shared, id: usize, mut rng: SimRng) {
    let mut port = f.port((id % MACHINES) as MachineId).expect("a port");
    wait_loaded(s, &mut port);
    let mut sessions: Vec<Option<(u64, Session<SimFabric>)>> =
        (0..MACHINES).map(|_| None).collect();
    let mut inserted: Vec<(VertexId, VertexId)> = Vec::new();
    let mut cov = Coverage::default();
    // Each client reads mostly at its own node, and mostly vertices homed on
    // the next one: remote reads worth a migration.
    let near = (id % MACHINES) as MachineId;
    let favoured: Vec<VertexId> = (0..VERTICES)
        .filter(|&v| home_of(v, MACHINES) == (near + 1) % MACHINES as MachineId)
        .collect();
    // Hunting seeds run longer (the fault between HAND and the commit
    // comes late): their clients keep going through it. Replicated ones go
    // on while the nemesis works (a failover, a rejoin whose learner must
    // take their updates, a second failover), up to the same bound (the
    // inserted ids below are unique up to it).
    // Replicated ones then go on while a node leaves and comes back (the
    // reshaping, in odd seeds), up to one bound more.
    let ops = if s.replicated {
        4 * OPS_PER_CLIENT
    } else if s.hunt != Hunt::No {
        3 * OPS_PER_CLIENT
    } else {
        OPS_PER_CLIENT
    };
    for i in 0..ops {
        if s.replicated && i >= OPS_PER_CLIENT && s.nemesis_done.load(Ordering::Acquire) {
            break;
        }
        if i >= 3 * OPS_PER_CLIENT && !s.reshaping.load(Ordering::Acquire) {
            break;
        }
        let v = if rng.below(10) < 6 {
            favoured[rng.below(favoured.len() as u64) as usize]
        } else {
            rng.below(VERTICES as u64) as VertexId
        };
        // Updates go to the home by the table, or (as a client holding a
        // hint would, design V1-V3) to any node: a node that serves the
        // slot ahead of the table coordinates them, any other refuses.
        let update_at = |rng: &mut SimRng, v: VertexId| {
            let table = s.table.lock().unwrap();
            match *s.handed.lock().unwrap() {
                Some((slot, _, b)) if table.slot_of(v) == slot && rng.below(10) < 7 => b,
                _ if rng.below(10) < 8 => table.owner_of(v),
                _ => rng.below(MACHINES as u64) as MachineId,
            }
        };
        let (call, req, at) = match rng.below(10) {
            0..=3 => {
                // Unique ids: the first 3 bounds' below 100,000, the
                // reshaping's fourth above.
                let u = if i < 3 * OPS_PER_CLIENT {
                    1_000 + (id * 3 * OPS_PER_CLIENT + i) as VertexId
                } else {
                    100_000 + (id * OPS_PER_CLIENT + i - 3 * OPS_PER_CLIENT) as VertexId
                };
                inserted.push((v, u));
                (
                    Call::Insert(u),
                    Request::InsertEdge {
                        vertex: v,
                        neighbor: u,
                    },
                    update_at(&mut rng, v),
                )
            }
            4 if !inserted.is_empty() => {
                let (v, u) = inserted[rng.below(inserted.len() as u64) as usize];
                (
                    Call::Delete(u),
                    Request::DeleteEdge {
                        vertex: v,
                        neighbor: u,
                    },
                    update_at(&mut rng, v),
                )
            }
            _ => (
                Call::Read { k: usize::MAX },
                Request::Neighbors { vertex: v, k: 0 },
                if rng.below(10) < 7 {
                    near
                } else {
                    rng.below(MACHINES as u64) as MachineId
                },
            ),
        };
        let v = match &req {
            Request::InsertEdge { vertex, .. }
            | Request::DeleteEdge { vertex, .. }
            | Request::Neighbors { vertex, .. } => *vertex,
            _ => unreachable!(),
        };
        let Some((node, generation)) = s.node(at) else {
            // Down: the connection is refused, nothing is sent.
            port.relax();
            continue;
        };
        let session = match &mut sessions[at as usize] {
            Some((g, sess)) if *g == generation => sess,
            slot => &mut slot.insert((generation, node.session())).1,
        };
        let invoke = s.seq.fetch_add(1, Ordering::AcqRel);
        s.doing(id, format!("{req:?} at m{at} (generation {generation})"));
        let reply = node.handle(session, req, NO_DEADLINE);
        s.doing(id, format!("done: {reply:?}"));
        let response = s.seq.fetch_add(1, Ordering::AcqRel);
        let alive = s.slots[at as usize].generation.load(Ordering::Acquire) == generation;
        let ret = if alive {
            outcome(&call, &reply)
        } else if matches!(call, Call::Read { .. }) {
            None // its answer died with the node
        } else {
            Some(Ret::Unknown)
        };
        match ret {
            None => cov.refused += 1,
            Some(Ret::Unknown) => {
                cov.unknown += 1;
                record(s, id, at, v, call, Ret::Unknown, invoke, u64::MAX);
            }
            Some(ret) => {
                cov.acknowledged += 1;
                if s.reshaping.load(Ordering::Acquire) {
                    cov.acked_reshaping += 1;
                }
                if !matches!(call, Call::Read { .. }) && s.table.lock().unwrap().owner_of(v) != at {
                    cov.served_ahead += 1;
                }
                record(s, id, at, v, call, ret, invoke, response);
            }
        }
        if let Reply::Error {
            code: ErrorCode::NotReady,
            ..
        } = reply
        {
            cov.fenced_refusals += 1;
        }
        if s.replicated {
            // Paced, so that its updates span the nemesis's steps (its
            // later ones, rejoins and handovers, take longer each).
            let pace = if i < OPS_PER_CLIENT { 12 } else { 120 };
            for _ in 0..rng.below(pace) {
                port.relax();
            }
        }
    }
    s.coverage.lock().unwrap().add(&cov);
}

/// Moves values: MIGRATE requests at random nodes (Pragh's split
/// migration: the value comes to the node that asks).
fn migrator(f: &SimFabric, s: &Shared, m: MachineId, mut rng: SimRng) {
    let mut port = f.port(m).expect("a port");
    wait_loaded(s, &mut port);
    let mut cov = Coverage::default();
    for _ in 0..MIGRATIONS_PER_NODE {
        for _ in 0..rng.below(20) {
            port.relax();
        }
        let Some((node, _)) = s.node(m) else {
            continue;
        };
        let mut session = node.session();
        let v = rng.below(VERTICES as u64) as VertexId;
        if let Reply::Migrate { .. } =
            node.handle(&mut session, Request::Migrate { vertex: v }, NO_DEADLINE)
        {
            cov.migrated += 1;
        }
    }
    s.coverage.lock().unwrap().add(&cov);
}

/// A node's service (forwarded updates, reclaim ring) and its checkpointer,
/// until every client is done; a new worker for each incarnation.
fn service(f: &SimFabric, s: &Shared, m: MachineId, clients: usize) {
    let mut port = f.port(m).expect("a port");
    let mut current: Option<(u64, Arc<Node<SimFabric>>, locus_store::Worker<_>)> = None;
    let mut executor = Executor::new();
    let mut rounds = 0u64;
    let mut cov = Coverage::default();
    while s.clients_done.load(Ordering::Acquire) < clients {
        let Some((node, generation)) = s.node(m) else {
            current = None;
            port.relax();
            continue;
        };
        if current.as_ref().map(|c| c.0) != Some(generation) {
            match node.store().worker(m) {
                Ok(w) => {
                    current = Some((generation, node, w));
                    executor = Executor::new();
                }
                Err(_) => {
                    port.relax();
                    continue;
                }
            }
        }
        let (_, node, w) = current.as_mut().expect("set");
        rounds += 1;
        // The migration executor of this node (Pragh 4.4): approved jobs,
        // migrated as the target.
        let job = s.jobs[m as usize].lock().unwrap().pop_front();
        if let Some(key) = job {
            let (ok, _) = executor.migrate(node.store(), m, &[key], &s.stats);
            s.results.lock().unwrap().push(PolicyEvent::Migrated {
                key,
                to: m,
                ok: ok[0],
            });
        }
        let served = w.serve();
        let _ = w.collect_garbage();
        // With replication an update waits, under its stripe lock, for its
        // backup's service: a checkpoint (which takes every stripe) runs in
        // an actor of its own, as a server's checkpointer thread does, or
        // two services checkpointing would each wait for the other.
        if !s.replicated && rounds.is_multiple_of(CHECKPOINT_EVERY) {
            checkpoint(node, w, &mut cov);
        }
        if !matches!(served, Ok(n) if n > 0) {
            port.relax();
        }
    }
    s.coverage.lock().unwrap().add(&cov);
}

/// One checkpoint of `node` (D3), counted.
fn checkpoint(
    node: &Node<SimFabric>,
    w: &mut locus_store::Worker<locus_fabric::counting::Counting<SimFabric>>,
    cov: &mut Coverage,
) {
    match node.checkpoint(w) {
        Ok(Some(_)) => cov.checkpoints += 1,
        Ok(None) => {}
        // A checkpoint reads every list this node homes, wherever its
        // value lives: one held by a dead peer fails it until Pragh 5
        // has put that value back; it is retried later (D3 holds: the
        // log keeps everything until a checkpoint commits).
        Err(_) => cov.checkpoint_failures += 1,
    }
}

/// A node's checkpointer, apart from its service (with replication; see
/// [`service`]): every [`CHECKPOINT_EVERY`] of its own turns.
fn checkpointer(f: &SimFabric, s: &Shared, m: MachineId, clients: usize) {
    let mut port = f.port(m).expect("a port");
    let mut cov = Coverage::default();
    while s.clients_done.load(Ordering::Acquire) < clients {
        for _ in 0..CHECKPOINT_EVERY {
            port.relax();
        }
        let Some((node, _)) = s.node(m) else {
            continue;
        };
        if let Ok(mut w) = node.store().worker(m) {
            checkpoint(&node, &mut w, &mut cov);
        }
    }
    s.coverage.lock().unwrap().add(&cov);
}

fn simulate(seed: u64, sc: Scenario) -> Result<(Vec<Vec<Event>>, Coverage), String> {
    let Scenario {
        moves,
        join,
        replicated,
    } = sc;
    let mut sim = Sim::new(SimConfig {
        machines: MACHINES,
        seed,
        steps_max: STEPS_MAX,
        clock_step_ns: CLOCK_STEP_NS,
        ..SimConfig::default()
    })
    .map_err(|e| format!("seed {seed}: sim config: {e}"))?;
    let fabric = sim.fabric().clone();
    let shared = Shared {
        seed,
        fabric: fabric.clone(),
        slots: (0..MACHINES)
            .map(|_| Slot {
                node: Mutex::new(None),
                generation: AtomicU64::new(0),
                disk: Mutex::new(MemStorage::new()),
                watch: Mutex::new(None),
            })
            .collect(),
        seq: AtomicU64::new(0),
        log: Mutex::new(Vec::new()),
        clients_done: AtomicUsize::new(0),
        coverage: Mutex::new(Coverage::default()),
        membership: membership::SimMembership::new(),
        jobs: (0..MACHINES).map(|_| Mutex::new(VecDeque::new())).collect(),
        results: Mutex::new(Vec::new()),
        stats: DriverStats::default(),
        doing: Mutex::new(vec![String::new(); MACHINES * CLIENTS_PER_NODE + 1]),
        nemesis_done: std::sync::atomic::AtomicBool::new(false),
        reshaping: std::sync::atomic::AtomicBool::new(false),
        two_down: std::sync::atomic::AtomicBool::new(false),
        join,
        serve_lead: 100 + (seed % 5) * 150,
        handed: Mutex::new(None),
        hunt: match seed % 4 {
            _ if !moves => Hunt::No,
            0 => Hunt::BeforeHand,
            2 => Hunt::BeforeCommit,
            _ => Hunt::No,
        },
        driver_dies: moves && seed % 4 == 1,
        replicated,
        loaded: std::sync::atomic::AtomicBool::new(!replicated),
        // Joining, node 2 comes later: the slots start over 0 and 1.
        table: Mutex::new({
            let t = SlotTable::uniform_among(
                node_config().store.store_config().slots,
                MACHINES as u16,
                MACHINES as u16 - u16::from(join),
            )
            .map_err(|e| format!("seed {seed}: {e}"))?;
            if replicated {
                t.with_replication(2, &[0, 1, 2])
                    .map_err(|e| format!("seed {seed}: {e}"))?
            } else {
                t
            }
        }),
    };
    // Setup, outside the run: every node there from the start created
    // first, then recovered, then the lists loaded.
    let mut created = Vec::new();
    for m in (0..MACHINES as MachineId).filter(|&m| !(join && m == JOINER)) {
        let f = fabric
            .hosting_only(m)
            .map_err(|e| format!("seed {seed}: {e}"))?;
        let epoch = shared
            .membership
            .reserve_epoch(m)
            .map_err(|e| format!("seed {seed}: {e}"))?;
        f.set_own_epoch(m, epoch)
            .map_err(|e| format!("seed {seed}: {e}"))?;
        f.hold_peers(m).map_err(|e| format!("seed {seed}: {e}"))?;
        created.push(
            create_node(NodeParts {
                fabric: f,
                me: m,
                config: node_config_for(replicated),
                log: Some(LogParts {
                    storage: Arc::new(shared.slots[m as usize].disk.lock().unwrap().clone()),
                    dir: Shared::log_dir(),
                    runs_on: RunsOn::Simulation,
                }),
                label: format!("node {m}"),
                counters: None,
            })
            .map_err(|e| format!("seed {seed}: create m{m}: {e}"))?,
        );
        created
            .last()
            .expect("pushed above")
            .store()
            .homes()
            .adopt(&shared.table.lock().unwrap())
            .map_err(|e| format!("seed {seed}: m{m}: table: {e}"))?;
    }
    for (m, c) in created.into_iter().enumerate() {
        let mut w = c
            .store()
            .worker(m as MachineId)
            .map_err(|e| e.to_string())?;
        let mut node = c.recover(&mut w).map_err(|e| format!("seed {seed}: {e}"))?;
        node.set_faults(faults_from_env());
        shared
            .join(m as MachineId, Arc::new(node))
            .map_err(|e| format!("seed {seed}: {e}"))?;
    }
    if !replicated {
        load(&shared).map_err(|e| format!("seed {seed}: {e}"))?;
    }
    // The mover counts as a client: services serve until it is done too;
    // so does a replicated run's nemesis (its rejoins' copies are node
    // requests the learners' services answer).
    let clients = MACHINES * CLIENTS_PER_NODE + usize::from(moves) + usize::from(replicated);
    let mut actors: Vec<Actor> = Vec::new();
    let s = &shared;
    if replicated {
        actors.push(Box::new(move |f: &SimFabric| {
            let mut port = f.port(0).expect("a port");
            while let Err(e) = load(s) {
                assert!(
                    e.contains("in doubt") || e.contains("backup"),
                    "seed {}: {e}",
                    s.seed
                );
                port.relax();
            }
            s.loaded.store(true, Ordering::Release);
        }));
    }
    if moves {
        let rng = fabric.rng(777);
        actors.push(Box::new(move |f: &SimFabric| mover::mover(f, s, rng)));
    }
    for id in 0..MACHINES * CLIENTS_PER_NODE {
        let rng = fabric.rng(id as u64);
        actors.push(Box::new(move |f: &SimFabric| {
            client(f, s, id, rng);
            s.clients_done.fetch_add(1, Ordering::AcqRel);
        }));
    }
    for m in 0..MACHINES as MachineId {
        let rng = fabric.rng(100 + m as u64);
        actors.push(Box::new(move |f: &SimFabric| migrator(f, s, m, rng)));
        actors.push(Box::new(move |f: &SimFabric| service(f, s, m, clients)));
        if replicated {
            actors.push(Box::new(move |f: &SimFabric| {
                checkpointer(f, s, m, clients)
            }));
        }
        actors.push(Box::new(move |f: &SimFabric| nemesis::member(f, s, m)));
    }
    actors.push(Box::new(move |f: &SimFabric| {
        coordinator::coordinator(f, s, clients)
    }));
    let rng = fabric.rng(999);
    actors.push(Box::new(move |f: &SimFabric| {
        nemesis::nemesis(f, s, rng);
        if replicated {
            s.clients_done.fetch_add(1, Ordering::AcqRel);
        }
    }));
    let report = sim.run(actors).map_err(|failure| {
        let mut msg = failure.to_string();
        for (who, what) in shared.doing.lock().unwrap().iter().enumerate() {
            msg.push_str(&format!(
                "\n  {}: {what}",
                if who == MACHINES * CLIENTS_PER_NODE {
                    "nemesis".to_string()
                } else {
                    format!("client {who}")
                }
            ));
        }
        msg
    })?;
    // Every node reads every vertex once more, after everything else.
    let mut log = std::mem::take(&mut *shared.log.lock().unwrap());
    let mut seq = shared.seq.load(Ordering::Acquire);
    for m in 0..MACHINES as MachineId {
        let (node, _) = shared
            .node(m)
            .ok_or_else(|| format!("seed {seed}: m{m} is down at the end"))?;
        let mut sess = node.session();
        for v in 0..VERTICES {
            let call = Call::Read { k: usize::MAX };
            let reply = node.handle(
                &mut sess,
                Request::Neighbors { vertex: v, k: 0 },
                NO_DEADLINE,
            );
            let ret = match outcome(&call, &reply) {
                Some(Ret::Unknown) | None => {
                    return Err(format!("seed {seed}: final read of {v} on m{m}: {reply:?}"))
                }
                Some(r) => r,
            };
            log.push(Event {
                vertex: v,
                client: usize::MAX,
                machine: m,
                call,
                ret,
                invoke: seq,
                response: seq + 1,
                invoke_ns: 0,
                response_ns: 0,
            });
            seq += 2;
        }
    }
    let mut coverage = *shared.coverage.lock().unwrap();
    coverage.steps = report.steps;
    coverage.moved = shared.stats.moved.load(Ordering::Relaxed);
    let mut histories: Vec<Vec<Event>> = (0..VERTICES).map(|_| Vec::new()).collect();
    log.sort_by_key(|e| e.invoke);
    for e in log {
        histories[e.vertex as usize].push(e);
    }
    Ok((histories, coverage))
}

fn run_seed(seed: u64, sc: Scenario) -> Result<Coverage, String> {
    let (histories, coverage) = simulate(seed, sc)?;
    if coverage.joins != u64::from(sc.join) {
        return Err(format!(
            "seed {seed}: node {JOINER} joined {} times",
            coverage.joins
        ));
    }
    check_all(seed, &histories, initial_list)?;
    Ok(coverage)
}

#[test]
fn a_cluster_of_nodes_survives_a_crash_or_a_lost_lease_with_every_history_linearizable() {
    if let Some(total) = run_seeds(Scenario::default()) {
        assert!(
            total.crashes > 0 && total.fenced > 0 && total.restarts > 0,
            "{total:?}"
        );
        assert!(total.migrated > 0 && total.checkpoints > 0, "{total:?}");
        assert!(total.approved > 0 && total.moved > 0, "{total:?}");
        assert!(total.unknown > 0 && total.acknowledged > 0, "{total:?}");
        assert!(total.fenced_refusals > 0, "{total:?}");
    }
}

/// The same, while a mover moves slots between the nodes (issue 59):
/// batches guarded, taken over, handed, served by the new home ahead of
/// the table, committed and installed, or rolled back when the old home
/// refuses to hand them (a node of theirs died before).
#[test]
fn slots_move_between_nodes_through_crashes_with_every_history_linearizable() {
    if let Some(total) = run_seeds(Scenario {
        moves: true,
        ..Scenario::default()
    }) {
        assert!(
            total.slot_moves > 0 && total.slot_moves_rolled_back > 0,
            "{total:?}"
        );
        assert!(total.crashes > 0 && total.restarts > 0, "{total:?}");
        assert!(total.unknown > 0 && total.acknowledged > 0, "{total:?}");
        assert!(total.served_ahead > 0, "{total:?}");
        assert!(
            total.driver_deaths > 0 && total.settled_forward > 0,
            "{total:?}"
        );
    }
}

/// The same with node 2 joining during the run (issue 59, a server
/// added): it starts with an empty disk and no slot, and slots move to it
/// and away while the nemesis crashes a node, maybe the new one.
#[test]
fn a_node_joins_and_slots_move_to_it_through_crashes_with_every_history_linearizable() {
    if let Some(total) = run_seeds(Scenario {
        moves: true,
        join: true,
        ..Scenario::default()
    }) {
        assert!(total.joins > 0 && total.slot_moves > 0, "{total:?}");
        assert!(total.crashes > 0 && total.restarts > 0, "{total:?}");
    }
}

/// The same with every slot on two nodes (issue 60): the victim's slots
/// fail over to their backups while it is down, and it comes back with
/// none.
#[test]
fn a_dead_primary_fails_over_to_its_backup_with_every_history_linearizable() {
    if let Some(total) = run_seeds(Scenario {
        replicated: true,
        ..Scenario::default()
    }) {
        assert!(total.failovers > 0 && total.promoted > 0, "{total:?}");
        assert!(total.to_restarting > 0, "{total:?}");
        assert!(total.handed_over > 0, "{total:?}");
        assert!(total.reshaped > 0 && total.reshape_strikes > 0, "{total:?}");
        assert!(total.left > 0 && total.acked_reshaping > 0, "{total:?}");
        assert!(total.crashes > 0 && total.fenced > 0, "{total:?}");
        assert!(total.unknown > 0 && total.acknowledged > 0, "{total:?}");
        assert!(total.migrated > 0 && total.moved > 0, "{total:?}");
    }
}

#[test]
fn a_seed_replays_the_same_histories() {
    for seed in [5, 41] {
        for (moves, join, replicated) in [
            (false, false, false),
            (true, false, false),
            (true, true, false),
            (false, false, true),
        ] {
            let sc = Scenario {
                moves,
                join,
                replicated,
            };
            let a = simulate(seed, sc).unwrap().0;
            let b = simulate(seed, sc).unwrap().0;
            assert_eq!(a, b, "seed {seed} ({sc:?}) ran two different histories");
        }
    }
}
