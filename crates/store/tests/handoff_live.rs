//! A key handed from its old home A to B (issue 59, `src/handoff.rs`,
//! `Worker::take_over`) on real threads: wherever Pragh had put its value
//! (at A, at a third machine C, at B), B answers for it afterwards with the
//! same list, from a copy of its own, and updates go on at B; the log sees each copy before the
//! handoff; writes racing the handoff at A are either in B's copy or
//! refused with `Moved`, never acknowledged and lost; readers never see
//! "absent" for a key that exists.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_fabric::MachineId;
use locus_store::addr::Addr;
use locus_store::handoff::Outcome;
use locus_store::{HopReads, Key, KhopLimits, SlotMove, Store, StoreConfig, StoreError, VertexId};

const A: MachineId = 0;
const B: MachineId = 1;
const C: MachineId = 2;

fn store() -> Store<LocalFabric> {
    let fabric = LocalFabric::new(LocalConfig {
        machines: 3,
        ..LocalConfig::default()
    })
    .unwrap();
    Store::create(
        fabric,
        StoreConfig {
            buckets_per_machine: 256,
            value_region_bytes: 16 << 20,
            reclaim_lease_ms: 2_000,
            cache_lease_ms: 2_000,
            ..StoreConfig::default()
        },
    )
    .unwrap()
}

/// Hands `v`'s slot from A to B in the store's table (the coordinator's
/// part, once every key of the slot is B's).
fn hand_slot(s: &Store<LocalFabric>, v: VertexId) {
    let t = s.homes().table();
    let next = t
        .after(&[SlotMove {
            slot: t.slot_of(v),
            from: A,
            to: B,
        }])
        .unwrap();
    assert!(s.homes().install(&next).unwrap());
}

fn moved(e: &StoreError) -> bool {
    matches!(e, StoreError::Moved { to: B, .. })
}

#[test]
fn a_handed_key_is_answered_by_b_wherever_its_value_was() {
    let s = store();
    let _services = s.spawn_services().unwrap();
    let mut w = [
        s.worker(A).unwrap(),
        s.worker(B).unwrap(),
        s.worker(C).unwrap(),
    ];
    let homed_at_a: Vec<VertexId> = (0..30).filter(|&v| s.owner(v) == A).take(3).collect();
    let [at_a, at_c, at_b] = [homed_at_a[0], homed_at_a[1], homed_at_a[2]];
    for &v in &homed_at_a {
        w[0].put(v, &[v + 100, v + 200, v + 300]).unwrap();
    }
    // Pragh moves two of the values away from their home first.
    assert_eq!(w[2].migrate_vertex(at_c).unwrap(), 1);
    assert_eq!(w[1].migrate_vertex(at_b).unwrap(), 1);

    let logged: Mutex<Vec<(Key, usize)>> = Mutex::new(Vec::new());
    let mut log = |k: Key, payload: &[u8]| {
        logged.lock().unwrap().push((k, payload.len()));
        Ok(())
    };
    let mut handed = Vec::new();
    for &v in &homed_at_a {
        match w[1].take_over(Key::part(v, 0), A, &mut log).unwrap() {
            Outcome::Handed(h) => handed.push(h),
            other => panic!("vertex {v}: {other:?}"),
        }
    }
    // Wherever the value was (A, C, B), it was copied into a new block of
    // B's, and the old block went to its holder's reclaim ring.
    for (h, holder) in handed.iter().zip([A, C, B]) {
        assert!(h.bytes_copied > 0);
        assert_eq!(Addr::decode(h.new_word).unwrap().holder(B), B);
        assert_eq!(h.old_entry.map(|(m, _)| m), Some(holder));
    }
    // H2: each copy was logged before it was handed, with its list.
    let logged = logged.lock().unwrap().clone();
    assert_eq!(logged.len(), 3);
    assert!(logged.iter().all(|&(_, n)| n > 0), "{logged:?}");
    // Idempotent.
    assert_eq!(
        w[1].take_over(Key::part(at_a, 0), A, &mut |_, _| Ok(()))
            .unwrap(),
        Outcome::AlreadyHanded
    );

    // Before the table changes, a reader that still routes to A finds
    // MOVED(B) and reads B's copy (no update runs meanwhile: a move guards
    // the slot at A); an update routed to A is told.
    for w in w.iter_mut() {
        assert_eq!(
            w.get(at_a).unwrap(),
            Some(vec![at_a + 100, at_a + 200, at_a + 300])
        );
    }
    let e = w[2].insert_edge(at_a, 7).unwrap_err();
    assert!(moved(&e), "{e}");
    for &v in &homed_at_a {
        hand_slot(&s, v);
    }
    for (m, w) in w.iter_mut().enumerate() {
        for &v in &homed_at_a {
            assert_eq!(
                w.get(v).unwrap(),
                Some(vec![v + 100, v + 200, v + 300]),
                "vertex {v} read by machine {m}"
            );
        }
        let mut out = Vec::new();
        w.k_hop(
            at_c,
            1,
            10,
            HopReads::Pipelined,
            KhopLimits::default(),
            &mut out,
        )
        .unwrap();
        assert_eq!(out, vec![at_c + 100, at_c + 200, at_c + 300]);
    }
    // Updates go on at B, for a value held at B and one held at C.
    assert!(w[2].insert_edge(at_a, 7).unwrap());
    assert!(w[0].insert_edge(at_c, 8).unwrap());
    assert_eq!(w[0].get(at_a).unwrap().unwrap().last(), Some(&7));
    assert_eq!(w[1].get(at_c).unwrap().unwrap().last(), Some(&8));
}

#[test]
fn writes_racing_the_handoff_are_in_bs_copy_or_refused_never_lost() {
    let s = store();
    let _services = s.spawn_services().unwrap();
    let vertices: Vec<VertexId> = (0..300).filter(|&v| s.owner(v) == A).take(40).collect();
    {
        let mut w = s.worker(A).unwrap();
        for &v in &vertices {
            w.put(v, &[v]).unwrap();
        }
    }
    let mut refused = 0;
    for &v in &vertices {
        let stop = Arc::new(AtomicBool::new(false));
        let acked: Arc<Mutex<Vec<u32>>> = Arc::default();
        let writer = {
            let (s, stop, acked) = (s.clone(), Arc::clone(&stop), Arc::clone(&acked));
            std::thread::spawn(move || {
                let mut w = s.worker(C).unwrap();
                // Bounded: a handoff that never refuses A's writes must
                // not hang the test (the final check then catches it).
                for n in 1_000u32..1_500 {
                    match w.insert_edge(v, n) {
                        Ok(changed) => {
                            assert!(changed);
                            acked.lock().unwrap().push(n);
                        }
                        Err(e) if moved(&e) => return true,
                        Err(e) => panic!("vertex {v}: insert {n}: {e}"),
                    }
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                }
                false
            })
        };
        let reader = {
            let (s, stop) = (s.clone(), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut w = s.worker(A).unwrap();
                while !stop.load(Ordering::Relaxed) {
                    match w.get(v) {
                        Ok(Some(l)) => assert_eq!(l[0], v),
                        Ok(None) => panic!("vertex {v} read as absent"),
                        // B's word between A's CAS and B's own: retried.
                        Err(StoreError::NotOwnedYet { .. }) => {}
                        Err(e) if moved(&e) => return,
                        Err(e) => panic!("vertex {v}: read: {e}"),
                    }
                }
            })
        };
        while acked.lock().unwrap().len() < 3 {
            std::thread::yield_now();
        }
        let mut w = s.worker(B).unwrap();
        let out = w.take_over(Key::part(v, 0), A, &mut |_, _| Ok(())).unwrap();
        assert!(matches!(out, Outcome::Handed(_)), "vertex {v}: {out:?}");
        refused += writer.join().unwrap() as u32;
        stop.store(true, Ordering::Relaxed);
        reader.join().unwrap();
        hand_slot(&s, v);
        let list = w.get(v).unwrap().unwrap();
        for n in acked.lock().unwrap().iter() {
            assert!(list.contains(n), "vertex {v}: acknowledged insert {n} lost");
        }
    }
    // The writers raced the handoffs: some were refused mid-stream.
    assert!(
        refused > 0,
        "no writer met a handoff in {} tries",
        vertices.len()
    );
}

/// `Worker::get_many` and `Worker::take_over_many` (a slot move's copy, its
/// operations posted together) give what reading and handing each key alone
/// gives: lists of one part and of several, values at A, at C and at B, a
/// key already handed, a key that is not there.
#[test]
fn many_keys_read_and_hand_over_together_as_one_by_one() {
    let s = Store::create(
        LocalFabric::new(LocalConfig {
            machines: 3,
            ..LocalConfig::default()
        })
        .unwrap(),
        StoreConfig {
            buckets_per_machine: 256,
            value_region_bytes: 16 << 20,
            part_neighbors_max: 8,
            ..StoreConfig::default()
        },
    )
    .unwrap();
    let _services = s.spawn_services().unwrap();
    let mut w = [
        s.worker(A).unwrap(),
        s.worker(B).unwrap(),
        s.worker(C).unwrap(),
    ];
    let at_a: Vec<VertexId> = (0..2000).filter(|&v| s.owner(v) == A).take(300).collect();
    let parts = s.config().part_neighbors_max;
    for (i, &v) in at_a.iter().enumerate() {
        // Every tenth list spans three parts.
        let n = if i % 10 == 0 {
            3 * parts + 1
        } else {
            i as u32 % 7 + 1
        };
        let list: Vec<VertexId> = (0..n).map(|j| v + 1 + j).collect();
        w[0].put(v, &list).unwrap();
    }
    for &v in at_a.iter().skip(1).step_by(17) {
        w[2].migrate_vertex(v).unwrap();
    }
    for &v in at_a.iter().skip(2).step_by(19) {
        w[1].migrate_vertex(v).unwrap();
    }
    let missing = (2000..4000).find(|&v| s.owner(v) == A).unwrap();
    let mut asked = at_a.clone();
    asked.push(missing);
    let one_by_one: Vec<Option<Vec<VertexId>>> =
        asked.iter().map(|&v| w[1].get(v).unwrap()).collect();
    assert_eq!(w[1].get_many(&asked).unwrap(), one_by_one);
    assert!(one_by_one[0].as_ref().unwrap().len() > 3 * parts as usize);

    let slots: std::collections::HashSet<u32> =
        at_a.iter().map(|&v| s.homes().slot_of(v)).collect();
    let mut keys = w[1].keys_in_slots(A, &slots).unwrap();
    assert!(
        keys.len() > at_a.len(),
        "lists of several parts are several keys"
    );
    let first = keys[0];
    assert!(matches!(
        w[1].take_over(first, A, &mut |_, _| Ok(())).unwrap(),
        Outcome::Handed(_)
    ));
    keys.push(Key::part(missing, 0));
    let outcomes = w[1].take_over_many(&keys, A).unwrap();
    assert_eq!(outcomes.len(), keys.len());
    assert_eq!(outcomes[0], Outcome::AlreadyHanded);
    assert_eq!(*outcomes.last().unwrap(), Outcome::Absent);
    for (k, o) in keys.iter().zip(&outcomes).skip(1).take(keys.len() - 2) {
        let Outcome::Handed(h) = o else {
            panic!("key {k:?}: {o:?}")
        };
        assert!(h.bytes_copied > 0, "key {k:?}");
        assert_eq!(Addr::decode(h.new_word).unwrap().holder(B), B, "key {k:?}");
    }
    // Every machine reads every list from B's copies, before and after the
    // table names B; updates go on at B.
    for (m, w) in w.iter_mut().enumerate() {
        for (v, want) in asked.iter().zip(&one_by_one) {
            assert_eq!(&w.get(*v).unwrap(), want, "vertex {v} read by machine {m}");
        }
    }
    for &v in &at_a {
        hand_slot(&s, v);
    }
    assert_eq!(w[2].get_many(&asked).unwrap(), one_by_one);
    assert!(w[0].insert_edge(at_a[0], 1_000_000).unwrap());
    assert_eq!(w[1].get(at_a[0]).unwrap().unwrap().last(), Some(&1_000_000));
}
