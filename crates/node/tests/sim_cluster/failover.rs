//! The twin's failover driver (issue 60; `sim_cluster.rs`): what the
//! leading coordinator does when a server's lease ends
//! (`crates/server/src/moves/failover.rs`), by the same MOVE steps, on the
//! shared table (etcd's `P/slots` stand-in).

use locus_client::proto::{MoveReply, MoveStep, Reply, Request};
use locus_fabric::sim::SimFabric;
use locus_fabric::{Fabric, MachineId, Port};

use super::{Coverage, Shared, MACHINES, NO_DEADLINE};

/// Attempts at one step on one node before the run fails.
const STEP_TRIES: u32 = 1_000;

/// A failover committed whose steps wait for a new primary that is down
/// (restarting): [`finish`] them once it joined.
pub(crate) struct Pending {
    victim: MachineId,
    raw: Vec<u8>,
    to: Vec<MachineId>,
}

/// Commits `victim`'s failover in the table, then PROMOTE at every live
/// node (new primaries put their backup lists in), FAIL_OVER at each
/// (forget the victim, install the table, but not at a new primary), then
/// INSTALL at each (R4: every node has forgotten the victim before any new
/// primary serves its slots). No node installs the table before every new
/// primary promoted (as `crates/server/src/moves/failover.rs`): if one is
/// down, the steps stop after PROMOTE and the failover is [`Pending`].
pub(crate) fn fail_over(
    s: &Shared,
    port: &mut <SimFabric as Fabric>::Port,
    victim: MachineId,
) -> (Coverage, Option<Pending>) {
    fail_over_any(s, port, victim, true)
}

/// [`fail_over`]; unless `owns`, `victim` may own no slot (it only leaves
/// the backups).
pub(crate) fn fail_over_any(
    s: &Shared,
    port: &mut <SimFabric as Fabric>::Port,
    victim: MachineId,
    owns: bool,
) -> (Coverage, Option<Pending>) {
    let (next, moved) = {
        let mut t = s.table.lock().unwrap();
        let (next, moved) = t
            .fail_over(victim)
            .unwrap_or_else(|e| panic!("seed {}: fail_over: {e}", s.seed));
        assert!(
            !owns || !moved.is_empty(),
            "seed {}: m{victim} had slots",
            s.seed
        );
        *t = next.clone();
        (next, moved)
    };
    let mut to: Vec<MachineId> = moved.iter().map(|f| f.to).collect();
    to.sort_unstable();
    to.dedup();
    let p = Pending {
        victim,
        raw: next.encode(),
        to,
    };
    let mut cov = Coverage {
        failovers: 1,
        ..Coverage::default()
    };
    match finish(s, port, &p) {
        Some(c) => {
            cov.add(&c);
            (cov, None)
        }
        None => (cov, Some(p)),
    }
}

/// The steps of a committed failover: None if a new primary is down (it
/// stopped after PROMOTE).
pub(crate) fn finish(
    s: &Shared,
    port: &mut <SimFabric as Fabric>::Port,
    p: &Pending,
) -> Option<Coverage> {
    let victim = p.victim;
    // The new primaries take each step first, and the others a while
    // later: the order that shows a new primary serving the slots before
    // every other node forgot the victim (R4), were it to.
    let mut order: Vec<MachineId> = (0..MACHINES as MachineId)
        .filter(|&m| m != victim)
        .collect();
    order.sort_by_key(|m| !p.to.contains(m));
    let mut cov = Coverage::default();
    for step in [MoveStep::Promote, MoveStep::FailOver, MoveStep::Install] {
        if step == MoveStep::FailOver && p.to.iter().any(|&m| s.node(m).is_none()) {
            return None;
        }
        for (i, &m) in order.iter().enumerate() {
            if i == 1 {
                for _ in 0..s.seed % 300 {
                    port.relax();
                }
            }
            s.doing(
                MACHINES * super::CLIENTS_PER_NODE,
                format!("failover of m{victim}: {step:?} at m{m}"),
            );
            if let Some(r) = step_at(s, port, m, step, victim, &[], &p.raw, STEP_TRIES) {
                cov.promoted += r.vertices;
            }
        }
    }
    Some(cov)
}

/// `step` at node `m` as the driver sends it, tried until it answers (up
/// to `tries` times: then the run fails unless `tries` is below
/// [`STEP_TRIES`], when it gives up with None); None at once if `m` is down.
#[allow(clippy::too_many_arguments)]
pub(crate) fn step_at(
    s: &Shared,
    port: &mut <SimFabric as Fabric>::Port,
    m: MachineId,
    step: MoveStep,
    peer: MachineId,
    slots: &[u32],
    table: &[u8],
    tries: u32,
) -> Option<MoveReply> {
    let mut tried = 0;
    loop {
        let (node, _) = s.node(m)?;
        let mut session = node.session();
        let req = Request::Move {
            step,
            peer,
            slots: slots.to_vec(),
            table: table.to_vec(),
            keys: Vec::new(),
        };
        match node.handle(&mut session, req, NO_DEADLINE) {
            Reply::Move(r) => return Some(r),
            r => {
                tried += 1;
                if tried >= tries {
                    assert!(
                        tries < STEP_TRIES,
                        "seed {}: {step:?} at m{m}: {r:?}",
                        s.seed
                    );
                    return None;
                }
                port.relax();
            }
        }
    }
}
