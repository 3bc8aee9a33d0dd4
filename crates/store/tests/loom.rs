//! Loom models of the address-word protocol (Pragh 4.1-4.3): GET, PUT,
//! MIGRATE and block reuse (GC) racing on one key.
//!
//! The models run on the real [`Region`] (built with `--cfg loom` its words are
//! loom atomics, see `locus_fabric::sync`) with the real [`Addr`] and [`Header`]
//! encodings. `get`, `put` and `migrate` below perform the same one-sided word
//! operations in the same order as `Worker::read_value`/`fetch`,
//! `Worker::publish` and `Worker::migrate` in `src/store.rs`; each step says
//! which line it mirrors. Loom then tries every interleaving and every
//! outcome the Acquire/Release orderings of `Region` allow.
//!
//! Sizes shrink under loom: one key, values of one header plus one payload
//! word, two machines with a few blocks each. Run with
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p locus-store --test loom --release`.
#![cfg(loom)]

use std::collections::BTreeSet;
use std::sync::{Arc as StdArc, Mutex};

use locus_fabric::{MachineId, Region};
use locus_store::addr::{Addr, Header};
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;

/// The key's home: it holds the key's address word and, at first, its value.
const HOME: MachineId = 0;
/// The machine MIGRATE moves the value to.
const OTHER: MachineId = 1;
/// Every value is a header plus one payload word (the smallest multi-word value).
const PAYLOAD_BYTES: usize = 8;
/// Value size in 8-byte units.
const VALUE_UNITS: u64 = 2;
/// Blocks in each machine's value region.
const BLOCKS_PER_MACHINE: u64 = 2;

/// Payload of the key's initial value.
const V1: u64 = 0x1111;
/// Payload the PUT writes.
const V2: u64 = 0x2222;
/// Payload of *another* key's value that GC writes into a reused block.
const FOREIGN: u64 = 0xEEEE;

/// Block of the initial value (at HOME).
const BLOCK_INITIAL: u64 = 0;
/// PUT's new block, at whichever machine holds the value when it runs
/// (updates run at the holder: check-and-forward, Pragh 4.3).
const BLOCK_PUT: u64 = 1;
/// MIGRATE's copy (at OTHER).
const BLOCK_MIGRATE: u64 = 0;

/// Retries of GET/PUT/MIGRATE before the model calls it a live-lock (the
/// store's `READ_RETRIES_MAX`, shrunk). See [`retry_pause`] for why few are needed.
const RETRIES_MAX: usize = 16;

/// Where the old value is invalidated relative to the publishing CAS.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Order {
    /// The store's order: zero the old header, then CAS (store.rs `publish`, `migrate`).
    InvalidateFirst,
    /// Pragh Fig. 9 (PUT) and Fig. 6 (MIGRATE) as printed: CAS, then zero the
    /// old header. Only the deliberately broken tests use it.
    PublishFirst,
}

/// Two machines' memory: the key's address word at HOME and a value region per machine.
struct Cluster {
    /// HOME's key region, reduced to the key's address word (word 0).
    keys: Region,
    /// Value regions of machines 0 and 1.
    values: [Region; 2],
}

impl Cluster {
    /// The key published with payload `V1` at HOME's `BLOCK_INITIAL` (set up
    /// before any actor starts). Returns the cluster and the initial address word.
    fn new() -> (Arc<Cluster>, u64) {
        let region_bytes = BLOCKS_PER_MACHINE * VALUE_UNITS * 8;
        let c = Cluster {
            keys: Region::new("keys", 8).unwrap(),
            values: [
                Region::new("values0", region_bytes).unwrap(),
                Region::new("values1", region_bytes).unwrap(),
            ],
        };
        let addr = block_addr(HOME, BLOCK_INITIAL);
        write_value(&c, HOME, addr.offset_units(), V1);
        c.keys.write_words(0, &addr.encode().to_le_bytes());
        (Arc::new(c), addr.encode())
    }

    fn values(&self, machine: MachineId) -> &Region {
        &self.values[machine as usize]
    }
}

/// The address, as the key's home names it, of `block` at `machine`.
fn block_addr(machine: MachineId, block: u64) -> Addr {
    Addr::at(HOME, machine, VALUE_UNITS, block * VALUE_UNITS).unwrap()
}

/// A whole value: header word then payload word, little-endian.
fn value_bytes(payload: u64) -> Vec<u8> {
    let header = Header::for_payload(PAYLOAD_BYTES).unwrap();
    assert_eq!(header.size_units as u64, VALUE_UNITS);
    let mut v = header.encode().to_le_bytes().to_vec();
    v.extend_from_slice(&payload.to_le_bytes());
    v
}

fn payload_of(value: &[u8]) -> u64 {
    u64::from_le_bytes(value[8..16].try_into().unwrap())
}

/// One WRITE of a whole value (store.rs `publish`: `port.write(me, vr, offset, &bytes)`).
fn write_value(c: &Cluster, machine: MachineId, offset_units: u64, payload: u64) {
    c.values(machine)
        .write_words(offset_units as usize, &value_bytes(payload));
}

/// LOOKUP's READ of the address word (store.rs `locate_fresh` -> `lookup`;
/// Pragh Fig. 8 lines 3, 19-24). The model's bucket is just the address word.
fn read_addr_word(c: &Cluster) -> u64 {
    let mut b = [0u8; 8];
    c.keys.read_words(0, &mut b);
    u64::from_le_bytes(b)
}

/// The store's `fetch`: one READ of the whole value at its holder (Pragh
/// Fig. 8 lines 5-14), accepted only if the header's size equals the
/// address's size (`Header::matches`, the CHECK of line 15). `None`: invalidated.
fn fetch(c: &Cluster, addr: Addr) -> Option<Vec<u8>> {
    let mut value = vec![0u8; (addr.size_units() * 8) as usize];
    c.values(addr.holder(HOME))
        .read_words(addr.offset_units() as usize, &mut value);
    let header = Header::decode(u64::from_le_bytes(value[..8].try_into().unwrap()));
    header.matches(addr).then_some(value)
}

/// Between two attempts of a retry loop that found `word` invalidated: yield
/// to loom (the thread waits for another's progress, as a spin loop must).
///
/// If the previous attempt failed on the same address word, this one changed
/// nothing: it only loaded words that still held what they held before (a
/// stutter). Two threads stuttering at once (GET and PUT both waiting for
/// MIGRATE's CAS) would otherwise let loom unblock them alternately up to
/// its branch limit. So after a stutter the model stops branching for the
/// rest of this execution (`loom::skip_branch`); the same interleaving without
/// the stutter is explored on its own.
fn retry_pause(word: u64, last_failed: &mut Option<u64>) {
    if *last_failed == Some(word) {
        loom::skip_branch();
    }
    *last_failed = Some(word);
    thread::yield_now();
}

/// The store's `read_value_fresh`: LOOKUP then `fetch`, again while invalidated.
/// Returns the address word read and the value it names.
fn read_current(c: &Cluster) -> (u64, Addr, Vec<u8>) {
    let mut last_failed = None;
    for _ in 0..RETRIES_MAX {
        let word = read_addr_word(c);
        let addr = Addr::decode(word).expect("the key is published before any actor starts");
        if let Some(value) = fetch(c, addr) {
            return (word, addr, value);
        }
        retry_pause(word, &mut last_failed);
    }
    panic!("read_current: still invalidated after {RETRIES_MAX} retries");
}

/// GET (store.rs `read_value`; Pragh Fig. 8): start from `cached`, an address
/// word from the location cache (possibly stale; lines 21-23), or else
/// LOOKUP; fetch; on an invalid header drop the cached word and LOOKUP again
/// (lines 15-18).
/// Returns the payload.
fn get(c: &Cluster, cached: Option<u64>) -> u64 {
    let mut last_failed = None;
    if let Some(word) = cached {
        let addr = Addr::decode(word).expect("only published words are cached");
        if let Some(value) = fetch(c, addr) {
            return payload_of(&value);
        }
        // Invalidated: drop the cached word (`c.remove_if`) and look up.
    }
    for _ in 0..RETRIES_MAX {
        let word = read_addr_word(c);
        let addr = Addr::decode(word).expect("the key is published before any actor starts");
        if let Some(value) = fetch(c, addr) {
            return payload_of(&value);
        }
        retry_pause(word, &mut last_failed);
    }
    panic!("get: still invalidated after {RETRIES_MAX} retries");
}

/// What a successful PUT did: the address word it replaced and the one it published.
#[derive(Clone, Copy, Debug)]
struct Put {
    replaced: u64,
    published: u64,
}

/// PUT (store.rs `vertex_op` -> `read_value_fresh` then `publish`; Pragh
/// Fig. 9). Runs at the machine holding the value, as check-and-forward
/// makes it (lines 4-6: a PUT that finds the value migrated is redone there);
/// updates of one key are serialised, so there is one PUT per model.
/// The caller retires `Put::replaced` (`alloc.retire`) when this returns.
fn put(c: &Cluster, payload: u64, order: Order) -> Put {
    for _ in 0..RETRIES_MAX {
        // read_value_fresh: LOOKUP and the current value (Fig. 9 line 3; the
        // update decides from the value).
        let (word, old, _) = read_current(c);
        let me = old.holder(HOME);
        // publish: alloc.alloc (this machine's PUT block), then WRITE the new
        // value (Fig. 9 line 7).
        let new = block_addr(me, BLOCK_PUT);
        write_value(c, me, new.offset_units(), payload);
        // publish: WRITE zero over the old header *before* the CAS (Fig. 9
        // lines 10-11, moved up).
        if order == Order::InvalidateFirst {
            c.values(me)
                .write_words(old.offset_units() as usize, &[0; 8]);
        }
        // publish: CAS the address word (Fig. 9 line 8).
        let prev = c.keys.cas_word(0, word, new.encode());
        if prev != word {
            // Lost to a migration (Fig. 9 line 9): the new block was never
            // published (alloc.free_now), and the migration invalidated the
            // old value.
            continue;
        }
        // Fig. 9 lines 10-11 as printed: invalidate after publishing.
        if order == Order::PublishFirst {
            c.values(me)
                .write_words(old.offset_units() as usize, &[0; 8]);
        }
        return Put {
            replaced: word,
            published: new.encode(),
        };
    }
    panic!("put: lost {RETRIES_MAX} CASes");
}

/// What MIGRATE did.
#[derive(Clone, Debug)]
enum Migrated {
    /// The value was already at OTHER (a PUT after an earlier migration cannot
    /// happen here, so this means nothing moved).
    AlreadyHere,
    /// The copy `copy` was published as `published` in place of the address word `replaced`.
    Moved {
        replaced: u64,
        published: u64,
        copy: Vec<u8>,
    },
}

/// MIGRATE to OTHER (store.rs `migrate`; Pragh 4.1, Fig. 6). The caller
/// appends `Migrated::Moved::replaced` to the old holder's reclaim ring.
fn migrate(c: &Cluster, order: Order) -> Migrated {
    for _ in 0..RETRIES_MAX {
        // migrate: LOOKUP, then READ the value into the block allocated for
        // it and verify the landed header (Fig. 6 lines 3-6; the figure does
        // not check it). Modelled as a verified READ whose bytes are then
        // stored in the block: the bytes that land are the bytes read.
        let (word, addr, value) = read_current(c);
        let holder = addr.holder(HOME);
        if holder == OTHER {
            return Migrated::AlreadyHere;
        }
        // migrate: the block allocated here holds the landed copy.
        let new = block_addr(OTHER, BLOCK_MIGRATE);
        c.values(OTHER)
            .write_words(new.offset_units() as usize, &value);
        // migrate: WRITE zero over the old header before the CAS (Fig. 6
        // lines 9-10, which come after it there).
        if order == Order::InvalidateFirst {
            c.values(holder)
                .write_words(addr.offset_units() as usize, &[0; 8]);
        }
        // migrate: CAS the address word at the home (Fig. 6 line 7).
        let prev = c.keys.cas_word(0, word, new.encode());
        if prev != word {
            // Lost to the PUT: ours was never published (alloc.free_now);
            // retry (Fig. 6 line 8).
            continue;
        }
        // Fig. 6 lines 9-10 as printed: invalidate after publishing.
        if order == Order::PublishFirst {
            c.values(holder)
                .write_words(addr.offset_units() as usize, &[0; 8]);
        }
        return Migrated::Moved {
            replaced: word,
            published: new.encode(),
            copy: value,
        };
    }
    panic!("migrate: lost {RETRIES_MAX} CASes");
}

/// Spawns an actor whose first step is a Relaxed fetch-add on the model's
/// `start` word, and only then `f`.
///
/// Why: loom 0.7's DPOR compares a thread's *next* operation with only the
/// *last* access to that object. A spawned thread whose first operation is a
/// load (GET, PUT and MIGRATE all start by loading the address word) is then
/// never moved ahead of the others, and the model explores one interleaving
/// (tokio-rs/loom#392, #166). One conflicting write first makes loom explore
/// the actors' orders from the start; Relaxed, it synchronises nothing.
/// The models also check that every legal outcome was seen (the reader before,
/// across and after the PUT; both winners of the PUT/MIGRATE race), so a
/// model that stops exploring fails.
fn spawn_actor<T, F>(start: &Arc<AtomicU64>, f: F) -> thread::JoinHandle<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let start = start.clone();
    thread::spawn(move || {
        start.fetch_add(1, Ordering::Relaxed);
        f()
    })
}

/// A reader that does two GETs one after the other: a fresh one, then one
/// through the location cache holding the key's *initial* address (stale by
/// then if a PUT or MIGRATE has published). Each must return a value the key
/// had (`allowed`), and once the fresh GET has returned V2 the later GET must
/// not return V1: that would be a new-old inversion, not linearizable.
fn reader(c: &Cluster, initial: u64, allowed: &[u64]) -> (u64, u64) {
    let fresh = get(c, None);
    let cached = get(c, Some(initial));
    for v in [fresh, cached] {
        assert!(
            allowed.contains(&v),
            "GET returned payload {v:#x}, never the key's value (allowed {allowed:x?})"
        );
    }
    assert!(
        !(fresh == V2 && cached == V1),
        "new-old inversion: a GET returned V2, a later GET (cached address) V1"
    );
    (fresh, cached)
}

/// After every actor: the address word names a block whose header matches,
/// holding `payload`. Returns the final address word.
fn check_final(c: &Cluster, payload: u64) -> u64 {
    let word = read_addr_word(c);
    let addr = Addr::decode(word).expect("the key stays published");
    let value = fetch(c, addr).expect("the final address points to a valid header");
    assert_eq!(payload_of(&value), payload, "final value");
    word
}

/// A migrated copy equals, byte for byte, the value published under the
/// address word it replaced: the initial V1, or the PUT's V2.
fn check_migrated(initial: u64, put: Option<Put>, m: &Migrated) {
    if let Migrated::Moved { replaced, copy, .. } = m {
        let v = if *replaced == initial {
            V1
        } else {
            match put {
                Some(p) if p.published == *replaced => V2,
                _ => panic!("MIGRATE replaced {replaced:#x}, which nobody published"),
            }
        };
        assert_eq!(
            copy,
            &value_bytes(v),
            "migrated copy differs from what it replaced"
        );
    }
}

/// The key's final address word: the PUT's, unless a MIGRATE moved the PUT's value later.
fn expected_final(put: Put, m: Option<&Migrated>) -> u64 {
    match m {
        Some(Migrated::Moved {
            replaced,
            published,
            ..
        }) if *replaced == put.published => *published,
        _ => put.published,
    }
}

/// A loom builder; `LOOM_MAX_PREEMPTIONS` overrides `preemption_bound`.
fn builder(preemption_bound: Option<usize>) -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = preemption_bound;
    }
    b
}

/// GET + PUT with the given PUT order. Returns the reader's outcomes over all
/// executions.
fn get_put(order: Order) -> Reads {
    let seen = StdArc::new(Mutex::new(BTreeSet::new()));
    let seen_in = seen.clone();
    builder(None).check(move || {
        let (c, initial) = Cluster::new();
        let start = Arc::new(AtomicU64::new(0));
        let w = spawn_actor(&start, {
            let c = c.clone();
            move || put(&c, V2, order)
        });
        let r = spawn_actor(&start, {
            let c = c.clone();
            move || reader(&c, initial, &[V1, V2])
        });
        let p = w.join().unwrap();
        let outcome = r.join().unwrap();
        seen_in.lock().unwrap().insert(outcome);
        assert_eq!(p.replaced, initial);
        // The PUT is not lost.
        assert_eq!(check_final(&c, V2), p.published);
    });
    let seen = seen.lock().unwrap().clone();
    seen
}

/// GET + PUT: GET never returns a value the key never had and never goes
/// back from V2 to V1, even through a stale cached address; the PUT is not
/// lost. Also checks that loom did explore the reader before, across and
/// after the PUT.
#[test]
fn get_put_linearizable() {
    let seen = get_put(Order::InvalidateFirst);
    let all = BTreeSet::from([(V1, V1), (V1, V2), (V2, V2)]);
    assert_eq!(seen, all, "the model must see every legal outcome");
}

/// The deliberately broken PUT (Fig. 9's printed order: CAS, then zero the old
/// header) lets a reader with a cached address return V1 after a fresh GET has
/// returned V2. Loom must find it, or the models prove nothing.
#[test]
#[should_panic(expected = "new-old inversion")]
fn broken_put_publish_before_invalidate_is_caught() {
    get_put(Order::PublishFirst);
}

/// GET + MIGRATE: every GET returns V1 (the copy is the value, byte for byte),
/// through a fresh or a stale cached address; afterwards the key's address is
/// remote, at OTHER, and names a valid header.
#[test]
fn get_migrate_sees_identical_copy() {
    builder(None).check(|| {
        let (c, initial) = Cluster::new();
        let start = Arc::new(AtomicU64::new(0));
        let m = spawn_actor(&start, {
            let c = c.clone();
            move || migrate(&c, Order::InvalidateFirst)
        });
        let r = spawn_actor(&start, {
            let c = c.clone();
            move || reader(&c, initial, &[V1])
        });
        let m = m.join().unwrap();
        assert_eq!(r.join().unwrap(), (V1, V1));
        let Migrated::Moved {
            replaced,
            published,
            ..
        } = m
        else {
            panic!("nothing else moves the value");
        };
        assert_eq!(replaced, initial);
        check_migrated(initial, None, &m);
        assert_eq!(check_final(&c, V1), published);
        assert_eq!(
            Addr::decode(published),
            Some(block_addr(OTHER, BLOCK_MIGRATE))
        );
        assert!(matches!(
            Addr::decode(published),
            Some(Addr::Remote { machine: OTHER, .. })
        ));
    });
}

/// Reader outcomes over all executions: (fresh GET, cached GET) payloads.
type Reads = BTreeSet<(u64, u64)>;
/// Race outcomes over all executions, see [`race_outcome`].
type Races = BTreeSet<(Option<u64>, MachineId)>;

/// Who won, as seen after a PUT and a MIGRATE: the payload the migration
/// moved (`None` if its CAS never won) and the machine where the PUT published.
fn race_outcome(initial: u64, p: Put, m: &Migrated) -> (Option<u64>, MachineId) {
    let moved = match m {
        Migrated::Moved { replaced, .. } if *replaced == initial => Some(V1),
        Migrated::Moved { .. } => Some(V2),
        Migrated::AlreadyHere => None,
    };
    let put_at = Addr::decode(p.published).unwrap().holder(HOME);
    (moved, put_at)
}

/// Both ways the PUT/MIGRATE race can go: MIGRATE moves V1 first and the
/// PUT, losing its CAS, is redone at the new holder; or the PUT publishes at
/// HOME first and MIGRATE, losing its CAS, moves V2.
fn both_race_orders() -> Races {
    BTreeSet::from([(Some(V1), OTHER), (Some(V2), HOME)])
}

/// PUT + MIGRATE: whichever CAS wins, the PUT is never lost (a PUT that loses
/// to the migration retries at the new holder), a migrated copy equals the
/// value published under the address it replaced, and the final address
/// names a valid header. Checks that loom saw both race orders.
#[test]
fn put_migrate_put_never_lost() {
    let seen = StdArc::new(Mutex::new(BTreeSet::new()));
    let seen_in = seen.clone();
    builder(None).check(move || {
        let (c, initial) = Cluster::new();
        let start = Arc::new(AtomicU64::new(0));
        let w = spawn_actor(&start, {
            let c = c.clone();
            move || put(&c, V2, Order::InvalidateFirst)
        });
        let m = spawn_actor(&start, {
            let c = c.clone();
            move || migrate(&c, Order::InvalidateFirst)
        });
        let p = w.join().unwrap();
        let m = m.join().unwrap();
        check_migrated(initial, Some(p), &m);
        assert_eq!(check_final(&c, V2), expected_final(p, Some(&m)));
        seen_in.lock().unwrap().insert(race_outcome(initial, p, &m));
    });
    assert_eq!(*seen.lock().unwrap(), both_race_orders());
}

/// GET + PUT + MIGRATE with the given MIGRATE order (preemption bound 2
/// unless LOOM_MAX_PREEMPTIONS says otherwise). Returns the reader's outcomes
/// and the race outcomes over all executions.
fn get_put_migrate(migrate_order: Order) -> (Reads, Races) {
    let seen = StdArc::new(Mutex::new((BTreeSet::new(), BTreeSet::new())));
    let seen_in = seen.clone();
    builder(Some(2)).check(move || {
        let (c, initial) = Cluster::new();
        let start = Arc::new(AtomicU64::new(0));
        let w = spawn_actor(&start, {
            let c = c.clone();
            move || put(&c, V2, Order::InvalidateFirst)
        });
        let m = spawn_actor(&start, {
            let c = c.clone();
            move || migrate(&c, migrate_order)
        });
        let r = spawn_actor(&start, {
            let c = c.clone();
            move || reader(&c, initial, &[V1, V2])
        });
        let p = w.join().unwrap();
        let m = m.join().unwrap();
        let read = r.join().unwrap();
        check_migrated(initial, Some(p), &m);
        assert_eq!(check_final(&c, V2), expected_final(p, Some(&m)));
        let mut seen = seen_in.lock().unwrap();
        seen.0.insert(read);
        seen.1.insert(race_outcome(initial, p, &m));
    });
    let seen = seen.lock().unwrap().clone();
    seen
}

/// GET + PUT + MIGRATE together: GETs return V1 or V2 and never go back, the
/// PUT is not lost, the copy is exact, the final header valid; loom saw every
/// reader outcome and both race orders.
#[test]
fn get_put_migrate_linearizable() {
    let (reads, races) = get_put_migrate(Order::InvalidateFirst);
    assert_eq!(reads, BTreeSet::from([(V1, V1), (V1, V2), (V2, V2)]));
    assert_eq!(races, both_race_orders());
}

/// The deliberately broken MIGRATE (Fig. 6's printed order: CAS, then zero
/// the old header). Pragh footnote 10's race: MIGRATE publishes its copy, a
/// PUT at the new holder replaces it, a fresh GET returns V2, and a GET with
/// the cached initial address still finds the old header intact: V1.
#[test]
#[should_panic(expected = "new-old inversion")]
fn broken_migrate_publish_before_invalidate_is_caught() {
    get_put_migrate(Order::PublishFirst);
}

/// Which actor retires the key's initial block in a GC model.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Retirer {
    /// PUT, through `alloc.retire`.
    Put,
    /// MIGRATE, through the old holder's reclaim ring.
    Migrate,
}

/// GC: `retirer` replaces the key's initial value and retires its block; a
/// collector then reuses the block for another key's value with the *same*
/// header (so the header check alone cannot tell it apart).
///
/// The lease is modelled as "after every thread that could hold the old
/// address has finished", with joins instead of clocks: the collector starts
/// its work when the retiring actor has finished (retiring is its last step)
/// and, with `lease`, after the early reader, which may have read the old
/// address (or holds it cached) from before the retirement. A late reader is
/// spawned only after the retirement, so cannot hold the old address; it runs
/// alongside the collector's reuse and is not waited for.
fn gc(retirer: Retirer, lease: bool) {
    builder(Some(2)).check(move || {
        let (c, initial) = Cluster::new();
        let start = Arc::new(AtomicU64::new(0));
        let new_payload = match retirer {
            Retirer::Put => V2,
            Retirer::Migrate => V1,
        };
        let actor = spawn_actor(&start, {
            let c = c.clone();
            move || match retirer {
                Retirer::Put => {
                    let p = put(&c, V2, Order::InvalidateFirst);
                    // publish: alloc.retire(old), the last step (Fig. 9 line 12).
                    (p.replaced, Some(p), None)
                }
                Retirer::Migrate => match migrate(&c, Order::InvalidateFirst) {
                    // migrate: self.reclaim(holder, old), the last step (Fig. 6 line 11).
                    m @ Migrated::Moved { replaced, .. } => (replaced, None, Some(m)),
                    Migrated::AlreadyHere => panic!("the value starts at HOME"),
                },
            }
        });
        let early = spawn_actor(&start, {
            let c = c.clone();
            move || {
                reader(&c, initial, &[V1, new_payload]);
            }
        });
        let collector = spawn_actor(&start, {
            let c = c.clone();
            move || {
                // The retired block comes out of the retired list / reclaim ring ...
                let (word, p, m) = actor.join().unwrap();
                assert_eq!(word, initial, "only the initial block is retired");
                let late = thread::spawn({
                    let c = c.clone();
                    move || {
                        let v = get(&c, None);
                        assert_eq!(v, new_payload, "a GET that started after the retirement");
                    }
                });
                // ... and is reused once the lease has passed.
                let early = if lease {
                    early.join().unwrap();
                    None
                } else {
                    Some(early)
                };
                let old = Addr::decode(word).unwrap();
                write_value(&c, old.holder(HOME), old.offset_units(), FOREIGN);
                late.join().unwrap();
                (p, m, early)
            }
        });
        let (p, m, early) = collector.join().unwrap();
        if let Some(early) = early {
            early.join().unwrap();
        }
        if let Some(m) = &m {
            check_migrated(initial, None, m);
        }
        let word = check_final(&c, new_payload);
        match (p, m) {
            (Some(p), _) => assert_eq!(word, p.published),
            (None, Some(Migrated::Moved { published, .. })) => assert_eq!(word, published),
            _ => unreachable!("the actor either PUT or migrated"),
        }
    });
}

/// A block retired by PUT is reused only after the lease: no GET returns the
/// other key's value, and the key's final value is intact.
#[test]
fn gc_after_put_waits_for_lease() {
    gc(Retirer::Put, true);
}

/// The same for a block MIGRATE appended to the old holder's reclaim ring.
#[test]
fn gc_after_migrate_waits_for_lease() {
    gc(Retirer::Migrate, true);
}

/// Deliberately broken GC: reusing the block before the lease lets a GET that
/// read the old address accept the other key's value, whose header matches.
#[test]
#[should_panic(expected = "never the key's value")]
fn broken_gc_without_lease_is_caught() {
    gc(Retirer::Put, false);
}
