//! Epoch fencing of hosted machines' incarnations (issue 15's rules, on every fabric).
//!
//! Each incarnation of a machine (a process start, or a restart after a
//! crash) gets a strictly larger epoch from the membership (etcd). A machine
//! that crashed or lost its lease may still hold addresses into its peers'
//! memory, and its peers into its own; fencing keeps an incarnation that ended
//! from acting on (or being read as) the live one. Each hosted machine keeps an
//! [`EpochTable`]: its own epoch, whether it is fenced, and per peer the epoch
//! it believes that peer is at or that the peer is down. A TCP node keeps one
//! table for all of its machines (they are one process, one incarnation); the
//! in-process and simulated fabrics keep one per machine, the view node `me`
//! would have.
//!
//! An operation (one-sided or a message) from a port of machine `a` to machine
//! `b`:
//! 1. fails at once with `PeerUnavailable` if `a` is fenced (its incarnation
//!    ended: it issues nothing, also to its own memory), or if `a`'s table
//!    marks `b` down (naming `b` and its epoch);
//! 2. is refused at `b` with `PeerUnavailable` naming both epochs if `b` is
//!    fenced, if `a` expects `b` at an epoch other than `b`'s own (a stale
//!    view of another incarnation; 0 expects nothing), or if `b`'s table does
//!    not admit `a` at its own epoch (older than the epoch `b` knows for it,
//!    or the epoch `b` knows to be down).
//!
//! 3. if it changes `b`'s memory (WRITE, CAS, fetch-add), is refused at `b`
//!    with `PeerUnavailable` if `b` has an epoch and `a`'s is newer than the
//!    one `b`'s table knows for it: a new incarnation reads at once, but writes only
//!    once `b` has taken its registration (its Up), which `b`'s membership
//!    delivers after `a`'s older incarnation's death (Pragh 5 at `b`). Else
//!    a fast restart could MIGRATE a value onto itself by a CAS on `b`'s
//!    word before `b` recovered from the old incarnation, and that recovery
//!    would reload the value at home and leave the new copy valid (the
//!    twin's `CrashTwice`, seed 57: a cached copy served without an
//!    acknowledged insert).
//!
//! 4. if it reads or changes `b`'s memory, is refused at `b` with
//!    `PeerUnavailable` while `b` recovers (from its epoch until it has
//!    registered, [`Fencing::hold_peers`] to [`Fencing::serve_peers`]): a
//!    peer that never learned `b`'s earlier epoch expects none (0) and rule
//!    2 lets it in, and it read a key table the replay had not filled yet
//!    as "vertex missing" (the twin's `CrashTwice`, seeds 107, 146, 448).
//!
//! Operations of a port on its own machine's memory skip rules 2-4 and the down
//! check (an incarnation always reaches itself). With every epoch 0 (no
//! membership) nothing is refused. A refusal is `PeerUnavailable`, not an
//! error of its own: to the requester, a peer that will not serve it is a
//! peer it cannot reach, and the store's and server's recovery already act on
//! that error; the reason names the epochs. Over TCP the rules are checked at
//! HELLO and per request (`tcp/server.rs`) and in `route`; on the in-process
//! and simulated fabrics, at each operation, behind one relaxed load of a flag
//! that stays clear until an epoch is set, a machine fenced or one crashes.
//!
//! A table entry is one `AtomicU64`: `epoch << 1 | down`.
//!
//! A TCP node whose membership lives under a lease also gives its table the
//! lease's liveness ([`EpochTable::hold_lease`]): once that says the lease is
//! not surely held (a TTL since the last acknowledged renewal was sent, by
//! the node's own clock), the table fences itself at its next check of
//! whether it serves (or of [`EpochTable::is_fenced`]). So a process resumed
//! after a SIGSTOP past its lease serves no peer's operation that was waiting
//! in its sockets, even before its fence thread has run. The check of an
//! operation this node issues reads the fence flag alone (one load).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

use crate::{check_machine, Fabric, FabricError, MachineId, Result};

/// Epoch fencing of hosted machines' incarnations (issue 15's rules, on every fabric).
///
/// `me` is the hosted machine whose view is read or changed: a machine of
/// another process (or of another node view) is refused with
/// [`FabricError::NotHosted`]. On a TCP node every hosted machine shares the
/// node's one table.
pub trait Fencing: Fabric {
    /// `me`'s own epoch (0 until set).
    fn own_epoch(&self, me: MachineId) -> Result<u64>;
    /// Sets `me`'s own epoch (from its membership registration).
    fn set_own_epoch(&self, me: MachineId, epoch: u64) -> Result<()>;
    /// What `me` believes about `peer`'s epoch.
    fn peer_epoch(&self, me: MachineId, peer: MachineId) -> Result<PeerEpoch>;
    /// Records, in `me`'s view, that `peer` is up at `epoch`: its older
    /// incarnations are refused, and `me` expects it at `epoch`.
    fn set_peer_epoch(&self, me: MachineId, peer: MachineId, epoch: u64) -> Result<()>;
    /// Records, in `me`'s view, that `peer`'s incarnation at `epoch` is down:
    /// `me`'s operations to it fail at once, and its requests at that epoch are refused.
    fn mark_down(&self, me: MachineId, peer: MachineId, epoch: u64) -> Result<()>;
    /// `me`'s incarnation ended: from now on it serves no peer's one-sided op or message and its own ops fail.
    fn fence(&self, me: MachineId) -> Result<()>;
    /// Whether `me` is fenced.
    fn is_fenced(&self, me: MachineId) -> Result<bool>;
    /// `me`'s incarnation is recovering (rule 4): until
    /// [`Fencing::serve_peers`], peers' READs, WRITEs, CASes and fetch-adds
    /// of its memory are refused (lookups and messages are not).
    fn hold_peers(&self, me: MachineId) -> Result<()>;
    /// `me` registered after its recovery: its memory serves peers again.
    fn serve_peers(&self, me: MachineId) -> Result<()>;
}

/// What an operation does at its target, for the rules that depend on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// A message, a lookup or a check of the peer: neither reads nor
    /// changes the target's memory.
    Message,
    /// A READ (or a READ into the initiator's memory).
    Read,
    /// A WRITE, CAS or fetch-add.
    Write,
}

/// What a machine believes about one machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PeerEpoch {
    /// The epoch (0: unknown, or no membership).
    pub epoch: u64,
    /// Whether that incarnation is known to be dead.
    pub down: bool,
}

/// Largest epoch a peer entry holds (the low bit is the down flag).
pub const EPOCH_MAX: u64 = (1 << 63) - 1;

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

/// One machine's (or TCP node's) view: its own epoch, whether it is fenced,
/// and what it believes about every machine (see the module doc).
#[derive(Debug)]
pub struct EpochTable {
    own: AtomicU64,
    fenced: AtomicBool,
    /// Rule 4: recovering, peers' one-sided operations refused.
    holding: AtomicBool,
    peers: Vec<AtomicU64>,
    lease: OnceLock<LeaseLiveness>,
}

/// Whether the membership lease is surely held ([`EpochTable::hold_lease`]).
struct LeaseLiveness(Box<dyn Fn() -> bool + Send + Sync>);

impl std::fmt::Debug for LeaseLiveness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LeaseLiveness")
    }
}

impl EpochTable {
    /// A table of a `machines`-machine cluster: every epoch 0, nothing down, not fenced.
    pub fn new(machines: usize) -> Self {
        EpochTable {
            own: AtomicU64::new(0),
            fenced: AtomicBool::new(false),
            holding: AtomicBool::new(false),
            peers: (0..machines).map(|_| AtomicU64::new(0)).collect(),
            lease: OnceLock::new(),
        }
    }

    /// From now on this incarnation counts as fenced as soon as `live` says
    /// its membership lease is not surely held (see the module doc); set once
    /// per table, at registration (a second call is refused). Fencing by the
    /// lease is for good, as [`EpochTable::fence`] is.
    pub fn hold_lease(&self, live: Box<dyn Fn() -> bool + Send + Sync>) -> Result<()> {
        self.lease.set(LeaseLiveness(live)).map_err(|_| {
            FabricError::Config("this incarnation's lease was already given to its fabric".into())
        })
    }

    /// The own epoch (0 until set).
    #[inline]
    pub fn own(&self) -> u64 {
        self.own.load(Ordering::Acquire)
    }

    /// Sets the own epoch. A fenced table stays fenced: an incarnation that
    /// ended does not come back; a restart is a new table.
    pub fn set_own(&self, epoch: u64) {
        self.own.store(epoch, Ordering::Release);
    }

    /// Refuses (true) or serves again (false) peers' one-sided operations
    /// of this machine's memory (rule 4: while it recovers).
    pub fn set_holding(&self, holding: bool) {
        self.holding.store(holding, Ordering::Release);
    }

    /// Whether a peer's one-sided operation is served (rule 4); the refusal
    /// names the epoch.
    #[inline]
    pub(crate) fn serves_memory(&self) -> std::result::Result<(), String> {
        if self.holding.load(Ordering::Acquire) {
            return Err(format!(
                "its incarnation at epoch {} is recovering: its memory serves peers once it \
                 has registered",
                self.own()
            ));
        }
        Ok(())
    }

    /// Ends this incarnation: it serves nothing and issues nothing from now on.
    pub fn fence(&self) {
        self.fenced.store(true, Ordering::Release);
    }

    /// Whether this incarnation ended: fenced, or its lease is no longer
    /// surely held (which fences it).
    #[inline]
    pub fn is_fenced(&self) -> bool {
        if self.fenced.load(Ordering::Acquire) {
            return true;
        }
        match self.lease.get() {
            Some(l) if !(l.0)() => {
                self.fence();
                true
            }
            _ => false,
        }
    }

    /// What this table believes about machine `m`.
    pub fn peer(&self, m: MachineId) -> Result<PeerEpoch> {
        check_machine(m, self.peers.len())?;
        Ok(self.get(m))
    }

    /// Records what this table believes about machine `m`; an epoch above
    /// [`EPOCH_MAX`] is refused.
    pub fn set_peer(&self, m: MachineId, e: PeerEpoch) -> Result<()> {
        check_machine(m, self.peers.len())?;
        self.set(m, e)
    }

    /// [`EpochTable::peer`] for a machine the caller checked.
    #[inline]
    pub(crate) fn get(&self, m: MachineId) -> PeerEpoch {
        PeerEpoch::unpack(self.peers[m as usize].load(Ordering::Acquire))
    }

    /// [`EpochTable::set_peer`] for a machine the caller checked.
    pub(crate) fn set(&self, m: MachineId, e: PeerEpoch) -> Result<()> {
        if e.epoch > EPOCH_MAX {
            return Err(FabricError::Config(format!(
                "epoch {} of machine {m} is out of range: epochs are at most {EPOCH_MAX}",
                e.epoch
            )));
        }
        self.peers[m as usize].store(e.pack(), Ordering::Release);
        Ok(())
    }

    /// Back to a new table's state: a restarted machine starts with no view.
    /// (A lease, held only by a TCP node's table, is never reset: a TCP
    /// node restarts as a new process.)
    pub(crate) fn reset(&self) {
        self.own.store(0, Ordering::Release);
        self.fenced.store(false, Ordering::Release);
        self.holding.store(false, Ordering::Release);
        for p in &self.peers {
            p.store(0, Ordering::Release);
        }
    }

    /// The error of an operation to `target` issued by this incarnation if it
    /// is fenced (rule 1): it names the requester's epoch.
    #[inline]
    pub(crate) fn check_issuer(&self, target: MachineId) -> Result<()> {
        // The fence flag only, one load per operation: the lease's clock is
        // read where peers are served (`serves`), which is what a resumed
        // process must refuse first; its own client requests are refused by
        // the server's per-request check of the same lease.
        if self.fenced.load(Ordering::Acquire) {
            return Err(FabricError::PeerUnavailable {
                machine: target,
                reason: format!(
                    "the requesting incarnation at epoch {} is fenced (it ended): it issues no \
                     operation; restart it as a new incarnation",
                    self.own()
                ),
            });
        }
        Ok(())
    }

    /// The error of an operation to `m` while it is marked down, if it is (rule 1).
    #[inline]
    pub(crate) fn check_up(&self, m: MachineId) -> Result<()> {
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

    /// Whether this incarnation serves peers at all (rule 2: not if fenced).
    #[inline]
    pub(crate) fn serves(&self) -> std::result::Result<(), String> {
        if self.is_fenced() {
            return Err(format!(
                "its incarnation at epoch {} is fenced (it ended): it serves no peer",
                self.own()
            ));
        }
        Ok(())
    }

    /// Whether a requester that expects this incarnation at `expect` has a
    /// current view of it (rule 2; 0 expects nothing).
    #[inline]
    pub(crate) fn expected(
        &self,
        from: MachineId,
        expect: u64,
        what: &str,
    ) -> std::result::Result<(), String> {
        let own = self.own();
        if expect != 0 && expect != own {
            return Err(format!(
                "machine {from} expects {what} at epoch {expect}, it is at epoch {own}: \
                 a stale view of another incarnation"
            ));
        }
        Ok(())
    }

    /// Whether a WRITE, CAS or fetch-add from `from` at `epoch` may change
    /// this machine's memory (rule 3): not from an incarnation newer than
    /// the one this table knows, once this machine has an epoch itself.
    #[inline]
    pub(crate) fn admits_writes(
        &self,
        from: MachineId,
        epoch: u64,
    ) -> std::result::Result<(), String> {
        let k = self.get(from);
        // A machine without membership (own epoch 0) refuses nothing.
        if epoch > k.epoch && self.own() != 0 {
            return Err(format!(
                "machine {from} at epoch {epoch} is newer than its epoch {} known here: its \
                 one-sided writes wait until this machine has taken that incarnation's \
                 registration",
                k.epoch
            ));
        }
        Ok(())
    }

    /// Whether a request from `from` at `epoch` may be served (rule 2); the
    /// refusal names both epochs.
    #[inline]
    pub(crate) fn admits(&self, from: MachineId, epoch: u64) -> std::result::Result<(), String> {
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

/// The tables of a fabric that hosts many machines in one process (the
/// in-process and simulated fabrics): one per machine, and the flag that
/// keeps the rules off the hot path until they can refuse anything.
#[derive(Debug)]
pub(crate) struct Fences {
    /// Set (never cleared) once a table leaves its all-zero state or a
    /// machine crashes: until then no rule can refuse, and an operation
    /// costs one relaxed load of this flag.
    armed: AtomicBool,
    tables: Vec<EpochTable>,
}

impl Fences {
    /// Every machine's table of a `machines`-machine cluster, all zero.
    pub(crate) fn new(machines: usize) -> Fences {
        Fences {
            armed: AtomicBool::new(false),
            tables: (0..machines).map(|_| EpochTable::new(machines)).collect(),
        }
    }

    /// Whether any rule may refuse (relaxed: a change racing with an
    /// operation may or may not apply to it, as over a network; a change
    /// that happened before the operation is seen).
    #[inline]
    pub(crate) fn armed(&self) -> bool {
        self.armed.load(Ordering::Relaxed)
    }

    /// Turns the checks on (after a table change, so a port that sees the
    /// flag sees the change too).
    pub(crate) fn arm(&self) {
        self.armed.store(true, Ordering::Release);
    }

    /// Machine `me`'s table; the caller checked that `me` is hosted.
    pub(crate) fn table(&self, me: MachineId) -> &EpochTable {
        &self.tables[me as usize]
    }

    /// Sets `me`'s own epoch and arms the checks.
    pub(crate) fn set_own(&self, me: MachineId, epoch: u64) {
        self.table(me).set_own(epoch);
        self.arm();
    }

    /// Records `peer`'s entry in `me`'s table and arms the checks.
    pub(crate) fn set_peer(&self, me: MachineId, peer: MachineId, e: PeerEpoch) -> Result<()> {
        self.table(me).set_peer(peer, e)?;
        self.arm();
        Ok(())
    }

    /// Fences `me` and arms the checks.
    pub(crate) fn fence(&self, me: MachineId) {
        self.table(me).fence();
        self.arm();
    }

    /// A crashed machine restarts with a new table; the checks are armed
    /// (ports of the crashed incarnation must fail).
    pub(crate) fn reset(&self, me: MachineId) {
        self.table(me).reset();
        self.arm();
    }

    /// The rules of the module doc for an operation of `from` on `to`
    /// (`access`: what it does there, rules 3 and 4). Machines outside the
    /// cluster pass: the operation's own checks name them.
    #[cold]
    #[inline(never)]
    pub(crate) fn check(&self, from: MachineId, to: MachineId, access: Access) -> Result<()> {
        let (Some(a), Some(b)) = (self.tables.get(from as usize), self.tables.get(to as usize))
        else {
            return Ok(());
        };
        a.check_issuer(to)?;
        if from == to {
            return Ok(());
        }
        a.check_up(to)?;
        let refused = |reason: String| FabricError::PeerUnavailable {
            machine: to,
            reason: format!("refused by machine {to}: {reason}"),
        };
        b.serves().map_err(refused)?;
        b.expected(from, a.get(to).epoch, &format!("machine {to}"))
            .map_err(refused)?;
        b.admits(from, a.own()).map_err(refused)?;
        if access != Access::Message {
            b.serves_memory().map_err(refused)?;
        }
        if access == Access::Write {
            b.admits_writes(from, a.own()).map_err(refused)?;
        }
        Ok(())
    }
}

/// Implements [`Fencing`] for a fabric that hosts many machines in one
/// process: `$ty` has `fn hosted(&self, me) -> Result<&MachineMemory>` (the
/// machine is hosted by this fabric or view) and `inner.fences: Fences`.
macro_rules! fencing_by_tables {
    ($ty:ty) => {
        impl $crate::fencing::Fencing for $ty {
            fn own_epoch(&self, me: MachineId) -> Result<u64> {
                self.hosted(me)?;
                Ok(self.inner.fences.table(me).own())
            }
            fn set_own_epoch(&self, me: MachineId, epoch: u64) -> Result<()> {
                self.hosted(me)?;
                self.inner.fences.set_own(me, epoch);
                Ok(())
            }
            fn peer_epoch(&self, me: MachineId, peer: MachineId) -> Result<PeerEpoch> {
                self.hosted(me)?;
                self.inner.fences.table(me).peer(peer)
            }
            fn set_peer_epoch(&self, me: MachineId, peer: MachineId, epoch: u64) -> Result<()> {
                self.hosted(me)?;
                let e = PeerEpoch { epoch, down: false };
                self.inner.fences.set_peer(me, peer, e)
            }
            fn mark_down(&self, me: MachineId, peer: MachineId, epoch: u64) -> Result<()> {
                self.hosted(me)?;
                let e = PeerEpoch { epoch, down: true };
                self.inner.fences.set_peer(me, peer, e)
            }
            fn fence(&self, me: MachineId) -> Result<()> {
                self.hosted(me)?;
                self.inner.fences.fence(me);
                Ok(())
            }
            fn is_fenced(&self, me: MachineId) -> Result<bool> {
                self.hosted(me)?;
                Ok(self.inner.fences.table(me).is_fenced())
            }
            fn hold_peers(&self, me: MachineId) -> Result<()> {
                self.hosted(me)?;
                self.inner.fences.table(me).set_holding(true);
                self.inner.fences.arm();
                Ok(())
            }
            fn serve_peers(&self, me: MachineId) -> Result<()> {
                self.hosted(me)?;
                self.inner.fences.table(me).set_holding(false);
                Ok(())
            }
        }
    };
}
pub(crate) use fencing_by_tables;

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
        )
        .unwrap();
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
        )
        .unwrap();
        assert!(t.admits(1, 3).unwrap_err().contains("down"));
        assert!(t.admits(1, 4).is_ok());
        assert!(
            t.admits_writes(1, 4).is_ok(),
            "this machine has no epoch: no membership"
        );
        t.set_own(2);
        assert!(
            t.admits_writes(1, 4).unwrap_err().contains("newer"),
            "a newer incarnation reads before its Up, and writes nothing"
        );
        assert!(t.admits_writes(1, 3).is_ok());
        let e = t.check_up(1).unwrap_err().to_string();
        assert!(e.contains("machine 1") && e.contains("epoch 3"), "{e}");
        assert!(t.check_up(2).is_ok());
    }

    #[test]
    fn a_fenced_table_serves_and_issues_nothing() {
        let t = EpochTable::new(2);
        t.set_own(7);
        assert!(t.serves().is_ok() && t.check_issuer(1).is_ok());
        t.fence();
        t.set_own(8);
        assert!(t.is_fenced(), "setting the epoch does not unfence");
        assert!(t.serves().unwrap_err().contains("epoch 8"));
        let e = t.check_issuer(1).unwrap_err();
        assert!(
            matches!(&e, FabricError::PeerUnavailable { machine: 1, reason } if reason.contains("fenced")),
            "{e:?}"
        );
        t.reset();
        assert!(!t.is_fenced() && t.own() == 0, "a restart is a new table");
    }

    #[test]
    fn a_table_whose_lease_is_not_surely_held_is_fenced_for_good() {
        let t = EpochTable::new(2);
        t.set_own(3);
        let live = std::sync::Arc::new(AtomicBool::new(true));
        let l = std::sync::Arc::clone(&live);
        t.hold_lease(Box::new(move || l.load(Ordering::Acquire)))
            .unwrap();
        assert!(t.hold_lease(Box::new(|| true)).is_err(), "set once");
        assert!(!t.is_fenced() && t.serves().is_ok() && t.check_issuer(1).is_ok());
        live.store(false, Ordering::Release);
        assert!(t.is_fenced());
        assert!(t.serves().unwrap_err().contains("epoch 3"));
        assert!(t.check_issuer(1).is_err());
        live.store(true, Ordering::Release);
        assert!(t.is_fenced(), "a late renewal does not unfence");
    }

    #[test]
    fn entries_are_checked() {
        let t = EpochTable::new(2);
        assert!(matches!(
            t.peer(2),
            Err(FabricError::NoSuchMachine { machine: 2, .. })
        ));
        let too_big = PeerEpoch {
            epoch: EPOCH_MAX + 1,
            down: false,
        };
        assert!(matches!(
            t.set_peer(1, too_big),
            Err(FabricError::Config(_))
        ));
        let max = PeerEpoch {
            epoch: EPOCH_MAX,
            down: true,
        };
        t.set_peer(1, max).unwrap();
        assert_eq!(t.peer(1).unwrap(), max);
        assert!(t.expected(0, 0, "it").is_ok(), "0 expects nothing");
        t.set_own(3);
        let e = t.expected(0, 2, "machine 1").unwrap_err();
        assert!(e.contains("epoch 2") && e.contains("epoch 3"), "{e}");
    }
}
