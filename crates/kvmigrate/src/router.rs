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
}

impl Default for RouterConfig {
    fn default() -> Self {
        Self {
            id: 0,
            instances_max: 8,
            bf_bytes: 512 << 10,
            cbf_bytes: 1024 << 10,
            redirects_max: 256,
        }
    }
}

/// A group's state as the filters report it (Fig. 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupState {
    /// S1: not started.
    NotStarted,
    /// S2: under migration.
    Migrating,
    /// S3: migrated.
    Migrated,
    /// S4: both filters positive, a false positive.
    Conflict,
}

/// Where one query goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// To the source only.
    Source,
    /// To the destination only (it pulls what it lacks).
    Destination,
    /// A read to both; the client keeps the newer reply.
    DoubleRead,
}

/// S1..S4 from the two look-ups.
pub fn classify(bf: bool, cbf: bool) -> GroupState {
    match (bf, cbf) {
        (false, false) => GroupState::NotStarted,
        (false, true) => GroupState::Migrating,
        (true, false) => GroupState::Migrated,
        (true, true) => GroupState::Conflict,
    }
}

/// The routing decision of Fig. 3 (pure).
pub fn decide(state: GroupState, is_write: bool) -> Route {
    match (state, is_write) {
        (GroupState::NotStarted, _) => Route::Source,
        (GroupState::Migrated, _) => Route::Destination,
        (GroupState::Migrating | GroupState::Conflict, true) => Route::Destination,
        (GroupState::Migrating | GroupState::Conflict, false) => Route::DoubleRead,
    }
}

#[derive(Clone, Debug)]
struct Instance {
    shard: ShardId,
    src: NodeId,
    dst: NodeId,
    mode: RouterMode,
    geometry: Geometry,
    completed_prefix: u32,
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
}

/// The router state: instance table, filters, redirects, counters.
pub struct Router {
    cfg: RouterConfig,
    slots: Vec<Option<Instance>>,
    bfs: Vec<BloomFilter>,
    cbfs: Vec<CountingBloomFilter>,
    redirects: Vec<Option<(ShardId, NodeId)>>,
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
            .collect::<Result<_>>()?;
        let cbfs = (0..cfg.instances_max)
            .map(|_| CountingBloomFilter::new(cfg.cbf_bytes))
            .collect::<Result<_>>()?;
        Ok(Self {
            slots: vec![None; cfg.instances_max],
            redirects: vec![None; cfg.redirects_max],
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
            | Body::Abort => self.control(p),
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
                if g < inst.completed_prefix || is_write {
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

    fn control(&mut self, p: Packet) -> Vec<(NodeId, Packet)> {
        let from = p.from;
        if let Body::Register {
            src,
            dst,
            mode,
            geometry,
        } = p.body
        {
            let ok = src == from && self.slot_of(p.shard).is_none();
            let free = self.slots.iter().position(Option::is_none);
            let (Some(i), true) = (free, ok) else {
                return self.ack(from, &p, false, 0);
            };
            self.bfs[i].clear();
            self.cbfs[i].clear();
            self.slots[i] = Some(Instance {
                shard: p.shard,
                src,
                dst,
                mode,
                geometry,
                completed_prefix: 0,
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
                if inst.mode == RouterMode::Filters {
                    self.cbfs[i].increment(group);
                }
                self.ack(from, &p, true, group)
            }
            Body::GroupComplete { group } if group < inst.geometry.groups() => {
                match inst.mode {
                    // A zero counter proves the group never started (no false negatives):
                    // a duplicate or stray COMPLETE is refused rather than corrupting the CBF.
                    RouterMode::Filters if !self.cbfs[i].contains(group) => {
                        return self.ack(from, &p, false, group)
                    }
                    RouterMode::Filters => {
                        self.bfs[i].insert(group);
                        self.cbfs[i].decrement(group);
                    }
                    // Fulva's progress is a prefix; the source completes groups in order.
                    RouterMode::ClientTracked if group == inst.completed_prefix => {
                        inst.completed_prefix += 1;
                    }
                    RouterMode::ClientTracked => return self.ack(from, &p, false, group),
                    _ => {}
                }
                self.ack(from, &p, true, group)
            }
            Body::Terminate => {
                let (shard, dst) = (inst.shard, inst.dst);
                self.slots[i] = None;
                let slot = self
                    .redirects
                    .iter()
                    .position(|r| r.is_some_and(|(s, _)| s == shard))
                    .or_else(|| self.redirects.iter().position(Option::is_none));
                match slot {
                    Some(r) => {
                        self.redirects[r] = Some((shard, dst));
                        self.ack(from, &p, true, 0)
                    }
                    // Full redirect table: the instance is gone, the shard keeps its old home;
                    // the source then forwards (it remembers where the shard went).
                    None => self.ack(from, &p, false, 0),
                }
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
mod tests {
    use super::*;
    use crate::wire::{op, FLAG_DOUBLE};

    const SRC: NodeId = 1;
    const DST: NodeId = 2;
    const CLIENT: NodeId = 100;

    fn router(bf: usize, cbf: usize) -> Router {
        Router::new(RouterConfig {
            bf_bytes: bf,
            cbf_bytes: cbf,
            ..RouterConfig::default()
        })
        .unwrap()
    }

    fn ctl(body: Body) -> Packet {
        Packet {
            from: SRC,
            shard: SRC,
            seq: 0,
            flags: 0,
            body,
        }
    }

    fn query(body: Body) -> Packet {
        Packet {
            from: CLIENT,
            shard: SRC,
            seq: 1,
            flags: 0,
            body,
        }
    }

    fn register(r: &mut Router, mode: RouterMode) -> Geometry {
        let geometry = Geometry::new(8, 2).unwrap();
        let out = r.on_packet(ctl(Body::Register {
            src: SRC,
            dst: DST,
            mode,
            geometry,
        }));
        assert!(matches!(out[0].1.body, Body::ControlAck { ok: true, .. }));
        geometry
    }

    fn key_in(geo: Geometry, group: u32) -> u64 {
        (0..).find(|&k| geo.group_of(k) == group).unwrap()
    }

    fn targets(out: &[(NodeId, Packet)]) -> Vec<NodeId> {
        out.iter().map(|(n, _)| *n).collect()
    }

    #[test]
    fn decision_table_matches_fig3() {
        use GroupState::*;
        assert_eq!(decide(NotStarted, false), Route::Source);
        assert_eq!(decide(NotStarted, true), Route::Source);
        assert_eq!(decide(Migrating, false), Route::DoubleRead);
        assert_eq!(decide(Migrating, true), Route::Destination);
        assert_eq!(decide(Migrated, false), Route::Destination);
        assert_eq!(decide(Migrated, true), Route::Destination);
        assert_eq!(decide(Conflict, false), Route::DoubleRead);
        assert_eq!(decide(Conflict, true), Route::Destination);
        assert_eq!(classify(true, true), Conflict);
    }

    #[test]
    fn group_walks_s1_s2_s3() {
        let mut r = router(4096, 4096);
        let geo = register(&mut r, RouterMode::Filters);
        let k = key_in(geo, 5);
        let get = query(Body::Get { key: k });
        assert_eq!(targets(&r.on_packet(get.clone())), vec![SRC]);
        r.on_packet(ctl(Body::GroupStart { group: 5 }));
        let out = r.on_packet(get.clone());
        assert_eq!(targets(&out), vec![SRC, DST]);
        assert!(out.iter().all(|(_, p)| p.flags & FLAG_DOUBLE != 0));
        r.on_packet(ctl(Body::GroupComplete { group: 5 }));
        assert_eq!(targets(&r.on_packet(get)), vec![DST]);
        assert_eq!(r.lookup(SRC, k), Some(GroupState::Migrated));
        // Termination drops the instance and redirects the shard.
        r.on_packet(ctl(Body::Terminate));
        assert!(r.instances().is_empty());
        assert_eq!(
            targets(&r.on_packet(query(Body::Delete { key: k }))),
            vec![DST]
        );
    }

    #[test]
    fn sticky_write_keeps_a_false_positive_group_off_source_only_reads() {
        // One CBF counter: every group collides.
        let mut r = router(4096, 1);
        let geo = register(&mut r, RouterMode::Filters);
        let (a, b) = (key_in(geo, 1), key_in(geo, 2));
        r.on_packet(ctl(Body::GroupStart { group: 1 }));
        assert_eq!(
            r.lookup(SRC, b),
            Some(GroupState::Migrating),
            "CBF false positive"
        );
        let out = r.on_packet(query(Body::Set {
            key: b,
            value: vec![1],
        }));
        assert_eq!(targets(&out), vec![DST]);
        r.on_packet(ctl(Body::GroupComplete { group: 1 }));
        // Group 2 never started, but a write of it went to the destination.
        assert_ne!(r.lookup(SRC, b), Some(GroupState::NotStarted));
        assert_eq!(
            targets(&r.on_packet(query(Body::Get { key: b }))),
            vec![DST]
        );
        assert_eq!(
            targets(&r.on_packet(query(Body::Get { key: a }))),
            vec![DST]
        );
        assert_eq!(r.stats().sticky_writes, 1);
    }

    #[test]
    fn several_instances_are_independent_and_bounded() {
        let mut r = Router::new(RouterConfig {
            instances_max: 2,
            bf_bytes: 64,
            cbf_bytes: 64,
            ..RouterConfig::default()
        })
        .unwrap();
        let geometry = Geometry::new(6, 1).unwrap();
        for (src, ok) in [(1u16, true), (3, true), (5, false)] {
            let out = r.on_packet(Packet {
                from: src,
                shard: src,
                seq: 0,
                flags: 0,
                body: Body::Register {
                    src,
                    dst: src + 1,
                    mode: RouterMode::DestinationFirst,
                    geometry,
                },
            });
            assert!(matches!(out[0].1.body, Body::ControlAck { ok: o, .. } if o == ok));
        }
        let to = |r: &mut Router, shard: u16| {
            targets(&r.on_packet(Packet {
                from: CLIENT,
                shard,
                seq: 0,
                flags: 0,
                body: Body::Get { key: 9 },
            }))
        };
        assert_eq!(to(&mut r, 1), vec![2]);
        assert_eq!(to(&mut r, 3), vec![4]);
        assert_eq!(to(&mut r, 5), vec![5]);
    }

    #[test]
    fn control_from_a_stranger_or_for_no_instance_is_refused() {
        let mut r = router(64, 64);
        let out = r.on_packet(ctl(Body::GroupStart { group: 0 }));
        assert!(matches!(out[0].1.body, Body::ControlAck { ok: false, .. }));
        register(&mut r, RouterMode::Filters);
        let mut p = ctl(Body::GroupStart { group: 0 });
        p.from = 77;
        let out = r.on_packet(p);
        assert_eq!(out[0].0, 77);
        assert!(matches!(out[0].1.body, Body::ControlAck { ok: false, .. }));
        let out = r.on_packet(ctl(Body::GroupStart { group: 1 << 20 }));
        assert!(matches!(out[0].1.body, Body::ControlAck { ok: false, .. }));
        assert_eq!(r.stats().controls_refused, 3);
    }

    #[test]
    fn random_packets_never_panic_the_router() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(11);
        let mut r = router(8, 2);
        let geometry = Geometry::new(6, 1).unwrap();
        for _ in 0..20_000 {
            let from = rng.gen_range(0..4);
            let shard = rng.gen_range(0..4);
            let group = rng.gen_range(0..40);
            let body = match rng.gen_range(0..9) {
                0 => Body::Get { key: rng.gen() },
                1 => Body::Set {
                    key: rng.gen(),
                    value: vec![1],
                },
                2 => Body::Delete { key: rng.gen() },
                3 => Body::Register {
                    src: rng.gen_range(0..4),
                    dst: rng.gen_range(0..4),
                    mode: [RouterMode::Filters, RouterMode::ClientTracked][rng.gen_range(0..2)],
                    geometry,
                },
                4 => Body::GroupStart { group },
                5 => Body::GroupComplete { group },
                6 => Body::Terminate,
                7 => Body::Abort,
                _ => Body::DataAck { batch: 0 },
            };
            r.on_packet(Packet {
                from,
                shard,
                seq: 0,
                flags: 0,
                body,
            });
        }
        assert!(r.stats().controls_refused > 0);
        assert!(r.stats().unexpected > 0);
    }

    #[test]
    fn duplicate_group_complete_is_refused() {
        let mut r = router(64, 64);
        register(&mut r, RouterMode::Filters);
        r.on_packet(ctl(Body::GroupStart { group: 2 }));
        let ok = r.on_packet(ctl(Body::GroupComplete { group: 2 }));
        assert!(matches!(ok[0].1.body, Body::ControlAck { ok: true, .. }));
        let dup = r.on_packet(ctl(Body::GroupComplete { group: 2 }));
        assert!(matches!(dup[0].1.body, Body::ControlAck { ok: false, .. }));
    }

    #[test]
    fn malformed_datagrams_are_counted_and_dropped() {
        let mut r = router(64, 64);
        assert!(r.on_datagram(&[1, 2, 3]).is_empty());
        assert!(r.on_datagram(&[]).is_empty());
        let mut buf = Vec::new();
        query(Body::Get { key: 1 }).encode(&mut buf).unwrap();
        buf[3] = 200;
        assert!(r.on_datagram(&buf).is_empty());
        assert_eq!(r.stats().malformed, 3);
        buf[3] = op::GET;
        assert_eq!(targets(&r.on_datagram(&buf)), vec![SRC]);
    }

    #[test]
    fn fulva_prefix_and_rocksteady_modes() {
        let mut r = router(64, 64);
        let geo = register(&mut r, RouterMode::ClientTracked);
        let k0 = key_in(geo, 0);
        let k1 = key_in(geo, 1);
        assert_eq!(
            targets(&r.on_packet(query(Body::Get { key: k0 }))),
            vec![SRC, DST]
        );
        assert_eq!(
            targets(&r.on_packet(query(Body::Delete { key: k1 }))),
            vec![DST]
        );
        r.on_packet(ctl(Body::GroupComplete { group: 0 }));
        assert_eq!(
            targets(&r.on_packet(query(Body::Get { key: k0 }))),
            vec![DST]
        );
        // Out-of-order completion is refused in this mode.
        let out = r.on_packet(ctl(Body::GroupComplete { group: 3 }));
        assert!(matches!(out[0].1.body, Body::ControlAck { ok: false, .. }));
    }
}
