//! Slot moves between running servers (issue 59, `locus_server::moves`):
//! three servers over loopback TCP with `[durability]` and a real etcd, a
//! writer inserting unique edges and readers checking every acknowledged
//! insert while batches of slots move from server to server; then every
//! server restarts from its log and everything acknowledged is still there,
//! homed where etcd's table says. A batch given up before its commit is
//! rolled back (its old home takes back what it handed over), and one left
//! in flight by a driver that died is settled by the next run.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use locus_client::proto::{MoveStep, Reply, Request};
use locus_client::{Client, ClientConfig};
use locus_fabric::auth::Secret;
use locus_membership::{Etcd, Membership};
use locus_server::config::{DurabilitySection, EtcdSection};
use locus_server::moves::Mover;
use locus_server::{ClusterFile, Server};

const SECRET: &str = "slot moves test secret";
const SLOTS: u32 = 32;
const VERTICES: u32 = 400;
/// Neighbours of the setup's lists (over 16: several parts each).
const DEGREE: u32 = 40;
/// The first vertex the creator makes.
const NEW_VERTICES: u32 = 10_000;

/// `checkpoint_s`: how often each server checkpoints (an hour: a restart
/// replays the whole log, SLOT_IN and SLOT_OUT records included).
fn cluster_file(
    etcd: &Etcd,
    dir: &std::path::Path,
    prefix: &str,
    checkpoint_s: u64,
) -> ClusterFile {
    let mut f = common::small_cluster(SECRET, 3);
    f.etcd = Some(EtcdSection {
        endpoints: vec![etcd.endpoint()],
        prefix: prefix.into(),
        lease_ttl_s: 2,
    });
    f.durability = Some(DurabilitySection {
        dir: dir.join("data"),
        sync: "always".into(),
        checkpoint_interval_s: checkpoint_s,
        ..DurabilitySection::default()
    });
    f.store.slots = Some(SLOTS);
    f.store.part_neighbors_max = 16;
    f.validate().unwrap();
    f
}

/// etcd, a directory, three servers started on them, and every vertex put
/// with its initial list.
fn setup(prefix: &str, checkpoint_s: u64) -> (Etcd, tempfile::TempDir, ClusterFile, Vec<Server>) {
    let etcd = Etcd::start_temp().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = cluster_file(&etcd, dir.path(), prefix, checkpoint_s);
    let servers = start(&file);
    let c = client(&file);
    for v in 0..VERTICES {
        c.put(v, &initial(v)).unwrap();
    }
    (etcd, dir, file, servers)
}

fn membership(file: &ClusterFile) -> Membership {
    Membership::connect(&file.etcd.as_ref().unwrap().config()).unwrap()
}

fn start(file: &ClusterFile) -> Vec<Server> {
    let hs: Vec<_> = (0..3u8)
        .map(|id| {
            let f = file.clone();
            std::thread::spawn(move || Server::start(f, id).unwrap())
        })
        .collect();
    hs.into_iter().map(|h| h.join().unwrap()).collect()
}

fn client(file: &ClusterFile) -> Client {
    Client::new(
        file.servers.iter().map(|s| s.client).collect(),
        ClientConfig {
            secret: Some(Secret::new(SECRET).unwrap()),
            deadline: Duration::from_secs(30),
            ..ClientConfig::default()
        },
    )
    .unwrap()
}

fn initial(v: u32) -> Vec<u32> {
    (0..DEGREE).map(|i| (v + i + 1) % VERTICES).collect()
}

/// The edges each vertex must have: its initial list and every insert
/// acknowledged so far.
type Acked = Arc<Mutex<HashMap<u32, Vec<u32>>>>;

fn check_all(c: &Client, acked: &Acked, what: &str) {
    let acked = acked.lock().unwrap().clone();
    for v in 0..VERTICES {
        let got: HashSet<u32> = c
            .neighbors(v, 0)
            .unwrap_or_else(|e| panic!("{what}: vertex {v}: {e}"))
            .into_iter()
            .collect();
        for u in initial(v).iter().chain(acked.get(&v).into_iter().flatten()) {
            assert!(got.contains(u), "{what}: vertex {v} lost its edge to {u}");
        }
    }
}

#[test]
fn slots_move_between_servers_under_writes_and_survive_a_restart() {
    let (_etcd, _dir, file, servers) = setup("/slot-moves", 3600);
    let (c, m) = (client(&file), membership(&file));

    // A writer inserts unique edges; readers check that every insert
    // acknowledged before their read began is there.
    let acked: Acked = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let failed = Arc::new(AtomicU64::new(0));
    let writer = {
        let (c, acked, stop, failed) = (client(&file), acked.clone(), stop.clone(), failed.clone());
        std::thread::spawn(move || {
            let mut i = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let v = (i * 7919) % VERTICES;
                let u = 1_000_000 + i;
                match c.insert_edge(v, u) {
                    Ok(true) => acked.lock().unwrap().entry(v).or_default().push(u),
                    Ok(false) => panic!("a unique edge {v}->{u} was already there"),
                    // Slower, never wrong: a failed insert is not acknowledged.
                    Err(_) => {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
                i += 1;
            }
            c.routing()
        })
    };
    // A creator puts new vertices (keys that did not exist when the move
    // listed its batch: the guard keeps them from being made at the old home).
    let created: Arc<Mutex<Vec<u32>>> = Arc::default();
    let creator = {
        let (c, created, stop, failed) =
            (client(&file), created.clone(), stop.clone(), failed.clone());
        std::thread::spawn(move || {
            let mut v = NEW_VERTICES;
            while !stop.load(Ordering::Relaxed) {
                match c.put(v, &[v + 1, v + 2]) {
                    Ok(()) => created.lock().unwrap().push(v),
                    Err(_) => {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
                v += 1;
            }
        })
    };
    let reader = {
        let (c, acked, stop, failed) = (client(&file), acked.clone(), stop.clone(), failed.clone());
        std::thread::spawn(move || {
            let mut reads = 0u64;
            let mut v = 0u32;
            while !stop.load(Ordering::Relaxed) {
                v = (v + 13) % VERTICES;
                let must: Vec<u32> = acked.lock().unwrap().get(&v).cloned().unwrap_or_default();
                match c.neighbors(v, 0) {
                    Ok(got) => {
                        let got: HashSet<u32> = got.into_iter().collect();
                        for u in initial(v).iter().chain(&must) {
                            assert!(got.contains(u), "a read of {v} during moves misses {u}");
                        }
                        reads += 1;
                    }
                    Err(_) => {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            reads
        })
    };

    let mover = Mover::new(&c, &m);
    // Every slot of servers 0 and 1 with an even number to server 2, four
    // at a time; then half of them on to server 0.
    let (_, t0) = mover.table().unwrap();
    let away: Vec<u32> = (0..SLOTS)
        .filter(|&s| s % 2 == 0 && t0.owner_of_slot(s) != Some(2))
        .collect();
    let mut seen = Vec::new();
    let done = mover
        .move_slots(&away, 2, 4, &mut |d, t| seen.push((d, t)))
        .unwrap();
    assert_eq!(done.slots, away.len() as u64);
    assert!(
        done.keys > 0 && done.vertices > 0 && done.bytes > 0,
        "{done:?}"
    );
    assert_eq!(seen.last(), Some(&(away.len() as u64, away.len() as u64)));
    let back: Vec<u32> = away.iter().copied().filter(|s| s % 4 == 0).collect();
    mover.move_slots(&back, 0, 2, &mut |_, _| {}).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let routing = writer.join().unwrap();
    creator.join().unwrap();
    let reads = reader.join().unwrap();
    assert!(reads > 0);
    eprintln!(
        "moves: {done:?}; writer {routing:?}; {reads} reads checked; {} failed operations",
        failed.load(Ordering::Relaxed)
    );

    // etcd's table says where every slot went, and every server holds it.
    let (_, t) = mover.table().unwrap();
    assert_eq!(
        t.epoch(),
        t0.epoch() + done.batches + back.len().div_ceil(2) as u64
    );
    for s in 0..SLOTS {
        let want = if back.contains(&s) {
            0
        } else if away.contains(&s) {
            2
        } else {
            t0.owner_of_slot(s).unwrap()
        };
        assert_eq!(t.owner_of_slot(s), Some(want), "slot {s}");
    }
    for s in &servers {
        assert_eq!(s.store().homes().table(), t);
    }
    check_all(&c, &acked, "after the moves");
    let created = created.lock().unwrap().clone();
    assert!(!created.is_empty());
    let check_created = |c: &Client, what: &str| {
        for &v in &created {
            assert_eq!(
                c.neighbors(v, 0)
                    .unwrap_or_else(|e| panic!("{what}: created vertex {v}: {e}")),
                vec![v + 1, v + 2],
                "{what}: vertex {v}"
            );
        }
    };
    check_created(&c, "after the moves");

    // Every server restarts from its log (and checkpoints) alone (the
    // client goes first: its connections hold the servers' logs open).
    drop(c);
    for s in servers {
        s.stop();
    }
    let servers = start(&file);
    let c = client(&file);
    check_all(&c, &acked, "after a restart of every server");
    check_created(&c, "after a restart of every server");
    for v in 0..VERTICES {
        assert_eq!(c.locate(v).unwrap().home, t.owner_of(v), "vertex {v}");
    }
    drop(c);
    for s in servers {
        s.stop();
    }
}

fn step(c: &Client, id: u8, step: MoveStep, peer: u8, slots: &[u32], keys: Vec<u64>) -> Reply {
    c.call(
        id,
        &Request::Move {
            step,
            peer,
            slots: slots.to_vec(),
            table: Vec::new(),
            keys,
        },
        None,
    )
    .unwrap()
}

/// A driver's first two steps: GUARD of `slots` at `a`, TAKE at `b`, every
/// key GUARD listed taken. Returns those keys.
fn guard_and_take(c: &Client, a: u8, b: u8, slots: &[u32]) -> Vec<u64> {
    let Reply::Move(g) = step(c, a, MoveStep::Guard, b, slots, Vec::new()) else {
        panic!("guard")
    };
    let Reply::Move(r) = step(c, b, MoveStep::Take, a, slots, g.listed.clone()) else {
        panic!("take")
    };
    assert_eq!(r.keys as usize, g.listed.len());
    g.listed
}

#[test]
fn a_batch_left_in_flight_is_rolled_back_by_the_next_run() {
    let (_etcd, _dir, file, servers) = setup("/slot-moves-rollback", 1);
    let (c, m) = (client(&file), membership(&file));
    let mover = Mover::new(&c, &m);
    let (_, t0) = mover.table().unwrap();
    // A driver guards slot 0 at its owner, has it taken over at server 2,
    // and dies before the commit.
    let a = t0.owner_of_slot(0).unwrap();
    assert_ne!(a, 2);
    assert!(!guard_and_take(&c, a, 2, &[0]).is_empty());
    // Meanwhile: reads of the slot's vertices are answered (from server 2's
    // copy, which no update can change while A guards the slot), updates
    // are refused, naming the new home (the client gives up after its
    // bounded retries, since nothing commits).
    let v0 = (0..VERTICES).find(|&v| v % SLOTS == 0).unwrap();
    let want: HashSet<u32> = initial(v0).into_iter().collect();
    let got: HashSet<u32> = c.neighbors(v0, 0).unwrap().into_iter().collect();
    assert_eq!(got, want);
    let e = c.insert_edge(v0, 999_999).unwrap_err();
    assert!(
        e.to_string().contains("WRONG_HOME") || e.to_string().contains("wrong"),
        "{e}"
    );
    // The next run settles it: server 2 hands every key back, A serves again.
    assert_eq!(mover.settle().unwrap(), 1);
    let Reply::Move(st) = step(&c, a, MoveStep::Status, 0, &[], Vec::new()) else {
        panic!("status")
    };
    assert!(st.in_flight.is_empty(), "{:?}", st.in_flight);
    assert!(c.insert_edge(v0, 999_999).unwrap());
    check_all(
        &c,
        &Arc::new(Mutex::new(HashMap::from([(v0, vec![999_999])]))),
        "after the rollback",
    );
    assert_eq!(mover.table().unwrap().1, t0, "nothing committed");
    // And the rolled-back batch is gone from server 2's log: a restart of
    // every server serves the same, from the old homes.
    drop(c);
    for s in servers {
        s.stop();
    }
    let servers = start(&file);
    let c = client(&file);
    check_all(
        &c,
        &Arc::new(Mutex::new(HashMap::from([(v0, vec![999_999])]))),
        "after a restart",
    );
    assert_eq!(c.locate(v0).unwrap().home, a);
    drop(c);
    for s in servers {
        s.stop();
    }
}

#[test]
fn a_new_home_that_dies_before_the_commit_leaves_the_old_home_serving() {
    let (_etcd, _dir, file, mut servers) = setup("/slot-moves-b-dies", 3600);
    let (c, m) = (client(&file), membership(&file));
    let mover = Mover::new(&c, &m);
    let (_, t0) = mover.table().unwrap();
    let a = t0.owner_of_slot(0).unwrap();
    assert!(!guard_and_take(&c, a, 2, &[0]).is_empty());
    // Server 2 dies holding the only copies of the slot's keys (A's words
    // say MOVED(2)). Its lease ends; A puts them back from its own log
    // (design M1), so the slot reads right while server 2 is down.
    servers.pop().unwrap().stop();
    let v0 = (0..VERTICES).find(|&v| v % SLOTS == 0).unwrap();
    let t = std::time::Instant::now();
    let got = loop {
        match c.neighbors(v0, 0) {
            Ok(l) => break l,
            Err(e) if t.elapsed() < Duration::from_secs(30) => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("vertex {v0} unreadable 30 s after server 2 died: {e}"),
        }
    };
    assert_eq!(got, initial(v0));
    // The next run rolls the batch back at A (server 2 forgets it at its
    // restart: its replay drops the slots it does not own).
    assert_eq!(mover.settle().unwrap(), 1);
    assert!(c.insert_edge(v0, 999_999).unwrap());
    let restarted = Server::start(file.clone(), 2).unwrap();
    let acked = Arc::new(Mutex::new(HashMap::from([(v0, vec![999_999])])));
    check_all(&c, &acked, "after server 2 came back");
    assert_eq!(c.locate(v0).unwrap().home, a);
    assert_eq!(mover.table().unwrap().1, t0, "nothing committed");
    drop(c);
    restarted.stop();
    for s in servers {
        s.stop();
    }
}

/// Design V1-V5 over TCP: once the old home A has handed a batch (HANDED
/// logged) and the new home B serves it (SERVE logged), B takes the
/// batch's updates before the table names it (the client finds B by the
/// migration index in A's SLOTS reply), creations wait for the commit,
/// both survive a restart of every server (A's replay makes markers, B's
/// keeps its copies and writes), and the next run of the mover commits it.
#[test]
fn a_handed_batch_is_served_by_its_new_home_before_the_commit_and_through_restarts() {
    let (_etcd, _dir, file, servers) = setup("/slot-moves-handed", 3600);
    let (c, m) = (client(&file), membership(&file));
    let mover = Mover::new(&c, &m);
    let (_, t0) = mover.table().unwrap();
    let a = t0.owner_of_slot(0).unwrap();
    assert_ne!(a, 2);
    guard_and_take(&c, a, 2, &[0]);
    let Reply::Move(h) = step(&c, a, MoveStep::Hand, 2, &[0], Vec::new()) else {
        panic!("hand")
    };
    assert!(h
        .in_flight
        .iter()
        .any(|f| f.slot == 0 && f.leaving && f.handed));
    let Reply::Move(s) = step(&c, 2, MoveStep::Serve, a, &[0], Vec::new()) else {
        panic!("serve")
    };
    assert!(s
        .in_flight
        .iter()
        .any(|f| f.slot == 0 && !f.leaving && f.handed));
    // Server 2 takes the slot's updates; the table still names A.
    let v0 = (0..VERTICES).find(|&v| v % SLOTS == 0).unwrap();
    assert!(c.insert_edge(v0, 999_999).unwrap());
    assert!(c.routing().hinted >= 1, "{:?}", c.routing());
    assert_eq!(mover.table().unwrap().1, t0, "nothing committed yet");
    assert_eq!(
        c.slot_table().unwrap().owner_of(v0),
        a,
        "the table still names A"
    );
    assert_eq!(
        c.locate(v0).unwrap().home,
        2,
        "A answers WHERE with the home serving it"
    );
    // A vertex of the slot that does not exist yet is not created before
    // the commit (V3): refused at both, after the client's bounded retries.
    let new = (NEW_VERTICES..).find(|&v| v % SLOTS == 0).unwrap();
    let e = c.insert_edge(new, 1).unwrap_err();
    assert!(e.to_string().contains("WRONG_HOME"), "{e}");
    // Every server restarts from its log: A's replay of HANDED makes
    // markers naming 2, 2's replay keeps its copies and the insert.
    drop(c);
    for s in servers {
        s.stop();
    }
    let servers = start(&file);
    let c = client(&file);
    // Until every server has seen the others' new incarnations (A's
    // markers send its reads of the slot to server 2).
    let t = std::time::Instant::now();
    while let Err(e) = c.neighbors(v0, 0) {
        assert!(t.elapsed() < Duration::from_secs(30), "vertex {v0}: {e}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut acked = HashMap::from([(v0, vec![999_999])]);
    check_all(
        &c,
        &Arc::new(Mutex::new(acked.clone())),
        "after a restart, handed",
    );
    // A server that is neither reads by the table: A's bucket, where A's
    // replay put a MOVED(2) marker (V5), sends it on to server 2.
    let third = (0..3u8).find(|&s| s != a && s != 2).unwrap();
    // It too may not have seen A's new incarnation yet (its watch is its
    // own): PEER_UNAVAILABLE until it has.
    let t = std::time::Instant::now();
    let l = loop {
        match c.call(third, &Request::Neighbors { vertex: v0, k: 0 }, None) {
            Ok(Reply::Neighbors(l)) => break l,
            Ok(r) => panic!("neighbors: {r:?}"),
            Err(e) => {
                assert!(
                    t.elapsed() < Duration::from_secs(30) && e.to_string().contains("unavailable"),
                    "read at server {third}: {e}"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    };
    assert!(l.contains(&999_999), "read at server {third}: {l:?}");
    assert!(
        c.insert_edge(v0, 999_998).unwrap(),
        "served by 2 after its restart"
    );
    acked.get_mut(&v0).unwrap().push(999_998);
    // The next run rolls the handed batch forward: committed, installed.
    let mover = Mover::new(&c, &m);
    assert!(mover.settle().unwrap() >= 1);
    assert_eq!(mover.table().unwrap().1.owner_of_slot(0), Some(2));
    assert_eq!(c.locate(v0).unwrap().home, 2);
    assert!(
        c.insert_edge(new, 1).unwrap(),
        "created once the table names 2"
    );
    let acked = Arc::new(Mutex::new(acked));
    check_all(&c, &acked, "after the commit");
    drop(c);
    for s in servers {
        s.stop();
    }
    let servers = start(&file);
    let c = client(&file);
    check_all(&c, &acked, "after a second restart");
    assert_eq!(c.neighbors(new, 0).unwrap(), vec![1]);
    drop(c);
    for s in servers {
        s.stop();
    }
}

/// MV1-MV3 over TCP (docs/design.md "One mover at a time"): a driver dies
/// holding the mover's lock with two batches in flight, one not handed
/// (slot 0) and one handed (slot 1). The coordinator leaves them alone
/// while the lock lives (and so must another driver); once the dead
/// driver's lease ends it rolls the first back and the second forward, and
/// every acknowledged write reads back.
#[test]
fn the_coordinator_settles_what_a_dead_driver_left() {
    let (_etcd, dir, mut file, servers) = setup("/slot-moves-settler", 3600);
    file.coordinator = Some(locus_server::config::CoordinatorEntry {
        control: common::free(),
        metrics: None,
        record: dir.path().join("coordinator.redb"),
    });
    let (c, m) = (client(&file), membership(&file));
    let mover = Mover::new(&c, &m);
    let (_, t0) = mover.table().unwrap();
    let driver = m.mover_acquire("a driver about to die").unwrap();
    let (a0, a1) = (t0.owner_of_slot(0).unwrap(), t0.owner_of_slot(1).unwrap());
    let (b0, b1) = ((a0 + 1) % 3, (a1 + 1) % 3);
    guard_and_take(&c, a0, b0, &[0]);
    let listed1 = guard_and_take(&c, a1, b1, &[1]);
    let Reply::Move(_) = step(&c, a1, MoveStep::Hand, b1, &[1], listed1) else {
        panic!("hand")
    };
    let coordinator = locus_server::CoordinatorProcess::start(file.clone()).unwrap();
    let in_flight = || {
        mover
            .in_flight()
            .into_iter()
            .filter_map(|(_, f)| f)
            .map(|f| f.len())
            .sum::<usize>()
    };
    // MV1: the lock lives, so the batches are its holder's (the settler
    // looks every 2 s, at once first).
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(in_flight(), 4, "two slots, each at A and at B");
    let busy = mover.settle().unwrap_err().to_string();
    assert!(busy.contains("a driver about to die"), "{busy}");
    // The driver is killed: its lease ends after the TTL (2 s), and MV3.
    driver.stop_renewing();
    let t = std::time::Instant::now();
    while in_flight() > 0 {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "still in flight 30 s after the driver died: {:?}",
            mover.in_flight()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (_, t1) = mover.table().unwrap();
    assert_eq!(t1.owner_of_slot(0), Some(a0), "not handed: rolled back");
    assert_eq!(t1.owner_of_slot(1), Some(b1), "handed: rolled forward");
    let v0 = (0..VERTICES).find(|&v| v % SLOTS == 0).unwrap();
    let v1 = (0..VERTICES).find(|&v| v % SLOTS == 1).unwrap();
    assert!(c.insert_edge(v0, 999_990).unwrap());
    assert!(c.insert_edge(v1, 999_991).unwrap());
    let acked = Arc::new(Mutex::new(HashMap::from([
        (v0, vec![999_990]),
        (v1, vec![999_991]),
    ])));
    check_all(&c, &acked, "after the coordinator settled");
    assert_eq!(c.locate(v1).unwrap().home, b1);
    drop(driver);
    coordinator.stop();
    drop(c);
    for s in servers {
        s.stop();
    }
}

/// A server that missed an install (its driver died after the commit,
/// having installed the table on the batch's two servers only) holds an
/// older table than etcd's; the next batch that involves it is judged by
/// etcd's, which the mover installs at both ends first (fault lab seed
/// 6104: a rejoined server refused a join's batches by its older table).
#[test]
fn a_server_that_missed_an_install_takes_a_batch_by_the_committed_table() {
    let (_etcd, _dir, file, servers) = setup("/slot-moves-missed-install", 3600);
    let (c, m) = (client(&file), membership(&file));
    let mover = Mover::new(&c, &m);
    let (raw0, t0) = mover.table().unwrap();
    let (a, b) = (0u8, 1u8);
    let slot = (0..SLOTS)
        .find(|&s| t0.owner_of_slot(s) == Some(a))
        .unwrap();
    // A driver moves `slot` from 0 to 1, commits, installs at 1 and 0, and dies.
    let listed = guard_and_take(&c, a, b, &[slot]);
    step(&c, a, MoveStep::Hand, b, &[slot], listed);
    step(&c, b, MoveStep::Serve, a, &[slot], Vec::new());
    let t1 = t0
        .after(&[locus_store::SlotMove {
            slot,
            from: a,
            to: b,
        }])
        .unwrap();
    let lock = m
        .mover_acquire("a driver that installs on two servers")
        .unwrap();
    assert!(m
        .slots_swap(&raw0, &t1.encode(), &[], Some(lock.token()))
        .unwrap());
    drop(lock);
    for id in [b, a] {
        let r = c
            .call(
                id,
                &Request::Move {
                    step: MoveStep::Install,
                    peer: 0,
                    slots: Vec::new(),
                    table: t1.encode(),
                    keys: Vec::new(),
                },
                None,
            )
            .unwrap();
        assert!(matches!(r, Reply::Move(_)), "{r:?}");
    }
    assert_eq!(servers[2].store().homes().table().epoch(), t0.epoch());
    // Moving the slot on to server 2, whose table still names server 0.
    let v = (0..VERTICES).find(|&v| v % SLOTS == slot).unwrap();
    let done = mover.move_slots(&[slot], 2, 1, &mut |_, _| {}).unwrap();
    assert_eq!(done.slots, 1);
    assert_eq!(c.locate(v).unwrap().home, 2);
    assert_eq!(c.neighbors(v, 0).unwrap(), initial(v));
    drop(c);
    for s in servers {
        s.stop();
    }
}

/// The stop-and-copy baseline of `locus bench elastic`: a mover whose new
/// homes serve a batch only once the table names them commits the same
/// batches, and everything reads back at the new home.
#[test]
fn a_stop_and_copy_mover_commits_batches_served_only_after_the_commit() {
    let (_etcd, _dir, file, servers) = setup("/slot-moves-stop-and-copy", 3600);
    let (c, m) = (client(&file), membership(&file));
    let mover = Mover::new(&c, &m).serve_early(false);
    let (_, t0) = mover.table().unwrap();
    let slots: Vec<u32> = (0..SLOTS)
        .filter(|&s| t0.owner_of_slot(s) != Some(2))
        .take(4)
        .collect();
    let done = mover.move_slots(&slots, 2, 2, &mut |_, _| {}).unwrap();
    assert_eq!((done.batches, done.slots), (2, 4));
    for (id, f) in mover.in_flight() {
        assert_eq!(f.map(|f| f.len()), Some(0), "server {id}");
    }
    let mut acked = HashMap::new();
    for v in (0..VERTICES).filter(|v| slots.contains(&(v % SLOTS))) {
        assert_eq!(c.locate(v).unwrap().home, 2);
        assert!(c.insert_edge(v, 999_000 + v).unwrap());
        acked.insert(v, vec![999_000 + v]);
    }
    check_all(
        &c,
        &Arc::new(Mutex::new(acked)),
        "after stop-and-copy moves",
    );
    drop(c);
    for s in servers {
        s.stop();
    }
}
