//! The epoch table of a node: the epoch of this node's own incarnation and,
//! per machine, the epoch it believes that machine's node is at, or that it
//! is down (issue 15: fencing dead incarnations out of the fabric).
//!
//! Epochs come from the membership (etcd): each incarnation of a server gets
//! a strictly larger one. Without a membership everything stays 0 and the
//! table changes nothing. Rules (checked in `server.rs` and `client.rs`):
//!
//! * **HELLO** carries the connecting node's own epoch and the epoch it
//!   expects the listener at. The listener refuses a connection that expects
//!   an epoch other than its own (0 = "no expectation", accepted: a peer
//!   never learned about holds no address into it), and a connection from a
//!   peer older than the epoch it knows, or at the epoch it knows to be down.
//! * **Every request** on an accepted connection is checked the same way
//!   against the table (one atomic load), so a peer marked down after it
//!   connected is cut off at its next request.
//! * **A port** fails an operation to a machine marked down at once with
//!   `PeerUnavailable` naming the machine and its epoch, and reopens a
//!   connection whose expected or own epoch changed since it was opened.
//!
//! An entry is one `AtomicU64`: `epoch << 1 | down`.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::{FabricError, MachineId};

/// What a node believes about one machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PeerEpoch {
    /// The epoch (0: unknown, or no membership).
    pub epoch: u64,
    /// Whether that incarnation is known to be dead.
    pub down: bool,
}

impl PeerEpoch {
    fn pack(self) -> u64 {
        (self.epoch << 1) | self.down as u64
    }
    fn unpack(w: u64) -> PeerEpoch {
        PeerEpoch {
            epoch: w >> 1,
            down: w & 1 == 1,
        }
    }
}

/// The table (see the module doc).
#[derive(Debug)]
pub(crate) struct EpochTable {
    own: AtomicU64,
    peers: Vec<AtomicU64>,
}

impl EpochTable {
    pub(crate) fn new(machines: usize) -> Self {
        EpochTable {
            own: AtomicU64::new(0),
            peers: (0..machines).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    #[inline]
    pub(crate) fn own(&self) -> u64 {
        self.own.load(Ordering::Acquire)
    }

    pub(crate) fn set_own(&self, epoch: u64) {
        self.own.store(epoch, Ordering::Release);
    }

    #[inline]
    pub(crate) fn get(&self, m: MachineId) -> PeerEpoch {
        PeerEpoch::unpack(self.peers[m as usize].load(Ordering::Acquire))
    }

    pub(crate) fn set(&self, m: MachineId, e: PeerEpoch) {
        assert!(e.epoch < 1 << 63, "epoch {} out of range", e.epoch);
        self.peers[m as usize].store(e.pack(), Ordering::Release);
    }

    /// The error of an operation to `m` while it is marked down, if it is.
    #[inline]
    pub(crate) fn check_up(&self, m: MachineId) -> Result<(), FabricError> {
        let e = self.get(m);
        if e.down {
            return Err(FabricError::PeerUnavailable {
                machine: m,
                reason: format!(
                    "machine {m} is down: its incarnation at epoch {} ended (membership); \
                     operations fail until it rejoins at a newer epoch",
                    e.epoch
                ),
            });
        }
        Ok(())
    }

    /// Whether a connection from `from` at `epoch` may be served (see the
    /// module doc); the refusal names both epochs.
    #[inline]
    pub(crate) fn admits(&self, from: MachineId, epoch: u64) -> Result<(), String> {
        let k = self.get(from);
        if epoch < k.epoch {
            return Err(format!(
                "machine {from} at epoch {epoch} is older than its epoch {} known here: \
                 a fenced-out incarnation",
                k.epoch
            ));
        }
        if k.down && epoch == k.epoch {
            return Err(format!(
                "machine {from} at epoch {epoch} is down (its lease ended): fenced out"
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admission_follows_the_table() {
        let t = EpochTable::new(4);
        assert!(t.admits(1, 0).is_ok(), "epoch 0 everywhere: as before");
        t.set(
            1,
            PeerEpoch {
                epoch: 3,
                down: false,
            },
        );
        assert!(t.admits(1, 3).is_ok());
        assert!(t.admits(1, 4).is_ok(), "a newer incarnation not yet seen");
        assert!(t.admits(1, 2).unwrap_err().contains("older"));
        assert!(t.admits(1, 0).is_err());
        t.set(
            1,
            PeerEpoch {
                epoch: 3,
                down: true,
            },
        );
        assert!(t.admits(1, 3).unwrap_err().contains("down"));
        assert!(t.admits(1, 4).is_ok());
        let e = t.check_up(1).unwrap_err().to_string();
        assert!(e.contains("machine 1") && e.contains("epoch 3"), "{e}");
        assert!(t.check_up(2).is_ok());
    }
}
