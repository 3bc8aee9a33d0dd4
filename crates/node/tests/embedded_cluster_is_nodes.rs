//! The embedded cluster (what `locus query`, `load`, `rdf`, `sparql` and the
//! benchmarks run) is one `Node` per machine: each node's fabric hosts its
//! machine alone, requests answered by one node's `Node::handle` are seen
//! by every other, a migration moves a value between nodes, and a shard move
//! (the shard-based baseline) updates the map of every node's store.

use locus_client::proto::{ErrorCode, Reply, Request};
use locus_fabric::{Fabric, MachineId};
use locus_graph::{Csr, CsrOptions};
use locus_node::embedded::{self, Embedded};
use locus_node::embedded_config::Config;
use locus_node::progress::Reporter;
use locus_store::home_of;

const MACHINES: usize = 4;

fn config() -> Config {
    let mut c = Config::default();
    c.cluster.machines = MACHINES;
    c.cluster.threads = 2;
    c.cluster.latency_ns = 0;
    c.cluster.bandwidth_bytes_per_s = 0;
    c.cluster.pin_memory = false;
    c.graph.scale = 8;
    c.graph.edge_factor = 4;
    c
}

fn loaded(tweak: impl FnOnce(&mut locus_store::StoreConfig)) -> (Embedded, Csr) {
    let c = config();
    let csr = Csr::from_rmat(&embedded::rmat_of(&c.graph).unwrap(), CsrOptions::default()).unwrap();
    let e = embedded::build_with(&csr, MACHINES, &c, &Reporter::quiet(), tweak).unwrap();
    (e, csr)
}

fn ask(e: &Embedded, m: usize, req: Request) -> Reply {
    let node = &e.nodes[m];
    node.handle(&mut node.session(), req, u64::MAX)
}

fn neighbors(e: &Embedded, m: usize, v: u32) -> Vec<u32> {
    match ask(e, m, Request::Neighbors { vertex: v, k: 0 }) {
        Reply::Neighbors(mut l) => {
            l.sort_unstable();
            l
        }
        // A vertex without edges has no entry.
        Reply::Error {
            code: ErrorCode::UnknownVertex,
            ..
        } => Vec::new(),
        other => panic!("NEIGHBORS {v} at node {m}: {other:?}"),
    }
}

#[test]
fn every_machine_is_a_node_hosting_only_itself() {
    let (e, csr) = loaded(|_| {});
    assert_eq!(e.nodes.len(), MACHINES);
    for (m, node) in e.nodes.iter().enumerate() {
        assert_eq!(node.me() as usize, m);
        for k in 0..MACHINES {
            assert_eq!(
                node.store().fabric().hosts(k as MachineId),
                k == m,
                "node {m}'s fabric and machine {k}"
            );
        }
    }
    // Every node answers for every vertex, from its own machine.
    for v in (0..csr.vertex_count() as u32).step_by(7) {
        for m in 0..MACHINES {
            assert_eq!(
                neighbors(&e, m, v),
                csr.neighbors(v),
                "vertex {v} at node {m}"
            );
        }
    }
}

#[test]
fn an_update_at_one_node_is_read_at_every_other_and_a_value_moves_between_nodes() {
    let (e, _) = loaded(|_| {});
    let _services = e.stores.spawn_services().unwrap();
    // A vertex homed on machine 1, updated through node 2 (forwarded to
    // its home), read through every node.
    let v = (0..1000u32)
        .find(|&v| home_of(v, MACHINES) == 1 && !neighbors(&e, 0, v).is_empty())
        .unwrap();
    let added = 1_000_003;
    match ask(
        &e,
        2,
        Request::InsertEdge {
            vertex: v,
            neighbor: added,
        },
    ) {
        Reply::Changed(true) => {}
        other => panic!("INSERT_EDGE at node 2: {other:?}"),
    }
    for m in 0..MACHINES {
        assert!(
            neighbors(&e, m, v).contains(&added),
            "node {m} misses the insert"
        );
    }
    // Node 3 migrates the value to itself; every node still reads it.
    match ask(&e, 3, Request::Migrate { vertex: v }) {
        Reply::Migrate { from: 1, to: 3, .. } => {}
        other => panic!("MIGRATE at node 3: {other:?}"),
    }
    match ask(&e, 0, Request::Where { vertex: v }) {
        Reply::Where {
            home: 1,
            holder: 3,
            found: true,
        } => {}
        other => panic!("WHERE at node 0: {other:?}"),
    }
    for m in 0..MACHINES {
        assert!(
            neighbors(&e, m, v).contains(&added),
            "node {m} after the move"
        );
    }
}

#[test]
fn a_shard_move_updates_the_map_of_every_node() {
    let (e, csr) = loaded(|s| s.shards_per_machine = 4);
    let _services = e.stores.spawn_services().unwrap();
    let map = e.stores.shard_map().unwrap();
    // Move every shard of machine 0 to machine 2.
    let moves: Vec<(u32, MachineId, MachineId)> = (0..map.shards())
        .filter(|&s| map.owner_of_shard(s) == 0)
        .map(|s| (s, 0, 2))
        .collect();
    assert!(!moves.is_empty());
    let (keys, _) = e.stores.move_shards(&moves).unwrap();
    assert!(keys > 0);
    for (m, node) in e.nodes.iter().enumerate() {
        let map = node.store().shard_map().unwrap();
        for &(s, _, to) in &moves {
            assert_eq!(map.owner_of_shard(s), to, "node {m}'s map, shard {s}");
        }
    }
    // Every node finds every moved vertex at its new machine.
    for v in (0..csr.vertex_count() as u32).filter(|&v| home_of(v, MACHINES) == 0) {
        for m in 0..MACHINES {
            assert_eq!(
                neighbors(&e, m, v),
                csr.neighbors(v),
                "vertex {v} at node {m}"
            );
        }
    }
}

#[test]
fn a_slot_table_installed_in_the_cluster_reaches_every_node() {
    let (e, _) = loaded(|_| {});
    let t = e.stores.distinct()[0].homes().table();
    let moves = [locus_store::SlotMove {
        slot: 5,
        from: t.owners()[5],
        to: (t.owners()[5] + 1) % MACHINES as u8,
    }];
    let next = t.after(&moves).unwrap();
    assert!(e.stores.install_slot_table(&next).unwrap());
    assert!(!e.stores.install_slot_table(&next).unwrap(), "not newer");
    for (m, node) in e.nodes.iter().enumerate() {
        assert_eq!(node.store().homes().table(), next, "node {m}'s table");
        assert_eq!(node.store().owner(5), moves[0].to, "node {m}");
    }
    // SLOTS at any node answers the new table.
    for m in 0..MACHINES {
        let Reply::Slots { table: raw, .. } = ask(&e, m, Request::Slots) else {
            panic!("node {m} did not answer SLOTS")
        };
        assert_eq!(locus_store::SlotTable::decode(&raw).unwrap(), next);
    }
}

/// A batch of slots moves between nodes with read-only replicas on (they
/// were refused before): once the old home guards the batch, a replica listed
/// earlier is dropped and a new one is refused, so an update at the new home,
/// whose directory starts empty, leaves no reader with a stale copy.
#[test]
fn a_slot_move_with_replicas_on_leaves_no_stale_replica() {
    use locus_client::proto::MoveStep;
    use locus_store::{Key, Replication};
    let (e, csr) = loaded(|c| c.replica_bytes_max = 1 << 20);
    let _services = e.stores.spawn_services().unwrap();
    let t = e.stores.distinct()[0].homes().table();
    let (a, b, r) = (0u8, 1u8, 2u8);
    let v = (0..csr.vertex_count() as u32)
        .find(|&v| t.owner_of(v) == a && !neighbors(&e, a as usize, v).is_empty())
        .unwrap();
    let w = (0..csr.vertex_count() as u32)
        .find(|&w| w != v && t.slot_of(w) == t.slot_of(v))
        .unwrap_or(v);
    let slot = t.slot_of(v);
    let before = neighbors(&e, r as usize, v);
    let mut wr = e.nodes[r as usize].store().worker(r).unwrap();
    assert!(matches!(
        wr.replicate(Key::part(v, 0)).unwrap(),
        Replication::Created { .. }
    ));
    let step = |m: u8, step, peer, keys: Vec<u64>, table: Vec<u8>| match ask(
        &e,
        m as usize,
        Request::Move {
            step,
            peer,
            slots: vec![slot],
            table,
            keys,
        },
    ) {
        Reply::Move(m) => m,
        other => panic!("{step:?} at node {m}: {other:?}"),
    };
    let guarded = step(a, MoveStep::Guard, b, Vec::new(), Vec::new());
    // Guarded: no new replica of the slot is listed at A.
    if w != v {
        assert_eq!(wr.replicate(Key::part(w, 0)).unwrap(), Replication::Refused);
    }
    step(b, MoveStep::Take, a, guarded.listed, Vec::new());
    let next = t
        .after(&[locus_store::SlotMove {
            slot,
            from: a,
            to: b,
        }])
        .unwrap();
    for m in 0..MACHINES as u8 {
        step(m, MoveStep::Install, 0, Vec::new(), next.encode());
    }
    // An update at the new home is seen by the reader that had a replica.
    let fresh = 1_000_000;
    assert!(matches!(
        ask(
            &e,
            b as usize,
            Request::InsertEdge {
                vertex: v,
                neighbor: fresh
            }
        ),
        Reply::Changed(true)
    ));
    let after = neighbors(&e, r as usize, v);
    assert!(
        after.contains(&fresh),
        "the reader's copy of {v} is stale: {after:?}"
    );
    assert_eq!(after.len(), before.len() + 1);
}

/// LISTS at any node gives every vertex's whole list as NEIGHBORS gives it,
/// in the request's order, with vertices that have no entry marked.
#[test]
fn lists_at_any_node_answer_as_neighbors_one_by_one() {
    let (e, csr) = loaded(|_| {});
    let _services = e.stores.spawn_services().unwrap();
    let mut vertices: Vec<u32> = (0..csr.vertex_count() as u32).rev().collect();
    vertices.push(1 << 30);
    for m in 0..MACHINES {
        let r = ask(
            &e,
            m,
            Request::Lists {
                vertices: vertices.clone(),
            },
        );
        let lists = r
            .lists()
            .unwrap_or_else(|| panic!("LISTS at node {m}: {r:?}"));
        assert_eq!(lists.len(), vertices.len());
        for (&v, l) in vertices.iter().zip(&lists) {
            let mut got = l.map(<[u32]>::to_vec).unwrap_or_default();
            got.sort_unstable();
            assert_eq!(got, neighbors(&e, m, v), "vertex {v} at node {m}");
        }
        assert!(lists.last().unwrap().is_none(), "no entry for 2^30");
        assert!(lists.iter().filter(|l| l.is_some()).count() > 100);
    }
}
