//! The one conformance suite every fabric implementation must pass.
//!
//! A [`Cluster`] gives, for each machine, the fabric instance of the process
//! that hosts it (the same instance for every machine of the in-process
//! fabric; one node per machine for TCP). Each check registers its own regions
//! and panics with a message on the first violation. [`conformance_suite!`]
//! turns the checks into `#[test]` functions for one implementation; the
//! fencing checks (`conformance/fencing.rs`) need the fabric to implement
//! [`crate::Fencing`], as every fabric of the crate does.

use std::collections::HashSet;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use crate::{Completion, Fabric, FabricError, MachineId, Output, Port, RegionId, WorkRequest};

mod fencing;
pub use fencing::{
    a_fenced_machine_serves_nothing_and_issues_nothing, a_newer_incarnation_is_admitted,
    a_recovering_machine_holds_its_memory, a_stale_requester_is_refused,
    a_stale_view_of_the_target_is_refused,
    an_op_to_a_peer_marked_down_fails_naming_machine_and_epoch, epochs_zero_change_nothing,
    fencing_names_hosted_machines_only,
};

/// Machines every check needs at least.
pub const MACHINES_MIN: usize = 3;

/// A running cluster under test.
pub trait Cluster: Sync {
    /// The fabric type.
    type F: Fabric;
    /// The fabric instance hosting `machine` (ports for `machine` open here).
    fn node(&self, machine: MachineId) -> &Self::F;
    /// Machines in the cluster.
    fn machines(&self) -> usize {
        self.node(0).machine_count()
    }
}

fn region_on<C: Cluster>(c: &C, machine: MachineId, name: &str, len: u64) -> RegionId {
    c.node(machine)
        .register(machine, name, len)
        .unwrap_or_else(|e| panic!("register {name} on {machine}: {e}"))
        .id
}

fn port<C: Cluster>(c: &C, machine: MachineId) -> <C::F as Fabric>::Port {
    c.node(machine)
        .port(machine)
        .unwrap_or_else(|e| panic!("port for {machine}: {e}"))
}

/// Drains `n` completions from `p`, with a generous bound so a lost completion fails instead of hanging.
pub fn drain<P: Port>(p: &mut P, n: usize) -> Vec<Completion> {
    let mut out = Vec::with_capacity(n);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while out.len() < n {
        p.wait(&mut out).expect("wait");
        assert!(
            std::time::Instant::now() < deadline,
            "only {} of {n} completions after 30 s",
            out.len()
        );
    }
    assert_eq!(out.len(), n, "more completions than posted");
    out
}

/// Regions start zeroed; writes are read back, locally and remotely; lookup finds regions by name.
pub fn read_write_round_trip<C: Cluster>(c: &C) {
    let r1 = region_on(c, 1, "rw", 4096);
    let info = c
        .node(0)
        .lookup(1, "rw")
        .expect("lookup from another machine");
    assert_eq!(info.id, r1);
    assert_eq!(info.len_bytes, 4096);
    let mut p0 = port(c, 0);
    let mut p1 = port(c, 1);
    let mut buf = vec![0xAAu8; 64];
    p0.read(1, r1, 0, &mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 0), "a new region is zero-filled");
    let data: Vec<u8> = (0..256u32).map(|i| (i * 7 + 3) as u8).collect();
    p0.write(1, r1, 512, &data).unwrap();
    let mut back = vec![0u8; 256];
    p1.read(1, r1, 512, &mut back).unwrap();
    assert_eq!(back, data, "local read sees the remote write");
    p0.read(1, r1, 512, &mut back).unwrap();
    assert_eq!(back, data, "remote read sees the remote write");
    p1.write_word(1, r1, 4088, 0xDEAD_BEEF_0123_4567).unwrap();
    assert_eq!(p0.read_word(1, r1, 4088).unwrap(), 0xDEAD_BEEF_0123_4567);
    // Words are little-endian on every fabric.
    let mut raw = [0u8; 8];
    p0.read(1, r1, 4088, &mut raw).unwrap();
    assert_eq!(raw, 0xDEAD_BEEF_0123_4567u64.to_le_bytes());
    // A zero-length access is legal and does nothing.
    p0.write(1, r1, 0, &[]).unwrap();
}

/// CAS swaps only on a match and always returns the previous word; fetch-add returns the previous word and wraps.
pub fn cas_and_fetch_add_semantics<C: Cluster>(c: &C) {
    let r = region_on(c, 2, "atomics", 64);
    let mut p = port(c, 0);
    assert_eq!(
        p.cas(2, r, 8, 0, 5).unwrap(),
        0,
        "successful CAS returns the expected value"
    );
    assert_eq!(p.read_word(2, r, 8).unwrap(), 5);
    assert_eq!(
        p.cas(2, r, 8, 4, 9).unwrap(),
        5,
        "failed CAS returns the current value"
    );
    assert_eq!(
        p.read_word(2, r, 8).unwrap(),
        5,
        "failed CAS changes nothing"
    );
    assert_eq!(p.fetch_add(2, r, 16, 3).unwrap(), 0);
    assert_eq!(p.fetch_add(2, r, 16, 4).unwrap(), 3);
    assert_eq!(p.read_word(2, r, 16).unwrap(), 7);
    p.write_word(2, r, 24, u64::MAX).unwrap();
    assert_eq!(p.fetch_add(2, r, 24, 2).unwrap(), u64::MAX);
    assert_eq!(p.read_word(2, r, 24).unwrap(), 1, "fetch-add wraps");
    // Atomics through post/poll give the same answers.
    p.post(WorkRequest::cas(7, 2, r, 8, 5, 6)).unwrap();
    p.post(WorkRequest::fetch_add(8, 2, r, 16, 1)).unwrap();
    let mut done = drain(&mut p, 2);
    done.sort_by_key(|c| c.id);
    assert_eq!(done[0].result, Ok(Output::Word(5)));
    assert_eq!(done[1].result, Ok(Output::Word(7)));
    assert_eq!(p.read_word(2, r, 8).unwrap(), 6);
}

/// Threads acting as different machines race CAS increments on one word: none is lost.
pub fn concurrent_cas_races<C: Cluster>(c: &C) {
    let r = region_on(c, 0, "race", 64);
    let threads = c.machines().min(4);
    let rounds = 500u64;
    let barrier = Arc::new(Barrier::new(threads));
    let winners: Vec<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let barrier = Arc::clone(&barrier);
                let mut p = port(c, t as MachineId);
                s.spawn(move || {
                    barrier.wait();
                    // One-shot race: exactly one thread claims word 1.
                    let claimed = p.cas(0, r, 8, 0, t as u64 + 1).unwrap() == 0;
                    for _ in 0..rounds {
                        let mut cur = p.read_word(0, r, 0).unwrap();
                        loop {
                            let prev = p.cas(0, r, 0, cur, cur + 1).unwrap();
                            if prev == cur {
                                break;
                            }
                            cur = prev;
                        }
                        p.fetch_add(0, r, 16, 1).unwrap();
                    }
                    u64::from(claimed)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("racer"))
            .collect()
    });
    let mut p = port(c, 0);
    assert_eq!(
        p.read_word(0, r, 0).unwrap(),
        threads as u64 * rounds,
        "CAS increments lost"
    );
    assert_eq!(
        p.read_word(0, r, 16).unwrap(),
        threads as u64 * rounds,
        "fetch-adds lost"
    );
    assert_eq!(
        winners.iter().sum::<u64>(),
        1,
        "exactly one CAS from 0 wins"
    );
    let w = p.read_word(0, r, 8).unwrap();
    assert!(w >= 1 && w <= threads as u64);
}

/// Every aligned word is atomic: a reader never sees a torn word under concurrent writers.
pub fn word_atomicity<C: Cluster>(c: &C) {
    let r = region_on(c, 1, "torn", 64);
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let mut p = port(c, (t as MachineId) * 2);
            s.spawn(move || {
                for i in 0..2000u64 {
                    let byte = ((i * 2 + t) % 255 + 1) as u8;
                    p.write(1, r, 0, &[byte; 32]).unwrap();
                }
            });
        }
        let mut p = port(c, 0);
        s.spawn(move || {
            let mut buf = [0u8; 32];
            for _ in 0..2000 {
                p.read(1, r, 0, &mut buf).unwrap();
                for w in buf.chunks_exact(8) {
                    assert!(w.iter().all(|&b| b == w[0]), "torn word {w:?}");
                }
            }
        });
    });
}

/// Out-of-range machines, regions, offsets and misaligned accesses are errors, synchronously and in completions.
pub fn bounds_errors<C: Cluster>(c: &C) {
    let r = region_on(c, 1, "bounds", 128);
    let n = c.machines() as MachineId;
    let mut p = port(c, 0);
    let mut b8 = [0u8; 8];
    assert!(matches!(
        p.read(1, r, 128, &mut b8),
        Err(FabricError::OutOfBounds {
            region_len: 128,
            ..
        })
    ));
    let mut b16 = [0u8; 16];
    assert!(matches!(
        p.read(1, r, 120, &mut b16),
        Err(FabricError::OutOfBounds { .. })
    ));
    assert!(matches!(
        p.write(1, r, u64::MAX - 7, &b8),
        Err(FabricError::OutOfBounds { .. })
    ));
    assert!(matches!(
        p.read(1, r, 4, &mut b8),
        Err(FabricError::Misaligned { .. })
    ));
    assert!(matches!(
        p.write(1, r, 0, &[1, 2, 3]),
        Err(FabricError::Misaligned { .. })
    ));
    assert!(matches!(
        p.cas(1, r, 128, 0, 1),
        Err(FabricError::OutOfBounds { .. })
    ));
    assert!(matches!(
        p.fetch_add(1, r, 3, 1),
        Err(FabricError::Misaligned { .. })
    ));
    assert!(matches!(
        p.read(1, RegionId(999), 0, &mut b8),
        Err(FabricError::NoSuchRegion { .. })
    ));
    assert!(matches!(
        p.read(n, r, 0, &mut b8),
        Err(FabricError::NoSuchMachine { .. })
    ));
    assert!(matches!(
        c.node(0).lookup(1, "nope"),
        Err(FabricError::NoSuchRegion { .. })
    ));
    assert!(matches!(
        c.node(1).register(1, "bounds", 64),
        Err(FabricError::DuplicateRegion { .. })
    ));
    assert!(matches!(
        c.node(0).port(n),
        Err(FabricError::NoSuchMachine { .. })
    ));
    // A failed write changes nothing.
    assert!(p.write(1, r, 120, &[7u8; 16]).is_err());
    assert_eq!(
        p.read_word(1, r, 120).unwrap(),
        0,
        "a rejected write must not partly apply"
    );
    // The same errors arrive as completions when posted, and do not disturb the port.
    p.post(WorkRequest::read(1, 1, r, 128, 8)).unwrap();
    p.post(WorkRequest::read(2, 1, r, 0, 8)).unwrap();
    p.post(WorkRequest::cas(3, n, r, 0, 0, 1)).unwrap();
    let mut done = drain(&mut p, 3);
    done.sort_by_key(|c| c.id);
    assert!(matches!(
        done[0].result,
        Err(FabricError::OutOfBounds { .. })
    ));
    assert_eq!(done[1].result, Ok(Output::Data(vec![0; 8])));
    assert!(matches!(
        done[2].result,
        Err(FabricError::NoSuchMachine { .. })
    ));
}

/// Many operations in flight on one port: every completion arrives once with its id and data,
/// per-target order holds, and synchronous calls in between do not steal completions.
pub fn pipelining<C: Cluster>(c: &C) {
    let k = 64u64;
    let r1 = region_on(c, 1, "pipe", 8 * 1024);
    let r2 = region_on(c, 2, "pipe", 8 * 1024);
    let mut p = port(c, 0);
    for i in 0..k {
        p.post(WorkRequest::write(
            i,
            1,
            r1,
            i * 8,
            (i * 3).to_le_bytes().to_vec(),
        ))
        .unwrap();
    }
    // A synchronous read in the middle sees earlier posted writes to the same target.
    assert_eq!(p.read_word(1, r1, 8 * (k - 1)).unwrap(), (k - 1) * 3);
    let writes = drain(&mut p, k as usize);
    assert!(writes.iter().all(|c| c.result.is_ok()));
    let ids: HashSet<u64> = writes.iter().map(|c| c.id).collect();
    assert_eq!(ids.len(), k as usize, "each completion exactly once");
    for i in 0..k {
        p.post(WorkRequest::read(
            1000 + i,
            1 + (i % 2) as MachineId,
            if i % 2 == 0 { r1 } else { r2 },
            i * 8,
            8,
        ))
        .unwrap();
    }
    assert_eq!(p.inflight(), k as usize);
    let reads = drain(&mut p, k as usize);
    assert_eq!(p.inflight(), 0);
    let mut last_per_target = [None::<u64>; 3];
    for comp in &reads {
        let i = comp.id - 1000;
        let expect = if i % 2 == 0 {
            (i * 3).to_le_bytes().to_vec()
        } else {
            vec![0; 8]
        };
        assert_eq!(comp.result, Ok(Output::Data(expect)), "read {i}");
        let t = comp.target as usize;
        if let Some(prev) = last_per_target[t] {
            assert!(comp.id > prev, "completions to one target in posting order");
        }
        last_per_target[t] = Some(comp.id);
    }
    // Fenced requests complete after everything before them.
    p.post(WorkRequest::write(
        1,
        1,
        r1,
        0,
        42u64.to_le_bytes().to_vec(),
    ))
    .unwrap();
    p.post(WorkRequest::read(2, 2, r2, 0, 8).fenced()).unwrap();
    let done = drain(&mut p, 2);
    assert_eq!(done.iter().map(|c| c.id).collect::<Vec<_>>(), vec![1, 2]);
    // A fenced request to the port's own machine also waits for earlier remote ones.
    p.post(WorkRequest::write(3, 1, r1, 8, 7u64.to_le_bytes().to_vec()))
        .unwrap();
    let r0 = region_on(c, 0, "pipe", 64);
    p.post(WorkRequest::read(4, 0, r0, 0, 8).fenced()).unwrap();
    let done = drain(&mut p, 2);
    assert_eq!(
        done.iter().map(|c| c.id).collect::<Vec<_>>(),
        vec![3, 4],
        "fence to the local machine"
    );
    // A local request posted after a fenced local one completes after it (per-target order).
    p.post(WorkRequest::read(5, 1, r1, 0, 8)).unwrap();
    p.post(WorkRequest::write(6, 0, r0, 0, vec![1; 8]).fenced())
        .unwrap();
    p.post(WorkRequest::read(7, 0, r0, 0, 8)).unwrap();
    let done = drain(&mut p, 3);
    let local: Vec<u64> = done
        .iter()
        .filter(|c| c.target == 0)
        .map(|c| c.id)
        .collect();
    assert_eq!(
        local,
        vec![6, 7],
        "completions to one target in posting order"
    );
    let last = done.iter().find(|c| c.id == 7).map(|c| c.result.clone());
    assert_eq!(
        last,
        Some(Ok(Output::Data(vec![1; 8]))),
        "the read sees the fenced write"
    );
    // Nothing in flight: wait returns at once.
    let mut none = Vec::new();
    assert_eq!(p.wait(&mut none).unwrap(), 0);
}

/// Two-sided messages arrive once, in order per sender, with the sender's id; size limits are errors.
pub fn message_delivery<C: Cluster>(c: &C) {
    let mut a = port(c, 0);
    let mut b = port(c, 2);
    let mut rx = port(c, 1);
    for i in 0..20u32 {
        a.send(1, &i.to_le_bytes()).unwrap();
        b.send(1, &(100 + i).to_le_bytes()).unwrap();
    }
    a.send(0, b"self").unwrap();
    let mut from_a = Vec::new();
    let mut from_b = Vec::new();
    while from_a.len() + from_b.len() < 40 {
        let m = rx
            .recv_timeout(Duration::from_secs(10))
            .unwrap()
            .expect("message lost");
        let v = u32::from_le_bytes(m.payload[..].try_into().expect("4-byte payload"));
        match m.from {
            0 => from_a.push(v),
            2 => from_b.push(v),
            other => panic!("message from unexpected machine {other}"),
        }
    }
    assert_eq!(from_a, (0..20).collect::<Vec<_>>());
    assert_eq!(from_b, (100..120).collect::<Vec<_>>());
    assert_eq!(
        rx.recv_timeout(Duration::from_millis(20)).unwrap(),
        None,
        "no duplicates"
    );
    let m = a
        .recv_timeout(Duration::from_secs(10))
        .unwrap()
        .expect("self message");
    assert_eq!((m.from, &m.payload[..]), (0, &b"self"[..]));
    assert!(matches!(
        a.send(1, &vec![0u8; 64 << 20]),
        Err(FabricError::MessageTooLarge { .. })
    ));
    assert!(matches!(
        a.send(c.machines() as MachineId, b"x"),
        Err(FabricError::NoSuchMachine { .. })
    ));
}

/// A message delivered to a machine unparks the thread registered with
/// `Fabric::wake_on_message` for it, whoever sent it (a service thread
/// parks until one comes instead of polling).
pub fn a_message_wakes_the_registered_thread<C: Cluster>(c: &C) {
    let ready = Barrier::new(2);
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let wakes = c
                .node(1)
                .wake_on_message(1, std::thread::current())
                .unwrap();
            assert!(wakes, "every fabric of the suite wakes on a message");
            ready.wait();
            // Woken by the message (or at once, if it came first): far
            // sooner than the bound, which only keeps a failure finite.
            let t0 = std::time::Instant::now();
            std::thread::park_timeout(Duration::from_secs(20));
            let waited = t0.elapsed();
            let m = port(c, 1)
                .recv_timeout(Duration::from_secs(10))
                .unwrap()
                .expect("the message");
            assert_eq!((m.from, &m.payload[..]), (2, &b"wake"[..]));
            waited
        });
        ready.wait();
        port(c, 2).send(1, b"wake").unwrap();
        let waited = waiter.join().expect("waiter");
        assert!(
            waited < Duration::from_secs(10),
            "the delivered message did not unpark the registered thread (parked {waited:?})"
        );
    });
}

/// `Port::prefetch` changes nothing a request can see: nothing is posted,
/// no word changes, and a request out of bounds, on an unknown region or on
/// an unknown machine is ignored rather than refused or crashed on.
pub fn prefetch_is_only_a_hint<C: Cluster>(c: &C) {
    let r = region_on(c, 1, "prefetched", 4096);
    let mut p = port(c, 0);
    p.write_word(1, r, 64, 7).unwrap();
    let hints = [
        WorkRequest::read(1, 1, r, 0, 4096),
        WorkRequest::read(2, 1, r, 4000, 4096), // runs past the end
        WorkRequest::read(3, 1, r, 1 << 40, 64), // starts past the end
        WorkRequest::write(4, 1, r, 64, vec![9u8; 8]),
        WorkRequest::cas(5, 1, r, 64, 7, 8),
        WorkRequest::read(6, 1, RegionId(u16::MAX), 0, 64), // no such region
        WorkRequest::read(7, MachineId::MAX, r, 0, 64),     // no such machine
    ];
    for wr in &hints {
        p.prefetch(wr);
    }
    assert_eq!(p.inflight(), 0, "a prefetch posts nothing");
    let mut out = Vec::new();
    assert_eq!(p.poll(&mut out).unwrap(), 0, "and completes nothing");
    assert_eq!(p.read_word(1, r, 64).unwrap(), 7, "nor writes anything");
    // The hinted requests still run as requests.
    p.post(WorkRequest::cas(8, 1, r, 64, 7, 8)).unwrap();
    let done = drain(&mut p, 1);
    assert_eq!(done[0].result.as_ref().unwrap(), &Output::Word(7));
    assert_eq!(p.read_word(1, r, 64).unwrap(), 8);
}

/// A READ into the initiator's own region (`Verb::ReadTo`) lands the
/// target's bytes there, posted or executed, from another machine or its
/// own; it keeps per-target order with the port's other requests; a bad
/// landing range or region is an error that writes nothing.
pub fn read_into_own_memory<C: Cluster>(c: &C) {
    let src = region_on(c, 1, "read-to-src", 4096);
    let own = region_on(c, 0, "read-to-own", 4096);
    let land = region_on(c, 0, "read-to-land", 4096);
    let mut p = port(c, 0);
    let data: Vec<u8> = (0..1024u32).map(|i| (i * 13 + 5) as u8).collect();
    p.write(1, src, 512, &data).unwrap();
    p.write(0, own, 0, &data[..256]).unwrap();
    let landed = |p: &mut <C::F as Fabric>::Port, offset: u64, len: usize| {
        let mut b = vec![0u8; len];
        p.read(0, land, offset, &mut b).unwrap();
        b
    };
    // Executed, from another machine, then from this machine's own region.
    let out = p
        .execute(WorkRequest::read_to(0, 1, src, 512, land, 1024, 1024))
        .unwrap();
    assert_eq!(out, Output::Placed);
    assert_eq!(landed(&mut p, 1024, 1024), data, "the bytes land in place");
    p.execute(WorkRequest::read_to(0, 0, own, 0, land, 2048, 256))
        .unwrap();
    assert_eq!(landed(&mut p, 2048, 256), &data[..256]);
    // Posted, between a WRITE before it and a WRITE after it to the same
    // target: it sees the first and not the second (per-target order).
    p.post(WorkRequest::write(1, 1, src, 0, vec![0x11; 64]))
        .unwrap();
    p.post(WorkRequest::read_to(2, 1, src, 0, land, 0, 64))
        .unwrap();
    p.post(WorkRequest::write(3, 1, src, 0, vec![0x22; 64]))
        .unwrap();
    let mut done = drain(&mut p, 3);
    done.sort_by_key(|c| c.id);
    assert_eq!(done[1].result, Ok(Output::Placed));
    assert_eq!(landed(&mut p, 0, 64), vec![0x11; 64]);
    // A landing range out of bounds, misaligned, or in no region: an error
    // that writes nothing, synchronously and as a completion.
    let before = landed(&mut p, 4032, 64);
    assert!(matches!(
        p.execute(WorkRequest::read_to(0, 1, src, 0, land, 4032, 128)),
        Err(FabricError::OutOfBounds { machine: 0, .. })
    ));
    assert!(matches!(
        p.execute(WorkRequest::read_to(0, 1, src, 0, land, 4, 8)),
        Err(FabricError::Misaligned { .. })
    ));
    assert!(matches!(
        p.execute(WorkRequest::read_to(0, 1, src, 0, RegionId(999), 0, 8)),
        Err(FabricError::NoSuchRegion { .. })
    ));
    // The source range out of bounds: nothing lands either.
    assert!(matches!(
        p.execute(WorkRequest::read_to(0, 1, src, 4032, land, 4032, 128)),
        Err(FabricError::OutOfBounds { .. })
    ));
    p.post(WorkRequest::read_to(4, 1, src, 0, land, 4032, 128))
        .unwrap();
    p.post(WorkRequest::read_to(5, 1, src, 0, RegionId(999), 0, 8))
        .unwrap();
    let mut done = drain(&mut p, 2);
    done.sort_by_key(|c| c.id);
    assert!(matches!(
        done[0].result,
        Err(FabricError::OutOfBounds { .. })
    ));
    assert!(matches!(
        done[1].result,
        Err(FabricError::NoSuchRegion { .. })
    ));
    assert_eq!(
        landed(&mut p, 4032, 64),
        before,
        "a refused READ lands nothing"
    );
}

/// A list posted with `Port::post_many` behaves as its requests posted one
/// by one: every completion once, per-target order, reads that see the
/// list's earlier writes to their target, the list left empty; and a list
/// longer than the room left in flight is refused at the limit with the
/// requests after the refused one left in it.
pub fn posting_a_list<C: Cluster>(c: &C) {
    let r0 = region_on(c, 0, "list", 4096);
    let r1 = region_on(c, 1, "list", 4096);
    let r2 = region_on(c, 2, "list", 4096);
    let region = |m: MachineId| [r0, r1, r2][m as usize];
    let mut p = port(c, 0);
    let mut list = Vec::new();
    for i in 0..48u64 {
        let m = (i % 3) as MachineId;
        list.push(WorkRequest::write(
            i,
            m,
            region(m),
            i * 8,
            (i + 7).to_le_bytes().to_vec(),
        ));
        list.push(WorkRequest::read(100 + i, m, region(m), i * 8, 8));
    }
    p.post_many(&mut list).unwrap();
    assert!(list.is_empty(), "the list is taken");
    assert_eq!(p.inflight(), 96);
    let done = drain(&mut p, 96);
    let ids: HashSet<u64> = done.iter().map(|c| c.id).collect();
    assert_eq!(ids.len(), 96, "each completion exactly once");
    let mut last_per_target = [None::<u64>; 3];
    for comp in &done {
        if comp.id >= 100 {
            let i = comp.id - 100;
            assert_eq!(
                comp.result,
                Ok(Output::Data((i + 7).to_le_bytes().to_vec())),
                "read {i} sees the write posted before it"
            );
        }
        let t = comp.target as usize;
        let order = if comp.id >= 100 {
            (comp.id - 100) * 2 + 1
        } else {
            comp.id * 2
        };
        if let Some(prev) = last_per_target[t] {
            assert!(order > prev, "completions to one target in posting order");
        }
        last_per_target[t] = Some(order);
    }
    // Over the limit: find it by filling the port one request at a time.
    let mut limit = 0;
    loop {
        match p.post(WorkRequest::read(limit as u64, 1, r1, 0, 8)) {
            Ok(()) => limit += 1,
            Err(FabricError::TooManyInflight { limit: l, .. }) => {
                assert_eq!(l, limit);
                break;
            }
            Err(e) => panic!("posting read {limit}: {e}"),
        }
        assert!(limit <= 1 << 20, "no in-flight limit below 2^20");
    }
    drain(&mut p, limit);
    let mut list: Vec<WorkRequest> = (0..limit as u64 + 5)
        .map(|i| {
            WorkRequest::read(
                i,
                1 + (i % 2) as MachineId,
                region(1 + (i % 2) as MachineId),
                0,
                8,
            )
        })
        .collect();
    assert!(matches!(
        p.post_many(&mut list),
        Err(FabricError::TooManyInflight { .. })
    ));
    assert_eq!(list.len(), 4, "the requests after the refused one are left");
    assert_eq!(list[0].id, limit as u64 + 1);
    assert_eq!(p.inflight(), limit);
    drain(&mut p, limit);
}

/// `Port::read_overlapped` reads as `Port::read` does and runs its
/// `meanwhile` exactly once, on another machine's memory and on its own;
/// a READ refused at once (out of bounds) runs nothing.
pub fn read_with_work_meanwhile<C: Cluster>(c: &C) {
    let r1 = region_on(c, 1, "overlap", 256);
    let r0 = region_on(c, 0, "overlap", 256);
    let mut p = port(c, 0);
    p.write(1, r1, 64, &[7u8; 64]).unwrap();
    p.write(0, r0, 64, &[9u8; 64]).unwrap();
    for (m, r, byte) in [(1, r1, 7u8), (0, r0, 9u8)] {
        let mut buf = vec![0u8; 64];
        let mut ran = 0;
        p.read_overlapped(m, r, 64, &mut buf, &mut || ran += 1)
            .unwrap();
        assert_eq!(buf, vec![byte; 64], "machine {m}");
        assert_eq!(ran, 1, "meanwhile runs once (machine {m})");
    }
    let mut buf = vec![0u8; 64];
    let mut ran = 0;
    assert!(matches!(
        p.read_overlapped(1, r1, 256, &mut buf, &mut || ran += 1),
        Err(FabricError::OutOfBounds { .. })
    ));
    assert_eq!(ran, 0, "a refused READ runs nothing meanwhile");
}

/// Generates one `#[test]` per conformance check for a cluster constructor expression.
#[macro_export]
macro_rules! conformance_suite {
    ($make:expr) => {
        #[test]
        fn read_write_round_trip() {
            $crate::conformance::read_write_round_trip(&$make);
        }
        #[test]
        fn cas_and_fetch_add_semantics() {
            $crate::conformance::cas_and_fetch_add_semantics(&$make);
        }
        #[test]
        fn concurrent_cas_races() {
            $crate::conformance::concurrent_cas_races(&$make);
        }
        #[test]
        fn word_atomicity() {
            $crate::conformance::word_atomicity(&$make);
        }
        #[test]
        fn bounds_errors() {
            $crate::conformance::bounds_errors(&$make);
        }
        #[test]
        fn pipelining() {
            $crate::conformance::pipelining(&$make);
        }
        #[test]
        fn message_delivery() {
            $crate::conformance::message_delivery(&$make);
        }
        #[test]
        fn a_message_wakes_the_registered_thread() {
            $crate::conformance::a_message_wakes_the_registered_thread(&$make);
        }
        #[test]
        fn prefetch_is_only_a_hint() {
            $crate::conformance::prefetch_is_only_a_hint(&$make);
        }
        #[test]
        fn read_with_work_meanwhile() {
            $crate::conformance::read_with_work_meanwhile(&$make);
        }
        #[test]
        fn posting_a_list() {
            $crate::conformance::posting_a_list(&$make);
        }
        #[test]
        fn read_into_own_memory() {
            $crate::conformance::read_into_own_memory(&$make);
        }
        #[test]
        fn epochs_zero_change_nothing() {
            $crate::conformance::epochs_zero_change_nothing(&$make);
        }
        #[test]
        fn a_stale_requester_is_refused() {
            $crate::conformance::a_stale_requester_is_refused(&$make);
        }
        #[test]
        fn a_newer_incarnation_is_admitted() {
            $crate::conformance::a_newer_incarnation_is_admitted(&$make);
        }
        #[test]
        fn a_recovering_machine_holds_its_memory() {
            $crate::conformance::a_recovering_machine_holds_its_memory(&$make);
        }
        #[test]
        fn an_op_to_a_peer_marked_down_fails_naming_machine_and_epoch() {
            $crate::conformance::an_op_to_a_peer_marked_down_fails_naming_machine_and_epoch(&$make);
        }
        #[test]
        fn a_stale_view_of_the_target_is_refused() {
            $crate::conformance::a_stale_view_of_the_target_is_refused(&$make);
        }
        #[test]
        fn a_fenced_machine_serves_nothing_and_issues_nothing() {
            $crate::conformance::a_fenced_machine_serves_nothing_and_issues_nothing(&$make);
        }
        #[test]
        fn fencing_names_hosted_machines_only() {
            $crate::conformance::fencing_names_hosted_machines_only(&$make);
        }
    };
}
