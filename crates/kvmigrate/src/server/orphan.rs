//! A destination whose source died mid-copy (design: "NetMigrate: a dead source").
//!
//! Silent for `ack_timeout_us` (or at once after a PULL or MIRROR given up), a source is probed;
//! a PROBE given up after its retries makes the shard's source *lost*: waiting queries fail, and SOURCE-LOST goes to the
//! router, which decides. Accepted (the router freed the instance and sends the shard here),
//! the shard is *orphaned*: a key answers from here if its group had its GROUP-DONE or it was
//! written here since MIGRATE-INIT, and LOST otherwise (never NotFound: its value may exist only
//! on the dead source). Refused (the router no longer migrates the shard to us: the source
//! aborted or finished first), the shard is dropped as on ABORT. Until the router answers,
//! every query of the shard fails, so the two never serve it at once.
//!
//! An operator then decides: [`Server::recover_orphan`] accepts the loss of the uncopied
//! groups and makes this server the shard's owner; [`Server::abandon_orphan`] drops the copy
//! and sends the shard back to its source (HAND-BACK), for a source that came back with its data.

use super::{Role, Server, SourceLost};
use crate::error::{Error, Result};
use crate::status::{MigrationPhase, MigrationStatus};
use crate::table::ShardStore;
use crate::wire::{Body, Item, Key, NodeId, Packet, ShardId, Status, FLAG_FROM_DEST};

impl<S: ShardStore> Server<S> {
    /// Probes each source silent for `ack_timeout_us` about a shard migrating in (from `tick`).
    pub(super) fn dest_watch(&mut self) {
        let now = self.now_us;
        let patience = self.cfg.ack_timeout_us;
        let due: Vec<(ShardId, NodeId)> = self
            .shards
            .iter_mut()
            .filter_map(|(&id, s)| match &mut s.role {
                Role::Dest(d)
                    if !d.owned
                        && !d.probing
                        && d.source_lost.is_none()
                        && now.saturating_sub(d.heard_us) >= patience =>
                {
                    d.probing = true;
                    Some((id, d.src))
                }
                _ => None,
            })
            .collect();
        for (shard, src) in due {
            self.stats.probes += 1;
            self.send_reliable(src, shard, 0, Body::Probe);
        }
    }

    /// A PROBE answered: the source lives; if it no longer migrates the shard to us (it aborted
    /// and its ABORT was lost), the copy here is dropped as on ABORT.
    pub(super) fn on_probe_ack(&mut self, shard: ShardId, from: NodeId, ok: bool) {
        let Some(s) = self.dest_shard(shard, from) else {
            return;
        };
        let Role::Dest(d) = &mut s.role else {
            return;
        };
        d.probing = false;
        if !ok && !d.owned && d.source_lost.is_none() {
            self.dest_drop(shard);
        }
    }

    /// The source of `shard` stopped answering: fail what waits on it and ask the router.
    pub(super) fn source_lost(&mut self, shard: ShardId, reason: String) {
        let now = self.now_us;
        let router = self.cfg.router;
        let Some(Role::Dest(d)) = self.shards.get_mut(&shard).map(|s| &mut s.role) else {
            return;
        };
        if d.owned || d.source_lost.is_some() {
            return;
        }
        d.probing = false;
        d.source_lost = Some(SourceLost {
            reason,
            orphaned: false,
            since_us: now,
        });
        d.pending_keys.clear();
        d.parked_count = 0;
        // Reads waiting for a pull, and writes whose mirror was not answered (their outcome is
        // unknown: taken here, perhaps not at the source), fail.
        let waiting: Vec<Packet> = std::mem::take(&mut d.parked)
            .into_values()
            .flatten()
            .chain(std::mem::take(&mut d.pending).into_values())
            .collect();
        self.stats.sources_lost += 1;
        self.retx.forget(|p| p.shard != shard);
        for q in waiting {
            self.stats.refused += 1;
            self.reply(&q, Status::Error, 0, vec![], FLAG_FROM_DEST);
        }
        self.send_reliable(router, shard, 0, Body::SourceLost);
    }

    /// The router's answer to SOURCE-LOST.
    pub(super) fn on_source_lost_ack(&mut self, shard: ShardId, ok: bool) {
        let Some(Role::Dest(d)) = self.shards.get_mut(&shard).map(|s| &mut s.role) else {
            return;
        };
        // FINISH came meanwhile: the copy is whole and the shard is ours either way.
        let Some(lost) = d.source_lost.as_mut().filter(|_| !d.owned) else {
            return;
        };
        if ok {
            lost.orphaned = true;
        } else {
            // The router no longer migrates the shard to us: the source aborted (it is the
            // owner again) or the instance is gone. Our copy must not be served.
            self.dest_drop(shard);
        }
    }

    /// SOURCE-LOST went unanswered: the router is down too; ask again (queries of the shard
    /// keep failing meanwhile).
    pub(super) fn source_lost_unanswered(&mut self, shard: ShardId) {
        let router = self.cfg.router;
        if matches!(
            self.shards.get(&shard).map(|s| &s.role),
            Some(Role::Dest(d)) if d.source_lost.as_ref().is_some_and(|l| !l.orphaned)
        ) {
            self.send_reliable(router, shard, 0, Body::SourceLost);
        }
    }

    /// A query of a shard whose source is lost (module doc).
    pub(super) fn orphan_query(&mut self, q: Packet) {
        let shard = q.shard;
        let key = super::key_of(&q.body);
        let server = self.cfg.id;
        let Some(s) = self.shards.get_mut(&shard) else {
            return;
        };
        let Role::Dest(d) = &mut s.role else {
            unreachable!("orphan_query on a non-destination shard")
        };
        self.stats.queries += 1;
        if !d.source_lost.as_ref().is_some_and(|l| l.orphaned) {
            // The router has not answered SOURCE-LOST: the source may still serve the shard.
            self.stats.refused += 1;
            self.reply(&q, Status::Error, 0, vec![], FLAG_FROM_DEST);
            return;
        }
        match &q.body {
            Body::Get { .. } => {
                let item = s.table.get(key);
                let here = item
                    .as_ref()
                    .is_some_and(|i| i.version >> 48 >= d.era_in as u64);
                if d.group_final(d.geometry.group_of(key)) || here {
                    self.reply_item(&q, item, FLAG_FROM_DEST);
                    return;
                }
                let group = d.geometry.group_of(key);
                let msg = lost_message(shard, key, group, d.src, server);
                self.stats.lost_answers += 1;
                self.reply(&q, Status::Lost, 0, msg.into_bytes(), FLAG_FROM_DEST);
            }
            Body::Set { .. } | Body::Delete { .. } => {
                let value = match &q.body {
                    Body::Set { value, .. } => Some(value.clone()),
                    _ => None,
                };
                // No one to mirror to: the write is this server's alone, and newer than
                // anything the source held (the era), so the key answers from here on.
                self.seq += 1;
                let candidate = ((self.era as u64) << 48) | self.seq;
                let version = s.table.put_next(key, candidate, value);
                self.reply(&q, Status::Ok, version, vec![], FLAG_FROM_DEST);
            }
            _ => unreachable!("orphan_query takes queries only"),
        }
    }

    fn orphaned(&self, shard: ShardId) -> Result<()> {
        match self.shards.get(&shard).map(|s| &s.role) {
            Some(Role::Dest(d)) if d.source_lost.as_ref().is_some_and(|l| l.orphaned) => Ok(()),
            _ => Err(Error::NotOrphaned {
                shard,
                server: self.cfg.id,
            }),
        }
    }

    /// Operator: the data of the groups not copied before the source died is lost. Deletes this
    /// server's stale copies of them (keys not written here) and makes it the shard's owner;
    /// those keys read as absent from now on. Fails unless the shard is orphaned here.
    pub fn recover_orphan(&mut self, now_us: u64, shard: ShardId) -> Result<()> {
        self.now_us = now_us;
        self.orphaned(shard)?;
        let status = self.orphan_entry(shard, MigrationPhase::Recovered);
        let Some(s) = self.shards.get_mut(&shard) else {
            return Ok(());
        };
        let Role::Dest(d) = std::mem::replace(&mut s.role, Role::Owner) else {
            return Ok(());
        };
        let mut stale: Vec<Item> = Vec::new();
        for g in 0..d.geometry.groups() {
            if !d.group_final(g) {
                stale.extend(
                    s.table
                        .scan_group(g)
                        .into_iter()
                        .filter(|i| i.version >> 48 < d.era_in as u64 && i.value.is_some()),
                );
            }
        }
        for i in stale {
            self.seq += 1;
            let candidate = ((self.era as u64) << 48) | self.seq;
            if let Some(s) = self.shards.get_mut(&shard) {
                s.table.put_next(i.key, candidate, None);
            }
        }
        if let Some(st) = status {
            self.remember(st);
        }
        Ok(())
    }

    /// Operator: the source came back with its data. Drops the copy here (writes taken while
    /// orphaned go with it) and asks the router to send the shard back to the source
    /// (HAND-BACK). Fails unless the shard is orphaned here.
    pub fn abandon_orphan(&mut self, now_us: u64, shard: ShardId) -> Result<Vec<(NodeId, Packet)>> {
        self.now_us = now_us;
        self.orphaned(shard)?;
        let status = self.orphan_entry(shard, MigrationPhase::RolledBack);
        let src = match self.shards.get(&shard).map(|s| &s.role) {
            Some(Role::Dest(d)) => d.src,
            _ => return Ok(Vec::new()),
        };
        self.dest_drop(shard);
        let router = self.cfg.router;
        self.send_reliable(router, shard, 0, Body::HandBack { to: src });
        if let Some(st) = status {
            self.remember(st);
        }
        Ok(std::mem::take(&mut self.out))
    }

    /// Status entries of incoming shards whose source is lost.
    pub(super) fn orphan_status(&self) -> Vec<MigrationStatus> {
        self.shards
            .keys()
            .filter_map(|&id| self.orphan_entry(id, MigrationPhase::SourceLost))
            .collect()
    }

    fn orphan_entry(&self, shard: ShardId, phase: MigrationPhase) -> Option<MigrationStatus> {
        let s = self.shards.get(&shard)?;
        let Role::Dest(d) = &s.role else {
            return None;
        };
        let lost = d.source_lost.as_ref()?;
        let groups_total = d.geometry.groups();
        let groups_done = (0..groups_total).filter(|&g| d.group_final(g)).count() as u32;
        let state = match (phase, lost.orphaned) {
            (MigrationPhase::SourceLost, false) => "waiting for the router to confirm",
            (MigrationPhase::SourceLost, true) => {
                "orphaned here: run `locus kv migration recover` (the data is gone) or `abort` \
                 (the source is back with its data)"
            }
            (MigrationPhase::Recovered, _) => "recovered by the operator: the loss accepted",
            _ => "rolled back by the operator: the shard went back to its source",
        };
        Some(MigrationStatus {
            attempt: 0,
            shard,
            source: d.src,
            destination: self.cfg.id,
            protocol: d.protocol,
            phase,
            groups_done,
            groups_total,
            elapsed_us: self.now_us.saturating_sub(lost.since_us),
            groups_per_s: 0.0,
            idle_us: self.now_us.saturating_sub(d.heard_us),
            errors: 1,
            last_error: Some(format!(
                "{}; {} of {groups_total} groups not copied; {state}",
                lost.reason,
                groups_total - groups_done
            )),
            late_writes: 0,
            dirty_rounds: 0,
            pause_us: 0,
        })
    }
}

/// The message a LOST reply carries.
fn lost_message(shard: ShardId, key: Key, group: u32, src: NodeId, server: NodeId) -> String {
    format!(
        "key {key} of shard {shard} (group {group}) was not copied to server {server} before \
         its source, server {src}, stopped answering: its data may exist only there. Run \
         `locus kv migration abort --shard {shard} --server {server}` once server {src} is back \
         with its data, or `locus kv migration recover --shard {shard} --server {server}` to \
         accept the loss"
    )
}
