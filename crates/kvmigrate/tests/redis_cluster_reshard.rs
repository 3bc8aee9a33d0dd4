//! Redis Cluster's own live resharding (issue 16, "what a Redis user would do"): the
//! cluster-aware client follows `ASK` while a slot migrates and `MOVED` after it moved, and a
//! measured run whose every slot moves under load loses nothing acknowledged and stays
//! linearizable per key. Needs `redis-server` and `redis-cli` on PATH (CI installs them).

use std::path::Path;
use std::sync::Arc;

use locus_kvmigrate::measure::{Draw, MeasureConfig, OpChooser, Outcome};
use locus_kvmigrate::redis::cluster::{key_slot, ClusterClient, ClusterNodes};
use locus_kvmigrate::redis::measure_redis_cluster;
use locus_kvmigrate::resp::{Command, Config, Reply};
use locus_kvmigrate::Protocol;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Processes live at most this long, even if the test process dies.
const LIFETIME_S: u64 = 300;

fn nodes() -> ClusterNodes {
    ClusterNodes::start(Path::new("redis-server"), 2, LIFETIME_S)
        .unwrap_or_else(|e| panic!("{e} (CI installs redis-server in .ci/run)"))
}

fn ok(r: Reply) {
    assert!(matches!(&r, Reply::Simple(s) if s == "OK"), "{r}");
}

#[test]
fn the_client_follows_ask_during_a_slot_move_and_moved_after_it() {
    let nodes = nodes();
    let addrs = nodes.addrs();
    let (id0, id1) = (nodes.id(0).to_string(), nodes.id(1).to_string());
    let mut client = ClusterClient::connect(&addrs[..1], Config::default()).unwrap();
    let (a, b, c) = (&b"{t}a"[..], &b"{t}b"[..], &b"{t}c"[..]);
    let slot = key_slot(a);
    assert_eq!(key_slot(b), slot);
    client.set(a, b"va").unwrap();
    client.set(b, b"vb").unwrap();
    assert_eq!((client.moved, client.asked), (0, 0));

    // The slot starts moving; `a` goes, `b` stays for now.
    let (mut n0, mut n1) = (nodes.admin(0).unwrap(), nodes.admin(1).unwrap());
    let setslot = |state: &str, id: &str| {
        Command::new("CLUSTER")
            .arg("SETSLOT")
            .arg(slot.to_string())
            .arg(state)
            .arg(id)
    };
    ok(n1.call(&setslot("IMPORTING", &id0)).unwrap());
    ok(n0.call(&setslot("MIGRATING", &id1)).unwrap());
    let (host, port) = addrs[1].split_once(':').unwrap();
    let migrate = |key: &[u8]| {
        Command::new("MIGRATE")
            .arg(host)
            .arg(port)
            .arg("")
            .arg("0")
            .arg("5000")
            .arg("KEYS")
            .arg(key)
    };
    ok(n0.call(&migrate(a)).unwrap());
    assert_eq!(client.get(a).unwrap().as_deref(), Some(&b"va"[..]));
    assert_eq!(client.asked, 1, "node 0 no longer has `a`: ASK to node 1");
    assert_eq!(client.get(b).unwrap().as_deref(), Some(&b"vb"[..]));
    assert_eq!(client.asked, 1, "node 0 still has `b`");
    client.set(c, b"vc").unwrap();
    assert_eq!(
        client.asked, 2,
        "a new key of a migrating slot goes to node 1"
    );
    assert_eq!(n1.call(&Command::new("DBSIZE")).unwrap(), Reply::Integer(2));

    // The slot moved: the client's map is stale, MOVED fixes it once.
    ok(n0.call(&migrate(b)).unwrap());
    ok(n1.call(&setslot("NODE", &id1)).unwrap());
    ok(n0.call(&setslot("NODE", &id1)).unwrap());
    assert_eq!(client.get(b).unwrap().as_deref(), Some(&b"vb"[..]));
    assert_eq!(client.moved, 1);
    for (k, v) in [(a, &b"va"[..]), (b, b"vb"), (c, b"vc")] {
        assert_eq!(client.get(k).unwrap().as_deref(), Some(v));
    }
    assert_eq!(client.moved, 1, "the map was updated");
    assert_eq!(n0.call(&Command::new("DBSIZE")).unwrap(), Reply::Integer(0));
}

fn uniform(keys: u64, write_ratio: f64) -> OpChooser {
    Arc::new(move |_client, seed| {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        Box::new(move || Draw {
            write: rng.gen_bool(write_ratio),
            key: rng.gen_range(0..keys),
        })
    })
}

#[test]
fn resharding_every_slot_under_load_loses_nothing_acknowledged() {
    let mut cfg = MeasureConfig::quick(Protocol::NetMigrate);
    cfg.keys = 2_000;
    cfg.write_ratio = 0.3;
    cfg.warmup_ms = 50;
    cfg.cooldown_ms = 50;
    cfg.op_timeout_ms = 30_000;
    cfg.migration_timeout_ms = 240_000;
    let r = measure_redis_cluster(&cfg, uniform(2_000, 0.3), Path::new("redis-server"))
        .unwrap_or_else(|e| panic!("{e} (CI installs redis-server and redis-cli in .ci/run)"));
    eprintln!(
        "redis-cluster: {:.0} ops/s migrating, migration {} ms, {} ops, failed {}, lost {}, violations {}",
        r.avg_ops_per_s_migrating, r.migration_ms, r.ops, r.failed_ops, r.lost_writes, r.violations
    );
    assert_eq!(r.system, "redis-cluster");
    assert_eq!(r.outcome, Outcome::Done);
    assert_eq!(r.failed_ops, 0);
    assert_eq!(r.lost_writes, 0);
    assert_eq!(r.violations, 0, "{:?}", r.history.first_violation);
    assert!(r.history.keys_checked > 0 && r.history.keys_unchecked == 0);
    assert_eq!(r.history.ops_checked, r.ops);
    assert!(r.client_bytes > 0);
}
