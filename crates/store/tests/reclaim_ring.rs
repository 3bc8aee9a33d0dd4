//! The reclaim ring (Pragh 4.1, "Invalidation and reclaim") on every fabric:
//! the in-process fabric with the latency model off and on, and a TCP loopback
//! cluster with one node per machine, where the ring lives on the owner's node
//! and producers reach it over sockets from the other nodes.
//!
//! - One producer's entry comes back to the owner's collector, exactly once.
//! - An entry comes back only once the lease has passed since it was observed
//!   (explicit `now_ns` values, no clock).
//! - A full ring reports `Full`, writes nothing and loses nothing; after a
//!   collection the producers can append again.
//! - Three machines append concurrently (real threads) into a small ring while
//!   the owner collects: every entry comes back exactly once, and each
//!   producer's entries in the order it appended them.
//! - Single-slot-at-a-time wrap-around many times over a ring whose capacity is
//!   not a power of two.

use std::sync::atomic::{AtomicUsize, Ordering};

use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_fabric::tcp::{loopback_cluster, TcpFabric};
use locus_fabric::{Fabric, MachineId, Port, RegionId};
use locus_store::addr::Addr;
use locus_store::reclaim::{
    self, append, append_blocking, read_counters, Appended, Collector, CollectorConfig, Counters,
    RingLayout,
};

const MACHINES: usize = 4;
const OWNER: MachineId = 0;

/// One fabric handle per machine: clones of one in-process fabric, or the
/// TCP node hosting that machine.
struct Cluster<F: Fabric> {
    nodes: Vec<F>,
}

impl<F: Fabric> Cluster<F> {
    fn port(&self, m: MachineId) -> F::Port {
        self.nodes[m as usize].port(m).unwrap()
    }

    /// Registers the owner's ring; returns it as a producer on machine `m` finds it.
    fn ring(&self, capacity: u64) -> (RegionId, RingLayout) {
        let layout = RingLayout::new(capacity).unwrap();
        let region = reclaim::register(&self.nodes[OWNER as usize], OWNER, layout).unwrap();
        let found = reclaim::lookup(&self.nodes[1], OWNER).unwrap();
        assert_eq!(
            found,
            (region, layout),
            "a producer derives the layout from the region"
        );
        (region, layout)
    }

    fn collector(&self, region: RegionId, layout: RingLayout, lease_ns: u64) -> Collector {
        let config = CollectorConfig {
            lease_ns,
            ..CollectorConfig::default()
        };
        Collector::open(&mut self.port(OWNER), region, layout, config).unwrap()
    }
}

fn local(model: bool) -> Cluster<LocalFabric> {
    let mut config = LocalConfig::with_machines(MACHINES);
    if !model {
        config = config.without_model();
    }
    let f = LocalFabric::new(config).unwrap();
    Cluster {
        nodes: vec![f; MACHINES],
    }
}

fn tcp() -> Cluster<TcpFabric> {
    Cluster {
        nodes: loopback_cluster(MACHINES).unwrap(),
    }
}

/// A distinct local-type address word for producer `p`'s `i`-th retired block.
fn entry(p: MachineId, i: u64) -> u64 {
    Addr::local(1 + i % 5, u64::from(p) * 1_000_000 + i)
        .unwrap()
        .encode()
}

fn origin(e: u64) -> (MachineId, u64) {
    let off = Addr::decode(e).unwrap().offset_units();
    ((off / 1_000_000) as MachineId, off % 1_000_000)
}

fn done(a: Appended) -> u64 {
    match a {
        Appended::Done { ticket } => ticket,
        other => panic!("expected the append to land, got {other:?}"),
    }
}

fn single_producer_round_trip<F: Fabric>(c: Cluster<F>) {
    let (region, layout) = c.ring(16);
    let mut collector = c.collector(region, layout, 0);
    let mut producer = c.port(2);
    let mut owner = c.port(OWNER);
    let ticket = done(append(&mut producer, OWNER, region, layout, entry(2, 7)).unwrap());
    assert_eq!(ticket, 0);
    let mut out = Vec::new();
    assert_eq!(collector.collect(&mut owner, 0, &mut out).unwrap(), 1);
    assert_eq!(out, [entry(2, 7)]);
    assert_eq!(
        collector.collect(&mut owner, 1, &mut out).unwrap(),
        0,
        "taken once"
    );
    assert_eq!(
        read_counters(&mut producer, OWNER, region).unwrap(),
        Counters { head: 1, tail: 1 }
    );
    // The slot was zeroed before head moved past it.
    assert_eq!(
        producer
            .read_word(OWNER, region, layout.slot_offset(0))
            .unwrap(),
        0
    );
}

fn entries_come_back_only_after_the_lease<F: Fabric>(c: Cluster<F>) {
    const LEASE_NS: u64 = 60_000_000_000;
    let (region, layout) = c.ring(16);
    let mut collector = c.collector(region, layout, LEASE_NS);
    let mut producer = c.port(1);
    let mut owner = c.port(OWNER);
    let mut out = Vec::new();
    let _ = done(append(&mut producer, OWNER, region, layout, entry(1, 0)).unwrap());
    let t0 = 5_000;
    assert_eq!(collector.collect(&mut owner, t0, &mut out).unwrap(), 0);
    assert_eq!(collector.pending_entries(), 1);
    let _ = done(append(&mut producer, OWNER, region, layout, entry(1, 1)).unwrap());
    let t1 = t0 + LEASE_NS / 2;
    assert_eq!(collector.collect(&mut owner, t1, &mut out).unwrap(), 0);
    assert_eq!(collector.pending_entries(), 2);
    assert_eq!(collector.next_release_ns(), Some(t0 + LEASE_NS));
    let got = collector
        .collect(&mut owner, t0 + LEASE_NS - 1, &mut out)
        .unwrap();
    assert_eq!(got, 0, "one ns before the lease");
    assert_eq!(
        collector
            .collect(&mut owner, t0 + LEASE_NS, &mut out)
            .unwrap(),
        1
    );
    assert_eq!(out, [entry(1, 0)]);
    assert_eq!(
        collector
            .collect(&mut owner, t1 + LEASE_NS - 1, &mut out)
            .unwrap(),
        0
    );
    assert_eq!(
        collector
            .collect(&mut owner, t1 + LEASE_NS, &mut out)
            .unwrap(),
        1
    );
    assert_eq!(out, [entry(1, 0), entry(1, 1)]);
    assert_eq!(collector.pending_entries(), 0);
}

fn a_full_ring_pushes_back_and_loses_nothing<F: Fabric>(c: Cluster<F>) {
    const CAPACITY: u64 = 8;
    let lease_ns = 100;
    let (region, layout) = c.ring(CAPACITY);
    let mut collector = c.collector(region, layout, lease_ns);
    let mut a = c.port(1);
    let mut b = c.port(3);
    let mut owner = c.port(OWNER);
    for i in 0..CAPACITY {
        let p = if i.is_multiple_of(2) { &mut a } else { &mut b };
        assert_eq!(
            done(append(p, OWNER, region, layout, entry(1, i)).unwrap()),
            i
        );
    }
    let full = Counters {
        head: 0,
        tail: CAPACITY,
    };
    for p in [&mut a, &mut b] {
        assert_eq!(
            append(p, OWNER, region, layout, entry(1, 999)).unwrap(),
            Appended::Full
        );
        assert_eq!(
            append_blocking(p, OWNER, region, layout, entry(1, 999), 20).unwrap(),
            Appended::Full
        );
        assert_eq!(
            read_counters(p, OWNER, region).unwrap(),
            full,
            "Full reserves nothing"
        );
    }
    // Collect some: the lease has not passed, but the slots are free again.
    let mut out = Vec::new();
    assert_eq!(collector.collect(&mut owner, 0, &mut out).unwrap(), 0);
    assert_eq!(collector.pending_entries(), CAPACITY as usize);
    for i in CAPACITY..2 * CAPACITY {
        assert_eq!(
            done(append(&mut b, OWNER, region, layout, entry(1, i)).unwrap()),
            i
        );
    }
    assert_eq!(
        append(&mut a, OWNER, region, layout, entry(1, 999)).unwrap(),
        Appended::Full
    );
    assert_eq!(collector.collect(&mut owner, 50, &mut out).unwrap(), 0);
    assert_eq!(collector.collect(&mut owner, 100, &mut out).unwrap(), 8);
    assert_eq!(collector.collect(&mut owner, 150, &mut out).unwrap(), 8);
    let want: Vec<u64> = (0..2 * CAPACITY).map(|i| entry(1, i)).collect();
    assert_eq!(out, want, "every entry once, in ticket order, no 999");
    assert_eq!(
        read_counters(&mut a, OWNER, region).unwrap(),
        Counters {
            head: 2 * CAPACITY,
            tail: 2 * CAPACITY
        }
    );
}

fn concurrent_producers_each_entry_once<F: Fabric>(c: Cluster<F>) {
    const PRODUCERS: [MachineId; 3] = [1, 2, 3];
    const PER_PRODUCER: u64 = 2000;
    const CAPACITY: u64 = 64;
    /// Retries of one append against a full ring; the consumer runs
    /// concurrently, so this is only a bound against a wedged ring.
    const SPINS_MAX: u32 = 50_000_000;
    /// Collections after the producers finish, to drain what is left.
    const DRAIN_PASSES_MAX: usize = 10_000;
    let lease_ns = 3;
    let (region, layout) = c.ring(CAPACITY);
    let mut collector = c.collector(region, layout, lease_ns);
    let finished = AtomicUsize::new(0);
    let total = PRODUCERS.len() * PER_PRODUCER as usize;
    let collected: Vec<u64> = std::thread::scope(|s| {
        for &p in &PRODUCERS {
            let mut port = c.port(p);
            let finished = &finished;
            s.spawn(move || {
                for i in 0..PER_PRODUCER {
                    let e = entry(p, i);
                    let a =
                        append_blocking(&mut port, OWNER, region, layout, e, SPINS_MAX).unwrap();
                    let _ = done(a);
                }
                finished.fetch_add(1, Ordering::Release);
            });
        }
        let mut owner = c.port(OWNER);
        let mut out = Vec::with_capacity(total);
        // A simulated clock: one tick per pass.
        let mut now_ns = 0u64;
        while finished.load(Ordering::Acquire) < PRODUCERS.len() {
            now_ns += 1;
            if collector.collect(&mut owner, now_ns, &mut out).unwrap() == 0 {
                std::thread::yield_now();
            }
        }
        for _ in 0..DRAIN_PASSES_MAX {
            now_ns += 1;
            collector.collect(&mut owner, now_ns, &mut out).unwrap();
            if out.len() >= total {
                break;
            }
        }
        out
    });
    assert_eq!(collected.len(), total, "every entry collected, none twice");
    let mut sorted = collected.clone();
    sorted.sort_unstable();
    let mut want: Vec<u64> = PRODUCERS
        .iter()
        .flat_map(|&p| (0..PER_PRODUCER).map(move |i| entry(p, i)))
        .collect();
    want.sort_unstable();
    assert_eq!(sorted, want, "the collected multiset is the appended set");
    // Each producer's appends complete in order, so they come back in order.
    let mut next = [0u64; MACHINES];
    for e in collected {
        let (p, i) = origin(e);
        assert_eq!(i, next[p as usize], "producer {p}'s entries out of order");
        next[p as usize] += 1;
    }
    let mut owner = c.port(OWNER);
    let counters = read_counters(&mut owner, OWNER, region).unwrap();
    assert_eq!(counters.head, total as u64);
    assert_eq!(counters.tail, total as u64);
    assert_eq!(collector.pending_entries(), 0);
}

fn wrap_around_many_times<F: Fabric>(c: Cluster<F>) {
    const CAPACITY: u64 = 3;
    const ENTRIES: u64 = 3 * 200 + 2;
    let (region, layout) = c.ring(CAPACITY);
    let mut collector = c.collector(region, layout, 0);
    let mut producer = c.port(3);
    let mut owner = c.port(OWNER);
    let mut out = Vec::new();
    let mut i = 0;
    let mut now_ns = 0;
    while i < ENTRIES {
        // Uneven batches, so head and tail meet at every slot.
        let batch = 1 + i % CAPACITY;
        for _ in 0..batch.min(ENTRIES - i) {
            assert_eq!(
                done(append(&mut producer, OWNER, region, layout, entry(3, i)).unwrap()),
                i
            );
            i += 1;
        }
        now_ns += 1;
        collector.collect(&mut owner, now_ns, &mut out).unwrap();
        assert_eq!(out.len() as u64, i, "lease 0: everything taken comes back");
    }
    let want: Vec<u64> = (0..ENTRIES).map(|i| entry(3, i)).collect();
    assert_eq!(out, want);
    assert_eq!(
        read_counters(&mut producer, OWNER, region).unwrap(),
        Counters {
            head: ENTRIES,
            tail: ENTRIES
        }
    );
    for t in 0..CAPACITY {
        let slot = owner
            .read_word(OWNER, region, layout.slot_offset(t))
            .unwrap();
        assert_eq!(slot, 0, "an empty ring has only empty slots");
    }
}

macro_rules! on_every_fabric {
    ($($scenario:ident),* $(,)?) => {
        mod local_without_model {
            $(#[test] fn $scenario() { super::$scenario(super::local(false)) })*
        }
        mod local_with_model {
            $(#[test] fn $scenario() { super::$scenario(super::local(true)) })*
        }
        mod tcp_loopback {
            $(#[test] fn $scenario() { super::$scenario(super::tcp()) })*
        }
    };
}

on_every_fabric!(
    single_producer_round_trip,
    entries_come_back_only_after_the_lease,
    a_full_ring_pushes_back_and_loses_nothing,
    concurrent_producers_each_entry_once,
    wrap_around_many_times,
);
