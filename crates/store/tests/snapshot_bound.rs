//! A snapshot's record at a home, one step at a time on the in-process
//! fabric (design S2/S3, `locus_store::snapshot`): what END and the
//! `open_s_max` bound retire, what later calls say, and a MIGRATE that
//! keeps the old copy of a key no write had recorded.

use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_store::snapshot::SnapshotConfig;
use locus_store::{home_of, Key, Store, StoreConfig, StoreError};

fn store(machines: usize) -> Store<LocalFabric> {
    let fabric = LocalFabric::new(LocalConfig::with_machines(machines).without_model()).unwrap();
    Store::create(
        fabric,
        StoreConfig {
            buckets_per_machine: 16,
            value_region_bytes: 1 << 20,
            ..StoreConfig::default()
        },
    )
    .unwrap()
}

#[test]
fn end_retires_the_blocks_the_snapshot_kept() {
    let s = store(1);
    let mut w = s.worker(0).unwrap();
    w.put(1, &[10]).unwrap();
    w.snapshot_begin(7, SnapshotConfig::default()).unwrap();
    w.insert_edge(1, 11).unwrap(); // first write: [10]'s block kept
    w.insert_edge(1, 12).unwrap(); // later: [10, 11]'s block retired
    w.put(2, &[20]).unwrap(); // vertex 2 was absent at the cut
    assert_eq!(s.reclaim_backlog(0), 1);
    assert_eq!(w.stats.snapshot_blocks_kept, 1);
    let cut = w.read_cut(&[1, 2], |w| w.snapshot_pre_images(7)).unwrap();
    assert_eq!(cut.lists, vec![(1, Some(vec![10])), (2, None)]);
    assert_eq!(cut.pre_images_used, 1);
    assert_eq!(w.snapshot_end(7).unwrap(), 1);
    assert_eq!(s.reclaim_backlog(0), 2, "the kept block is retired at END");
    assert!(matches!(
        w.snapshot_end(7),
        Err(StoreError::SnapshotNotOpen { id: 7, machine: 0 })
    ));
    assert_eq!(w.get(1).unwrap(), Some(vec![10, 11, 12]));
}

#[test]
fn a_snapshot_open_too_long_is_ended_and_later_calls_say_so() {
    let s = store(1);
    let mut w = s.worker(0).unwrap();
    w.put(1, &[10]).unwrap();
    let config = SnapshotConfig {
        open_s_max: 1,
        ..SnapshotConfig::default()
    };
    w.snapshot_begin(3, config).unwrap();
    w.put(1, &[11]).unwrap();
    assert_eq!(s.reclaim_backlog(0), 0, "kept, not retired");
    // At least the bound passes (a lower bound only: no timing assertion).
    std::thread::sleep(std::time::Duration::from_millis(1_100));
    w.collect_garbage().unwrap(); // the home ends it with no caller
    assert_eq!(s.reclaim_backlog(0), 1, "retired when the home ended it");
    let e = w.snapshot_pre_images(3).unwrap_err();
    assert!(
        matches!(
            e,
            StoreError::SnapshotEnded {
                id: 3,
                machine: 0,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("longer than 1 s"), "{e}");
    assert!(matches!(
        w.snapshot_end(3),
        Err(StoreError::SnapshotEnded { .. })
    ));
    // Writes went on unrecorded, and the next snapshot may begin.
    w.put(1, &[12]).unwrap();
    w.snapshot_begin(4, SnapshotConfig::default()).unwrap();
    assert!(matches!(
        w.snapshot_begin(5, SnapshotConfig::default()),
        Err(StoreError::SnapshotBusy {
            id: 5,
            open: 4,
            machine: 0
        })
    ));
}

#[test]
fn a_migrate_keeps_the_old_copy_of_a_key_no_write_recorded() {
    let s = store(2);
    let v = (0..100).find(|v| home_of(*v, 2) == 0).unwrap();
    let mut home = s.worker(0).unwrap();
    let mut there = s.worker(1).unwrap();
    home.put(v, &[1, 2]).unwrap();
    let word = home.address_word(v).unwrap();
    home.snapshot_begin(9, SnapshotConfig::default()).unwrap();
    there.migrate(Key::part(v, 0)).unwrap();
    assert_eq!(there.stats.snapshot_blocks_kept, 1);
    assert_eq!(s.reclaim_backlog(0), 0);
    let pre = home.snapshot_pre_images(9).unwrap();
    assert_eq!(pre.len(), 1);
    assert_eq!((pre[0].key, pre[0].word), (Key::part(v, 0), word));
    // Changed at its new holder (the home coordinates, machine 1's service
    // writes): the cut still reads [1, 2], from the kept copy.
    let services = s.spawn_services().unwrap();
    there.insert_edge(v, 3).unwrap();
    drop(services);
    let cut = there
        .read_cut(&[v], |_| home.snapshot_pre_images(9))
        .unwrap();
    assert_eq!(cut.lists, vec![(v, Some(vec![1, 2]))]);
    assert_eq!(home.snapshot_end(9).unwrap(), 1);
}

#[test]
fn begin_is_refused_where_another_process_holds_machines() {
    // A store hosting machine 0 only (as a server's): a write or MIGRATE
    // of machine 1 would neither record nor keep, so no snapshot begins.
    let sim = locus_fabric::sim::Sim::new(locus_fabric::sim::SimConfig {
        machines: 2,
        ..locus_fabric::sim::SimConfig::default()
    })
    .unwrap();
    let view = sim.fabric().hosting_only(0).unwrap();
    let s = Store::create(
        view,
        StoreConfig {
            buckets_per_machine: 16,
            value_region_bytes: 1 << 20,
            ..StoreConfig::default()
        },
    )
    .unwrap();
    let e = s
        .worker(0)
        .unwrap()
        .snapshot_begin(1, SnapshotConfig::default())
        .unwrap_err();
    assert!(matches!(e, StoreError::FeatureOff { .. }), "{e}");
    assert!(e.to_string().contains("across processes"), "{e}");
}
