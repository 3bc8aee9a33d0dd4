//! The control link between servers and the coordinator process, run in
//! one test process (three `Server`s and a `CoordinatorProcess` over
//! loopback TCP): deferred mode's TRACK/COLLECT round trip ends in
//! migrations to the reading server, and the control listener refuses a
//! peer without the secret and a server id outside the cluster.

mod common;

use common::free;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use locus_client::proto::Control;
use locus_client::{Client, ClientConfig, Conn};
use locus_fabric::auth::{Listener, Secret};
use locus_server::config::{ClusterSection, CoordinatorEntry, ServerEntry};
use locus_server::{ClusterFile, CoordinatorProcess, Server};

const SECRET: &str = "control link test secret";

fn cluster_file(dir: &std::path::Path, machines: u8) -> ClusterFile {
    let mut f = ClusterFile {
        cluster: ClusterSection {
            secret: Some(SECRET.into()),
            max_servers: None,
        },
        servers: (0..machines)
            .map(|id| ServerEntry {
                id,
                fabric: free(),
                client: free(),
                metrics: None,
            })
            .collect(),
        coordinator: Some(CoordinatorEntry {
            control: free(),
            metrics: None,
            record: dir.join("coordinator.redb"),
        }),
        store: Default::default(),
        policy: Default::default(),
        limits: Default::default(),
        durability: None,
        recovery: Default::default(),
        etcd: None,
        replication: Default::default(),
    };
    f.store.value_region_mb = Some(16);
    f.store.cache_mb = 16;
    f.policy.mode = "deferred".into();
    // Long enough that a reader slowed by a loaded machine (a debug build,
    // tests in parallel) still counts a value ~40 times an interval: the
    // policy weighs it against unseen rivals of 7 accesses each.
    f.policy.interval_ms = 1_000;
    f.policy.dwell_ms = 1_000;
    f.policy.hot_poll_ms = 50;
    f.validate().unwrap();
    f
}

fn start_servers(file: &ClusterFile) -> Vec<Server> {
    let handles: Vec<_> = (0..file.machines() as u8)
        .map(|id| {
            let f = file.clone();
            std::thread::spawn(move || Server::start(f, id).unwrap())
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn deferred_mode_tracks_over_the_link_and_moves_values_to_their_reader() {
    let dir = tempfile::tempdir().unwrap();
    let file = cluster_file(dir.path(), 3);
    let coordinator = CoordinatorProcess::start(file.clone()).unwrap();
    let servers = start_servers(&file);
    let client = Client::new(
        servers.iter().map(|s| s.client_addr()).collect(),
        ClientConfig {
            secret: Some(Secret::new(SECRET).unwrap()),
            ..ClientConfig::default()
        },
    )
    .unwrap();
    wait_for("three links", Duration::from_secs(20), || {
        coordinator.linked() == vec![0, 1, 2]
    });
    // Every vertex points at the next eight: 2-hop queries read many values.
    let n = 300u32;
    for v in 0..n {
        let l: Vec<u32> = (1..=8).map(|d| (v + d * 37) % n).collect();
        client.put(v, &l).unwrap();
    }
    let starts: Vec<u32> = (0..n).filter(|&v| client.home(v) == 0).collect();
    let t0 = Instant::now();
    let mut i = 0;
    while coordinator.stats().migrated_ok.load(Ordering::Relaxed) == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no migration within 60 s: {:?} {:?}",
            coordinator.policy_stats(),
            coordinator.stats()
        );
        let v = starts[i % starts.len()];
        let r = client.khop(v, 2, 8).unwrap();
        assert!(!r.distinct.is_empty());
        i += 1;
    }
    let p = coordinator.policy_stats();
    assert!(
        p.track_requests > 0,
        "deferred mode asked holders to track: {p:?}"
    );
    assert!(p.approved > 0, "{p:?}");
    let away_at_0 = (0..n)
        .filter(|&v| client.home(v) != 0 && client.locate(v).unwrap().holder == 0)
        .count();
    assert!(away_at_0 > 0, "values of other homes moved to server 0");
    let st = client.stats(0).unwrap();
    assert!(st["coordinator"]["moved"].as_u64().unwrap() > 0, "{st}");
    for s in servers {
        s.stop();
    }
    coordinator.stop();
}

#[test]
fn the_control_listener_refuses_strangers_and_unknown_servers() {
    let dir = tempfile::tempdir().unwrap();
    let file = cluster_file(dir.path(), 2);
    let coordinator = CoordinatorProcess::start(file.clone()).unwrap();
    let addr = coordinator.control_addr();
    let t = Duration::from_secs(5);
    // Without the secret: refused at the handshake, counted.
    let wrong = Secret::new("not the cluster secret").unwrap();
    let e = Conn::connect(addr, Some(&wrong), Listener::Control, "stranger", t).unwrap_err();
    assert!(e.to_string().contains("refused"), "{e}");
    // With the secret but claiming machine 9 of a 2-server cluster: no link.
    let secret = Secret::new(SECRET).unwrap();
    let mut c = Conn::connect(addr, Some(&secret), Listener::Control, "server 9", t).unwrap();
    assert_eq!(c.hello().server_id, locus_server::COORDINATOR_ID);
    c.send_control(&Control::Register { machine: 9 }).unwrap();
    let closed = c.recv_control(Duration::from_secs(5));
    assert!(
        closed.is_err(),
        "the coordinator closes the link: {closed:?}"
    );
    assert!(coordinator.linked().is_empty());
    // A real server id links; a report as another machine closes the link.
    let mut c = Conn::connect(addr, Some(&secret), Listener::Control, "server 1", t).unwrap();
    c.send_control(&Control::Register { machine: 1 }).unwrap();
    wait_for("server 1 linked", Duration::from_secs(10), || {
        coordinator.linked() == vec![1]
    });
    c.send_control(&Control::Tracked {
        machine: 0,
        interval_ms: 1,
        counts: Vec::new(),
    })
    .unwrap();
    wait_for(
        "the impostor's link closed",
        Duration::from_secs(10),
        || coordinator.linked().is_empty(),
    );
    assert_eq!(coordinator.stats().auth_refused.load(Ordering::Relaxed), 1);
    coordinator.stop();
}

#[test]
fn a_policy_without_a_lead_is_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = cluster_file(dir.path(), 2);
    f.policy.lead_intervals = 0;
    let e = f.validate().unwrap_err();
    assert!(e.to_string().contains("lead_intervals"), "{e}");
}

#[test]
fn a_policy_that_reports_every_cached_key_is_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = cluster_file(dir.path(), 2);
    assert_eq!(f.policy.report_count_min, 8);
    assert_eq!(f.policy.policy_config().unwrap().report_count_min, 8);
    f.policy.report_count_min = 0;
    let e = f.validate().unwrap_err();
    assert!(e.to_string().contains("report_count_min"), "{e}");
}

/// `[policy] listen_intervals` reaches the coordinator's policy through a
/// cluster file on disk: 1 by default (hear every machine once before
/// moving anything), 0 to decide from the first report.
#[test]
fn the_listening_intervals_are_a_policy_setting_of_the_cluster_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = cluster_file(dir.path(), 2);
    assert_eq!(f.policy.policy_config().unwrap().listen_intervals, 1);
    f.policy.listen_intervals = 0;
    let path = dir.path().join("cluster.toml");
    f.write(&path).unwrap();
    assert!(std::fs::read_to_string(&path)
        .unwrap()
        .contains("listen_intervals = 0"));
    let back = ClusterFile::load(&path).unwrap();
    assert_eq!(back.policy.policy_config().unwrap().listen_intervals, 0);
}
