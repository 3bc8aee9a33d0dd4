//! Issue 15 fault test (d), real processes: `kill -9` of a server in the
//! middle of a bulk `locus load --cluster`. The loader must fail saying how
//! many batches were acknowledged; `locus cluster up --dir` restarts the
//! victim from its own log; every batch the loader saw acknowledged (the
//! same batches, rebuilt here with the loader's own `Batcher`) is readable;
//! the load runs again to the end. The time to recover is printed.
//!
//! `cluster up` runs etcd, so the victim comes back at a strictly higher
//! epoch (asserted from STATS `membership`); nothing was migrated, so the
//! survivors have nothing to reload.

mod common;

use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{locus, Cluster};
use locus_client::load::{BatchLimits, Batcher, Direction};
use locus_client::{Client, ClientConfig};
use locus_graph::input;
use locus_graph::LoadOptions;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const VERTICES: u32 = 40_000;
const EDGES: u32 = 400_000;

fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// The batches `locus load` sends for `path`, in order (its defaults), homes
/// by the cluster's slot table as `c` fetches it.
fn batches(path: &std::path::Path, c: &Client) -> Vec<Vec<(u32, Vec<u32>)>> {
    let table = c.slot_table().unwrap();
    let mut b = Batcher::with_table(&table, Direction::Undirected, BatchLimits::default()).unwrap();
    let mut out = Vec::new();
    input::visit(path, None, &LoadOptions::default(), |edge, at| {
        out.extend(b.push(edge, at).into_iter().map(|x| x.vertices));
        Ok::<(), String>(())
    })
    .unwrap();
    out.extend(b.finish().into_iter().map(|x| x.vertices));
    out
}

/// Every id each vertex of `batches` got must be in its list now.
fn check_loaded(c: &Client, batches: &[Vec<(u32, Vec<u32>)>], when: &str) -> usize {
    let mut want: HashMap<u32, Vec<u32>> = HashMap::new();
    for b in batches {
        for (v, ids) in b {
            want.entry(*v).or_default().extend(ids);
        }
    }
    for (v, ids) in &want {
        let got = c
            .neighbors(*v, 0)
            .unwrap_or_else(|e| panic!("{when}: vertex {v}: {e}"));
        for id in ids {
            assert!(
                got.contains(id),
                "{when}: vertex {v} (home {}) lacks {id} of an acknowledged batch",
                c.home(*v)
            );
        }
    }
    want.len()
}

#[test]
fn d_kill_9_during_a_bulk_load_loses_no_acknowledged_batch() {
    let victim: u8 = 1;
    let cluster = Cluster::up_with(&[
        "--no-coordinator",
        "--sync",
        "always",
        "--value-region-mb",
        "64",
    ]);
    let graph = cluster.dir.path().join("g.txt");
    {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(0x15d);
        let mut f = std::io::BufWriter::new(std::fs::File::create(&graph).unwrap());
        for _ in 0..EDGES {
            let (a, b) = (rng.gen_range(0..VERTICES), rng.gen_range(0..VERTICES));
            writeln!(f, "{a} {b}").unwrap();
        }
    }
    let c = cluster.client();
    let all = batches(&graph, &c);
    assert!(
        all.len() >= 9,
        "{} batches: too few to die in between",
        all.len()
    );
    let loader = Command::new(env!("CARGO_BIN_EXE_locus"))
        .args(["load", "--cluster"])
        .arg(cluster.file())
        .arg(&graph)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Kill the victim once it has logged a LOAD batch, while the load runs.
    let t0 = Instant::now();
    loop {
        let st = c.stats(victim).unwrap();
        if st["durability"]["records"].as_u64().unwrap_or(0) >= 1 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "server {victim} logged no LOAD batch in 300 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let epoch_before = c.stats(victim).unwrap()["membership"]["epoch"]
        .as_u64()
        .expect("cluster up runs etcd: the server has an epoch");
    let pid = cluster.pid(victim);
    // SAFETY: kill(2) on a server process of this test's own cluster.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    let t_kill = Instant::now();
    while alive(pid) {
        assert!(
            t_kill.elapsed() < Duration::from_secs(20),
            "pid {pid} alive"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = loader.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        !out.status.success(),
        "the load finished although server {victim} was killed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    // "...: the K batches before it (...) were acknowledged and stay loaded; ..."
    let acked: usize = err
        .find(" batches before it")
        .and_then(|end| {
            let head = &err[..end];
            head[head.rfind("the ")? + 4..].parse().ok()
        })
        .unwrap_or_else(|| panic!("the loader's error does not say how far it got: {err}"));
    assert!(acked < all.len(), "{acked} of {} acknowledged", all.len());
    assert!(err.contains("server 1"), "{err}");
    println!("(d) the loader said: {}", err.trim());

    let t_up = Instant::now();
    cluster.restart_victim(victim, pid);
    let c = Client::from_file(&cluster.file(), ClientConfig::default()).unwrap();
    let checked = check_loaded(&c, &all[..acked], "after the restart");
    let recovered = t_up.elapsed();
    let st = c.stats(victim).unwrap();
    let epoch_after = st["membership"]["epoch"].as_u64().unwrap();
    assert!(
        epoch_after > epoch_before,
        "the restarted server is at epoch {epoch_after}, not past {epoch_before}"
    );
    println!(
        "(d) server {victim} killed during a bulk load after {acked} of {} batches were acknowledged; restarted and the {checked} vertices of those batches read back in {:.2} s (its own recovery: {} ms, {} vertices, {} log records)",
        all.len(),
        recovered.as_secs_f64(),
        st["durability"]["recovery_ms"],
        st["durability"]["recovered_vertices"],
        st["durability"]["recovered_records"],
    );
    // The cluster serves again: the whole load goes through (LOAD merges).
    let o = locus(&[
        "load",
        "--cluster",
        cluster.file().to_str().unwrap(),
        graph.to_str().unwrap(),
    ]);
    assert!(
        o.status.success(),
        "the load after the restart: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    check_loaded(&c, &all, "after loading again");
}
