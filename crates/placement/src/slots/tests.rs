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
