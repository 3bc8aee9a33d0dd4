//! Unit tests of `migrate.rs`.

use super::*;
use crate::addr::{units_for_payload, REMOTE_SIZE_UNITS_MAX};
use crate::table::{BUCKET_BYTES, KEY_SLOTS};
use crate::StoreError;

const ME: MachineId = 2;
const HOME: MachineId = 1;
const HOLDER: MachineId = 5;
const LEASE_NS: u64 = 1_000_000;

fn layout() -> TableLayout {
    TableLayout {
        buckets: 64,
        overflow_buckets: 16,
    }
}

fn key() -> Key {
    Key::part(9, 0)
}

/// A bucket holding `slots` (key word, address word) and link word `link`.
fn bucket(slots: &[(u64, u64)], link: u64) -> Output {
    assert!(slots.len() as u64 <= KEY_SLOTS);
    let mut b = vec![0u8; BUCKET_BYTES as usize];
    for (i, (k, a)) in slots.iter().enumerate() {
        b[i * 16..i * 16 + 8].copy_from_slice(&k.to_le_bytes());
        b[i * 16 + 8..i * 16 + 16].copy_from_slice(&a.to_le_bytes());
    }
    let l = KEY_SLOTS as usize * 16;
    b[l..l + 8].copy_from_slice(&link.to_le_bytes());
    Output::Data(b)
}

/// A value of `payload` bytes stored at `addr`, header included.
fn value(addr: Addr, payload: usize) -> Vec<u8> {
    let h = Header::for_payload(payload).unwrap();
    assert_eq!(h.size_units as u64, addr.size_units());
    let mut v = h.encode().to_le_bytes().to_vec();
    v.resize(addr.size_units() as usize * 8, 0xAB);
    v
}

fn held_at_holder() -> Addr {
    Addr::remote(HOLDER, units_for_payload(20), 100).unwrap()
}

fn cached(word: u64, position: u64) -> Cached {
    Cached {
        word,
        position,
        stamped_ns: 0,
    }
}

fn main_bucket() -> u64 {
    layout().bucket_offset(layout().bucket_of(key()))
}

/// Drives a fresh job from `start(None)` to the allocation of `old`'s copy.
fn to_alloc(old: Addr) -> MigrateJob {
    let mut j = MigrateJob::new(key(), ME, HOME, layout(), LEASE_NS);
    j.start(None, 0).unwrap();
    let step = j
        .on_completion(
            bucket(&[(7 | (1 << 63), 1), (key().word(), old.encode())], 0),
            0,
        )
        .unwrap();
    assert_eq!(
        step,
        Step::Alloc {
            size_units: old.size_units()
        }
    );
    j
}

/// Feeds the allocation at `into` and the landed READ of the value: the job
/// then asks for the copy's header (the completion after that is the check).
fn land(j: &mut MigrateJob, old: Addr, into: u64) {
    assert_eq!(
        j.on_allocated(into).unwrap(),
        Step::Post(Access::ReadValue {
            holder: old.holder(HOME),
            offset_units: old.offset_units(),
            size_units: old.size_units(),
            into_units: into,
        }),
        "the value is READ straight into its block"
    );
    assert_eq!(
        j.on_completion(Output::Placed, 0).unwrap(),
        Step::Post(Access::ReadOwnHeader { offset_units: into })
    );
}

/// The landed copy's header word as the check reads it (`payload` bytes of `old`).
fn header(old: Addr, payload: usize) -> Output {
    Output::Data(value(old, payload)[..8].to_vec())
}

#[test]
fn start_without_cache_reads_the_main_bucket() {
    let mut j = MigrateJob::new(key(), ME, HOME, layout(), LEASE_NS);
    assert_eq!(
        j.start(None, 0).unwrap(),
        Step::Post(Access::ReadBucket {
            home: HOME,
            offset: main_bucket()
        })
    );
}

#[test]
fn full_migration_goes_alloc_read_into_check_invalidate_publish() {
    let old = held_at_holder();
    let mut j = to_alloc(old);
    land(&mut j, old, 40);
    let step = j.on_completion(header(old, 20), 0).unwrap();
    assert!(
        j.take_spare().is_some(),
        "the header's buffer is handed back"
    );
    assert_eq!(
        step,
        Step::Post(Access::Invalidate {
            holder: HOLDER,
            offset_units: 100
        })
    );
    let new = Addr::remote(ME, old.size_units(), 40).unwrap();
    let step = j.on_completion(Output::Written(vec![0; 8]), 777).unwrap();
    assert_eq!(
        step,
        Step::Post(Access::Publish {
            home: HOME,
            offset: addr_word_offset(main_bucket(), 1),
            expected: old.encode(),
            new: new.encode()
        })
    );
    let step = j.on_completion(Output::Word(old.encode()), 900).unwrap();
    let Step::Done(Outcome::Moved(p)) = step else {
        panic!("{step:?}")
    };
    assert_eq!(
        p,
        Published {
            from: HOLDER,
            bytes: old.size_units() * 8,
            new_word: new.encode(),
            addr_offset: addr_word_offset(main_bucket(), 1),
            cas_ns: 777,
            old_entry: Addr::local(old.size_units(), 100).unwrap().encode(),
        }
    );
    assert_eq!(
        Outcome::Moved(p).migration(),
        Migration::Moved {
            from: HOLDER,
            bytes: old.size_units() * 8
        }
    );
    assert_eq!(j.restarts(), 0);
}

#[test]
fn migrating_home_publishes_a_local_address() {
    let old = held_at_holder();
    let mut j = MigrateJob::new(key(), HOME, HOME, layout(), LEASE_NS);
    j.start(None, 0).unwrap();
    j.on_completion(bucket(&[(key().word(), old.encode())], 0), 0)
        .unwrap();
    land(&mut j, old, 64);
    j.on_completion(header(old, 20), 0).unwrap();
    let step = j.on_completion(Output::Written(vec![0; 8]), 0).unwrap();
    let Step::Post(Access::Publish { new, .. }) = step else {
        panic!("{step:?}")
    };
    assert_eq!(
        new,
        Addr::local(old.size_units(), 64).unwrap().encode(),
        "a value at its home has a local address"
    );
}

#[test]
fn absent_keys_end_the_job() {
    // The key is not in the bucket and an empty slot ends the chain.
    let mut j = MigrateJob::new(key(), ME, HOME, layout(), LEASE_NS);
    j.start(None, 0).unwrap();
    let s = j
        .on_completion(bucket(&[(3 | (1 << 63), 1)], 0), 0)
        .unwrap();
    assert_eq!(s, Step::Done(Outcome::Absent));
    // The key is there with a null address word (claimed, no value yet).
    let mut j = MigrateJob::new(key(), ME, HOME, layout(), LEASE_NS);
    j.start(None, 0).unwrap();
    let s = j.on_completion(bucket(&[(key().word(), 0)], 0), 0).unwrap();
    assert_eq!(s, Step::Done(Outcome::Absent));
    // A full bucket without a link.
    let full: Vec<(u64, u64)> = (0..KEY_SLOTS).map(|i| ((100 + i) | (1 << 63), 1)).collect();
    let mut j = MigrateJob::new(key(), ME, HOME, layout(), LEASE_NS);
    j.start(None, 0).unwrap();
    let s = j.on_completion(bucket(&full, 0), 0).unwrap();
    assert_eq!(s, Step::Done(Outcome::Absent));
}

#[test]
fn overflow_chains_are_followed() {
    let full: Vec<(u64, u64)> = (0..KEY_SLOTS).map(|i| ((100 + i) | (1 << 63), 1)).collect();
    let mut j = MigrateJob::new(key(), ME, HOME, layout(), LEASE_NS);
    j.start(None, 0).unwrap();
    let s = j.on_completion(bucket(&full, 3), 0).unwrap();
    let overflow = layout().overflow_offset(2);
    assert_eq!(
        s,
        Step::Post(Access::ReadBucket {
            home: HOME,
            offset: overflow
        })
    );
    let old = held_at_holder();
    let s = j
        .on_completion(bucket(&[(key().word(), old.encode())], 0), 0)
        .unwrap();
    assert!(matches!(s, Step::Alloc { .. }), "{s:?}");
    // The address word's position is in the overflow bucket.
    land(&mut j, old, 8);
    j.on_completion(header(old, 20), 0).unwrap();
    let s = j.on_completion(Output::Written(Vec::new()), 0).unwrap();
    let Step::Post(Access::Publish { offset, .. }) = s else {
        panic!("{s:?}")
    };
    assert_eq!(offset, addr_word_offset(overflow, 0));
}

#[test]
fn value_held_here_is_already_here() {
    let here = Addr::remote(ME, 3, 50).unwrap();
    let mut j = MigrateJob::new(key(), ME, HOME, layout(), LEASE_NS);
    j.start(None, 0).unwrap();
    let s = j
        .on_completion(bucket(&[(key().word(), here.encode())], 0), 0)
        .unwrap();
    assert_eq!(s, Step::Done(Outcome::AlreadyHere));
}

#[test]
fn invalidated_value_restarts() {
    let old = held_at_holder();
    let mut j = to_alloc(old);
    land(&mut j, old, 40);
    // The copy landed with a zero header: the value had been invalidated.
    let s = j.on_completion(Output::Data(vec![0; 8]), 0).unwrap();
    assert_eq!(s, Step::Restart(Restart::Invalidated));
    assert_eq!(j.restarts(), 1);
    assert_eq!(j.seen_word(), old.encode(), "the driver drops this word");
    // Started over, it reads the bucket again.
    assert!(matches!(
        j.start(None, 0).unwrap(),
        Step::Post(Access::ReadBucket { .. })
    ));
}

#[test]
fn lost_cas_restarts() {
    let old = held_at_holder();
    let mut j = to_alloc(old);
    land(&mut j, old, 40);
    j.on_completion(header(old, 20), 0).unwrap();
    j.on_completion(Output::Written(Vec::new()), 0).unwrap();
    let s = j.on_completion(Output::Word(12345), 0).unwrap();
    assert_eq!(s, Step::Restart(Restart::Conflict));
    assert_eq!(j.restarts(), 1);
}

#[test]
fn cached_address_skips_the_bucket_read() {
    let old = held_at_holder();
    let mut j = MigrateJob::new(key(), ME, HOME, layout(), LEASE_NS);
    let s = j.start(Some(cached(old.encode(), 4242)), 0).unwrap();
    assert_eq!(
        s,
        Step::Alloc {
            size_units: old.size_units()
        }
    );
    land(&mut j, old, 40);
    j.on_completion(header(old, 20), 0).unwrap();
    let s = j.on_completion(Output::Written(Vec::new()), 0).unwrap();
    let Step::Post(Access::Publish { offset, .. }) = s else {
        panic!("{s:?}")
    };
    assert_eq!(offset, 4242, "the cached position of the address word");
    // A cached null word is no address: look the key up.
    let mut j = MigrateJob::new(key(), ME, HOME, layout(), LEASE_NS);
    assert!(matches!(
        j.start(Some(cached(0, 4242)), 0).unwrap(),
        Step::Post(Access::ReadBucket { .. })
    ));
}

#[test]
fn cached_copy_here_is_checked() {
    let here = Addr::remote(ME, units_for_payload(20), 50).unwrap();
    let mut j = MigrateJob::new(key(), ME, HOME, layout(), LEASE_NS);
    let s = j.start(Some(cached(here.encode(), 8)), 0).unwrap();
    assert_eq!(s, Step::Post(Access::ReadOwnHeader { offset_units: 50 }));
    let s = j
        .on_completion(Output::Data(value(here, 20)[..8].to_vec()), 0)
        .unwrap();
    assert_eq!(s, Step::Done(Outcome::AlreadyHere));

    let mut j = MigrateJob::new(key(), ME, HOME, layout(), LEASE_NS);
    j.start(Some(cached(here.encode(), 8)), 0).unwrap();
    let s = j.on_completion(Output::Data(vec![0; 8]), 0).unwrap();
    assert_eq!(s, Step::Restart(Restart::StaleCache));
    assert_eq!(j.seen_word(), here.encode());
}

#[test]
fn late_invalidation_restarts_instead() {
    // Read at t=0; the copy is checked half a lease later: the old block
    // may have been retired and reused meanwhile, so it is not touched.
    let old = held_at_holder();
    let mut j = to_alloc(old);
    land(&mut j, old, 40);
    let s = j.on_completion(header(old, 20), LEASE_NS / 2).unwrap();
    assert_eq!(s, Step::Restart(Restart::Expired));
    // Just inside the bound it goes on.
    let mut j = to_alloc(old);
    land(&mut j, old, 40);
    let s = j.on_completion(header(old, 20), LEASE_NS / 2 - 1).unwrap();
    assert!(matches!(s, Step::Post(Access::Invalidate { .. })), "{s:?}");
    // A cached address counts from the entry's stamp, not from the lookup.
    let mut j = MigrateJob::new(key(), ME, HOME, layout(), LEASE_NS);
    let c = Cached {
        word: old.encode(),
        position: 8,
        stamped_ns: 100,
    };
    j.start(Some(c), LEASE_NS / 4).unwrap();
    land(&mut j, old, 40);
    let s = j
        .on_completion(header(old, 20), LEASE_NS / 2 + 100)
        .unwrap();
    assert_eq!(s, Step::Restart(Restart::Expired));
}

#[test]
fn value_too_large_to_leave_home_is_refused_before_reading() {
    let huge = Addr::local(REMOTE_SIZE_UNITS_MAX + 1, 8).unwrap();
    let mut j = MigrateJob::new(key(), ME, HOME, layout(), LEASE_NS);
    j.start(None, 0).unwrap();
    let e = j
        .on_completion(bucket(&[(key().word(), huge.encode())], 0), 0)
        .unwrap_err();
    assert!(matches!(e, StoreError::Limit(_)), "{e}");
}

#[test]
#[should_panic(expected = "start of a job that is running")]
fn starting_a_running_job_is_a_bug() {
    let mut j = MigrateJob::new(key(), ME, HOME, layout(), LEASE_NS);
    j.start(None, 0).unwrap();
    let _ = j.start(None, 0);
}

#[test]
fn only_the_check_and_the_invalidation_need_the_clock() {
    let old = held_at_holder();
    let mut j = MigrateJob::new(key(), ME, HOME, layout(), LEASE_NS);
    j.start(None, 0).unwrap();
    assert!(!j.wants_clock(), "bucket");
    j.on_completion(bucket(&[(key().word(), old.encode())], 0), 0)
        .unwrap();
    j.on_allocated(40).unwrap();
    assert!(!j.wants_clock(), "value");
    j.on_completion(Output::Placed, 0).unwrap();
    assert!(j.wants_clock(), "the copy's check: the lease check");
    j.on_completion(header(old, 20), 0).unwrap();
    assert!(j.wants_clock(), "invalidation: the CAS is stamped");
    j.on_completion(Output::Written(Vec::new()), 5).unwrap();
    assert!(!j.wants_clock(), "publish");
}

#[test]
fn an_own_header_read_by_a_load_is_its_completion() {
    let old = held_at_holder();
    let (mut a, mut b) = (to_alloc(old), to_alloc(old));
    land(&mut a, old, 40);
    land(&mut b, old, 40);
    let word = u64::from_le_bytes(value(old, 20)[..8].try_into().unwrap());
    assert_eq!(
        a.on_own_header(word, 5).unwrap(),
        b.on_completion(header(old, 20), 5).unwrap()
    );
    let (mut a, mut b) = (to_alloc(old), to_alloc(old));
    land(&mut a, old, 40);
    land(&mut b, old, 40);
    assert_eq!(
        a.on_own_header(0, 5).unwrap(),
        b.on_completion(Output::Data(vec![0; 8]), 5).unwrap()
    );
}

#[test]
#[should_panic(expected = "an own header fed to a job in state")]
fn an_own_header_nobody_asked_for_is_a_bug() {
    let mut j = to_alloc(held_at_holder());
    let _ = j.on_own_header(0, 0);
}
