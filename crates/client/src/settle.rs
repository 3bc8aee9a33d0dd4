//! What a slot-move driver does with the batches it finds in flight (issue
//! 59; docs/design.md "Moves across servers", V1, and "One mover at a
//! time", MV3), as a plan without I/O: from each server's MOVE status and
//! the table etcd holds, which batches roll forward, which roll back, what
//! a server forgets and whether the table must be installed again. The
//! driver (`locus_server::moves::Mover::settle`) and the simulated twin's
//! settling driver both carry it out.

use std::collections::{BTreeMap, HashSet};

use locus_placement::slots::SlotTable;

use crate::proto::SlotInFlight;

/// One batch: its old home A, its new home B, its slots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// The old home.
    pub from: u8,
    /// The new home.
    pub to: u8,
    /// The slots.
    pub slots: Vec<u32>,
}

/// What settling does, in this order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SettlePlan {
    /// Handed batches not committed (A lists them handed, or B serves
    /// them): SERVE at B, commit, install (V1: from HAND on a batch only
    /// rolls forward).
    pub forward: Vec<Batch>,
    /// Batches guarded but not handed: RELEASE at A (it takes back what B
    /// took), then FORGET at B.
    pub back: Vec<Batch>,
    /// Per server, slots it took over whose batch is in neither list above
    /// and that the table does not give it, their old home having answered
    /// without them (it no longer guards them): FORGET there.
    pub stale: Vec<(u8, Vec<u32>)>,
    /// Some slot in flight is already its target's in the table: the
    /// table is installed again so that every server ends the batch.
    pub install: bool,
}

impl SettlePlan {
    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.forward.is_empty() && self.back.is_empty() && self.stale.is_empty() && !self.install
    }
}

/// The plan for `statuses` (each server that answered, with the slots in
/// flight through it) against the committed `table`.
pub fn settle_plan(statuses: &[(u8, Vec<SlotInFlight>)], table: &SlotTable) -> SettlePlan {
    let mut plan = SettlePlan::default();
    let mut forward: BTreeMap<(u8, u8), Vec<u32>> = BTreeMap::new();
    let mut back: BTreeMap<(u8, u8), Vec<u32>> = BTreeMap::new();
    for (a, in_flight) in statuses {
        for f in in_flight.iter().filter(|f| f.leaving) {
            if table.owner_of_slot(f.slot) == Some(f.peer) {
                plan.install = true;
            } else if f.handed {
                forward.entry((*a, f.peer)).or_default().push(f.slot);
            } else {
                back.entry((*a, f.peer)).or_default().push(f.slot);
            }
        }
    }
    // A slot served by its new home was handed by its old one (SERVE
    // comes only after HAND): forward, even while the old home is down.
    for (b, in_flight) in statuses {
        for f in in_flight.iter().filter(|f| !f.leaving && f.handed) {
            let listed = forward.values().flatten().any(|&s| s == f.slot);
            if !listed && table.owner_of_slot(f.slot) != Some(*b) {
                forward.entry((f.peer, *b)).or_default().push(f.slot);
            }
        }
    }
    let forwarded: HashSet<u32> = forward.values().flatten().copied().collect();
    let forgotten: HashSet<(u8, u32)> = back
        .iter()
        .flat_map(|((_, b), slots)| slots.iter().map(move |&s| (*b, s)))
        .collect();
    // An old home that did not answer may hold the batch handed (HANDED
    // is in its log): its arrivals wait for it (twin seed 45: forgetting
    // them lost a handed batch once that home came back).
    let answered: HashSet<u8> = statuses.iter().map(|(m, _)| *m).collect();
    for (a, in_flight) in statuses {
        let stale: Vec<u32> = in_flight
            .iter()
            .filter(|f| {
                !f.leaving
                    && answered.contains(&f.peer)
                    && !forwarded.contains(&f.slot)
                    && !forgotten.contains(&(*a, f.slot))
                    && table.owner_of_slot(f.slot) != Some(*a)
            })
            .map(|f| f.slot)
            .collect();
        if !stale.is_empty() {
            plan.stale.push((*a, stale));
        }
        plan.install |= in_flight
            .iter()
            .any(|f| !f.leaving && table.owner_of_slot(f.slot) == Some(*a));
    }
    let batch = |((from, to), slots): ((u8, u8), Vec<u32>)| Batch { from, to, slots };
    plan.forward = forward.into_iter().map(batch).collect();
    plan.back = back.into_iter().map(batch).collect();
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(slot: u32, leaving: bool, handed: bool, peer: u8) -> SlotInFlight {
        SlotInFlight {
            slot,
            leaving,
            handed,
            peer,
        }
    }

    #[test]
    fn handed_rolls_forward_guarded_rolls_back_committed_installs_and_orphans_are_forgotten() {
        // Three servers, slots dealt round-robin: slot s is server s % 3's.
        let table = SlotTable::uniform(12, 3).unwrap();
        let owner = |s: u32| table.owner_of_slot(s).unwrap();
        let (s_handed, s_guarded, s_orphan) = (
            (0..12).find(|&s| owner(s) == 0).unwrap(),
            (0..12).find(|&s| owner(s) == 1).unwrap(),
            (0..12).rev().find(|&s| owner(s) == 0).unwrap(),
        );
        let statuses = vec![
            // A = 0 handed s_handed to 1; 1 serves it.
            (0, vec![f(s_handed, true, true, 1)]),
            (
                1,
                vec![
                    f(s_handed, false, true, 0),
                    // A = 1 guards s_guarded for 2, not handed.
                    f(s_guarded, true, false, 2),
                ],
            ),
            (
                2,
                vec![
                    f(s_guarded, false, false, 1),
                    // Taken from 0, which no longer guards it (it restarted).
                    f(s_orphan, false, false, 0),
                ],
            ),
        ];
        let plan = settle_plan(&statuses, &table);
        assert_eq!(
            plan.forward,
            vec![Batch {
                from: 0,
                to: 1,
                slots: vec![s_handed]
            }]
        );
        assert_eq!(
            plan.back,
            vec![Batch {
                from: 1,
                to: 2,
                slots: vec![s_guarded]
            }]
        );
        assert_eq!(plan.stale, vec![(2, vec![s_orphan])]);
        assert!(!plan.install);
        // Once the handed batch's table is committed, it is installed
        // again instead (a driver that died between commit and install).
        let committed = table
            .after(&[locus_placement::slots::SlotMove {
                slot: s_handed,
                from: 0,
                to: 1,
            }])
            .unwrap();
        let plan = settle_plan(&statuses, &committed);
        assert!(plan.forward.is_empty() && plan.install);
        assert!(settle_plan(&[(0, vec![]), (1, vec![])], &table).is_empty());
        // The old home down (no status from it): its new home's served
        // slot still rolls forward, never forgotten.
        let plan = settle_plan(&statuses[1..], &table);
        assert_eq!(
            plan.forward[0],
            Batch {
                from: 0,
                to: 1,
                slots: vec![s_handed]
            }
        );
        assert!(plan.stale.iter().all(|(_, s)| !s.contains(&s_handed)));
        // The old home of an arrival not served did not answer: it may
        // have handed it (HANDED logged), so the arrival is not forgotten.
        let without_0: Vec<_> = statuses.iter().filter(|(m, _)| *m != 0).cloned().collect();
        assert!(settle_plan(&without_0, &table).stale.is_empty());
    }
}
