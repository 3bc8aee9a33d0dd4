//! Unit tests of `handoff.rs`: every path of the diagram, and the order
//! H1-H3 require (PENDING before the log, the log before the invalidation,
//! the invalidation before A's CAS, A's CAS before B's).

use super::*;
use crate::addr::units_for_payload;
use crate::table::{BUCKET_BYTES, KEY_SLOTS};

const B: MachineId = 2;
const A: MachineId = 1;
const C: MachineId = 5;
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

fn main_bucket() -> u64 {
    layout().bucket_offset(layout().bucket_of(key()))
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

/// A's word for the key in slot 1 of its main bucket (slot 0 holds another key).
fn found(word: u64) -> Output {
    bucket(&[(7 | (1 << 63), 1), (key().word(), word)], 0)
}

fn a_offset() -> u64 {
    addr_word_offset(main_bucket(), 1)
}

fn header_of(addr: Addr) -> Output {
    let h = Header {
        size_units: addr.size_units() as u32,
        payload_bytes: 20,
    };
    Output::Data(h.encode().to_le_bytes().to_vec())
}

fn job() -> HandoffJob {
    HandoffJob::new(key(), B, A, layout(), LEASE_NS)
}

fn at_a() -> Addr {
    Addr::local(units_for_payload(20), 300).unwrap()
}

#[test]
fn a_value_at_a_is_copied_logged_invalidated_then_handed_in_that_order() {
    let old = at_a();
    let mut j = job();
    assert_eq!(
        j.start(10),
        Step::Post(Access::ReadBucket {
            home: A,
            offset: main_bucket()
        })
    );
    let s = j.on_completion(found(old.encode()), 0).unwrap();
    assert_eq!(
        s,
        Step::Alloc {
            size_units: old.size_units()
        }
    );
    assert_eq!(
        j.on_allocated(40).unwrap(),
        Step::Post(Access::ReadValue {
            holder: A,
            offset_units: 300,
            size_units: old.size_units(),
            into_units: 40
        })
    );
    let s = j.on_completion(Output::Placed, 0).unwrap();
    assert_eq!(s, Step::Post(Access::ReadOwnHeader { offset_units: 40 }));
    // H1: PENDING(A) goes into B's table before anything says B owns it.
    let s = j.on_completion(header_of(old), 0).unwrap();
    assert_eq!(
        s,
        Step::Pend {
            pending: pending_word(A)
        }
    );
    let copy = Addr::local(old.size_units(), 40).unwrap().encode();
    // H2: the log comes before the invalidation and both CASes.
    assert_eq!(j.on_pended(4096), Step::Log { word: copy });
    assert_eq!(
        j.on_logged(20),
        Step::Post(Access::Invalidate {
            holder: A,
            offset_units: 300
        })
    );
    let s = j.on_completion(Output::Written(vec![0; 8]), 0).unwrap();
    assert_eq!(
        s,
        Step::Post(Access::Publish {
            home: A,
            offset: a_offset(),
            expected: old.encode(),
            new: moved_word(B)
        })
    );
    let s = j.on_completion(Output::Word(old.encode()), 0).unwrap();
    assert_eq!(
        s,
        Step::Post(Access::Publish {
            home: B,
            offset: 4096,
            expected: pending_word(A),
            new: copy
        })
    );
    let s = j.on_completion(Output::Word(pending_word(A)), 0).unwrap();
    assert_eq!(
        s,
        Step::Done(Outcome::Handed(Handed {
            from_word: old.encode(),
            new_word: copy,
            own_offset: 4096,
            bytes_copied: old.size_units() * 8,
            old_entry: Some((A, old.encode())),
        }))
    );
}

#[test]
fn a_value_pragh_moved_to_c_or_b_is_copied_and_its_old_block_retired_there() {
    for holder in [C, B] {
        let away = Addr::remote(holder, units_for_payload(20), 77).unwrap();
        let mut j = job();
        j.start(0);
        assert_eq!(
            j.on_completion(found(away.encode()), 0).unwrap(),
            Step::Alloc {
                size_units: away.size_units()
            }
        );
        assert_eq!(
            j.on_allocated(40).unwrap(),
            Step::Post(Access::ReadValue {
                holder,
                offset_units: 77,
                size_units: away.size_units(),
                into_units: 40
            })
        );
        j.on_completion(Output::Placed, 0).unwrap();
        j.on_completion(header_of(away), 0).unwrap();
        let copy = Addr::local(away.size_units(), 40).unwrap().encode();
        assert_eq!(j.on_pended(64), Step::Log { word: copy });
        assert_eq!(
            j.on_logged(0),
            Step::Post(Access::Invalidate {
                holder,
                offset_units: 77
            })
        );
        j.on_completion(Output::Written(vec![0; 8]), 0).unwrap();
        j.on_completion(Output::Word(away.encode()), 0).unwrap();
        let Step::Done(Outcome::Handed(h)) =
            j.on_completion(Output::Word(pending_word(A)), 0).unwrap()
        else {
            panic!("not handed")
        };
        let entry = Addr::local(away.size_units(), 77).unwrap().encode();
        assert_eq!((h.new_word, h.old_entry), (copy, Some((holder, entry))));
    }
}

#[test]
fn a_copy_that_changed_before_its_log_starts_over() {
    let old = at_a();
    let mut j = job();
    j.start(0);
    j.on_completion(found(old.encode()), 0).unwrap();
    j.on_allocated(40).unwrap();
    j.on_completion(Output::Placed, 0).unwrap();
    j.on_completion(header_of(old), 0).unwrap();
    j.on_pended(64);
    assert_eq!(j.on_stale_copy(), Step::Restart(Restart::Invalidated));
}

#[test]
fn a_key_without_value_gets_the_marker_and_b_an_empty_entry() {
    let mut j = job();
    j.start(0);
    assert_eq!(
        j.on_completion(found(0), 0).unwrap(),
        Step::Pend {
            pending: pending_word(A)
        }
    );
    assert_eq!(j.on_pended(64), Step::Log { word: 0 });
    assert_eq!(
        j.on_logged(0),
        Step::Post(Access::Publish {
            home: A,
            offset: a_offset(),
            expected: 0,
            new: moved_word(B)
        })
    );
    // B's entry (perhaps a marker B left when it handed the key away
    // earlier) becomes empty: the key has no value at its new home.
    assert_eq!(
        j.on_completion(Output::Word(0), 0).unwrap(),
        Step::Post(Access::Publish {
            home: B,
            offset: 64,
            expected: pending_word(A),
            new: 0
        })
    );
    let Step::Done(Outcome::Handed(h)) = j.on_completion(Output::Word(pending_word(A)), 0).unwrap()
    else {
        panic!("not handed")
    };
    assert_eq!((h.new_word, h.own_offset, h.old_entry), (0, 64, None));
}

#[test]
fn markers_absence_and_lost_values_end_the_job() {
    let cases = [
        (found(moved_word(B)), Outcome::AlreadyHanded),
        (found(moved_word(C)), Outcome::MovedElsewhere(C)),
        (found(crate::addr::lost_word(C)), Outcome::Lost(C)),
        (bucket(&[(7 | (1 << 63), 1)], 0), Outcome::Absent),
    ];
    for (bucket, want) in cases {
        let mut j = job();
        j.start(0);
        assert_eq!(j.on_completion(bucket, 0).unwrap(), Step::Done(want));
    }
}

#[test]
fn a_full_bucket_sends_the_read_down_its_chain() {
    let others: Vec<(u64, u64)> = (0..KEY_SLOTS).map(|i| ((100 + i) | (1 << 63), 1)).collect();
    let mut j = job();
    j.start(0);
    let s = j.on_completion(bucket(&others, 3), 0).unwrap();
    assert_eq!(
        s,
        Step::Post(Access::ReadBucket {
            home: A,
            offset: layout().overflow_offset(2)
        })
    );
}

#[test]
fn a_write_at_a_before_the_cas_makes_b_start_over_and_keeps_pending() {
    let old = at_a();
    let mut j = job();
    j.start(0);
    j.on_completion(found(old.encode()), 0).unwrap();
    j.on_allocated(40).unwrap();
    j.on_completion(Output::Placed, 0).unwrap();
    j.on_completion(header_of(old), 0).unwrap();
    j.on_pended(4096);
    j.on_logged(0);
    j.on_completion(Output::Written(vec![0; 8]), 0).unwrap();
    // A's word changed (an update published a new block): the CAS lost.
    let newer = Addr::local(units_for_payload(20), 900).unwrap();
    assert_eq!(
        j.on_completion(Output::Word(newer.encode()), 0).unwrap(),
        Step::Restart(Restart::Conflict)
    );
    assert_eq!(j.restarts(), 1);
    // The next attempt reads A's word again and copies the newer value.
    j.start(0);
    assert_eq!(
        j.on_completion(found(newer.encode()), 0).unwrap(),
        Step::Alloc {
            size_units: newer.size_units()
        }
    );
}

#[test]
fn a_copy_whose_header_changed_is_not_handed() {
    let old = at_a();
    let mut j = job();
    j.start(0);
    j.on_completion(found(old.encode()), 0).unwrap();
    j.on_allocated(40).unwrap();
    j.on_completion(Output::Placed, 0).unwrap();
    assert_eq!(
        j.on_completion(Output::Data(vec![0; 8]), 0).unwrap(),
        Step::Restart(Restart::Invalidated)
    );
}

#[test]
fn half_a_lease_after_reading_a_no_block_at_a_is_zeroed() {
    let old = at_a();
    let mut j = job();
    j.start(100);
    j.on_completion(found(old.encode()), 0).unwrap();
    j.on_allocated(40).unwrap();
    j.on_completion(Output::Placed, 0).unwrap();
    j.on_completion(header_of(old), 0).unwrap();
    j.on_pended(4096);
    assert_eq!(
        j.on_logged(100 + LEASE_NS / 2),
        Step::Restart(Restart::Expired)
    );
}

#[test]
#[should_panic(expected = "PENDING word changed")]
fn a_pending_word_changed_by_another_writer_is_a_loud_bug() {
    let old = at_a();
    let mut j = job();
    j.start(0);
    j.on_completion(found(old.encode()), 0).unwrap();
    j.on_allocated(40).unwrap();
    j.on_completion(Output::Placed, 0).unwrap();
    j.on_completion(header_of(old), 0).unwrap();
    j.on_pended(64);
    j.on_logged(0);
    j.on_completion(Output::Written(vec![0; 8]), 0).unwrap();
    j.on_completion(Output::Word(old.encode()), 0).unwrap();
    let _ = j.on_completion(Output::Word(old.encode()), 0);
}
