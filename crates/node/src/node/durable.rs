//! Durability of what a node homes (issue 15, requirement 1): the
//! write-ahead log (`locus-wal`) given its meaning, checkpoints, recovery.
//! The log writes through a `locus_wal::Storage` given in the node's parts:
//! files for a server, a simulated disk for the simulated cluster.
//!
//! **Where records are written.** Updates of a vertex are serialised at its
//! home (Pragh 4.3: vertex ops run at the home under its update lock, part
//! ops wherever the part is held). So the home logs, for every update, the
//! vertex's *whole new adjacency list*, computed from the list it reads
//! under the vertex's stripe lock, and applies the update only once the
//! record is durable: no reader, local or one-sided, ever sees a change
//! that a crash could lose. Replaying "the last list logged for each
//! vertex" rebuilds every value the server is home of, and puts it back at
//! home, whether it had been migrated or not.
//!
//! ```text
//!  client ─PUT/INSERT_EDGE/DELETE_EDGE v─▶ home(v)
//!     lock stripe(v) ─▶ read v's list ─▶ its new list ─▶ append record
//!     ─▶ wait until durable (flusher: one write + one fdatasync per group)
//!     ─▶ apply (store) ─▶ unlock ─▶ reply
//! ```
//!
//! Record and checkpoint entry payloads (inside `locus-wal` frames), explicit
//! little-endian:
//!
//! ```text
//!  record:  kind u8 = 1 | count u32 | count x (vertex u32 | n u32 | n x id u32)
//!       or  kind u8 = 2 | count u32 | count x vertex u32      (vertices removed)
//!       or  kind u8 = 3 | slots u32 | slots x slot u32 | count u32 | count x list
//!                                         (SLOT_IN: a move's batch arrives, design M2)
//!       or  kind u8 = 4 | slots u32 | slots x slot u32   (SLOT_OUT: the batch left, M3)
//!       or  kind u8 = 5 | slots u32 | slots x slot u32 | to u8
//!                                         (HANDED: the batch is `to`'s from here, V1)
//!       or  kind u8 = 6 | slots u32 | slots x slot u32 | from u8
//!                                         (SERVE: served here ahead of the table, V2)
//!  entry:   vertex u32 | n u32 | n x id u32
//! ```
//!
//! A single update is a record of one list; a LOAD batch is one record of
//! all its new lists, so a batch is replayed whole or not at all.
//!
//! Invariants:
//! - D1: an update is applied (so seen by any reader) and acknowledged only
//!   after a record holding the vertex's list as of that update is durable
//!   (`sync = "always"`) or written (`"interval"`). With durability on, a
//!   server refuses updates of vertices it does not home (WRONG_HOME): only
//!   the home logs. An update whose record is durable but whose apply fails
//!   is answered with an error (in doubt): it takes effect at the latest
//!   when the log is replayed, and the vertex's next update logs its list
//!   as memory has it. (The log once followed memory: apply, read back,
//!   log. The simulated cluster, `crates/node/tests/sim_cluster.rs`, found a
//!   reader that saw an insert which a crash then lost.)
//! - D2: for each vertex, records are appended in the order its updates
//!   are applied: read, append, wait and apply happen under the vertex's
//!   stripe lock, and every update of it runs at its home through here.
//! - D3: a checkpoint rotates the log first, under every stripe lock (no
//!   update is then between its record and its apply), then reads each
//!   home vertex under its stripe lock. A record in a segment below the
//!   rotation point was applied (or failed, in doubt) before the rotation,
//!   before the read: the checkpoint holds its effect or a later one, and
//!   a vertex it created is among the home vertices listed. Records after
//!   the rotation point are replayed over the checkpoint; each is a whole
//!   list, so replaying one the checkpoint already holds is harmless.
//! - D4: recovery applies, per vertex, the checkpoint's list and then every
//!   logged list or removal in order; the last one wins (a vertex removed
//!   last is not put back). It runs before the client
//!   listener opens, and puts every value back at home.
//!
//! A LOAD batch is logged and made durable whole before any of it is
//! applied; if applying fails part-way, the batch is put back and the
//! lists as they then are logged after it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use locus_fabric::{Fabric, MachineId};
use locus_store::Worker;
use locus_wal::{Lsn, Wal, WalConfig};

use crate::config::DurabilitySection;
use crate::{NodeError, Result};

pub(crate) mod records;
pub(crate) use records::record_bytes;
use records::{
    encode_handed, encode_list, encode_record, encode_removed, encode_serve, encode_slot_in,
    encode_slot_out, Arrived, Replay,
};

/// Stripe locks serialising apply-then-log per vertex (a power of two).
const STRIPES: usize = 1024;
/// What recovery did, for the log, STATS and the tests.
#[derive(Debug, Clone, Default)]
pub(crate) struct Recovered {
    pub(crate) vertices: u64,
    pub(crate) checkpoint_entries: u64,
    pub(crate) records: u64,
    pub(crate) truncated: Option<String>,
    pub(crate) elapsed_ms: u64,
}

/// A node's log, its stripe locks and counters.
pub(crate) struct Durability {
    /// Whether a stripe lock held elsewhere is waited for by blocking (OS
    /// threads) or by spinning through the worker's `relax` (the simulated
    /// fabric runs one actor at a time: a blocked actor would hold the baton
    /// and the holder could never release the lock).
    blocking: bool,
    wal: Wal,
    stripes: Box<[Mutex<()>]>,
    /// One checkpoint at a time.
    checkpointing: Mutex<()>,
    /// The last LSN a checkpoint covered (skip a checkpoint with nothing new).
    checkpoint_lsn: AtomicU64,
    pub(crate) checkpoints: AtomicU64,
    pub(crate) checkpoint_vertices: AtomicU64,
    pub(crate) checkpoint_ms: AtomicU64,
    pub(crate) recovered: Recovered,
    pub(crate) interval: Duration,
    /// Moves of this server's slots in flight: no checkpoint meanwhile (M4).
    pub(crate) moves_in_flight: AtomicU64,
    /// The epoch of the newest table a PROMOTE put slots in by (their
    /// SLOT_IN logged): until the installed table is that new, the
    /// checkpoint, which keeps only vertices the table homes here, would
    /// leave them out and drop their SLOT_IN with the log (the twin's
    /// handovers, a PROMOTE long before its INSTALL, then a restart).
    pub(crate) promoted_at: AtomicU64,
    /// Slots the replay left in a move, for the node to take over.
    pub(crate) resumed: Mutex<Vec<(u32, Resumed)>>,
    /// Vertices homed here that a record after the checkpoint wrote, as
    /// the replay found them: their last update may be in doubt, so they
    /// are sent to the backups again before anyone is served
    /// (`Node::resend_replayed`).
    pub(crate) replayed: Mutex<Vec<u32>>,
    /// Held by a move's HAND and by the reload after a peer's failure (M1),
    /// so that one sees the other's effect whole (V4).
    handing: Mutex<()>,
}

/// A slot a replay leaves in a move (its log's last word on it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resumed {
    /// HANDED to this server, the table not naming it yet (V5).
    Handed(MachineId),
    /// Taken from this server (SLOT_IN), not served yet: its copies are
    /// kept until the old home's word decides (SERVE or FORGET).
    Taken(MachineId),
    /// Served here ahead of the table since SERVE; taken from this server.
    Served(MachineId),
}

impl Durability {
    /// Opens node `id`'s log in `dir` on `storage`, replays it into the
    /// store through `w` (this machine's worker), and returns it ready for
    /// updates (D4).
    pub(crate) fn open<F: Fabric>(
        d: &DurabilitySection,
        log: &crate::node::LogParts,
        id: MachineId,
        w: &mut Worker<F>,
    ) -> Result<Durability> {
        let t0 = Instant::now();
        let machines = w.machine_count();
        let cfg = WalConfig {
            storage: log.storage.clone(),
            dir: log.dir.clone(),
            sync: d.sync_mode()?,
            identity: format!("server {id} of {machines}"),
            segment_bytes_max: d.segment_mb << 20,
        };
        let homes = std::sync::Arc::clone(w.homes());
        let slot_of = |v: u32| homes.slot_of(v);
        let mut replay = Replay::new(&slot_of);
        let flusher = match log.runs_on {
            crate::node::RunsOn::Threads => locus_wal::Flusher::Thread,
            crate::node::RunsOn::Simulation => locus_wal::Flusher::Caller,
        };
        let (wal, r) = Wal::open_with(cfg, flusher, |e| replay.entry(e))?;
        let (mut lists, moved) = (replay.lists, replay.moved);
        // Moves the log leaves in flight here (design V2, V5), unless the
        // table already names their target (committed; this server missed
        // only its SLOT_OUT, or its install).
        let mut resumed: Vec<(u32, Resumed)> = Vec::new();
        let table = homes.table();
        for (&s, &a) in &replay.arrived {
            let Some(owner) = table.owner_of_slot(s).filter(|&o| o != id) else {
                continue;
            };
            resumed.push((
                s,
                match a {
                    Arrived::Taken => Resumed::Taken(owner),
                    Arrived::Served(from) => Resumed::Served(from),
                },
            ));
        }
        let mut marked: std::collections::BTreeMap<MachineId, Vec<u32>> = Default::default();
        for (&s, &to) in &replay.handed {
            if table.owner_of_slot(s) != Some(to) {
                resumed.push((s, Resumed::Handed(to)));
                marked.entry(to).or_default().push(s);
            }
        }
        resumed.sort_unstable_by_key(|r| r.0);
        // The copies of slots taken here are kept (the old home decides
        // whether they are ours: V2), so a replay puts them back here.
        let kept: HashSet<u32> = resumed
            .iter()
            .filter(|(_, r)| !matches!(r, Resumed::Handed(_)))
            .map(|(s, _)| *s)
            .collect();
        // M3: vertices of slots the table gives another server were moved
        // away (or their move rolled back). Outside the slots a move named,
        // at the table's first epoch (no move ever committed) they mean a
        // log of another shape.
        let foreign: Vec<u32> = lists
            .keys()
            .copied()
            .filter(|&v| homes.owner(v) != id && !kept.contains(&homes.slot_of(v)))
            .collect();
        if let Some(&v) = foreign
            .iter()
            .find(|&&v| !moved.contains(&homes.slot_of(v)))
            .filter(|_| homes.epoch() <= 1)
        {
            return Err(NodeError::Recovery(format!(
                "vertex {v} is not homed on server {id} by the slot table of {} slots (a log written before slots existed is read with [store] slots = the server count)",
                homes.slots()
            )));
        }
        // Their lengths, for the markers below (with replication).
        let mut foreign_lens: Vec<(u32, usize)> = Vec::new();
        if !foreign.is_empty() {
            tracing::info!(
                server = id,
                vertices = foreign.len(),
                table_epoch = homes.epoch(),
                "replay drops the vertices of slots the table gives other servers"
            );
            for v in &foreign {
                if let Some(l) = lists.remove(v) {
                    foreign_lens.push((*v, l.len()));
                }
            }
        }
        let mut replayed: Vec<u32> = replay
            .logged
            .iter()
            .copied()
            .filter(|&v| homes.owner(v) == id)
            .collect();
        replayed.sort_unstable();
        let kept: Vec<u32> = kept.into_iter().collect();
        homes.set_view(&kept, Some(id))?;
        w.set_replaying(true);
        let mut order: Vec<u32> = lists.keys().copied().collect();
        order.sort_unstable();
        let put = (|| {
            for v in &order {
                w.put(*v, &lists[v]).map_err(|e| {
                    NodeError::Recovery(format!(
                        "cannot put back vertex {v} ({} ids): {e}; raise store.value_region_mb or buckets if the region or table is full",
                        lists[v].len()
                    ))
                })?;
            }
            Ok::<(), NodeError>(())
        })();
        w.set_replaying(false);
        // Only served slots keep the view: a taken one is the old home's
        // until it says otherwise.
        let taken: Vec<u32> = resumed
            .iter()
            .filter(|(_, r)| matches!(r, Resumed::Taken(_)))
            .map(|(s, _)| *s)
            .collect();
        homes.set_view(&taken, None)?;
        put?;
        // V5: slots handed away are the new owner's: their keys become
        // markers naming it, guarded and viewed so, until the table agrees.
        let part_max = w.part_neighbors_max().max(1) as usize;
        for (to, slots) in &marked {
            let set: HashSet<u32> = slots.iter().copied().collect();
            let keys: Vec<locus_store::Key> = replay
                .handed_vertices
                .iter()
                .filter(|(v, _)| set.contains(&homes.slot_of(**v)))
                .flat_map(|(&v, &len)| {
                    (0..len.div_ceil(part_max).max(1) as u32)
                        .map(move |i| locus_store::Key::part(v, i))
                })
                .collect();
            w.put_markers(&keys, *to)?;
            w.guard_slots(slots, *to)?;
            homes.set_view(slots, Some(*to))?;
            tracing::info!(
                server = id,
                to,
                slots = slots.len(),
                markers = keys.len(),
                "replay: slots handed to another server before the table named it stay its own"
            );
        }
        // With replication, the keys of slots the table gives another
        // server (a failover or handover committed while this server was
        // down, or before it marked them) become markers naming their owner:
        // a reader whose table still names this server goes on there, and
        // never reads "absent" here (design H4; a PROMOTE clears them).
        if homes.current().replication() > 1 && !foreign_lens.is_empty() {
            foreign_lens.sort_unstable();
            let mut by_owner: std::collections::BTreeMap<MachineId, Vec<locus_store::Key>> =
                Default::default();
            for &(v, len) in &foreign_lens {
                let keys = by_owner.entry(homes.owner(v)).or_default();
                keys.extend(
                    (0..len.div_ceil(part_max).max(1) as u32).map(|i| locus_store::Key::part(v, i)),
                );
            }
            for (to, keys) in &by_owner {
                w.put_markers(keys, *to)?;
            }
        }
        let recovered = Recovered {
            vertices: order.len() as u64,
            checkpoint_entries: r.checkpoint_entries,
            records: r.records,
            truncated: r
                .truncated
                .map(|(p, off, why)| format!("{} at byte {off}: {why}", p.display())),
            elapsed_ms: t0.elapsed().as_millis() as u64,
        };
        tracing::info!(
            server = id,
            dir = %log.dir.display(),
            vertices = recovered.vertices,
            checkpoint_entries = recovered.checkpoint_entries,
            records = recovered.records,
            segments = r.segments,
            elapsed_ms = recovered.elapsed_ms,
            "recovered from the checkpoint and the write-ahead log"
        );
        Ok(Durability {
            blocking: log.runs_on == crate::node::RunsOn::Threads,
            wal,
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            checkpointing: Mutex::new(()),
            checkpoint_lsn: AtomicU64::new(0),
            checkpoints: AtomicU64::new(0),
            checkpoint_vertices: AtomicU64::new(0),
            checkpoint_ms: AtomicU64::new(0),
            recovered,
            interval: Duration::from_secs(d.checkpoint_interval_s),
            moves_in_flight: AtomicU64::new(resumed.len() as u64),
            promoted_at: AtomicU64::new(0),
            resumed: Mutex::new(resumed),
            replayed: Mutex::new(replayed),
            handing: Mutex::new(()),
        })
    }

    /// Pragh 5's reload by the home: with every stripe and the checkpoint
    /// lock held (so no update or checkpoint of this server interleaves, D2),
    /// reads the checkpoint and the log back and keeps the last logged list
    /// of each of `vertices` (D1: every acknowledged update's whole list is
    /// there, wherever the value lived), then calls `then` with them, still
    /// under the locks. Vertices with no list logged are absent from the map.
    pub(crate) fn with_logged_lists<R>(
        &self,
        vertices: &HashSet<u32>,
        slot_of: &dyn Fn(u32) -> u32,
        relax: &mut dyn FnMut(),
        then: impl FnOnce(&HashMap<u32, Vec<u32>>) -> R,
    ) -> Result<R> {
        let _one = self.checkpoint_lock(relax);
        let _all = self.lock_all(relax);
        let mut replay = Replay::new(slot_of);
        self.wal.read_back(|e| replay.entry(e))?;
        let mut lists = replay.lists;
        lists.retain(|v, _| vertices.contains(v));
        Ok(then(&lists))
    }

    /// `v`'s stripe lock (D2); `relax` is called while it is held
    /// elsewhere, if locks do not block (see [`Durability::blocking`]).
    pub(crate) fn lock(&self, v: u32, relax: &mut dyn FnMut()) -> MutexGuard<'_, ()> {
        // Vertex ids are dense: the low bits spread them over the stripes.
        lock_one(
            &self.stripes[v as usize & (STRIPES - 1)],
            self.blocking,
            relax,
        )
    }

    /// Every stripe, in order (LOAD; single updates take one, so no cycle).
    pub(crate) fn lock_all(&self, relax: &mut dyn FnMut()) -> Vec<MutexGuard<'_, ()>> {
        self.stripes
            .iter()
            .map(|m| lock_one(m, self.blocking, relax))
            .collect()
    }

    /// The lock a move's HAND and a peer failure's reload both take (V4).
    pub(crate) fn hand_lock(&self, relax: &mut dyn FnMut()) -> MutexGuard<'_, ()> {
        lock_one(&self.handing, self.blocking, relax)
    }

    fn checkpoint_lock(&self, relax: &mut dyn FnMut()) -> MutexGuard<'_, ()> {
        lock_one(&self.checkpointing, self.blocking, relax)
    }

    /// Appends a record of `lists`; durable once [`wait`](Self::wait) returns.
    pub(crate) fn log<'a>(
        &self,
        lists: impl ExactSizeIterator<Item = (u32, &'a [u32])>,
    ) -> locus_wal::Result<Lsn> {
        self.wal.append(&encode_record(lists))
    }

    /// Appends a record of `vertices` removed; durable once
    /// [`wait`](Self::wait) returns.
    pub(crate) fn log_removed(&self, vertices: &[u32]) -> locus_wal::Result<Lsn> {
        self.wal.append(&encode_removed(vertices))
    }

    /// Appends a SLOT_IN record (M2); durable once [`wait`](Self::wait) returns.
    pub(crate) fn log_slot_in<'a>(
        &self,
        slots: &[u32],
        lists: impl ExactSizeIterator<Item = (u32, &'a [u32])>,
    ) -> locus_wal::Result<Lsn> {
        self.wal.append(&encode_slot_in(slots, lists))
    }

    /// Appends a HANDED record (V1); durable once [`wait`](Self::wait) returns.
    pub(crate) fn log_handed(&self, slots: &[u32], to: MachineId) -> locus_wal::Result<Lsn> {
        self.wal.append(&encode_handed(slots, to))
    }

    /// Appends a SERVE record (V2); durable once [`wait`](Self::wait) returns.
    pub(crate) fn log_serve(&self, slots: &[u32], from: MachineId) -> locus_wal::Result<Lsn> {
        self.wal.append(&encode_serve(slots, from))
    }

    /// Appends a SLOT_OUT record (M3); durable once [`wait`](Self::wait) returns.
    pub(crate) fn log_slot_out(&self, slots: &[u32]) -> locus_wal::Result<Lsn> {
        self.wal.append(&encode_slot_out(slots))
    }

    /// The last LSN appended (what a state just read may depend on).
    pub(crate) fn last_lsn(&self) -> Lsn {
        self.wal.last_lsn()
    }

    /// Waits until `lsn` is durable (D1).
    pub(crate) fn wait(&self, lsn: Lsn) -> locus_wal::Result<()> {
        if lsn == 0 {
            return Ok(());
        }
        self.wal.wait(lsn)
    }

    /// The log's counters and mode, for STATS.
    pub(crate) fn stats_json(&self) -> serde_json::Value {
        let s = self.wal.stats();
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let r = &self.recovered;
        serde_json::json!({
            "dir": self.wal.dir().display().to_string(),
            "sync": format!("{:?}", self.wal.sync_mode()),
            "records": n(&s.records), "groups": n(&s.groups), "syncs": n(&s.syncs),
            "bytes": n(&s.bytes),
            "checkpoints": n(&self.checkpoints),
            "checkpoint_vertices": n(&self.checkpoint_vertices),
            "checkpoint_ms": n(&self.checkpoint_ms),
            "recovered_vertices": r.vertices,
            "recovered_checkpoint_entries": r.checkpoint_entries,
            "recovered_records": r.records,
            "recovery_ms": r.elapsed_ms,
            "truncated": r.truncated,
        })
    }

    /// Writes a checkpoint of every vertex this server homes and drops the
    /// log before it (D3). Returns the vertices written, or None if nothing
    /// was logged since the last one.
    pub(crate) fn checkpoint<F: Fabric>(&self, w: &mut Worker<F>) -> Result<Option<u64>> {
        let _one = self.checkpoint_lock(&mut || w.relax());
        let lsn = self.wal.last_lsn();
        if lsn == self.checkpoint_lsn.load(Ordering::Acquire) {
            return Ok(None);
        }
        if self.promoted_at.load(Ordering::Acquire) > w.homes().epoch() {
            tracing::debug!("checkpoint put off: promoted slots wait for their table");
            return Ok(None);
        }
        if self.moves_in_flight.load(Ordering::Acquire) > 0 {
            // M4: the log holds a batch's SLOT_IN (or the lists a rolled
            // back batch needs) that the table does not yet name here.
            tracing::debug!("checkpoint put off: a slot move is in flight");
            return Ok(None);
        }
        let t0 = Instant::now();
        // D3: rotated under every stripe lock, so that no update is between
        // its record and its apply (a vertex it creates would be missing
        // from the list below while its record is dropped with the old
        // segments; the twin with replication, whose updates wait for a
        // backup between the two, found it).
        let first = {
            let _all = self.lock_all(&mut || w.relax());
            // M4 again: a move may have begun while the locks were awaited.
            if self.moves_in_flight.load(Ordering::Acquire) > 0
                || self.promoted_at.load(Ordering::Acquire) > w.homes().epoch()
            {
                tracing::debug!("checkpoint put off: a slot move or a promotion is in flight");
                return Ok(None);
            }
            self.wal.rotate()?
        };
        let mut ck = self.wal.checkpoint_writer(first)?;
        let mut buf = Vec::new();
        for v in w.home_vertices()? {
            let list = {
                let _g = self.lock(v, &mut || w.relax());
                match w.get(v) {
                    // Marked lost by Pragh 5 recovery (`recovery.rs`): there
                    // is no list to keep, and one lost vertex must not stop
                    // every later checkpoint.
                    Err(e @ locus_store::StoreError::ValueLost { .. }) => {
                        tracing::warn!(vertex = v, "checkpoint skips a lost vertex: {e}");
                        continue;
                    }
                    r => r?,
                }
            };
            if let Some(l) = list {
                buf.clear();
                encode_list(v, &l, &mut buf);
                ck.entry(&buf)?;
            }
        }
        let vertices = ck.entries();
        let bytes = ck.commit()?;
        let removed = self.wal.remove_segments_before(first)?;
        self.checkpoint_lsn.store(lsn, Ordering::Release);
        self.checkpoints.fetch_add(1, Ordering::Relaxed);
        self.checkpoint_vertices.store(vertices, Ordering::Relaxed);
        let ms = t0.elapsed().as_millis() as u64;
        self.checkpoint_ms.store(ms, Ordering::Relaxed);
        tracing::info!(
            vertices,
            bytes,
            segments_removed = removed,
            elapsed_ms = ms,
            "checkpoint written"
        );
        Ok(Some(vertices))
    }
}

/// Takes `m`: blocking, or spinning through `relax` while it is held.
fn lock_one<'a>(m: &'a Mutex<()>, blocking: bool, relax: &mut dyn FnMut()) -> MutexGuard<'a, ()> {
    if blocking {
        return m.lock().unwrap_or_else(|p| p.into_inner());
    }
    loop {
        match m.try_lock() {
            Ok(g) => return g,
            Err(TryLockError::Poisoned(p)) => return p.into_inner(),
            Err(TryLockError::WouldBlock) => relax(),
        }
    }
}
