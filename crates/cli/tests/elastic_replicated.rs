//! A replicated cluster changes shape on real processes (issues 59 and 60;
//! `docs/design.md`, "A replicated cluster changes shape"): `cluster up
//! --replication 2` (etcd, two coordinators, three servers with
//! write-ahead logs), a graph loaded and a writer inserting unique edges;
//! a fourth server is added (it takes its share of copies, then of
//! primaries), slots are moved to it, and the first server is removed (its
//! primaries handed to backups, its copies made again elsewhere) while the
//! writer runs; afterwards every slot has a primary and a backup among the
//! servers left, evenly, and every loaded edge and acknowledged insert
//! reads back.

mod common;

use common::writer::{check_reads, Writer};
use common::{graph, load, locus, locus_json as json, Cluster};

/// Slots each of `servers` owns and backs.
fn shape(t: &locus_store::SlotTable, servers: &[u8]) -> (Vec<usize>, Vec<usize>) {
    let owns = servers
        .iter()
        .map(|&m| {
            (0..t.slots())
                .filter(|&s| t.owner_of_slot(s) == Some(m))
                .count()
        })
        .collect();
    let backs = servers
        .iter()
        .map(|&m| (0..t.slots()).filter(|&s| t.is_backup(s, m)).count())
        .collect();
    (owns, backs)
}

fn even(counts: &[usize]) -> bool {
    counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1
}

/// Every slot owned by one of `servers` and backed by another of them.
fn whole(t: &locus_store::SlotTable, servers: &[u8]) -> bool {
    (0..t.slots()).all(|s| {
        let b = t.backups_of_slot(s);
        servers.contains(&t.owner_of_slot(s).unwrap())
            && b.len() == 1
            && b.iter().all(|m| servers.contains(m))
    })
}

#[test]
fn a_server_joins_then_another_leaves_a_replicated_cluster_while_edges_are_inserted() {
    let cluster = Cluster::up_with(&["--replication", "2"]);
    let d = cluster.dir.path().to_str().unwrap().to_string();
    let c = cluster.client();
    let g = graph(61);
    load(&c, &g);
    let writer = Writer::start(cluster.client(), 5_000_000);

    // Balanced already: nothing planned.
    let plan = json(&["cluster", "rebalance", "--plan", "--dir", &d, "--json"]);
    assert_eq!(plan["copies"], serde_json::json!([]), "{plan}");
    assert_eq!(plan["handovers"], serde_json::json!([]), "{plan}");

    let added = json(&[
        "cluster",
        "add-server",
        "--dir",
        &d,
        "--wait",
        "--lifetime-s",
        "300",
        "--json",
    ]);
    assert_eq!(added["id"], 3, "{added}");
    assert_eq!(added["replication"], 2, "{added}");
    // Server 3 ends with two shares: each a copy it learned.
    assert!(added["slots_copied"].as_u64().unwrap() >= 2048, "{added}");
    let t = c.refresh_slot_table(0).unwrap();
    let four = [0u8, 1, 2, 3];
    let (owns, backs) = shape(&t, &four);
    assert!(
        even(&owns) && even(&backs) && whole(&t, &four),
        "{owns:?} {backs:?}: {added}"
    );

    // Slots 0-63 to server 3 (it backs some of them: those are handed
    // with no copy); the old owners stay their backups.
    let before = c.refresh_slot_table(0).unwrap();
    let moved = json(&[
        "cluster", "move", "--dir", &d, "--slots", "0-63", "--to", "3", "--json",
    ]);
    let t = c.refresh_slot_table(0).unwrap();
    for s in 0..64 {
        assert_eq!(t.owner_of_slot(s), Some(3), "slot {s}: {moved}");
        if before.owner_of_slot(s) != Some(3) {
            assert_eq!(
                t.backups_of_slot(s),
                &[before.owner_of_slot(s).unwrap()],
                "slot {s}: {moved}"
            );
        }
    }

    // Server 0 leaves: nothing of it stays, the rest is even again.
    let gone = json(&[
        "cluster",
        "remove-server",
        "--dir",
        &d,
        "--id",
        "0",
        "--json",
    ]);
    assert_eq!(gone["stopped"], true, "{gone}");
    let t = c.refresh_slot_table(0).unwrap();
    let three = [1u8, 2, 3];
    let (owns, backs) = shape(&t, &three);
    assert!(
        even(&owns) && even(&backs) && whole(&t, &three),
        "{owns:?} {backs:?}: {gone}"
    );

    let (acked, _, known) = writer.stop();
    assert_eq!(known, 4, "the writer's client learned server 3");
    assert!(!acked.is_empty());
    check_reads(&cluster.client(), &g, &acked);
}

#[test]
fn a_replicated_cluster_refuses_to_drop_below_its_copies() {
    // Two servers at R = 2: removing one would leave a single copy.
    let cluster = Cluster::up_with(&["--servers", "2", "--replication", "2"]);
    let d = cluster.dir.path().to_str().unwrap().to_string();
    let o = locus(&["cluster", "remove-server", "--dir", &d, "--id", "1"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("at least 2 servers"), "{err}");
    // Nothing moved: both still hold every slot.
    let t = cluster.client().refresh_slot_table(0).unwrap();
    assert!((0..t.slots()).all(|s| t.backups_of_slot(s).len() == 1));
    let o = locus(&["cluster", "status", "--dir", &d, "--json"]);
    assert!(o.status.success());
}
