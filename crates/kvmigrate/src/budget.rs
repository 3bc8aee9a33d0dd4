//! A server's CPU budget for client queries (NetMigrate 4.4's policy knob) and the inbox
//! scheduler that enforces it, without I/O: [`Inbox`] takes the packets a node receives and
//! hands back the ones it may handle now.
//!
//! The budget limits the share of each interval a source spends *serving client queries*, so
//! that the rest goes to migration (4.4: "limit CPU usage to serve client queries ... and leave
//! more CPU headroom for migration"). Only queries are charged. Everything else is migration or
//! control work and must not wait for query budget, or a low budget would throttle the copy
//! itself (the source's window only moves when it handles its acks). Packets fall in three
//! classes ([`Admission`]):
//!
//! ```text
//!   Query    GET/SET/DELETE                 charged; wait for budget, in arrival order
//!   Ordered  router acks, Pull, Mirror,     not charged; handled at once unless packets
//!            Data, control from peers       wait, then right behind the queries that
//!                                           arrived before them (but see "Control acks")
//!   Bypass   DataAck, InitAck, MirrorAck,   not charged; handled at once, ahead of waiting
//!            PullReply                      queries
//! ```
//!
//! Why `Ordered` keeps its place: the router forwards a query before it handles a later control
//! packet and acks into the same inbox, and the source relies on that (the GROUP-START ack
//! finalises a group's late writes, see `server`). A Pull or Mirror from the destination was
//! caused by queries the router routed after the ones already waiting here, so it must not
//! overtake them either. `Bypass` packets answer requests this node made about data it sent or
//! asked for; their effect does not depend on any query that arrived before them.
//!
//! # Control acks
//! The router's GROUP-START and GROUP-COMPLETE acks come once per group, and the source keeps at
//! most `groups_inflight_max` groups copying and `completing_max` awaiting their COMPLETE ack,
//! so an ack that waits for budget stalls the copy: each
//! group would wait up to a budget interval behind the queries ahead of it, and a lower budget
//! would make the migration *longer* (issue 16's results: NetMigrate-short slower than -long).
//! So control acks wait only for what they depend on:
//! - GROUP-START of group `g` proves that every write of `g` the router sent the source is
//!   applied (K1). Writes of other groups and reads change nothing it proves, so it overtakes
//!   waiting queries unless a write (SET or DELETE) of `g` in that shard is among them.
//! - GROUP-COMPLETE only frees the group's slot. Every write of `g` routed to the source came
//!   before its START (after START the router sends them to the destination), and the source
//!   sends COMPLETE only after the START ack was handled behind them. So it overtakes waiting
//!   queries. So do REGISTER (writes still waiting are applied before their group's scan, or
//!   become its late writes or dirty keys), TERMINATE and ABORT acks (the source does nothing
//!   on them), and the destination's FINISH ack: the source hands the shard over, and every
//!   query handled after that is forwarded to the destination, which owns the shard, as the
//!   queries it held while frozen are.
//!
//! An ack that may pass still waits behind any other non-query packet waiting, so such packets
//! keep their order among themselves.
//!
//! The backlog is bounded ([`INBOX_BACKLOG_MAX`]): when it is full the node stops receiving, and
//! later packets wait in the transport (still in order).

use std::collections::VecDeque;

use crate::error::{Error, Result};
use crate::wire::{op, Body, Key, NodeId, Packet, ShardId};

/// Packets a throttled server keeps waiting behind its query budget before it stops receiving.
pub const INBOX_BACKLOG_MAX: usize = 1 << 16;

/// A server's CPU budget (NetMigrate 4.4's policy knob).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuBudget {
    /// Accounting interval.
    pub interval_us: u64,
    /// Share of each interval the server may spend serving client queries (1..=100).
    pub query_pct: u8,
}

impl Default for CpuBudget {
    fn default() -> Self {
        Self {
            interval_us: 1000,
            query_pct: 100,
        }
    }
}

impl CpuBudget {
    /// Checks the budget given for `server`.
    pub fn check(&self, server: NodeId) -> Result<()> {
        if self.query_pct == 0 || self.query_pct > 100 || self.interval_us == 0 {
            return Err(Error::InvalidBudget {
                server,
                query_pct: self.query_pct,
                interval_us: self.interval_us,
            });
        }
        Ok(())
    }
}

/// Enforces a [`CpuBudget`] from observed query handling times (pure; the node feeds it).
#[derive(Clone, Debug)]
pub struct BudgetMeter {
    budget: CpuBudget,
    allowance_ns: u64,
    interval_start_us: u64,
    used_ns: u64,
}

impl BudgetMeter {
    /// A meter whose first interval starts at `now_us`.
    pub fn new(budget: CpuBudget, now_us: u64) -> Self {
        Self {
            budget,
            allowance_ns: budget.interval_us * 1000 * budget.query_pct.min(100) as u64 / 100,
            interval_start_us: now_us,
            used_ns: 0,
        }
    }

    /// Whether a query may be served at `now_us` (starts a new interval when one is over).
    pub fn may_serve(&mut self, now_us: u64) -> bool {
        if now_us >= self.interval_start_us + self.budget.interval_us {
            self.interval_start_us = now_us;
            self.used_ns = 0;
        }
        self.budget.query_pct >= 100 || self.used_ns < self.allowance_ns
    }

    /// Charges query handling time to the current interval.
    pub fn charge(&mut self, ns: u64) {
        self.used_ns += ns;
    }

    /// Nanoseconds charged in the current interval.
    pub fn used_ns(&self) -> u64 {
        self.used_ns
    }

    /// Microseconds left in the current interval.
    pub fn interval_left_us(&self, now_us: u64) -> u64 {
        (self.interval_start_us + self.budget.interval_us).saturating_sub(now_us)
    }
}

/// NetMigrate's migration policies (4.4), as source budgets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Shortest migration (Rocksteady-like time): the source serves queries 40% of the time.
    MinimizeTime,
    /// The medium setting: 70%.
    Medium,
    /// Best query throughput: the source serves queries whenever it has any (100%).
    MaximizeThroughput,
}

impl Policy {
    /// The source budget of this policy.
    pub fn source_budget(self) -> CpuBudget {
        let query_pct = match self {
            Policy::MinimizeTime => 40,
            Policy::Medium => 70,
            Policy::MaximizeThroughput => 100,
        };
        CpuBudget {
            query_pct,
            ..CpuBudget::default()
        }
    }
}

/// How a packet reaching a server is scheduled under its budget (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// A client query: charged, waits for budget.
    Query,
    /// Control or migration traffic that keeps its place behind waiting queries.
    Ordered,
    /// An answer to this node's own migration traffic: handled at once.
    Bypass,
}

impl Admission {
    /// The class of `body`.
    pub fn of(body: &Body) -> Self {
        match body {
            b if b.is_query() => Admission::Query,
            Body::DataAck { .. }
            | Body::InitAck { .. }
            | Body::MirrorAck { .. }
            | Body::PullReply { .. } => Admission::Bypass,
            _ => Admission::Ordered,
        }
    }
}

/// The packets a node may handle now, in the order the budget and the protocol allow.
#[derive(Clone, Debug)]
pub struct Inbox {
    meter: BudgetMeter,
    backlog: VecDeque<Packet>,
    backlog_max: usize,
}

impl Inbox {
    /// An empty inbox under `budget`, its first interval starting at `now_us`.
    pub fn new(budget: CpuBudget, now_us: u64) -> Self {
        Self::with_backlog_max(budget, now_us, INBOX_BACKLOG_MAX)
    }

    /// [`Inbox::new`] with another backlog bound (at least 1).
    pub fn with_backlog_max(budget: CpuBudget, now_us: u64, backlog_max: usize) -> Self {
        Self {
            meter: BudgetMeter::new(budget, now_us),
            backlog: VecDeque::new(),
            backlog_max: backlog_max.max(1),
        }
    }

    /// Whether the node should take more packets from its transport.
    pub fn accepts(&self) -> bool {
        self.backlog.len() < self.backlog_max
    }

    /// Packets waiting.
    pub fn backlog_len(&self) -> usize {
        self.backlog.len()
    }

    /// A received packet: handed back when it may be handled now, otherwise kept in order.
    /// `group_of` gives the migration group of a key of a shard (`None`: unknown, which keeps
    /// a group ack behind a write of that key).
    pub fn offer(
        &mut self,
        now_us: u64,
        p: Packet,
        group_of: impl Fn(ShardId, Key) -> Option<u32>,
    ) -> Option<Packet> {
        let now = match Admission::of(&p.body) {
            Admission::Bypass => true,
            Admission::Ordered => self.backlog.is_empty() || self.group_ack_may_pass(&p, group_of),
            Admission::Query => self.backlog.is_empty() && self.meter.may_serve(now_us),
        };
        if now {
            return Some(p);
        }
        debug_assert!(self.accepts(), "offer past the backlog bound");
        self.backlog.push_back(p);
        None
    }

    /// Whether a control ack may pass every waiting packet ("Control acks" in the module doc):
    /// only queries wait, and for GROUP-START none of them writes its group.
    fn group_ack_may_pass(
        &self,
        p: &Packet,
        group_of: impl Fn(ShardId, Key) -> Option<u32>,
    ) -> bool {
        let start = match p.body {
            Body::ControlAck {
                op: op::GROUP_START,
                group,
                ..
            } => Some(group),
            Body::ControlAck { .. } => None,
            _ => return false,
        };
        self.backlog.iter().all(|q| match (&q.body, start) {
            (Body::Get { .. }, _) => true,
            (Body::Set { key, .. } | Body::Delete { key }, Some(g)) => {
                q.shard != p.shard || group_of(q.shard, *key).is_some_and(|qg| qg != g)
            }
            (Body::Set { .. } | Body::Delete { .. }, None) => true,
            _ => false,
        })
    }

    /// The oldest waiting packet if it may be handled now: a control packet always, a query
    /// when the budget allows.
    pub fn next(&mut self, now_us: u64) -> Option<Packet> {
        let front = self.backlog.front()?;
        if front.body.is_query() && !self.meter.may_serve(now_us) {
            return None;
        }
        self.backlog.pop_front()
    }

    /// Whether a query waits for budget at the head of the backlog.
    pub fn throttled(&self) -> bool {
        self.backlog.front().is_some_and(|p| p.body.is_query())
    }

    /// Charges the time spent handling a query.
    pub fn charge(&mut self, ns: u64) {
        self.meter.charge(ns);
    }

    /// Microseconds until the budget's current interval ends.
    pub fn interval_left_us(&self, now_us: u64) -> u64 {
        self.meter.interval_left_us(now_us)
    }

    /// Nanoseconds of query handling charged in the current interval.
    pub fn used_ns(&self) -> u64 {
        self.meter.used_ns()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Item;

    /// Groups of 16 keys, as a geometry of 2^4 keys per group would have them.
    fn group_of(_shard: ShardId, key: Key) -> Option<u32> {
        Some((key / 16) as u32)
    }

    #[test]
    fn budget_meter_enforces_the_share_per_interval() {
        let mut m = BudgetMeter::new(Policy::MinimizeTime.source_budget(), 0);
        assert!(m.may_serve(0));
        m.charge(399_000);
        assert!(m.may_serve(10), "399 us of 400 us used");
        m.charge(2_000);
        assert!(!m.may_serve(500), "40% of 1 ms spent");
        assert_eq!(m.interval_left_us(500), 500);
        assert!(m.may_serve(1000), "a new interval starts");
        let mut full = BudgetMeter::new(Policy::MaximizeThroughput.source_budget(), 0);
        full.charge(10_000_000);
        assert!(full.may_serve(1));
        assert_eq!(Policy::Medium.source_budget().query_pct, 70);
    }

    fn pkt(seq: u32, body: Body) -> Packet {
        Packet {
            from: 0,
            shard: 1,
            seq,
            flags: 0,
            body,
        }
    }

    fn offer(i: &mut Inbox, now_us: u64, p: Packet) -> Option<Packet> {
        i.offer(now_us, p, group_of)
    }

    fn get(seq: u32) -> Packet {
        pkt(seq, Body::Get { key: 1 })
    }

    fn pull(seq: u32) -> Packet {
        pkt(seq, Body::Pull { key: 1 })
    }

    fn group_ack(seq: u32, o: u8, group: u32) -> Packet {
        pkt(
            seq,
            Body::ControlAck {
                op: o,
                ok: true,
                group,
            },
        )
    }

    fn set(seq: u32, key: Key) -> Packet {
        pkt(
            seq,
            Body::Set {
                key,
                value: vec![1],
            },
        )
    }

    #[test]
    fn group_acks_pass_waiting_queries_they_do_not_depend_on() {
        let mut i = spent();
        assert!(
            offer(&mut i, 10, get(2)).is_none(),
            "no budget: the read waits"
        );
        assert!(
            offer(&mut i, 10, set(3, 40)).is_none(),
            "a write of group 2 waits"
        );
        // A GROUP-START ack of group 1: only a read and a write of group 2 are ahead of it.
        let start1 = offer(&mut i, 11, group_ack(4, op::GROUP_START, 1));
        assert_eq!(start1.map(|p| p.seq), Some(4), "passes at once");
        // A GROUP-START ack of group 2 proves the write of key 40 applied: it waits behind it.
        assert!(offer(&mut i, 12, group_ack(5, op::GROUP_START, 2)).is_none());
        // The same write in another shard is no dependency.
        let mut other = group_ack(6, op::GROUP_START, 2);
        other.shard = 9;
        assert!(
            offer(&mut i, 12, other).is_none(),
            "a control packet waits ahead of it"
        );
        assert_eq!(i.backlog_len(), 4);
        assert_eq!(
            i.next(13).map(|p| p.seq),
            None,
            "the read still has no budget"
        );
        assert_eq!(i.next(1000).map(|p| p.seq), Some(2));
        assert_eq!(i.next(1000).map(|p| p.seq), Some(3), "the write of group 2");
        assert_eq!(
            i.next(1000).map(|p| p.seq),
            Some(5),
            "then the START ack of group 2"
        );
        assert_eq!(i.next(1000).map(|p| p.seq), Some(6));

        // GROUP-COMPLETE passes waiting reads and writes, but no other control packet.
        let mut i = spent();
        assert!(offer(&mut i, 10, set(2, 40)).is_none());
        let complete = offer(&mut i, 11, group_ack(3, op::GROUP_COMPLETE, 2));
        assert_eq!(complete.map(|p| p.seq), Some(3));
        let mut other_shard = set(4, 40);
        other_shard.shard = 9;
        assert!(offer(&mut i, 11, other_shard).is_none());
        let mut start = group_ack(5, op::GROUP_START, 2);
        start.shard = 9;
        assert!(
            offer(&mut i, 12, start).is_none(),
            "a write of group 2 in shard 9 is ahead"
        );
        assert!(
            offer(&mut i, 13, group_ack(6, op::GROUP_COMPLETE, 3)).is_none(),
            "behind it"
        );
        // Other control acks pass waiting writes too; pulls and mirrors keep their place.
        for o in [op::REGISTER, op::TERMINATE, op::ABORT, op::FINISH] {
            let mut r = spent();
            assert!(offer(&mut r, 10, set(2, 40)).is_none());
            assert!(offer(&mut r, 11, group_ack(3, o, 0)).is_some(), "op {o}");
        }
        let mut k = spent();
        assert!(offer(&mut k, 10, get(2)).is_none());
        assert!(offer(&mut k, 11, pull(3)).is_none());
    }

    /// An inbox whose 40% of its first 1 ms is spent.
    fn spent() -> Inbox {
        let mut i = Inbox::new(Policy::MinimizeTime.source_budget(), 0);
        assert!(offer(&mut i, 0, get(1)).is_some());
        i.charge(400_000);
        i
    }

    #[test]
    fn only_queries_wait_for_budget_and_acks_of_the_copy_bypass_them() {
        let mut i = spent();
        assert!(
            offer(&mut i, 10, get(2)).is_none(),
            "no budget: the query waits"
        );
        assert!(i.throttled());
        for body in [
            Body::DataAck { batch: 3 },
            Body::InitAck {
                ok: true,
                buckets_log2_max: 20,
            },
            Body::MirrorAck { ok: true },
            Body::PullReply {
                item: Item {
                    key: 1,
                    version: 1,
                    value: None,
                },
            },
        ] {
            assert!(
                offer(&mut i, 20, pkt(9, body)).is_some(),
                "acks of the copy are handled at once"
            );
        }
        assert_eq!(i.used_ns(), 400_000, "handling them charged nothing");
        assert_eq!(i.next(30).map(|p| p.seq), None);
        assert_eq!(i.next(1000).map(|p| p.seq), Some(2), "next interval");
    }

    #[test]
    fn a_pull_stays_behind_the_queries_that_arrived_before_it() {
        let mut i = spent();
        assert!(offer(&mut i, 10, get(2)).is_none());
        assert!(offer(&mut i, 11, pull(3)).is_none(), "behind query 2");
        assert!(offer(&mut i, 12, get(4)).is_none());
        assert_eq!(i.next(20).map(|p| p.seq), None, "query 2 has no budget");
        assert_eq!(i.next(1000).map(|p| p.seq), Some(2));
        i.charge(400_000);
        assert_eq!(
            i.next(1001).map(|p| p.seq),
            Some(3),
            "the pull needs no budget once the queries ahead of it are served"
        );
        assert_eq!(i.next(1002).map(|p| p.seq), None, "query 4 waits again");
        assert_eq!(i.backlog_len(), 1);
        // With nothing waiting, control packets are handled at once and charge nothing.
        let mut fresh = Inbox::new(Policy::MinimizeTime.source_budget(), 0);
        fresh.charge(400_000);
        assert!(offer(&mut fresh, 5, group_ack(7, op::REGISTER, 0)).is_some());
        assert!(offer(&mut fresh, 5, pkt(8, Body::Pull { key: 1 })).is_some());
    }

    #[test]
    fn the_backlog_is_bounded() {
        let mut i = Inbox::with_backlog_max(Policy::MinimizeTime.source_budget(), 0, 2);
        i.charge(400_000);
        assert!(offer(&mut i, 1, get(1)).is_none());
        assert!(i.accepts());
        assert!(offer(&mut i, 1, get(2)).is_none());
        assert!(!i.accepts(), "full: the node stops receiving");
    }
}
