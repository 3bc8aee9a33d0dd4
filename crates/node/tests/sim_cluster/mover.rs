//! The simulated twin's mover (issue 59): slot moves across the nodes by
//! the steps `locus cluster move` sends (`Request::Move`): guard, take,
//! hand (the decision), serve (B coordinates the slot's updates from
//! here), then the table committed in the shared table (etcd's stand-in)
//! and installed on every node that is up; a batch A refuses to hand is
//! rolled back, a handed one only rolls forward. Meanwhile clients update
//! by the table or at any node, and the nemesis crashes a node; see
//! `sim_cluster.rs`.

use std::sync::atomic::Ordering;

use locus_client::proto::{MoveReply, MoveStep, Reply, Request};
use locus_client::settle::settle_plan;
use locus_fabric::sim::{SimFabric, SimRng};
use locus_fabric::{Fabric, MachineId, Port};
use locus_node::member::MembershipStore;
use locus_store::SlotMove;

use super::{Coverage, Hunt, Shared, JOINER, MACHINES, NO_DEADLINE, VERTICES};

/// Slot moves the mover tries in a run.
const MOVES_PER_RUN: usize = 4;

fn step(
    s: &Shared,
    at: MachineId,
    step: MoveStep,
    peer: MachineId,
    slots: &[u32],
    keys: Vec<u64>,
) -> Option<MoveReply> {
    let (node, _) = s.node(at)?;
    let table = if step == MoveStep::Install {
        s.table.lock().unwrap().encode()
    } else {
        Vec::new()
    };
    let mut sess = node.session();
    match node.handle(
        &mut sess,
        Request::Move {
            step,
            peer,
            slots: slots.to_vec(),
            table,
            keys,
        },
        NO_DEADLINE,
    ) {
        Reply::Move(r) => Some(r),
        _ => None,
    }
}

/// Commits `slot`'s move from `a` to `b` in the shared table (etcd's stand-in).
fn commit(s: &Shared, slot: u32, a: MachineId, b: MachineId) -> Result<(), String> {
    let mut t = s.table.lock().unwrap();
    *t = t
        .after(&[SlotMove {
            slot,
            from: a,
            to: b,
        }])
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Installs the committed table on every node that is up.
fn install_everywhere(s: &Shared) {
    for m in 0..MACHINES as MachineId {
        let _ = step(s, m, MoveStep::Install, 0, &[], Vec::new());
    }
}

/// Waits (a bounded while) until the nemesis has restarted its victim.
fn wait_for_nemesis(s: &Shared, port: &mut impl Port) {
    for _ in 0..50_000 {
        if s.nemesis_done.load(Ordering::Acquire) {
            break;
        }
        port.relax();
    }
}

/// Rolls a handed slot forward: B serves it (retried while B is down:
/// the nemesis restarts it), then the table naming B is committed and
/// installed (B first).
fn finish(
    s: &Shared,
    port: &mut impl Port,
    a: MachineId,
    b: MachineId,
    slot: u32,
    cov: &mut Coverage,
) {
    let slots = [slot];
    while step(s, b, MoveStep::Serve, a, &slots, Vec::new()).is_none() {
        for _ in 0..20 {
            port.relax();
        }
    }
    // Between SERVE and the commit: B serves the slot ahead of the table.
    for _ in 0..s.serve_lead {
        port.relax();
    }
    // Hunting, the nemesis strikes A or B of a handed slot: the commit
    // waits until the victim is back, so that it restarts with the move
    // in flight (A's replay of HANDED, V5; B's of SERVE, V2).
    if s.hunt == Hunt::BeforeCommit {
        wait_for_nemesis(s, port);
    }
    commit(s, slot, a, b).expect("a handed slot is still its old home's in the table");
    cov.slot_moves += 1;
    let _ = step(s, b, MoveStep::Install, 0, &[], Vec::new());
    install_everywhere(s);
}

/// Where a dying mover stops (`Shared::driver_dies`): after this step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DiesAfter {
    Guard,
    Take,
    Hand,
    Serve,
    Commit,
}

/// Runs a batch as far as `at` and abandons it there (its driver died),
/// then, after a while, settles it as a new driver would.
#[allow(clippy::too_many_arguments)]
fn die_after(
    s: &Shared,
    port: &mut impl Port,
    rng: &mut SimRng,
    at: DiesAfter,
    a: MachineId,
    b: MachineId,
    slot: u32,
    cov: &mut Coverage,
) {
    let slots = [slot];
    (|| {
        let g = step(s, a, MoveStep::Guard, b, &slots, Vec::new())?;
        if at == DiesAfter::Guard {
            return None;
        }
        step(s, b, MoveStep::Take, a, &slots, g.listed.clone())?;
        if at == DiesAfter::Take {
            return None;
        }
        step(s, a, MoveStep::Hand, b, &slots, g.listed)?;
        // Handed: clients' migration index sends the slot's updates to B.
        *s.handed.lock().unwrap() = Some((slot, a, b));
        if at == DiesAfter::Hand {
            return None;
        }
        step(s, b, MoveStep::Serve, a, &slots, Vec::new())?;
        if at == DiesAfter::Serve {
            return None;
        }
        let _ = commit(s, slot, a, b);
        None::<()>
    })();
    cov.driver_deaths += 1;
    for _ in 0..rng.below(300) {
        port.relax();
    }
    settle(s, port, cov);
}

/// A new driver (the coordinator, design MV3) settles what the dead one
/// left, by the plan `locus_server::moves::Mover::settle` carries out:
/// every node that is up says what is in flight through it; handed
/// batches roll forward, guarded ones back, orphaned arrivals are
/// forgotten, a committed table is installed again. Again until nothing
/// is in flight (a node that is down answers once the nemesis restarts it).
fn settle(s: &Shared, port: &mut impl Port, cov: &mut Coverage) {
    for _ in 0..400 {
        let table = s.table.lock().unwrap().clone();
        let statuses: Vec<(MachineId, Vec<_>)> = (0..MACHINES as MachineId)
            .filter_map(|m| {
                step(s, m, MoveStep::Status, 0, &[], Vec::new()).map(|r| (m, r.in_flight))
            })
            .collect();
        let plan = settle_plan(&statuses, &table);
        if plan.is_empty() && statuses.len() == s.up_nodes() {
            *s.handed.lock().unwrap() = None;
            return;
        }
        for b in &plan.forward {
            for &slot in &b.slots {
                *s.handed.lock().unwrap() = Some((slot, b.from, b.to));
                finish(s, port, b.from, b.to, slot, cov);
                cov.settled_forward += 1;
            }
            *s.handed.lock().unwrap() = None;
        }
        for b in &plan.back {
            if step(s, b.from, MoveStep::Release, b.to, &b.slots, Vec::new()).is_some() {
                cov.slot_moves_rolled_back += 1;
                let _ = step(s, b.to, MoveStep::Forget, b.from, &b.slots, Vec::new());
            }
        }
        for (m, slots) in &plan.stale {
            let _ = step(s, *m, MoveStep::Forget, 0, slots, Vec::new());
        }
        if plan.install {
            install_everywhere(s);
        }
        for _ in 0..50 {
            port.relax();
        }
    }
    panic!(
        "seed {}: batches still in flight after 400 rounds of settling: {:?}",
        s.seed,
        (0..MACHINES as MachineId)
            .map(|m| step(s, m, MoveStep::Status, 0, &[], Vec::new()).map(|r| r.in_flight))
            .collect::<Vec<_>>()
    );
}

/// Moves random slots of the vertices to random other nodes.
pub(crate) fn mover(f: &SimFabric, s: &Shared, mut rng: SimRng) {
    let mut port = f.port(0).expect("a port");
    let mut cov = Coverage::default();
    // When it joins, a server added: node 2 starts with an empty disk at its first epoch,
    // adopts the table (it owns no slot), joins, and slots move to it below.
    for _ in 0..rng.below(100) {
        port.relax();
    }
    // (Only when joining: otherwise a node that is down was crashed by the
    // nemesis, which restarts it.)
    if s.join && s.node(JOINER).is_none() {
        let epoch = s
            .membership
            .reserve_epoch(JOINER)
            .unwrap_or_else(|e| panic!("seed {}: epoch: {e}", s.seed));
        let node = s
            .start_node(JOINER, epoch)
            .unwrap_or_else(|e| panic!("seed {}: m{JOINER} joins: {e}", s.seed));
        s.join(JOINER, node)
            .unwrap_or_else(|e| panic!("seed {}: m{JOINER} joins: {e}", s.seed));
        cov.joins += 1;
    }
    for _ in 0..MOVES_PER_RUN {
        for _ in 0..rng.below(200) {
            port.relax();
        }
        let slot = rng.below(u64::from(VERTICES)) as u32;
        let table = s.table.lock().unwrap().clone();
        let a = table.owner_of_slot(slot).expect("a slot of the table");
        let b =
            ((u64::from(a) + 1 + rng.below(MACHINES as u64 - 1)) % MACHINES as u64) as MachineId;
        let slots = [slot];
        let dies = s.driver_dies.then(|| match rng.below(5) {
            0 => DiesAfter::Guard,
            1 => DiesAfter::Take,
            2 => DiesAfter::Hand,
            3 => DiesAfter::Serve,
            _ => DiesAfter::Commit,
        });
        if let Some(at) = dies {
            // The driver dies after `at`; a new one settles after a while.
            die_after(s, &mut port, &mut rng, at, a, b, slot, &mut cov);
            continue;
        }
        // No fence on A's or B's incarnation: A refuses to hand a slot it
        // no longer guards (it restarted) or whose keys are not all B's
        // (B restarted and A took them back), as the driver relies on.
        let handed = (|| {
            let g = step(s, a, MoveStep::Guard, b, &slots, Vec::new())?;
            step(s, b, MoveStep::Take, a, &slots, g.listed.clone())?;
            if s.hunt == Hunt::BeforeHand {
                // The nemesis strikes A or B between TAKE and HAND, and
                // HAND comes once the victim is back: A's checks stand
                // for the incarnation fences the commit no longer has.
                *s.handed.lock().unwrap() = Some((slot, a, b));
                wait_for_nemesis(s, &mut port);
            }
            // The keys GUARD listed, or (half the seeds) none: A scans.
            let keys = if (s.seed / 2).is_multiple_of(2) {
                g.listed
            } else {
                Vec::new()
            };
            step(s, a, MoveStep::Hand, b, &slots, keys)
        })();
        match handed {
            Some(_) => {
                *s.handed.lock().unwrap() = Some((slot, a, b));
                finish(s, &mut port, a, b, slot, &mut cov);
                *s.handed.lock().unwrap() = None;
            }
            None => {
                // Not handed: rolled back (a node that is down forgets at
                // its restart, by its replay).
                *s.handed.lock().unwrap() = None;
                cov.slot_moves_rolled_back += 1;
                let _ = step(s, a, MoveStep::Release, b, &slots, Vec::new());
                let _ = step(s, b, MoveStep::Forget, a, &slots, Vec::new());
            }
        }
    }
    // A node that restarted after a commit took the table at its start;
    // one that was down at an install gets it now.
    install_everywhere(s);
    s.coverage.lock().unwrap().add(&cov);
    s.clients_done.fetch_add(1, Ordering::AcqRel);
}
