//! Real threads: a router thread, two server threads and closed-loop client threads hammer a
//! few hot keys while a shard migrates, with filters small enough to force false positives.
//! The recorded history must be linearizable per key, and a read-back after the migration must
//! see every acknowledged write. Bounded by operation counts, not by time.

use std::sync::Arc;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use locus_kvmigrate::check::{check_history, Op, OpKind};
use locus_kvmigrate::runtime::{Cluster, ClusterConfig, HistoryClock};
use locus_kvmigrate::{Geometry, MigrationPhase, Protocol, RouterConfig, ServerConfig};

const HOT_KEYS: u64 = 24;
const PRELOAD_KEYS: u64 = 3000;
const CLIENTS: u16 = 3;
const OPS_PER_CLIENT: u32 = 400;

fn stress(protocol: Protocol, seed: u64, mirror: bool) {
    let geometry = Geometry::new(9, 1).unwrap();
    let mut server = ServerConfig::new(0, 0, geometry);
    server.batch_items_max = 4;
    server.batches_inflight_max = 2;
    server.mirror_writes = mirror;
    // A loaded machine must not turn slowness into an abort.
    server.ack_timeout_us = 30_000_000;
    let mut cfg = ClusterConfig::new(2, CLIENTS + 1, server);
    cfg.router = RouterConfig {
        bf_bytes: 16,
        cbf_bytes: 2,
        ..RouterConfig::default()
    };
    cfg.op_timeout_ms = 10_000;
    let cluster = Cluster::start(cfg).unwrap();
    let initial = |k: u64| format!("init-{k}").into_bytes();
    cluster
        .load(1, (0..PRELOAD_KEYS).map(|k| (k, initial(k))).collect())
        .unwrap();
    let clock = Arc::new(HistoryClock::default());
    let mut handles = Vec::new();
    for c in 0..CLIENTS {
        let mut client = cluster.client().unwrap();
        let clock = clock.clone();
        handles.push(std::thread::spawn(move || {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed * 100 + c as u64);
            let mut ops = Vec::new();
            for n in 0..OPS_PER_CLIENT {
                let key = rng.gen_range(0..HOT_KEYS);
                let write = rng.gen_range(0..100) < 40;
                let invoke = clock.tick();
                if write {
                    let value =
                        (rng.gen_range(0..6) != 0).then(|| format!("c{c}-{n}").into_bytes());
                    let r = match &value {
                        Some(v) => client.set(1, key, v.clone()),
                        None => client.delete(1, key),
                    };
                    let response = clock.tick();
                    ops.push(Op {
                        client: c as u32,
                        key,
                        kind: OpKind::Write(value),
                        invoke,
                        response: r.is_ok().then_some(response),
                    });
                } else if let Ok(v) = client.get(1, key) {
                    ops.push(Op {
                        client: c as u32,
                        key,
                        kind: OpKind::Read(v),
                        invoke,
                        response: Some(clock.tick()),
                    });
                }
            }
            ops
        }));
    }
    std::thread::sleep(Duration::from_millis(2));
    cluster.migrate(1, 1, 2, protocol).unwrap();
    let mut history: Vec<Op> = handles
        .into_iter()
        .flat_map(|h| h.join().expect("client thread panicked"))
        .collect();
    let status = cluster.wait_migration(1, Duration::from_secs(60)).unwrap();
    assert_eq!(status.phase, MigrationPhase::Done, "{status:?}");
    let mut reader = cluster.client().unwrap();
    for key in 0..HOT_KEYS {
        let invoke = clock.tick();
        let v = reader.get(1, key).unwrap();
        history.push(Op {
            client: 99,
            key,
            kind: OpKind::Read(v),
            invoke,
            response: Some(clock.tick()),
        });
    }
    if let Err(e) = check_history(&history, |k| Some(initial(k))) {
        panic!("{} seed {seed}: {e}", protocol.name());
    }
    // Untouched keys arrived intact.
    for k in [HOT_KEYS, PRELOAD_KEYS / 2, PRELOAD_KEYS - 1] {
        assert_eq!(reader.get(1, k).unwrap(), Some(initial(k)));
    }
    assert_eq!(
        cluster.peek(1, 1, HOT_KEYS).unwrap(),
        None,
        "source cleaned up"
    );
    let src = cluster.server_stats(1).unwrap();
    assert_eq!(src.late_after_flush, 0);
    cluster.shutdown().unwrap();
}

#[test]
fn netmigrate_threads_linearizable() {
    stress(Protocol::NetMigrate, 1, false);
    stress(Protocol::NetMigrate, 2, true);
}

#[test]
fn baselines_threads_linearizable() {
    for p in [
        Protocol::StopAndCopy,
        Protocol::SourceBased,
        Protocol::Rocksteady,
        Protocol::Fulva,
    ] {
        stress(p, 3, true);
    }
}
