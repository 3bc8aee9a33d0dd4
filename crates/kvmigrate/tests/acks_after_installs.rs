//! Installs on their own connection (issue 16, requirement 5; `install`'s A1, A2, A4): a
//! destination whose store has an installer hands DATA batches to its install worker, keeps
//! serving queries while an install is in progress, and acks a batch only once it is applied,
//! so a group completes only over applied batches.
//!
//! The store here is the built-in table behind a lock, shared with an installer that waits at
//! a gate before it applies a batch: a remote store whose install pipeline is slow, with the
//! test deciding when it may finish.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use locus_kvmigrate::install::Installer;
use locus_kvmigrate::node::{CpuBudget, RouterNode, ServerNode, Step};
use locus_kvmigrate::server::StoreFactory;
use locus_kvmigrate::table::{ShardStore, Table};
use locus_kvmigrate::transport::{InProcess, SharedTransport, Transport};
use locus_kvmigrate::wire::{Body, Item, Key, NodeId, Packet, ShardId};
use locus_kvmigrate::{
    Error, Geometry, MigrationPhase, Protocol, Result, Router, RouterConfig, Server, ServerConfig,
};

const ROUTER: NodeId = 0;
const SOURCE: NodeId = 1;
const DEST: NodeId = 2;
const CLIENT: NodeId = 3;

fn geometry() -> Geometry {
    Geometry::new(6, 2).unwrap()
}

/// Batches an installer may apply: `permits` of them, `entered` installs begun so far.
#[derive(Default)]
struct Gate {
    state: Mutex<(u64, u64)>,
    changed: Condvar,
}

impl Gate {
    fn allow(&self, n: u64) {
        let mut s = self.state.lock().unwrap();
        s.0 = s.0.saturating_add(n);
        self.changed.notify_all();
    }

    fn entered(&self) -> u64 {
        self.state.lock().unwrap().1
    }

    /// Waits (bounded, so a broken test fails instead of hanging) until `n` installs began.
    fn wait_entered(&self, n: u64) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut s = self.state.lock().unwrap();
        while s.1 < n {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "the install worker never started batch {n}"
            );
            s = self.changed.wait_timeout(s, left).unwrap().0;
        }
    }
}

/// The table of one shard, shared by its store and the node's installer (one backing store,
/// two paths to it).
type Shared = Arc<Mutex<Table>>;
/// Every shard's table in a node's backing store.
type Tables = Arc<Mutex<BTreeMap<ShardId, Shared>>>;

struct GatedStore {
    table: Shared,
    tables: Tables,
    gate: Arc<Gate>,
    fail: Arc<AtomicBool>,
}

/// Installs into whichever shard's table a batch is for, as a Redis installer writes that
/// shard's keys.
struct GatedInstaller {
    tables: Tables,
    gate: Arc<Gate>,
    fail: Arc<AtomicBool>,
}

impl Installer for GatedInstaller {
    fn install(
        &mut self,
        shard: ShardId,
        _geometry: Geometry,
        items: &[Item],
    ) -> std::result::Result<(), String> {
        {
            let deadline = Instant::now() + Duration::from_secs(60);
            let mut s = self.gate.state.lock().unwrap();
            s.1 += 1;
            self.gate.changed.notify_all();
            while s.0 == 0 {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err("the test never opened the gate".into());
                }
                s = self.gate.changed.wait_timeout(s, left).unwrap().0;
            }
            s.0 -= 1;
        }
        if self.fail.load(Ordering::SeqCst) {
            return Err("install connection reset".into());
        }
        let Some(table) = self.tables.lock().unwrap().get(&shard).cloned() else {
            return Err(format!("no store of shard {shard}"));
        };
        let mut t = table.lock().unwrap();
        for item in items {
            t.install_if_newer(item.clone());
        }
        Ok(())
    }
}

impl ShardStore for GatedStore {
    fn geometry(&self) -> Geometry {
        self.table.lock().unwrap().geometry()
    }
    fn live(&self) -> usize {
        self.table.lock().unwrap().live()
    }
    fn get(&self, key: Key) -> Option<Item> {
        self.table.lock().unwrap().get(key)
    }
    fn version(&self, key: Key) -> u64 {
        self.table.lock().unwrap().version(key)
    }
    fn put(&mut self, item: Item) {
        self.table.lock().unwrap().put(item)
    }
    fn install_if_newer(&mut self, item: Item) -> bool {
        self.table.lock().unwrap().install_if_newer(item)
    }
    fn scan_group(&self, group: u32) -> Vec<Item> {
        self.table.lock().unwrap().scan_group(group)
    }
    fn clear(&mut self) {
        self.table.lock().unwrap().clear()
    }
    fn installer(&self) -> Result<Option<Box<dyn Installer>>> {
        Ok(Some(Box::new(GatedInstaller {
            tables: self.tables.clone(),
            gate: self.gate.clone(),
            fail: self.fail.clone(),
        })))
    }
}

/// A destination node whose shards all live in `tables` (one per shard, made on demand).
fn gated_node(
    cfg: ServerConfig,
    t: SharedTransport,
    gate: &Arc<Gate>,
    fail: &Arc<AtomicBool>,
    tables: &Tables,
) -> ServerNode<GatedStore> {
    let (gate, fail, tables) = (gate.clone(), fail.clone(), tables.clone());
    let make: StoreFactory<GatedStore> = Box::new(move |shard, g| {
        let table = Arc::new(Mutex::new(Table::new(g)));
        tables.lock().unwrap().insert(shard, table.clone());
        GatedStore {
            table,
            tables: tables.clone(),
            gate: gate.clone(),
            fail: fail.clone(),
        }
    });
    let server = Server::with_store(cfg, make).unwrap();
    ServerNode::new(server, t, CpuBudget::default(), Instant::now()).unwrap()
}

fn from_source(seq: u32, body: Body) -> Packet {
    Packet {
        from: SOURCE,
        shard: SOURCE,
        seq,
        flags: 0,
        body,
    }
}

/// Everything waiting for `node` now.
fn drain(t: &SharedTransport, node: NodeId) -> Vec<Body> {
    let mut got = Vec::new();
    while let Some(p) = t.recv(node, Duration::from_millis(1)).unwrap() {
        got.push(p.body);
    }
    got
}

/// Steps until a packet was handled (it is in the in-process inbox already), bounded.
fn until_packet(node: &mut ServerNode<GatedStore>) {
    for _ in 0..1000 {
        if node.step(&mut ()).unwrap() == Step::Packet {
            return;
        }
    }
    panic!("no packet handled in 1000 steps");
}

#[test]
fn a_query_is_served_while_an_install_is_in_progress_and_the_ack_waits_for_the_install() {
    let t: SharedTransport = Arc::new(InProcess::new(4));
    let (gate, fail) = (Arc::new(Gate::default()), Arc::new(AtomicBool::new(false)));
    let tables = Arc::new(Mutex::new(BTreeMap::new()));
    let mut dst = gated_node(
        ServerConfig::new(DEST, ROUTER, geometry()),
        t.clone(),
        &gate,
        &fail,
        &tables,
    );
    let init = Body::Init {
        era: 1,
        protocol: Protocol::NetMigrate,
        geometry: geometry(),
    };
    t.send(DEST, from_source(1, init)).unwrap();
    until_packet(&mut dst);
    assert!(matches!(
        drain(&t, SOURCE)[..],
        [Body::InitAck { ok: true, .. }]
    ));

    let item = |key| Item {
        key,
        version: 1,
        value: Some(vec![key as u8]),
    };
    let data = Body::Data {
        batch: 0,
        group: geometry().group_of(5),
        items: vec![item(5), item(6)],
    };
    t.send(DEST, from_source(2, data.clone())).unwrap();
    until_packet(&mut dst);
    gate.wait_entered(1);
    // The batch is being installed and may not finish. A read of one of its keys is served
    // now (A2): the key is absent here, so the destination pulls it from the source.
    t.send(
        DEST,
        Packet {
            from: CLIENT,
            shard: SOURCE,
            seq: 7,
            flags: 0,
            body: Body::Get { key: 5 },
        },
    )
    .unwrap();
    until_packet(&mut dst);
    // The same batch sent again while the first copy installs is not queued twice (A5).
    t.send(DEST, from_source(2, data)).unwrap();
    until_packet(&mut dst);
    let got = drain(&t, SOURCE);
    // (On a slow machine the pull may have been resent.)
    assert!(
        matches!(&got[..], [Body::Pull { key: 5 }, ..])
            && got.iter().all(|b| matches!(b, Body::Pull { key: 5 })),
        "the read pulled while the install was held, and no ack left before the install \
         finished (A1): {got:?}"
    );
    let tables_now = tables.lock().unwrap().clone();
    let table = tables_now[&SOURCE].clone();
    assert!(
        table.lock().unwrap().get(5).is_none(),
        "the gate held the batch"
    );

    gate.allow(1);
    let deadline = Instant::now() + Duration::from_secs(30);
    let ack = loop {
        assert!(
            Instant::now() < deadline,
            "no DATA-ACK within 30 s of the install"
        );
        dst.step(&mut ()).unwrap();
        match t.recv(SOURCE, Duration::from_millis(1)).unwrap() {
            Some(Packet {
                body: Body::Pull { key: 5 },
                ..
            })
            | None => {}
            Some(p) => break p,
        }
    };
    assert_eq!((&ack.body, ack.seq), (&Body::DataAck { batch: 0 }, 2));
    let applied = table.lock().unwrap().get(6);
    assert_eq!(
        applied,
        Some(item(6)),
        "the ack came after the batch was applied"
    );
    let c = dst.install_counters().unwrap();
    assert_eq!((c.queued, c.applied, c.duplicates), (1, 1, 1));
    assert_eq!(
        gate.entered(),
        1,
        "the resent batch was not installed again"
    );
}

#[test]
fn a_failed_install_sends_no_ack_and_takes_the_node_down() {
    let t: SharedTransport = Arc::new(InProcess::new(4));
    let (gate, fail) = (Arc::new(Gate::default()), Arc::new(AtomicBool::new(true)));
    let tables = Arc::new(Mutex::new(BTreeMap::new()));
    let mut dst = gated_node(
        ServerConfig::new(DEST, ROUTER, geometry()),
        t.clone(),
        &gate,
        &fail,
        &tables,
    );
    let init = Body::Init {
        era: 1,
        protocol: Protocol::NetMigrate,
        geometry: geometry(),
    };
    t.send(DEST, from_source(1, init)).unwrap();
    until_packet(&mut dst);
    drain(&t, SOURCE);
    let data = Body::Data {
        batch: 0,
        group: 0,
        items: vec![],
    };
    t.send(DEST, from_source(2, data)).unwrap();
    until_packet(&mut dst);
    gate.allow(1);
    let deadline = Instant::now() + Duration::from_secs(30);
    let e = loop {
        assert!(
            Instant::now() < deadline,
            "the failed install never stopped the node"
        );
        match dst.step(&mut ()) {
            Ok(_) => {}
            Err(e) => break e,
        }
    };
    assert!(
        matches!(&e, Error::StoreFailed { server: DEST, reason } if reason.contains("install connection reset")),
        "{e}"
    );
    assert!(
        matches!(t.recv(DEST, Duration::ZERO), Err(Error::Unreachable(DEST))),
        "down"
    );
    assert!(
        drain(&t, SOURCE).is_empty(),
        "no ack for a batch that was not applied"
    );
    assert_eq!(
        dst.store_error().as_deref(),
        Some("install connection reset")
    );
}

/// The in-process transport, with a check of every GROUP-COMPLETE and GROUP-DONE the source
/// sends: each group's pairs must all be at the destination by then.
struct Spy {
    inner: InProcess,
    expected: BTreeMap<Key, u64>,
    tables: Tables,
    checked: Mutex<u64>,
    violations: Mutex<Vec<String>>,
}

impl Spy {
    fn check(&self, group: u32) {
        let table = self.tables.lock().unwrap().get(&SOURCE).cloned();
        let Some(table) = table else {
            self.violations
                .lock()
                .unwrap()
                .push(format!("group {group} done before INIT"));
            return;
        };
        let t = table.lock().unwrap();
        for (&key, &version) in &self.expected {
            if geometry().group_of(key) != group {
                continue;
            }
            if t.get(key).map(|i| i.version) != Some(version) {
                self.violations.lock().unwrap().push(format!(
                    "group {group} completed with key {key} not applied at the destination"
                ));
            }
        }
        *self.checked.lock().unwrap() += 1;
    }
}

impl Transport for Spy {
    fn send(&self, to: NodeId, p: Packet) -> Result<()> {
        if p.from == SOURCE {
            if let Body::GroupComplete { group } | Body::GroupDone { group } = p.body {
                self.check(group);
            }
        }
        self.inner.send(to, p)
    }
    fn recv(&self, node: NodeId, timeout: Duration) -> Result<Option<Packet>> {
        self.inner.recv(node, timeout)
    }
    fn bytes_sent(&self) -> u64 {
        self.inner.bytes_sent()
    }
    fn set_down(&self, node: NodeId) {
        self.inner.set_down(node)
    }
}

#[test]
fn a_group_completes_only_after_every_batch_of_it_is_applied() {
    let keys = 200;
    // The source's versions of the keys it loads: 1, 2, ... in load order.
    let expected: BTreeMap<Key, u64> = (0..keys).map(|k| (k, (1 << 48) | (k + 1))).collect();
    let tables = Arc::new(Mutex::new(BTreeMap::new()));
    let spy = Arc::new(Spy {
        inner: InProcess::new(4),
        expected: expected.clone(),
        tables: tables.clone(),
        checked: Mutex::new(0),
        violations: Mutex::new(Vec::new()),
    });
    let t: SharedTransport = spy.clone();
    let mut router = RouterNode::new(Router::new(RouterConfig::default()).unwrap(), t.clone());
    // Small batches, so a group has several; no ack timeout: the gate is slow on purpose.
    let cfg = |id| {
        let mut c = ServerConfig::new(id, ROUTER, geometry());
        c.batch_items_max = 4;
        c.ack_timeout_us = 3_600_000_000;
        c
    };
    let epoch = Instant::now();
    let mut src = ServerNode::new(
        Server::new(cfg(SOURCE)).unwrap(),
        t.clone(),
        CpuBudget::default(),
        epoch,
    )
    .unwrap();
    src.load(SOURCE, (0..keys).map(|k| (k, vec![k as u8])))
        .unwrap();
    for (&k, &v) in &expected {
        assert_eq!(src.server().peek(SOURCE, k).map(|i| i.version), Some(v));
    }
    let (gate, fail) = (Arc::new(Gate::default()), Arc::new(AtomicBool::new(false)));
    let mut dst = gated_node(cfg(DEST), t.clone(), &gate, &fail, &tables);
    src.start_migration(SOURCE, DEST, Protocol::NetMigrate)
        .unwrap();
    let phase = |n: &ServerNode| n.server().migration_status().last().map(|s| s.phase);
    let mut steps = 0u64;
    while phase(&src) != Some(MigrationPhase::Done) {
        assert!(
            steps < 200_000,
            "not done in 200,000 steps: {:?}",
            src.server().migration_status()
        );
        assert_ne!(phase(&src), Some(MigrationPhase::Aborted));
        // One install may finish every 8 rounds, so acks trickle in between other packets.
        if steps.is_multiple_of(8) {
            gate.allow(1);
        }
        router.step(&mut ()).unwrap();
        dst.step(&mut ()).unwrap();
        src.step(&mut ()).unwrap();
        steps += 1;
    }
    gate.allow(u64::MAX);
    let violations = spy.violations.lock().unwrap().clone();
    assert!(violations.is_empty(), "{violations:?}");
    let groups = geometry().groups() as u64;
    assert!(
        *spy.checked.lock().unwrap() >= groups,
        "every group's completion was checked"
    );
    assert_eq!(dst.server().live_keys(SOURCE), keys as usize);
    assert!(dst.install_counters().unwrap().applied >= keys.div_ceil(4));
}
