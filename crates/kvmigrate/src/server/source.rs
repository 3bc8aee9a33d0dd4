//! The source agent of a [`Server`]: group streaming and its copy and completing windows, late
//! writes, dirty rounds, freezes, termination, abort, and its status.

use super::{GroupProgress, Role, Server, Shard, SourceAgent};
use crate::status::{MigrationPhase, MigrationStatus};
use crate::table::ShardStore;
use crate::wire::{op, Body, Item, NodeId, Protocol, ShardId, FLAG_LATE};

impl<S: ShardStore> Server<S> {
    fn source(&mut self, shard: ShardId) -> Option<(&mut S, &mut SourceAgent)> {
        match self.shards.get_mut(&shard) {
            Some(Shard {
                table,
                role: Role::Source(a),
                ..
            }) => Some((table, a)),
            _ => None,
        }
    }

    pub(super) fn source_init_ack(
        &mut self,
        shard: ShardId,
        from: NodeId,
        ok: bool,
        buckets_log2_max: u8,
    ) {
        let (id, router, now) = (self.cfg.id, self.cfg.router, self.now_us);
        let Some((table, a)) = self.source(shard) else {
            self.stats.dropped += 1;
            return;
        };
        if a.dst != from || a.phase != MigrationPhase::Registering {
            self.stats.dropped += 1;
            return;
        }
        if !ok {
            let b = table.geometry().buckets_log2;
            let why = if b > buckets_log2_max {
                format!(
                    "the destination refused the shard: its 2^{b} buckets exceed the \
                     destination's incoming_buckets_log2_max = {buckets_log2_max} (raise it \
                     there, or migrate a smaller shard)"
                )
            } else {
                "the destination refused the shard (it already holds it)".to_string()
            };
            self.abort(shard, &why);
            return;
        }
        a.last_progress_us = now;
        let body = Body::Register {
            src: id,
            dst: a.dst,
            mode: a.protocol.router_mode(),
            geometry: table.geometry(),
        };
        self.send_reliable(router, shard, 0, body);
    }

    pub(super) fn source_data_ack(&mut self, shard: ShardId, from: NodeId, batch: u32) {
        let now = self.now_us;
        let Some((_, a)) = self.source(shard) else {
            self.stats.dropped += 1;
            return;
        };
        if a.dst != from {
            self.stats.dropped += 1;
            return;
        }
        a.last_progress_us = now;
        let Some(g) = a.batches.remove(&batch) else {
            return;
        };
        if let Some(gp) = a.groups.get_mut(&g) {
            gp.unacked -= 1;
        }
        self.try_finish_group(shard, g);
        self.source_step(shard);
    }

    pub(super) fn source_control_ack(&mut self, shard: ShardId, o: u8, ok: bool, group: u32) {
        let now = self.now_us;
        let Some((_, a)) = self.source(shard) else {
            self.stats.dropped += 1;
            return;
        };
        a.last_progress_us = now;
        match o {
            op::REGISTER => {
                if !ok {
                    self.abort(
                        shard,
                        "the router refused the instance (table full, busy, or a Fulva shard \
                         with more groups than its tracked_groups_max)",
                    );
                    return;
                }
                a.phase = MigrationPhase::Copying;
                if a.protocol == Protocol::StopAndCopy {
                    a.frozen_since_us = Some(now);
                }
                self.source_step(shard);
            }
            op::GROUP_START => {
                if let Some(gp) = a.groups.get_mut(&group) {
                    gp.start_acked = ok;
                }
                if !ok {
                    self.abort(shard, "the router refused GROUP-START");
                    return;
                }
                self.try_finish_group(shard, group);
                self.source_step(shard);
            }
            op::GROUP_COMPLETE => {
                if !ok {
                    self.abort(shard, "the router refused GROUP-COMPLETE");
                    return;
                }
                // Only a completing group leaves here: a duplicate ack of a group already done
                // (or never completed) changes nothing.
                if a.groups.get(&group).is_some_and(|gp| gp.complete_sent) {
                    a.groups.remove(&group);
                    a.groups_done += 1;
                }
                // A slot of the completing window is free: groups waiting for one in the copy
                // window complete now, which frees their copy slots for `source_step`.
                let ready: Vec<u32> = a
                    .groups
                    .iter()
                    .filter(|(_, gp)| gp.start_acked && gp.unacked == 0 && !gp.complete_sent)
                    .map(|(&g, _)| g)
                    .collect();
                for g in ready {
                    self.try_finish_group(shard, g);
                }
                self.source_step(shard);
            }
            // The source cleaned up when FINISH was acked (`source_finished`).
            op::TERMINATE => {}
            op::ABORT => {}
            _ => self.stats.dropped += 1,
        }
    }

    /// Sends a batch list for group `g` into the queue.
    fn enqueue(a: &mut SourceAgent, g: u32, items: Vec<Item>, late: bool, per: usize) -> u32 {
        let mut n = 0;
        for chunk in items.chunks(per) {
            a.queue.push_back((g, chunk.to_vec(), late));
            n += 1;
        }
        n
    }

    /// Moves group `g` from the copy window to the completing window once its START, DATA and
    /// late writes are acknowledged and the completing window has room (design: "NetMigrate:
    /// the copy window and the completing window"; a full one keeps `g` in the copy window).
    fn try_finish_group(&mut self, shard: ShardId, g: u32) {
        let (router, per) = (self.cfg.router, self.cfg.batch_items_max);
        let completing_max = self.cfg.completing_max;
        let Some((table, a)) = self.source(shard) else {
            return;
        };
        let protocol = a.protocol;
        let dst = a.dst;
        let Some(gp) = a.groups.get_mut(&g) else {
            return;
        };
        if !gp.start_acked || gp.unacked > 0 || gp.complete_sent {
            return;
        }
        if !gp.late_sent {
            // NetMigrate 4.3 corner case: every write routed here before GROUP-START took
            // effect by now (FIFO), so the late set is final. Forward it before completing.
            gp.late_sent = true;
            let items: Vec<Item> = gp.late.iter().filter_map(|&k| table.get(k)).collect();
            let late = items.len() as u64;
            if !items.is_empty() {
                let n = Self::enqueue(a, g, items, true, per);
                if let Some(gp) = a.groups.get_mut(&g) {
                    gp.unacked += n;
                }
                self.stats.late_writes += late;
                self.source_step(shard);
                return;
            }
        }
        let waits_for_complete = matches!(protocol, Protocol::NetMigrate | Protocol::Fulva);
        if waits_for_complete && a.completing() >= completing_max {
            return;
        }
        let Some(gp) = a.groups.get_mut(&g) else {
            return;
        };
        gp.complete_sent = true;
        // Only spares the destination pulls (for keys it lacks, and past NetMigrate copies it
        // holds); a lost one costs nothing else.
        self.send(dst, shard, 0, 0, Body::GroupDone { group: g });
        let Some((_, a)) = self.source(shard) else {
            return;
        };
        if waits_for_complete {
            // The group now holds a completing slot, not a copy slot (4.3: the router sets
            // its BF bits and decrements the CBF when this lands).
            debug_assert!(a.completing() <= completing_max);
            self.send_reliable(router, shard, 0, Body::GroupComplete { group: g });
        } else {
            a.groups.remove(&g);
            a.groups_done += 1;
        }
    }

    pub(super) fn source_step(&mut self, shard: ShardId) {
        let cfg = self.cfg.clone();
        let now = self.now_us;
        let Some(Shard {
            table,
            role: Role::Source(a),
            heat,
        }) = self.shards.get_mut(&shard)
        else {
            return;
        };
        let heat = &*heat;
        // Silence is handled by retransmission (`tick`): a packet given up aborts.
        if !matches!(
            a.phase,
            MigrationPhase::Copying | MigrationPhase::DirtyRounds | MigrationPhase::FinalPause
        ) {
            return;
        }
        let mut starts = Vec::new();
        while a.phase == MigrationPhase::Copying
            && a.next_group < a.groups_total
            && a.copying() < cfg.groups_inflight_max
        {
            let g = a.start_next(heat);
            let items = table.scan_group(g);
            let mut gp = GroupProgress {
                start_acked: a.protocol != Protocol::NetMigrate,
                ..GroupProgress::default()
            };
            for chunk in items.chunks(cfg.batch_items_max) {
                a.queue.push_back((g, chunk.to_vec(), false));
                gp.unacked += 1;
            }
            a.groups.insert(g, gp);
            starts.push(g);
        }
        // Send what the window allows. A NetMigrate group's data follows its GROUP-START
        // without waiting for the ack (NetMigrate 4.1, pipelined; "Ordering" in the module doc
        // of `server` says why the destination may hold it before the router counts the START).
        let mut sends = Vec::new();
        while a.batches.len() < cfg.batches_inflight_max {
            let Some((g, items, late)) = a.queue.pop_front() else {
                break;
            };
            if a.batches.is_empty() {
                a.last_progress_us = now;
            }
            let batch = a.next_batch;
            a.next_batch = a.next_batch.wrapping_add(1);
            a.batches.insert(batch, g);
            sends.push((batch, g, items, late));
        }
        let (protocol, dst) = (a.protocol, a.dst);
        for g in &starts {
            if protocol == Protocol::NetMigrate {
                // Pipelined as in the paper: scan without waiting for the ack; writes that
                // land in between are the late writes.
                self.send_reliable(cfg.router, shard, 0, Body::GroupStart { group: *g });
            }
        }
        for (batch, g, items, late) in sends {
            let body = Body::Data {
                batch,
                group: g,
                items,
            };
            self.send_reliable(dst, shard, if late { FLAG_LATE } else { 0 }, body);
            if let Some((_, p)) = self.out.last() {
                match late {
                    true => self.stats.extra_bytes += p.encoded_len() as u64,
                    false => self.stats.data_bytes += p.encoded_len() as u64,
                }
            }
        }
        for g in starts {
            self.try_finish_group(shard, g);
        }
        self.advance_phase(shard);
    }

    fn advance_phase(&mut self, shard: ShardId) {
        let cfg = self.cfg.clone();
        let now = self.now_us;
        let Some((table, a)) = self.source(shard) else {
            return;
        };
        let idle = a.queue.is_empty() && a.batches.is_empty() && a.groups.is_empty();
        if !idle || a.next_group < a.groups_total || a.terminate_sent {
            return;
        }
        match (a.phase, a.protocol) {
            (MigrationPhase::Copying, Protocol::SourceBased) => {
                a.phase = MigrationPhase::DirtyRounds
            }
            (MigrationPhase::Copying, Protocol::StopAndCopy) => {
                a.phase = MigrationPhase::FinalPause
            }
            (MigrationPhase::Copying, _) => a.phase = MigrationPhase::Terminating,
            _ => {}
        }
        if a.phase == MigrationPhase::DirtyRounds {
            if a.dirty.len() <= cfg.final_dirty_keys_max || a.dirty_rounds >= cfg.dirty_rounds_max {
                a.phase = MigrationPhase::FinalPause;
                a.frozen_since_us = Some(now);
            } else {
                a.dirty_rounds += 1;
            }
        }
        if matches!(
            a.phase,
            MigrationPhase::DirtyRounds | MigrationPhase::FinalPause
        ) && !a.dirty.is_empty()
        {
            let keys = std::mem::take(&mut a.dirty);
            let items: Vec<Item> = keys.iter().filter_map(|&k| table.get(k)).collect();
            self.stats.dirty_items += items.len() as u64;
            let Some((_, a)) = self.source(shard) else {
                return;
            };
            Self::enqueue(a, u32::MAX, items, true, cfg.batch_items_max);
            self.source_step(shard);
            return;
        }
        if a.phase == MigrationPhase::FinalPause {
            a.phase = MigrationPhase::Terminating;
        }
        if a.phase == MigrationPhase::Terminating {
            // NetMigrate 4.1 step 3: the destination takes ownership; once it acks, the source
            // cleans up and the router drops the instance (`source_finished`).
            a.terminate_sent = true;
            let dst = a.dst;
            self.send_reliable(dst, shard, 0, Body::Finish);
        }
    }

    /// The destination acked FINISH: it owns the shard and takes writes without mirroring
    /// them, so from here the migration cannot be undone. The source cleans up (and forwards
    /// what still reaches it) and tells the router, reliably but without waiting: should the
    /// router never answer, its filters already send every group to the destination.
    pub(super) fn source_finished(&mut self, shard: ShardId) {
        let router = self.cfg.router;
        if self.source(shard).is_none() {
            self.stats.dropped += 1;
            return;
        }
        self.send_reliable(router, shard, 0, Body::Terminate);
        self.source_cleanup(shard);
    }

    fn source_cleanup(&mut self, shard: ShardId) {
        let now = self.now_us;
        let Some(s) = self.shards.get_mut(&shard) else {
            return;
        };
        let Role::Source(a) = std::mem::replace(&mut s.role, Role::Owner) else {
            return;
        };
        let mut a = *a;
        s.table.clear();
        s.role = Role::Moved(a.dst);
        if let Some(t) = a.frozen_since_us.take() {
            a.pause_us = now.saturating_sub(t);
        }
        a.phase = MigrationPhase::Done;
        a.groups_done = a.groups_total;
        let held = std::mem::take(&mut a.held);
        self.stats.forwarded += held.len() as u64;
        for q in held {
            self.out.push((a.dst, q));
        }
        let status = self.agent_status(shard, &a);
        self.remember(status);
    }

    /// Aborts an outgoing migration: the source becomes the owner again (NetMigrate 7).
    pub(super) fn abort(&mut self, shard: ShardId, reason: &str) {
        let now = self.now_us;
        let router = self.cfg.router;
        let Some(s) = self.shards.get_mut(&shard) else {
            return;
        };
        let Role::Source(a) = std::mem::replace(&mut s.role, Role::Owner) else {
            return;
        };
        let mut a = *a;
        a.errors += 1;
        a.last_error = Some(reason.to_string());
        a.phase = MigrationPhase::Aborted;
        if let Some(t) = a.frozen_since_us.take() {
            a.pause_us = now.saturating_sub(t);
        }
        // Nothing of this migration is sent again; the peers hear of the abort reliably.
        self.retx.forget(|p| p.shard != shard);
        self.send_reliable(router, shard, 0, Body::Abort);
        self.send_reliable(a.dst, shard, 0, Body::Abort);
        let held = std::mem::take(&mut a.held);
        let status = self.agent_status(shard, &a);
        self.remember(status);
        for q in held {
            self.execute(q, 0);
        }
    }

    pub(super) fn remember(&mut self, status: MigrationStatus) {
        if self.history.len() >= self.cfg.status_history_max {
            self.history.pop_front();
        }
        self.history.push_back(status);
    }

    pub(super) fn agent_status(&self, shard: ShardId, a: &SourceAgent) -> MigrationStatus {
        let elapsed_us = self.now_us.saturating_sub(a.started_us);
        let pause_us = a.pause_us
            + a.frozen_since_us
                .map_or(0, |t| self.now_us.saturating_sub(t));
        MigrationStatus {
            attempt: a.attempt,
            shard,
            source: self.cfg.id,
            destination: a.dst,
            protocol: a.protocol,
            phase: a.phase,
            groups_done: a.groups_done,
            groups_total: a.groups_total,
            elapsed_us,
            groups_per_s: if elapsed_us == 0 {
                0.0
            } else {
                a.groups_done as f64 * 1e6 / elapsed_us as f64
            },
            idle_us: self.now_us.saturating_sub(a.last_progress_us),
            errors: a.errors,
            last_error: a.last_error.clone(),
            late_writes: self.stats.late_writes,
            dirty_rounds: a.dirty_rounds,
            pause_us,
        }
    }
}
