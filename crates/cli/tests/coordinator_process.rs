//! The coordinator as its own process (Pragh 4.4): `locus cluster up` starts
//! it beside three servers; queries that start on one server make the
//! servers' monitors report remote values, the coordinator approves their
//! migration and the target server moves them, while every answer is
//! checked against a reference. Then the coordinator is killed with SIGKILL:
//! servers keep serving right answers, notice the link is down, and link
//! again to a restarted coordinator, which restores its record and keeps
//! approving. Every process has a lifetime; nothing outlives the test.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{graph, khop_ref, load, sample, scrape, Cluster, SERVERS, VERTICES};
use locus_client::Client;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Kills a child process on drop.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn stat(c: &Client, id: u8, field: &str) -> serde_json::Value {
    c.stats(id).unwrap()["coordinator"][field].clone()
}

/// Waits (bounded) until `f` holds; panics naming `what` otherwise.
fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn coordinator_pid(cluster: &Cluster) -> u32 {
    let pids: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(cluster.dir.path().join("pids.json")).unwrap(),
    )
    .unwrap();
    pids.as_array()
        .unwrap()
        .iter()
        .find(|p| p["role"] == "coordinator")
        .expect("cluster up started a coordinator")["pid"]
        .as_u64()
        .unwrap() as u32
}

#[test]
fn the_coordinator_process_moves_values_to_their_readers_and_survives_a_restart() {
    // Without etcd: this test restarts the one coordinator from its redb record
    // (the etcd election and record are coordinator_failover.rs).
    let cluster = Cluster::up_with(&["--interval-ms", "500", "--no-etcd"]);
    let c = Arc::new(cluster.client());
    for id in 0..SERVERS as u8 {
        assert_eq!(stat(&c, id, "linked"), true, "server {id} linked at start");
    }
    let g = Arc::new(graph(11));
    load(&c, &g);
    // Readers start their queries on the vertices homed on `reader`.
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
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(200 + t);
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
    let moved = |id: u8| stat(&c, id, "moved").as_u64().unwrap();
    wait_for(
        "the coordinator moves values to server 0",
        Duration::from_secs(90),
        || moved(0) > 0,
    );
    let holders_at_0: usize = (0..VERTICES)
        .filter(|&v| c.home(v) != 0 && c.locate(v).unwrap().holder == 0)
        .count();
    assert!(
        holders_at_0 > 0,
        "values of other homes are held by server 0"
    );
    // Both sides' metrics count them.
    let file: toml::Table = std::fs::read_to_string(cluster.file())
        .unwrap()
        .parse()
        .unwrap();
    let coordinator_metrics = scrape(file["coordinator"]["metrics"].as_str().unwrap());
    let jobs = sample(&coordinator_metrics, "locus_coordinator_migrate_jobs_total");
    assert!(jobs.unwrap_or(0.0) > 0.0, "{coordinator_metrics}");
    let server0 = file["server"].as_array().unwrap()[0]["metrics"]
        .as_str()
        .unwrap();
    let server_metrics = scrape(server0);
    let moved_metric = sample(
        &server_metrics,
        "locus_migrations_total{how=\"coordinator\"}",
    );
    assert!(moved_metric.unwrap_or(0.0) > 0.0, "{server_metrics}");
    assert_eq!(
        sample(&server_metrics, "locus_coordinator_linked"),
        Some(1.0),
        "{server_metrics}"
    );

    // SIGKILL the coordinator: servers keep serving, and notice.
    let pid = coordinator_pid(&cluster);
    // SAFETY: kill(2) on the coordinator this test's cluster started.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    wait_for("servers see the link down", Duration::from_secs(10), || {
        (0..SERVERS as u8).all(|id| stat(&c, id, "linked") == false)
    });
    let before = checked.load(Ordering::Relaxed);
    wait_for(
        "queries keep being answered without a coordinator",
        Duration::from_secs(30),
        || checked.load(Ordering::Relaxed) > before + 20,
    );

    // Restart it from its record; servers link again within seconds.
    let mut child = Command::new(env!("CARGO_BIN_EXE_locus"))
        .args(["coordinator", "--config"])
        .arg(cluster.file())
        .args(["--lifetime-s", "120"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let _guard = Killed(child);
    let mut first = String::new();
    BufReader::new(out).read_line(&mut first).unwrap();
    let restored: u64 = first
        .split('(')
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("restored count in {first:?}"));
    assert!(restored > 0, "the record survived the kill: {first}");
    wait_for("servers link again", Duration::from_secs(15), || {
        (0..SERVERS as u8).all(|id| stat(&c, id, "linked") == true)
    });
    // The restarted coordinator keeps approving: queries now start on server 1.
    let moved_1 = moved(1);
    reader.store(1, Ordering::Relaxed);
    wait_for(
        "the restarted coordinator moves values to server 1",
        Duration::from_secs(90),
        || moved(1) > moved_1,
    );
    stop.store(true, Ordering::Release);
    for t in threads {
        t.join().unwrap();
    }
    assert!(checked.load(Ordering::Relaxed) > 50);
    // Every vertex still reads right wherever its value went.
    for v in 0..VERTICES {
        assert_eq!(c.neighbors(v, 0).unwrap(), g[v as usize], "vertex {v}");
    }
}
