//! Slots moved between machines while threads read, update and create
//! vertices (issue 59, `src/slotmove.rs`): every acknowledged insert is in
//! its list at the end, vertices created during the moves exist at their
//! new homes, a read never finds a loaded vertex absent, and a request
//! that meets a move is told whom to ask (retried here as a client would,
//! a bounded number of times).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_store::{Store, StoreConfig, StoreError, Stores, VertexId};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const MACHINES: usize = 3;
const SLOTS: u32 = 16;
/// Vertices loaded before the moves; those up to `VERTICES` are created
/// by the writers while slots move.
const LOADED: u32 = 150;
const VERTICES: u32 = 200;
/// Vertices the creator makes per slot move at most (the key tables' room).
const CREATED_PER_MOVE: u32 = 12;
/// Attempts of one operation that keeps meeting a move (each after a yield).
const ATTEMPTS_MAX: u32 = 100_000;

fn stores() -> Stores<LocalFabric> {
    let fabric = LocalFabric::new(LocalConfig {
        machines: MACHINES,
        ..LocalConfig::default()
    })
    .unwrap();
    let s = Store::create(
        fabric,
        StoreConfig {
            buckets_per_machine: 256,
            value_region_bytes: 32 << 20,
            reclaim_lease_ms: 2_000,
            cache_lease_ms: 2_000,
            slots: SLOTS,
            // Threads here can be descheduled for long on a loaded machine.
            read_stall_ms: 60_000,
            ..StoreConfig::default()
        },
    )
    .unwrap();
    Stores::from(s)
}

/// Whether `e` says a move is under way or just ended (retry).
fn meets_a_move(e: &StoreError) -> bool {
    match e {
        StoreError::Moved { .. } | StoreError::NotOwnedYet { .. } => true,
        StoreError::NotHolder { .. } => true,
        StoreError::Forwarded { reason, .. } => {
            reason.contains("homed on") || reason.contains("holder") || reason.contains("handed")
        }
        _ => false,
    }
}

fn retry<T>(what: &str, mut f: impl FnMut() -> locus_store::Result<T>) -> T {
    for _ in 0..ATTEMPTS_MAX {
        match f() {
            Ok(t) => return t,
            Err(e) if meets_a_move(&e) => std::thread::yield_now(),
            Err(e) => panic!("{what}: {e}"),
        }
    }
    panic!("{what}: still meeting a move after {ATTEMPTS_MAX} attempts")
}

#[test]
fn slots_move_under_reads_updates_and_creations_and_nothing_acknowledged_is_lost() {
    let s = stores();
    let _services = s.distinct()[0].spawn_services().unwrap();
    {
        let mut w = s.worker(0).unwrap();
        for v in 0..LOADED {
            w.put(v, &[v]).unwrap();
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let acked: Arc<Mutex<Vec<(VertexId, u32)>>> = Arc::default();
    let reads = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for t in 0..2u8 {
        let (s, stop, acked) = (s.clone(), Arc::clone(&stop), Arc::clone(&acked));
        threads.push(std::thread::spawn(move || {
            let mut w = s.worker(t + 1).unwrap();
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(u64::from(t));
            let mut n = 1_000_000 * u32::from(t + 1);
            while !stop.load(Ordering::Relaxed) {
                let v = rng.gen_range(0..VERTICES);
                n += 1;
                let changed = retry(&format!("insert {v} -> {n}"), || w.insert_edge(v, n));
                assert!(changed, "{n} is new");
                acked.lock().unwrap().push((v, n));
            }
        }));
    }
    // A creator makes new vertices in the slot being moved, the racing
    // case of E5: a key created at A after A's keys were listed.
    // u64::MAX: no move yet. Each move stores a slot other than the last.
    let moving = Arc::new(AtomicU64::new(u64::MAX));
    let created = Arc::new(AtomicU64::new(0));
    {
        let (s, stop, acked) = (s.clone(), Arc::clone(&stop), Arc::clone(&acked));
        let (moving, created) = (Arc::clone(&moving), Arc::clone(&created));
        threads.push(std::thread::spawn(move || {
            let mut w = s.worker(2).unwrap();
            let mut k = VERTICES / SLOTS + 1;
            // At most CREATED_PER_MOVE keys per slot move, so the key
            // tables keep room: then wait for the next move.
            let (mut slot, mut made) = (u64::MAX, 0);
            while !stop.load(Ordering::Relaxed) {
                let now = moving.load(Ordering::Acquire);
                if now != slot {
                    (slot, made) = (now, 0);
                }
                if slot == u64::MAX || made == CREATED_PER_MOVE {
                    std::thread::yield_now();
                    continue;
                }
                let v = slot as u32 + SLOTS * k;
                k += 1;
                made += 1;
                retry(&format!("create {v}"), || w.insert_edge(v, v));
                acked.lock().unwrap().push((v, v));
                created.fetch_add(1, Ordering::Release);
            }
        }));
    }
    {
        let (s, stop, reads) = (s.clone(), Arc::clone(&stop), Arc::clone(&reads));
        threads.push(std::thread::spawn(move || {
            let mut w = s.worker(0).unwrap();
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
            while !stop.load(Ordering::Relaxed) {
                let v = rng.gen_range(0..LOADED);
                let l = retry(&format!("read {v}"), || w.get(v));
                let l = l.unwrap_or_else(|| panic!("loaded vertex {v} read as absent"));
                assert_eq!(l[0], v, "vertex {v}'s list starts with its load");
                reads.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    // Four rounds: every slot to the next machine, and on again.
    let mut moved = 0;
    for round in 0..4 {
        for slot in 0..SLOTS {
            let owner = s.owner(slot);
            let to = ((owner as usize + 1) % MACHINES) as u8;
            moving.store(u64::from(slot), Ordering::Release);
            // Let the creator make a few keys of this slot first.
            let c0 = created.load(Ordering::Acquire);
            while created.load(Ordering::Acquire) < c0 + 3 {
                std::thread::yield_now();
            }
            let r = s.move_slot(slot, to, &mut |_, _| Ok(())).unwrap();
            moved += r.keys;
            assert_eq!(s.owner(slot), to, "round {round}, slot {slot}");
            std::thread::yield_now();
        }
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    assert!(moved >= 4 * u64::from(LOADED), "keys handed over: {moved}");
    assert!(reads.load(Ordering::Relaxed) > 0);
    let acked = acked.lock().unwrap().clone();
    assert!(!acked.is_empty());
    let mut want: HashMap<VertexId, Vec<u32>> = HashMap::new();
    for (v, n) in acked {
        want.entry(v).or_default().push(n);
    }
    let mut w = s.worker(2).unwrap();
    for (v, ns) in want {
        let list = w
            .get(v)
            .unwrap()
            .unwrap_or_else(|| panic!("vertex {v} absent"));
        for n in ns {
            assert!(
                list.contains(&n),
                "vertex {v}: acknowledged insert {n} lost"
            );
        }
    }
}
