// Past 800 lines: one test module for one type (the slot table's rules,
// its wire form, failover and the rejoins' plan); split it by concern
// if it grows further.
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::*;

/// A table whose owners are drawn at random below `machines`.
fn random_table(rng: &mut Xoshiro256PlusPlus, slots: u32, machines: u16) -> SlotTable {
    let mut t = SlotTable::uniform(slots, machines).unwrap();
    for o in &mut t.owners {
        *o = rng.gen_range(0..machines) as Machine;
    }
    t
}

#[test]
fn a_vertex_lives_at_its_slots_owner() {
    let t = SlotTable::uniform(4096, 3).unwrap();
    assert_eq!(t.epoch(), 1);
    assert_eq!(t.slot_of(4096 + 5), 5);
    assert_eq!(t.owner_of(5), 2);
    assert_eq!(
        t.owner_of(4096 + 5),
        2,
        "a vertex and its slot share an owner"
    );
    assert_eq!(t.counts(), vec![1366, 1365, 1365]);
    assert_eq!(t.owner_of_slot(4096), None);
}

#[test]
fn a_move_is_a_new_epoch_and_checks_each_step() {
    let t = SlotTable::uniform(8, 2).unwrap();
    let next = t
        .after(&[SlotMove {
            slot: 3,
            from: 1,
            to: 0,
        }])
        .unwrap();
    assert_eq!(next.epoch(), 2);
    assert_eq!(next.owner_of_slot(3), Some(0));
    assert_eq!(t.owner_of_slot(3), Some(1), "the old table is unchanged");
    let wrong_from = t.after(&[SlotMove {
        slot: 3,
        from: 0,
        to: 1,
    }]);
    assert!(wrong_from
        .unwrap_err()
        .to_string()
        .contains("slot 3's owner, 1"));
    let twice = SlotMove {
        slot: 2,
        from: 0,
        to: 1,
    };
    assert!(t.after(&[twice, twice]).is_err());
    assert!(t
        .after(&[SlotMove {
            slot: 2,
            from: 0,
            to: 2
        }])
        .is_err());
    assert!(t
        .after(&[SlotMove {
            slot: 8,
            from: 0,
            to: 1
        }])
        .is_err());
}

#[test]
fn balancing_is_minimal_and_leaves_counts_within_one() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(59);
    for round in 0..300 {
        let machines = rng.gen_range(1..=8u16);
        let slots = rng.gen_range(1..=600u32);
        let t = random_table(&mut rng, slots, machines);
        let members: Vec<Machine> = (0..machines as Machine)
            .filter(|_| rng.gen_bool(0.7))
            .collect();
        if members.is_empty() {
            assert!(t.balance(&members).is_err());
            continue;
        }
        let moves = t.balance(&members).unwrap();
        let next = t
            .after(&moves)
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        let counts = next.counts();
        let member_counts: Vec<u32> = members.iter().map(|&m| counts[m as usize]).collect();
        let (lo, hi) = (
            *member_counts.iter().min().unwrap(),
            *member_counts.iter().max().unwrap(),
        );
        assert!(hi - lo <= 1, "round {round}: counts {member_counts:?}");
        assert_eq!(
            member_counts.iter().sum::<u32>(),
            slots,
            "round {round}: a non-member kept slots"
        );
        // Minimal: a member keeps at most its share of what it holds, and
        // the shares rounded up are best given to those holding most.
        let before = t.counts();
        let n = members.len() as u32;
        let (base, extra) = (slots / n, slots % n);
        let mut held: Vec<u32> = members.iter().map(|&m| before[m as usize]).collect();
        held.sort_unstable_by(|a, b| b.cmp(a));
        let kept_max: u32 = held
            .iter()
            .enumerate()
            .map(|(i, &h)| h.min(base + u32::from((i as u32) < extra)))
            .sum();
        assert_eq!(
            moves.len() as u32,
            slots - kept_max,
            "round {round}: not the fewest moves"
        );
        assert!(moves.iter().all(|m| m.from != m.to));
    }
}

#[test]
fn a_balanced_table_needs_no_move_and_a_new_member_takes_its_share() {
    let t = SlotTable::uniform(4096, 4).unwrap();
    assert!(
        t.balance(&[0, 1, 2]).unwrap().len() == 1024,
        "machine 3's slots all go"
    );
    let three = t.after(&t.balance(&[0, 1, 2]).unwrap()).unwrap();
    assert!(three.balance(&[0, 1, 2]).unwrap().is_empty());
    let back = three.balance(&[0, 1, 2, 3]).unwrap();
    assert_eq!(back.len(), 1024);
    assert!(back.iter().all(|m| m.to == 3));
    assert!(
        t.balance(&[0, 9]).is_err(),
        "a member beyond the table's machines"
    );
}

#[test]
fn the_wire_form_round_trips_at_its_limits() {
    for (slots, machines) in [(1, 1), (4096, 3), (SLOTS_MAX, MACHINES_MAX)] {
        let mut t = SlotTable::uniform(slots, machines).unwrap();
        t.epoch = u64::MAX - 1;
        *t.owners.last_mut().unwrap() = (machines - 1) as Machine;
        let b = t.encode();
        assert_eq!(b.len(), HEADER_BYTES + slots as usize);
        assert_eq!(SlotTable::decode(&b).unwrap(), t);
    }
    assert!(SlotTable::uniform(0, 3).is_err());
    assert!(SlotTable::uniform(SLOTS_MAX + 1, 3).is_err());
    assert!(SlotTable::uniform(16, 0).is_err());
    assert!(SlotTable::uniform(16, MACHINES_MAX + 1).is_err());
}

#[test]
fn a_malformed_table_names_the_byte() {
    let good = SlotTable::uniform(16, 3).unwrap().encode();
    let at = |b: &[u8]| match SlotTable::decode(b).unwrap_err() {
        PlacementError::Malformed { at, .. } => at,
        e => panic!("{e}"),
    };
    assert_eq!(at(&good[..10]), 10);
    let mut b = good.clone();
    b[0] = b'X';
    assert_eq!(at(&b), 0);
    let mut b = good.clone();
    b[4] = 9;
    assert_eq!(at(&b), 4);
    let mut b = good.clone();
    b[6] = 0;
    b[7] = 0;
    assert_eq!(at(&b), 6);
    let mut b = good.clone();
    b.push(0);
    assert_eq!(at(&b), HEADER_BYTES);
    let mut b = good.clone();
    b[HEADER_BYTES + 7] = 3;
    assert_eq!(at(&b), HEADER_BYTES + 7);
    let e = SlotTable::decode(&b).unwrap_err().to_string();
    assert!(e.contains("slot 7's owner 3"), "{e}");
}

#[test]
fn a_cluster_with_room_starts_over_its_first_servers() {
    let t = SlotTable::uniform_among(4096, 8, 3).unwrap();
    assert_eq!(t.machines(), 8);
    assert_eq!(t.counts(), vec![1366, 1365, 1365, 0, 0, 0, 0, 0]);
    assert_eq!(t, SlotTable::uniform_among(4096, 8, 3).unwrap());
    assert_eq!(
        SlotTable::uniform_among(64, 3, 3).unwrap(),
        SlotTable::uniform(64, 3).unwrap()
    );
    // A fourth server joins: balancing moves only slots to it.
    let moves = t.balance(&[0, 1, 2, 3]).unwrap();
    assert!(moves.iter().all(|m| m.to == 3), "{moves:?}");
    assert_eq!(t.after(&moves).unwrap().counts()[..4], [1024; 4]);
    for bad in [0, 9] {
        assert!(SlotTable::uniform_among(64, 8, bad).is_err(), "{bad}");
    }
}

// ------------------------------------------------------------ replication

/// Checks every rule of a table's replication (the module doc's).
fn assert_valid(t: &SlotTable) {
    assert!(t.rules_hold());
    assert!((1..=REPLICATION_MAX).contains(&t.replication()));
    for s in 0..t.slots() {
        let b = t.backups_of_slot(s);
        let owner = t.owner_of_slot(s).unwrap();
        assert!(b.len() < usize::from(t.replication()), "slot {s}: {b:?}");
        for (i, &m) in b.iter().enumerate() {
            assert!(u16::from(m) < t.machines() && m != owner, "slot {s}: {b:?}");
            assert!(!b[..i].contains(&m), "slot {s}: {b:?}");
        }
        assert!(t.primary_epoch(s) >= 1);
    }
}

/// The parts `from_parts` takes back.
fn parts(t: &SlotTable) -> (Vec<Vec<Machine>>, Vec<u32>) {
    (0..t.slots())
        .map(|s| (t.backups_of_slot(s).to_vec(), t.primary_epoch(s)))
        .unzip()
}

/// A table with random owners, R, backups (up to R - 1 per slot) and
/// primary epochs (1 for most slots, any for some).
fn random_replicated(rng: &mut Xoshiro256PlusPlus, slots: u32, machines: u16) -> SlotTable {
    let owners = random_table(rng, slots, machines).owners;
    let r = rng.gen_range(1..=REPLICATION_MAX.min(machines as u8));
    let backups = owners
        .iter()
        .map(|&o| {
            let mut others: Vec<Machine> = (0..machines as Machine).filter(|&m| m != o).collect();
            let n = rng.gen_range(0..r as usize);
            (0..n)
                .map(|_| others.swap_remove(rng.gen_range(0..others.len())))
                .collect()
        })
        .collect();
    let epochs = (0..slots)
        .map(|_| match rng.gen_range(0..4) {
            0 => rng.gen_range(1..=u32::MAX),
            _ => 1,
        })
        .collect();
    let t = SlotTable::from_parts(rng.gen(), machines, owners, r, backups, epochs).unwrap();
    assert_valid(&t);
    t
}

fn malformed_at(b: &[u8]) -> (usize, String) {
    match SlotTable::decode(b).unwrap_err() {
        PlacementError::Malformed { at, what } => (at, what),
        e => panic!("{e}"),
    }
}

#[test]
fn a_table_without_replication_has_no_backups_and_stays_version_1() {
    let t = SlotTable::uniform(16, 3).unwrap();
    assert_eq!(t.replication(), 1);
    assert!(t.backups_of(5).is_empty() && t.backups_of_slot(16).is_empty());
    assert_eq!((t.primary_epoch(15), t.primary_epoch(16)), (1, 0));
    // Moves under R = 1 keep primary epoch 1: the bytes stay version 1.
    let moved = t
        .after(&[SlotMove {
            slot: 4,
            from: 1,
            to: 2,
        }])
        .unwrap();
    assert_eq!(moved.primary_epoch(4), 1);
    let b = moved.encode();
    assert_eq!((b[4], b.len()), (1, HEADER_BYTES + 16));
    assert_eq!(
        moved,
        SlotTable::from_owners(2, 3, moved.owners().to_vec()).unwrap()
    );
    // R = 1 asked for again: the same owners' bytes, one epoch on.
    let same = t.with_replication(1, &[0, 1, 2]).unwrap();
    assert_eq!(same.epoch(), 2);
    assert_eq!(same.encode()[16..], t.encode()[16..]);
    assert_eq!(same.encode()[..8], t.encode()[..8]);
}

#[test]
fn replicated_tables_round_trip_in_version_2() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(60);
    for round in 0..500 {
        let machines = rng.gen_range(1..=8u16);
        let slots = rng.gen_range(1..=300);
        let t = random_replicated(&mut rng, slots, machines);
        let b = t.encode();
        let v1 = t.replication() == 1 && (0..t.slots()).all(|s| t.primary_epoch(s) == 1);
        assert_eq!(b[4], if v1 { 1 } else { 2 }, "round {round}");
        assert_eq!(SlotTable::decode(&b).unwrap(), t, "round {round}");
        let (backups, epochs) = parts(&t);
        let again = SlotTable::from_parts(
            t.epoch(),
            machines,
            t.owners().to_vec(),
            t.replication(),
            backups,
            epochs,
        );
        assert_eq!(again.unwrap(), t, "round {round}");
    }
    // The largest: every slot with two backups.
    let t = SlotTable::uniform(SLOTS_MAX, MACHINES_MAX)
        .unwrap()
        .with_replication(3, &(0..128).collect::<Vec<_>>())
        .unwrap();
    let b = t.encode();
    assert_eq!(b.len(), ENCODED_BYTES_MAX);
    assert_eq!(SlotTable::decode(&b).unwrap(), t);
    // R = 1 with a slot failed over earlier still round-trips (version 2).
    let t = SlotTable::from_parts(7, 2, vec![0, 1], 1, vec![vec![], vec![]], vec![1, 2]).unwrap();
    assert_eq!(t.encode()[4], 2);
    assert_eq!(SlotTable::decode(&t.encode()).unwrap(), t);
}

#[test]
fn from_parts_checks_every_rule() {
    let ok =
        |r, b: Vec<Vec<Machine>>, e: Vec<u32>| SlotTable::from_parts(1, 3, vec![0, 1], r, b, e);
    assert!(ok(2, vec![vec![1], vec![]], vec![1, 3]).is_ok());
    let key = |r: Result<SlotTable>| match r.unwrap_err() {
        PlacementError::InvalidSetting { key, .. } => key,
        e => panic!("{e}"),
    };
    assert_eq!(key(ok(0, vec![vec![], vec![]], vec![1, 1])), "replication");
    assert_eq!(key(ok(4, vec![vec![], vec![]], vec![1, 1])), "replication");
    assert_eq!(key(ok(2, vec![vec![]], vec![1, 1])), "backups");
    assert_eq!(key(ok(2, vec![vec![], vec![]], vec![1])), "primary_epochs");
    assert_eq!(key(ok(2, vec![vec![1, 2], vec![]], vec![1, 1])), "backups");
    assert_eq!(key(ok(3, vec![vec![0], vec![]], vec![1, 1])), "backup");
    assert_eq!(key(ok(3, vec![vec![2, 2], vec![]], vec![1, 1])), "backup");
    assert_eq!(key(ok(3, vec![vec![3], vec![]], vec![1, 1])), "backup");
    assert_eq!(
        key(ok(2, vec![vec![], vec![]], vec![1, 0])),
        "primary_epoch"
    );
    let e = ok(3, vec![vec![], vec![2, 1]], vec![1, 1])
        .unwrap_err()
        .to_string();
    assert!(e.contains("not slot 1's owner"), "{e}");
}

#[test]
fn a_malformed_version_2_table_names_the_byte() {
    // 3 machines, 2 slots owned by 0 and 1, R = 3; slot 0 backed by 1 and 2.
    let t =
        SlotTable::from_parts(9, 3, vec![0, 1], 3, vec![vec![1, 2], vec![2]], vec![4, 1]).unwrap();
    let good = t.encode();
    let r_at = HEADER_BYTES + 2;
    let s0 = r_at + 1; // slot 0: epoch, count, 2 backups
    let s1 = s0 + 5 + 2; // slot 1: epoch, count, 1 backup
    assert_eq!(good.len(), s1 + 5 + 1);
    assert_eq!(good[r_at], 3);
    let with = |at: usize, v: u8| {
        let mut b = good.clone();
        b[at] = v;
        malformed_at(&b)
    };
    assert_eq!(with(4, 3).0, 4);
    assert_eq!(with(r_at, 0).0, r_at);
    assert_eq!(with(r_at, 4).0, r_at);
    assert_eq!(
        with(r_at, 2).0,
        s0 + 4,
        "two backups where R = 2 allows one"
    );
    let mut b = good.clone();
    b[s0..s0 + 4].copy_from_slice(&[0; 4]);
    assert_eq!(malformed_at(&b).0, s0);
    assert_eq!(
        with(s0 + 5, 0),
        (s0 + 5, "slot 0's backup 0 is its owner".into())
    );
    assert_eq!(
        with(s0 + 6, 1),
        (s0 + 6, "slot 0's backup 1 is named twice".into())
    );
    assert_eq!(
        with(s1 + 5, 3),
        (s1 + 5, "slot 1's backup 3 is not below 3 machines".into())
    );
    assert_eq!(with(1 + HEADER_BYTES, 5).0, HEADER_BYTES + 1, "an owner");
    let mut b = good.clone();
    b.push(0);
    assert_eq!(
        malformed_at(&b),
        (good.len(), "1 bytes past the last slot".into())
    );
    // Truncated: the header, the owners, R, an entry, a backup.
    assert_eq!(malformed_at(&good[..HEADER_BYTES + 1]).0, HEADER_BYTES);
    assert_eq!(malformed_at(&good[..r_at]).0, r_at);
    assert_eq!(malformed_at(&good[..s0 + 3]).0, s0 + 3);
    assert_eq!(malformed_at(&good[..s0 + 6]).0, s0 + 6);
}

#[test]
fn every_truncation_and_byte_of_a_version_2_table_decodes_or_fails_cleanly() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(6060);
    for round in 0..40 {
        let machines = rng.gen_range(2..=6u16);
        let slots = rng.gen_range(1..=12);
        let mut t = random_replicated(&mut rng, slots, machines);
        if t.encode()[4] == 1 {
            t.primary_epochs[0] = 2;
        }
        let good = t.encode();
        for n in 0..good.len() {
            assert!(SlotTable::decode(&good[..n]).is_err(), "round {round}: {n}");
        }
        for at in 0..good.len() {
            for v in [0, 1, 2, 3, 4, 0x7f, 0x80, 0xff, good[at] ^ 1] {
                let mut b = good.clone();
                b[at] = v;
                if let Ok(d) = SlotTable::decode(&b) {
                    assert_valid(&d);
                    assert_eq!(SlotTable::decode(&d.encode()).unwrap(), d);
                }
            }
        }
    }
}

#[test]
fn with_replication_spreads_backups_evenly_and_never_names_the_owner() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(61);
    for round in 0..400 {
        let machines = rng.gen_range(1..=12u16);
        let slots = rng.gen_range(1..=700u32);
        // A balanced table over a random set of live servers.
        let servers: Vec<Machine> = (0..machines as Machine)
            .filter(|_| rng.gen_bool(0.7))
            .collect();
        if servers.is_empty() {
            continue;
        }
        let t = random_table(&mut rng, slots, machines);
        let t = t.after(&t.balance(&servers).unwrap()).unwrap();
        let r = rng.gen_range(1..=REPLICATION_MAX.min(servers.len() as u8));
        let mut shuffled = servers.clone();
        shuffled.reverse();
        shuffled.push(servers[0]);
        let next = t.with_replication(r, &shuffled).unwrap();
        assert_valid(&next);
        assert_eq!((next.epoch(), next.replication()), (t.epoch() + 1, r));
        assert_eq!(next.owners(), t.owners());
        let mut backed = vec![0u32; machines as usize];
        for s in 0..slots {
            let b = next.backups_of_slot(s);
            assert_eq!(b.len(), usize::from(r - 1), "round {round}");
            assert!(b.iter().all(|m| servers.contains(m)));
            for &m in b {
                backed[m as usize] += 1;
            }
            assert_eq!(next.primary_epoch(s), t.primary_epoch(s));
        }
        let shares: Vec<u32> = servers.iter().map(|&m| backed[m as usize]).collect();
        let (lo, hi) = (shares.iter().min().unwrap(), shares.iter().max().unwrap());
        assert!(hi - lo <= 1, "round {round}: r {r}, shares {shares:?}");
    }
    // The module doc's case: 4 servers, R = 3, 4098 slots.
    let t = SlotTable::uniform(4098, 4).unwrap();
    let t = t.with_replication(3, &[0, 1, 2, 3]).unwrap();
    let mut backed = [0u32; 4];
    for s in 0..4098 {
        for &m in t.backups_of_slot(s) {
            backed[m as usize] += 1;
        }
    }
    assert_eq!(backed, [2049; 4]);
}

#[test]
fn with_replication_refuses_what_it_cannot_do() {
    let t = SlotTable::uniform_among(8, 5, 3).unwrap();
    let key = |r: Result<SlotTable>| match r.unwrap_err() {
        PlacementError::InvalidSetting { key, .. } => key,
        e => panic!("{e}"),
    };
    assert_eq!(key(t.with_replication(0, &[0, 1, 2])), "replication");
    assert_eq!(key(t.with_replication(4, &[0, 1, 2, 3])), "replication");
    assert_eq!(key(t.with_replication(3, &[0, 1, 1])), "replication");
    assert_eq!(
        key(t.with_replication(2, &[0, 1])),
        "replication",
        "owner 2"
    );
    assert_eq!(key(t.with_replication(2, &[0, 1, 2, 5])), "servers");
    // Three servers, R = 3: every slot is backed by the other two.
    let t2 = t.with_replication(3, &[2, 0, 1]).unwrap();
    for s in 0..8 {
        let mut b = t2.backups_of_slot(s).to_vec();
        b.sort_unstable();
        let others: Vec<Machine> = (0..3).filter(|&m| m != s as Machine % 3).collect();
        assert_eq!(b, others, "slot {s}");
        assert_eq!(t2.backups_of(8 + s), t2.backups_of_slot(s));
    }
    assert!(t2.is_backup(1, 0) && !t2.is_backup(1, 1) && !t2.is_backup(9, 0));
    // Two servers, R = 2: each backs the other.
    let t = SlotTable::uniform(8, 2)
        .unwrap()
        .with_replication(2, &[0, 1])
        .unwrap();
    assert!((0..8).all(|s| t.backups_of_slot(s) == [1 - s as Machine % 2]));
}

#[test]
fn fail_over_promotes_the_first_backup_and_drops_the_dead_machine() {
    // 4 machines; slot s owned by s % 4; R = 3.
    let t = SlotTable::uniform(12, 4)
        .unwrap()
        .with_replication(3, &[0, 1, 2, 3])
        .unwrap();
    // Slot 3 loses its backups: it will wait for machine 3 to come back.
    let t = SlotTable::from_parts(
        t.epoch(),
        4,
        t.owners().to_vec(),
        3,
        (0..12)
            .map(|s| match s {
                3 => vec![],
                _ => t.backups_of_slot(s).to_vec(),
            })
            .collect(),
        (0..12)
            .map(|s| t.primary_epoch(s) + u32::from(s == 7))
            .collect(),
    )
    .unwrap();
    let (next, failovers) = t.fail_over(3).unwrap();
    assert_valid(&next);
    assert_eq!(next.epoch(), t.epoch() + 1);
    let promoted: Vec<u32> = failovers.iter().map(|f| f.slot).collect();
    assert_eq!(promoted, [7, 11], "in slot order; slot 3 has no backup");
    for f in &failovers {
        let s = f.slot;
        assert_eq!((f.from, f.to), (3, t.backups_of_slot(s)[0]));
        assert_eq!(f.primary_epoch, t.primary_epoch(s) + 1);
        assert_eq!(next.owner_of_slot(s), Some(f.to));
        assert_eq!(next.primary_epoch(s), f.primary_epoch);
        assert!(
            next.backups_of_slot(s).is_empty(),
            "the others lack records"
        );
    }
    assert_eq!(next.primary_epoch(7), 3);
    assert_eq!(next.owner_of_slot(3), Some(3), "no backup: it waits");
    for s in (0..12).filter(|s| !promoted.contains(s)) {
        assert_eq!(next.primary_epoch(s), t.primary_epoch(s), "slot {s}");
        let expect: Vec<Machine> = t
            .backups_of_slot(s)
            .iter()
            .copied()
            .filter(|&m| m != 3)
            .collect();
        assert_eq!(next.backups_of_slot(s), expect, "slot {s}");
    }
    assert!(t.fail_over(4).is_err());
    // A machine that owns nothing and backs nothing: only the epoch moves.
    let (same, none) = next.without_backup(3).unwrap().fail_over(3).unwrap();
    assert!(none.is_empty());
    assert_eq!(same.owners(), next.owners());
}

/// `t` with every slot's backups made up to R - 1 from `live` (as after
/// copying the slot to them), lowest ids first.
fn re_replicated(t: &SlotTable, live: &[Machine]) -> SlotTable {
    let mut t = t.clone();
    for s in 0..t.slots() {
        for &m in live {
            if t.backups_of_slot(s).len() + 1 < usize::from(t.replication())
                && t.owner_of_slot(s) != Some(m)
                && !t.is_backup(s, m)
            {
                t = t.add_backup(s, m).unwrap();
            }
        }
    }
    t
}

#[test]
fn two_failures_in_turn_with_r_3_leave_every_slot_on_a_live_machine() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(62);
    for round in 0..200 {
        let n = rng.gen_range(3..=8u16);
        let servers: Vec<Machine> = (0..n as Machine).collect();
        let t = SlotTable::uniform(rng.gen_range(1..=300), n)
            .unwrap()
            .with_replication(3, &servers)
            .unwrap();
        let first = rng.gen_range(0..n) as Machine;
        let second = (first + rng.gen_range(1..n) as Machine) % n as Machine;
        let (t1, f1) = t.fail_over(first).unwrap();
        assert_eq!(f1.len() as u32, t.counts()[first as usize], "round {round}");
        // Every slot on a live machine, whether the failed-over slots were
        // copied again before the second failure or not: R = 3 gives every
        // slot two backups, so the second failure finds one for each slot
        // it owned before the first; a slot promoted onto `second` lost
        // its other backup at promotion and is caught by re-replication.
        let live: Vec<Machine> = servers.iter().copied().filter(|&m| m != first).collect();
        let copied = re_replicated(&t1, &live);
        let (t2, f2) = copied.fail_over(second).unwrap();
        assert_valid(&t2);
        for s in 0..t2.slots() {
            let o = t2.owner_of_slot(s).unwrap();
            assert!(o != first && o != second, "round {round}: slot {s} on {o}");
            assert!(!t2.is_backup(s, first) && !t2.is_backup(s, second));
        }
        for f in &f2 {
            let twice = f1.iter().any(|g| g.slot == f.slot);
            assert_eq!(f.primary_epoch, 2 + u32::from(twice), "round {round}");
        }
        // Without the copy, only slots promoted onto `second` wait for it.
        let (t2, _) = t1.fail_over(second).unwrap();
        for s in 0..t2.slots() {
            let o = t2.owner_of_slot(s).unwrap();
            let promoted_onto_second = f1.iter().any(|f| f.slot == s && f.to == second);
            assert_eq!(o == second, promoted_onto_second, "round {round}: slot {s}");
            assert_ne!(o, first);
        }
    }
}

#[test]
fn backups_are_added_one_by_one_and_removed_everywhere() {
    let t = SlotTable::uniform(4, 4)
        .unwrap()
        .with_replication(3, &[0, 1, 2, 3])
        .unwrap();
    let (t, _) = t.fail_over(0).unwrap(); // slot 0 now on 1, no backups
    assert!(t.backups_of_slot(0).is_empty());
    let key = |r: Result<SlotTable>| match r.unwrap_err() {
        PlacementError::InvalidSetting { key, .. } => key,
        e => panic!("{e}"),
    };
    assert_eq!(key(t.add_backup(0, 1)), "backup", "the owner");
    assert_eq!(key(t.add_backup(0, 4)), "backup", "out of range");
    assert_eq!(key(t.add_backup(4, 2)), "slot");
    let a = t.add_backup(0, 2).unwrap();
    assert_eq!((a.backups_of_slot(0), a.epoch()), (&[2][..], t.epoch() + 1));
    assert_eq!(key(a.add_backup(0, 2)), "backup", "already a backup");
    let b = a.add_backup(0, 3).unwrap();
    assert_eq!(b.backups_of_slot(0), [2, 3]);
    assert_eq!(key(b.add_backup(0, 0)), "backups", "R - 1 backups already");
    assert_eq!(
        b.primary_epoch(0),
        t.primary_epoch(0),
        "adding fences nothing"
    );
    let c = b.without_backup(2).unwrap();
    assert_valid(&c);
    assert_eq!(c.epoch(), b.epoch() + 1);
    assert!((0..4).all(|s| !c.is_backup(s, 2)));
    assert_eq!(c.backups_of_slot(0), [3]);
    assert_eq!(c.owners(), b.owners());
    assert!(b.without_backup(4).is_err());
    let r1 = SlotTable::uniform(4, 4).unwrap();
    assert_eq!(key(r1.add_backup(0, 1)), "backups", "R = 1 has no room");
}

#[test]
fn a_move_onto_a_backup_is_refused_and_others_bump_the_primary_epoch() {
    let t = SlotTable::uniform(6, 3)
        .unwrap()
        .with_replication(2, &[0, 1, 2])
        .unwrap();
    let onto_backup = SlotMove {
        slot: 0,
        from: 0,
        to: t.backups_of_slot(0)[0],
    };
    match t.after(&[onto_backup]).unwrap_err() {
        PlacementError::InvalidSetting { key, .. } => assert_eq!(key, "move.to"),
        e => panic!("{e}"),
    }
    let backup = t.backups_of_slot(0)[0];
    let other = (0..3).find(|&m| m != 0 && m != backup).unwrap();
    let next = t
        .after(&[SlotMove {
            slot: 0,
            from: 0,
            to: other,
        }])
        .unwrap();
    assert_valid(&next);
    assert_eq!(next.owner_of_slot(0), Some(other));
    assert_eq!(
        next.backups_of_slot(0),
        t.backups_of_slot(0),
        "backups stay"
    );
    assert_eq!((next.primary_epoch(0), next.primary_epoch(1)), (2, 1));
    let mut counts = vec![2, 2, 2];
    counts[0] -= 1;
    counts[other as usize] += 1;
    assert_eq!(next.counts(), counts, "counts count owners only");
}

mod props {
    //! Property tests of the wire form: random replicated tables round-trip;
    //! mutated and truncated encodings decode to a valid table or an error.
    use proptest::prelude::*;
    use proptest::sample::Index;
    use rand::{Rng, SeedableRng};

    use super::*;

    fn table(seed: u64) -> SlotTable {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let machines = rng.gen_range(1..=MACHINES_MAX);
        let slots = rng.gen_range(1..=64);
        random_replicated(&mut rng, slots, machines)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

        #[test]
        fn a_replicated_table_round_trips(seed in any::<u64>()) {
            let t = table(seed);
            prop_assert_eq!(SlotTable::decode(&t.encode()), Ok(t));
        }

        #[test]
        fn a_mutated_table_decodes_to_a_valid_table_or_an_error(
            seed in any::<u64>(),
            edits in proptest::collection::vec((any::<Index>(), any::<u8>()), 1..4),
            cut in proptest::option::of(any::<Index>()),
        ) {
            let mut b = table(seed).encode();
            for (at, v) in &edits {
                let i = at.index(b.len());
                b[i] = *v;
            }
            if let Some(cut) = cut {
                b.truncate(cut.index(b.len()));
            }
            if let Ok(d) = SlotTable::decode(&b) {
                assert_valid(&d);
                prop_assert_eq!(SlotTable::decode(&d.encode()), Ok(d));
            }
        }
    }
}

#[test]
fn a_version_2_table_is_pinned_for_the_other_clients() {
    // clients/python/tests/test_slots.py decodes these bytes too.
    let t = SlotTable::from_parts(
        1 << 32 | 7,
        4,
        vec![0, 1, 2, 3, 1],
        3,
        vec![vec![1, 2], vec![2], vec![], vec![0, 1], vec![3]],
        vec![1, 2, 1, 7, 1],
    )
    .unwrap();
    let hex: String = t.encode().iter().map(|b| format!("{b:02x}")).collect();
    let pinned = concat!(
        "4c534c54020004000700000001000000050000000001020301", // header, owners
        "03",                                                 // R
        "01000000020102",                                     // slot 0
        "020000000102",                                       // slot 1
        "0100000000",                                         // slot 2
        "07000000020001",                                     // slot 3
        "010000000103",                                       // slot 4
    );
    assert_eq!(hex, pinned);
    assert_eq!(SlotTable::decode(&t.encode()).unwrap(), t);
}

/// A rejoin's plan: after a failover, the slots short of a backup go to
/// live servers that neither own nor back them, evenly, grouped by owner
/// and learner; committing the plan makes every slot whole at one epoch.
#[test]
fn short_of_backups_plans_rejoins_evenly_and_add_backups_makes_them_whole() {
    let t = SlotTable::uniform(64, 4)
        .unwrap()
        .with_replication(2, &[0, 1, 2, 3])
        .unwrap();
    assert!(t.short_of_backups(&[0, 1, 2, 3]).is_empty());
    let (after, _) = t.fail_over(2).unwrap();
    // Server 2 is dead: only the other three may learn, and slots it now
    // owns nothing of are planned; server 2 itself is never chosen.
    let plan = after.short_of_backups(&[0, 1, 3]);
    assert!(!plan.is_empty());
    let mut per_learner = std::collections::HashMap::new();
    let mut next = after.clone();
    for (owner, learner, slots) in &plan {
        assert_ne!(owner, learner);
        assert_ne!(*learner, 2);
        for &s in slots {
            assert_eq!(after.owner_of_slot(s), Some(*owner));
            assert!(after.backups_of_slot(s).is_empty());
        }
        *per_learner.entry(*learner).or_insert(0usize) += slots.len();
        next = next.add_backups(slots, *learner).unwrap();
    }
    assert_eq!(next.epoch(), after.epoch() + plan.len() as u64);
    assert!(next.short_of_backups(&[0, 1, 3]).is_empty());
    let backs: Vec<usize> = [0u8, 1, 3]
        .iter()
        .map(|m| (0..64).filter(|&s| next.is_backup(s, *m)).count())
        .collect();
    // Server 3 took 2's 32 slots and may back only server 1's 16 that lost
    // their backup (0's are backed by 1): it gets them all, and the 16 it
    // now owns without a backup are split between 0 and 1.
    assert_eq!(backs, [24, 24, 16], "backups per server 0, 1, 3");
    // Server 2 back: nothing is short any more, so it is planned nothing
    // until a rebalance; a slot whose owner is dead is not planned.
    assert!(next.short_of_backups(&[0, 1, 2, 3]).is_empty());
    assert!(after
        .short_of_backups(&[1, 3])
        .iter()
        .all(|(o, _, _)| *o != 0));
    // Unreplicated: nothing to plan.
    assert!(SlotTable::uniform(8, 2)
        .unwrap()
        .short_of_backups(&[0, 1])
        .is_empty());
    // A slot already at R - 1 backups cannot take another.
    assert!(t.add_backups(&[0], 3).is_err() || t.is_backup(0, 3));
}

/// Once no slot is short, the plan evens the backups out: a server back
/// after its failover (backing nothing) takes slots from those backing
/// most, each move replacing one backup, until counts are within one.
#[test]
fn backup_plan_gives_a_returning_server_its_share_of_backups() {
    let t = SlotTable::uniform(60, 3)
        .unwrap()
        .with_replication(2, &[0, 1, 2])
        .unwrap();
    let (after, _) = t.fail_over(1).unwrap();
    // Server 1 dead: the short slots are made whole by 0 and 2.
    let mut whole = after.clone();
    for (o, l, r, slots) in after.backup_plan(&[0, 2]) {
        assert_eq!(r, None);
        assert_ne!(o, l);
        whole = whole.add_backups(&slots, l).unwrap();
    }
    assert!(whole.short_of_backups(&[0, 2]).is_empty());
    assert!(
        whole.backup_plan(&[0, 2]).is_empty(),
        "two servers: nothing to even out"
    );
    // Server 1 back: it takes a share, each slot keeping one backup that is
    // not its owner.
    let plan = whole.backup_plan(&[0, 1, 2]);
    assert!(!plan.is_empty());
    let mut next = whole.clone();
    for (o, l, r, slots) in &plan {
        assert_eq!(*l, 1);
        let r = r.expect("a backup replaced");
        for &s in slots {
            assert_eq!(whole.owner_of_slot(s), Some(*o));
            assert!(whole.is_backup(s, r));
        }
        next = next.replace_backups(slots, r, *l).unwrap();
    }
    let backs: Vec<usize> = (0..3u8)
        .map(|m| (0..60).filter(|&s| next.is_backup(s, m)).count())
        .collect();
    assert!(
        backs.iter().max().unwrap() - backs.iter().min().unwrap() <= 1,
        "{backs:?}"
    );
    assert!(next.backup_plan(&[0, 1, 2]).is_empty());
    assert!(next.replace_backups(&[0], 1, 1).is_err() || !next.is_backup(0, 1));
}
