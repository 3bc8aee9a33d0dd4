//! The router: the programmable switch's role (NetMigrate 3, 4.3). Every client query passes
//! through it; it keeps a migration instance table and, per instance, a BF of completed groups
//! and a CBF of groups under migration, and picks where each query goes.
//!
//! Switch-like limits: the instance table and the redirect table are fixed arrays, the filters
//! are fixed register arrays allocated up front, and a packet costs a constant amount of work
//! (one table scan of `instances_max` entries, 2 x 4 filter probes). No per-key state.
//!
//! This module does no I/O: [`Router::on_packet`] takes a packet and returns the packets to send.
//!
//! # Routing state machine (NetMigrate 4.3, Fig. 3), per group, from the filter look-up
//!
//! ```text
//!                GROUP-START                 GROUP-COMPLETE
//!   +--------+  (CBF += 1)   +-----------+  (BF set, CBF -= 1)  +-----------+
//!   |   S1   | ------------> |    S2     | -------------------> |    S3     |
//!   | BF=0   |               | BF=0      |                      | BF=1      |
//!   | CBF=0  |               | CBF>0     |                      | CBF=0     |
//!   +--------+               +-----------+                      +-----------+
//!   R,W -> source             R -> both (double read)            R,W -> destination
//!                             W -> destination, and BF set       (missing key: the
//!        ^                         (see "sticky writes")          destination PriorityPulls)
//!        | other groups'                   \                        /
//!        | CBF decrements                   \  collisions of other /
//!        | (CBF false positive only)         v  groups             v
//!                                        +-----------+
//!                                        |    S4     |  BF=1 and CBF>0: impossible for one
//!                                        |  R -> both, W -> destination   group, a false positive
//!                                        +-----------+
//! ```
//!
//! Sticky writes: a CBF false positive (another group's increments) can put a group that has not
//! started into S2, and that group drops back to S1 when the other group completes. A write
//! routed to the destination meanwhile would then be invisible to S1 reads at the source. So a
//! write sent to the destination from S2 also sets the group's BF bits: once any write of a group
//! has gone to the destination, that group never reads from the source alone again. This costs
//! BF fill (more S3/S4 false positives, handled by pulls and double reads), never correctness.
//!
//! Duplicates (reliable control plane, see `reliable`): a source sends its control packets
//! again until acked, so the router may see one twice, or late. Each is applied once, judged by
//! content against small fixed tables, not by sequence number (a packet can be retried for
//! longer than any window of numbers stays meaningful):
//! - GROUP-START: each instance keeps the groups it counted in the CBF and has not seen
//!   complete, at most [`GROUPS_INFLIGHT_MAX`], and the last [`GROUPS_INFLIGHT_MAX`] it saw
//!   complete; a START for any of them is acked and not counted again. (A duplicate older than
//!   that is counted again: its group stays in S2/S4 and is double-read, slower, never wrong.
//!   A START must never be skipped on the BF's word: a BF false positive would then route a
//!   migrating group as S3 while late writes are still on their way.)
//! - GROUP-COMPLETE: applied only for a counted group; for a group the BF shows completed it is
//!   acked ok without another decrement; anything else is refused.
//! - REGISTER from the same source to the same destination: acked again. TERMINATE and ABORT
//!   for a gone instance: refused, which the source takes as done.
//!
//! A dead source (design: "NetMigrate: a dead source"): SOURCE-LOST from an instance's
//! *destination* frees the instance and redirects the shard to the destination, as TERMINATE
//! does; from anyone else, or for a gone instance, it is refused, and the destination drops its
//! copy. The router is the one place that decides between a source's ABORT and a destination's
//! SOURCE-LOST: whichever comes first wins, and the other is refused. HAND-BACK(to), an
//! operator's rollback relayed by the node the shard is redirected to, points the shard at `to`.
//!
//! Fulva (`ClientTracked`): Fulva's clients track exactly which ranges have migrated. The router
//! stands in for them with an exact bitmap of completed groups per instance, allocated up front
//! for [`RouterConfig::tracked_groups_max`] groups; a REGISTER of a Fulva shard with more groups
//! is refused.

use crate::error::Result;
use crate::filter::{BloomFilter, CountingBloomFilter};
use crate::group::Geometry;
use crate::wire::{Body, NodeId, Packet, RouterMode, ShardId, FLAG_DOUBLE};

/// Router limits and filter sizes.
#[derive(Clone, Debug)]
pub struct RouterConfig {
    /// The router's node id (sources send control packets here).
    pub id: NodeId,
    /// Migration instances at once (the P4 instance table's size).
    pub instances_max: usize,
    /// BF bytes per instance (NetMigrate 6.1 default: 512 KB).
    pub bf_bytes: usize,
    /// CBF bytes per instance, one counter per byte (NetMigrate 6.1 default: 1024 KB).
    pub cbf_bytes: usize,
    /// Finished migrations remembered as shard -> new owner rewrites.
    pub redirects_max: usize,
    /// Groups a Fulva (`ClientTracked`) instance can track exactly, bitmap allocated up front.
    pub tracked_groups_max: u32,
    /// Fault injection (issue 64 requirement 3: checked runs with teeth): a read the filters
    /// send to both servers goes to the source alone. With `mirror_writes` off, a read of a
    /// group in S2 then misses the destination's newer writes, and the measured run's history
    /// checker must report it. Never on outside tests and the benchmark's broken row.
    pub fault_double_read_source_only: bool,
}

impl Default for RouterConfig {
    fn default() -> Self {
        Self {
            id: 0,
            instances_max: 8,
            bf_bytes: 512 << 10,
            cbf_bytes: 1024 << 10,
            redirects_max: 256,
            tracked_groups_max: 1 << 20,
            fault_double_read_source_only: false,
        }
    }
}

/// The routing decision of Fig. 3, from `locus-placement` (shared with the graph store).
pub use locus_placement::index::{classify, decide, GroupState, Route};

/// Groups one instance can have counted in its CBF at once (see the module doc); a source's
/// copy and completing windows together (`groups_inflight_max + completing_max`) are bounded
/// by it.
pub const GROUPS_INFLIGHT_MAX: usize = 32;

#[derive(Clone, Debug)]
struct Instance {
    shard: ShardId,
    src: NodeId,
    dst: NodeId,
    mode: RouterMode,
    geometry: Geometry,
    counted: [Option<u32>; GROUPS_INFLIGHT_MAX],
    completed: [Option<u32>; GROUPS_INFLIGHT_MAX],
    completed_next: usize,
}

/// Counters the router keeps (what a switch exports through its control plane).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RouterStats {
    /// Queries forwarded.
    pub queries: u64,
    /// Reads sent to both servers.
    pub double_reads: u64,
    /// Queries sent to a destination.
    pub to_destination: u64,
    /// Writes that set BF bits from S2 (sticky writes).
    pub sticky_writes: u64,
    /// Control packets applied.
    pub controls: u64,
    /// Control packets refused (unknown instance, full table, not from the source).
    pub controls_refused: u64,
    /// Datagrams that failed to decode, dropped.
    pub malformed: u64,
    /// Packets of a kind the router does not handle, dropped.
    pub unexpected: u64,
    /// Bytes of the extra query copies made for double reads.
    pub double_read_bytes: u64,
    /// Control packets seen again (acked, applied once).
    pub control_duplicates: u64,
}

/// The router state: instance table, filters, redirects, counters.
pub struct Router {
    cfg: RouterConfig,
    slots: Vec<Option<Instance>>,
    bfs: Vec<BloomFilter>,
    cbfs: Vec<CountingBloomFilter>,
    redirects: Vec<Option<(ShardId, NodeId)>>,
    tracked: Vec<Vec<u64>>,
    stats: RouterStats,
}

impl Router {
    /// Allocates every register array up front, as a switch program does.
    pub fn new(cfg: RouterConfig) -> Result<Self> {
        if cfg.instances_max == 0 || cfg.instances_max > 64 {
            return Err(crate::Error::InvalidSetting {
                key: "instances_max",
                value: cfg.instances_max.to_string(),
                expected: "1..=64".into(),
            });
        }
        let bfs = (0..cfg.instances_max)
            .map(|_| BloomFilter::new(cfg.bf_bytes))
            .collect::<std::result::Result<_, _>>()?;
        let cbfs = (0..cfg.instances_max)
            .map(|_| CountingBloomFilter::new(cfg.cbf_bytes))
            .collect::<std::result::Result<_, _>>()?;
        if cfg.tracked_groups_max > 1 << 24 {
            return Err(crate::Error::InvalidSetting {
                key: "tracked_groups_max",
                value: cfg.tracked_groups_max.to_string(),
                expected: format!("at most {} (2 MB of bitmap per instance)", 1 << 24),
            });
        }
        let words = (cfg.tracked_groups_max as usize).div_ceil(64);
        Ok(Self {
            slots: vec![None; cfg.instances_max],
            redirects: vec![None; cfg.redirects_max],
            tracked: vec![vec![0; words]; cfg.instances_max],
            bfs,
            cbfs,
            stats: RouterStats::default(),
            cfg,
        })
    }

    /// The router's node id.
    pub fn id(&self) -> NodeId {
        self.cfg.id
    }

    /// The counters so far.
    pub fn stats(&self) -> &RouterStats {
        &self.stats
    }

    /// Active migration instances: (shard, source, destination).
    pub fn instances(&self) -> Vec<(ShardId, NodeId, NodeId)> {
        self.slots
            .iter()
            .flatten()
            .map(|i| (i.shard, i.src, i.dst))
            .collect()
    }

    /// Where the shard lives when no migration of it is in progress.
    fn home(&self, shard: ShardId) -> NodeId {
        self.redirects
            .iter()
            .flatten()
            .find(|(s, _)| *s == shard)
            .map_or(shard, |&(_, n)| n)
    }

    /// The filter state of `key`'s group in the instance migrating `shard`, if any (for tests
    /// and the status display).
    pub fn lookup(&self, shard: ShardId, key: u64) -> Option<GroupState> {
        let i = self.slot_of(shard)?;
        let inst = self.slots[i].as_ref()?;
        let g = inst.geometry.group_of(key);
        Some(classify(self.bfs[i].contains(g), self.cbfs[i].contains(g)))
    }

    fn slot_of(&self, shard: ShardId) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| s.as_ref().is_some_and(|i| i.shard == shard))
    }

    /// Decodes and handles one datagram; malformed input is counted and dropped.
    pub fn on_datagram(&mut self, datagram: &[u8]) -> Vec<(NodeId, Packet)> {
        match Packet::decode(datagram) {
            Ok(p) => self.on_packet(p),
            Err(_) => {
                self.stats.malformed += 1;
                Vec::new()
            }
        }
    }

    /// Handles one packet: forwards a query, or applies a control packet and acks it.
    pub fn on_packet(&mut self, p: Packet) -> Vec<(NodeId, Packet)> {
        if p.body.is_query() {
            return self.route_query(p);
        }
        match p.body {
            Body::Register { .. }
            | Body::GroupStart { .. }
            | Body::GroupComplete { .. }
            | Body::Terminate
            | Body::Abort
            | Body::SourceLost
            | Body::HandBack { .. } => self.control(p),
            _ => {
                self.stats.unexpected += 1;
                Vec::new()
            }
        }
    }

    fn route_query(&mut self, p: Packet) -> Vec<(NodeId, Packet)> {
        self.stats.queries += 1;
        let Some(i) = self.slot_of(p.shard) else {
            return vec![(self.home(p.shard), p)];
        };
        let (key, is_write) = match p.body {
            Body::Get { key } => (key, false),
            Body::Set { key, .. } | Body::Delete { key } => (key, true),
            _ => unreachable!("route_query takes queries only"),
        };
        let Some(inst) = self.slots[i].as_ref() else {
            unreachable!("slot_of returned an empty slot")
        };
        let (src, dst) = (inst.src, inst.dst);
        let g = inst.geometry.group_of(key);
        let route = match inst.mode {
            RouterMode::SourceOnly => Route::Source,
            RouterMode::DestinationFirst => Route::Destination,
            RouterMode::ClientTracked => {
                if is_write || self.tracked[i][g as usize / 64] & (1 << (g % 64)) != 0 {
                    Route::Destination
                } else {
                    Route::DoubleRead
                }
            }
            RouterMode::Filters => {
                let state = classify(self.bfs[i].contains(g), self.cbfs[i].contains(g));
                let route = decide(state, is_write);
                if is_write && state == GroupState::Migrating {
                    // Sticky writes (module doc): this group never reads from the source alone again.
                    self.bfs[i].insert(g);
                    self.stats.sticky_writes += 1;
                }
                route
            }
        };
        match route {
            Route::Source => vec![(src, p)],
            Route::Destination => {
                self.stats.to_destination += 1;
                vec![(dst, p)]
            }
            Route::DoubleRead if self.cfg.fault_double_read_source_only => vec![(src, p)],
            Route::DoubleRead => {
                self.stats.double_reads += 1;
                let mut copy = p.clone();
                copy.flags |= FLAG_DOUBLE;
                self.stats.double_read_bytes += copy.encoded_len() as u64;
                let mut orig = p;
                orig.flags |= FLAG_DOUBLE;
                vec![(src, orig), (dst, copy)]
            }
        }
    }

    fn ack(&mut self, to: NodeId, p: &Packet, ok: bool, group: u32) -> Vec<(NodeId, Packet)> {
        if ok {
            self.stats.controls += 1;
        } else {
            self.stats.controls_refused += 1;
        }
        vec![(
            to,
            Packet {
                from: self.cfg.id,
                shard: p.shard,
                seq: p.seq,
                flags: 0,
                body: Body::ControlAck {
                    op: p.body.op(),
                    ok,
                    group,
                },
            },
        )]
    }

    /// Points `shard` at `to` once no instance migrates it; false if the redirect table is full.
    fn redirect(&mut self, shard: ShardId, to: NodeId) -> bool {
        let slot = self
            .redirects
            .iter()
            .position(|r| r.is_some_and(|(s, _)| s == shard))
            .or_else(|| self.redirects.iter().position(Option::is_none));
        match slot {
            Some(r) => {
                self.redirects[r] = Some((shard, to));
                true
            }
            None => false,
        }
    }

    fn control(&mut self, p: Packet) -> Vec<(NodeId, Packet)> {
        let from = p.from;
        match p.body {
            Body::SourceLost => {
                let i = self.slot_of(p.shard);
                let ours = i.filter(|&i| self.slots[i].as_ref().is_some_and(|s| s.dst == from));
                let Some(i) = ours else {
                    return self.ack(from, &p, false, 0);
                };
                self.slots[i] = None;
                let ok = self.redirect(p.shard, from);
                return self.ack(from, &p, ok, 0);
            }
            Body::HandBack { to } => {
                let ok = self.slot_of(p.shard).is_none()
                    && self.home(p.shard) == from
                    && self.redirect(p.shard, to);
                return self.ack(from, &p, ok, 0);
            }
            _ => {}
        }
        if let Body::Register {
            src,
            dst,
            mode,
            geometry,
        } = p.body
        {
            let same = self.slot_of(p.shard).and_then(|i| self.slots[i].as_ref());
            if same.is_some_and(|s| s.src == src && s.dst == dst && s.mode == mode) {
                self.stats.control_duplicates += 1;
                return self.ack(from, &p, true, 0);
            }
            let fits = mode != RouterMode::ClientTracked
                || geometry.groups() <= self.cfg.tracked_groups_max;
            let ok = src == from && fits && self.slot_of(p.shard).is_none();
            let free = self.slots.iter().position(Option::is_none);
            let (Some(i), true) = (free, ok) else {
                return self.ack(from, &p, false, 0);
            };
            self.bfs[i].clear();
            self.cbfs[i].clear();
            self.tracked[i].fill(0);
            self.slots[i] = Some(Instance {
                shard: p.shard,
                src,
                dst,
                mode,
                geometry,
                counted: [None; GROUPS_INFLIGHT_MAX],
                completed: [None; GROUPS_INFLIGHT_MAX],
                completed_next: 0,
            });
            return self.ack(from, &p, true, 0);
        }
        let Some(i) = self.slot_of(p.shard) else {
            return self.ack(from, &p, false, 0);
        };
        let Some(inst) = self.slots[i].as_mut() else {
            unreachable!("slot_of returned an empty slot")
        };
        if inst.src != from {
            return self.ack(from, &p, false, 0);
        }
        match p.body {
            Body::GroupStart { group } if group < inst.geometry.groups() => {
                if inst.mode != RouterMode::Filters {
                    return self.ack(from, &p, true, group);
                }
                // Counted once (module doc): not again while counted, nor once completed.
                if inst.counted.contains(&Some(group)) || inst.completed.contains(&Some(group)) {
                    self.stats.control_duplicates += 1;
                    return self.ack(from, &p, true, group);
                }
                let Some(free) = inst.counted.iter_mut().find(|c| c.is_none()) else {
                    return self.ack(from, &p, false, group);
                };
                *free = Some(group);
                self.cbfs[i].increment(group);
                self.ack(from, &p, true, group)
            }
            Body::GroupComplete { group } if group < inst.geometry.groups() => {
                match inst.mode {
                    RouterMode::Filters => {
                        match inst.counted.iter_mut().find(|c| **c == Some(group)) {
                            Some(c) => {
                                *c = None;
                                inst.completed[inst.completed_next] = Some(group);
                                inst.completed_next =
                                    (inst.completed_next + 1) % GROUPS_INFLIGHT_MAX;
                                self.bfs[i].insert(group);
                                self.cbfs[i].decrement(group);
                            }
                            // Completed before: ack again, change nothing.
                            None if self.bfs[i].contains(group) => {
                                self.stats.control_duplicates += 1;
                            }
                            // Never counted: a stray COMPLETE is refused rather than corrupting
                            // the CBF.
                            None => return self.ack(from, &p, false, group),
                        }
                    }
                    // Fulva: the exact set of completed groups, in any order.
                    RouterMode::ClientTracked => {
                        self.tracked[i][group as usize / 64] |= 1 << (group % 64);
                    }
                    _ => {}
                }
                self.ack(from, &p, true, group)
            }
            Body::Terminate => {
                let (shard, dst) = (inst.shard, inst.dst);
                self.slots[i] = None;
                // Full redirect table: the instance is gone, the shard keeps its old home; the
                // source then forwards (it remembers where the shard went).
                let ok = self.redirect(shard, dst);
                self.ack(from, &p, ok, 0)
            }
            Body::Abort => {
                self.slots[i] = None;
                self.ack(from, &p, true, 0)
            }
            _ => self.ack(from, &p, false, 0),
        }
    }

    /// Presets for NetMigrate's policy knobs (4.4): all BF bits set makes every group S3
    /// (Rocksteady-like), all CBF counters at 1 makes every group S2/S4 (Fulva-like).
    pub fn preset(&mut self, shard: ShardId, all_migrated: bool, all_pending: bool) -> bool {
        let Some(i) = self.slot_of(shard) else {
            return false;
        };
        if all_migrated {
            self.bfs[i].fill();
        }
        if all_pending {
            self.cbfs[i].fill_one();
        }
        true
    }
}

#[cfg(test)]
mod tests;
