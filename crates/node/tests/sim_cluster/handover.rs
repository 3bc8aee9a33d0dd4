//! The twin's handover driver (issue 60, `cluster rebalance --primaries`;
//! `sim_cluster.rs`): what `crates/server/src/moves/handover.rs` does, by
//! the same MOVE steps, on the shared table (etcd's `P/slots` stand-in).
//! The commit is fenced by both nodes' incarnations, as etcd's swap is by
//! their epochs. Seeded waits between the steps let clients run into each
//! window (guarded, committed, promoted, demoted, installed at some).

use locus_client::proto::MoveStep;
use locus_fabric::sim::SimFabric;
use locus_fabric::{Fabric, MachineId, Port};

use super::failover::step_at;
use super::{Coverage, Shared, CLIENTS_PER_NODE, MACHINES};

/// Tries at a handover's step before it is given up.
const TRIES: u32 = 200;

/// Evens the primaries out over the live nodes (each handover the table
/// plans, in turn): HANDOVER at the old primary, the commit if the table
/// and both incarnations are unchanged (else UNHAND), PROMOTE at the new
/// primary, INSTALL at the old one, then at every other node, the new
/// primary first.
pub(crate) fn give_back(s: &Shared, port: &mut <SimFabric as Fabric>::Port) -> Coverage {
    let mut cov = Coverage::default();
    let live: Vec<MachineId> = (0..MACHINES as MachineId)
        .filter(|&m| s.node(m).is_some())
        .collect();
    let plan = s.table.lock().unwrap().primary_plan(&live);
    let me = MACHINES * CLIENTS_PER_NODE;
    let pause = |port: &mut <SimFabric as Fabric>::Port, n: u64| {
        for _ in 0..n {
            port.relax();
        }
    };
    for (p, b, slots) in plan {
        let t = s.table.lock().unwrap().clone();
        let (Some((_, gp)), Some((_, gb))) = (s.node(p), s.node(b)) else {
            continue;
        };
        let raw = t.encode();
        s.doing(
            me,
            format!("handover of {} of m{p}'s slots to m{b}", slots.len()),
        );
        for m in [b, p] {
            step_at(s, port, m, MoveStep::Install, 0, &[], &raw, TRIES);
        }
        let guarded = step_at(s, port, p, MoveStep::HandOver, b, &slots, &raw, TRIES);
        pause(port, s.seed % 40);
        let next = {
            let mut held = s.table.lock().unwrap();
            let same = |m: MachineId, g: u64| s.node(m).is_some_and(|(_, now)| now == g);
            if guarded.is_some() && held.epoch() == t.epoch() && same(p, gp) && same(b, gb) {
                *held = t
                    .hand_primaries(&slots, b)
                    .unwrap_or_else(|e| panic!("seed {}: the handover's table: {e}", s.seed));
                Some(held.clone())
            } else {
                None
            }
        };
        let Some(next) = next else {
            s.doing(me, format!("handover to m{b}: UNHAND at m{p}"));
            step_at(s, port, p, MoveStep::Unhand, b, &slots, &[], TRIES);
            cov.handovers_abandoned += 1;
            continue;
        };
        cov.handed_over += slots.len() as u64;
        let raw = next.encode();
        s.doing(me, format!("handover to m{b}: PROMOTE at m{b}"));
        if let Some(r) = step_at(s, port, b, MoveStep::Promote, 0, &[], &raw, TRIES) {
            cov.promoted += r.vertices;
        }
        pause(port, s.seed % 50);
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
    }
    cov
}
