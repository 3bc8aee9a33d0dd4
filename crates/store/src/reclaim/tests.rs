//! Unit tests of `reclaim.rs`.

use super::*;
use locus_fabric::local::{LocalConfig, LocalFabric, LocalPort};
use locus_fabric::{Completion, Message, Output};

const OWNER: MachineId = 0;

fn entry(i: u64) -> u64 {
    Addr::local(1 + i % 7, i).unwrap().encode()
}

fn setup(capacity: u64, config: CollectorConfig) -> (LocalFabric, RegionId, RingLayout, Collector) {
    let f = LocalFabric::new(LocalConfig::with_machines(2).without_model()).unwrap();
    let layout = RingLayout::new(capacity).unwrap();
    let region = register(&f, OWNER, layout).unwrap();
    let mut owner = f.port(OWNER).unwrap();
    let c = Collector::open(&mut owner, region, layout, config).unwrap();
    (f, region, layout, c)
}

fn config(lease_ns: u64) -> CollectorConfig {
    CollectorConfig {
        lease_ns,
        ..CollectorConfig::default()
    }
}

#[test]
fn layout_sizes_and_limits() {
    assert_eq!(RingLayout::default().capacity, CAPACITY_DEFAULT);
    assert_eq!(RingLayout::new(1).unwrap().region_bytes(), 24);
    assert_eq!(RingLayout::new(3).unwrap().slot_offset(4), 16 + 8);
    assert!(RingLayout::new(0).is_err());
    let max = RingLayout::new(CAPACITY_MAX).unwrap();
    assert!(max.region_bytes() <= REGION_BYTES_MAX);
    let e = RingLayout::new(CAPACITY_MAX + 1).unwrap_err().to_string();
    assert!(e.contains("capacity"), "{e}");
    for cap in [1, 3, 64, CAPACITY_DEFAULT] {
        let l = RingLayout::new(cap).unwrap();
        assert_eq!(RingLayout::from_region_bytes(l.region_bytes()).unwrap(), l);
    }
    assert!(RingLayout::from_region_bytes(16).is_err());
    assert!(RingLayout::from_region_bytes(20).is_err());
}

#[test]
fn collector_config_limits() {
    assert!(CollectorConfig::default().validate().is_ok());
    let bad = |c: CollectorConfig| c.validate().is_err();
    assert!(bad(CollectorConfig {
        pending_entries_max: 0,
        ..CollectorConfig::default()
    }));
    assert!(bad(CollectorConfig {
        scan_entries_max: 0,
        ..CollectorConfig::default()
    }));
    assert!(bad(CollectorConfig {
        scan_entries_max: SCAN_ENTRIES_LIMIT + 1,
        ..CollectorConfig::default()
    }));
}

#[test]
fn open_rejects_a_layout_larger_than_the_region() {
    let f = LocalFabric::new(LocalConfig::with_machines(1).without_model()).unwrap();
    let region = register(&f, OWNER, RingLayout::new(4).unwrap()).unwrap();
    let mut p = f.port(OWNER).unwrap();
    let big = RingLayout::new(5).unwrap();
    assert!(Collector::open(&mut p, region, big, CollectorConfig::default()).is_err());
    assert_eq!(
        lookup(&f, OWNER).unwrap(),
        (region, RingLayout::new(4).unwrap())
    );
}

#[test]
fn lease_counts_from_observation_and_stamps_never_go_back() {
    let (f, region, layout, mut c) = setup(8, config(100));
    let mut p = f.port(1).unwrap();
    let mut owner = f.port(OWNER).unwrap();
    let mut out = Vec::new();
    assert_eq!(
        append(&mut p, OWNER, region, layout, entry(1)).unwrap(),
        Appended::Done { ticket: 0 }
    );
    assert_eq!(c.collect(&mut owner, 10, &mut out).unwrap(), 0);
    assert_eq!(c.next_release_ns(), Some(110));
    assert_eq!(c.collect(&mut owner, 109, &mut out).unwrap(), 0);
    assert_eq!(c.collect(&mut owner, 110, &mut out).unwrap(), 1);
    assert_eq!(out, [entry(1)]);
    // Time passed in going backwards never shortens a lease.
    let _ = append(&mut p, OWNER, region, layout, entry(2)).unwrap();
    assert_eq!(c.collect(&mut owner, 50, &mut out).unwrap(), 0);
    assert_eq!(c.next_release_ns(), Some(210), "stamped 110, not 50");
    assert_eq!(c.collect(&mut owner, 209, &mut out).unwrap(), 0);
    assert_eq!(c.collect(&mut owner, 210, &mut out).unwrap(), 1);
    assert_eq!(out, [entry(1), entry(2)]);
    assert_eq!(c.next_release_ns(), None);
}

#[test]
fn a_full_fifo_leaves_entries_in_the_ring() {
    let cfg = CollectorConfig {
        lease_ns: 1000,
        pending_entries_max: 4,
        scan_entries_max: 2,
    };
    let (f, region, layout, mut c) = setup(4, cfg);
    let mut p = f.port(1).unwrap();
    let mut owner = f.port(OWNER).unwrap();
    let mut out = Vec::new();
    for i in 0..4 {
        assert!(matches!(
            append(&mut p, OWNER, region, layout, entry(i)).unwrap(),
            Appended::Done { .. }
        ));
    }
    // scan_entries_max bounds one pass.
    c.collect(&mut owner, 0, &mut out).unwrap();
    assert_eq!(c.pending_entries(), 2);
    c.collect(&mut owner, 0, &mut out).unwrap();
    assert_eq!(c.pending_entries(), 4);
    for i in 4..8 {
        assert!(matches!(
            append(&mut p, OWNER, region, layout, entry(i)).unwrap(),
            Appended::Done { .. }
        ));
    }
    c.collect(&mut owner, 1, &mut out).unwrap();
    assert_eq!(c.pending_entries(), 4, "the FIFO is full");
    assert_eq!(
        append(&mut p, OWNER, region, layout, entry(99)).unwrap(),
        Appended::Full
    );
    // The lease passes: the FIFO empties and takes the next entries in the same pass.
    assert_eq!(c.collect(&mut owner, 1000, &mut out).unwrap(), 4);
    assert_eq!(c.pending_entries(), 2);
    assert_eq!(out, (0..4).map(entry).collect::<Vec<_>>());
    assert!(out.iter().all(|&e| e != entry(99)));
}

#[test]
fn an_unwritten_reservation_holds_back_later_entries() {
    let (f, region, layout, mut c) = setup(4, config(0));
    let mut p = f.port(1).unwrap();
    let mut owner = f.port(OWNER).unwrap();
    let mut out = Vec::new();
    // A producer reserved ticket 0 and has not written it yet.
    assert_eq!(p.cas(OWNER, region, TAIL_OFFSET, 0, 1).unwrap(), 0);
    assert_eq!(
        append(&mut p, OWNER, region, layout, entry(1)).unwrap(),
        Appended::Done { ticket: 1 }
    );
    assert_eq!(c.collect(&mut owner, 0, &mut out).unwrap(), 0);
    assert_eq!(c.head(), 0);
    p.write_word(OWNER, region, layout.slot_offset(0), entry(0))
        .unwrap();
    assert_eq!(c.collect(&mut owner, 0, &mut out).unwrap(), 2);
    assert_eq!(out, [entry(0), entry(1)], "ticket order");
    let counters = read_counters(&mut p, OWNER, region).unwrap();
    assert_eq!(counters, Counters { head: 2, tail: 2 });
}

#[test]
#[should_panic(expected = "nonzero")]
fn a_zero_entry_is_a_bug() {
    let (f, region, layout, _c) = setup(4, config(0));
    let mut p = f.port(1).unwrap();
    let _ = append(&mut p, OWNER, region, layout, 0);
}

/// A port whose every CAS loses a race: another producer takes the tail first.
struct Racing {
    inner: LocalPort,
    rival: LocalPort,
    cas_calls: u32,
}

impl Port for Racing {
    fn machine(&self) -> MachineId {
        self.inner.machine()
    }
    fn machine_count(&self) -> usize {
        self.inner.machine_count()
    }
    fn post(&mut self, wr: WorkRequest) -> locus_fabric::Result<()> {
        self.inner.post(wr)
    }
    fn poll(&mut self, out: &mut Vec<Completion>) -> locus_fabric::Result<usize> {
        self.inner.poll(out)
    }
    fn wait(&mut self, out: &mut Vec<Completion>) -> locus_fabric::Result<usize> {
        self.inner.wait(out)
    }
    fn inflight(&self) -> usize {
        self.inner.inflight()
    }
    fn execute(&mut self, wr: WorkRequest) -> locus_fabric::Result<Output> {
        self.inner.execute(wr)
    }
    fn cas(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        expected: u64,
        new: u64,
    ) -> locus_fabric::Result<u64> {
        self.cas_calls += 1;
        self.rival.fetch_add(target, region, offset, 1)?;
        self.inner.cas(target, region, offset, expected, new)
    }
    fn send(&mut self, target: MachineId, payload: &[u8]) -> locus_fabric::Result<()> {
        self.inner.send(target, payload)
    }
    fn try_recv(&mut self) -> locus_fabric::Result<Option<Message>> {
        self.inner.try_recv()
    }
}

#[test]
fn losing_every_cas_race_is_bounded() {
    let (f, region, layout, _c) = setup(CAPACITY_DEFAULT, config(0));
    let mut p = Racing {
        inner: f.port(1).unwrap(),
        rival: f.port(1).unwrap(),
        cas_calls: 0,
    };
    assert_eq!(
        append(&mut p, OWNER, region, layout, entry(5)).unwrap(),
        Appended::Contended
    );
    assert_eq!(p.cas_calls, APPEND_CAS_RETRIES_MAX + 1);
    // Nothing was written anywhere.
    let mut owner = f.port(OWNER).unwrap();
    for t in 0..=u64::from(APPEND_CAS_RETRIES_MAX) + 1 {
        assert_eq!(
            owner
                .read_word(OWNER, region, layout.slot_offset(t))
                .unwrap(),
            0
        );
    }
    assert_eq!(
        append_blocking(&mut p, OWNER, region, layout, entry(5), 3).unwrap(),
        Appended::Contended
    );
    assert_eq!(p.cas_calls, 5 * (APPEND_CAS_RETRIES_MAX + 1));
}

#[test]
fn a_rival_filling_the_ring_turns_a_lost_race_into_full() {
    // Capacity 2: after two lost races the ring is full of the rival's tickets.
    let (f, region, layout, _c) = setup(2, config(0));
    let mut p = Racing {
        inner: f.port(1).unwrap(),
        rival: f.port(1).unwrap(),
        cas_calls: 0,
    };
    assert_eq!(
        append(&mut p, OWNER, region, layout, entry(5)).unwrap(),
        Appended::Full
    );
    assert_eq!(p.cas_calls, 2);
}
