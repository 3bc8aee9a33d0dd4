//! What a surviving machine does when a peer dies (Pragh 5, "Fault
//! tolerance"), the store's side. The server (`locus-server`'s `recovery.rs`)
//! drives these steps and supplies the durable lists; the worker methods are
//! in `worker/recover.rs`.
//!
//! A machine D died. Everything in D's memory is gone: its key table, its
//! value region (values it homed and values others migrated to it), its
//! replica directory, its reclaim ring. A survivor S holds references into
//! that memory in five places, and each is repaired:
//!
//! | reference at S | repair | step |
//! |---|---|---|
//! | location-cache entries of keys homed on D, or whose address names D | dropped | [`Worker::forget_peer`](crate::Worker::forget_peer) |
//! | S's replicas of D-homed keys (no directory will invalidate them) | dropped, blocks retired | `forget_peer` |
//! | D in the replica directories of S-homed keys | removed (an invalidation WRITE must never reach D's replacement) | `forget_peer` |
//! | address words of S-homed keys naming a live copy D invalidated before dying mid-migration | republished at home from that copy | [`Worker::restore_interrupted`](crate::Worker::restore_interrupted) |
//! | address words of S-homed keys naming D (values migrated to D) | value reloaded from S's log and published at home, or marked lost | [`Worker::keys_held_by`](crate::Worker::keys_held_by), [`Worker::republish_at_home`](crate::Worker::republish_at_home), [`Worker::mark_lost`](crate::Worker::mark_lost) |
//!
//! And D's own keys whose values lived on S: D's replacement reloads them at
//! home from D's log; S's old blocks are then named by no address word and
//! the value-region scan ([`crate::scan`]) frees them a lease later.
//!
//! ```text
//!  survivor S, for peer D:
//!
//!   serving ──D declared dead──▶ forget_peer(D) ──▶ for each S-homed key naming D:
//!      ▲                          (cache, replicas,     reload its vertex's list from S's
//!      │                           directories)         log, republish at home (write, CAS)
//!      │                                                 — or mark it lost without a log;
//!      │                                                 then restore_interrupted (F5): keys
//!      │                                                 D left invalidated mid-migration
//!      │                                                          │
//!      └──────── forget_peer(D) again ◀── D rejoined ◀── degraded ◀┘
//!               (anything cached from a        (ops touching D fail with
//!                survivor's table meanwhile)    a peer error, never hang)
//! ```
//!
//! Invariants:
//! - **F1 Nothing stale survives D's return.** Before S talks to D's new
//!   incarnation (the membership epoch fences the connection until S has
//!   processed the rejoin), S's cache holds no address of D's old region and
//!   no entry of a D-homed key; S lists no replica on D.
//! - **F2 Reload is whole and in order.** A key's vertex is republished under
//!   its update lock with the vertex's last logged list (D1 of the server's
//!   log: the home logs every update's whole new list, wherever the value
//!   lived), every part replaced, later leftover parts emptied; the CAS
//!   expects the word it read, so a racing change makes it retry.
//! - **F3 Lost is loud.** Without a durable copy the key's word becomes
//!   [`crate::addr::lost_word`]: reads, updates and traversals of it fail
//!   with [`crate::StoreError::ValueLost`] naming the key and the machine,
//!   never answer "absent" or another key's data.
//! - **F4 No wait on the dead.** D is dropped from directories before any
//!   update of S could try to invalidate a replica there; reads of a key
//!   whose value is on D fail with the fabric's peer error (bounded by the
//!   fabric's timeouts) until it is reloaded.
//! - **F5 No migration is left half done.** Locus invalidates the old copy
//!   before the CAS that publishes the new one (P2, the reverse of Pragh
//!   Fig. 5), so a target that dies between the two leaves a key whose word
//!   names a live copy with a zeroed header: readable by nobody, and not
//!   found by `keys_held_by`. The home republishes such keys from that
//!   copy's payload ([`Worker::restore_interrupted`](crate::Worker::restore_interrupted));
//!   Pragh 5's "interrupted migration tasks" only leak memory because its
//!   order is the other one.

/// What [`Worker::forget_peer`](crate::Worker::forget_peer) dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Forgotten {
    /// Location-cache entries dropped.
    pub cache_entries: u64,
    /// Replicas of the dead machine's keys dropped (their blocks retired).
    pub replicas: u64,
    /// Directory entries of replicas on the dead machine removed.
    pub directory_entries: u64,
}

/// What [`Worker::restore_interrupted`](crate::Worker::restore_interrupted) did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Interrupted {
    /// Keys republished at home from a copy the dead machine had invalidated.
    pub restored: u64,
    /// Keys whose invalidated copy held no readable part (left unreadable).
    pub unparseable: Vec<crate::Key>,
}
