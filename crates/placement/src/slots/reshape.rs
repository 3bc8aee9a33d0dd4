//! A replicated cluster changes shape (issue 60 with issue 59's commands;
//! `docs/design.md`, "A replicated cluster changes shape", S1-S3): the
//! rejoins and handovers that leave every slot on the members asked for,
//! primaries and backups even, without a plain slot move (which a
//! replicated slot cannot take). Pure: the driver runs the steps in order.

use super::{Machine, SlotTable};
use crate::error::Result;

/// Rounds a plan may take before it stops where it is (none of the tests
/// needs more than a handful).
pub const RESHAPE_ROUNDS: usize = 16;

/// One step of a reshaping, each committed alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReshapeStep {
    /// `learner` takes a copy of `slots` (owned by `owner`) and backs them,
    /// in `replaces`'s place among their backups, or added.
    Rejoin {
        /// The slots' owner, which teaches.
        owner: Machine,
        /// The member that learns them.
        learner: Machine,
        /// The backup it replaces, if any.
        replaces: Option<Machine>,
        /// The slots.
        slots: Vec<u32>,
    },
    /// `to`, a backup of each of `slots`, owns them from here on.
    HandOver {
        /// The slots' owner.
        from: Machine,
        /// The backup that takes them over.
        to: Machine,
        /// The slots.
        slots: Vec<u32>,
    },
}

impl ReshapeStep {
    /// The step's slots.
    pub fn slots(&self) -> &[u32] {
        match self {
            ReshapeStep::Rejoin { slots, .. } | ReshapeStep::HandOver { slots, .. } => slots,
        }
    }

    /// The same step over `slots` only (a batch of it).
    pub fn with_slots(&self, slots: Vec<u32>) -> ReshapeStep {
        match *self {
            ReshapeStep::Rejoin {
                owner,
                learner,
                replaces,
                ..
            } => ReshapeStep::Rejoin {
                owner,
                learner,
                replaces,
                slots,
            },
            ReshapeStep::HandOver { from, to, .. } => ReshapeStep::HandOver { from, to, slots },
        }
    }
}

/// A whole reshaping, as planned from one table.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReshapePlan {
    /// The steps, in order.
    pub steps: Vec<ReshapeStep>,
    /// Rounds it took.
    pub rounds: usize,
    /// Whether nothing was left to do after the last round (false: it
    /// stopped after [`RESHAPE_ROUNDS`]).
    pub done: bool,
}

impl ReshapePlan {
    /// Slots copied (each rejoin's slots) and slots handed over.
    pub fn totals(&self) -> (u64, u64) {
        let mut t = (0, 0);
        for s in &self.steps {
            match s {
                ReshapeStep::Rejoin { slots, .. } => t.0 += slots.len() as u64,
                ReshapeStep::HandOver { slots, .. } => t.1 += slots.len() as u64,
            }
        }
        t
    }
}

impl SlotTable {
    /// The table after `step` (its commit), at the next epoch.
    pub fn after_step(&self, step: &ReshapeStep) -> Result<SlotTable> {
        match step {
            ReshapeStep::Rejoin {
                learner,
                replaces: Some(r),
                slots,
                ..
            } => self.replace_backups(slots, *r, *learner),
            ReshapeStep::Rejoin {
                learner,
                replaces: None,
                slots,
                ..
            } => self.add_backups(slots, *learner),
            ReshapeStep::HandOver { to, slots, .. } => self.hand_primaries(slots, *to),
        }
    }

    /// Every step that leaves all slots on `members` (S3), round after
    /// round on the table as the steps before leave it, until nothing is
    /// left or [`RESHAPE_ROUNDS`] were made. Refused without replication,
    /// with a member out of range, or with fewer members than copies.
    pub fn reshape_plan(&self, members: &[Machine]) -> Result<ReshapePlan> {
        let members = self.check_members(members)?;
        let mut plan = ReshapePlan::default();
        let mut t = self.clone();
        while plan.rounds < RESHAPE_ROUNDS {
            let round = t.reshape_round(&members);
            if round.is_empty() {
                plan.done = true;
                return Ok(plan);
            }
            for step in round {
                t = t.after_step(&step)?;
                plan.steps.push(step);
            }
            plan.rounds += 1;
        }
        plan.done = t.reshape_round(&members).is_empty();
        Ok(plan)
    }

    /// `slots` owned by `to` from here on (`cluster move` with
    /// replication): a rejoin of `to` for each slot it does not back
    /// (added if the slot has room, else in the place of its last backup),
    /// then the handovers. Slots `to` owns already are left out.
    pub fn move_plan(&self, slots: &[u32], to: Machine) -> Result<Vec<ReshapeStep>> {
        self.check_replicated()?;
        self.check_machine("to", to)?;
        let mut rejoins: std::collections::BTreeMap<(Machine, Option<Machine>), Vec<u32>> =
            Default::default();
        let mut handed: std::collections::BTreeMap<Machine, Vec<u32>> = Default::default();
        for &s in slots {
            let Some(owner) = self.owner_of_slot(s) else {
                return Err(super::invalid(
                    "slot",
                    s.to_string(),
                    format!("below {}", self.slots()),
                ));
            };
            if owner == to {
                continue;
            }
            let backups = self.backups_of_slot(s);
            if !backups.contains(&to) {
                let room = backups.len() + 1 < usize::from(self.replication);
                let replaces = if room { None } else { backups.last().copied() };
                rejoins.entry((owner, replaces)).or_default().push(s);
            }
            handed.entry(owner).or_default().push(s);
        }
        let mut steps: Vec<ReshapeStep> = rejoins
            .into_iter()
            .map(|((owner, replaces), slots)| ReshapeStep::Rejoin {
                owner,
                learner: to,
                replaces,
                slots,
            })
            .collect();
        steps.extend(
            handed
                .into_iter()
                .map(|(from, slots)| ReshapeStep::HandOver { from, to, slots }),
        );
        Ok(steps)
    }

    /// `members` sorted, deduplicated and checked (see `reshape_plan`).
    fn check_members(&self, members: &[Machine]) -> Result<Vec<Machine>> {
        self.check_replicated()?;
        let mut m = members.to_vec();
        m.sort_unstable();
        m.dedup();
        for &x in &m {
            self.check_machine("members", x)?;
        }
        if m.len() < usize::from(self.replication) {
            return Err(super::invalid(
                "members",
                format!("{m:?}"),
                format!(
                    "at least {} servers: each slot is kept on {} (replication {})",
                    self.replication, self.replication, self.replication
                ),
            ));
        }
        Ok(m)
    }

    fn check_replicated(&self) -> Result<()> {
        if self.replication <= 1 {
            return Err(super::invalid(
                "replication",
                "1".into(),
                "at least 2 (one copy of each slot: slots move by plain slot moves)".into(),
            ));
        }
        Ok(())
    }

    /// The next round (design S1-S3): primaries off non-members, then
    /// backups off them, then the members' backups, then their primaries.
    fn reshape_round(&self, members: &[Machine]) -> Vec<ReshapeStep> {
        let round = self.primaries_off(members);
        if !round.is_empty() {
            return round;
        }
        // The members' primaries evened out while a leaver still backs its
        // old slots: the handovers make the chains, and the copies the
        // leaver's backups need go where the backups are fewest after them.
        if self.holds_off(members) {
            let round = self.primaries_even(members);
            if !round.is_empty() {
                return round;
            }
        }
        let round = self.backups_off(members);
        if !round.is_empty() {
            return round;
        }
        let round: Vec<ReshapeStep> = self
            .backup_plan(members)
            .into_iter()
            .map(|(owner, learner, replaces, slots)| ReshapeStep::Rejoin {
                owner,
                learner,
                replaces,
                slots,
            })
            .collect();
        if !round.is_empty() {
            return round;
        }
        self.primaries_even(members)
    }

    fn primaries_even(&self, members: &[Machine]) -> Vec<ReshapeStep> {
        self.primary_plan(members)
            .into_iter()
            .map(|(from, to, slots)| ReshapeStep::HandOver { from, to, slots })
            .collect()
    }

    /// Whether a machine that is not a member backs a slot.
    fn holds_off(&self, members: &[Machine]) -> bool {
        self.backups
            .iter()
            .any(|b| b.as_slice().iter().any(|m| !members.contains(m)))
    }

    /// How many slots each of `members` backs.
    fn backs_counts(&self, members: &[Machine]) -> std::collections::BTreeMap<Machine, usize> {
        let mut backs: std::collections::BTreeMap<Machine, usize> =
            members.iter().map(|&m| (m, 0)).collect();
        for b in &self.backups {
            for m in b.as_slice() {
                if let Some(n) = backs.get_mut(m) {
                    *n += 1;
                }
            }
        }
        backs
    }

    /// Round 1: each slot a non-member owns goes to its member backup
    /// owning fewest; if one has no member backup, the round is rejoins
    /// that give such slots one first (S2).
    fn primaries_off(&self, members: &[Machine]) -> Vec<ReshapeStep> {
        use std::collections::BTreeMap;
        let mut owns: BTreeMap<Machine, usize> = members.iter().map(|&m| (m, 0)).collect();
        for o in &self.owners {
            if let Some(n) = owns.get_mut(o) {
                *n += 1;
            }
        }
        let mut backs = self.backs_counts(members);
        let mut handed: BTreeMap<(Machine, Machine), Vec<u32>> = BTreeMap::new();
        let mut needs: BTreeMap<(Machine, Machine, Option<Machine>), Vec<u32>> = BTreeMap::new();
        for (s, &o) in self.owners.iter().enumerate() {
            if owns.contains_key(&o) {
                continue;
            }
            let backups = self.backups[s].as_slice();
            let to = backups
                .iter()
                .copied()
                .filter(|b| owns.contains_key(b))
                .min_by_key(|b| (owns[b], *b));
            if let Some(to) = to {
                *owns.get_mut(&to).expect("a member") += 1;
                handed.entry((o, to)).or_default().push(s as u32);
                continue;
            }
            let learner = members
                .iter()
                .copied()
                .filter(|m| !backups.contains(m))
                .min_by_key(|m| (backs[m], *m))
                .expect("a member backs nothing of a slot no member backs");
            *backs.get_mut(&learner).expect("a member") += 1;
            let room = backups.len() + 1 < usize::from(self.replication);
            let replaces = if room { None } else { backups.last().copied() };
            needs
                .entry((o, learner, replaces))
                .or_default()
                .push(s as u32);
        }
        if !needs.is_empty() {
            return needs
                .into_iter()
                .map(|((owner, learner, replaces), slots)| ReshapeStep::Rejoin {
                    owner,
                    learner,
                    replaces,
                    slots,
                })
                .collect();
        }
        handed
            .into_iter()
            .map(|((from, to), slots)| ReshapeStep::HandOver { from, to, slots })
            .collect()
    }

    /// Round 2: in each slot a non-member backs (one per slot per round),
    /// the member backing fewest that holds no copy of it takes its place.
    fn backups_off(&self, members: &[Machine]) -> Vec<ReshapeStep> {
        let mut backs = self.backs_counts(members);
        let mut groups: std::collections::BTreeMap<(Machine, Machine, Machine), Vec<u32>> =
            Default::default();
        for (s, b) in self.backups.iter().enumerate() {
            let backups = b.as_slice();
            let Some(&gone) = backups.iter().find(|m| !backs.contains_key(m)) else {
                continue;
            };
            let owner = self.owners[s];
            // Members hold at most R - 1 copies here (one copy is the
            // non-member's) and are at least R: one is free.
            let Some(learner) = members
                .iter()
                .copied()
                .filter(|&m| m != owner && !backups.contains(&m))
                .min_by_key(|m| (backs[m], *m))
            else {
                continue;
            };
            *backs.get_mut(&learner).expect("a member") += 1;
            groups
                .entry((owner, learner, gone))
                .or_default()
                .push(s as u32);
        }
        groups
            .into_iter()
            .map(|((owner, learner, gone), slots)| ReshapeStep::Rejoin {
                owner,
                learner,
                replaces: Some(gone),
                slots,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn owns(t: &SlotTable, m: Machine) -> usize {
        (0..t.slots())
            .filter(|&s| t.owner_of_slot(s) == Some(m))
            .count()
    }

    fn backs(t: &SlotTable, m: Machine) -> usize {
        (0..t.slots()).filter(|&s| t.is_backup(s, m)).count()
    }

    /// Applies `plan` step by step, checking S1 and S2 at each, and S3 at
    /// the end. Returns the table after it.
    fn apply_and_check(t: &SlotTable, plan: &ReshapePlan, members: &[Machine]) -> SlotTable {
        let copies = |t: &SlotTable, s: u32| 1 + t.backups_of_slot(s).len();
        let mut now = t.clone();
        for step in &plan.steps {
            if let ReshapeStep::HandOver { from, to, slots } = step {
                for &s in slots {
                    assert_eq!(now.owner_of_slot(s), Some(*from), "{step:?}");
                    assert!(now.is_backup(s, *to), "S2: {step:?} in {now:?}");
                }
            }
            let next = now.after_step(step).unwrap();
            for s in 0..t.slots() {
                assert!(
                    copies(&next, s) >= copies(&now, s),
                    "S1: slot {s} by {step:?}"
                );
            }
            now = next;
        }
        assert!(plan.done, "not done after {} rounds", plan.rounds);
        for s in 0..now.slots() {
            let o = now.owner_of_slot(s).unwrap();
            assert!(members.contains(&o), "slot {s} owned by {o}");
            let b = now.backups_of_slot(s);
            assert!(b.iter().all(|m| members.contains(m)), "slot {s}: {b:?}");
            assert_eq!(b.len() + 1, usize::from(now.replication()), "slot {s}");
        }
        let b: Vec<usize> = members.iter().map(|&m| backs(&now, m)).collect();
        assert!(
            b.iter().max().unwrap() - b.iter().min().unwrap() <= 1,
            "backups {b:?}"
        );
        assert!(now.reshape_plan(members).unwrap().steps.is_empty());
        now
    }

    #[test]
    fn a_server_joins_a_replicated_cluster_and_takes_its_share_of_both() {
        // R = 2 over 3 servers, room for 4.
        let t = SlotTable::uniform_among(4096, 4, 3)
            .unwrap()
            .with_replication(2, &[0, 1, 2])
            .unwrap();
        let members = [0, 1, 2, 3];
        let plan = t.reshape_plan(&members).unwrap();
        let after = apply_and_check(&t, &plan, &members);
        let o: Vec<usize> = members.iter().map(|&m| owns(&after, m)).collect();
        assert!(
            o.iter().max().unwrap() - o.iter().min().unwrap() <= 1,
            "{o:?}"
        );
        // Server 3 holds two shares in the end: each a copy it learned.
        let (copied, handed) = plan.totals();
        assert_eq!(copied, 2048, "{} rounds", plan.rounds);
        assert_eq!(handed, 1024);
        assert!(plan.rounds <= 5, "{} rounds", plan.rounds);
    }

    #[test]
    fn a_server_leaves_a_replicated_cluster_after_its_copies_are_made_elsewhere() {
        let t = SlotTable::uniform(4096, 4)
            .unwrap()
            .with_replication(2, &[0, 1, 2, 3])
            .unwrap();
        let members = [1, 2, 3];
        let plan = t.reshape_plan(&members).unwrap();
        let after = apply_and_check(&t, &plan, &members);
        assert_eq!(owns(&after, 0) + backs(&after, 0), 0);
        let o: Vec<usize> = members.iter().map(|&m| owns(&after, m)).collect();
        assert!(
            o.iter().max().unwrap() - o.iter().min().unwrap() <= 1,
            "{o:?}"
        );
        // Its 2,048 copies are made again, each once.
        let (copied, handed) = plan.totals();
        assert_eq!(copied, 2048, "{} rounds", plan.rounds);
        // Its 1,024 primaries all go to server 1 (their only backup), which
        // hands a third of its 2,048 on: no copy either way.
        assert!(handed <= 2048, "{handed}");
        // The leaver's primaries go first, by handover (no copy).
        assert!(matches!(
            plan.steps[0],
            ReshapeStep::HandOver { from: 0, .. }
        ));
    }

    #[test]
    fn too_few_members_or_no_replication_is_refused_before_any_step() {
        let t = SlotTable::uniform(64, 2)
            .unwrap()
            .with_replication(2, &[0, 1])
            .unwrap();
        let e = t.reshape_plan(&[1]).unwrap_err().to_string();
        assert!(e.contains("at least 2 servers"), "{e}");
        assert!(t.reshape_plan(&[0, 5]).is_err());
        let e = SlotTable::uniform(64, 2)
            .unwrap()
            .reshape_plan(&[0, 1])
            .unwrap_err()
            .to_string();
        assert!(e.contains("plain slot moves"), "{e}");
    }

    #[test]
    fn a_move_with_replication_makes_the_target_a_backup_then_hands_it_the_slots() {
        let t = SlotTable::uniform_among(16, 4, 3)
            .unwrap()
            .with_replication(2, &[0, 1, 2])
            .unwrap();
        let slots: Vec<u32> = (0..16).collect();
        let steps = t.move_plan(&slots, 3).unwrap();
        let mut now = t.clone();
        for s in &steps {
            now = now.after_step(s).unwrap();
        }
        for s in 0..16 {
            assert_eq!(now.owner_of_slot(s), Some(3));
            // The old owner is its backup: it held every list.
            assert_eq!(now.backups_of_slot(s), &[t.owner_of_slot(s).unwrap()]);
        }
        // A slot the target backs is handed with no copy.
        let backed = (0..16).find(|&s| t.is_backup(s, 1)).unwrap();
        let steps = t.move_plan(&[backed], 1).unwrap();
        assert!(matches!(steps[..], [ReshapeStep::HandOver { to: 1, .. }]));
    }

    /// Random replicated tables (some servers failed over, some slots
    /// short of backups) and random member sets: the plan ends with S3,
    /// never lowering a slot's copies (S1), handing only to backups (S2).
    fn shaped() -> impl Strategy<Value = (SlotTable, Vec<Machine>)> {
        (2u8..=3, 3u16..=6, any::<u64>(), 0u8..3, any::<u64>()).prop_map(
            |(r, n, seed, failed, pick)| {
                use rand::{Rng, SeedableRng};
                let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
                let servers: Vec<Machine> = (0..n as u8).collect();
                let mut t = SlotTable::uniform_among(256, 8, n)
                    .unwrap()
                    .with_replication(r, &servers)
                    .unwrap();
                // Failovers of some servers (fewer than R - 1 + 1 in all).
                for _ in 0..failed.min(r - 1) {
                    let dead = rng.gen_range(0..n as u8);
                    if let Ok((next, _)) = t.fail_over(dead) {
                        t = next;
                    }
                }
                // Members: any subset of at least R of the 8 machines that
                // keeps every slot with a member copy, plus new machines.
                let mut members: Vec<Machine> = (0..8u8)
                    .filter(|m| (pick >> m) & 1 == 1 || u16::from(*m) < u16::from(r))
                    .collect();
                members.sort_unstable();
                (t, members)
            },
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn any_plan_ends_with_every_slot_on_the_members((t, members) in shaped()) {
            let plan = t.reshape_plan(&members).unwrap();
            prop_assert!(plan.rounds <= 12, "{} rounds", plan.rounds);
            apply_and_check(&t, &plan, &members);
        }
    }
}
