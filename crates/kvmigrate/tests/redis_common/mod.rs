//! Shared driver of the `redis_*` tests: two private `redis-server`s behind the agents and the
//! router, closed-loop clients recording per-key histories through a migration, a read-back of
//! every key, and the linearizability check.
//!
//! Needs `redis-server` on PATH (Debian: `apt-get install -y redis-server`); without it the
//! tests fail with that advice, they do not skip.

#![allow(dead_code)] // each test binary uses part of it

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use locus_kvmigrate::check::{check_history, Op, OpKind};
use locus_kvmigrate::redis::{agent_resp_config, start_redis_cluster, RedisProcess, RedisShard};
use locus_kvmigrate::router::{RouterConfig, RouterStats};
use locus_kvmigrate::runtime::{ClusterConfig, CpuBudget, HistoryClock};
use locus_kvmigrate::server::ServerStats;
use locus_kvmigrate::table::ShardStore;
use locus_kvmigrate::{Geometry, MigrationPhase, MigrationStatus, Protocol, ServerConfig};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Ops per client before the migration starts (the load is running when it starts).
pub const WARMUP_OPS: u64 = 100;
/// Ops per client after the migration ended (the new placement serves traffic).
pub const AFTER_OPS: u64 = 100;
/// Ops per client at most (bounds each key's history for the checker).
pub const OPS_PER_CLIENT_MAX: u64 = 30_000;
/// Bound on any phase of a run (a loaded 2-core machine is slow, never this slow).
pub const PHASE_MS_MAX: u64 = 60_000;

/// What one run does.
pub struct Scenario {
    pub protocol: Protocol,
    /// Keys 0..keys loaded on the source.
    pub keys: u64,
    /// Clients touch keys 0..hot_keys only (so histories are concurrent per key).
    pub hot_keys: u64,
    pub clients: u16,
    pub write_ratio: f64,
    pub geometry: Geometry,
    pub router: RouterConfig,
    pub server: ServerConfig,
    pub op_timeout_ms: u64,
    /// Kill the destination's redis-server once this many groups are done.
    pub kill_destination_after_groups: Option<u32>,
    /// The destination agent's CPU budget (a slow destination keeps the migration running).
    pub destination_budget: Option<CpuBudget>,
    pub seed: u64,
}

impl Scenario {
    pub fn new(protocol: Protocol) -> Self {
        let geometry = Geometry::new(12, 2).expect("geometry");
        // One group at a time in small batches: the migration spans many client round trips.
        let mut server = ServerConfig::new(0, 0, geometry);
        server.groups_inflight_max = 1;
        server.batch_items_max = 4;
        // Failure detection only: a loaded machine may stall a thread for seconds, and a
        // spurious abort is not what these runs test (the kill test sets its own).
        server.ack_timeout_us = 30_000_000;
        Self {
            protocol,
            keys: 6_000,
            hot_keys: 128,
            clients: 3,
            write_ratio: 0.3,
            geometry,
            router: RouterConfig::default(),
            server,
            op_timeout_ms: 10_000,
            kill_destination_after_groups: None,
            destination_budget: None,
            seed: 7,
        }
    }
}

/// What a run saw.
pub struct Outcome {
    pub status: MigrationStatus,
    pub failed_ops: u64,
    pub ops: u64,
    pub router: RouterStats,
    pub source: ServerStats,
    pub destination: Option<ServerStats>,
    /// The final value of every key, read through the router.
    pub finals: Vec<Option<Vec<u8>>>,
    pub source_redis: RedisProcess,
    pub destination_redis: RedisProcess,
}

pub fn initial(key: u64) -> Vec<u8> {
    let mut v = key.to_le_bytes().to_vec();
    v.extend_from_slice(b"initial");
    v
}

fn written(client: u16, counter: u64) -> Vec<u8> {
    let mut v = vec![0xC0, client as u8];
    v.extend_from_slice(&counter.to_le_bytes());
    v
}

pub fn start_redis() -> RedisProcess {
    RedisProcess::start(Path::new("redis-server")).unwrap_or_else(|e| {
        panic!("{e}\n(CI installs redis-server in .ci/run; these tests do not skip without it)")
    })
}

/// A view of `shard` in the Redis at `addr`, bypassing agents and router.
pub fn inspect(redis: &RedisProcess, shard: u16, geometry: Geometry) -> RedisShard {
    RedisShard::open(redis.addr(), agent_resp_config(), shard, geometry)
        .unwrap_or_else(|e| panic!("inspect redis at {}: {e}", redis.addr()))
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_millis(PHASE_MS_MAX);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Runs `s` and checks every history; panics with the checker's message on a violation.
pub fn run(s: &Scenario) -> Outcome {
    let (o, check) = run_unchecked(s);
    if let Err(e) = check {
        panic!("{} over redis: {e}", s.protocol.name());
    }
    o
}

/// Runs `s`; the second part is the linearizability checker's verdict.
pub fn run_unchecked(s: &Scenario) -> (Outcome, Result<(), String>) {
    let source_redis = start_redis();
    let mut destination_redis = start_redis();
    let mut cc = ClusterConfig::new(
        2,
        s.clients + 1,
        ServerConfig {
            geometry: s.geometry,
            ..s.server.clone()
        },
    );
    cc.router = s.router.clone();
    cc.op_timeout_ms = s.op_timeout_ms;
    if let Some(b) = s.destination_budget {
        cc.budgets.insert(2, b);
    }
    let addrs = [
        source_redis.addr().to_string(),
        destination_redis.addr().to_string(),
    ];
    let cluster = start_redis_cluster(cc, &addrs).expect("start the cluster over redis");
    let pairs: Vec<(u64, Vec<u8>)> = (0..s.keys).map(|k| (k, initial(k))).collect();
    for chunk in pairs.chunks(500) {
        cluster.load(1, chunk.to_vec()).expect("load the source");
    }

    let stop = Arc::new(AtomicBool::new(false));
    let clock = Arc::new(HistoryClock::default());
    let history = Arc::new(Mutex::new(Vec::<Op>::new()));
    let counts: Arc<Vec<AtomicU64>> = Arc::new((0..s.clients).map(|_| AtomicU64::new(0)).collect());
    let failed = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for c in 0..s.clients {
        let mut client = cluster.client().expect("client");
        let (stop, clock, history, counts, failed) = (
            stop.clone(),
            clock.clone(),
            history.clone(),
            counts.clone(),
            failed.clone(),
        );
        let (hot, ratio) = (s.hot_keys, s.write_ratio);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(s.seed * 1000 + c as u64);
        handles.push(std::thread::spawn(move || {
            let mut ops = Vec::new();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) && n < OPS_PER_CLIENT_MAX {
                let key = rng.gen_range(0..hot);
                let invoke = clock.tick();
                if rng.gen_bool(ratio) {
                    let v = written(c, n);
                    let r = client.set(1, key, v.clone());
                    let response = clock.tick();
                    if r.is_err() {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                    ops.push(Op {
                        client: c as u32,
                        key,
                        kind: OpKind::Write(Some(v)),
                        invoke,
                        response: r.is_ok().then_some(response),
                    });
                } else {
                    let r = client.get(1, key);
                    let response = clock.tick();
                    match r {
                        Ok(v) => ops.push(Op {
                            client: c as u32,
                            key,
                            kind: OpKind::Read(v),
                            invoke,
                            response: Some(response),
                        }),
                        Err(_) => {
                            failed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                n += 1;
                counts[c as usize].store(n, Ordering::Relaxed);
            }
            match history.lock() {
                Ok(mut h) => h.extend(ops),
                Err(p) => p.into_inner().extend(ops),
            }
        }));
    }
    let all_did = |n: u64| counts.iter().all(|c| c.load(Ordering::Relaxed) >= n);
    wait_until("the clients' warm-up", || all_did(WARMUP_OPS));
    cluster
        .migrate(1, 1, 2, s.protocol)
        .expect("start the migration");
    if let Some(groups) = s.kill_destination_after_groups {
        wait_until("migration progress before the kill", || {
            cluster.migration_status().iter().any(|m| {
                m.shard == 1
                    && (m.groups_done >= groups
                        || matches!(m.phase, MigrationPhase::Done | MigrationPhase::Aborted))
            })
        });
        destination_redis.kill();
    }
    let status = cluster
        .wait_migration(1, Duration::from_millis(PHASE_MS_MAX))
        .expect("the migration ends");
    let after: Vec<u64> = counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    wait_until("the clients' ops after the migration", || {
        counts
            .iter()
            .zip(&after)
            .all(|(c, a)| c.load(Ordering::Relaxed) >= (a + AFTER_OPS).min(OPS_PER_CLIENT_MAX))
    });
    stop.store(true, Ordering::SeqCst);
    for h in handles {
        h.join().expect("client thread");
    }

    // Read every key back through the router, as part of the history.
    let mut reader = cluster.client().expect("reader");
    let mut history = match Arc::try_unwrap(history) {
        Ok(m) => m.into_inner().unwrap_or_else(|p| p.into_inner()),
        Err(_) => panic!("client threads still hold the history"),
    };
    let mut finals = Vec::new();
    for key in 0..s.keys {
        let invoke = clock.tick();
        let v = reader
            .get(1, key)
            .unwrap_or_else(|e| panic!("final read of key {key}: {e}"));
        history.push(Op {
            client: u32::MAX,
            key,
            kind: OpKind::Read(v.clone()),
            invoke,
            response: Some(clock.tick()),
        });
        finals.push(v);
    }
    let ops = history.len() as u64;
    let keys = s.keys;
    let check = check_history(&history, |k| (k < keys).then(|| initial(k)));

    let router = cluster.router_stats();
    let source = cluster.server_stats(1).expect("source stats");
    let destination = cluster.server_stats(2).ok();
    eprintln!(
        "{}: {ops} ops checked, {} failed\n  status {status:?}\n  router {router:?}\n  \
         source {source:?}\n  destination {destination:?}\n  store failures {:?}",
        s.protocol.name(),
        failed.load(Ordering::Relaxed),
        cluster.store_failures()
    );
    cluster.shutdown().expect("clean shutdown");
    let outcome = Outcome {
        status,
        failed_ops: failed.load(Ordering::Relaxed),
        ops,
        router,
        source,
        destination,
        finals,
        source_redis,
        destination_redis,
    };
    (outcome, check)
}

/// After a completed migration: every key is in the destination's Redis with the value read
/// through the router, and the source's Redis is empty (cleaned up after TERMINATE).
pub fn assert_all_at_destination(s: &Scenario, o: &Outcome) {
    let dst = inspect(&o.destination_redis, 1, s.geometry);
    for key in 0..s.keys {
        let item = dst.get(key);
        assert_eq!(
            item.as_ref().and_then(|i| i.value.clone()),
            o.finals[key as usize],
            "key {key} at the destination's redis"
        );
    }
    assert_eq!(dst.live(), s.keys as usize);
    assert!(dst.health().is_ok());
    let src = inspect(&o.source_redis, 1, s.geometry);
    assert_eq!(src.live(), 0, "source cleaned up");
    for key in 0..s.keys {
        assert_eq!(src.get(key), None, "key {key} left at the source");
    }
}
