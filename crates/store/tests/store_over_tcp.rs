//! The same store code on the TCP fabric: a 4-node loopback cluster, node `m`
//! hosting machine `m`, so every access between machines crosses a socket.
//!
//! - A graph loaded by home workers reads back from every node exactly as its
//!   CSR says (`get`, `neighbors`, `k_hop` both ways), with small
//!   parts so that hubs are decomposed.
//! - Updates on home workers are seen at once by readers on other nodes
//!   (checked against a `HashMap` model).
//! - A node that goes away (shut down, or its last handle dropped) makes the
//!   operations that need it fail with `PeerUnavailable` naming it, without
//!   hanging, while whatever the surviving machines hold keeps working.
//! - A node that is stuck (behind a relay that stops passing bytes on) makes
//!   them fail once `io_timeout_ms` passes; when it answers again, the next
//!   operation reconnects and succeeds.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use locus_fabric::tcp::{loopback_cluster_with, TcpConfig, TcpFabric};
use locus_fabric::{FabricError, MachineId};
use locus_graph::{Csr, CsrOptions, Rmat, RmatConfig};
use locus_store::{home_of, HopReads, KhopLimits, Store, StoreConfig, StoreError, Worker};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const MACHINES: usize = 4;
/// Small parts: R-MAT hubs are decomposed, so reads follow MORE flags over
/// TCP and the pipelined two-hop takes its fallback path.
const PART_NEIGHBORS_MAX: u32 = 16;
/// A hang detector for the departure tests, far above their io timeout: an
/// operation that needs a departed node must fail, not wait forever.
const HANG_LIMIT: Duration = Duration::from_secs(30);
/// The io and connect timeout of the departure tests.
const SHORT_TIMEOUT_MS: u64 = 500;

type Model = HashMap<u32, Vec<u32>>;

/// An R-MAT graph at scale 8 (256 vertices), undirected and simple.
fn graph() -> Csr {
    let rmat = Rmat::new(RmatConfig {
        scale: 8,
        edge_factor: 8,
        seed: 7,
        ..RmatConfig::default()
    })
    .unwrap();
    Csr::from_rmat(&rmat, CsrOptions::default()).unwrap()
}

fn model_of(csr: &Csr) -> Model {
    (0..csr.vertex_count() as u32)
        .map(|v| (v, csr.neighbors(v).to_vec()))
        .collect()
}

/// Up to `k` neighbours of each of the first `k` neighbours of `v`, as a two-hop `k_hop` returns them.
fn two_hop_ref(model: &Model, v: u32, k: usize) -> Vec<u32> {
    let mut out = Vec::new();
    for u in model.get(&v).into_iter().flatten().take(k) {
        out.extend(model.get(u).into_iter().flatten().take(k));
    }
    out
}

/// One store per node. `Store::create` on a node registers that node's
/// machine's regions; all of them run before any worker is made, because a
/// worker looks up the regions of every machine.
fn cluster(io_timeout_ms: u64) -> Vec<Store<TcpFabric>> {
    stores_on(
        loopback_cluster_with(TcpConfig {
            machines: MACHINES,
            io_timeout_ms,
            connect_timeout_ms: io_timeout_ms,
            ..TcpConfig::default()
        })
        .unwrap(),
    )
}

/// A store on each node (node `m` hosting machine `m`).
fn stores_on(nodes: Vec<TcpFabric>) -> Vec<Store<TcpFabric>> {
    let config = StoreConfig {
        buckets_per_machine: 64,
        overflow_buckets_per_machine: 64,
        value_region_bytes: 8 << 20,
        part_neighbors_max: PART_NEIGHBORS_MAX,
        reclaim_lease_ms: 60_000,
        ..StoreConfig::default()
    };
    nodes
        .into_iter()
        .map(|f| Store::create(f, config.clone()).unwrap())
        .collect()
}

/// Worker `m` acts as machine `m`, on node `m`.
fn workers(stores: &[Store<TcpFabric>]) -> Vec<Worker<TcpFabric>> {
    stores
        .iter()
        .enumerate()
        .map(|(m, s)| s.worker(m as MachineId).unwrap())
        .collect()
}

/// Puts every vertex of `csr` from its home node's worker, one thread per node.
fn load(stores: &[Store<TcpFabric>], workers: &mut [Worker<TcpFabric>], csr: &Csr) {
    stores[0]
        .check_capacity(csr.vertex_count(), |v| csr.degree(v as u32))
        .unwrap();
    assert!(
        csr.max_degree() > 2 * PART_NEIGHBORS_MAX as u64,
        "the graph has decomposed vertices"
    );
    std::thread::scope(|s| {
        for w in workers.iter_mut() {
            s.spawn(move || {
                let me = w.machine();
                for v in 0..csr.vertex_count() as u32 {
                    if home_of(v, MACHINES) == me {
                        w.put(v, csr.neighbors(v)).unwrap();
                    }
                }
            });
        }
    });
}

/// Every read of every vertex of `model` (ids `0..vertices`) from `w` agrees with the model.
fn check_reads(w: &mut Worker<TcpFabric>, model: &Model, vertices: u32) {
    let me = w.machine();
    let mut out = Vec::new();
    for v in 0..vertices {
        let want = &model[&v];
        assert_eq!(
            w.get(v).unwrap().as_ref(),
            Some(want),
            "machine {me}: get({v})"
        );
        for k in [0, 1, 5, 17, 40] {
            out.clear();
            assert!(w.neighbors(v, k, &mut out).unwrap(), "machine {me}: {v}");
            assert_eq!(
                out,
                want[..k.min(want.len())],
                "machine {me}: neighbors({v}, {k})"
            );
        }
        // Full two-hops of hubs are the slow part; each node takes a quarter of them.
        let full = v % MACHINES as u32 == me as u32;
        for k in [1, 17].into_iter().chain(full.then_some(usize::MAX)) {
            let want = two_hop_ref(model, v, k);
            out.clear();
            w.k_hop(
                v,
                2,
                k,
                HopReads::OneAtATime,
                KhopLimits::default(),
                &mut out,
            )
            .unwrap();
            assert_eq!(
                out, want,
                "machine {me}: k_hop({v}, {k}, 2 hops, one at a time)"
            );
            out.clear();
            w.k_hop(
                v,
                2,
                k,
                HopReads::Pipelined,
                KhopLimits::default(),
                &mut out,
            )
            .unwrap();
            assert_eq!(
                out, want,
                "machine {me}: k_hop({v}, {k}, 2 hops, pipelined)"
            );
        }
    }
    // Vertices never put are absent everywhere.
    for v in vertices..vertices + 2 * MACHINES as u32 {
        assert_eq!(w.get(v).unwrap(), None, "machine {me}: get({v})");
        out.clear();
        assert_eq!(
            w.k_hop(
                v,
                2,
                8,
                HopReads::Pipelined,
                KhopLimits::default(),
                &mut out
            )
            .unwrap()
            .visited,
            1
        );
        assert!(out.is_empty());
    }
}

#[test]
fn a_loaded_graph_reads_the_same_from_every_node() {
    let csr = graph();
    let model = model_of(&csr);
    let stores = cluster(5_000);
    let mut ws = workers(&stores);
    load(&stores, &mut ws, &csr);
    let n = csr.vertex_count() as u32;
    std::thread::scope(|s| {
        for w in ws.iter_mut() {
            let model = &model;
            s.spawn(move || check_reads(w, model, n));
        }
    });
}

#[test]
fn updates_on_home_nodes_are_seen_from_every_node() {
    let csr = graph();
    let mut model = model_of(&csr);
    let stores = cluster(5_000);
    let mut ws = workers(&stores);
    load(&stores, &mut ws, &csr);
    let n = csr.vertex_count() as u32;
    // A few vertices beyond the graph: created by the first update.
    let vertices = n + 16;
    let seed = 11;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut out = Vec::new();
    for step in 0..1500 {
        let v = rng.gen_range(0..vertices);
        let home = home_of(v, MACHINES) as usize;
        // Always read from another node than the one that wrote.
        let reader = (home + rng.gen_range(1..MACHINES)) % MACHINES;
        let ctx = format!("seed {seed} step {step} vertex {v} home {home} reader {reader}");
        match rng.gen_range(0..10) {
            0 => {
                let len = rng.gen_range(0..3 * PART_NEIGHBORS_MAX as usize);
                let list: Vec<u32> = (0..len).map(|_| rng.gen_range(0..vertices)).collect();
                ws[home].put(v, &list).unwrap();
                model.insert(v, list);
            }
            1..=4 => {
                let u = rng.gen_range(0..vertices);
                let added = ws[home].insert_edge(v, u).unwrap();
                let e = model.entry(v).or_default();
                assert_eq!(added, !e.contains(&u), "{ctx}: insert_edge({v}, {u})");
                if added {
                    e.push(u);
                }
            }
            5 | 6 => {
                // Mostly an edge that is there.
                let u = match model.get(&v) {
                    Some(e) if !e.is_empty() && rng.gen_bool(0.8) => e[rng.gen_range(0..e.len())],
                    _ => rng.gen_range(0..vertices),
                };
                let removed = ws[home].delete_edge(v, u).unwrap();
                let e = model.get_mut(&v);
                assert_eq!(
                    removed,
                    e.as_ref().is_some_and(|e| e.contains(&u)),
                    "{ctx}: delete_edge({v}, {u})"
                );
                if let Some(e) = e {
                    e.retain(|&x| x != u);
                }
            }
            7 => {
                let k = rng.gen_range(1..8);
                let want = two_hop_ref(&model, v, k);
                out.clear();
                ws[reader]
                    .k_hop(
                        v,
                        2,
                        k,
                        HopReads::OneAtATime,
                        KhopLimits::default(),
                        &mut out,
                    )
                    .unwrap();
                assert_eq!(out, want, "{ctx}: k_hop({v}, {k}, 2 hops, one at a time)");
                out.clear();
                ws[reader]
                    .k_hop(
                        v,
                        2,
                        k,
                        HopReads::Pipelined,
                        KhopLimits::default(),
                        &mut out,
                    )
                    .unwrap();
                assert_eq!(out, want, "{ctx}: k_hop({v}, {k}, 2 hops, pipelined)");
                continue;
            }
            _ => {
                let k = rng.gen_range(0..2 * PART_NEIGHBORS_MAX as usize);
                out.clear();
                let found = ws[reader].neighbors(v, k, &mut out).unwrap();
                assert_eq!(found, model.contains_key(&v), "{ctx}");
                let want: Vec<u32> = model
                    .get(&v)
                    .map(|e| e.iter().copied().take(k).collect())
                    .unwrap_or_default();
                assert_eq!(out, want, "{ctx}: neighbors({v}, {k})");
                continue;
            }
        }
        // An update is visible from another node as soon as it returns.
        assert_eq!(
            ws[reader].get(v).unwrap(),
            model.get(&v).cloned(),
            "{ctx}: get after the update"
        );
    }
    // An update issued away from the vertex's home is forwarded there over TCP
    // (check-and-forward) once the home's service runs.
    let services: Vec<_> = stores.iter().map(|s| s.spawn_services().unwrap()).collect();
    let v = 1;
    let added = ws[2].insert_edge(v, 0).unwrap();
    let e = model.entry(v).or_default();
    assert_eq!(added, !e.contains(&0));
    if added {
        e.push(0);
    }
    assert_eq!(
        ws[0].get(v).unwrap(),
        model.get(&v).cloned(),
        "forwarded insert visible"
    );
    assert!(services.iter().all(|s| s.failure().is_none()));
    for (m, w) in ws.iter_mut().enumerate() {
        for v in 0..vertices {
            assert_eq!(
                w.get(v).unwrap(),
                model.get(&v).cloned(),
                "final get({v}) on {m}"
            );
        }
    }
}

/// How a node goes away.
#[derive(Debug, Clone, Copy)]
enum Departure {
    /// `TcpFabric::shutdown`, with readers running meanwhile; its handles stay alive.
    ShutdownUnderLoad,
    /// The node's store and workers (so every handle of its fabric) are dropped.
    Drop,
}

/// Whether `r` is the error of an operation that needed departed machine `gone`.
fn is_gone<T: std::fmt::Debug>(r: &locus_store::Result<T>, gone: MachineId) -> bool {
    matches!(r, Err(StoreError::Fabric(FabricError::PeerUnavailable { machine, .. })) if *machine == gone)
}

/// Runs `f` on its own thread and returns its result, failing the test if it
/// takes longer than [`HANG_LIMIT`] (a hang) or panics.
fn bounded<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        let r = f();
        let _ = tx.send(());
        r
    });
    match rx.recv_timeout(HANG_LIMIT) {
        Ok(()) => h.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what} hung for {HANG_LIMIT:?}"),
        Err(mpsc::RecvTimeoutError::Disconnected) => match h.join() {
            Err(p) => std::panic::resume_unwind(p),
            Ok(_) => unreachable!("the thread sends before it returns"),
        },
    }
}

/// What a survivor checks once machine `gone` has departed; returns the vertex it updated.
fn survivor_checks(
    w: &mut Worker<TcpFabric>,
    model: &Model,
    vertices: u32,
    gone: MachineId,
) -> u32 {
    let me = w.machine();
    let mut out = Vec::new();
    // Reads of the departed machine's vertices fail, again and again (the
    // reconnect is refused at once), and name the machine.
    for v in (0..vertices)
        .filter(|&v| home_of(v, MACHINES) == gone)
        .take(8)
    {
        for _ in 0..3 {
            let r = w.get(v);
            assert!(is_gone(&r, gone), "machine {me}: get({v}) = {r:?}");
        }
        out.clear();
        let r = w.neighbors(v, 3, &mut out);
        assert!(is_gone(&r, gone), "machine {me}: neighbors({v}) = {r:?}");
    }
    // A two-hop from a vertex held here that passes through the departed machine fails.
    let v = (0..vertices)
        .find(|&v| {
            home_of(v, MACHINES) == me && model[&v].iter().any(|&u| home_of(u, MACHINES) == gone)
        })
        .expect("some vertex here has a neighbour there");
    out.clear();
    let r = w.k_hop(
        v,
        2,
        usize::MAX,
        HopReads::OneAtATime,
        KhopLimits::default(),
        &mut out,
    );
    assert!(
        is_gone(&r, gone),
        "machine {me}: k_hop({v}, 2 hops, one at a time) = {r:?}"
    );
    out.clear();
    let r = w.k_hop(
        v,
        2,
        usize::MAX,
        HopReads::Pipelined,
        KhopLimits::default(),
        &mut out,
    );
    assert!(
        is_gone(&r, gone),
        "machine {me}: k_hop({v}, 2 hops, pipelined) = {r:?}"
    );
    // Everything the survivors hold reads as before, two-hops that avoid the departed machine too.
    for v in (0..vertices).filter(|&v| home_of(v, MACHINES) != gone) {
        assert_eq!(
            w.get(v).unwrap().as_ref(),
            Some(&model[&v]),
            "machine {me}: get({v})"
        );
        let avoids = |u: &u32| home_of(*u, MACHINES) != gone;
        let k = 4;
        let first = &model[&v][..k.min(model[&v].len())];
        if first.iter().all(avoids) {
            let want = two_hop_ref(model, v, k);
            out.clear();
            w.k_hop(
                v,
                2,
                k,
                HopReads::OneAtATime,
                KhopLimits::default(),
                &mut out,
            )
            .unwrap();
            assert_eq!(
                out, want,
                "machine {me}: k_hop({v}, {k}, 2 hops, one at a time)"
            );
            out.clear();
            w.k_hop(
                v,
                2,
                k,
                HopReads::Pipelined,
                KhopLimits::default(),
                &mut out,
            )
            .unwrap();
            assert_eq!(
                out, want,
                "machine {me}: k_hop({v}, {k}, 2 hops, pipelined)"
            );
        }
    }
    // Updates of vertices held here still work (they are local): a new vertex
    // (not one the other survivors are reading) is created, grown and shrunk.
    let v = vertices + MACHINES as u32 + me as u32;
    assert_eq!(home_of(v, MACHINES), me);
    let marker = vertices + me as u32;
    assert!(w.insert_edge(v, marker).unwrap());
    assert!(w.insert_edge(v, 0).unwrap());
    assert!(w.delete_edge(v, 0).unwrap());
    assert_eq!(w.get(v).unwrap(), Some(vec![marker]));
    v
}

fn departure(how: Departure) {
    let csr = graph();
    let model = Arc::new(model_of(&csr));
    let n = csr.vertex_count() as u32;
    let mut stores = cluster(SHORT_TIMEOUT_MS);
    let mut ws = workers(&stores);
    load(&stores, &mut ws, &csr);
    let gone = (MACHINES - 1) as MachineId;
    let gone_worker = ws.remove(gone as usize);
    let gone_store = stores.remove(gone as usize);
    let departed = Arc::new(AtomicBool::new(false));
    // Readers on the survivors, running while the node goes: every answer is
    // right or names the departed machine, and once it has gone (and a
    // connection has noticed) every query through it fails.
    let mut readers = Vec::new();
    if let Departure::ShutdownUnderLoad = how {
        for m in 0..gone {
            let mut w = stores[m as usize].worker(m).unwrap();
            let (model, departed) = (Arc::clone(&model), Arc::clone(&departed));
            readers.push(std::thread::spawn(move || {
                let mut out = Vec::new();
                let (mut after, mut failed) = (0, 0);
                for i in 0..100_000u32 {
                    let v = (i * 7 + m as u32) % n;
                    let was_departed = departed.load(Ordering::Acquire);
                    out.clear();
                    let r = w.k_hop(
                        v,
                        2,
                        4,
                        HopReads::Pipelined,
                        KhopLimits::default(),
                        &mut out,
                    );
                    let needs_gone = home_of(v, MACHINES) == gone
                        || model[&v]
                            .iter()
                            .take(4)
                            .any(|&u| home_of(u, MACHINES) == gone);
                    if r.is_ok() {
                        assert_eq!(
                            out,
                            two_hop_ref(&model, v, 4),
                            "machine {m}: k_hop({v}, 2 hops, one at a time)"
                        );
                        assert!(
                            !(was_departed && needs_gone),
                            "machine {m}: read a departed machine"
                        );
                    } else {
                        assert!(is_gone(&r, gone), "machine {m}: {r:?}");
                        assert!(
                            needs_gone,
                            "machine {m}: k_hop({v}, 2 hops, one at a time) = {r:?}"
                        );
                        failed += 1;
                    }
                    after += was_departed as u32;
                    if after >= 200 {
                        break;
                    }
                }
                assert!(after >= 200, "machine {m}: the departure was never seen");
                failed
            }));
        }
        // Let the readers get going before the node goes.
        std::thread::sleep(Duration::from_millis(20));
    }
    let started = Instant::now();
    let kept = match how {
        Departure::ShutdownUnderLoad => {
            gone_store.fabric().shutdown();
            Some((gone_store, gone_worker))
        }
        Departure::Drop => {
            drop(gone_worker);
            drop(gone_store);
            None
        }
    };
    departed.store(true, Ordering::Release);
    let mut updated = Vec::new();
    let mut survivors = Vec::new();
    for w in ws {
        let model = Arc::clone(&model);
        let me = w.machine();
        survivors.push((
            me,
            std::thread::spawn(move || {
                let mut w = w;
                let v = survivor_checks(&mut w, &model, n, gone);
                (w, v)
            }),
        ));
    }
    let mut ws = Vec::new();
    for (me, h) in survivors {
        let (w, v) = bounded(&format!("machine {me}'s checks"), move || h.join().unwrap());
        updated.push(v);
        ws.push(w);
    }
    for (m, h) in readers.into_iter().enumerate() {
        let failed = bounded(&format!("machine {m}'s reader"), move || h.join().unwrap());
        assert!(failed > 0, "machine {m}'s reader saw the departure");
    }
    // Survivors see each other's updates made after the departure.
    let mut out = Vec::new();
    for w in &mut ws {
        for &v in &updated {
            out.clear();
            w.neighbors(v, usize::MAX, &mut out).unwrap();
            assert!(
                out.contains(&(n + home_of(v, MACHINES) as u32)),
                "vertex {v}"
            );
        }
    }
    eprintln!(
        "{how:?}: survivors done {:?} after the departure",
        started.elapsed()
    );
    drop(kept);
}

#[test]
fn a_node_that_shuts_down_fails_operations_that_need_it() {
    departure(Departure::ShutdownUnderLoad);
}

#[test]
fn a_node_that_is_dropped_fails_operations_that_need_it() {
    departure(Departure::Drop);
}

/// A TCP relay in front of a node that can be frozen: it then keeps every
/// connection open, and still accepts new ones, but passes no byte on, as a
/// node that is stuck (not dead) would. Its threads end once released.
struct Relay {
    addr: SocketAddr,
    frozen: Arc<AtomicBool>,
    released: Arc<AtomicBool>,
}

impl Relay {
    fn start(to: SocketAddr) -> Relay {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = listener.local_addr().unwrap();
        let frozen = Arc::new(AtomicBool::new(false));
        let released = Arc::new(AtomicBool::new(false));
        let (f, r) = (Arc::clone(&frozen), Arc::clone(&released));
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if r.load(Ordering::Acquire) {
                    return;
                }
                let (Ok(client), Ok(node)) = (client, TcpStream::connect(to)) else {
                    continue;
                };
                let pairs = [
                    (client.try_clone().unwrap(), node.try_clone().unwrap()),
                    (node, client),
                ];
                for (from, into) in pairs {
                    let (f, r) = (Arc::clone(&f), Arc::clone(&r));
                    std::thread::spawn(move || pump(from, into, &f, &r));
                }
            }
        });
        Relay {
            addr,
            frozen,
            released,
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.released.store(true, Ordering::Release);
        // Wake the accept loop so that it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

/// Copies bytes until either side closes; while frozen, drops them and holds on.
fn pump(mut from: TcpStream, mut into: TcpStream, frozen: &AtomicBool, released: &AtomicBool) {
    let _ = from.set_read_timeout(Some(Duration::from_millis(20)));
    let mut buf = vec![0u8; 64 << 10];
    while !released.load(Ordering::Acquire) {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(_) => break,
        };
        if !frozen.load(Ordering::Acquire) && into.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = into.shutdown(Shutdown::Write);
}

#[test]
fn a_stuck_node_fails_operations_after_the_io_timeout_then_recovers() {
    let csr = graph();
    let model = Arc::new(model_of(&csr));
    let n = csr.vertex_count() as u32;
    let stuck = (MACHINES - 1) as MachineId;
    // Bind every node first; the others reach the stuck one through the relay.
    let listeners: Vec<TcpListener> = (0..MACHINES)
        .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap())
        .collect();
    let mut peers: Vec<SocketAddr> = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
    let relay = Relay::start(peers[stuck as usize]);
    peers[stuck as usize] = relay.addr;
    let nodes = listeners
        .into_iter()
        .enumerate()
        .map(|(m, l)| {
            let config = TcpConfig {
                io_timeout_ms: SHORT_TIMEOUT_MS,
                connect_timeout_ms: SHORT_TIMEOUT_MS,
                ..TcpConfig::new(vec![m as MachineId], peers.clone())
            };
            TcpFabric::from_listener(config, l).unwrap()
        })
        .collect();
    let stores = stores_on(nodes);
    let mut ws = workers(&stores);
    load(&stores, &mut ws, &csr);
    let on_stuck = (0..n).find(|&v| home_of(v, MACHINES) == stuck).unwrap();
    assert_eq!(
        ws[0].get(on_stuck).unwrap().as_ref(),
        Some(&model[&on_stuck])
    );
    relay.frozen.store(true, Ordering::Release);
    let started = Instant::now();
    // Each survivor: operations through the stuck node fail once the io
    // timeout passes (no answer comes), the rest keep working.
    let mut checks = Vec::new();
    for mut w in ws.drain(..stuck as usize) {
        let model = Arc::clone(&model);
        let me = w.machine();
        let h = std::thread::spawn(move || {
            let mut out = Vec::new();
            let r = w.get(on_stuck);
            assert!(is_gone(&r, stuck), "machine {me}: get({on_stuck}) = {r:?}");
            let v = (0..n)
                .find(|&v| {
                    home_of(v, MACHINES) == me
                        && model[&v].iter().any(|&u| home_of(u, MACHINES) == stuck)
                })
                .unwrap();
            let r = w.k_hop(
                v,
                2,
                usize::MAX,
                HopReads::Pipelined,
                KhopLimits::default(),
                &mut out,
            );
            assert!(
                is_gone(&r, stuck),
                "machine {me}: k_hop({v}, 2 hops, pipelined) = {r:?}"
            );
            for v in (0..n).filter(|&v| home_of(v, MACHINES) != stuck) {
                assert_eq!(
                    w.get(v).unwrap().as_ref(),
                    Some(&model[&v]),
                    "machine {me}: get({v})"
                );
            }
            w
        });
        checks.push((me, h));
    }
    let mut ws: Vec<_> = checks
        .into_iter()
        .map(|(me, h)| bounded(&format!("machine {me}'s checks"), move || h.join().unwrap()))
        .collect();
    eprintln!(
        "stuck node: survivors done {:?} after the freeze",
        started.elapsed()
    );
    // The node answers again: the next operation reconnects and succeeds.
    relay.frozen.store(false, Ordering::Release);
    for w in &mut ws {
        let me = w.machine();
        assert_eq!(
            w.get(on_stuck).unwrap().as_ref(),
            Some(&model[&on_stuck]),
            "machine {me} after the node recovered"
        );
    }
}
