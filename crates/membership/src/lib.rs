//! Membership, failure detection, epochs, the coordinator's election and its
//! record of migration targets, on etcd (issue 15, requirement 2).
//!
//! A blocking facade over the `etcd-client` crate: [`Membership`] owns a small
//! tokio runtime (one worker thread, named `locus-etcd`) so the rest of Locus
//! stays synchronous. [`Etcd`] starts a private etcd on loopback for tests and
//! `locus cluster up`.
//!
//! # Keys (under the configured prefix `P`, for example `/locus`)
//!
//! ```text
//!  P/epochs/<mmm>      the last epoch handed to machine mmm (3 decimal digits), no lease
//!  P/members/<mmm>     "<epoch> <info>" of the live incarnation of mmm, under its lease
//!  P/registered/<mmm>  the epoch of mmm's last registration, no lease
//!  P/coordinator       etcd's election (campaign / leader); the leader's value is its
//!                      control address, its term the leader key's create revision
//!  P/record/<key>      latest migration target of store key <key> (20 decimal digits)
//!  P/slots             the slot table's wire form (issue 59), put by the first server
//! ```
//!
//! # A member's states
//!
//! ```text
//!   unregistered --register(m)--> registered(m, e) --lease renewed--> registered(m, e)
//!                                      |
//!             no renewal for lease_ttl | (stopped, partitioned, etcd unreachable)
//!                                      v
//!                                 lease lost --(etcd deletes P/members/m: peers see PeerDown(m, e))
//!                                      |
//!                                      v
//!                              fenced / exited   (a restart registers again at e' > e)
//! ```
//!
//! # Invariants
//!
//! 1. **Epochs increase.** Each registration of machine `m` gets an epoch
//!    strictly greater than every earlier one of `m`: `P/epochs/m` is read and
//!    bumped in one transaction guarded by its mod revision (a lost race
//!    retries). A restarting server takes its epoch first
//!    ([`Membership::reserve_epoch`]), recovers, and then puts `P/members/m`
//!    ([`Membership::register_at`]) in a transaction that requires the counter
//!    to still hold its epoch: a later incarnation that started meanwhile wins.
//! 2. **One live incarnation per machine.** `P/members/m` holds exactly one
//!    epoch; a newer registration overwrites it (its key moves to the new
//!    lease), so the older incarnation is fenced out even if its lease lives on.
//! 3. **A member knows it is dead no later than its peers.** A registration
//!    is live only while the last renewal was sent less than `lease_ttl`
//!    ago ([`Lease::is_live`]): etcd cannot have expired the lease earlier,
//!    so a process that was stopped (SIGSTOP) sees its own death as soon as it
//!    runs again, before it could act on stale state.
//! 4. **Events in order.** [`Watch`] yields, per machine, `PeerUp(e1)`,
//!    `PeerDown(e1)`, `PeerUp(e2)`, ... with `e1 < e2 < ...`: a
//!    re-registration seen without the expiry of the old epoch first yields
//!    `PeerDown` of the old epoch. After a broken watch it re-reads the
//!    membership and yields the difference, so no transition is skipped.
//! 5. **Persist before approve.** [`Membership::record_persist`] returns only
//!    after etcd committed every entry (in transactions of at most
//!    [`TXN_OPS_MAX`] puts, etcd's default limit being 128). A batch split over
//!    several transactions that fails part-way may leave earlier entries
//!    recorded without their migrations: the record may name a target that a
//!    value never reached (readers check the address word), never the reverse.
//! 6. **One leader.** The coordinator election is etcd's: at most one
//!    campaigner holds leadership, under its lease; a standby's campaign
//!    returns only when the leader's key is gone (resigned or lease expired).

mod client;
mod election;
mod error;
mod etcd;
mod lease;
mod mover;
mod record;
mod slots;
mod watch;

pub use client::{EtcdConfig, Member, Membership};
pub use election::{Leader, Leadership};
pub use error::{MembershipError, Result};
pub use etcd::{free_loopback_ports, wait_healthy, Etcd, EtcdSpec};
pub use lease::{Lease, Registration};
pub use mover::MoverLock;
pub use watch::{MemberEvent, Watch};

/// Most puts the record writes in one etcd transaction (etcd's default
/// `--max-txn-ops` is 128).
pub const TXN_OPS_MAX: usize = 128;
