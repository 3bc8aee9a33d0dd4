//! CHECK (F1-F4 of `docs/design.md`, the fault lab): every checked vertex's
//! history with its final read is linearizable against the adjacency-list
//! model (the checker of the store's simulation and of the twin); no
//! acknowledged insert that no delete touched is missing from the final
//! read; every failure says why; a two-hop answer from v holds only the
//! target its marker leads to (the only vertex two hops from v: inserted ids
//! have no lists: the marker's).

use std::collections::{BTreeMap, HashSet};

use locus_workloads::history::{
    check_history, show_history, Call, Event, Ret, Verdict, SEARCH_NODES_MAX,
};
use serde::Serialize;

use super::clients::{marker, target, Op, OpKind, Outcome};

/// Violations quoted in full in the report.
const DETAILS_MAX: usize = 3;

/// What the check found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Checked {
    /// Vertices whose history was checked.
    pub keys_checked: u64,
    /// Acknowledged inserts and deletes.
    pub acknowledged_writes: u64,
    /// Acknowledged inserts no delete touched, missing from the final read.
    pub lost_acknowledged_writes: u64,
    /// Histories that are not linearizable, two-hop answers no
    /// linearization allows, failures without a reason, final reads that failed.
    pub violations: u64,
    /// Histories the search gave up on (neither proven nor refuted).
    pub too_long: u64,
    /// Two-hop answers checked.
    pub two_hop_checked: u64,
    /// Two-hop answers holding the marker's target (the rest were empty).
    pub two_hop_with_target: u64,
    /// The first few violations, in full.
    pub details: Vec<String>,
}

/// The final read of one vertex: its list, or why it failed.
pub struct FinalRead {
    /// The vertex.
    pub vertex: u32,
    /// Its list.
    pub list: Result<Vec<u32>, String>,
    /// Its places in the sequence and times.
    pub invoke: u64,
    /// See `invoke`.
    pub response: u64,
    /// Time of the invocation (ns).
    pub invoke_ns: u64,
    /// Time of the response (ns).
    pub response_ns: u64,
}

/// Checks `ops` and the final reads, for a run of `clients` clients.
pub fn check(ops: &[Op], finals: &[FinalRead], clients: usize) -> Checked {
    let mut c = Checked::default();
    let mut by_vertex: BTreeMap<u32, Vec<Event>> = BTreeMap::new();
    for op in ops {
        match (&op.kind, &op.outcome) {
            (OpKind::TwoHop, Outcome::Ok) => {
                c.two_hop_checked += 1;
                let v = op.event.vertex;
                let allowed = target(v, clients);
                let answer = op.two_hop.as_deref().unwrap_or_default();
                if answer.contains(&allowed) {
                    c.two_hop_with_target += 1;
                }
                if answer.iter().any(|&x| x != allowed) {
                    violation(
                        &mut c,
                        format!(
                            "vertex {v}: a two-hop query by client {} returned {answer:?}; \
                             only [{allowed}] is two hops away",
                            op.event.client
                        ),
                    );
                }
            }
            (OpKind::TwoHop, _) => {}
            (OpKind::Read, Outcome::Ok) => by_vertex
                .entry(op.event.vertex)
                .or_default()
                .push(op.event.clone()),
            // A failed read changed nothing: not in the history.
            (OpKind::Read, _) => {}
            (_, Outcome::Failed(_)) => {}
            (_, Outcome::Ok | Outcome::Unknown(_)) => {
                if op.outcome == Outcome::Ok {
                    c.acknowledged_writes += 1;
                }
                by_vertex
                    .entry(op.event.vertex)
                    .or_default()
                    .push(op.event.clone());
            }
        }
        if let Outcome::Failed(why) | Outcome::Unknown(why) = &op.outcome {
            if why.trim().is_empty() {
                violation(
                    &mut c,
                    format!(
                        "an operation on vertex {} failed without a reason",
                        op.event.vertex
                    ),
                );
            }
        }
    }
    for f in finals {
        let list = match &f.list {
            Ok(l) => l.clone(),
            Err(why) => {
                violation(
                    &mut c,
                    format!("vertex {}: the final read failed: {why}", f.vertex),
                );
                continue;
            }
        };
        let mut h = by_vertex.remove(&f.vertex).unwrap_or_default();
        c.lost_acknowledged_writes += lost(&h, &list);
        h.push(Event {
            vertex: f.vertex,
            client: usize::MAX,
            machine: 0,
            call: Call::Read { k: usize::MAX },
            ret: Ret::List(list),
            invoke: f.invoke,
            response: f.response,
            invoke_ns: f.invoke_ns,
            response_ns: f.response_ns,
        });
        h.sort_by_key(|e| e.invoke);
        c.keys_checked += 1;
        let initial = [marker(f.vertex, clients)];
        match check_history(&initial, &h, SEARCH_NODES_MAX) {
            Verdict::Linearizable(_) => {}
            Verdict::Violation { deepest } => violation(
                &mut c,
                format!(
                    "vertex {}: history not linearizable; longest linearizable prefix {deepest:?}\n{}",
                    f.vertex,
                    show_history(&initial, &h)
                ),
            ),
            Verdict::TooLong { nodes } => {
                c.too_long += 1;
                if c.details.len() < DETAILS_MAX {
                    c.details.push(format!(
                        "vertex {}: the search gave up after {nodes} nodes (not a violation)",
                        f.vertex
                    ));
                }
            }
        }
    }
    c
}

fn violation(c: &mut Checked, what: String) {
    c.violations += 1;
    if c.details.len() < DETAILS_MAX {
        c.details.push(what);
    }
}

/// Acknowledged inserts in `h` with no delete of the same id (acknowledged
/// or unknown) that `final_list` lacks.
fn lost(h: &[Event], final_list: &[u32]) -> u64 {
    let deleted: HashSet<u32> = h
        .iter()
        .filter_map(|e| match e.call {
            Call::Delete(u) => Some(u),
            _ => None,
        })
        .collect();
    h.iter()
        .filter(|e| e.ret != Ret::Unknown)
        .filter_map(|e| match e.call {
            Call::Insert(u) => Some(u),
            _ => None,
        })
        .filter(|u| !deleted.contains(u) && !final_list.contains(u))
        .count() as u64
}
