//! Migration traffic reaching a [`Server`]: the dispatch of every agent packet, the
//! destination's answers to its source (each one echoing the sequence number it answers, and
//! idempotent: a packet sent again is answered again and changes nothing twice), and what a
//! server does with a packet given up after its retries (see `reliable`).

use std::collections::BTreeMap;

use super::{key_of, DestAgent, Role, Server, Shard};
use crate::install::Install;
use crate::reliable::Lost;
use crate::table::ShardStore;
use crate::wire::{op, Body, Item, Packet, Status, FLAG_FROM_DEST};

impl<S: ShardStore> Server<S> {
    pub(super) fn on_agent(&mut self, p: Packet) {
        let shard = p.shard;
        match p.body {
            Body::Init {
                era,
                protocol,
                geometry,
            } => {
                let again = matches!(
                    self.shards.get(&shard).map(|s| &s.role),
                    Some(Role::Dest(d)) if d.src == p.from && d.geometry == geometry
                );
                // A shard can come back to a server it left (its old copy was cleaned up).
                let free = match self.shards.get(&shard) {
                    None => true,
                    Some(s) => matches!(s.role, Role::Moved(_)),
                };
                let limit = self.cfg.incoming_buckets_log2_max;
                let fits = geometry.buckets_log2 <= limit;
                if !fits {
                    self.stats.inits_too_large += 1;
                }
                let ok = again || free && fits;
                if ok && !again {
                    self.era = self.era.max(era.saturating_add(1));
                    let groups = geometry.groups() as usize;
                    let table = (self.make_store)(shard, geometry);
                    self.shards.insert(
                        shard,
                        Shard {
                            table,
                            heat: Default::default(),
                            role: Role::Dest(Box::new(DestAgent {
                                src: p.from,
                                protocol,
                                geometry,
                                done: vec![0; groups.div_ceil(64)],
                                owned: false,
                                parked: BTreeMap::new(),
                                parked_count: 0,
                                pending: BTreeMap::new(),
                                pending_keys: BTreeMap::new(),
                                fenced: false,
                                era_in: self.era,
                                heard_us: self.now_us,
                                probing: false,
                                source_lost: None,
                            })),
                        },
                    );
                }
                let body = Body::InitAck {
                    ok,
                    buckets_log2_max: limit,
                };
                self.send(p.from, shard, p.seq, 0, body);
            }
            Body::Data { batch, items, .. } => {
                let ack = Packet {
                    from: self.cfg.id,
                    shard,
                    seq: p.seq,
                    flags: 0,
                    body: Body::DataAck { batch },
                };
                let elsewhere = self.installs_elsewhere;
                let Some(s) = self.dest_shard(shard, p.from) else {
                    return;
                };
                // Install-if-newer: a batch sent again installs nothing twice.
                if elsewhere {
                    // The driver's worker installs it and acks once it is applied (A1).
                    let geometry = s.table.geometry();
                    self.installs.push(Install {
                        shard,
                        geometry,
                        items,
                        to: p.from,
                        ack,
                    });
                } else {
                    s.table.install_batch(items);
                    self.out.push((p.from, ack));
                }
            }
            Body::GroupDone { group } => {
                if let Some(s) = self.dest_shard(shard, p.from) {
                    if let Role::Dest(d) = &mut s.role {
                        let g = group as usize;
                        if g / 64 < d.done.len() {
                            d.done[g / 64] |= 1 << (g % 64);
                        }
                    }
                }
            }
            Body::Finish => {
                let ok = match self.dest_shard(shard, p.from).map(|s| &mut s.role) {
                    Some(Role::Dest(d)) => {
                        d.owned = true;
                        // The source finished: this copy is the shard now, whatever became
                        // of an unanswered mirrored write or a SOURCE-LOST on its way.
                        d.source_lost = None;
                        d.fenced = false;
                        true
                    }
                    _ => false,
                };
                self.control_ack(&p, op::FINISH, ok);
            }
            Body::PullReply { item } => {
                if !self.answered(p.seq, p.from) {
                    return;
                }
                let key = item.key;
                let Some(s) = self.dest_shard(shard, p.from) else {
                    return;
                };
                s.table.install_if_newer(item);
                self.answer_parked(shard, key);
            }
            Body::MirrorAck { ok } => {
                if !self.answered(p.seq, p.from) {
                    return;
                }
                if !ok {
                    // The source is no longer migrating to us (it aborted): nothing here may
                    // be served any more, and this write was not taken.
                    self.dest_drop(shard);
                    return;
                }
                let Some(s) = self.dest_shard(shard, p.from) else {
                    return;
                };
                let Role::Dest(d) = &mut s.role else {
                    return;
                };
                let Some(q) = d.pending.remove(&p.seq) else {
                    self.stats.dropped += 1;
                    return;
                };
                let key = key_of(&q.body);
                if let Some(n) = d.pending_keys.get_mut(&key) {
                    *n -= 1;
                    if *n == 0 {
                        d.pending_keys.remove(&key);
                    }
                }
                let version = s.table.version(key);
                self.reply(&q, Status::Ok, version, vec![], FLAG_FROM_DEST);
                self.answer_parked(shard, key);
            }
            Body::Abort => {
                // Acked whatever this server holds, so that the source stops sending it.
                let known = self.dest_shard(shard, p.from).is_some();
                if known {
                    self.dest_drop(shard);
                }
                self.control_ack(&p, op::ABORT, known);
            }
            Body::Pull { key } => {
                let item = match self.shards.get(&shard) {
                    Some(s) => s.table.get(key),
                    None => None,
                };
                let item = item.unwrap_or(Item {
                    key,
                    version: 0,
                    value: None,
                });
                self.send_extra(p.from, shard, p.seq, 0, Body::PullReply { item });
            }
            Body::Probe => {
                // Still migrating this shard to the prober (or finished moving it there).
                let ok = match self.shards.get(&shard).map(|s| &s.role) {
                    Some(Role::Source(a)) => a.dst == p.from,
                    Some(Role::Moved(to)) => *to == p.from,
                    _ => false,
                };
                self.send(p.from, shard, p.seq, 0, Body::ProbeAck { ok });
            }
            Body::ProbeAck { ok } => {
                if self.answered(p.seq, p.from) {
                    self.on_probe_ack(shard, p.from, ok);
                }
            }
            Body::Mirror { item } => {
                let from = p.from;
                let ok = match self.shards.get_mut(&shard) {
                    Some(Shard {
                        table,
                        role: Role::Source(a),
                        ..
                    }) if a.dst == from => {
                        table.install_if_newer(item);
                        true
                    }
                    Some(Shard {
                        role: Role::Moved(to),
                        ..
                    }) => *to == from,
                    _ => false,
                };
                self.send_extra(from, shard, p.seq, 0, Body::MirrorAck { ok });
            }
            Body::InitAck {
                ok,
                buckets_log2_max,
            } => {
                if self.answered(p.seq, p.from) {
                    self.source_init_ack(shard, p.from, ok, buckets_log2_max)
                }
            }
            Body::DataAck { batch } => {
                if self.answered(p.seq, p.from) {
                    self.source_data_ack(shard, p.from, batch)
                }
            }
            Body::ControlAck { op: o, ok, group } => {
                if !self.answered(p.seq, p.from) {
                    return;
                }
                match o {
                    // The destination owns the shard: now the router may drop the instance.
                    op::FINISH => self.source_finished(shard),
                    // An abort notice arrived; nothing more to do.
                    op::ABORT => {}
                    op::SOURCE_LOST if p.from == self.cfg.router => {
                        self.on_source_lost_ack(shard, ok)
                    }
                    op::HAND_BACK => {}
                    _ if p.from == self.cfg.router => self.source_control_ack(shard, o, ok, group),
                    _ => self.stats.dropped += 1,
                }
            }
            _ => self.stats.dropped += 1,
        }
    }

    fn control_ack(&mut self, p: &Packet, acked: u8, ok: bool) {
        let body = Body::ControlAck {
            op: acked,
            ok,
            group: 0,
        };
        self.send(p.from, p.shard, p.seq, 0, body);
    }

    /// Drops a shard migrating in: its waiting queries fail (the source stays authoritative).
    pub(super) fn dest_drop(&mut self, shard: u16) {
        if !matches!(
            self.shards.get(&shard).map(|s| &s.role),
            Some(Role::Dest(_))
        ) {
            return;
        }
        let Some(s) = self.shards.remove(&shard) else {
            return;
        };
        self.retx.forget(|p| p.shard != shard);
        if let Role::Dest(d) = s.role {
            for q in d
                .parked
                .into_values()
                .flatten()
                .chain(d.pending.into_values())
            {
                self.stats.refused += 1;
                self.reply(&q, Status::Error, 0, vec![], FLAG_FROM_DEST);
            }
        }
    }

    /// A packet went unanswered past its retries and patience.
    pub(super) fn given_up(&mut self, l: Lost) {
        let shard = l.packet.shard;
        let (now, patience) = (self.now_us, self.cfg.ack_timeout_us);
        match &l.packet.body {
            // A notice to a peer that stays silent: nothing more can be done (an unanswered
            // TERMINATE leaves the router's filters sending every group to the destination).
            Body::Abort | Body::Terminate | Body::HandBack { .. } => {}
            // The reads waiting for this pull fail; a later read pulls again. The source is
            // probed now (`server/orphan.rs`).
            Body::Pull { key } => {
                let key = *key;
                let Some(Role::Dest(d)) = self.shards.get_mut(&shard).map(|s| &mut s.role) else {
                    return;
                };
                let reads = d.parked.remove(&key).unwrap_or_default();
                d.parked_count -= reads.len();
                d.heard_us = now.saturating_sub(patience);
                for q in reads {
                    self.stats.refused += 1;
                    self.reply(&q, Status::Error, 0, vec![], FLAG_FROM_DEST);
                }
            }
            // The source may or may not hold this write: fence the shard (module doc of
            // `server`), failing every waiting query, until the source finishes or aborts, or
            // is found dead (probed now).
            Body::Mirror { .. } => {
                let Some(Role::Dest(d)) = self.shards.get_mut(&shard).map(|s| &mut s.role) else {
                    return;
                };
                d.fenced = true;
                d.heard_us = now.saturating_sub(patience);
                d.pending_keys.clear();
                d.parked_count = 0;
                let waiting: Vec<Packet> = std::mem::take(&mut d.parked)
                    .into_values()
                    .flatten()
                    .chain(std::mem::take(&mut d.pending).into_values())
                    .collect();
                self.retx
                    .forget(|p| p.shard != shard || !matches!(p.body, Body::Mirror { .. }));
                for q in waiting {
                    self.stats.refused += 1;
                    self.reply(&q, Status::Error, 0, vec![], FLAG_FROM_DEST);
                }
            }
            // The source stayed silent through a PROBE's retries: the router decides who
            // serves the shard (`server/orphan.rs`).
            Body::Probe => {
                let what = format!(
                    "source server {} did not answer {} (op {}) in {} resends over {} us                      (retries_max, ack_timeout_us)",
                    l.to,
                    op_name(l.packet.body.op()),
                    l.packet.body.op(),
                    l.retries,
                    l.waited_us
                );
                self.source_lost(shard, what);
            }
            Body::SourceLost => self.source_lost_unanswered(shard),
            body => {
                let what = format!(
                    "{} (op {}) to node {} went unanswered: sent {} more times over {} us \
                     (retries_max, ack_timeout_us); the source stays authoritative",
                    op_name(body.op()),
                    body.op(),
                    l.to,
                    l.retries,
                    l.waited_us
                );
                self.abort(shard, &what);
            }
        }
    }
}

fn op_name(o: u8) -> &'static str {
    match o {
        op::INIT => "MIGRATE-INIT",
        op::REGISTER => "REGISTER",
        op::GROUP_START => "GROUP-START",
        op::GROUP_COMPLETE => "GROUP-COMPLETE",
        op::TERMINATE => "TERMINATE",
        op::FINISH => "FINISH",
        op::PULL => "PULL",
        op::MIRROR => "MIRROR",
        op::PROBE => "PROBE",
        op::DATA => "a DATA batch",
        _ => "a packet",
    }
}
