//! The elastic cluster's commands on real processes (issue 59): `cluster
//! move`, `cluster moves`, `cluster rebalance [--plan]` and `cluster
//! remove-server` on a cluster that `cluster up` started (etcd, two
//! coordinators, three servers with write-ahead logs), while a writer
//! inserts unique edges; afterwards every edge of the loaded graph and
//! every acknowledged insert reads back, and k-hop answers match the
//! reference, from the two servers left.

mod common;

use common::writer::{check_reads, Writer};
use common::{graph, load, locus, locus_json as json, Cluster};

#[test]
fn slots_move_rebalance_and_a_server_leaves_while_edges_are_inserted() {
    let cluster = Cluster::up();
    let d = cluster.dir.path().to_str().unwrap().to_string();
    let c = cluster.client();
    let g = graph(59);
    load(&c, &g);

    let writer = Writer::start(cluster.client(), 1_000_000);

    // Slots 0-99 to server 2; 33 of them (s % 3 == 2) were its already.
    let moved = json(&[
        "cluster",
        "move",
        "--dir",
        &d,
        "--slots",
        "0-99",
        "--to",
        "2",
        "--batch-slots",
        "8",
        "--json",
    ]);
    assert_eq!(moved["slots"], 67, "{moved}");
    assert_eq!(moved["settled"], 0, "{moved}");
    let status = json(&["cluster", "moves", "--dir", &d, "--settle", "--json"]);
    assert_eq!(status["settled"], 0, "{status}");
    let servers = status["servers"].as_array().unwrap();
    assert_eq!(servers[2]["slots"], 1365 + 67, "{status}");
    assert!(
        servers
            .iter()
            .all(|s| s["in_flight"].as_array().is_some_and(|f| f.is_empty())),
        "{status}"
    );
    // Balancing gives 66 back (server 2 keeps the one slot over 4096 / 3:
    // the fewest moves), and plans it first.
    let plan = json(&["cluster", "rebalance", "--dir", &d, "--plan", "--json"]);
    let planned: u64 = plan["moves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["slots"].as_u64().unwrap())
        .sum();
    assert_eq!(planned, 66, "{plan}");
    let r = json(&[
        "cluster",
        "rebalance",
        "--dir",
        &d,
        "--batch-slots",
        "16",
        "--json",
    ]);
    assert_eq!(r["slots"], 66, "{r}");
    assert_eq!(
        json(&["cluster", "rebalance", "--dir", &d, "--plan", "--json"])["moves"],
        serde_json::json!([])
    );
    // Server 0 leaves: its slots go to 1 and 2, its process stops. A client
    // that did nothing meanwhile still holds a table naming server 0.
    let stale = cluster.client();
    let at0 = (0..200u32)
        .find(|&v| stale.slot_table().unwrap().owner_of(v) == 0)
        .unwrap();
    stale.neighbors(at0, 0).unwrap();
    let pid0 = cluster.pid(0);
    let gone = json(&[
        "cluster",
        "remove-server",
        "--dir",
        &d,
        "--id",
        "0",
        "--batch-slots",
        "64",
        "--json",
    ]);
    assert_eq!(gone["slots"], 1365, "{gone}");
    assert_eq!(gone["stopped"], true, "{gone}");
    assert!(
        !std::path::Path::new(&format!("/proc/{pid0}")).exists() || {
            let s = std::fs::read_to_string(format!("/proc/{pid0}/stat")).unwrap_or_default();
            s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        }
    );
    let (acked, _, _) = writer.stop();
    // Its next update finds server 0 gone, asks the others for the table,
    // and goes to the new home (nothing was sent to the gone one).
    let before = stale.routing().retries;
    assert!(stale.insert_edge(at0, 5_000_000).unwrap());
    assert!(stale.routing().retries > before);
    assert!(cluster
        .client()
        .neighbors(at0, 0)
        .unwrap()
        .contains(&5_000_000));

    // Everything reads back from servers 1 and 2.
    let status = json(&["cluster", "moves", "--dir", &d, "--json"]);
    assert_eq!(status["servers"][0]["slots"], 0, "{status}");
    check_reads(&cluster.client(), &g, &acked);
}

#[test]
fn bench_elastic_moves_slots_under_load_and_loses_nothing() {
    let out = tempfile::tempdir().unwrap();
    let r = json(&[
        "bench",
        "elastic",
        "--scale",
        "10",
        "--clients",
        "2",
        "--phase-s",
        "1",
        "--redis-cluster",
        "--json",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    let rows = r["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "{r:#}");
    let change = |i: usize| rows[i]["change"].as_str().unwrap().to_string();
    assert!(change(0).starts_with("add server 3"), "{r:#}");
    assert!(change(1).starts_with("remove server 0"), "{r:#}");
    for row in &rows[..2] {
        // 4096 / 4 slots to the new server; then server 0's 1,024 away.
        assert_eq!(row["slots"], 1024, "{row:#}");
        assert!(row["move_s"].as_f64().unwrap() > 0.0, "{row:#}");
        assert!(row["throughput_during"].as_f64().unwrap() > 0.0, "{row:#}");
    }
    // Redis Cluster's own rebalance, the same two changes: a quarter of
    // its 16,384 slots to the new node, then node 0's quarter away.
    for row in &rows[2..] {
        assert!(
            row["protocol"]
                .as_str()
                .unwrap()
                .starts_with("redis cluster"),
            "{row:#}"
        );
        assert_eq!(row["slots"], 4096, "{row:#}");
        assert!(row["move_s"].as_f64().unwrap() > 0.0, "{row:#}");
    }
    assert!(
        r["redis"]["acknowledged_writes"].as_u64().unwrap() > 0,
        "{r:#}"
    );
    assert_eq!(r["redis"]["lost_acknowledged_writes"], 0, "{r:#}");
    assert!(r["acknowledged_writes"].as_u64().unwrap() > 0, "{r:#}");
    assert_eq!(r["lost_acknowledged_writes"], 0, "{r:#}");
    // The timeline: each system's throughput in 100 ms bins, its two moves marked.
    let timelines = r["timelines"].as_array().unwrap();
    assert_eq!(timelines.len(), 2, "{r:#}");
    for t in timelines {
        let bins = t["ops_per_s"].as_array().unwrap();
        assert!(bins.len() >= 30, "{t:#}");
        assert!(bins.iter().filter(|b| b.as_f64().unwrap() > 0.0).count() > bins.len() / 2);
        assert_eq!(t["moves"].as_array().unwrap().len(), 2, "{t:#}");
    }
    let png = std::fs::read(out.path().join("elastic-timeline.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    let saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join("elastic.json")).unwrap()).unwrap();
    assert_eq!(saved["rows"], r["rows"]);
    println!(
        "bench elastic: {} ops, {} failed, {} retries",
        r["ops"], r["failed_ops"], r["retries"]
    );
}

#[test]
fn a_server_joins_then_another_leaves_while_edges_are_inserted() {
    // Three servers with room for eight (cluster up's default on etcd).
    let cluster = Cluster::up();
    let d = cluster.dir.path().to_str().unwrap().to_string();
    let c = cluster.client();
    let g = graph(60);
    load(&c, &g);

    // A writer whose client read the file before the fourth server existed:
    // it must follow the slot table to a server it has no address for.
    let writer = Writer::start(cluster.client(), 2_000_000);

    let added = json(&[
        "cluster",
        "add-server",
        "--dir",
        &d,
        "--wait",
        "--batch-slots",
        "64",
        "--lifetime-s",
        "300",
        "--json",
    ]);
    assert_eq!(added["id"], 3, "{added}");
    assert_eq!(added["slots"], 1024, "{added}");
    assert_eq!(added["members"], serde_json::json!([0, 1, 2, 3]), "{added}");
    let status = json(&["cluster", "status", "--dir", &d, "--json"]);
    let servers = status["servers"].as_array().unwrap();
    assert_eq!(servers.len(), 4, "{status}");
    assert!(
        servers
            .iter()
            .all(|s| s["up"] == true && s["slots"] == 1024),
        "{status}"
    );
    // The fifth id is free too; a sixth add would still fit (room for 8):
    // check only the refusal of a cluster without room below.

    // Server 0 leaves: its slots go to 1, 2 and 3.
    let gone = json(&[
        "cluster",
        "remove-server",
        "--dir",
        &d,
        "--id",
        "0",
        "--batch-slots",
        "64",
        "--json",
    ]);
    assert_eq!(gone["slots"], 1024, "{gone}");
    assert_eq!(gone["stopped"], true, "{gone}");
    let (acked, routing, known) = writer.stop();
    assert_eq!(known, 4, "the writer's client learned server 3");
    assert!(routing.retries > 0, "{routing:?}");

    // Everything reads back, through a client of the file that lists server 3.
    let fresh = cluster.client();
    assert_eq!(fresh.machines(), 4, "the cluster file lists server 3");
    assert!(!acked.is_empty());
    check_reads(&fresh, &g, &acked);
}

#[test]
fn add_server_refuses_a_cluster_without_room_or_etcd() {
    let cluster = Cluster::up_with(&["--max-servers", "3", "--no-coordinator"]);
    let d = cluster.dir.path().to_str().unwrap().to_string();
    let o = locus(&["cluster", "add-server", "--dir", &d, "--wait"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("room for 3"), "{err}");
    let before = std::fs::read_to_string(cluster.file()).unwrap();
    assert!(!before.contains("id = 3"), "nothing was added: {before}");
    let bad = locus(&[
        "cluster",
        "up",
        "--dir",
        "/nonexistent-x",
        "--servers",
        "4",
        "--max-servers",
        "3",
    ]);
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("max_servers"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}

#[test]
fn a_running_move_shows_its_progress_and_cancel_moves_its_slots_back() {
    let cluster = Cluster::up_with(&["--no-coordinator"]);
    let d = cluster.dir.path().to_str().unwrap().to_string();
    let c = cluster.client();
    let g = graph(61);
    load(&c, &g);
    // Every slot to server 1, one slot a batch: long enough to watch and
    // cancel.
    let mv = std::process::Command::new(env!("CARGO_BIN_EXE_locus"))
        .args([
            "cluster", "move", "--dir", &d, "--slots", "0-4095", "--to", "1", "--json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    let seen = loop {
        let s = json(&["cluster", "moves", "--dir", &d, "--json"]);
        if s["move"]["state"] == "running" && s["move"]["slots_done"].as_u64().unwrap_or(0) >= 8 {
            break s;
        }
        assert!(
            t0.elapsed().as_secs() < 60,
            "the move never showed progress: {s}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(seen["move"]["command"], "move", "{seen}");
    assert_eq!(seen["move"]["slots_total"], 2731, "{seen}");
    assert_eq!(seen["move"]["alive"], true, "{seen}");
    // A second mover is refused while this one runs.
    let o = locus(&["cluster", "rebalance", "--dir", &d]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("is moving slots now"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let end = json(&["cluster", "moves", "--dir", &d, "--cancel", "--json"]);
    assert_eq!(end["state"], "cancelled", "{end}");
    assert_eq!(end["moved_back"], end["slots_done"], "{end}");
    let out = mv.wait_with_output().unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cancelled"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The slots are where they were, and the data reads back.
    let status = json(&["cluster", "moves", "--dir", &d, "--json"]);
    let slots: Vec<u64> = status["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["slots"].as_u64().unwrap())
        .collect();
    assert_eq!(slots, vec![1366, 1365, 1365], "{status}");
    let c = cluster.client();
    for (v, list) in g.iter().enumerate() {
        let got = c.neighbors(v as u32, 0).unwrap();
        for u in list {
            assert!(got.contains(u), "vertex {v} lost its edge to {u}");
        }
    }
}

/// Slots in flight through each server, by MOVE's status (0 for a server
/// that does not answer).
fn in_flight(c: &locus_client::Client) -> usize {
    (0..common::SERVERS as u8)
        .map(|id| {
            match c.call(
                id,
                &locus_client::proto::Request::Move {
                    step: locus_client::proto::MoveStep::Status,
                    peer: 0,
                    slots: Vec::new(),
                    table: Vec::new(),
                    keys: Vec::new(),
                },
                None,
            ) {
                Ok(locus_client::proto::Reply::Move(r)) => r.in_flight.len(),
                _ => 0,
            }
        })
        .sum()
}

/// Design MV1-MV4 on real processes: `cluster move` is killed -9 while a
/// batch is in flight; another command is refused while its lock's lease
/// lives; the coordinator then settles the batch and finishes the dead
/// command's move (no command run), a new command moves slots again, and
/// every loaded edge and acknowledged insert reads back.
#[test]
fn a_move_command_killed_mid_batch_is_settled_by_the_coordinator() {
    let cluster = Cluster::up();
    let d = cluster.dir.path().to_str().unwrap().to_string();
    let c = cluster.client();
    let g = graph(61);
    load(&c, &g);
    let writer = Writer::start(cluster.client(), 2_000_000);
    let probe = cluster.client();
    // Until a kill lands while a batch is in flight (each try moves the
    // slots the other way, so there is always something to move).
    let mut caught = None;
    for attempt in 0..6 {
        let to = if attempt % 2 == 0 { "2" } else { "1" };
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_locus"))
            .args([
                "cluster",
                "move",
                "--dir",
                &d,
                "--slots",
                "0-1199",
                "--to",
                to,
                "--batch-slots",
                "4",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let t = std::time::Instant::now();
        while in_flight(&probe) == 0 && t.elapsed() < std::time::Duration::from_secs(20) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        if in_flight(&probe) > 0 {
            caught = Some(to.parse::<u8>().unwrap());
            // MV1: while the dead command's lease lives, another is refused
            // (if the lease has not ended already on a slow host).
            let o = locus(&["cluster", "move", "--dir", &d, "--slots", "0", "--to", "0"]);
            let err = String::from_utf8_lossy(&o.stderr);
            println!("a second command while the lock lives: {}", err.trim());
            assert!(
                !o.status.success() && err.contains("another slot mover is running")
                    || in_flight(&probe) == 0,
                "{err}"
            );
            break;
        }
        // The batch ended before the kill: wait for the lock to go, again.
        let t = std::time::Instant::now();
        while json(&["cluster", "moves", "--dir", &d, "--json"])["driver"]
            != serde_json::Value::Null
        {
            assert!(
                t.elapsed() < std::time::Duration::from_secs(30),
                "the lock stayed"
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }
    let to = caught.expect("no kill landed while a batch was in flight in 6 tries");
    // MV3 and MV4: the coordinator settles the batch within the lease's
    // TTL and its period, then finishes the dead command's move.
    let t = std::time::Instant::now();
    let done = |t: &locus_store::SlotTable| (0..1200).all(|s| t.owner_of_slot(s) == Some(to));
    while in_flight(&probe) > 0
        || !done(&probe.refresh_slot_table(0).unwrap())
        || json(&["cluster", "moves", "--dir", &d, "--json"])["driver"] != serde_json::Value::Null
    {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(90),
            "the dead command's move is not finished 90 s after the kill"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    // A new command runs, and the cluster balances again.
    let r = json(&[
        "cluster",
        "rebalance",
        "--dir",
        &d,
        "--batch-slots",
        "64",
        "--json",
    ]);
    assert_eq!(r["settled"], 0, "{r}");
    let (acked, _, _) = writer.stop();
    check_reads(&cluster.client(), &g, &acked);
}
