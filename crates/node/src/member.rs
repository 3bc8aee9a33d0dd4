//! A node's membership: what it needs of the store that keeps epochs and
//! leases ([`MembershipStore`]: etcd behind `locus server`, a simulated
//! stand-in in the simulated cluster), and the steps both run through it
//! (`docs/design.md`, "Membership and epochs", M1-M5):
//!
//! 1. before recovery, [`MembershipStore::reserve_epoch`]: this
//!    incarnation's epoch, above every earlier one (M1); the fabric speaks
//!    at it from then on;
//! 2. after recovery, [`join`]: register, then learn every peer's state
//!    (live at an epoch, or down at its last registered one);
//! 3. per watch event, [`on_event`]: an event that ends this node's own
//!    epoch fences it (N1); one about a peer goes to
//!    [`Node::on_peer_event`] with the keys the coordinator's record names
//!    with that peer as latest target (Pragh 5).
//!
//! Leases (keeping them alive, noticing their loss) are the store's: etcd's
//! keepalive thread in `locus-server`, the nemesis in the simulation.

use locus_fabric::{Fabric, Fencing, MachineId};
use locus_store::Key;

use crate::node::{Node, PeerEvent};
use crate::{NodeError, Result};

/// What a node needs of its membership store. Errors are the store's own,
/// as text (etcd's, or the simulation's).
pub trait MembershipStore {
    /// What registering returns (etcd: the lease, kept alive while held).
    type Registration;
    /// A stream of the events after a moment ([`MembershipStore::watch`]).
    type Watch;

    /// The next epoch of `machine`, above every epoch it had (M1).
    fn reserve_epoch(&self, machine: MachineId) -> std::result::Result<u64, String>;
    /// Registers `machine` at `epoch` under a new lease, saying `info`.
    fn register_at(
        &self,
        machine: MachineId,
        epoch: u64,
        info: &str,
    ) -> std::result::Result<Self::Registration, String>;
    /// The last epoch `machine` registered at (0: never).
    fn last_registered(&self, machine: MachineId) -> std::result::Result<u64, String>;
    /// The live members now, as (machine, epoch), and a watch of every
    /// event after that moment.
    #[allow(clippy::type_complexity)]
    fn watch(&self) -> std::result::Result<(Vec<(MachineId, u64)>, Self::Watch), String>;
    /// The keys the coordinator's record names with `machine` as their
    /// latest target (Pragh 5: what a dead target may have held).
    fn keys_targeting(&self, machine: MachineId) -> std::result::Result<Vec<Key>, String>;
}

/// What a node joined with.
pub struct Joined<M: MembershipStore> {
    /// The registration (hold it: etcd's lease lives while it does).
    pub registration: M::Registration,
    /// The watch of every event after the members were read.
    pub watch: M::Watch,
    /// The live members when it joined, as (machine, epoch).
    pub live: Vec<(MachineId, u64)>,
}

/// Step 2: registers `node` at `epoch` (after its recovery) and sets the
/// fabric's view of every peer: live ones at their epoch, others down at
/// their last registered epoch (operations to a dead incarnation then fail
/// at once; a newer one is let in by its newer epoch).
pub fn join<F: Fabric + Fencing, M: MembershipStore>(
    node: &Node<F>,
    store: &M,
    epoch: u64,
    info: &str,
) -> Result<Joined<M>> {
    let me = node.me();
    let registration = store
        .register_at(me, epoch, info)
        .map_err(NodeError::Membership)?;
    // Recovered and registered: peers may read and change its memory
    // again (fencing's rule 4).
    node.store().fabric().serve_peers(me)?;
    // Each peer's last registration is read *before* the live members: a
    // peer that registers in between is then among the members (or its Up
    // follows on the watch), never marked down at the epoch it is live at.
    let mut last = vec![0u64; node.machines()];
    for m in (0..node.machines() as MachineId).filter(|&m| m != me) {
        last[m as usize] = store.last_registered(m).map_err(NodeError::Membership)?;
    }
    let (live, watch) = store.watch().map_err(NodeError::Membership)?;
    let f = node.store().fabric();
    for m in (0..node.machines() as MachineId).filter(|&m| m != me) {
        match live.iter().find(|x| x.0 == m) {
            Some(&(_, e)) => f.set_peer_epoch(me, m, e)?,
            None if last[m as usize] > 0 => f.mark_down(me, m, last[m as usize])?,
            None => {}
        }
    }
    Ok(Joined {
        registration,
        watch,
        live,
    })
}

/// What [`on_event`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handled {
    /// The event ended this node's own epoch: it is fenced (N1).
    Fenced(String),
    /// The event about a peer went to [`Node::on_peer_event`], with this
    /// many recorded keys.
    Peer(PeerEvent, usize),
    /// An event about this node that does not end its epoch (its own
    /// registration, or an older incarnation's end).
    Ignored,
}

/// Step 3: one event of the watch, for `node` registered at `epoch`. An
/// event saying this node's epoch ended (its lease expired, or a newer
/// incarnation of it registered) fences it; one about a peer updates the
/// fabric's view and runs Pragh 5. A record that cannot be read gives
/// `recorded` nothing (recovery still runs on what the survivors hold) and
/// the error is returned beside the outcome, for the caller to log.
pub fn on_event<F: Fabric + Fencing, M: MembershipStore>(
    node: &Node<F>,
    store: &M,
    epoch: u64,
    event: PeerEvent,
) -> Result<(Handled, Option<String>)> {
    let me = node.me();
    match event {
        PeerEvent::Down { machine, epoch: e } | PeerEvent::Up { machine, epoch: e }
            if machine == me =>
        {
            let ends = match event {
                PeerEvent::Down { .. } => e >= epoch,
                PeerEvent::Up { .. } => e > epoch,
            };
            if !ends {
                return Ok((Handled::Ignored, None));
            }
            let why = format!("the membership says machine {me} epoch {e} is {event:?}");
            node.fence()?;
            Ok((Handled::Fenced(why), None))
        }
        PeerEvent::Down { machine, .. } => {
            let (recorded, err) = match store.keys_targeting(machine) {
                Ok(k) => (k, None),
                Err(e) => (Vec::new(), Some(e)),
            };
            node.on_peer_event(event, &recorded)?;
            Ok((Handled::Peer(event, recorded.len()), err))
        }
        PeerEvent::Up { .. } => {
            node.on_peer_event(event, &[])?;
            Ok((Handled::Peer(event, 0), None))
        }
    }
}
