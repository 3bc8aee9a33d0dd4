//! The twin's handover driver (issue 60, `cluster rebalance --primaries`;
//! `sim_cluster.rs`): what `crates/server/src/moves/handover.rs` does, by
//! the same MOVE steps, on the shared table (etcd's `P/slots` stand-in).
//! The commit is fenced by both nodes' incarnations, as etcd's swap is by
//! their epochs. Seeded waits between the steps let clients run into each
//! window (guarded, committed, promoted, demoted, installed at some).

use locus_client::proto::MoveStep;
use locus_fabric::sim::SimFabric;
use locus_fabric::{Fabric, MachineId, Port};

use locus_wal::Crash;

use super::failover::step_at;
use super::nemesis::{kill_one, restart};
use super::{Coverage, Shared, CLIENTS_PER_NODE, MACHINES};

/// Tries at a handover's step before it is given up.
const TRIES: u32 = 200;

/// Evens the primaries out over the live nodes (each handover the table
/// plans, in turn): HANDOVER at the old primary, the commit if the table
/// and both incarnations are unchanged (else UNHAND), PROMOTE at the new
/// primary, INSTALL at the old one, then at every other node, the new
/// primary first.
pub(crate) fn give_back(s: &Shared, port: &mut <SimFabric as Fabric>::Port) -> Coverage {
    give_back_with(s, port, None)
}

/// A fault in one handover (the first whose slots hold a vertex).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Strike {
    /// The new primary loses the answers to a few records before the
    /// handover (the old primary's updates are in doubt while it holds
    /// them), and dies after it: its slots fail over back to the old
    /// primary, which must hold what the new one served (H2).
    LostAcks,
    /// The old primary dies after the commit, before it marks its keys,
    /// and restarts at once (no failover): a backup from its log (H3);
    /// then the new primary dies and its slots fail over back to it.
    OldAfterCommit,
    /// The new primary dies after HANDOVER, before the commit: the commit
    /// is refused and the old primary gives the handover up (UNHAND).
    NewBeforeCommit,
}

/// [`give_back`] with a seeded [`Strike`] (or none) in one handover, then
/// the primaries given back again; the nemesis's actor moves to a node the
/// strike leaves alone.
pub(crate) fn give_back_struck(
    f: &SimFabric,
    s: &Shared,
    port: &mut <SimFabric as Fabric>::Port,
    rng: &mut locus_fabric::sim::SimRng,
) -> Coverage {
    let strike = match rng.below(4) {
        0 => None,
        1 => Some(Strike::LostAcks),
        2 => Some(Strike::OldAfterCommit),
        _ => Some(Strike::NewBeforeCommit),
    };
    let mut cov = Coverage::default();
    if let Some(strike) = strike {
        cov.add(&give_back_with(s, port, Some((f, strike))));
    }
    cov.add(&give_back(s, port));
    cov
}

fn give_back_with(
    s: &Shared,
    port: &mut <SimFabric as Fabric>::Port,
    mut strike: Option<(&SimFabric, Strike)>,
) -> Coverage {
    let mut cov = Coverage::default();
    let live: Vec<MachineId> = (0..MACHINES as MachineId)
        .filter(|&m| s.node(m).is_some())
        .collect();
    let plan = s.table.lock().unwrap().primary_plan(&live);
    for (p, b, slots) in plan {
        if s.node(p).is_none() || s.node(b).is_none() {
            continue;
        }
        // The strike goes to the first handover of slots with vertices.
        let struck = match strike {
            Some((f, k)) if slots.iter().any(|&sl| sl < super::VERTICES) => {
                strike = None;
                let third = (0..MACHINES as MachineId)
                    .find(|&m| m != p && m != b)
                    .expect("three nodes");
                *port = f.port(third).expect("a port");
                cov.handover_strikes += 1;
                Some(k)
            }
            _ => None,
        };
        let (done, go_on) = hand_over_one(s, port, p, b, &slots, struck);
        cov.add(&done);
        if !go_on {
            break;
        }
    }
    cov
}

/// One handover of `slots` from `p` to its backup `b` (see [`give_back`]),
/// with `struck` in it; whether the plan it is part of goes on (not after
/// a strike: the table moved on). Its coverage's `handed_over` says
/// whether it committed.
pub(crate) fn hand_over_one(
    s: &Shared,
    port: &mut <SimFabric as Fabric>::Port,
    p: MachineId,
    b: MachineId,
    slots: &[u32],
    struck: Option<Strike>,
) -> (Coverage, bool) {
    let mut cov = Coverage::default();
    let me = MACHINES * CLIENTS_PER_NODE;
    let pause = |port: &mut <SimFabric as Fabric>::Port, n: u64| {
        for _ in 0..n {
            port.relax();
        }
    };
    let t = s.table.lock().unwrap().clone();
    let (Some((_, gp)), Some((nb, gb))) = (s.node(p), s.node(b)) else {
        return (cov, true);
    };
    if struck == Some(Strike::LostAcks) {
        s.doing(me, format!("handover to m{b}: m{b} loses acks"));
        nb.lose_backup_acks(1 + s.seed % 3);
        pause(port, 100 + s.seed % 200);
        nb.lose_backup_acks(0);
    }
    drop(nb);
    let raw = t.encode();
    let with_vertices: Vec<&u32> = slots.iter().filter(|&&sl| sl < super::VERTICES).collect();
    s.doing(
        me,
        format!(
            "handover of {} of m{p}'s slots to m{b} (of the vertices' slots {with_vertices:?})",
            slots.len()
        ),
    );
    for m in [b, p] {
        step_at(s, port, m, MoveStep::Install, 0, &[], &raw, TRIES);
    }
    let guarded = step_at(s, port, p, MoveStep::HandOver, b, slots, &raw, TRIES);
    pause(port, s.seed % 40);
    if struck == Some(Strike::NewBeforeCommit) {
        s.doing(me, format!("handover to m{b}: m{b} dies before the commit"));
        kill_one(s, b, Crash::ProcessCrash);
        pause(port, s.seed % 30);
        s.membership.end_lease(b);
    }
    let next = {
        let mut held = s.table.lock().unwrap();
        let same = |m: MachineId, g: u64| s.node(m).is_some_and(|(_, now)| now == g);
        if guarded.is_some() && held.epoch() == t.epoch() && same(p, gp) && same(b, gb) {
            *held = t
                .hand_primaries(slots, b)
                .unwrap_or_else(|e| panic!("seed {}: the handover's table: {e}", s.seed));
            Some(held.clone())
        } else {
            None
        }
    };
    let Some(next) = next else {
        s.doing(me, format!("handover to m{b}: UNHAND at m{p}"));
        step_at(s, port, p, MoveStep::Unhand, b, slots, &[], TRIES);
        cov.handovers_abandoned += 1;
        if struck.is_some() {
            cov.add(&dies_and_comes_back(s, port, b, false));
            return (cov, false);
        }
        return (cov, true);
    };
    cov.handed_over += slots.len() as u64;
    let raw = next.encode();
    s.doing(me, format!("handover to m{b}: PROMOTE at m{b}"));
    if let Some(r) = step_at(s, port, b, MoveStep::Promote, 0, &[], &raw, TRIES) {
        cov.promoted += r.vertices;
    }
    pause(port, s.seed % 50);
    if struck == Some(Strike::OldAfterCommit) {
        s.doing(
            me,
            format!("handover to m{b}: m{p} dies before it marks its keys"),
        );
        kill_one(s, p, Crash::ProcessCrash);
        pause(port, s.seed % 30);
        s.membership.end_lease(p);
        pause(port, s.seed % 30);
        deaths_processed(s, port);
        s.doing(me, format!("handover to m{b}: m{p} restarts"));
        let node = restart(s, p);
        s.join(p, node)
            .unwrap_or_else(|e| panic!("seed {}: restart of m{p}: {e}", s.seed));
        cov.restarts += 1;
    }
    s.doing(me, format!("handover to m{b}: INSTALL at m{p}"));
    step_at(s, port, p, MoveStep::Install, 0, &[], &raw, TRIES);
    let mut order: Vec<MachineId> = (0..MACHINES as MachineId).filter(|&m| m != p).collect();
    order.sort_by_key(|&m| m != b);
    for (i, m) in order.into_iter().enumerate() {
        if i == 1 {
            // The new primary takes updates while the others still
            // hold the old table: their reads of the old primary's
            // key table must find its markers (H4).
            pause(port, s.seed % 120);
        }
        s.doing(me, format!("handover to m{b}: INSTALL at m{m}"));
        step_at(s, port, m, MoveStep::Install, 0, &[], &raw, TRIES);
    }
    if matches!(struck, Some(Strike::LostAcks | Strike::OldAfterCommit)) {
        // The new primary dies: its slots fail over back to the old one.
        pause(port, 50 + s.seed % 100);
        cov.add(&dies_and_comes_back(s, port, b, true));
        return (cov, false);
    }
    (cov, true)
}

/// Waits until every live node's watch has delivered what it holds (a
/// death among it): a node restarted before a survivor processed its old
/// incarnation's death hits the open CrashTwice case (docs/design.md,
/// "Replication and failover", Open), which this scenario does not test.
pub(crate) fn deaths_processed(s: &Shared, port: &mut <SimFabric as Fabric>::Port) {
    for _ in 0..100_000 {
        let waiting = (0..MACHINES).any(|m| {
            s.node(m as MachineId).is_some()
                && s.slots[m]
                    .watch
                    .lock()
                    .unwrap()
                    .is_some_and(|w| s.membership.pending(w))
        });
        if !waiting {
            return;
        }
        port.relax();
    }
    panic!("seed {}: a watch never delivered its events", s.seed);
}

/// Node `m` dies (killed unless `kill` is false: dead already), its lease
/// ends, its slots fail over, it restarts and is made a backup again.
pub(crate) fn dies_and_comes_back(
    s: &Shared,
    port: &mut <SimFabric as Fabric>::Port,
    m: MachineId,
    kill: bool,
) -> Coverage {
    let me = MACHINES * CLIENTS_PER_NODE;
    let mut cov = Coverage::default();
    if kill {
        s.doing(me, format!("handover's strike: m{m} dies"));
        kill_one(s, m, Crash::ProcessCrash);
        cov.crashes += 1;
        for _ in 0..s.seed % 50 {
            port.relax();
        }
        s.membership.end_lease(m);
    }
    for _ in 0..s.seed % 50 {
        port.relax();
    }
    s.doing(me, format!("handover's strike: failing m{m} over"));
    let (failed, pending) = super::failover::fail_over_any(s, port, m, false);
    assert!(pending.is_none(), "seed {}: a new primary is down", s.seed);
    cov.add(&failed);
    for _ in 0..s.seed % 80 {
        port.relax();
    }
    deaths_processed(s, port);
    s.doing(me, format!("handover's strike: m{m} restarts"));
    let node = restart(s, m);
    s.join(m, node)
        .unwrap_or_else(|e| panic!("seed {}: restart of m{m}: {e}", s.seed));
    cov.restarts += 1;
    cov.add(&super::rejoin::rejoin(s, port));
    cov
}
