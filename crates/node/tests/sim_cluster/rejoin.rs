//! The twin's rejoin driver (issue 60 requirement 3; `sim_cluster.rs`):
//! what the leading coordinator does for slots short of a backup
//! (`crates/server/src/moves/rejoin.rs`), by the same MOVE steps, on the
//! shared table (etcd's `P/slots` stand-in). The commit is fenced by the
//! primary's and the learner's incarnations (a node killed or restarted
//! meanwhile fails it), as etcd's swap is by their epochs.

use locus_client::proto::MoveStep;
use locus_fabric::sim::SimFabric;
use locus_fabric::{Fabric, MachineId, Port};

use locus_wal::Crash;

use super::failover::step_at;
use super::nemesis::kill_one;
use super::{Coverage, Shared, CLIENTS_PER_NODE, MACHINES};

/// Tries at a rejoin's step before it is given up (a node not at the
/// table's epoch yet, or busy).
const TRIES: u32 = 200;

/// Makes live nodes backups of the slots short of one, or evens the
/// backups out (each rejoin the table plans, in turn): LEARN at the learner and the primary, COPY at
/// the primary, then the commit in the shared table if it and both
/// incarnations are unchanged, else the table at its next epoch (every
/// learning ends); then INSTALL at every live node.
pub(crate) fn rejoin(s: &Shared, port: &mut <SimFabric as Fabric>::Port) -> Coverage {
    let mut cov = Coverage::default();
    let live: Vec<MachineId> = (0..MACHINES as MachineId)
        .filter(|&m| s.node(m).is_some())
        .collect();
    let plan = s.table.lock().unwrap().backup_plan(&live);
    for (p, d, replaces, slots) in plan {
        cov.add(&rejoin_one(s, port, p, d, replaces, &slots, None));
    }
    cov
}

/// A node killed in a rejoin after its COPY, before the commit
/// (`sim_cluster/reshape.rs`): the commit is refused, the learning ends
/// with the table at its next epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RejoinStrike {
    /// The learner dies.
    Learner,
    /// The primary that teaches dies (its slots fail over, perhaps to the
    /// backup the rejoin was to replace).
    Teacher,
}

/// One rejoin of `d` as a backup of `slots` of `p` (in `replaces`'s place,
/// or added), see [`rejoin`], with `strike` in it (the struck node is
/// killed and its lease ended; the caller fails it over). Its coverage's
/// `rejoined` says whether it committed.
pub(crate) fn rejoin_one(
    s: &Shared,
    port: &mut <SimFabric as Fabric>::Port,
    p: MachineId,
    d: MachineId,
    replaces: Option<MachineId>,
    slots: &[u32],
    strike: Option<RejoinStrike>,
) -> Coverage {
    let mut cov = Coverage::default();
    let me = MACHINES * CLIENTS_PER_NODE;
    {
        let t = s.table.lock().unwrap().clone();
        let (Some((_, gp)), Some((_, gd))) = (s.node(p), s.node(d)) else {
            return cov;
        };
        let raw = t.encode();
        s.doing(
            me,
            format!(
                "rejoin of m{d} as a backup of {} of m{p}'s slots",
                slots.len()
            ),
        );
        let step = |port: &mut <SimFabric as Fabric>::Port, at, what, peer| {
            step_at(s, port, at, what, peer, slots, &raw, TRIES)
        };
        let mut taught = false;
        // The rule a reshaping must keep broken on purpose: a backup
        // replaced in the table with no copy made (S1).
        let uncopied = replaces.is_some()
            && std::env::var("LOCUS_SIM_FAULT").as_deref() == Ok("replace-without-copy");
        let copied = if uncopied {
            Some(locus_client::proto::MoveReply::default())
        } else {
            step(port, d, MoveStep::Learn, p).and_then(|_| {
                taught = true;
                step(port, p, MoveStep::Learn, d)?;
                // A while for updates to reach the learner live before the copy.
                for _ in 0..s.seed % 60 {
                    port.relax();
                }
                step(port, p, MoveStep::Copy, d)
            })
        };
        for _ in 0..s.seed % 30 {
            port.relax();
        }
        if let Some(k) = strike {
            let victim = match k {
                RejoinStrike::Learner => d,
                RejoinStrike::Teacher => p,
            };
            s.doing(
                me,
                format!("rejoin of m{d}: m{victim} dies before the commit"),
            );
            kill_one(s, victim, Crash::ProcessCrash);
            cov.crashes += 1;
            for _ in 0..s.seed % 30 {
                port.relax();
            }
            s.membership.end_lease(victim);
        }
        let now = {
            let mut held = s.table.lock().unwrap();
            let same = |m: MachineId, g: u64| s.node(m).is_some_and(|(_, now)| now == g);
            if copied.is_some() && held.epoch() == t.epoch() && same(p, gp) && same(d, gd) {
                *held = match replaces {
                    Some(r) => t.replace_backups(slots, r, d),
                    None => t.add_backups(slots, d),
                }
                .unwrap_or_else(|e| panic!("seed {}: the rejoin's table: {e}", s.seed));
                cov.rejoined += slots.len() as u64;
            } else if taught && held.epoch() == t.epoch() {
                *held = t.next_epoch();
                cov.rejoins_abandoned += 1;
            } else if taught {
                cov.rejoins_abandoned += 1;
            }
            held.clone()
        };
        let raw = now.encode();
        for m in 0..MACHINES as MachineId {
            s.doing(me, format!("rejoin of m{d}: INSTALL at m{m}"));
            step_at(s, port, m, MoveStep::Install, 0, &[], &raw, TRIES);
        }
    }
    cov
}
