use super::*;

const S: u64 = 1_000_000_000;

fn word(offset_units: u64) -> u64 {
    Addr::local(2, offset_units).unwrap().encode()
}

fn block(offset_units: u64) -> PinnedBlock {
    PinnedBlock {
        holder: 0,
        entry: word(offset_units),
    }
}

fn key(v: u32) -> Key {
    Key::part(v, 0)
}

#[test]
fn the_first_write_records_and_later_ones_do_not() {
    let mut r = SnapshotRecord::new(0);
    assert!(r.note_write(key(1), word(10)).is_empty());
    assert!(!r.keeps(key(1), word(10), block(10)).kept(), "nothing open");
    r.begin(7, SnapshotConfig::default(), 0).unwrap();
    r.note_write(key(1), word(10));
    r.note_write(key(2), 0); // absent at the cut
    assert_eq!(r.keeps(key(2), 0, block(99)), Kept::No, "nothing to keep");
    assert!(
        r.keeps(key(1), word(10), block(10)).kept(),
        "the recorded block is kept"
    );
    r.note_write(key(1), word(20));
    assert!(
        !r.keeps(key(1), word(20), block(20)).kept(),
        "a later block is retired"
    );
    let mut pre = r.pre_images(7).unwrap();
    pre.sort_by_key(|p| p.key);
    assert_eq!(
        pre,
        vec![
            PreImage {
                key: key(1),
                home: 0,
                word: word(10)
            },
            PreImage {
                key: key(2),
                home: 0,
                word: 0
            },
        ]
    );
    assert!(r.pins(0, 10) && !r.pins(0, 20));
    assert_eq!(r.end(7).unwrap(), vec![block(10)]);
    assert!(!r.pins(0, 10));
    assert_eq!(
        r.pre_images(7),
        Err(StoreError::SnapshotNotOpen { id: 7, machine: 0 })
    );
}

#[test]
fn a_migration_that_won_the_race_records_and_pins_the_old_copy() {
    let mut r = SnapshotRecord::new(0);
    r.begin(1, SnapshotConfig::default(), 0).unwrap();
    // No update published since the cut: the migrated value was the cut's.
    assert!(r.keeps(key(3), word(30), block(30)).kept());
    // The update that lost its CAS to it records nothing more.
    r.note_write(key(3), word(31));
    assert_eq!(r.pre_images(1).unwrap()[0].word, word(30));
    // A migration of a key recorded with another word retires as usual.
    r.note_write(key(4), word(40));
    assert!(!r.keeps(key(4), word(41), block(41)).kept());
}

#[test]
fn one_snapshot_at_a_time_and_begin_is_idempotent() {
    let mut r = SnapshotRecord::new(2);
    r.begin(1, SnapshotConfig::default(), 0).unwrap();
    r.begin(1, SnapshotConfig::default(), 5).unwrap();
    assert_eq!(
        r.begin(2, SnapshotConfig::default(), 0),
        Err(StoreError::SnapshotBusy {
            id: 2,
            open: 1,
            machine: 2
        })
    );
    assert!(matches!(
        r.end(2),
        Err(StoreError::SnapshotNotOpen { id: 2, machine: 2 })
    ));
    r.end(1).unwrap();
    r.begin(2, SnapshotConfig::default(), 0).unwrap();
}

#[test]
fn a_snapshot_open_too_long_is_ended_and_says_so() {
    let mut r = SnapshotRecord::new(1);
    let config = SnapshotConfig {
        open_s_max: 2,
        ..SnapshotConfig::default()
    };
    r.begin(9, config, 10 * S).unwrap();
    r.note_write(key(1), word(10));
    assert!(r.keeps(key(1), word(10), block(10)).kept());
    assert!(r.expire(12 * S).is_empty(), "exactly the bound is allowed");
    assert_eq!(r.expire(12 * S + 1), vec![block(10)]);
    assert!(!r.is_open());
    let e = r.pre_images(9).unwrap_err();
    assert!(
        matches!(
            e,
            StoreError::SnapshotEnded {
                id: 9,
                machine: 1,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("longer than 2 s"), "{e}");
    assert!(matches!(r.end(9), Err(StoreError::SnapshotEnded { .. })));
    // Writes go on unrecorded.
    r.note_write(key(2), word(20));
    assert!(!r.keeps(key(2), word(20), block(20)).kept());
}

#[test]
fn too_many_records_end_the_snapshot_not_the_write() {
    let mut r = SnapshotRecord::new(0);
    let config = SnapshotConfig {
        entries_max: 1,
        ..SnapshotConfig::default()
    };
    r.begin(3, config, 0).unwrap();
    r.note_write(key(1), word(10));
    assert!(r.keeps(key(1), word(10), block(10)).kept());
    assert_eq!(r.note_write(key(2), word(20)), vec![block(10)]);
    let e = r.end(3).unwrap_err();
    assert!(e.to_string().contains("more than 1 changed keys"), "{e}");
}

#[test]
fn limits_are_checked() {
    let mut r = SnapshotRecord::new(0);
    for bad in [
        SnapshotConfig {
            open_s_max: 0,
            ..SnapshotConfig::default()
        },
        SnapshotConfig {
            entries_max: 0,
            ..SnapshotConfig::default()
        },
    ] {
        assert!(matches!(r.begin(1, bad, 0), Err(StoreError::Config(_))));
    }
}

fn part(ids: &[u32], more: bool) -> Option<PartValue> {
    Some(PartValue {
        ids: ids.to_vec(),
        more,
    })
}

fn pre(v: u32, p: u32, word: u64) -> PreImage {
    PreImage {
        key: Key::part(v, p),
        home: 0,
        word,
    }
}

#[test]
fn the_cut_takes_pre_images_over_reads_and_follows_their_chains() {
    // Vertex 1: unchanged, two parts. Vertex 2: part 0 changed after the
    // cut (it had MORE then, not now), part 1 then removed. Vertex 3:
    // created after the cut. Vertex 4: removed after the cut.
    let mut a = CutAssembler::new(&[1, 2, 3, 4]);
    assert!(!a.fetch_due());
    let n = a.needs();
    assert_eq!(n.live, (1..=4).map(|v| Key::part(v, 0)).collect::<Vec<_>>());
    a.on_live(Key::part(1, 0), part(&[5], true));
    a.on_live(Key::part(1, 1), part(&[6], false));
    a.on_live(Key::part(2, 0), part(&[7, 8], false));
    a.on_live(Key::part(3, 0), part(&[9], false));
    a.on_live(Key::part(4, 0), None);
    assert!(
        a.needs().is_empty() && a.fetch_due(),
        "reads count only after a fetch"
    );
    a.on_pre_images([
        pre(2, 0, word(20)),
        pre(2, 1, word(21)),
        pre(3, 0, 0),
        pre(4, 0, word(40)),
    ]);
    let n = a.needs();
    assert!(n.live.is_empty());
    assert_eq!(n.pinned.len(), 2, "{n:?}"); // 2.0 and 4.0; 2.1 once 2.0 says MORE
    for p in n.pinned {
        let v = match p.key.vertex() {
            2 => part(&[7], true),
            _ => part(&[1, 2], false),
        };
        a.on_pinned(p, v);
    }
    let n = a.needs();
    assert_eq!(n.pinned, vec![pre(2, 1, word(21))]);
    a.on_pinned(n.pinned[0], part(&[8], false));
    assert!(a.needs().is_empty() && !a.fetch_due());
    assert_eq!(a.pre_images_used(), 3);
    assert_eq!(
        a.finish(),
        vec![
            (1, Some(vec![5, 6])),
            (2, Some(vec![7, 8])),
            (3, None),
            (4, Some(vec![1, 2])),
        ]
    );
}

#[test]
fn a_live_read_after_the_last_fetch_waits_for_another() {
    // Part 0's pre-image says MORE; part 1 was never read: read it, then
    // fetch again before it counts (it may have changed since).
    let mut a = CutAssembler::new(&[1]);
    a.on_live(Key::part(1, 0), part(&[1], false));
    a.on_pre_images([pre(1, 0, word(10))]);
    let n = a.needs();
    a.on_pinned(n.pinned[0], part(&[2], true));
    assert_eq!(a.needs().live, vec![Key::part(1, 1)]);
    a.on_live(Key::part(1, 1), part(&[3], false));
    assert!(a.needs().is_empty() && a.fetch_due());
    a.on_pre_images([pre(1, 0, word(10)), pre(1, 1, word(11))]);
    let n = a.needs();
    assert_eq!(n.pinned, vec![pre(1, 1, word(11))], "the later fetch wins");
    a.on_pinned(n.pinned[0], part(&[4], false));
    assert_eq!(a.fetches(), 2);
    assert_eq!(a.finish(), vec![(1, Some(vec![2, 4]))]);
}

#[test]
#[should_panic(expected = "reads outstanding")]
fn finishing_early_is_a_bug() {
    let mut a = CutAssembler::new(&[1]);
    a.on_live(Key::part(1, 0), None);
    a.finish();
}
