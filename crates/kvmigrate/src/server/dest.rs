//! The destination agent of a [`Server`]: queries on a shard migrating in
//! (local hits, PriorityPulls and parked reads, mirrored writes) and its abort.

use super::{key_of, Role, Server, Shard};
use crate::table::ShardStore;
use crate::wire::{
    Body, Item, Key, NodeId, Packet, Protocol, ShardId, Status, FLAG_DOUBLE, FLAG_FROM_DEST,
    FLAG_PULLED,
};

impl<S: ShardStore> Server<S> {
    pub(super) fn dest_query(&mut self, q: Packet) {
        let shard = q.shard;
        let key = key_of(&q.body);
        let parked_max = self.cfg.parked_reads_max;
        let mirror = self.cfg.mirror_writes;
        let Some(s) = self.shards.get_mut(&shard) else {
            return;
        };
        let Role::Dest(d) = &mut s.role else {
            unreachable!("dest_query on a non-destination shard")
        };
        self.stats.queries += 1;
        if d.fenced {
            self.stats.refused += 1;
            self.reply(&q, Status::Error, 0, vec![], FLAG_FROM_DEST);
            return;
        }
        match &q.body {
            Body::Get { .. } => {
                if d.pending_keys.contains_key(&key) {
                    // A mirrored write of this key is in flight: answer once it is settled.
                    if d.parked_count >= parked_max {
                        self.stats.refused += 1;
                        self.reply(&q, Status::Error, 0, vec![], FLAG_FROM_DEST);
                        return;
                    }
                    d.parked_count += 1;
                    d.parked.entry(key).or_default().push(q);
                    return;
                }
                let need_pull = !d.owned
                    && q.flags & FLAG_DOUBLE == 0
                    && !d.group_done(key)
                    && !matches!(d.protocol, Protocol::SourceBased | Protocol::StopAndCopy);
                let item = s.table.get(key);
                // A NetMigrate copy is pipelined behind its GROUP-START and may overtake it, so
                // a read routed here alone before GROUP-DONE (a BF false positive while the
                // router has not counted the START) may find a copy older than a late write
                // still at the source: it pulls past the copy ("Ordering" in `server`).
                let copy_unconfirmed = need_pull && d.protocol == Protocol::NetMigrate;
                match item {
                    Some(item) if !copy_unconfirmed => {
                        self.reply_item(&q, Some(item), FLAG_FROM_DEST);
                        return;
                    }
                    Some(_) => self.stats.copy_pulls += 1,
                    None if !need_pull => {
                        self.reply_item(&q, None, FLAG_FROM_DEST);
                        return;
                    }
                    None => {}
                }
                // S3 false positive, an unconfirmed copy, or Rocksteady: PriorityPull from the
                // source (NetMigrate 4.3), installed if newer, then the newer of the two answers.
                if d.parked_count >= parked_max {
                    self.stats.refused += 1;
                    self.reply(&q, Status::Error, 0, vec![], FLAG_FROM_DEST);
                    return;
                }
                d.parked_count += 1;
                let first = !d.parked.contains_key(&key);
                d.parked.entry(key).or_default().push(q);
                if first {
                    let src = d.src;
                    self.stats.pulls += 1;
                    self.send_reliable(src, shard, 0, Body::Pull { key });
                    if let Some((_, p)) = self.out.last() {
                        self.stats.extra_bytes += p.encoded_len() as u64;
                    }
                }
            }
            Body::Set { .. } | Body::Delete { .. } => {
                let value = match &q.body {
                    Body::Set { value, .. } => Some(value.clone()),
                    _ => None,
                };
                self.seq += 1;
                let candidate = ((self.era as u64) << 48) | self.seq;
                let version = s.table.put_next(key, candidate, value.clone());
                let item = Item {
                    key,
                    version,
                    value,
                };
                if mirror && !d.owned {
                    *d.pending_keys.entry(key).or_default() += 1;
                    let src = d.src;
                    self.stats.mirrored += 1;
                    // The mirror's sequence number is the token its ack brings back.
                    let token = self.send_reliable(src, shard, 0, Body::Mirror { item });
                    if let Some((_, p)) = self.out.last() {
                        self.stats.extra_bytes += p.encoded_len() as u64;
                    }
                    if let Some(Role::Dest(d)) = self.shards.get_mut(&shard).map(|s| &mut s.role) {
                        d.pending.insert(token, q);
                    }
                } else {
                    self.reply(&q, Status::Ok, version, vec![], FLAG_FROM_DEST);
                }
            }
            _ => unreachable!("dest_query takes queries only"),
        }
    }

    /// Answers the reads parked on `key` unless a mirrored write of it is still in flight.
    pub(super) fn answer_parked(&mut self, shard: ShardId, key: Key) {
        let Some(s) = self.shards.get_mut(&shard) else {
            return;
        };
        let Role::Dest(d) = &mut s.role else {
            return;
        };
        if d.pending_keys.contains_key(&key) {
            return;
        }
        let Some(reads) = d.parked.remove(&key) else {
            return;
        };
        d.parked_count -= reads.len();
        let item = s.table.get(key);
        for q in reads {
            self.reply_item(&q, item.clone(), FLAG_FROM_DEST | FLAG_PULLED);
        }
    }

    /// The shard migrating in from `from`, noting that the source spoke. An orphaned shard
    /// (the router confirmed its source dead) takes nothing more from that source.
    pub(super) fn dest_shard(&mut self, shard: ShardId, from: NodeId) -> Option<&mut Shard<S>> {
        let now = self.now_us;
        match self.shards.get_mut(&shard) {
            Some(s)
                if matches!(&s.role, Role::Dest(d) if d.src == from
                && !d.source_lost.as_ref().is_some_and(|l| l.orphaned)) =>
            {
                if let Role::Dest(d) = &mut s.role {
                    d.heard_us = now;
                }
                Some(s)
            }
            _ => {
                self.stats.dropped += 1;
                None
            }
        }
    }
}
