//! Real threads: readers acting as every machine run `neighbors` and two-hop
//! `k_hop`s (both read modes) at full speed while writers on the home machines
//! insert and delete edges of a few hot vertices, on the in-process fabric
//! (latency model off and on) and on the TCP fabric.
//!
//! Every list a reader sees must be well formed: ids in range, no duplicates,
//! and the never-updated cold vertices exactly as loaded. Each writer owns
//! disjoint (vertex, neighbour) pairs, so the result of each of its operations
//! and the final adjacency of every vertex are the same whatever the
//! interleaving; the final state is compared with that reference from every
//! machine. With decomposed values a pair is inserted and deleted at most once:
//! a multi-part list is not read atomically, so a neighbour deleted from one
//! part and inserted again into a later one may be seen twice.
//!
//! Everything is bounded by operation counts; nothing depends on speed.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};

use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_fabric::tcp::loopback_cluster;
use locus_fabric::{Fabric, MachineId};
use locus_store::{home_of, HopReads, KhopLimits, Store, StoreConfig, Worker};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const MACHINES: usize = 4;
/// Vertices `0..VERTICES`; every neighbour id is one of them.
const VERTICES: u32 = 64;
/// Vertices `0..HOT` are updated (two homed on each machine); the rest never change.
const HOT: u32 = 8;
const WRITERS_PER_MACHINE: u32 = 2;
const WRITER_OPS: usize = 500;
/// Queries per reader: at least the minimum, then on while writers run, up to the maximum.
const READER_QUERIES_MIN: usize = 300;
const READER_QUERIES_MAX: usize = 50_000;
/// Queries all readers together make before each writer's next operation, so
/// that writers (whose operations are local) cannot finish before readers
/// (whose operations cross the fabric) get going.
const READER_QUERIES_PER_WRITER_OP: usize = 2;

/// Counts the threads share.
struct Progress {
    writers_running: AtomicUsize,
    readers_running: AtomicUsize,
    /// Queries made by all readers.
    reader_queries: AtomicUsize,
}

/// Counts a thread down when it ends, even by a panic, so nobody waits for it.
struct Running<'a>(&'a AtomicUsize);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Release);
    }
}

/// What the writers do.
#[derive(Debug, Clone, Copy)]
struct Case {
    part_neighbors_max: u32,
    /// Whether a deleted pair may be inserted again (only with single-part values).
    reinsert: bool,
    seed: u64,
}

/// The neighbours of never-updated vertex `v >= HOT`: two hot vertices and a cold one.
fn cold_list(v: u32) -> Vec<u32> {
    debug_assert!(v >= HOT);
    vec![
        v % HOT,
        (v + 3) % HOT,
        HOT + (v + 1 - HOT) % (VERTICES - HOT),
    ]
}

/// The hot vertices a writer on `machine` updates.
fn hot_of(machine: MachineId) -> Vec<u32> {
    (0..HOT)
        .filter(|&v| home_of(v, MACHINES) == machine)
        .collect()
}

/// Writer `index` of `machine` owns the pairs (v, u) of its machine's hot
/// vertices with `u % WRITERS_PER_MACHINE == index`.
fn owned_pairs(machine: MachineId, index: u32) -> Vec<(u32, u32)> {
    let mut pairs = Vec::new();
    for v in hot_of(machine) {
        for u in (0..VERTICES).filter(|u| u % WRITERS_PER_MACHINE == index) {
            pairs.push((v, u));
        }
    }
    pairs
}

/// Runs one writer's deterministic operation sequence, checking each result,
/// and returns the pairs present at its end.
fn write<F: Fabric>(
    w: &mut Worker<F>,
    index: u32,
    case: Case,
    progress: &Progress,
) -> BTreeSet<(u32, u32)> {
    let _running = Running(&progress.writers_running);
    let me = w.machine();
    let seed = case.seed ^ ((me as u64) << 32 | index as u64);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut pairs = owned_pairs(me, index);
    pairs.shuffle(&mut rng);
    let mut present: BTreeSet<(u32, u32)> = BTreeSet::new();
    let mut fresh = pairs.iter().copied(); // not yet inserted, in a seeded order
    for op in 0..WRITER_OPS {
        // Pace: wait for the readers (unless they are all gone).
        while progress.reader_queries.load(Ordering::Acquire) < op * READER_QUERIES_PER_WRITER_OP
            && progress.readers_running.load(Ordering::Acquire) > 0
        {
            std::thread::yield_now();
        }
        let ctx = format!("seed {seed:#x}, writer {index} of machine {me}, op {op}");
        let roll = rng.gen_range(0..10);
        let any = pairs[rng.gen_range(0..pairs.len())];
        if roll == 0 {
            // A redundant operation: changes nothing, says so.
            let (v, u) = any;
            let r = if present.contains(&any) {
                w.insert_edge(v, u).unwrap()
            } else {
                w.delete_edge(v, u).unwrap()
            };
            assert!(!r, "{ctx}: redundant op on ({v}, {u}) reported a change");
            continue;
        }
        let insert = if case.reinsert {
            // Toggle a random pair.
            (!present.contains(&any)).then_some(any)
        } else if roll <= 6 {
            fresh.next()
        } else {
            None
        };
        match insert {
            Some((v, u)) => {
                assert!(w.insert_edge(v, u).unwrap(), "{ctx}: insert ({v}, {u})");
                present.insert((v, u));
            }
            None => {
                let victim = if case.reinsert {
                    Some(any)
                } else {
                    let p: Vec<_> = present.iter().copied().collect();
                    p.get(rng.gen_range(0..p.len().max(1))).copied()
                };
                if let Some((v, u)) = victim {
                    assert!(w.delete_edge(v, u).unwrap(), "{ctx}: delete ({v}, {u})");
                    present.remove(&(v, u));
                }
            }
        }
    }
    present
}

/// Checks that `list`, all neighbours of `v` as one read saw them, is well formed.
fn check_list(v: u32, list: &[u32], ctx: &str) {
    let set: BTreeSet<u32> = list.iter().copied().collect();
    assert_eq!(
        set.len(),
        list.len(),
        "{ctx}: duplicate in {v}'s list {list:?}"
    );
    assert!(
        list.iter().all(|&u| u < VERTICES),
        "{ctx}: id out of range in {v}'s list {list:?}"
    );
    if v >= HOT {
        assert_eq!(list, cold_list(v), "{ctx}: cold vertex {v} changed");
    }
}

/// Queries at full speed from `w`'s machine until the writers are done (within bounds).
/// Returns the number of queries made.
fn read<F: Fabric>(w: &mut Worker<F>, case: Case, progress: &Progress) -> usize {
    let _running = Running(&progress.readers_running);
    let me = w.machine();
    let seed = case.seed ^ 0x5eed ^ me as u64;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut out = Vec::new();
    let mut queries = 0;
    while queries < READER_QUERIES_MAX
        && (queries < READER_QUERIES_MIN || progress.writers_running.load(Ordering::Acquire) > 0)
    {
        let ctx = format!("seed {seed:#x}, reader {me}, query {queries}");
        queries += 1;
        progress.reader_queries.fetch_add(1, Ordering::Release);
        // Mostly hot vertices; cold ones lead to hot ones in their second hop.
        let v = if rng.gen_bool(0.5) {
            rng.gen_range(0..HOT)
        } else {
            rng.gen_range(HOT..VERTICES)
        };
        out.clear();
        match rng.gen_range(0..4) {
            0 => {
                assert!(w.neighbors(v, usize::MAX, &mut out).unwrap(), "{ctx}");
                check_list(v, &out, &ctx);
            }
            1 => {
                let k = rng.gen_range(0..12);
                assert!(w.neighbors(v, k, &mut out).unwrap(), "{ctx}");
                assert!(out.len() <= k, "{ctx}: neighbors({v}, {k}) gave {out:?}");
                let set: BTreeSet<u32> = out.iter().copied().collect();
                assert_eq!(set.len(), out.len(), "{ctx}: duplicate in {out:?}");
                if v >= HOT {
                    assert_eq!(out, cold_list(v)[..k.min(3)], "{ctx}: cold vertex {v}");
                }
            }
            q => {
                let k = if rng.gen_bool(0.2) {
                    usize::MAX
                } else {
                    rng.gen_range(1..8)
                };
                let visited = if q == 2 {
                    w.k_hop(
                        v,
                        2,
                        k,
                        HopReads::OneAtATime,
                        KhopLimits::default(),
                        &mut out,
                    )
                    .unwrap()
                    .visited
                } else {
                    w.k_hop(
                        v,
                        2,
                        k,
                        HopReads::Pipelined,
                        KhopLimits::default(),
                        &mut out,
                    )
                    .unwrap()
                    .visited
                };
                let first = visited - 1;
                assert!(
                    first <= k,
                    "{ctx}: k_hop({v}, {k}, 2 hops, one at a time) visited {visited}"
                );
                assert!(
                    out.len() <= first.saturating_mul(k),
                    "{ctx}: k_hop({v}, {k}, 2 hops, one at a time) gave {} ids from {first} vertices",
                    out.len()
                );
                assert!(
                    out.iter().all(|&u| u < VERTICES),
                    "{ctx}: k_hop({v}, {k}, 2 hops, one at a time) gave {out:?}"
                );
                if v >= HOT {
                    // The first hop is fixed and its last vertex is cold: the
                    // second hop ends with that vertex's (fixed) list.
                    let cold = cold_list(v);
                    assert_eq!(
                        first,
                        k.min(3),
                        "{ctx}: k_hop({v}, {k}, 2 hops, one at a time)"
                    );
                    if k >= 3 {
                        let tail = cold_list(cold[2]);
                        let tail = &tail[..k.min(3)];
                        assert!(
                            out.ends_with(tail),
                            "{ctx}: k_hop({v}, {k}, 2 hops, one at a time) = {out:?} does not end with {tail:?}"
                        );
                    }
                }
            }
        }
    }
    queries
}

/// Loads the graph, runs writers and readers together, then checks the final
/// state from every machine. `stores[m]` must host machine `m`.
fn run<F: Fabric>(stores: &[Store<F>], case: Case) {
    assert_eq!(stores.len(), MACHINES);
    let mut loader: Vec<Worker<F>> = stores
        .iter()
        .enumerate()
        .map(|(m, s)| s.worker(m as MachineId).unwrap())
        .collect();
    for v in 0..VERTICES {
        let home = home_of(v, MACHINES) as usize;
        let list = if v < HOT { Vec::new() } else { cold_list(v) };
        loader[home].put(v, &list).unwrap();
    }
    let writers = MACHINES * WRITERS_PER_MACHINE as usize;
    let progress = Progress {
        writers_running: AtomicUsize::new(writers),
        readers_running: AtomicUsize::new(MACHINES),
        reader_queries: AtomicUsize::new(0),
    };
    let (finals, queries) = std::thread::scope(|s| {
        let mut writer_threads = Vec::new();
        for (m, store) in stores.iter().enumerate() {
            for i in 0..WRITERS_PER_MACHINE {
                let mut w = store.worker(m as MachineId).unwrap();
                let progress = &progress;
                writer_threads.push(s.spawn(move || write(&mut w, i, case, progress)));
            }
        }
        let reader_threads: Vec<_> = (0..MACHINES)
            .map(|m| {
                let mut w = stores[m].worker(m as MachineId).unwrap();
                let progress = &progress;
                s.spawn(move || read(&mut w, case, progress))
            })
            .collect();
        let finals: Vec<BTreeSet<(u32, u32)>> = writer_threads
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect();
        let queries: usize = reader_threads.into_iter().map(|h| h.join().unwrap()).sum();
        (finals, queries)
    });
    assert!(queries >= MACHINES * READER_QUERIES_MIN);
    // The reference: the union of the writers' final pairs (they are disjoint).
    let mut want: Vec<BTreeSet<u32>> = vec![BTreeSet::new(); HOT as usize];
    for (v, u) in finals.iter().flatten() {
        assert!(want[*v as usize].insert(*u), "pair ({v}, {u}) owned twice");
    }
    for w in &mut loader {
        let me = w.machine();
        for v in 0..VERTICES {
            let got = w.get(v).unwrap().expect("every vertex exists");
            let ctx = format!("{case:?}: final state read by machine {me}");
            check_list(v, &got, &ctx);
            if v < HOT {
                let got: BTreeSet<u32> = got.into_iter().collect();
                assert_eq!(got, want[v as usize], "{ctx}: vertex {v}");
            }
        }
    }
}

fn store_config(part_neighbors_max: u32) -> StoreConfig {
    StoreConfig {
        buckets_per_machine: 16, // small: overflow chains too
        overflow_buckets_per_machine: 64,
        value_region_bytes: 16 << 20,
        part_neighbors_max,
        // Long: no block is reused while a reader may hold its address.
        reclaim_lease_ms: 60_000,
        ..StoreConfig::default()
    }
}

fn local(latency_model: bool, case: Case) {
    let mut lc = LocalConfig::with_machines(MACHINES);
    if !latency_model {
        lc = lc.without_model();
    }
    let store = Store::create(
        LocalFabric::new(lc).unwrap(),
        store_config(case.part_neighbors_max),
    )
    .unwrap();
    run(&vec![store; MACHINES], case);
}

fn tcp(case: Case) {
    // Every node's `Store::create` registers its regions before any worker looks them up.
    let stores: Vec<_> = loopback_cluster(MACHINES)
        .unwrap()
        .into_iter()
        .map(|f| Store::create(f, store_config(case.part_neighbors_max)).unwrap())
        .collect();
    run(&stores, case);
}

const SINGLE_PART: Case = Case {
    part_neighbors_max: 1 << 16,
    reinsert: true,
    seed: 1,
};

/// Up to 64 neighbours in parts of 4: up to 16 parts per hot vertex.
const DECOMPOSED: Case = Case {
    part_neighbors_max: 4,
    reinsert: false,
    seed: 2,
};

#[test]
fn in_process_single_part_values() {
    local(false, SINGLE_PART);
}

#[test]
fn in_process_decomposed_values() {
    local(false, DECOMPOSED);
}

#[test]
fn in_process_with_the_latency_model() {
    local(true, SINGLE_PART);
    local(
        true,
        Case {
            seed: 3,
            ..DECOMPOSED
        },
    );
}

#[test]
fn tcp_single_part_values() {
    tcp(SINGLE_PART);
}

#[test]
fn tcp_decomposed_values() {
    tcp(DECOMPOSED);
}
