//! Membership on etcd with real processes (issue 15 requirement 2; fault
//! test (b)): `locus cluster up` starts etcd, two coordinators and three
//! servers on loopback. Each test kills or stops real processes and checks,
//! within generous bounds, that the cluster noticed through etcd: survivors
//! see `PeerDown` with the dead server's epoch (STATS `membership`), a
//! restarted server comes back at a strictly higher epoch, a server stopped
//! past its lease is fenced, and the standby coordinator takes over from a
//! killed leader and keeps migrating while every answer matches the
//! reference. No test passes by skipping its fault: each asserts the
//! process died (or stopped) and the epoch or term advanced. Every process
//! has a lifetime and `cluster down` runs on drop.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{graph, khop_ref, load, locus, Cluster, SERVERS, VERTICES};
use locus_client::Client;
use locus_membership::{EtcdConfig, Membership};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Waits (bounded) until `f` holds; panics naming `what` otherwise.
fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) -> Duration {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    t0.elapsed()
}

/// Whether `pid` has exited (gone, or a zombie nobody reaped yet).
fn exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

/// Whether `pid` is stopped (SIGSTOP).
fn stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| Some(s.rsplit_once(')')?.1.trim_start().starts_with('T')))
        .unwrap_or(false)
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) on a process this test's cluster started.
    assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0, "kill {pid}");
}

fn pid_of_role(cluster: &Cluster, role: &str) -> u32 {
    let pids: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(cluster.dir.path().join("pids.json")).unwrap(),
    )
    .unwrap();
    pids.as_array()
        .unwrap()
        .iter()
        .find(|p| p["role"] == role)
        .unwrap_or_else(|| panic!("no {role} in pids.json: {pids}"))["pid"]
        .as_u64()
        .unwrap() as u32
}

fn server_pid(cluster: &Cluster, id: u8) -> u32 {
    let pids: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(cluster.dir.path().join("pids.json")).unwrap(),
    )
    .unwrap();
    pids.as_array()
        .unwrap()
        .iter()
        .find(|p| p["role"] == "server" && p["id"] == id)
        .unwrap()["pid"]
        .as_u64()
        .unwrap() as u32
}

/// A membership client on the cluster's etcd (from its cluster file).
fn etcd_of(cluster: &Cluster) -> Membership {
    let file: toml::Table = std::fs::read_to_string(cluster.file())
        .unwrap()
        .parse()
        .unwrap();
    let e = &file["etcd"];
    Membership::connect(&EtcdConfig {
        endpoints: e["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap().to_string())
            .collect(),
        prefix: e["prefix"].as_str().unwrap().into(),
        lease_ttl_s: e["lease_ttl_s"].as_integer().unwrap() as u64,
    })
    .unwrap()
}

fn membership(c: &Client, id: u8) -> serde_json::Value {
    c.stats(id).unwrap()["membership"].clone()
}

/// Whether server `at` has seen `PeerDown` of machine `m` at `epoch`.
fn saw_down(c: &Client, at: u8, m: u8, epoch: u64) -> bool {
    let Ok(st) = c.stats(at) else { return false };
    st["membership"]["events"].as_array().is_some_and(|evs| {
        evs.iter()
            .any(|e| e["event"] == "down" && e["machine"] == m && e["epoch"] == epoch)
    }) && st["membership"]["peers"][m.to_string()]["down"] == true
}

#[test]
fn survivors_see_a_killed_server_down_and_it_returns_at_a_higher_epoch() {
    let cluster = Cluster::up_with(&["--no-coordinator"]);
    let c = cluster.client();
    for id in 0..SERVERS as u8 {
        assert_eq!(membership(&c, id)["epoch"], 1, "server {id} at epoch 1");
    }
    let pid = server_pid(&cluster, 2);
    let killed = Instant::now();
    signal(pid, libc::SIGKILL);
    wait_for("server 2 exits", Duration::from_secs(10), || exited(pid));
    // The lease TTL is 3 s; allow a loaded machine five times that.
    let detected = wait_for(
        "both survivors see PeerDown of server 2 at epoch 1",
        Duration::from_secs(20),
        || saw_down(&c, 0, 2, 1) && saw_down(&c, 1, 2, 1),
    );
    println!(
        "kill -9 of server 2 seen by both survivors after {:.2} s (polled every 50 ms; {:.2} s until the test's check)",
        detected.as_secs_f64(),
        killed.elapsed().as_secs_f64()
    );
    let o = locus(&[
        "cluster",
        "up",
        "--dir",
        cluster.dir.path().to_str().unwrap(),
        "--lifetime-s",
        "120",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "cluster up --dir: {out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("server 2: restarted") && out.contains("epoch 2"),
        "{out}"
    );
    assert_eq!(membership(&c, 2)["epoch"], 2, "strictly higher epoch");
    assert_ne!(server_pid(&cluster, 2), pid);
    wait_for(
        "survivors see server 2 up at epoch 2",
        Duration::from_secs(20),
        || {
            [0u8, 1].iter().all(|&s| {
                let p = &membership(&c, s)["peers"]["2"];
                p["epoch"] == 2 && p["down"] == false
            })
        },
    );
    // It serves again.
    let v = (0..).find(|&v| c.home(v) == 2).unwrap();
    c.put(v, &[1, 2]).unwrap();
    assert_eq!(c.neighbors(v, 0).unwrap(), vec![1, 2]);
}

#[test]
fn a_server_stopped_past_its_lease_is_fenced_and_serves_no_client() {
    let cluster = Cluster::up_with(&["--no-coordinator"]);
    let c = cluster.client();
    let v = (0..).find(|&v| c.home(v) == 1).unwrap();
    c.put(v, &[9]).unwrap();
    let pid = server_pid(&cluster, 1);
    signal(pid, libc::SIGSTOP);
    wait_for("server 1 is stopped", Duration::from_secs(5), || {
        stopped(pid)
    });
    wait_for(
        "survivors see PeerDown of the stopped server 1 at epoch 1",
        Duration::from_secs(20),
        || saw_down(&c, 0, 1, 1) && saw_down(&c, 2, 1, 1),
    );
    signal(pid, libc::SIGCONT);
    // Fenced: it exits (code 3, with a log line) and cannot serve a client.
    wait_for("the fenced server exits", Duration::from_secs(15), || {
        exited(pid)
    });
    let log =
        std::fs::read_to_string(cluster.dir.path().join("logs").join("server-1.log")).unwrap();
    assert!(log.contains("fenced out"), "{log}");
    let e = c.neighbors(v, 0).unwrap_err().to_string();
    assert!(e.contains("server 1"), "{e}");
    // The survivors refuse the old incarnation's fabric connections too.
    assert!(membership(&c, 0)["peers"]["1"]["down"] == true);
}

#[test]
fn the_standby_coordinator_takes_over_a_migration_storm_from_a_killed_leader() {
    let cluster = Cluster::up_with(&["--interval-ms", "500"]);
    let etcd = etcd_of(&cluster);
    let c = Arc::new(cluster.client());
    let linked = |id: u8| c.stats(id).unwrap()["coordinator"]["linked"] == true;
    wait_for("servers link", Duration::from_secs(20), || {
        (0..SERVERS as u8).all(linked)
    });
    let g = Arc::new(graph(13));
    load(&c, &g);
    // Readers start their queries on the vertices homed on `reader`: the
    // coordinator moves the values they read there (a migration storm).
    let reader = Arc::new(AtomicU8::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let checked = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for t in 0..2u64 {
        let (c, g, stop, checked, reader) = (
            Arc::clone(&c),
            Arc::clone(&g),
            Arc::clone(&stop),
            Arc::clone(&checked),
            Arc::clone(&reader),
        );
        threads.push(std::thread::spawn(move || {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(300 + t);
            while !stop.load(Ordering::Acquire) {
                let v = rng.gen_range(0..VERTICES);
                if c.home(v) != reader.load(Ordering::Relaxed) {
                    continue;
                }
                let k = rng.gen_range(5..30);
                let r = c.khop(v, 2, k as u32).unwrap();
                let (want, n) = khop_ref(&g, v, 2, k);
                assert_eq!(r.distinct, want, "2-hop from {v}, k {k}");
                assert_eq!(r.with_repeats, n);
                checked.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let moved = |id: u8| {
        c.stats(id).unwrap()["coordinator"]["moved"]
            .as_u64()
            .unwrap()
    };
    wait_for(
        "the leader moves values to server 0",
        Duration::from_secs(60),
        || moved(0) > 0,
    );
    let first = etcd.leader().unwrap().expect("a coordinator leads");
    let file: toml::Table = std::fs::read_to_string(cluster.file())
        .unwrap()
        .parse()
        .unwrap();
    let role = if first.value == file["coordinator"]["control"].as_str().unwrap() {
        "coordinator"
    } else {
        "coordinator-1"
    };
    let pid = pid_of_role(&cluster, role);
    let killed = Instant::now();
    signal(pid, libc::SIGKILL);
    wait_for(
        "the leading coordinator exits",
        Duration::from_secs(10),
        || exited(pid),
    );
    let mut second = None;
    wait_for("the standby leads", Duration::from_secs(20), || {
        second = etcd
            .leader()
            .ok()
            .flatten()
            .filter(|l| l.value != first.value);
        second.is_some()
    });
    let takeover = killed.elapsed();
    let second = second.unwrap();
    assert!(
        second.term > first.term,
        "term {} after {}",
        second.term,
        first.term
    );
    println!(
        "coordinator takeover: {:.2} s after kill -9 (term {} -> {})",
        takeover.as_secs_f64(),
        first.term,
        second.term
    );
    wait_for(
        "servers link to the new leader",
        Duration::from_secs(20),
        || (0..SERVERS as u8).all(linked),
    );
    // The new leader keeps migrating: queries now start on server 1.
    let moved_1 = moved(1);
    reader.store(1, Ordering::Relaxed);
    wait_for(
        "the new leader moves values to server 1",
        Duration::from_secs(60),
        || moved(1) > moved_1,
    );
    stop.store(true, Ordering::Release);
    for t in threads {
        t.join().unwrap();
    }
    assert!(checked.load(Ordering::Relaxed) > 50);
    for v in 0..VERTICES {
        assert_eq!(c.neighbors(v, 0).unwrap(), g[v as usize], "vertex {v}");
    }
}

#[test]
fn a_coordinator_stopped_past_its_lease_loses_the_lead_and_exits() {
    let cluster = Cluster::up_with(&["--interval-ms", "500"]);
    let etcd = etcd_of(&cluster);
    let first = etcd.leader().unwrap().expect("a coordinator leads");
    let file: toml::Table = std::fs::read_to_string(cluster.file())
        .unwrap()
        .parse()
        .unwrap();
    let role = if first.value == file["coordinator"]["control"].as_str().unwrap() {
        "coordinator"
    } else {
        "coordinator-1"
    };
    let pid = pid_of_role(&cluster, role);
    signal(pid, libc::SIGSTOP);
    wait_for("the leader is stopped", Duration::from_secs(5), || {
        stopped(pid)
    });
    wait_for("the standby leads", Duration::from_secs(20), || {
        etcd.leader()
            .ok()
            .flatten()
            .is_some_and(|l| l.value != first.value && l.term > first.term)
    });
    signal(pid, libc::SIGCONT);
    wait_for(
        "the old leader exits, fenced",
        Duration::from_secs(15),
        || exited(pid),
    );
    let log = std::fs::read_to_string(cluster.dir.path().join("logs").join(format!("{role}.log")))
        .unwrap();
    assert!(log.contains("fenced out"), "{log}");
    let c = cluster.client();
    wait_for(
        "servers link to the new leader",
        Duration::from_secs(20),
        || (0..SERVERS as u8).all(|id| c.stats(id).unwrap()["coordinator"]["linked"] == true),
    );
}
