//! The handoff's markers (issue 59, `src/handoff.rs`) are never read as
//! "absent": a key whose old home's word says MOVED(B) fails every read,
//! traversal and update there with `Moved`, naming B; a key whose new
//! home's word says PENDING(A) fails with `NotOwnedYet`, naming A. Either
//! way the caller learns whom to ask (the node answers `WrongHome`), and
//! restoring the word brings the value back, untouched.

use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_fabric::{Fabric, Port};
use locus_store::addr::{moved_word, pending_word};
use locus_store::table::{addr_word_offset, BucketView, Key, TableLayout, BUCKET_BYTES};
use locus_store::{HopReads, KhopLimits, Store, StoreConfig, StoreError, KEYS_REGION};

fn store() -> Store<LocalFabric> {
    let fabric = LocalFabric::new(LocalConfig {
        machines: 2,
        ..LocalConfig::default()
    })
    .unwrap();
    Store::create(
        fabric,
        StoreConfig {
            buckets_per_machine: 64,
            value_region_bytes: 4 << 20,
            ..StoreConfig::default()
        },
    )
    .unwrap()
}

/// (region, byte offset) of `key`'s address word in `home`'s table, found
/// by reading the table as a peer would.
fn word_at(s: &Store<LocalFabric>, home: u8, key: Key) -> (locus_fabric::RegionId, u64) {
    let c = s.config();
    let layout = TableLayout {
        buckets: c.buckets_per_machine,
        overflow_buckets: c.overflow_buckets_per_machine,
    };
    let region = s.fabric().lookup(home, KEYS_REGION).unwrap().id;
    let mut port = s.fabric().port(home).unwrap();
    let mut offset = layout.bucket_offset(layout.bucket_of(key));
    loop {
        let mut b = vec![0u8; BUCKET_BYTES as usize];
        port.read(home, region, offset, &mut b).unwrap();
        let view = BucketView::parse(&b);
        if let Some(i) = view.slots.iter().position(|s| s.0 == key.word()) {
            return (region, addr_word_offset(offset, i as u64));
        }
        assert_ne!(view.link, 0, "key {key:?} is in the table");
        offset = layout.overflow_offset(view.link - 1);
    }
}

fn swap(s: &Store<LocalFabric>, home: u8, key: Key, new: u64) -> u64 {
    let (region, at) = word_at(s, home, key);
    let mut port = s.fabric().port(home).unwrap();
    let old = port.read_word(home, region, at).unwrap();
    assert_eq!(port.cas(home, region, at, old, new).unwrap(), old);
    old
}

#[test]
fn moved_and_pending_words_name_the_owner_and_are_never_absent() {
    let s = store();
    let _services = s.spawn_services().unwrap();
    let (v, home) = (2u32, 0u8);
    assert_eq!(s.owner(v), home);
    let mut w0 = s.worker(0).unwrap();
    let mut w1 = s.worker(1).unwrap();
    w0.put(v, &[1, 3, 5]).unwrap();
    w0.put(1, &[v]).unwrap();
    let key = Key::part(v, 0);

    let original = swap(&s, home, key, moved_word(1));
    for w in [&mut w0, &mut w1] {
        let moved = |e: StoreError| {
            let ok = matches!(
                e,
                StoreError::Moved {
                    to: 1,
                    vertex: 2,
                    ..
                }
            );
            assert!(ok, "{e}");
            ok
        };
        assert!(moved(w.get(v).unwrap_err()), "a read at the old home");
        let mut out = Vec::new();
        let e = w
            .k_hop(
                1,
                2,
                10,
                HopReads::Pipelined,
                KhopLimits::default(),
                &mut out,
            )
            .unwrap_err();
        assert!(moved(e), "a traversal through the moved key");
        let e = w
            .k_hop(
                1,
                2,
                10,
                HopReads::OneAtATime,
                KhopLimits::default(),
                &mut out,
            )
            .unwrap_err();
        assert!(moved(e), "a traversal, one read at a time");
        let e = w.insert_edge(v, 7).unwrap_err();
        assert!(moved(e), "an update at the old home");
    }

    swap(&s, home, key, pending_word(1));
    let e = w1.get(v).unwrap_err();
    assert!(matches!(e, StoreError::NotOwnedYet { owner: 1, .. }), "{e}");
    assert!(e.to_string().contains("ask machine 1"), "{e}");

    swap(&s, home, key, original);
    assert_eq!(w1.get(v).unwrap(), Some(vec![1, 3, 5]));
    assert!(w1.insert_edge(v, 7).unwrap());
    assert_eq!(w0.get(v).unwrap(), Some(vec![1, 3, 5, 7]));
}
