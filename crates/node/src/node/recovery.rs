//! Pragh 5 recovery at a surviving node, and the value-region scan
//! (issue 15, requirement 3). The store's steps and their invariants F1-F4
//! are in `locus_store::recover`; the scan's S1-S4 in `locus_store::scan`.
//! This file drives them with the node's durable state.
//!
//! Who calls what (a server's membership watch thread, for peer D; the
//! simulated cluster's nemesis; tests call [`Node::peer_failed`] directly):
//!
//! ```text
//!            D's lease expires, or D registers at a newer epoch
//!  serving ───────────────────────────────────────────────▶ D marked down in the fabric's
//!     ▲                                                       epoch table (ops to D fail at
//!     │                                                       once, PeerUnavailable)
//!     │                                                              │
//!     │                                        peer_failed(D, old_epoch, recorded)
//!     │                                          1. forget D: cache entries, replicas of
//!     │                                             D's keys, D in our directories
//!     │                                          2. our keys whose word names D: scan our
//!     │                                             table; cross-check with `recorded`
//!     │                                          3. under every stripe lock: read our
//!     │                                             checkpoint + log back, republish each
//!     │                                             such vertex's last list at home
//!     │                                             (no [durability]: mark its keys lost)
//!     │                                          4. our keys D left mid-migration (a live
//!     │                                             copy it invalidated, F5): republish
//!     │                                             each from that copy
//!     │                                                              │
//!     │   peer_rejoined(D, new_epoch)            D recovers from its own log, registers
//!     └── 1. forget D again (entries cached  ◀── at a newer epoch; its epoch is set in
//!            from other survivors meanwhile)     the table, connections reopen
//!         2. a scan round: our blocks of D's
//!            keys are named by no word any more;
//!            freed a reclaim lease later
//! ```
//!
//! Invariants (beside the store's):
//! - **RC1 Reload under the log's order.** Step 3 holds every stripe lock of
//!   this server's log and its checkpoint lock while it reads the log back and
//!   republishes, so no update of those vertices is applied or logged in
//!   between (D2), and the list put back is the last one acknowledged (D1).
//! - **RC2 The address word is the truth.** The keys to reload are found by
//!   scanning our own table; the coordinator's record only cross-checks it
//!   (keys moved by `locus migrate`, without the coordinator, are found too,
//!   and reported as not recorded).
//! - **RC3 Never wrong, at worst an error.** Until step 3 is done, a read of
//!   such a key fails with D's peer error; a key that cannot be reloaded (no
//!   `[durability]`, or no logged list) fails with `ValueLost` naming D.
//! - **RC4 The scan frees only after a lease.** Blocks of D's keys that had
//!   been migrated here are freed by the background scan (every
//!   `recovery.scan_interval_ms`) once unreferenced for a whole reclaim lease;
//!   a round that cannot read some machine's table (D still down) frees
//!   nothing.
//!
//! Not here: marking D down and fencing by epoch (the membership half), and
//! the epoch checks the tests will make once it is merged.

use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use locus_fabric::counting::Counting;
use locus_fabric::{Fabric, MachineId};
use locus_store::scan::{ScanReport, Scanner};
use locus_store::{Key, Worker};
use serde::Serialize;

use super::moves::Moving;
use super::Node;
use crate::{NodeError, Result};

/// Vertices a [`FailureReport`] lists that the coordinator's record did not name, at most.
pub const NOT_RECORDED_LISTED_MAX: usize = 64;

/// What [`peer_failed`] did at this server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FailureReport {
    /// The dead peer.
    pub peer: MachineId,
    /// The epoch it died at.
    pub epoch: u64,
    /// Location-cache entries dropped.
    pub cache_entries: u64,
    /// Replicas of the peer's keys dropped.
    pub replicas: u64,
    /// Entries of replicas on the peer removed from this server's directories.
    pub directory_entries: u64,
    /// Keys homed here whose address word named the peer (the scan of our table).
    pub keys_found: u64,
    /// Keys the coordinator's record named with the peer as latest target (any home).
    pub recorded: u64,
    /// Vertices with a found key that the record did not name (moved
    /// without the coordinator, e.g. `locus migrate`); compared by vertex,
    /// since a migration moves a vertex's parts together.
    pub not_recorded: u64,
    /// The first [`NOT_RECORDED_LISTED_MAX`] of them.
    pub not_recorded_vertices: Vec<u32>,
    /// Recorded vertices homed here none of whose keys named the peer (moved on since).
    pub recorded_not_found: u64,
    /// Vertices put back at home from this server's log.
    pub vertices_reloaded: u64,
    /// Parts written doing so.
    pub parts_written: u64,
    /// Keys marked lost (no `[durability]`, or no list logged).
    pub keys_lost: u64,
    /// Keys homed here that the peer left mid-migration (old copy
    /// invalidated, new one never published), put back from the old copy (F5).
    pub interrupted_restored: u64,
    /// Milliseconds the whole call took.
    pub elapsed_ms: u64,
}

/// What [`peer_rejoined`] did at this server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RejoinReport {
    /// The peer.
    pub peer: MachineId,
    /// Its new epoch.
    pub epoch: u64,
    /// Location-cache entries dropped (cached from other survivors' tables
    /// while the peer was down).
    pub cache_entries: u64,
    /// Blocks the scan round looked at, and stamped as unreferenced (freed a
    /// lease later by the background scan); none if the round failed.
    pub scan_blocks: Option<u64>,
    /// Unreferenced blocks waiting for their lease after the round.
    pub scan_waiting: Option<u64>,
    /// Milliseconds the whole call took.
    pub elapsed_ms: u64,
}

/// Recovery's state in a server: the scanner and counters (STATS `recovery`).
#[derive(Default)]
pub(crate) struct RecoveryState {
    scanner: Mutex<Option<Scanner>>,
    failures: AtomicU64,
    rejoins: AtomicU64,
    scan_rounds: AtomicU64,
    scan_aborted: AtomicU64,
    scan_freed: AtomicU64,
    scan_freed_bytes: AtomicU64,
    last_failure: Mutex<Option<FailureReport>>,
    last_rejoin: Mutex<Option<RejoinReport>>,
}

impl RecoveryState {
    /// The counters and last reports, for STATS.
    pub(crate) fn stats_json(&self) -> serde_json::Value {
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let waiting = self
            .scanner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map_or(0, |s| s.waiting());
        serde_json::json!({
            "peer_failures": n(&self.failures), "peer_rejoins": n(&self.rejoins),
            "scan_rounds": n(&self.scan_rounds), "scan_aborted": n(&self.scan_aborted),
            "scan_freed": n(&self.scan_freed), "scan_freed_bytes": n(&self.scan_freed_bytes),
            "scan_waiting": waiting,
            "last_failure": *self.last_failure.lock().unwrap_or_else(|p| p.into_inner()),
            "last_rejoin": *self.last_rejoin.lock().unwrap_or_else(|p| p.into_inner()),
        })
    }
}

impl<F: Fabric> Node<F> {
    fn check_peer(&self, peer: MachineId) -> Result<()> {
        if peer == self.me || peer as usize >= self.machines {
            return Err(NodeError::Recovery(format!(
                "server {} cannot recover from the failure of server {peer}: {}",
                self.me,
                if peer == self.me {
                    "that is this server".to_string()
                } else {
                    format!("the cluster has servers 0..{}", self.machines)
                }
            )));
        }
        Ok(())
    }

    /// Pragh 5 at this survivor for the dead peer `peer` (see the module doc):
    /// forget it, then reload from this server's log every vertex homed here
    /// whose value it held. `recorded` are the keys the coordinator's record
    /// names with latest target `peer` (any home; ours are cross-checked).
    pub fn peer_failed(
        &self,
        peer: MachineId,
        epoch: u64,
        recorded: &[Key],
    ) -> Result<FailureReport> {
        self.check_peer(peer)?;
        let t0 = Instant::now();
        let me = self.me;
        let mut w = self.store.worker(me)?;
        let f = w.forget_peer(peer)?;
        let found = w.keys_held_by(peer)?;
        // Cross-checked by vertex: a migration moves a vertex's parts together
        // and the record may name any of its keys.
        let found_vertices: BTreeSet<u32> = found.iter().map(|k| k.vertex()).collect();
        let recorded_here: BTreeSet<u32> = recorded
            .iter()
            .map(|k| k.vertex())
            .filter(|&v| self.store.owner(v) == me)
            .collect();
        let not_recorded: Vec<u32> = found_vertices
            .iter()
            .copied()
            .filter(|v| !recorded_here.contains(v))
            .collect();
        let mut r = FailureReport {
            peer,
            epoch,
            cache_entries: f.cache_entries,
            replicas: f.replicas,
            directory_entries: f.directory_entries,
            keys_found: found.len() as u64,
            recorded: recorded.len() as u64,
            not_recorded: not_recorded.len() as u64,
            not_recorded_vertices: not_recorded
                .iter()
                .copied()
                .take(NOT_RECORDED_LISTED_MAX)
                .collect(),
            recorded_not_found: recorded_here
                .iter()
                .filter(|v| !found_vertices.contains(v))
                .count() as u64,
            ..FailureReport::default()
        };
        let vertices = found_vertices;
        let mut errors: Vec<String> = Vec::new();
        match &self.durable {
            Some(d) => {
                let wanted: HashSet<u32> = vertices.iter().copied().collect();
                let mut w2 = self.store.worker(me)?;
                let homes = std::sync::Arc::clone(self.store.homes());
                let slot_of = move |v: u32| homes.slot_of(v);
                let store = &self.store;
                // No HAND meanwhile: a vertex handed away is left alone
                // below, one not handed is not handed until this is done.
                let _hand = d.hand_lock(&mut || w2.relax());
                // Slots taken over here and not committed yet: their keys'
                // words here are the ones readers follow (the old home's
                // say MOVED), and this log holds their lists (SLOT_IN), so
                // a value of theirs the peer held is reloaded here too (twin
                // seed 161: a value left at its old home, which died before
                // the commit, was named here and repaired nowhere).
                let arriving: HashSet<u32> = self
                    .moves_in_flight()
                    .into_iter()
                    .filter(|(_, m)| matches!(m, Moving::In(_) | Moving::Served(_)))
                    .map(|(s, _)| s)
                    .collect();
                let homes = std::sync::Arc::clone(self.store.homes());
                d.with_logged_lists(&wanted, &slot_of, &mut || w2.relax(), |lists| {
                    for &v in &vertices {
                        // Handed to the peer since the scan (V4): the
                        // peer's log holds its later writes, not ours.
                        let taken = store.owner(v) != me;
                        if taken && !arriving.contains(&homes.slot_of(v)) {
                            continue;
                        }
                        let put = |w: &mut Worker<_>, list: &[u32]| {
                            if taken {
                                w.republish_taken(v, list, peer)
                            } else {
                                w.republish_at_home(v, list, peer)
                            }
                        };
                        match lists.get(&v) {
                            Some(list) => match put(&mut w, list) {
                                Ok(parts) => {
                                    r.vertices_reloaded += 1;
                                    r.parts_written += parts as u64;
                                }
                                Err(e) => errors.push(format!("vertex {v}: {e}")),
                            },
                            None => {
                                tracing::error!(
                                    server = me,
                                    peer,
                                    vertex = v,
                                    "no list of this vertex in the log; marking its keys lost"
                                );
                                lose(&mut w, &found, v, peer, &mut r, &mut errors);
                            }
                        }
                    }
                })?;
            }
            None => {
                for &v in &vertices {
                    lose(&mut w, &found, v, peer, &mut r, &mut errors);
                }
            }
        }
        // F5: migrations onto the peer that it left half done. A failure here
        // is reported with the rest, after the report is kept.
        match w.restore_interrupted(peer) {
            Ok(interrupted) => {
                r.interrupted_restored = interrupted.restored;
                for k in &interrupted.unparseable {
                    errors.push(format!(
                    "key {:#x} (vertex {}): left invalidated mid-migration, and its old copy does not parse",
                    k.0,
                    k.vertex()
                ));
                }
            }
            Err(e) => errors.push(format!("restoring migrations it left half done: {e}")),
        }
        r.elapsed_ms = t0.elapsed().as_millis() as u64;
        let st = &self.recovery;
        st.failures.fetch_add(1, Ordering::Relaxed);
        *st.last_failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(r.clone());
        tracing::info!(server = me, peer, epoch, report = ?r, "peer failed: recovered what it held");
        if !errors.is_empty() {
            return Err(NodeError::Recovery(format!(
            "server {me} after the failure of server {peer}: {} of {} vertices could not be put back at home; first: {}",
            errors.len(),
            vertices.len(),
            errors[0]
        )));
        }
        Ok(r)
    }
}

/// Marks `v`'s keys among `found` lost with `peer` (F3).
fn lose<F: Fabric>(
    w: &mut Worker<Counting<F>>,
    found: &[Key],
    v: u32,
    peer: MachineId,
    r: &mut FailureReport,
    errors: &mut Vec<String>,
) {
    for k in found.iter().filter(|k| k.vertex() == v) {
        match w.mark_lost(*k, peer) {
            Ok(true) => r.keys_lost += 1,
            Ok(false) => {}
            Err(e) => errors.push(format!("key {:#x}: {e}", k.0)),
        }
    }
}

impl<F: Fabric> Node<F> {
    /// `peer` is back at a newer epoch, recovered from its own log: forget what
    /// was cached of it meanwhile and run a scan round (see the module doc).
    pub fn peer_rejoined(&self, peer: MachineId, epoch: u64) -> Result<RejoinReport> {
        self.check_peer(peer)?;
        let t0 = Instant::now();
        let mut w = self.store.worker(self.me)?;
        let f = w.forget_peer(peer)?;
        let round = self.scan_round(&mut w);
        let mut r = RejoinReport {
            peer,
            epoch,
            cache_entries: f.cache_entries,
            ..RejoinReport::default()
        };
        match round {
            Ok((report, waiting)) => {
                r.scan_blocks = Some(report.blocks);
                r.scan_waiting = Some(waiting as u64);
            }
            Err(e) => tracing::warn!(server = self.me, peer, "scan round at rejoin failed: {e}"),
        }
        r.elapsed_ms = t0.elapsed().as_millis() as u64;
        self.recovery.rejoins.fetch_add(1, Ordering::Relaxed);
        *self
            .recovery
            .last_rejoin
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(r.clone());
        tracing::info!(server = self.me, peer, epoch, report = ?r, "peer rejoined");
        Ok(r)
    }

    /// One scan round on this node's value region (a server's scan thread
    /// runs one every `recovery.scan_interval_ms`); returns its report and the
    /// blocks left waiting for their lease.
    pub fn scan_round(&self, w: &mut Worker<Counting<F>>) -> Result<(ScanReport, usize)> {
        let st = &self.recovery;
        // Held across the scan's fabric operations: spin through `relax`, never
        // block (a simulation runs one actor at a time).
        let mut guard = loop {
            match st.scanner.try_lock() {
                Ok(g) => break g,
                Err(std::sync::TryLockError::Poisoned(p)) => break p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => w.relax(),
            }
        };
        let scanner = guard
            .get_or_insert_with(|| Scanner::new(self.store.config().reclaim_lease_ms * 1_000_000));
        match w.scan_values(scanner) {
            Ok(r) => {
                st.scan_rounds.fetch_add(1, Ordering::Relaxed);
                st.scan_freed.fetch_add(r.freed, Ordering::Relaxed);
                st.scan_freed_bytes
                    .fetch_add(r.freed_bytes, Ordering::Relaxed);
                if r.freed > 0 {
                    tracing::info!(
                        server = self.me,
                        freed = r.freed,
                        freed_bytes = r.freed_bytes,
                        "value-region scan freed blocks no address word names"
                    );
                }
                Ok((r, scanner.waiting()))
            }
            Err(e) => {
                st.scan_aborted.fetch_add(1, Ordering::Relaxed);
                Err(e.into())
            }
        }
    }
}
