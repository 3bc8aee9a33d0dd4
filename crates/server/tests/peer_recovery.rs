//! Pragh 5 recovery with in-process servers over loopback TCP (issue 15,
//! fault tests (c) and (a)): a server is stopped, the survivors run
//! `peer_failed`, it restarts from its own write-ahead log, the survivors
//! run `peer_rejoined`. Every acknowledged write (a seeded client-side
//! history) must be readable through every server afterwards, queries on the
//! survivors must answer as the model says (so no stale cache entry or
//! replica serves), and what the dead server's keys left on the survivors
//! must be freed by the value-region scan.
//!
//! These run in process without etcd (the recovery calls are made by the
//! test); the same faults with real processes, etcd and epochs are in
//! `crates/cli/tests/durable_processes.rs` and `fault_bulk_load.rs`.

mod common;

use common::free;
use std::collections::{BTreeSet, HashMap};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use locus_client::proto::{ErrorCode, Reply, Request};
use locus_client::{Client, ClientConfig};
use locus_fabric::auth::Secret;
use locus_server::config::{ClusterSection, DurabilitySection, ServerEntry};
use locus_server::{ClusterFile, Server};
use locus_store::Key;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const SECRET: &str = "peer recovery test secret";
const MACHINES: u8 = 3;
const VERTICES: u32 = 300;
const LEASE_MS: u64 = 3_000;

fn cluster_file(dir: &std::path::Path) -> ClusterFile {
    let mut f = ClusterFile {
        cluster: ClusterSection {
            secret: Some(SECRET.into()),
            max_servers: None,
        },
        servers: (0..MACHINES)
            .map(|id| ServerEntry {
                id,
                fabric: free(),
                client: free(),
                metrics: None,
            })
            .collect(),
        coordinator: None,
        store: Default::default(),
        policy: Default::default(),
        limits: Default::default(),
        durability: Some(DurabilitySection {
            dir: dir.join("data"),
            sync: "always".into(),
            checkpoint_interval_s: 2,
            ..DurabilitySection::default()
        }),
        recovery: Default::default(),
        etcd: None,
        replication: Default::default(),
    };
    f.store.value_region_mb = Some(16);
    f.store.cache_mb = 4;
    f.store.part_neighbors_max = 8; // long lists become several parts
                                    // Long enough that survivors' cache entries outlive the test's checks
                                    // (a stale one would be seen), short enough for the scan to free.
    f.store.reclaim_lease_ms = LEASE_MS;
    f.store.cache_lease_ms = Some(LEASE_MS);
    f.policy.interval_ms = LEASE_MS;
    f.policy.dwell_ms = LEASE_MS;
    f.recovery.scan_interval_ms = 200;
    f.limits.fabric_io_timeout_ms = 2_000;
    f.validate().unwrap();
    f
}

fn start_one(file: &ClusterFile, id: u8) -> Server {
    Server::start(file.clone(), id).unwrap()
}

fn start(file: &ClusterFile) -> Vec<Option<Server>> {
    let handles: Vec<_> = (0..MACHINES)
        .map(|id| {
            let f = file.clone();
            std::thread::spawn(move || start_one(&f, id))
        })
        .collect();
    handles
        .into_iter()
        .map(|h| Some(h.join().unwrap()))
        .collect()
}

fn client(file: &ClusterFile) -> Client {
    Client::new(
        file.servers.iter().map(|s| s.client).collect(),
        ClientConfig {
            secret: Some(Secret::new(SECRET).unwrap()),
            ..ClientConfig::default()
        },
    )
    .unwrap()
}

fn stat(c: &Client, id: u8, path: &[&str]) -> u64 {
    let mut v = c.stats(id).unwrap();
    for p in path {
        v = v[*p].clone();
    }
    v.as_u64()
        .unwrap_or_else(|| panic!("stats {path:?} of {id}: {v}"))
}

/// The model: each vertex's acknowledged list, and for a vertex whose last
/// update failed, the list that update would have made (either may be read).
#[derive(Default, Clone)]
struct Model {
    acked: HashMap<u32, Vec<u32>>,
    unsure: HashMap<u32, Vec<u32>>,
}

impl Model {
    fn accepts(&self, v: u32, got: &[u32]) -> bool {
        self.acked.get(&v).map(|l| l.as_slice()) == Some(got)
            || self.unsure.get(&v).map(|l| l.as_slice()) == Some(got)
    }
}

/// One random update of `v`; applied to the model once acknowledged.
fn update(c: &Client, m: &mut Model, rng: &mut Xoshiro256PlusPlus, v: u32) -> bool {
    let cur = m.acked.get(&v).cloned().unwrap_or_default();
    let (new, r) = if rng.gen_bool(0.3) {
        let len = if rng.gen_bool(0.2) {
            20
        } else {
            rng.gen_range(0..6)
        };
        let l: Vec<u32> = (0..len).map(|_| rng.gen_range(0..VERTICES)).collect();
        (l.clone(), c.put(v, &l).map(|()| true))
    } else if rng.gen_bool(0.7) {
        let u = rng.gen_range(0..VERTICES);
        let mut l = cur.clone();
        if !l.contains(&u) {
            l.push(u);
        }
        let r = c.insert_edge(v, u);
        if let Ok(changed) = &r {
            assert_eq!(*changed, !cur.contains(&u), "insert {v} -> {u}");
        }
        (l, r)
    } else {
        let u = if cur.is_empty() {
            rng.gen_range(0..VERTICES)
        } else {
            cur[rng.gen_range(0..cur.len())]
        };
        let l: Vec<u32> = cur.iter().copied().filter(|&x| x != u).collect();
        let r = c.delete_edge(v, u);
        if let Ok(changed) = &r {
            assert_eq!(*changed, cur.contains(&u), "delete {v} -> {u}");
        }
        (l, r)
    };
    match r {
        Ok(_) => {
            m.acked.insert(v, new);
            m.unsure.remove(&v);
            true
        }
        Err(_) => {
            m.unsure.insert(v, new);
            false
        }
    }
}

fn load(c: &Client, m: &mut Model) {
    for home in 0..MACHINES {
        let batch: Vec<(u32, Vec<u32>)> = (0..VERTICES)
            .filter(|&v| c.home(v) == home)
            .map(|v| {
                let n = if v % 10 == 0 { 12 } else { 3 };
                (v, (1..=n).map(|i| (v * 7 + i * 13) % VERTICES).collect())
            })
            .collect();
        for (v, l) in &batch {
            m.acked.insert(*v, l.clone());
        }
        c.load_batch(home, batch, None).unwrap();
    }
}

/// Every vertex read through every server (`NEIGHBORS` sent to each one,
/// which reads it with its own worker, cache and replicas).
fn check_everywhere(c: &Client, m: &Model, when: &str) {
    for v in 0..VERTICES {
        for id in 0..MACHINES {
            match c.call(id, &Request::Neighbors { vertex: v, k: 0 }, None) {
                Ok(Reply::Neighbors(got)) => assert!(
                    m.accepts(v, &got),
                    "{when}: vertex {v} read through server {id} is {got:?}; acknowledged {:?}, unsure {:?}",
                    m.acked.get(&v),
                    m.unsure.get(&v)
                ),
                other => panic!("{when}: vertex {v} through server {id}: {other:?}"),
            }
        }
    }
}

/// 2-hop queries from every vertex homed on `on`, against the model (only
/// for starts whose two hops touch no unsure vertex).
fn check_queries(c: &Client, m: &Model, on: &[u8], when: &str) -> usize {
    let mut checked = 0;
    for v in (0..VERTICES).filter(|v| on.contains(&c.home(*v))) {
        let first = &m.acked[&v];
        if m.unsure.contains_key(&v) || first.iter().any(|u| m.unsure.contains_key(u)) {
            continue;
        }
        let want: BTreeSet<u32> = first
            .iter()
            .flat_map(|u| m.acked.get(u).into_iter().flatten().copied())
            .collect();
        let r = c.khop(v, 2, 1_000).unwrap();
        let got: BTreeSet<u32> = r.distinct.iter().copied().collect();
        assert_eq!(got, want, "{when}: 2-hop from {v} at server {}", c.home(v));
        checked += 1;
    }
    checked
}

/// Stops `victim` and asserts it is gone: its client port refuses.
fn stop(servers: &mut [Option<Server>], file: &ClusterFile, victim: u8) {
    servers[victim as usize].take().expect("running").stop();
    // A connection thread of a stopped server may still answer the one
    // request it was already reading (it checks the stop flag between
    // frames, every 250 ms): give those a moment to end, as a killed
    // process's would at once.
    std::thread::sleep(Duration::from_millis(600));
    let addr = file.servers[victim as usize].client;
    assert!(
        TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err(),
        "server {victim} still accepts clients at {addr} after its stop"
    );
}

/// Waits (bounded) until the survivors' scans freed at least `n` blocks in all.
fn wait_for_scan(c: &Client, survivors: &[u8], n: u64) -> u64 {
    let t0 = Instant::now();
    loop {
        let freed: u64 = survivors
            .iter()
            .map(|&id| stat(c, id, &["recovery", "scan_freed"]))
            .sum();
        if freed >= n {
            return freed;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the survivors' scans freed {freed} blocks in 60 s, expected {n}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn c_a_home_dies_while_its_values_live_on_survivors() {
    let seed = 0x15c;
    let victim: u8 = 2;
    let survivors = [0u8, 1];
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let file = cluster_file(dir.path());
    let mut servers = start(&file);
    let c = client(&file);
    let mut m = Model::default();
    load(&c, &mut m);
    for _ in 0..400 {
        let v = rng.gen_range(0..VERTICES);
        assert!(update(&c, &mut m, &mut rng, v), "no fault yet");
    }
    // A third of the victim's values move to the survivors.
    let mut away = 0u64;
    for v in (0..VERTICES).filter(|v| c.home(*v) == victim && (v / 3) % 3 == 0) {
        let to = survivors[(v as usize / 9) % 2];
        away += c.migrate(v, to).unwrap().parts as u64;
    }
    assert!(away > 0);
    // More updates, some of them of migrated values (applied at the survivor).
    for _ in 0..300 {
        let v = rng.gen_range(0..VERTICES);
        assert!(update(&c, &mut m, &mut rng, v), "no fault yet");
    }
    // Survivors cache the victim's keys (their queries read its vertices).
    let warm = check_queries(&c, &m, &survivors, "before the fault");
    assert!(warm > 0);
    check_everywhere(&c, &m, "before the fault");

    stop(&mut servers, &file, victim);
    // Operations touching it fail with an error naming it, and do not hang.
    // (One whose value it held: a survivor may still serve a value of the
    // dead home's that it holds itself, from its cache, which is right
    // until the home could update it again, after its restart.)
    let v = (0..VERTICES)
        .find(|v| c.home(*v) == victim && (v / 3) % 3 != 0)
        .unwrap();
    let t0 = Instant::now();
    let e = c.neighbors(v, 0).unwrap_err().to_string();
    assert!(
        e.contains(&file.servers[victim as usize].client.to_string()),
        "{e}"
    );
    let through = c.call(0, &Request::Neighbors { vertex: v, k: 0 }, None);
    match through {
        Err(e) => {
            assert_eq!(e.code(), Some(ErrorCode::PeerUnavailable), "{e}");
            assert!(e.to_string().contains("machine 2 is unavailable"), "{e}")
        }
        other => panic!("reading a dead home's vertex through server 0: {other:?}"),
    }
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());

    let t_fault = Instant::now();
    for &s in &survivors {
        let r = servers[s as usize]
            .as_ref()
            .unwrap()
            .peer_failed(victim, 0, &[])
            .unwrap();
        assert!(
            r.cache_entries > 0,
            "server {s} cached none of the victim's keys: {r:?}"
        );
        assert_eq!(
            r.keys_found, 0,
            "no survivor value lived on the victim: {r:?}"
        );
    }
    // While the victim is down the survivors' background scans cannot read
    // its table: their rounds abort and free nothing (RC4, S4).
    let t0 = Instant::now();
    while survivors
        .iter()
        .any(|&id| stat(&c, id, &["recovery", "scan_aborted"]) == 0)
    {
        assert!(t0.elapsed() < Duration::from_secs(30), "no scan round ran");
        std::thread::sleep(Duration::from_millis(50));
    }
    for &id in &survivors {
        assert_eq!(stat(&c, id, &["recovery", "scan_freed"]), 0, "server {id}");
    }
    // In process without etcd: the epoch is asserted by the real-process tests
    // (crates/cli/tests/durable_processes.rs, fault_bulk_load.rs).
    servers[victim as usize] = Some(start_one(&file, victim));
    for &s in &survivors {
        servers[s as usize]
            .as_ref()
            .unwrap()
            .peer_rejoined(victim, 1)
            .unwrap();
    }
    check_everywhere(&c, &m, &format!("after the restart (seed {seed:#x})"));
    // New updates of the victim's vertices: survivors must see them (a
    // stale cache entry would serve the old copy held on the survivor).
    for v in (0..VERTICES).filter(|v| c.home(*v) == victim) {
        assert!(update(&c, &mut m, &mut rng, v));
    }
    check_everywhere(&c, &m, &format!("after updates (seed {seed:#x})"));
    let q = check_queries(&c, &m, &survivors, "after the restart");
    assert!(q > 0);
    let recovered = t_fault.elapsed();
    let freed = wait_for_scan(&c, &survivors, away);
    println!(
        "(c) server {victim} stopped; survivors recovered, it restarted and every write of {VERTICES} vertices was read through all servers in {:.2} s; {freed} leaked blocks ({away} parts had been migrated away) freed by the scan after {:.2} s",
        recovered.as_secs_f64(),
        t_fault.elapsed().as_secs_f64()
    );
}

#[test]
fn a_a_migration_target_dies_in_a_migration_storm() {
    let seed = 0x15a;
    let victim: u8 = 1;
    let survivors = [0u8, 2];
    let dir = tempfile::tempdir().unwrap();
    let file = cluster_file(dir.path());
    let mut servers = start(&file);
    let c = client(&file);
    let mut m = Model::default();
    load(&c, &mut m);
    // Survivor-homed values the victim pulled, by key (the coordinator's
    // record, as the test keeps it: latest target of each migration).
    let recorded: Mutex<HashMap<u32, u8>> = Mutex::new(HashMap::new());
    let stop_storm = AtomicBool::new(false);
    let fault = AtomicBool::new(false);
    let model = Mutex::new(m);
    std::thread::scope(|s| {
        // The storm: random vertices pulled to random servers, the victim
        // taking half of them.
        for t in 0..2u64 {
            let c = client(&file);
            let (recorded, stop_storm) = (&recorded, &stop_storm);
            s.spawn(move || {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed + t);
                while !stop_storm.load(Ordering::Relaxed) {
                    let v = rng.gen_range(0..VERTICES);
                    let to = if rng.gen_bool(0.5) {
                        victim
                    } else {
                        rng.gen_range(0..MACHINES)
                    };
                    if c.migrate(v, to).is_ok() {
                        recorded.lock().unwrap().insert(v, to);
                    }
                }
            });
        }
        // A writer keeping the history of what was acknowledged.
        {
            let c = client(&file);
            let (model, stop_storm, fault) = (&model, &stop_storm, &fault);
            s.spawn(move || {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed * 31);
                let mut failed_after_fault = 0;
                while !stop_storm.load(Ordering::Relaxed) {
                    let v = rng.gen_range(0..VERTICES);
                    let mut m = model.lock().unwrap();
                    if m.unsure.contains_key(&v) {
                        continue; // its fate is open until recovery
                    }
                    if !update(&c, &mut m, &mut rng, v) {
                        assert!(
                            fault.load(Ordering::Relaxed),
                            "an update failed before the fault"
                        );
                        failed_after_fault += 1;
                    }
                }
                failed_after_fault
            });
        }
        std::thread::sleep(Duration::from_millis(1_500));
        fault.store(true, Ordering::Relaxed);
        stop(&mut servers, &file, victim);
        std::thread::sleep(Duration::from_millis(500));
        stop_storm.store(true, Ordering::Relaxed);
    });
    let mut m = model.into_inner().unwrap();
    let recorded: Vec<Key> = recorded
        .into_inner()
        .unwrap()
        .into_iter()
        .filter(|&(_, to)| to == victim)
        .map(|(v, _)| Key::part(v, 0))
        .collect();
    let t_fault = Instant::now();
    let mut reloaded = 0;
    for &s in &survivors {
        let r = servers[s as usize]
            .as_ref()
            .unwrap()
            .peer_failed(victim, 0, &recorded)
            .unwrap();
        println!("(a) server {s}: {r:?}");
        reloaded += r.vertices_reloaded;
        assert_eq!(r.keys_lost, 0, "with a log nothing is lost: {r:?}");
    }
    assert!(
        reloaded > 0,
        "the storm moved no survivor value to the victim"
    );
    // Before the victim is back: every survivor-homed vertex reads its
    // acknowledged list (or its failed update's) through both survivors,
    // and queries among survivor-homed vertices answer right.
    for v in (0..VERTICES).filter(|v| c.home(*v) != victim) {
        for &id in &survivors {
            match c.call(id, &Request::Neighbors { vertex: v, k: 0 }, None) {
                Ok(Reply::Neighbors(got)) => {
                    assert!(m.accepts(v, &got), "vertex {v} through {id}: {got:?}")
                }
                other => panic!("vertex {v} through {id} with the victim down: {other:?}"),
            }
        }
    }
    let during = t_fault.elapsed();
    // In process without etcd: the epoch is asserted by the real-process tests
    // (crates/cli/tests/durable_processes.rs, fault_bulk_load.rs).
    servers[victim as usize] = Some(start_one(&file, victim));
    for &s in &survivors {
        servers[s as usize]
            .as_ref()
            .unwrap()
            .peer_rejoined(victim, 1)
            .unwrap();
    }
    check_everywhere(&c, &m, &format!("after the restart (seed {seed:#x})"));
    // Settle the open updates, then queries on the survivors must answer right.
    let unsure: Vec<u32> = m.unsure.keys().copied().collect();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    for v in unsure {
        let l: Vec<u32> = vec![(v + 1) % VERTICES];
        c.put(v, &l).unwrap();
        m.acked.insert(v, l);
        m.unsure.remove(&v);
    }
    for v in 0..VERTICES {
        assert!(update(&c, &mut m, &mut rng, v));
    }
    check_everywhere(&c, &m, "after new updates");
    assert!(check_queries(&c, &m, &survivors, "after the restart") > 0);
    println!(
        "(a) server {victim} stopped mid-storm; survivors reloaded {reloaded} vertices and served theirs in {:.2} s; everything readable after its restart at {:.2} s",
        during.as_secs_f64(),
        t_fault.elapsed().as_secs_f64()
    );
}

#[test]
fn without_durability_a_value_lost_with_its_holder_is_an_error_never_absent() {
    let victim: u8 = 1;
    let dir = tempfile::tempdir().unwrap();
    let mut file = cluster_file(dir.path());
    file.durability = None;
    let mut servers = start(&file);
    let c = client(&file);
    // 3 and 6 are homed on server 0; 6's value moves to the victim.
    c.put(3, &[6]).unwrap();
    c.put(6, &[7, 8]).unwrap();
    assert_eq!(c.migrate(6, victim).unwrap().parts, 1);
    stop(&mut servers, &file, victim);
    let r = servers[0]
        .as_ref()
        .unwrap()
        .peer_failed(victim, 0, &[Key::part(6, 0)])
        .unwrap();
    assert_eq!(
        (r.keys_found, r.keys_lost, r.not_recorded),
        (1, 1, 0),
        "{r:?}"
    );
    for id in [0u8, 2] {
        let e = c
            .call(id, &Request::Neighbors { vertex: 6, k: 0 }, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("was lost with machine 1"), "through {id}: {e}");
    }
    let e = c.khop(3, 2, 10).unwrap_err().to_string();
    assert!(e.contains("was lost with machine 1"), "{e}");
    assert_eq!(c.neighbors(3, 0).unwrap(), vec![6]);
}
