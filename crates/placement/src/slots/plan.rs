//! Plans of rejoins and handovers (issue 60 requirement 3; `docs/design.md`,
//! "Replication and failover", "Rejoin" and "Primaries given back"): which
//! live server should back which slots, as the leading coordinator and the
//! twin ask, and which should own them again.

use super::{Machine, SlotTable};

impl SlotTable {
    /// Slots short of backups whose owner is in `live`, each with the
    /// member of `live` to learn it (neither its owner nor a backup of it:
    /// the one backing fewest slots so far, lowest id first), grouped by
    /// (owner, learner) in that order: what rejoins make whole, one backup
    /// per slot at a time. Empty without replication.
    pub fn short_of_backups(&self, live: &[Machine]) -> Vec<(Machine, Machine, Vec<u32>)> {
        if self.replication <= 1 {
            return Vec::new();
        }
        let mut live: Vec<Machine> = live.to_vec();
        live.sort_unstable();
        live.dedup();
        let mut backs: std::collections::HashMap<Machine, usize> =
            live.iter().map(|&m| (m, 0)).collect();
        for b in &self.backups {
            for m in b.as_slice() {
                if let Some(n) = backs.get_mut(m) {
                    *n += 1;
                }
            }
        }
        let mut groups: std::collections::BTreeMap<(Machine, Machine), Vec<u32>> =
            Default::default();
        for (s, &owner) in self.owners.iter().enumerate() {
            let backups = self.backups[s].as_slice();
            if !live.contains(&owner) || backups.len() + 1 >= usize::from(self.replication) {
                continue;
            }
            let learner = live
                .iter()
                .copied()
                .filter(|&m| m != owner && !backups.contains(&m))
                .min_by_key(|m| (backs[m], *m));
            if let Some(l) = learner {
                *backs.get_mut(&l).expect("live") += 1;
                groups.entry((owner, l)).or_default().push(s as u32);
            }
        }
        groups.into_iter().map(|((o, l), s)| (o, l, s)).collect()
    }

    /// What rejoins should make of the backups, over the `live` servers:
    /// the slots short of a backup first ([`SlotTable::short_of_backups`]);
    /// when none is, backups moved from the live server backing most slots
    /// to the one backing fewest until no two differ by more than one (a
    /// server back after its failover takes its share again). Each entry is
    /// (owner, learner, the backup it replaces, if any, slots).
    pub fn backup_plan(
        &self,
        live: &[Machine],
    ) -> Vec<(Machine, Machine, Option<Machine>, Vec<u32>)> {
        let short = self.short_of_backups(live);
        if !short.is_empty() || self.replication <= 1 {
            return short.into_iter().map(|(o, l, s)| (o, l, None, s)).collect();
        }
        let mut live: Vec<Machine> = live.to_vec();
        live.sort_unstable();
        live.dedup();
        let mut backups: Vec<Vec<Machine>> =
            self.backups.iter().map(|b| b.as_slice().to_vec()).collect();
        let backs = |backups: &Vec<Vec<Machine>>, m: Machine| {
            backups.iter().filter(|b| b.contains(&m)).count()
        };
        let mut groups: std::collections::BTreeMap<(Machine, Machine, Machine), Vec<u32>> =
            Default::default();
        for _ in 0..self.owners.len() {
            let (Some(&most), Some(&fewest)) = (
                live.iter()
                    .max_by_key(|&&m| (backs(&backups, m), std::cmp::Reverse(m))),
                live.iter().min_by_key(|&&m| (backs(&backups, m), m)),
            ) else {
                break;
            };
            if backs(&backups, most) <= backs(&backups, fewest) + 1 {
                break;
            }
            // A slot `most` backs, of a live owner, that `fewest` may back.
            let slot = (0..self.owners.len()).rev().find(|&s| {
                let owner = self.owners[s];
                backups[s].contains(&most)
                    && !backups[s].contains(&fewest)
                    && owner != fewest
                    && live.contains(&owner)
            });
            let Some(s) = slot else { break };
            for m in &mut backups[s] {
                if *m == most {
                    *m = fewest;
                }
            }
            groups
                .entry((self.owners[s], fewest, most))
                .or_default()
                .push(s as u32);
        }
        groups
            .into_iter()
            .map(|((o, l, r), mut s)| {
                s.sort_unstable();
                (o, l, Some(r), s)
            })
            .collect()
    }

    /// Handovers that even the primaries out over the `live` servers
    /// (`cluster rebalance --primaries`): one slot at a time leaves the
    /// live server owning most for one owning at least two fewer, along a
    /// chain of handovers if need be (each hop hands a slot to one of its
    /// backups: a handover needs no copy, the backup holds every list),
    /// until no two live servers differ by more than one or no chain
    /// reaches one that owns fewer. Each entry is (owner, new owner,
    /// slots), grouped by the pair; a slot is handed at most once per
    /// plan. Empty without replication.
    pub fn primary_plan(&self, live: &[Machine]) -> Vec<(Machine, Machine, Vec<u32>)> {
        use std::collections::{BTreeMap, HashMap, VecDeque};
        if self.replication <= 1 {
            return Vec::new();
        }
        let mut live: Vec<Machine> = live.to_vec();
        live.sort_unstable();
        live.dedup();
        let mut owners = self.owners.clone();
        let mut owns: HashMap<Machine, usize> = live.iter().map(|&m| (m, 0)).collect();
        for o in &owners {
            if let Some(n) = owns.get_mut(o) {
                *n += 1;
            }
        }
        let mut handed = vec![false; owners.len()];
        let mut groups: BTreeMap<(Machine, Machine), Vec<u32>> = Default::default();
        loop {
            let mut givers: Vec<Machine> = live.clone();
            givers.sort_by_key(|m| (std::cmp::Reverse(owns[m]), *m));
            // Breadth first from each giver, most loaded first: a hop u -> v
            // is a slot u owns, not handed yet, that v backs.
            let chain = givers.iter().find_map(|&from| {
                let mut parent: HashMap<Machine, (Machine, usize)> = HashMap::new();
                let mut queue = VecDeque::from([from]);
                while let Some(u) = queue.pop_front() {
                    for (s, &o) in owners.iter().enumerate().rev() {
                        if o != u || handed[s] {
                            continue;
                        }
                        for &v in self.backups[s].as_slice() {
                            if v == from || parent.contains_key(&v) || !owns.contains_key(&v) {
                                continue;
                            }
                            parent.insert(v, (u, s));
                            if owns[&v] + 1 < owns[&from] {
                                let mut hops = Vec::new();
                                let mut at = v;
                                while at != from {
                                    let (p, s) = parent[&at];
                                    hops.push((p, at, s));
                                    at = p;
                                }
                                return Some(hops);
                            }
                            queue.push_back(v);
                        }
                    }
                }
                None
            });
            let Some(hops) = chain else { break };
            for (from, to, s) in hops {
                owners[s] = to;
                handed[s] = true;
                *owns.get_mut(&from).expect("live") -= 1;
                *owns.get_mut(&to).expect("live") += 1;
                groups.entry((from, to)).or_default().push(s as u32);
            }
        }
        // Chains both ways between two servers swap primaries for nothing:
        // a slot handed u -> v and another v -> u leave both counts as
        // they were, so neither is handed.
        let pairs: Vec<(Machine, Machine)> = groups.keys().copied().collect();
        for (u, v) in pairs {
            if u >= v {
                continue;
            }
            let n = match (groups.get(&(u, v)), groups.get(&(v, u))) {
                (Some(a), Some(b)) => a.len().min(b.len()),
                _ => continue,
            };
            for k in [(u, v), (v, u)] {
                let g = groups.get_mut(&k).expect("both present");
                g.truncate(g.len() - n);
            }
        }
        groups
            .into_iter()
            .filter(|(_, s)| !s.is_empty())
            .map(|((f, t), mut s)| {
                s.sort_unstable();
                (f, t, s)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use crate::slots::SlotTable;

    /// R = 2 over 3 servers, server 1 failed over and made a backup again:
    /// 0 and 2 own every slot, 1 backs its share.
    fn after_failover_and_rejoin() -> SlotTable {
        let t = SlotTable::uniform(60, 3)
            .unwrap()
            .with_replication(2, &[0, 1, 2])
            .unwrap();
        let (mut t, _) = t.fail_over(1).unwrap();
        for _ in 0..4 {
            for (_, l, r, slots) in t.backup_plan(&[0, 1, 2]) {
                t = match r {
                    Some(r) => t.replace_backups(&slots, r, l).unwrap(),
                    None => t.add_backups(&slots, l).unwrap(),
                };
            }
        }
        assert!(t.backup_plan(&[0, 1, 2]).is_empty());
        t
    }

    #[test]
    fn handing_a_primary_to_its_backup_swaps_them_at_a_new_primary_epoch() {
        let t = after_failover_and_rejoin();
        let s = (0..60).find(|&s| t.is_backup(s, 1)).unwrap();
        let owner = t.owner_of_slot(s).unwrap();
        let next = t.hand_primaries(&[s], 1).unwrap();
        assert_eq!(next.epoch(), t.epoch() + 1);
        assert_eq!(next.owner_of_slot(s), Some(1));
        assert_eq!(next.backups_of_slot(s), &[owner]);
        assert_eq!(next.primary_epoch(s), t.primary_epoch(s) + 1);
        let other = (0..60).find(|&o| o != s).unwrap();
        assert_eq!(next.owner_of_slot(other), t.owner_of_slot(other));
        assert_eq!(next.primary_epoch(other), t.primary_epoch(other));
        // Only a backup takes a primary over: it holds every list.
        let not_backup = (0..60)
            .find(|&o| !t.is_backup(o, 1) && t.owner_of_slot(o) != Some(1))
            .unwrap();
        let e = t.hand_primaries(&[not_backup], 1).unwrap_err().to_string();
        assert!(e.contains("backs"), "{e}");
        assert!(t.hand_primaries(&[60], 1).is_err());
        assert!(t.hand_primaries(&[s], 9).is_err());
    }

    #[test]
    fn the_primary_plan_gives_a_returning_server_its_share_of_primaries() {
        let t = after_failover_and_rejoin();
        let owns =
            |t: &SlotTable, m: u8| (0..60).filter(|&s| t.owner_of_slot(s) == Some(m)).count();
        assert_eq!(owns(&t, 1), 0);
        let plan = t.primary_plan(&[0, 1, 2]);
        let mut next = t.clone();
        for (from, to, slots) in &plan {
            for &s in slots {
                assert_eq!(t.owner_of_slot(s), Some(*from));
                assert!(t.is_backup(s, *to), "only a backup takes a slot over");
            }
            next = next.hand_primaries(slots, *to).unwrap();
        }
        let counts: Vec<usize> = (0..3).map(|m| owns(&next, m)).collect();
        assert!(
            counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1,
            "{counts:?}"
        );
        assert!(
            next.primary_plan(&[0, 1, 2]).is_empty(),
            "even: nothing to do"
        );
        for (f, to, _) in &plan {
            assert!(
                !plan.iter().any(|(f2, t2, _)| f2 == to && t2 == f),
                "primaries swapped both ways between {f} and {to}: {plan:?}"
            );
        }
        // A dead server takes nothing; without replication there is no plan.
        assert!(t
            .primary_plan(&[0, 2])
            .iter()
            .all(|(f, to, _)| *f != 1 && *to != 1));
        assert!(SlotTable::uniform(60, 3)
            .unwrap()
            .primary_plan(&[0, 1, 2])
            .is_empty());
    }

    #[test]
    fn the_primary_plan_stops_where_no_backup_can_take_one_more() {
        // R = 2 over 3 servers where server 2 backs nothing of server 0's.
        let t = SlotTable::uniform(6, 3).unwrap();
        let owners = vec![0, 0, 0, 0, 1, 1];
        let t = SlotTable::from_parts(
            t.epoch(),
            3,
            owners,
            2,
            vec![vec![1], vec![1], vec![1], vec![1], vec![0], vec![0]],
            vec![1; 6],
        )
        .unwrap();
        let plan = t.primary_plan(&[0, 1, 2]);
        // 0 gives one to 1 (4 vs 2); 2 backs nothing, so takes nothing.
        assert_eq!(plan, vec![(0, 1, vec![3])]);
    }
}
