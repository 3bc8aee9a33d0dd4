//! Servers with `[etcd]`, in one test process against a real etcd started by
//! the test (killed at its end): each incarnation registers at a strictly
//! higher epoch, survivors mark a stopped server down in their fabric epoch
//! table and see it rejoin at its new epoch (STATS `membership`), and data
//! moves between servers across the restart.

mod common;

use common::free;
use std::time::{Duration, Instant};

use locus_client::{Client, ClientConfig};
use locus_fabric::auth::Secret;
use locus_fabric::tcp::PeerEpoch;
use locus_membership::Etcd;
use locus_server::config::EtcdSection;
use locus_server::{ClusterFile, Server};

const SECRET: &str = "membership test secret";

fn cluster_file(etcd: &Etcd, machines: u8) -> ClusterFile {
    let mut f = common::small_cluster(SECRET, machines);
    f.etcd = Some(EtcdSection {
        endpoints: vec![etcd.endpoint()],
        prefix: "/membership-test".into(),
        lease_ttl_s: 2,
    });
    f.validate().unwrap();
    f
}

fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn peer(s: &Server, m: u8) -> PeerEpoch {
    s.store().fabric().inner().peer_epoch(m).unwrap()
}

#[test]
fn a_restarted_server_rejoins_at_a_higher_epoch_and_survivors_follow() {
    let etcd = Etcd::start_temp().unwrap();
    let file = cluster_file(&etcd, 3);
    let mut servers: Vec<Option<Server>> = {
        let hs: Vec<_> = (0..3u8)
            .map(|id| {
                let f = file.clone();
                std::thread::spawn(move || Server::start(f, id).unwrap())
            })
            .collect();
        hs.into_iter().map(|h| Some(h.join().unwrap())).collect()
    };
    for s in servers.iter().flatten() {
        assert_eq!(s.epoch(), 1);
    }
    let s0 = servers[0].as_ref().unwrap();
    wait_for(
        "server 0 knows every peer up at epoch 1",
        Duration::from_secs(20),
        // Up, not only at epoch 1: servers start at once, and one that
        // registers while a peer has reserved epoch 1 but not registered it
        // marks that peer down at 1 until the peer's PeerUp arrives.
        || {
            let up = PeerEpoch {
                epoch: 1,
                down: false,
            };
            peer(s0, 1) == up && peer(s0, 2) == up
        },
    );
    let client = Client::new(
        file.servers.iter().map(|s| s.client).collect(),
        ClientConfig {
            secret: Some(Secret::new(SECRET).unwrap()),
            ..ClientConfig::default()
        },
    )
    .unwrap();
    // A vertex homed on 0 whose value moves to 2.
    let v = (0..).find(|&v| client.home(v) == 0).unwrap();
    client.put(v, &[1, 2, 3]).unwrap();
    client.migrate(v, 2).unwrap();
    assert_eq!(client.neighbors(v, 10).unwrap(), vec![1, 2, 3]);

    // Server 2 stops (a clean stop revokes its lease at once).
    servers[2].take().unwrap().stop();
    wait_for(
        "survivors mark server 2 down at epoch 1",
        Duration::from_secs(20),
        || {
            [0, 1].iter().all(|&i| {
                peer(servers[i].as_ref().unwrap(), 2)
                    == PeerEpoch {
                        epoch: 1,
                        down: true,
                    }
            })
        },
    );
    // An operation that needs machine 2 fails at once, naming it: as
    // unavailable at epoch 1 until server 0's recovery has run, then (these
    // servers keep no log, so the value it held cannot be reloaded) as lost
    // with machine 2 (`recovery.rs`, F3). Never "absent", never a hang.
    let t0 = Instant::now();
    let e = client.neighbors(v, 10).unwrap_err().to_string();
    assert!(
        (e.contains("machine 2") && e.contains("epoch 1")) || e.contains("lost with machine 2"),
        "{e}"
    );
    assert!(
        t0.elapsed() < Duration::from_secs(4),
        "failed only after {:?}",
        t0.elapsed()
    );
    // The fabric may mark the peer down (a failed connection) before the
    // membership watch's event is handled: wait for the event.
    wait_for(
        "server 0 handles the PeerDown event of server 2",
        Duration::from_secs(20),
        || {
            let st = client.stats(0).unwrap();
            let m = &st["membership"];
            m["peer_down"].as_u64().unwrap_or(0) >= 1 && m["hook_calls"].as_u64().unwrap_or(0) >= 1
        },
    );
    let st = client.stats(0).unwrap();
    let m = &st["membership"];
    assert_eq!(m["epoch"], 1, "{m}");
    assert_eq!(m["peers"]["2"]["down"], true, "{m}");
    assert!(m["peer_down"].as_u64().unwrap() >= 1, "{m}");
    assert!(m["hook_calls"].as_u64().unwrap() >= 1, "{m}");
    let ev = m["events"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(ev["event"], "down");
    assert_eq!(ev["machine"], 2);
    assert_eq!(ev["epoch"], 1);

    // It comes back: a strictly higher epoch, and the survivors follow.
    let again = Server::start(file.clone(), 2).unwrap();
    assert_eq!(again.epoch(), 2);
    wait_for(
        "survivors see server 2 at epoch 2",
        Duration::from_secs(20),
        || {
            [0, 1].iter().all(|&i| {
                peer(servers[i].as_ref().unwrap(), 2)
                    == PeerEpoch {
                        epoch: 2,
                        down: false,
                    }
            })
        },
    );
    // The new incarnation serves, and survivors reach it at its new epoch.
    // (Its memory is new: `v`'s value, which lived in the old incarnation, is
    // recovery's business (issue 15 requirement 3, `recovery.rs`), so this
    // test uses vertices that never lived there.)
    let w = (0..).find(|&w| client.home(w) == 2).unwrap();
    client.put(w, &[7]).unwrap();
    assert_eq!(client.neighbors(w, 10).unwrap(), vec![7]);
    let u = (0..).find(|&u| client.home(u) == 1).unwrap();
    client.put(u, &[4, 5]).unwrap();
    client.migrate(u, 2).unwrap();
    assert_eq!(client.neighbors(u, 10).unwrap(), vec![4, 5]);
    client.migrate(u, 0).unwrap();
    assert_eq!(client.neighbors(u, 10).unwrap(), vec![4, 5]);
    assert_eq!(client.stats(2).unwrap()["membership"]["epoch"], 2);
    assert!(again.fenced().is_none());
    drop(again);
    drop(servers);
}

#[test]
fn bad_etcd_settings_name_their_key_and_a_dead_etcd_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cluster.toml");
    let write = |etcd: &str| {
        std::fs::write(
            &path,
            format!(
                "[[server]]\nid = 0\nfabric = \"127.0.0.1:0\"\nclient = \"127.0.0.1:0\"\n\n[etcd]\n{etcd}\n"
            ),
        )
        .unwrap();
    };
    for (etcd, key) in [
        ("endpoints = []", "etcd.endpoints"),
        ("endpoints = [\"127.0.0.1:2379\"]", "etcd.endpoints"),
        (
            "endpoints = [\"http://127.0.0.1:2379\"]\nprefix = \"locus\"",
            "etcd.prefix",
        ),
        (
            "endpoints = [\"http://127.0.0.1:2379\"]\nlease_ttl_s = 0",
            "etcd.lease_ttl_s",
        ),
        ("endpoints = [\"http://127.0.0.1:2379\"]\nttl = 3", "ttl"),
    ] {
        write(etcd);
        let e = ClusterFile::load(&path).unwrap_err().to_string();
        assert!(e.contains(key) && e.contains("cluster.toml"), "{etcd}: {e}");
    }
    // A valid section whose etcd is not running: the server does not start,
    // and says where it looked.
    let mut file = cluster_file(&Etcd::start_temp().unwrap(), 1);
    let dead = format!("http://{}", free());
    file.etcd.as_mut().unwrap().endpoints = vec![dead.clone()];
    let e = Server::start(file, 0)
        .err()
        .expect("no etcd, no start")
        .to_string();
    assert!(e.contains("membership") && e.contains(&dead), "{e}");
}

#[test]
fn the_slot_table_lives_in_etcd_and_a_file_of_another_shape_is_refused() {
    let etcd = Etcd::start_temp().unwrap();
    let mut file = cluster_file(&etcd, 2);
    file.etcd.as_mut().unwrap().prefix = "/slots-test".into();
    file.store.slots = Some(64);
    let servers: Vec<Server> = {
        let hs: Vec<_> = (0..2u8)
            .map(|id| {
                let f = file.clone();
                std::thread::spawn(move || Server::start(f, id).unwrap())
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    };
    // The first server put the table its file makes; both hold it.
    let m = locus_membership::Membership::connect(&file.etcd.as_ref().unwrap().config()).unwrap();
    let raw = m.slots_load().unwrap().expect("a table in etcd");
    let t = locus_store::SlotTable::decode(&raw).unwrap();
    assert_eq!((t.slots(), t.epoch(), t.counts()), (64, 1, vec![32, 32]));
    for s in &servers {
        assert_eq!(s.store().homes().table(), t);
    }
    // A restart reads the table from etcd, not from its file: a newer table
    // put there (slot 0 handed to server 1) is what the restarted server
    // places keys by.
    let next = t
        .after(&[locus_store::SlotMove {
            slot: 0,
            from: 0,
            to: 1,
        }])
        .unwrap();
    // A move's commit (a swap of the table) is refused if the table is not
    // the one expected, or a server of the move took a newer epoch (it
    // restarted) since the move read it.
    let e1 = m.last_epoch(1).unwrap();
    assert!(!m
        .slots_swap(&next.encode(), &next.encode(), &[], None)
        .unwrap());
    assert!(!m
        .slots_swap(&raw, &next.encode(), &[(1, e1 + 1)], None)
        .unwrap());
    // One mover at a time (MV1), and a commit only under its lock (MV2): a
    // second driver is refused naming the holder; a token that no longer
    // holds the lock commits nothing, the holder's does.
    let first = m.mover_acquire("first driver").unwrap();
    let busy = m.mover_acquire("second driver").unwrap_err().to_string();
    assert!(busy.contains(first.token()), "{busy}");
    let stale = first.token().to_string();
    drop(first);
    assert_eq!(
        m.mover_holder().unwrap(),
        None,
        "dropping the lock revokes it"
    );
    let held = m.mover_acquire("second driver").unwrap();
    assert_ne!(held.token(), stale);
    assert!(!m
        .slots_swap(&raw, &next.encode(), &[], Some(&stale))
        .unwrap());
    assert_eq!(m.slots_load().unwrap().unwrap(), raw, "nothing swapped");
    assert!(m
        .slots_swap(
            &raw,
            &next.encode(),
            &[(0, m.last_epoch(0).unwrap()), (1, e1)],
            Some(held.token())
        )
        .unwrap());
    drop(held);
    let mut servers = servers;
    servers.pop().unwrap().stop();
    let put = |bytes: Vec<u8>| {
        // Overwrite through a transaction-free put: the test plays the
        // coordinator that will own table changes.
        m.slots_replace_for_tests(&bytes).unwrap()
    };
    put(next.encode());
    let restarted = Server::start(file.clone(), 1).unwrap();
    assert_eq!(restarted.store().homes().table(), next);
    restarted.stop();
    // A file making another slot count is refused, naming both shapes.
    servers.pop().unwrap().stop();
    let mut other = file.clone();
    other.store.slots = Some(128);
    let e = Server::start(other, 0).err().expect("refused");
    let msg = e.to_string();
    assert!(
        msg.contains("64 slots") && msg.contains("128 slots") && msg.contains("[store] slots"),
        "{msg}"
    );
}
