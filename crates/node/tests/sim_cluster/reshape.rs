//! The twin's reshaping driver (issues 59 and 60: `cluster remove-server`
//! and `add-server` of a replicated cluster; `sim_cluster.rs`): what
//! `crates/server/src/moves/reshape.rs` does, the table's plan
//! (`SlotTable::reshape_plan`) run step by step by the rejoin and handover
//! drivers, planned again after a step that did not commit (the command
//! run again). A node leaves while the clients run, with one rejoin struck
//! in two seeds of three (its learner or its teacher killed before the
//! commit: the copy the rejoin was to replace must still be there, S1);
//! in half the seeds a member then dies and its slots fail over to the
//! copies the reshaping made; the leaver is stopped once it holds nothing,
//! restarts from its disk, and the slots are reshaped over all three
//! again.

use locus_client::proto::MoveStep;
use locus_fabric::sim::{SimFabric, SimRng};
use locus_fabric::{Fabric, MachineId, Port};
use locus_store::SlotTable;
use locus_wal::Crash;

use super::failover::step_at;
use super::handover::{dies_and_comes_back, hand_over_one};
use super::nemesis::{kill_one, restart};
use super::rejoin::{rejoin_one, RejoinStrike};
use super::{Coverage, Shared, CLIENTS_PER_NODE, MACHINES, VERTICES};
use locus_placement::slots::ReshapeStep;

/// Plans a reshaping may take (each after a step that did not commit).
const PLANS: usize = 8;
/// Tries at a recall step.
const TRIES: u32 = 200;

/// A node leaves and comes back (see the module doc).
pub(crate) fn leave_and_come_back(
    f: &SimFabric,
    s: &Shared,
    port: &mut <SimFabric as Fabric>::Port,
    rng: &mut SimRng,
) -> Coverage {
    let me = MACHINES * CLIENTS_PER_NODE;
    let mut cov = Coverage::default();
    let all: Vec<MachineId> = (0..MACHINES as MachineId).collect();
    let leaver = rng.below(MACHINES as u64) as MachineId;
    let others: Vec<MachineId> = all.iter().copied().filter(|&m| m != leaver).collect();
    let strike = match rng.below(3) {
        0 => None,
        1 => Some(RejoinStrike::Learner),
        _ => Some(RejoinStrike::Teacher),
    };
    s.doing(
        me,
        format!("m{leaver} leaves: the slots reshaped over {others:?}, strike {strike:?}"),
    );
    s.reshaping
        .store(true, std::sync::atomic::Ordering::Release);
    cov.add(&reshape(f, s, port, &others, strike));
    if rng.below(2) == 0 {
        // A member dies once the leaver holds nothing: its slots fail over
        // to the copies the reshaping made (each must hold every list).
        let victim = others[rng.below(others.len() as u64) as usize];
        let spared = others.iter().copied().find(|&m| m != victim).expect("two");
        *port = f.port(spared).expect("a port");
        s.doing(me, format!("m{leaver} left: m{victim} dies"));
        cov.add(&dies_and_comes_back(s, port, victim, true));
        // Its rejoin may have made the leaver a backup again.
        cov.add(&reshape(f, s, port, &others, None));
    }
    let held = held_by(&s.table.lock().unwrap(), leaver);
    assert_eq!(
        held, 0,
        "seed {}: m{leaver} holds {held} slots after the reshaping",
        s.seed
    );
    // Its Pragh values go home, then it is stopped (remove-server).
    *port = f.port(others[0]).expect("a port");
    for &m in &others {
        s.doing(me, format!("m{leaver} leaves: RECALL at m{m}"));
        step_at(s, port, m, MoveStep::Recall, leaver, &[], &[], TRIES);
    }
    s.doing(me, format!("m{leaver} leaves: stopped"));
    kill_one(s, leaver, Crash::ProcessCrash);
    for _ in 0..s.seed % 40 {
        port.relax();
    }
    s.membership.end_lease(leaver);
    super::handover::deaths_processed(s, port);
    // It comes back from its disk (`cluster up`), holding nothing, and
    // takes its share again (add-server's reshaping).
    s.doing(me, format!("m{leaver} comes back"));
    let node = restart(s, leaver);
    s.join(leaver, node)
        .unwrap_or_else(|e| panic!("seed {}: restart of m{leaver}: {e}", s.seed));
    cov.restarts += 1;
    cov.left += 1;
    cov.add(&reshape(f, s, port, &all, None));
    s.reshaping
        .store(false, std::sync::atomic::Ordering::Release);
    cov
}

/// Slots `m` owns or backs in `t`.
fn held_by(t: &SlotTable, m: MachineId) -> usize {
    (0..t.slots())
        .filter(|&sl| t.owner_of_slot(sl) == Some(m) || t.is_backup(sl, m))
        .count()
}

/// The plan over `members` run step by step, planned again after a step
/// that did not commit, until nothing is left; `strike` goes to the first
/// rejoin of slots with vertices (its victim is then failed over,
/// restarted and made a backup again, and the plan made again).
fn reshape(
    f: &SimFabric,
    s: &Shared,
    port: &mut <SimFabric as Fabric>::Port,
    members: &[MachineId],
    mut strike: Option<RejoinStrike>,
) -> Coverage {
    let mut cov = Coverage::default();
    for _ in 0..PLANS {
        let plan = s
            .table
            .lock()
            .unwrap()
            .reshape_plan(members)
            .unwrap_or_else(|e| panic!("seed {}: the reshaping's plan: {e}", s.seed));
        if plan.steps.is_empty() {
            return cov;
        }
        for step in &plan.steps {
            let committed = match step {
                ReshapeStep::Rejoin {
                    owner,
                    learner,
                    replaces,
                    slots,
                } => {
                    let k = match strike {
                        Some(k) if slots.iter().any(|&sl| sl < VERTICES) => {
                            strike = None;
                            Some(k)
                        }
                        _ => None,
                    };
                    let victim = k.map(|k| match k {
                        RejoinStrike::Learner => *learner,
                        RejoinStrike::Teacher => *owner,
                    });
                    if let Some(v) = victim {
                        // The nemesis acts from a node the strike spares.
                        let spared = (0..MACHINES as MachineId)
                            .find(|&m| m != v && s.node(m).is_some())
                            .expect("a live node");
                        *port = f.port(spared).expect("a port");
                        cov.reshape_strikes += 1;
                    }
                    let c = rejoin_one(s, port, *owner, *learner, *replaces, slots, k);
                    let committed = c.rejoined > 0;
                    cov.add(&c);
                    if let Some(v) = victim {
                        cov.add(&dies_and_comes_back(s, port, v, false));
                        false
                    } else {
                        committed
                    }
                }
                ReshapeStep::HandOver { from, to, slots } => {
                    let (c, _) = hand_over_one(s, port, *from, *to, slots, None);
                    let committed = c.handed_over > 0;
                    cov.add(&c);
                    committed
                }
            };
            if !committed {
                break;
            }
            cov.reshaped += step.slots().len() as u64;
        }
    }
    panic!(
        "seed {}: the slots are not reshaped over {members:?} after {PLANS} plans",
        s.seed
    );
}
