//! A KV server with its migration agent (NetMigrate 3, 4.1, 4.2) as a state machine without I/O:
//! [`Server::handle`] takes one packet, [`Server::tick`] does background migration work, and both
//! return the packets to send. Drivers (threads, the simulation) do the sending.
//!
//! A server owns shards; a shard is `Owner`, migrating out (`Source`, with a source agent),
//! migrating in (`Dest`, with a destination agent), or `Moved` (its queries are forwarded).
//! This file holds the state, the public API and the packet dispatch; the agents' steps are in
//! `server/source.rs` and `server/dest.rs`.
//!
//! # Ordering the protocol relies on
//! Each server has one FIFO inbox (its node's [`crate::budget::Inbox`] keeps that order, letting
//! only acks of the copy pass queries that wait for budget). The router forwards a query to the
//! source before it handles any later control packet, and acks control packets into that same
//! inbox, so when the source sees the router's GROUP-START ack, every write the router sent it
//! for that group is already behind it.
//!
//! A group's DATA follows its GROUP-START without waiting for the ack (pipelined, as in the
//! paper). Over a network that loses or reorders, the DATA can reach the destination before the
//! router counts the START; meanwhile the router routes the group by its filters alone, and a
//! BF false positive sends a read to the destination alone (S3) while a late write of the group
//! is still at the source. So a NetMigrate destination does not trust its copy of a group
//! before GROUP-DONE: a read routed to it alone pulls from the source (as for a key it lacks)
//! and answers the newer of the two. Only the late-write flush and GROUP-COMPLETE wait for the
//! START ack. Writes the source executes after scanning a group and before that ack are the
//! late writes of NetMigrate 4.3; they are forwarded before GROUP-COMPLETE is sent, and
//! GROUP-DONE goes to the destination once they are installed.
//!
//! # Versions
//! A version is `era << 48 | sequence`. A destination raises its era above the source's when a
//! migration starts, so every write taken by the destination is newer than anything the source
//! wrote; migrated copies keep their versions and are installed only over older ones (7).
//!
//! # Destination failure
//! With `mirror_writes` on, the destination sends every write it takes to the source and acks the
//! client only after the source has applied it; reads of a key with a write in flight wait. So
//! the source holds every acknowledged write, and an aborted migration (a packet to the
//! destination or router unanswered after `retries_max` resends and `ack_timeout_us`, see
//! `reliable`) leaves the source authoritative and complete (NetMigrate 7, fault tolerance).
//! A destination whose mirrored write goes unanswered fences the shard (every query of it
//! fails) until the source finishes or aborts, since that write may or may not have reached
//! the source; a MIRROR-ACK refusing a write means the source aborted, and the destination
//! drops the shard.
//!
//! # Router restart
//! A restarted router forgets the instance and sends the shard's queries to the source. A source
//! that gets a write of a group whose late writes it flushed knows this (the ordering above says
//! it never happens otherwise; reads routed before a GROUP-START may arrive after its ack): it
//! aborts, or, once every group is final at the destination, forwards the write there
//! (`on_query`). Reads stay here: with `mirror_writes` the source holds every acknowledged
//! write.
//!
//! # Source failure
//! A destination probes a source silent for `ack_timeout_us` (at once after a PULL or MIRROR
//! given up); a PROBE given up sends SOURCE-LOST to the router, and once the router accepts it,
//! the shard is served at the destination as orphaned until an operator recovers or rolls it
//! back (`server/orphan.rs`). Probing only after a silence makes the destination slower to
//! give up than the source (`ack_timeout_us` once), so a live source cut off by loss aborts
//! first and the router refuses the SOURCE-LOST.
//!
//! # Reliable control plane
//! Migration and control packets (and pulls and mirrors) go through [`crate::reliable`]: a
//! server-wide sequence number, resends with backoff, duplicates of answers ignored. Receivers
//! are idempotent: a MIGRATE-INIT, DATA, FINISH or ABORT seen again is answered again and
//! applied once (the router does the same for its control packets).

mod config;
mod dest;
mod dispatch;
mod orphan;
mod source;

pub use config::{ServerConfig, ServerStats};

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::error::{Error, Result};
use crate::group::Geometry;
use crate::install::{Install, Installer};
use crate::reliable::Retransmits;
use crate::status::{MigrationPhase, MigrationStatus};
use crate::table::{ShardStore, Table};
use crate::wire::{
    Body, Item, Key, NodeId, Packet, Protocol, ShardId, Status, FLAG_DOUBLE, FLAG_LATE,
};

#[derive(Debug, Default)]
struct GroupProgress {
    start_acked: bool,
    unacked: u32,
    late: BTreeSet<Key>,
    late_sent: bool,
    complete_sent: bool,
}

#[derive(Debug)]
struct SourceAgent {
    /// This server's number for the migration (`MigrationStatus::attempt`).
    attempt: u64,
    dst: NodeId,
    protocol: Protocol,
    phase: MigrationPhase,
    started_us: u64,
    last_progress_us: u64,
    /// Groups started so far (all of them: the copy is done).
    next_group: u32,
    /// Which groups have started (a bitmap: Fulva starts them out of order).
    started: Vec<u64>,
    /// The lowest group that may not have started (the order of every protocol but Fulva).
    cursor: u32,
    groups_total: u32,
    groups_done: u32,
    groups: BTreeMap<u32, GroupProgress>,
    batches: BTreeMap<u32, u32>,
    queue: VecDeque<(u32, Vec<Item>, bool)>,
    next_batch: u32,
    dirty: BTreeSet<Key>,
    dirty_rounds: u32,
    frozen_since_us: Option<u64>,
    pause_us: u64,
    held: VecDeque<Packet>,
    errors: u64,
    last_error: Option<String>,
    terminate_sent: bool,
}

impl SourceAgent {
    /// Groups in the copy window: started, GROUP-COMPLETE not sent.
    fn copying(&self) -> usize {
        self.groups.values().filter(|g| !g.complete_sent).count()
    }

    /// Groups in the completing window: GROUP-COMPLETE sent, not acknowledged.
    fn completing(&self) -> usize {
        self.groups.values().filter(|g| g.complete_sent).count()
    }
}

#[derive(Debug)]
struct DestAgent {
    src: NodeId,
    protocol: Protocol,
    geometry: Geometry,
    done: Vec<u64>,
    owned: bool,
    parked: BTreeMap<Key, Vec<Packet>>,
    parked_count: usize,
    pending: BTreeMap<u32, Packet>,
    pending_keys: BTreeMap<Key, u32>,
    /// A mirrored write went unanswered past its retries: the source may or may not hold it,
    /// so nothing of the shard is served until the source finishes or aborts the migration, or
    /// the router confirms it dead (a PROBE goes out at once).
    fenced: bool,
    /// This server's era at MIGRATE-INIT: a version of this era or later was written here.
    era_in: u16,
    /// When the source last sent anything about this shard (silent for `ack_timeout_us`, it is
    /// probed; `server/orphan.rs`).
    heard_us: u64,
    /// A PROBE awaits its answer.
    probing: bool,
    /// The source stopped answering (`server/orphan.rs`).
    source_lost: Option<SourceLost>,
}

/// A destination's dead source (design: "NetMigrate: a dead source").
#[derive(Debug)]
struct SourceLost {
    /// Why the source is taken for dead.
    reason: String,
    /// The router accepted SOURCE-LOST: the shard is served here as orphaned.
    orphaned: bool,
    since_us: u64,
}

impl DestAgent {
    fn group_done(&self, key: Key) -> bool {
        let g = self.geometry.group_of(key) as usize;
        self.done[g / 64] & (1 << (g % 64)) != 0
    }

    /// Whether group `g`'s copy here is final: it had its GROUP-DONE, and the protocol sends
    /// nothing of a done group later (source-based and stop-and-copy re-send dirty pairs in
    /// later rounds, so no group of theirs is final before FINISH).
    fn group_final(&self, g: u32) -> bool {
        let g = g as usize;
        !matches!(self.protocol, Protocol::SourceBased | Protocol::StopAndCopy)
            && self.done[g / 64] & (1 << (g % 64)) != 0
    }
}

enum Role {
    Owner,
    Source(Box<SourceAgent>),
    Dest(Box<DestAgent>),
    Moved(NodeId),
}

struct Shard<S> {
    table: S,
    role: Role,
    heat: Heat,
}

/// Sampled accesses per group of a shard, for Fulva's hot-first order (NetMigrate 6.1: "the hot
/// keys are migrated with a higher priority based on sampling statistics"): one query in
/// [`HEAT_SAMPLE_EVERY`] counts for its group, at most [`HEAT_GROUPS_MAX`] groups tracked.
#[derive(Debug, Default)]
struct Heat {
    queries: u64,
    counts: BTreeMap<u32, u32>,
}

/// One query in this many is sampled.
pub const HEAT_SAMPLE_EVERY: u64 = 8;
/// Groups whose heat a shard tracks; once full, only tracked groups gain heat.
pub const HEAT_GROUPS_MAX: usize = 4096;

impl Heat {
    fn sample(&mut self, group: u32) {
        self.queries += 1;
        if !self.queries.is_multiple_of(HEAT_SAMPLE_EVERY) {
            return;
        }
        let full = self.counts.len() >= HEAT_GROUPS_MAX;
        match self.counts.get_mut(&group) {
            Some(c) => *c = c.saturating_add(1),
            None if !full => {
                self.counts.insert(group, 1);
            }
            None => {}
        }
    }

    /// The hottest sampled group `skip` refuses not, ties to the lower group.
    fn hottest(&self, skip: impl Fn(u32) -> bool) -> Option<u32> {
        self.counts
            .iter()
            .filter(|(&g, _)| !skip(g))
            .max_by_key(|(&g, &c)| (c, std::cmp::Reverse(g)))
            .map(|(&g, _)| g)
    }
}

impl SourceAgent {
    /// Whether group `g`'s late writes went to the destination (it is complete, or completing):
    /// from then on the destination holds the group. Source-based and stop-and-copy keep every
    /// group at the source until the end.
    fn flushed(&self, g: u32) -> bool {
        if matches!(self.protocol, Protocol::SourceBased | Protocol::StopAndCopy)
            || self.phase == MigrationPhase::Registering
        {
            return false;
        }
        match self.groups.get(&g) {
            Some(gp) => gp.late_sent,
            None => self.is_started(g),
        }
    }

    fn is_started(&self, g: u32) -> bool {
        let g = g as usize;
        self.started
            .get(g / 64)
            .is_some_and(|w| w & (1 << (g % 64)) != 0)
    }

    /// Marks and returns the next group to copy: for Fulva the hottest sampled one not started
    /// yet, otherwise (and once no sampled group is left) the lowest not started.
    fn start_next(&mut self, heat: &Heat) -> u32 {
        debug_assert!(self.next_group < self.groups_total);
        let hot = match self.protocol {
            Protocol::Fulva => heat.hottest(|g| g >= self.groups_total || self.is_started(g)),
            _ => None,
        };
        let g = hot.unwrap_or_else(|| {
            while self.is_started(self.cursor) {
                self.cursor += 1;
            }
            self.cursor
        });
        self.started[g as usize / 64] |= 1 << (g % 64);
        self.next_group += 1;
        g
    }
}

/// Makes the store of a shard this server starts holding (its own, or one migrating in).
pub type StoreFactory<S> = Box<dyn FnMut(ShardId, Geometry) -> S + Send>;

/// One KV server and its migration agents, over a store per shard (the built-in [`Table`] by
/// default).
pub struct Server<S: ShardStore = Table> {
    cfg: ServerConfig,
    make_store: StoreFactory<S>,
    era: u16,
    seq: u64,
    now_us: u64,
    shards: BTreeMap<ShardId, Shard<S>>,
    out: Vec<(NodeId, Packet)>,
    /// DATA batches accepted for the node's install worker (`installs_elsewhere`).
    installs: Vec<Install>,
    installs_elsewhere: bool,
    retx: Retransmits,
    stats: ServerStats,
    history: VecDeque<MigrationStatus>,
    /// Migrations started here so far (numbers them).
    attempts: u64,
}

fn key_of(body: &Body) -> Key {
    match body {
        Body::Get { key } | Body::Set { key, .. } | Body::Delete { key } => *key,
        _ => unreachable!("key_of takes queries only"),
    }
}

impl Server {
    /// A server owning an empty shard of its own id, in memory.
    pub fn new(cfg: ServerConfig) -> Result<Self> {
        Self::with_store(cfg, Box::new(|_, geometry| Table::new(geometry)))
    }
}

impl<S: ShardStore> Server<S> {
    /// A server owning an empty shard of its own id, its shards' stores made by `make_store`.
    pub fn with_store(cfg: ServerConfig, mut make_store: StoreFactory<S>) -> Result<Self> {
        cfg.validate()?;
        let mut shards = BTreeMap::new();
        shards.insert(
            cfg.id,
            Shard {
                table: make_store(cfg.id, cfg.geometry),
                role: Role::Owner,
                heat: Heat::default(),
            },
        );
        Ok(Self {
            make_store,
            era: 1,
            seq: 0,
            now_us: 0,
            shards,
            out: Vec::new(),
            installs: Vec::new(),
            installs_elsewhere: false,
            retx: Retransmits::new(cfg.retry_policy()),
            stats: ServerStats::default(),
            history: VecDeque::new(),
            attempts: 0,
            cfg,
        })
    }

    /// This server's id.
    pub fn id(&self) -> NodeId {
        self.cfg.id
    }

    /// The first failure of a shard's store, if any: everything this server produced since is
    /// unreliable, and its driver must drop it and stop the node.
    pub fn store_error(&self) -> Option<String> {
        self.shards.values().find_map(|s| s.table.health().err())
    }

    /// The installer of this server's own shard's store, if its stores install off the
    /// node's thread (`crate::install`).
    pub fn installer(&self) -> Result<Option<Box<dyn Installer>>> {
        match self.shards.get(&self.cfg.id) {
            Some(s) => s.table.installer(),
            None => Ok(None),
        }
    }

    /// From now on a DATA batch is not installed here: [`Server::take_installs`] hands it to
    /// the driver, which installs it and sends its DATA-ACK once it is applied
    /// (`crate::install`, A1).
    pub fn set_installs_elsewhere(&mut self) {
        self.installs_elsewhere = true;
    }

    /// The DATA batches accepted since the last call, for the driver's install worker.
    pub fn take_installs(&mut self) -> Vec<Install> {
        std::mem::take(&mut self.installs)
    }

    /// Counters so far.
    pub fn stats(&self) -> &ServerStats {
        &self.stats
    }

    /// Keys with values in `shard` here (0 if the shard is not here).
    pub fn live_keys(&self, shard: ShardId) -> usize {
        self.shards.get(&shard).map_or(0, |s| s.table.live())
    }

    /// The current entry of `key` in `shard` here, bypassing routing (for tests and checks).
    pub fn peek(&self, shard: ShardId, key: Key) -> Option<Item> {
        self.shards.get(&shard)?.table.get(key)
    }

    /// The migration group of `key` in `shard`, if the shard is here.
    pub fn group_of(&self, shard: ShardId, key: Key) -> Option<u32> {
        self.shards
            .get(&shard)
            .map(|s| s.table.geometry().group_of(key))
    }

    /// Whether this server holds `shard` as its owner (not migrating).
    pub fn owns(&self, shard: ShardId) -> bool {
        match self.shards.get(&shard).map(|s| &s.role) {
            Some(Role::Owner) => true,
            Some(Role::Dest(d)) => d.owned,
            _ => false,
        }
    }

    fn next_version(&mut self, current: u64) -> u64 {
        self.seq += 1;
        (((self.era as u64) << 48) | self.seq).max(current + 1)
    }

    /// Bulk-loads a pair into an owned shard before any traffic (version 1..).
    pub fn load(&mut self, shard: ShardId, key: Key, value: Vec<u8>) -> Result<()> {
        let cur = self.shards.get(&shard).map(|s| s.table.version(key));
        let Some(cur) = cur else {
            return Err(Error::ShardUnknown {
                server: self.cfg.id,
                shard,
            });
        };
        let version = self.next_version(cur);
        if let Some(s) = self.shards.get_mut(&shard) {
            s.table.put(Item {
                key,
                version,
                value: Some(value),
            });
        }
        Ok(())
    }

    fn send(&mut self, to: NodeId, shard: ShardId, seq: u32, flags: u8, body: Body) {
        self.out.push((
            to,
            Packet {
                from: self.cfg.id,
                shard,
                seq,
                flags,
                body,
            },
        ));
    }

    /// Sends a packet that must be answered: numbered, and sent again until it is (see
    /// `reliable`). Returns its sequence number.
    fn send_reliable(&mut self, to: NodeId, shard: ShardId, flags: u8, body: Body) -> u32 {
        let p = Packet {
            from: self.cfg.id,
            shard,
            seq: 0,
            flags,
            body,
        };
        let (to, p) = self.retx.send(self.now_us, to, p);
        let seq = p.seq;
        self.out.push((to, p));
        seq
    }

    /// Whether answer `seq` from `from` answers a numbered packet still awaited (else it is a
    /// duplicate, counted, to be ignored).
    fn answered(&mut self, seq: u32, from: NodeId) -> bool {
        if self.retx.ack(seq, from).is_some() {
            return true;
        }
        self.stats.duplicates += 1;
        false
    }

    fn send_extra(&mut self, to: NodeId, shard: ShardId, seq: u32, flags: u8, body: Body) {
        self.send(to, shard, seq, flags, body);
        if let Some((_, p)) = self.out.last() {
            self.stats.extra_bytes += p.encoded_len() as u64;
        }
    }

    fn reply(&mut self, q: &Packet, status: Status, version: u64, value: Vec<u8>, flags: u8) {
        let flags = flags | (q.flags & FLAG_DOUBLE);
        self.send(
            q.from,
            q.shard,
            q.seq,
            flags,
            Body::Reply {
                status,
                version,
                value,
            },
        );
    }

    fn reply_item(&mut self, q: &Packet, item: Option<Item>, flags: u8) {
        match item {
            Some(Item {
                version,
                value: Some(v),
                ..
            }) => self.reply(q, Status::Ok, version, v, flags),
            Some(Item { version, .. }) => self.reply(q, Status::NotFound, version, vec![], flags),
            None => self.reply(q, Status::NotFound, 0, vec![], flags),
        }
    }

    /// Starts migrating `shard` (owned here) to `dst` with `protocol` (NetMigrate 4.1 step 1:
    /// notify the destination; the router is registered once it answers).
    pub fn start_migration(
        &mut self,
        now_us: u64,
        shard: ShardId,
        dst: NodeId,
        protocol: Protocol,
    ) -> Result<Vec<(NodeId, Packet)>> {
        self.now_us = now_us;
        let server = self.cfg.id;
        if dst == server || dst == self.cfg.router {
            return Err(Error::BadDestination {
                shard,
                server,
                router: self.cfg.router,
                destination: dst,
            });
        }
        let era = self.era;
        let s = self
            .shards
            .get_mut(&shard)
            .ok_or(Error::ShardUnknown { server, shard })?;
        // A shard received earlier becomes a plain owned shard once nothing of that migration
        // is in flight, and can move on.
        if matches!(&s.role, Role::Dest(d) if d.owned && d.pending.is_empty() && d.parked.is_empty())
        {
            s.role = Role::Owner;
        }
        if !matches!(s.role, Role::Owner) {
            return Err(Error::MigrationBusy { shard, server });
        }
        let geometry = s.table.geometry();
        self.attempts += 1;
        s.role = Role::Source(Box::new(SourceAgent {
            attempt: self.attempts,
            dst,
            protocol,
            phase: MigrationPhase::Registering,
            started_us: now_us,
            last_progress_us: now_us,
            next_group: 0,
            started: vec![0; (geometry.groups() as usize).div_ceil(64)],
            cursor: 0,
            groups_total: geometry.groups(),
            groups_done: 0,
            groups: BTreeMap::new(),
            batches: BTreeMap::new(),
            queue: VecDeque::new(),
            next_batch: 0,
            dirty: BTreeSet::new(),
            dirty_rounds: 0,
            frozen_since_us: None,
            pause_us: 0,
            held: VecDeque::new(),
            errors: 0,
            last_error: None,
            terminate_sent: false,
        }));
        self.send_reliable(
            dst,
            shard,
            0,
            Body::Init {
                era,
                protocol,
                geometry,
            },
        );
        Ok(std::mem::take(&mut self.out))
    }

    /// Handles one packet from the inbox.
    pub fn handle(&mut self, now_us: u64, p: Packet) -> Vec<(NodeId, Packet)> {
        self.now_us = now_us;
        if p.body.is_query() {
            self.on_query(p);
        } else {
            self.on_agent(p);
        }
        std::mem::take(&mut self.out)
    }

    /// Background work: start groups, send batches, send unanswered packets again and give up
    /// the ones past their retries.
    pub fn tick(&mut self, now_us: u64) -> Vec<(NodeId, Packet)> {
        self.now_us = now_us;
        let before = self.out.len();
        let lost = self.retx.due(now_us, &mut self.out);
        for (_, p) in &self.out[before..] {
            self.stats.resent += 1;
            self.stats.resent_bytes += p.encoded_len() as u64;
            self.stats.extra_bytes += p.encoded_len() as u64;
        }
        for l in lost {
            self.stats.given_up += 1;
            self.given_up(l);
        }
        let shards: Vec<ShardId> = self
            .shards
            .iter()
            .filter(|(_, s)| matches!(s.role, Role::Source(_)))
            .map(|(&id, _)| id)
            .collect();
        for shard in shards {
            self.source_step(shard);
        }
        self.dest_watch();
        std::mem::take(&mut self.out)
    }

    /// Whether `tick` has work to do (a source agent is copying).
    pub fn has_background_work(&self) -> bool {
        self.shards.values().any(|s| match &s.role {
            Role::Source(a) => {
                matches!(
                    a.phase,
                    MigrationPhase::Copying
                        | MigrationPhase::DirtyRounds
                        | MigrationPhase::FinalPause
                ) && (!a.queue.is_empty() && a.batches.len() < self.cfg.batches_inflight_max
                    || a.next_group < a.groups_total && a.copying() < self.cfg.groups_inflight_max
                    || a.queue.is_empty() && a.batches.is_empty() && a.groups.is_empty())
            }
            _ => false,
        })
    }

    /// Aborts the outgoing migration of `shard` now (operator request).
    pub fn abort_migration(&mut self, now_us: u64, shard: ShardId) -> Vec<(NodeId, Packet)> {
        self.now_us = now_us;
        self.abort(shard, "aborted by the operator");
        std::mem::take(&mut self.out)
    }

    /// The number of the outgoing migration of `shard` running now, if any
    /// (`MigrationStatus::attempt`).
    pub fn running_attempt(&self, shard: ShardId) -> Option<u64> {
        match &self.shards.get(&shard)?.role {
            Role::Source(a) => Some(a.attempt),
            _ => None,
        }
    }

    /// Every outgoing migration, running ones first, then finished and aborted ones (newest last).
    pub fn migration_status(&self) -> Vec<MigrationStatus> {
        let mut v: Vec<MigrationStatus> = self
            .shards
            .iter()
            .filter_map(|(&id, s)| match &s.role {
                Role::Source(a) => Some(self.agent_status(id, a)),
                _ => None,
            })
            .collect();
        v.extend(self.orphan_status());
        v.extend(self.history.iter().cloned());
        v
    }

    // ---------------------------------------------------------------- queries

    fn on_query(&mut self, q: Packet) {
        let shard = q.shard;
        let Some(s) = self.shards.get_mut(&shard) else {
            self.stats.refused += 1;
            self.reply(&q, Status::Error, 0, vec![], 0);
            return;
        };
        match &mut s.role {
            Role::Moved(to) => {
                let to = *to;
                self.stats.forwarded += 1;
                self.out.push((to, q));
            }
            Role::Dest(d) if d.source_lost.is_some() => self.orphan_query(q),
            Role::Dest(_) => self.dest_query(q),
            Role::Source(a) if a.frozen_since_us.is_some() => {
                if a.held.len() >= self.cfg.held_queries_max {
                    self.stats.refused += 1;
                    self.reply(&q, Status::Error, 0, vec![], 0);
                } else {
                    a.held.push_back(q);
                }
            }
            Role::Source(a)
                if !matches!(q.body, Body::Get { .. })
                    && a.flushed(s.table.geometry().group_of(key_of(&q.body))) =>
            {
                // Only a router that lost its state (restarted) sends a write of a group here
                // once its late writes are flushed ("Ordering" above: a GROUP-START ack waits
                // behind the group's writes, though it may pass reads); executed here, it would
                // never reach the copy. Once every group is final at the destination, the
                // destination takes it; before, the migration cannot go on without the
                // router's filters: it aborts, and this server, holding every acknowledged
                // write (`mirror_writes`), takes it as the owner.
                self.stats.stale_routes += 1;
                if a.phase == MigrationPhase::Terminating {
                    let dst = a.dst;
                    self.stats.forwarded += 1;
                    self.out.push((dst, q));
                } else {
                    let g = s.table.geometry().group_of(key_of(&q.body));
                    let why = format!(
                        "the router sent a write of group {g} here after its late writes had \
                         gone to the destination: it lost its migration state (restarted?)"
                    );
                    self.abort(shard, &why);
                    self.execute(q, 0);
                }
            }
            Role::Source(_) | Role::Owner => self.execute(q, 0),
        }
    }

    /// Executes a query on the local table (owner, or source before its pause).
    fn execute(&mut self, q: Packet, flags: u8) {
        self.stats.queries += 1;
        let shard = q.shard;
        let key = key_of(&q.body);
        if let Some(s) = self.shards.get_mut(&shard) {
            let g = s.table.geometry().group_of(key);
            s.heat.sample(g);
        }
        let new_value = match &q.body {
            Body::Get { .. } => {
                let item = self.shards.get(&shard).and_then(|s| s.table.get(key));
                self.reply_item(&q, item, flags);
                return;
            }
            Body::Set { value, .. } => Some(value.clone()),
            _ => None,
        };
        let candidate = self.next_version(0);
        let Some(s) = self.shards.get_mut(&shard) else {
            return;
        };
        let version = s.table.put_next(key, candidate, new_value);
        let mut late_after_flush = false;
        if let Role::Source(a) = &mut s.role {
            let g = s.table.geometry().group_of(key);
            match a.protocol {
                Protocol::SourceBased | Protocol::StopAndCopy => {
                    if a.is_started(g) {
                        a.dirty.insert(key);
                    }
                }
                _ => {
                    if let Some(gp) = a.groups.get_mut(&g) {
                        if gp.late_sent {
                            late_after_flush = true;
                        } else {
                            gp.late.insert(key);
                        }
                    } else if a.is_started(g) {
                        late_after_flush = true;
                    }
                }
            }
            if late_after_flush {
                // The FIFO argument of the module doc says this cannot happen; forward anyway.
                self.stats.late_after_flush += 1;
                let dst = a.dst;
                let items = s.table.get(key).into_iter().collect();
                self.send_extra(
                    dst,
                    shard,
                    0,
                    FLAG_LATE,
                    Body::Data {
                        batch: u32::MAX,
                        group: g,
                        items,
                    },
                );
                debug_assert!(
                    false,
                    "write to shard {shard} key {key} after its group's late flush"
                );
            }
        }
        self.reply(&q, Status::Ok, version, vec![], flags);
    }
}
