//! The backup's unit tests (R2's check, the group commit, the learner,
//! the request's bytes).

use super::*;

fn e(slot: u32, pe: u32, vertex: u32, list: Option<Vec<u32>>) -> Entry1 {
    Entry1 {
        slot,
        primary_epoch: pe,
        vertex,
        list,
        copied: false,
    }
}

/// R2: a backup takes a record only from its slot's owner at exactly
/// the slot's primary epoch, and only for a slot it backs.
#[test]
fn a_backup_refuses_a_stale_primary_and_slots_it_does_not_back() {
    let t = SlotTable::uniform(8, 3)
        .unwrap()
        .with_replication(2, &[0, 1, 2])
        .unwrap();
    let slot = 4u32;
    let (owner, backup) = (t.owner_of_slot(slot).unwrap(), t.backups_of_slot(slot)[0]);
    let other = (0..3u8).find(|&m| m != owner && m != backup).unwrap();
    let ok = e(slot, t.primary_epoch(slot), slot, Some(vec![1]));
    assert_eq!(refusal(&t, backup, owner, &ok, false), None);
    let (after, _) = t.fail_over(owner).unwrap();
    // The old primary, at the old epoch, once the backup holds the new table.
    assert!(refusal(&after, backup, owner, &ok, false).is_some());
    let stale = e(slot, t.primary_epoch(slot), slot + 8, None);
    assert!(refusal(&t, other, owner, &stale, false)
        .unwrap()
        .contains("does not back"));
    assert!(refusal(&t, backup, other, &ok, false)
        .unwrap()
        .contains("not server"));
    let wrong_slot = e(slot + 1, t.primary_epoch(slot), slot, None);
    assert!(refusal(&t, backup, owner, &wrong_slot, false)
        .unwrap()
        .contains("is in slot"));
    let ahead = e(slot, t.primary_epoch(slot) + 1, slot, None);
    assert!(refusal(&t, backup, owner, &ahead, false).is_some());
}

/// The group commit: requests taken together are stored with one
/// wait, a refused one fails alone, and what was stored is in the
/// backup log when it is opened again.
#[test]
fn requests_taken_together_are_stored_or_refused_each_on_its_own() {
    let t = SlotTable::uniform(8, 3)
        .unwrap()
        .with_replication(2, &[0, 1, 2])
        .unwrap();
    let slot = 4u32;
    let (owner, me) = (t.owner_of_slot(slot).unwrap(), t.backups_of_slot(slot)[0]);
    let storage: Arc<dyn locus_wal::Storage> = Arc::new(locus_wal::MemStorage::new());
    let open = || {
        let homes = Arc::new(Homes::new(&t));
        let cfg = WalConfig {
            storage: Arc::clone(&storage),
            dir: "backup".into(),
            sync: locus_wal::SyncMode::Always,
            identity: String::new(),
            segment_bytes_max: 1 << 20,
        };
        Backup::open(me, homes, cfg, locus_wal::Flusher::Caller).unwrap()
    };
    let b = open();
    let pe = t.primary_epoch(slot);
    let one = &encode_requests(&[e(slot, pe, slot, Some(vec![1, 2]))])[0];
    let two = &encode_requests(&[e(slot, pe, slot + 8, Some(vec![3]))])[0];
    let stale = &encode_requests(&[e(slot, pe + 1, slot + 16, Some(vec![4]))])[0];
    let got = b.take_many(&[(owner, one), (owner, stale), (owner, two)]);
    assert!(got[0].is_ok() && got[2].is_ok(), "{got:?}");
    assert!(got[1].as_ref().unwrap_err().contains("refuses"), "{got:?}");
    assert_eq!(b.list(slot), Some(vec![1, 2]));
    assert_eq!(b.list(slot + 16), None);
    drop(b);
    let again = open();
    assert_eq!(again.list(slot), Some(vec![1, 2]));
    assert_eq!(again.list(slot + 8), Some(vec![3]));
    assert_eq!(again.list(slot + 16), None);
}

/// A learner (a rejoin) takes its slot's live records and the
/// primary's copy, a copy never undoes a live record taken before it
/// (an update after the copy's read, or a removal), and the learning
/// ends with any newer table unless that table names it a backup.
#[test]
fn a_learner_takes_live_records_over_older_copies_until_the_table_moves_on() {
    let full = SlotTable::uniform(8, 3)
        .unwrap()
        .with_replication(2, &[0, 1, 2])
        .unwrap();
    let slot = 4u32;
    let (owner, gone) = (
        full.owner_of_slot(slot).unwrap(),
        full.backups_of_slot(slot)[0],
    );
    // Its backup failed over: the slot is short of one.
    let (t, _) = full.fail_over(gone).unwrap();
    let me = (0..3u8).find(|&m| m != owner && m != gone).unwrap();
    let storage: Arc<dyn locus_wal::Storage> = Arc::new(locus_wal::MemStorage::new());
    let homes = Arc::new(Homes::new(&t));
    let cfg = WalConfig {
        storage: Arc::clone(&storage),
        dir: "backup".into(),
        sync: locus_wal::SyncMode::Always,
        identity: String::new(),
        segment_bytes_max: 1 << 20,
    };
    let b = Backup::open(me, Arc::clone(&homes), cfg, locus_wal::Flusher::Caller).unwrap();
    let pe = t.primary_epoch(slot);
    let copy = |v: u32, l: Vec<u32>| Entry1 {
        copied: true,
        ..e(slot, pe, v, Some(l))
    };
    let send = |from: MachineId, es: &[Entry1]| b.take(from, &encode_requests(es)[0]);
    // Not learning: neither live records nor copies are taken.
    let live = e(slot, pe, slot, Some(vec![1]));
    assert!(send(owner, &[live]).unwrap_err().contains("nor learn"));
    let refused = send(owner, &[copy(slot, vec![1])]).unwrap_err();
    assert!(
        refused.contains("a copy goes to a learner only"),
        "{refused}"
    );
    b.learn(&[slot], owner, t.epoch()).unwrap();
    // Live: `slot` gets [2], `slot + 8` is removed; then the copy, read
    // before those updates, arrives: it fills `slot + 16` only.
    send(
        owner,
        &[
            e(slot, pe, slot, Some(vec![2])),
            e(slot, pe, slot + 8, None),
        ],
    )
    .unwrap();
    send(
        owner,
        &[
            copy(slot, vec![1]),
            copy(slot + 8, vec![9]),
            copy(slot + 16, vec![3]),
        ],
    )
    .unwrap();
    assert_eq!(b.list(slot), Some(vec![2]));
    assert_eq!(b.list(slot + 8), None);
    assert_eq!(b.list(slot + 16), Some(vec![3]));
    // Only the slot's owner teaches it.
    assert!(send(gone, &[e(slot, pe, slot, Some(vec![5]))]).is_err());
    // The commit names it a backup: what it learned stays, and it takes
    // records as a backup.
    let named = t.add_backup(slot, me).unwrap();
    homes.install(&named).unwrap();
    b.drop_unbacked().unwrap();
    assert_eq!(b.list(slot + 16), Some(vec![3]));
    send(owner, &[e(slot, pe, slot + 16, Some(vec![4]))]).unwrap();
    assert_eq!(b.list(slot + 16), Some(vec![4]));
    // A learning at a table that moved on ends without a commit.
    let other = (0..8u32)
        .find(|&s| named.owner_of_slot(s) != Some(me) && !named.is_backup(s, me))
        .expect("a slot `me` neither owns nor backs");
    let o = named.owner_of_slot(other).unwrap();
    b.learn(&[other], o, named.epoch()).unwrap();
    let ope = named.primary_epoch(other);
    send(o, &[e(other, ope, other, Some(vec![7]))]).unwrap();
    assert_eq!(b.list(other), Some(vec![7]));
    let moved_on = named.without_backup(gone).unwrap();
    homes.install(&moved_on).unwrap();
    b.drop_unbacked().unwrap();
    assert_eq!(b.list(other), None);
    assert_eq!(b.list(slot), Some(vec![2]), "a slot it backs stays");
    assert!(send(o, &[e(other, ope, other, Some(vec![8]))]).is_err());
}

#[test]
fn requests_round_trip_and_split() {
    let entries = vec![
        e(1, 1, 9, Some(vec![1, 2, 3])),
        e(2, 4, 10, None),
        e(3, 1, 11, Some(vec![])),
    ];
    let reqs = encode_requests(&entries);
    assert_eq!(reqs.len(), 1);
    assert_eq!(decode_request(&reqs[0]).unwrap(), entries);
    let big: Vec<Entry1> = (0..4).map(|i| e(i, 1, i, Some(vec![7; 60_000]))).collect();
    let reqs = encode_requests(&big);
    assert!(reqs.len() >= 2 && reqs.iter().all(|r| r.len() <= REQUEST_BYTES_MAX));
    let back: Vec<Entry1> = reqs
        .iter()
        .flat_map(|r| decode_request(r).unwrap())
        .collect();
    assert_eq!(back, big);
    assert!(encode_requests(&[]).is_empty());
}

#[test]
fn bad_requests_are_refused_never_panicked_on() {
    let good = &encode_requests(&[e(1, 1, 9, Some(vec![1, 2])), e(2, 1, 4, None)])[0];
    for cut in 0..good.len() {
        assert!(decode_request(&good[..cut]).is_err(), "cut at {cut}");
    }
    for i in 0..good.len() {
        for x in [0u8, 1, 0x7f, 0xff] {
            let mut b = good.clone();
            b[i] = x;
            let _ = decode_request(&b);
        }
    }
    let mut huge = good.clone();
    huge[1..5].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(decode_request(&huge).unwrap_err().contains("claims"));
    let mut trailing = good.clone();
    trailing.push(0);
    assert!(decode_request(&trailing).unwrap_err().contains("after"));
}
