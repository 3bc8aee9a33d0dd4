//! The coordinator process with `[etcd]` (issue 15 requirement 2): its
//! election, its record of migration targets in etcd, and dead servers.
//!
//! ```text
//!  start: bind control ▸ campaign(value = control address) ── blocks while another leads
//!                              │ leads (term = leader key's create revision)
//!                              ▼
//!         load the record from etcd ▸ serve (coordinator.rs) ─┬─ watch: PeerDown(m) ▸ unlink m
//!                                                             └─ leadership lost ▸ fenced:
//!                                                                approve nothing, exit 3
//! ```
//!
//! Invariants: (1) at most one coordinator approves migrations at a time:
//! only the leader serves, and it checks its leadership is surely held
//! ([`locus_membership::Leadership::is_live`]) before persisting each batch;
//! (2) persist-then-act holds with the record in etcd as with redb; (3) a
//! server that etcd reports dead is treated as unlinked (its jobs end as not
//! moved). Without `[etcd]` the record is the redb file and nothing here runs.

use std::sync::Mutex;
use std::time::Duration;

use locus_coordinator::policy::{Action, Event};
use locus_coordinator::{CoordinatorError, Record};
use locus_fabric::MachineId;
use locus_membership::{Leadership, MemberEvent, Membership};
use locus_store::Key;

use crate::config::ClusterFile;
use crate::{Result, ServerError};

/// Where approvals are recorded.
pub(crate) enum Rec {
    /// The redb file of `[coordinator] record` (no `[etcd]`).
    Redb(Record),
    /// `P/record/` in etcd.
    Etcd(Box<Membership>),
}

impl Rec {
    /// Every (key, latest target).
    pub(crate) fn load(&self) -> Result<Vec<(Key, MachineId)>> {
        match self {
            Rec::Redb(r) => Ok(r.load()?),
            Rec::Etcd(m) => Ok(m
                .record_load()
                .map_err(|e| ServerError::Membership(e.to_string()))?
                .into_iter()
                .map(|(k, t)| (Key(k), t))
                .collect()),
        }
    }
}

impl locus_coordinator::dispatch::Persist for Rec {
    type Error = String;

    /// Persist-then-act, as [`Record::persist_approvals`].
    fn persist_approvals(
        &self,
        actions: &[Action],
    ) -> std::result::Result<(), (String, Vec<Event>)> {
        match self {
            Rec::Redb(r) => r
                .persist_approvals(actions)
                .map_err(|(e, undo): (CoordinatorError, _)| (e.to_string(), undo)),
            Rec::Etcd(m) => {
                let persist: Vec<(u64, MachineId)> = actions
                    .iter()
                    .filter_map(|a| match a {
                        Action::Persist { key, target } => Some((key.0, *target)),
                        _ => None,
                    })
                    .collect();
                if persist.is_empty() {
                    return Ok(());
                }
                m.record_persist(&persist).map_err(|e| {
                    let undo = undo_all(actions);
                    (e.to_string(), undo)
                })
            }
        }
    }
}

/// The events that end every approval of `actions` as not moved.
pub(crate) fn undo_all(actions: &[Action]) -> Vec<Event> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Persist { key, target } => Some(Event::Migrated {
                key: *key,
                to: *target,
                ok: false,
            }),
            _ => None,
        })
        .collect()
}

/// Leadership of a coordinator with `[etcd]`.
pub(crate) struct Lead {
    pub(crate) membership: Membership,
    pub(crate) leadership: Leadership,
    pub(crate) fenced: Mutex<Option<String>>,
}

impl Lead {
    /// Whether this coordinator may approve now; fences it (once, with a log
    /// line) when it may not.
    pub(crate) fn may_approve(&self) -> bool {
        if self.leadership.is_live() {
            return true;
        }
        let mut f = self.fenced.lock().unwrap_or_else(|e| e.into_inner());
        if f.is_none() {
            let why = self
                .leadership
                .lost()
                .try_recv()
                .unwrap_or_else(|_| "no lease renewal acknowledged within its TTL".into());
            tracing::error!(
                term = self.leadership.term(),
                "coordinator fenced out: its leadership lease is lost ({why}); approving nothing"
            );
            *f = Some(why);
        }
        false
    }

    /// Why it is fenced, once it is.
    pub(crate) fn fenced(&self) -> Option<String> {
        self.fenced
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// With `[etcd]`: campaigns with `value` (the control address) and blocks
/// until this process leads; then the record is etcd's. Without: the redb
/// record and no leadership.
pub(crate) fn lead(file: &ClusterFile, value: &str) -> Result<(Rec, Option<Lead>)> {
    let Some(section) = &file.etcd else {
        let entry = file.coordinator.as_ref().expect("checked by the caller");
        return Ok((Rec::Redb(Record::open(&entry.record)?), None));
    };
    let err = |e: locus_membership::MembershipError| ServerError::Membership(e.to_string());
    let m = Membership::connect(&section.config()).map_err(err)?;
    if let Some(l) = m.leader().map_err(err)? {
        tracing::info!(leader = %l.value, term = l.term, "standing by: another coordinator leads");
    }
    let leadership = m
        .campaign(value, &|| false)
        .map_err(err)?
        .expect("a campaign that is never stopped returns only when it leads");
    tracing::info!(
        term = leadership.term(),
        control = value,
        "leading as coordinator"
    );
    Ok((
        Rec::Etcd(Box::new(m.clone())),
        Some(Lead {
            membership: m,
            leadership,
            fenced: Mutex::new(None),
        }),
    ))
}

/// Watches the membership and hands every server that dies to `unlink`
/// until `stop()`; also notices a lost leadership.
pub(crate) fn watch_servers(lead: &Lead, stop: &dyn Fn() -> bool, unlink: &dyn Fn(MachineId)) {
    let watch = match lead.membership.watch() {
        Ok((_, w)) => w,
        Err(e) => {
            tracing::error!("coordinator: cannot watch the membership: {e}");
            return;
        }
    };
    while !stop() {
        match watch.events().recv_timeout(Duration::from_millis(200)) {
            Ok(MemberEvent::PeerDown { machine, epoch }) => {
                tracing::warn!(
                    server = machine,
                    epoch,
                    "server is dead (etcd): unlinking it; its jobs end as not moved"
                );
                unlink(machine);
            }
            Ok(MemberEvent::PeerUp { machine, epoch }) => {
                tracing::info!(server = machine, epoch, "server registered (etcd)");
            }
            Err(_) => {
                lead.may_approve();
            }
        }
    }
}
