//! A snapshot's cut under the seeded simulated fabric (issue 63, requirement
//! 4; design rules S2 and S3, `locus_store::snapshot`): while clients update
//! and a migrator moves values, a snapshot actor's BEGIN → read every vertex
//! → PRE-IMAGES → END must assemble exactly the graph as it was at BEGIN.
//!
//! Each seed builds a 3-machine cluster whose lists are decomposed into parts
//! of two ids (so a vertex is several keys), loads a few lists, then runs:
//! - per machine one client actor, owning the vertices `v % CLIENTS ==
//!   client`, doing a seeded mix of `put` (lists up to five ids: up to three
//!   parts), `insert_edge`, `delete_edge` and `delete_vertex`, each applied
//!   to the client's model of its vertices when it returns. Vertices are
//!   owned, so each vertex's ops take effect in its client's order;
//! - one migrator doing `migrate_vertex` and `migrate_batch` of random
//!   vertices (half the time one a client is updating) to random machines,
//!   and garbage collection;
//! - clients and migrator go on until the snapshot actor is done (or their
//!   limits), so every cut is read among updates and migrations;
//! - per machine one service actor (forwarded vertex and part ops, GC);
//! - the snapshot actor, [`CUTS_PER_RUN`] times: it closes a gate the
//!   clients pass before each update and waits until none is in flight
//!   (design S1, which is a node's job; here it makes BEGIN one instant),
//!   copies the models (the graph at the cut), BEGINs at every home, opens
//!   the gate, then reads the cut with `Worker::read_cut` [`READS_PER_CUT`]
//!   times two ways: every vertex in seeded chunks of a seeded order, each
//!   chunk fetching every home's pre-images at once or after a seeded wait
//!   (so updates, migrations and reclaim leases pass between the reads and
//!   the fetch); and [`AIMED_READS`] single vertices being updated right
//!   then, each fetching at once (a record made late, after the CAS, is
//!   missed only in a window of a few scheduling points). Each read must
//!   equal the copy; then it ENDs at every home.
//!
//! Breaking S2 (recording after the CAS), or S3 (an update or a MIGRATE
//! retiring a recorded block) fails seeds of the default 200: see
//! `docs/design.md`, "Analytics over a running cluster", for which.
//!
//! Leases are 1 ms of simulated time (200 scheduling points) and the GC runs
//! often, so a block retired during a snapshot is reused within the run.
//! Every fabric operation is a scheduling point, so the seed picks one
//! interleaving. A failure panics with `seed N:`; replay with
//! `LOCUS_SIM_SEED=N`, run more with `LOCUS_SIM_SEEDS=K`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Mutex;

use locus_fabric::sim::{Actor, Sim, SimConfig, SimFabric, SimRng};
use locus_fabric::MachineId;
use locus_store::snapshot::{PreImage, SnapshotConfig};
use locus_store::{home_of, Key, Store, StoreConfig, VertexId, Worker, WorkerStats};

const MACHINES: usize = 3;
const CLIENTS: usize = MACHINES;
const VERTICES: u32 = 9;
/// Updates a client makes at most; it stops sooner once the snapshot
/// actor is done.
const OPS_PER_CLIENT: usize = 80;
/// Migrations the migrator makes at most; it stops sooner once the
/// snapshot actor is done.
const MIGRATIONS_PER_RUN: usize = 200;
const CUTS_PER_RUN: usize = 6;
/// Reads of the whole cut while one snapshot is open.
const READS_PER_CUT: usize = 2;
/// Single-vertex reads aimed at vertices being updated, per aimed round.
const AIMED_READS: usize = 16;
/// Neighbour ids come from a small range so inserts and deletes collide.
const NEIGHBOR_IDS: std::ops::Range<u32> = 100..106;
const PUT_LEN_MAX: u64 = 5;
const SEEDS_DEFAULT: u64 = 200;
const CLOCK_STEP_NS: u64 = 5_000;
const STEPS_MAX: u64 = 400_000;
/// Scheduling points the snapshot actor waits before a BEGIN, and between
/// its live reads and the fetch of pre-images, at most (a lease is 200).
const WAIT_POINTS_MAX: u64 = 1_000;

fn store_config() -> StoreConfig {
    StoreConfig {
        buckets_per_machine: 4,
        overflow_buckets_per_machine: 4,
        value_region_bytes: 256 << 10,
        // Lists of up to five ids are up to three keys.
        part_neighbors_max: 2,
        reclaim_lease_ms: 1,
        cache_lease_ms: 1,
        forward_timeout_ms: 3_600_000,
        cache_bytes_max: 64 * locus_store::cache::ENTRY_BYTES,
        reclaim_ring_entries: 4,
        cache_lookups: true,
        cache_recent_hits: true,
        read_stall_ms: 0,
        ..StoreConfig::default()
    }
}

fn initial_list(v: VertexId) -> Option<Vec<VertexId>> {
    (v % 4 != 3).then(|| {
        (0..v % 4)
            .map(|i| NEIGHBOR_IDS.start + (v + i) % 6)
            .collect()
    })
}

type Graph = BTreeMap<VertexId, Option<Vec<VertexId>>>;

/// What the seeds exercised, summed (the races were reached).
#[derive(Debug, Default, Clone, Copy)]
struct Coverage {
    steps: u64,
    updates: u64,
    cuts: u64,
    pre_images_used: u64,
    live_reads: u64,
    fetches_after_the_first: u64,
    blocks_kept: u64,
    migrate_races: u64,
    migrated: u64,
    migrate_conflicts: u64,
    cas_conflicts: u64,
    blocks_freed: u64,
}

struct Shared {
    /// Closed while the snapshot actor takes its cut (S1's gate).
    gate_closed: AtomicBool,
    /// The snapshot actor is done: clients and the migrator stop.
    snapshots_done: AtomicBool,
    /// Updates between the gate and their return.
    in_flight: AtomicUsize,
    /// Each client's model of the vertices it owns.
    models: Vec<Mutex<Graph>>,
    /// The vertex each client is updating (u32::MAX: none), for the
    /// snapshot actor's aimed reads.
    updating: Vec<AtomicU32>,
    /// Actors the services wait for.
    done: AtomicUsize,
    coverage: Mutex<Coverage>,
    doing: Mutex<Vec<String>>,
}

impl Shared {
    fn add_stats(&self, s: &WorkerStats, freed: u64) {
        let mut c = self.coverage.lock().unwrap();
        c.migrated += s.migrated;
        c.migrate_races += s.snapshot_migrate_races;
        c.migrate_conflicts += s.migrate_conflicts;
        c.cas_conflicts += s.cas_conflicts;
        c.blocks_freed += freed;
    }

    fn doing(&self, actor: usize, what: String) {
        self.doing.lock().unwrap()[actor] = what;
    }
}

fn random_neighbor(rng: &mut SimRng) -> VertexId {
    NEIGHBOR_IDS.start + rng.below((NEIGHBOR_IDS.end - NEIGHBOR_IDS.start) as u64) as u32
}

/// One client: gated updates of its own vertices, applied to its model on return.
fn client(
    shared: &Shared,
    id: usize,
    mut w: Worker<SimFabric>,
    mut rng: SimRng,
) -> Result<(), String> {
    let mine: Vec<VertexId> = (0..VERTICES)
        .filter(|v| *v as usize % CLIENTS == id)
        .collect();
    for _ in 0..OPS_PER_CLIENT {
        if shared.snapshots_done.load(Ordering::Relaxed) {
            break;
        }
        let v = mine[rng.below(mine.len() as u64) as usize];
        let dice = rng.below(100);
        while shared.gate_closed.load(Ordering::Relaxed) {
            w.relax();
        }
        shared.in_flight.fetch_add(1, Ordering::Relaxed);
        shared.updating[id].store(v, Ordering::Relaxed);
        let mut model = shared.models[id].lock().unwrap().get(&v).cloned().flatten();
        let what = match dice {
            0..=24 => {
                let len = rng.below(PUT_LEN_MAX + 1);
                let list: Vec<VertexId> = (0..len).map(|_| random_neighbor(&mut rng)).collect();
                let what = format!("put({v}, {list:?})");
                shared.doing(id, what.clone());
                w.put(v, &list).map_err(|e| format!("{what}: {e}"))?;
                model = Some(list);
                what
            }
            25..=64 => {
                let u = random_neighbor(&mut rng);
                let what = format!("insert_edge({v}, {u})");
                shared.doing(id, what.clone());
                let added = w.insert_edge(v, u).map_err(|e| format!("{what}: {e}"))?;
                let list = model.get_or_insert_with(Vec::new);
                let had = list.contains(&u);
                if !had {
                    list.push(u);
                }
                if added == had {
                    return Err(format!("{what} said added = {added}, the model disagrees"));
                }
                what
            }
            65..=89 => {
                let u = random_neighbor(&mut rng);
                let what = format!("delete_edge({v}, {u})");
                shared.doing(id, what.clone());
                w.delete_edge(v, u).map_err(|e| format!("{what}: {e}"))?;
                if let Some(list) = model.as_mut() {
                    list.retain(|x| *x != u);
                }
                what
            }
            _ => {
                let what = format!("delete_vertex({v})");
                shared.doing(id, what.clone());
                w.delete_vertex(v).map_err(|e| format!("{what}: {e}"))?;
                model = None;
                what
            }
        };
        shared.models[id].lock().unwrap().insert(v, model);
        shared.updating[id].store(u32::MAX, Ordering::Relaxed);
        shared.in_flight.fetch_sub(1, Ordering::Relaxed);
        shared.doing(id, format!("done with {what}"));
        shared.coverage.lock().unwrap().updates += 1;
    }
    shared.add_stats(&w.stats, 0);
    Ok(())
}

/// The migrator: moves random vertices (and batches of parts) to random
/// machines, never gated, and collects garbage.
fn migrator(
    shared: &Shared,
    mut workers: Vec<Worker<SimFabric>>,
    mut rng: SimRng,
) -> Result<(), String> {
    let mut freed = 0u64;
    for i in 0..MIGRATIONS_PER_RUN {
        if shared.snapshots_done.load(Ordering::Relaxed) {
            break;
        }
        let m = rng.below(MACHINES as u64) as usize;
        let w = &mut workers[m];
        // Half the time a vertex a client is updating right then: its
        // first update's record races the migration's CAS (S3).
        let busy: Vec<VertexId> = shared
            .updating
            .iter()
            .map(|u| u.load(Ordering::Relaxed))
            .filter(|v| *v != u32::MAX)
            .collect();
        let v = match (busy.len(), rng.below(2)) {
            (0, _) | (_, 0) => rng.below(u64::from(VERTICES)) as VertexId,
            (n, _) => busy[rng.below(n as u64) as usize],
        };
        if rng.below(2) == 0 {
            w.migrate_vertex(v)
                .map_err(|e| format!("migrate_vertex({v}) to m{m}: {e}"))?;
        } else {
            let keys: Vec<Key> = (0..3).map(|p| Key::part(v, p)).collect();
            w.migrate_batch(&keys)
                .map_err(|e| format!("migrate_batch({keys:?}) to m{m}: {e}"))?;
        }
        if i % 4 == 0 {
            freed += w
                .collect_garbage()
                .map_err(|e| format!("GC on m{m}: {e}"))? as u64;
        }
    }
    for w in &workers {
        shared.add_stats(&w.stats, freed);
        freed = 0;
    }
    Ok(())
}

/// Every home's pre-images (the actor holds a worker per machine).
fn fetch_all(homes: &mut [Worker<SimFabric>], id: u64) -> locus_store::Result<Vec<PreImage>> {
    let mut all = Vec::new();
    for h in homes.iter_mut() {
        all.extend(h.snapshot_pre_images(id)?);
    }
    Ok(all)
}

/// Reads aimed at vertices being updated: [`AIMED_READS`] single-vertex
/// cuts, each of a vertex some client is updating right then (else a random
/// one), its pre-images fetched right after its read: a first update whose
/// CAS the read sees must have recorded by then (S2).
fn aimed_reads(
    shared: &Shared,
    reader: &mut Worker<SimFabric>,
    homes: &mut [Worker<SimFabric>],
    rng: &mut SimRng,
    id: u64,
) -> Result<locus_store::Cut, String> {
    let mut got = locus_store::Cut {
        lists: Vec::new(),
        pre_images_used: 0,
        live_reads: 0,
        fetches: 0,
    };
    for _ in 0..AIMED_READS {
        let busy: Vec<VertexId> = shared
            .updating
            .iter()
            .map(|u| u.load(Ordering::Relaxed))
            .filter(|v| *v != u32::MAX)
            .collect();
        let v = match busy.len() {
            0 => rng.below(u64::from(VERTICES)) as VertexId,
            n => busy[rng.below(n as u64) as usize],
        };
        let part = reader
            .read_cut(&[v], |_| fetch_all(homes, id))
            .map_err(|e| format!("aimed read of vertex {v} in cut {id}: {e}"))?;
        got.lists.extend(part.lists);
        got.pre_images_used += part.pre_images_used;
        got.live_reads += part.live_reads;
        got.fetches += part.fetches.saturating_sub(1);
    }
    Ok(got)
}

/// One read of the whole cut, in seeded chunks (see [`snapshotter`]).
fn read_in_chunks(
    reader: &mut Worker<SimFabric>,
    homes: &mut [Worker<SimFabric>],
    rng: &mut SimRng,
    id: u64,
) -> Result<locus_store::Cut, String> {
    let mut order: Vec<VertexId> = (0..VERTICES).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let mut got = locus_store::Cut {
        lists: Vec::new(),
        pre_images_used: 0,
        live_reads: 0,
        fetches: 0,
    };
    let mut rest = &order[..];
    while !rest.is_empty() {
        // One vertex at a time half the time: its fetch follows its read at once.
        let n = match rng.below(2) {
            0 => 1,
            _ => 1 + rng.below(rest.len() as u64) as usize,
        };
        let (chunk, after) = rest.split_at(n);
        rest = after;
        let wait = match rng.below(4) {
            0..=2 => 0,
            _ => rng.below(WAIT_POINTS_MAX),
        };
        let part = reader
            .read_cut(chunk, |r| {
                for _ in 0..wait {
                    r.relax();
                }
                fetch_all(homes, id)
            })
            .map_err(|e| format!("read of cut {id} ({chunk:?}): {e}"))?;
        got.lists.extend(part.lists);
        got.pre_images_used += part.pre_images_used;
        got.live_reads += part.live_reads;
        // Fetches beyond the first of each read_cut.
        got.fetches += part.fetches.saturating_sub(1);
    }
    Ok(got)
}

/// The snapshot actor: [`CUTS_PER_RUN`] times gate, BEGIN, read, check, END.
fn snapshotter(
    shared: &Shared,
    mut homes: Vec<Worker<SimFabric>>,
    mut reader: Worker<SimFabric>,
    mut rng: SimRng,
) -> Result<(), String> {
    for cut in 0..CUTS_PER_RUN as u64 {
        for _ in 0..rng.below(WAIT_POINTS_MAX) {
            reader.relax();
        }
        // S1: no update in flight at BEGIN.
        shared.gate_closed.store(true, Ordering::Relaxed);
        while shared.in_flight.load(Ordering::Relaxed) > 0 {
            reader.relax();
        }
        let mut expected = Graph::new();
        for m in &shared.models {
            expected.extend(m.lock().unwrap().iter().map(|(v, l)| (*v, l.clone())));
        }
        let id = 100 + cut;
        for h in homes.iter_mut() {
            h.snapshot_begin(id, SnapshotConfig::default())
                .map_err(|e| format!("BEGIN {id} at m{}: {e}", h.machine()))?;
        }
        shared.gate_closed.store(false, Ordering::Relaxed);
        // The whole cut is read READS_PER_CUT times while the snapshot is
        // open, each time in a seeded order, in chunks of seeded sizes, each
        // chunk one `read_cut` whose fetch comes at once (half the chunks)
        // or after a seeded wait. Every read must give the graph at BEGIN.
        for round in 0..READS_PER_CUT * 2 {
            let got = if round % 2 == 0 {
                read_in_chunks(&mut reader, &mut homes, &mut rng, id)?
            } else {
                aimed_reads(shared, &mut reader, &mut homes, &mut rng, id)?
            };
            let mut c = shared.coverage.lock().unwrap();
            c.pre_images_used += got.pre_images_used as u64;
            c.live_reads += got.live_reads as u64;
            c.fetches_after_the_first += u64::from(got.fetches);
            drop(c);
            let mut msg = String::new();
            for (v, list) in &got.lists {
                if expected.get(v) != Some(list) {
                    let _ = write!(
                        msg,
                        "\n  vertex {v}: read {list:?}, at the cut {:?}",
                        expected.get(v).cloned().flatten()
                    );
                }
            }
            if !msg.is_empty() {
                let msg = format!("cut {id} differs from the graph at BEGIN:{msg}");
                return Err(msg);
            }
        }
        let mut kept = 0;
        for h in homes.iter_mut() {
            kept += h
                .snapshot_end(id)
                .map_err(|e| format!("END {id} at m{}: {e}", h.machine()))?;
        }
        let mut c = shared.coverage.lock().unwrap();
        c.cuts += 1;
        c.blocks_kept += kept as u64;
    }
    Ok(())
}

fn service(shared: &Shared, waited_for: usize, mut w: Worker<SimFabric>) -> Result<(), String> {
    let m = w.machine();
    let mut round = 0u64;
    let mut freed = 0u64;
    while shared.done.load(Ordering::Relaxed) < waited_for {
        w.serve().map_err(|e| format!("service of m{m}: {e}"))?;
        round += 1;
        if round.is_multiple_of(16) {
            freed +=
                w.collect_garbage()
                    .map_err(|e| format!("GC in the service of m{m}: {e}"))? as u64;
        }
    }
    shared.add_stats(&w.stats, freed);
    Ok(())
}

fn simulate(seed: u64) -> Result<Coverage, String> {
    let mut sim = Sim::new(SimConfig {
        machines: MACHINES,
        seed,
        steps_max: STEPS_MAX,
        clock_step_ns: CLOCK_STEP_NS,
        ..SimConfig::default()
    })
    .map_err(|e| format!("seed {seed}: sim config: {e}"))?;
    let fabric = sim.fabric().clone();
    let store = Store::create(fabric.clone(), store_config())
        .map_err(|e| format!("seed {seed}: store config: {e}"))?;
    let setup = |e: locus_store::StoreError| format!("seed {seed}: setup: {e}");
    let mut models: Vec<Graph> = (0..CLIENTS).map(|_| Graph::new()).collect();
    for v in 0..VERTICES {
        let list = initial_list(v);
        if let Some(l) = &list {
            store
                .worker(home_of(v, MACHINES))
                .map_err(setup)?
                .put(v, l)
                .map_err(setup)?;
        }
        models[v as usize % CLIENTS].insert(v, list);
    }
    let actors_count = CLIENTS + 2;
    let shared = Shared {
        gate_closed: AtomicBool::new(false),
        snapshots_done: AtomicBool::new(false),
        in_flight: AtomicUsize::new(0),
        models: models.into_iter().map(Mutex::new).collect(),
        updating: (0..CLIENTS).map(|_| AtomicU32::new(u32::MAX)).collect(),
        done: AtomicUsize::new(0),
        coverage: Mutex::new(Coverage::default()),
        doing: Mutex::new(vec![String::new(); actors_count]),
    };
    let workers = |store: &Store<SimFabric>| -> Result<Vec<Worker<SimFabric>>, String> {
        (0..MACHINES)
            .map(|m| store.worker(m as MachineId).map_err(setup))
            .collect()
    };
    let mut actors: Vec<Actor> = Vec::new();
    for c in 0..CLIENTS {
        let w = store.worker(c as MachineId).map_err(setup)?;
        let rng = fabric.rng(c as u64);
        let shared = &shared;
        actors.push(Box::new(move |_: &SimFabric| {
            let r = client(shared, c, w, rng);
            shared.done.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = r {
                panic!("{e}");
            }
        }));
    }
    {
        let ws = workers(&store)?;
        let rng = fabric.rng(CLIENTS as u64);
        let shared = &shared;
        actors.push(Box::new(move |_: &SimFabric| {
            let r = migrator(shared, ws, rng);
            shared.done.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = r {
                panic!("{e}");
            }
        }));
    }
    {
        let homes = workers(&store)?;
        let reader = store.worker(0).map_err(setup)?;
        let rng = fabric.rng(CLIENTS as u64 + 1);
        let shared = &shared;
        actors.push(Box::new(move |_: &SimFabric| {
            let r = snapshotter(shared, homes, reader, rng);
            shared.snapshots_done.store(true, Ordering::Relaxed);
            shared.done.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = r {
                panic!("{e}");
            }
        }));
    }
    for m in 0..MACHINES {
        let w = store.worker(m as MachineId).map_err(setup)?;
        let shared = &shared;
        actors.push(Box::new(move |_: &SimFabric| {
            if let Err(e) = service(shared, actors_count, w) {
                panic!("{e}");
            }
        }));
    }
    let report = sim.run(actors).map_err(|failure| {
        let mut msg = format!("seed {seed}: {failure}");
        for (a, what) in shared.doing.lock().unwrap().iter().enumerate() {
            let _ = write!(msg, "\n  actor {a}: {what}");
        }
        msg
    })?;
    let mut c = shared.coverage.into_inner().unwrap();
    c.steps = report.steps;
    Ok(c)
}

fn env_u64(name: &str) -> Option<u64> {
    let s = std::env::var(name).ok()?;
    Some(
        s.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name} = {s:?} is not a number")),
    )
}

/// Updates, migrations and GC around BEGIN → read → PRE-IMAGES → END: every
/// cut equals the graph at BEGIN.
#[test]
fn cuts_equal_the_graph_at_begin_under_updates_and_migration() {
    let seeds: Vec<u64> = match env_u64("LOCUS_SIM_SEED") {
        Some(s) => vec![s],
        None => (0..env_u64("LOCUS_SIM_SEEDS").unwrap_or(SEEDS_DEFAULT)).collect(),
    };
    let keep_going = std::env::var("LOCUS_SIM_KEEP_GOING").is_ok();
    let mut total = Coverage::default();
    let mut failed = Vec::new();
    for &seed in &seeds {
        match simulate(seed) {
            Ok(c) => {
                total.steps += c.steps;
                total.updates += c.updates;
                total.cuts += c.cuts;
                total.pre_images_used += c.pre_images_used;
                total.live_reads += c.live_reads;
                total.fetches_after_the_first += c.fetches_after_the_first;
                total.blocks_kept += c.blocks_kept;
                total.migrate_races += c.migrate_races;
                total.migrated += c.migrated;
                total.migrate_conflicts += c.migrate_conflicts;
                total.cas_conflicts += c.cas_conflicts;
                total.blocks_freed += c.blocks_freed;
            }
            Err(e) if keep_going => {
                eprintln!("{e}");
                failed.push(seed);
            }
            Err(e) => panic!("{e}"),
        }
    }
    eprintln!("{} seeds: {total:?}", seeds.len());
    assert!(
        failed.is_empty(),
        "{} seeds failed: {failed:?}",
        failed.len()
    );
    if seeds.len() >= 30 {
        // The races this test is for were reached.
        assert_eq!(total.cuts, seeds.len() as u64 * CUTS_PER_RUN as u64);
        assert!(
            total.pre_images_used > 0 && total.blocks_kept > 0,
            "{total:?}"
        );
        assert!(
            total.migrated > 0 && total.migrate_conflicts > 0,
            "{total:?}"
        );
        assert!(total.blocks_freed > 0, "{total:?}");
    }
}
