//! Plans of rejoins (issue 60 requirement 3; `docs/design.md`,
//! "Replication and failover", "Rejoin"): which live server should back
//! which slots, as the leading coordinator and the twin ask.

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
}
