//! The twin's failover driver (issue 60; `sim_cluster.rs`): what the
//! leading coordinator does when a server's lease ends
//! (`crates/server/src/moves/failover.rs`), by the same MOVE steps, on the
//! shared table (etcd's `P/slots` stand-in).

use locus_client::proto::{MoveStep, Reply, Request};
use locus_fabric::sim::SimFabric;
use locus_fabric::{Fabric, MachineId, Port};

use super::{Coverage, Shared, MACHINES, NO_DEADLINE};

/// Attempts at one step on one node before the run fails.
const STEP_TRIES: u32 = 1_000;

/// Commits `victim`'s failover in the table, then PROMOTE at every live
/// node (new primaries put their backup lists in), FAIL_OVER at each
/// (forget the victim, install the table, but not at a new primary), then
/// INSTALL at each (R4: every node has forgotten the victim before any new
/// primary serves its slots).
pub(crate) fn fail_over(
    s: &Shared,
    port: &mut <SimFabric as Fabric>::Port,
    victim: MachineId,
) -> Coverage {
    let (next, moved) = {
        let mut t = s.table.lock().unwrap();
        let (next, moved) = t
            .fail_over(victim)
            .unwrap_or_else(|e| panic!("seed {}: fail_over: {e}", s.seed));
        assert!(!moved.is_empty(), "seed {}: m{victim} had slots", s.seed);
        *t = next.clone();
        (next, moved)
    };
    // The new primaries take each step first, and the others a while
    // later: the order that shows a new primary serving the slots before
    // every other node forgot the victim (R4), were it to.
    let mut order: Vec<MachineId> = (0..MACHINES as MachineId)
        .filter(|&m| m != victim)
        .collect();
    order.sort_by_key(|m| !moved.iter().any(|f| f.to == *m));
    let raw = next.encode();
    let mut cov = Coverage {
        failovers: 1,
        ..Coverage::default()
    };
    for step in [MoveStep::Promote, MoveStep::FailOver, MoveStep::Install] {
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
            let mut tries = 0;
            loop {
                let Some((node, _)) = s.node(m) else { break };
                let mut session = node.session();
                let req = Request::Move {
                    step,
                    peer: victim,
                    slots: Vec::new(),
                    table: raw.clone(),
                    keys: Vec::new(),
                };
                match node.handle(&mut session, req, NO_DEADLINE) {
                    Reply::Move(r) => {
                        cov.promoted += r.vertices;
                        break;
                    }
                    r => {
                        tries += 1;
                        assert!(
                            tries < STEP_TRIES,
                            "seed {}: {step:?} at m{m}: {r:?}",
                            s.seed
                        );
                        port.relax();
                    }
                }
            }
        }
    }
    cov
}
