//! Replication (issue 60; `docs/design.md`, "Replication and failover",
//! R1-R4): the records a slot's primary sends its backups, and a backup's
//! side of them.
//!
//! A backup keeps, per slot it backs, the slot's lists in a log of its own
//! (`<log dir>/backup`, the main log's record kinds: whole lists, removals,
//! and SLOT_OUT when a slot leaves it) and in a plain map: never in its
//! one-sided key table, so no reader finds a backup's copy by a lookup.
//! PROMOTE (a failover) moves a slot's lists from the map into the key
//! table (`Node::promote`).
//!
//! A replication request (little-endian), carried by the store's messaging
//! as a node request (`locus_store::NodeHandler`):
//!
//! ```text
//!  magic u8 = 0x52 | count u32 | count x entry
//!  entry:  slot u32 | primary epoch u32 | vertex u32 | flag u8 (1 list, 0 removed)
//!          | [n u32 | n x id u32]  (a list only; flag 2: a copied list, to a learner)
//!  answer: u8 = 1 (every entry durable in this backup's log and applied to its map)
//! ```
//!
//! A request is taken whole or refused whole: every entry's slot must be
//! its vertex's, and by the table installed here the sender must own the
//! slot at exactly the entry's primary epoch, and this machine must back it
//! (R2: a stale primary, or one ahead of this backup's table, is refused;
//! the primary's update then fails in doubt and its client retries).
//!
//! A *learner* (a server rejoining as a backup, `learn.rs`) takes records of
//! the slots it learns from their owner though the table does not name it
//! yet, while the table installed here is the one it began learning at.
//! Besides live records (flag 1 or 0) it takes the primary's copy of each
//! vertex (flag 2), which never overwrites a live record taken since it
//! began learning: the copy may have been read before that record's update.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use locus_fabric::MachineId;
use locus_store::{Homes, SlotTable};
use locus_wal::{Entry, Wal, WalConfig};

use super::durable::records::{decode_any, encode_record, encode_removed, encode_slot_out, Rec};
use crate::{NodeError, Result};

/// The first byte of a replication request.
const MAGIC: u8 = 0x52;
/// A backup's answer: stored.
pub(crate) const STORED: u8 = 1;
/// Bytes a replication request may hold before it is split (the TCP
/// fabric's messages carry at most 1 MiB).
pub(crate) const REQUEST_BYTES_MAX: usize = 768 << 10;

/// One vertex's new state, as a primary replicates it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry1 {
    pub(crate) slot: u32,
    pub(crate) primary_epoch: u32,
    pub(crate) vertex: u32,
    /// Its whole list, or None: removed.
    pub(crate) list: Option<Vec<u32>>,
    /// A rejoin's copy of the list (to a learner), not a live update.
    pub(crate) copied: bool,
}

/// Encodes `entries` into requests of at most [`REQUEST_BYTES_MAX`] bytes
/// (a single entry larger than that is a request of its own).
pub(crate) fn encode_requests(entries: &[Entry1]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut cur: Vec<u8> = Vec::new();
    let mut count = 0u32;
    let flush = |cur: &mut Vec<u8>, count: &mut u32, out: &mut Vec<Vec<u8>>| {
        if *count > 0 {
            cur[1..5].copy_from_slice(&count.to_le_bytes());
            out.push(std::mem::take(cur));
            *count = 0;
        }
    };
    for e in entries {
        let size = 13 + e.list.as_ref().map_or(0, |l| 4 + 4 * l.len());
        if count > 0 && cur.len() + size > REQUEST_BYTES_MAX {
            flush(&mut cur, &mut count, &mut out);
        }
        if count == 0 {
            cur = vec![MAGIC, 0, 0, 0, 0];
        }
        for x in [e.slot, e.primary_epoch, e.vertex] {
            cur.extend_from_slice(&x.to_le_bytes());
        }
        match &e.list {
            Some(l) => {
                cur.push(if e.copied { 2 } else { 1 });
                cur.extend_from_slice(&(l.len() as u32).to_le_bytes());
                for id in l {
                    cur.extend_from_slice(&id.to_le_bytes());
                }
            }
            None => cur.push(0),
        }
        count += 1;
    }
    flush(&mut cur, &mut count, &mut out);
    out
}

/// Reads a replication request; an error names what is wrong and where.
pub(crate) fn decode_request(b: &[u8]) -> std::result::Result<Vec<Entry1>, String> {
    if b.len() < 5 || b[0] != MAGIC {
        return Err(format!(
            "a replication request of {} bytes without its 5-byte header",
            b.len()
        ));
    }
    let count = u32::from_le_bytes(b[1..5].try_into().expect("4 bytes")) as usize;
    // An entry is at least 13 bytes: refuse a count the bytes cannot hold
    // before allocating for it.
    if count > (b.len() - 5) / 13 {
        return Err(format!(
            "a replication request claims {count} entries in {} bytes",
            b.len()
        ));
    }
    let mut at = 5;
    let u32_at = |at: &mut usize| -> std::result::Result<u32, String> {
        let s = b
            .get(*at..*at + 4)
            .ok_or_else(|| format!("a replication request cut short at byte {at}"))?;
        *at += 4;
        Ok(u32::from_le_bytes(s.try_into().expect("4 bytes")))
    };
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let (slot, primary_epoch, vertex) = (u32_at(&mut at)?, u32_at(&mut at)?, u32_at(&mut at)?);
        let flag = *b
            .get(at)
            .ok_or_else(|| format!("a replication request cut short at byte {at}"))?;
        at += 1;
        let list = match flag {
            0 => None,
            1 | 2 => {
                let n = u32_at(&mut at)? as usize;
                if n > (b.len() - at) / 4 {
                    return Err(format!(
                        "vertex {vertex}'s list of {n} ids runs past the request's end (byte {at})"
                    ));
                }
                let mut l = Vec::with_capacity(n);
                for _ in 0..n {
                    l.push(u32_at(&mut at)?);
                }
                Some(l)
            }
            f => return Err(format!("entry flag {f} at byte {}, not 0, 1 or 2", at - 1)),
        };
        out.push(Entry1 {
            slot,
            primary_epoch,
            vertex,
            list,
            copied: flag == 2,
        });
    }
    if at != b.len() {
        return Err(format!(
            "{} bytes after a replication request's last entry",
            b.len() - at
        ));
    }
    Ok(out)
}

/// Why `from` may not write `e` here by `t` (R2), if it may not;
/// `learns`: this machine learns `e`'s slot from `from` at `t`'s epoch.
pub(crate) fn refusal(
    t: &SlotTable,
    me: MachineId,
    from: MachineId,
    e: &Entry1,
    learns: bool,
) -> Option<String> {
    if t.slot_of(e.vertex) != e.slot {
        return Some(format!(
            "vertex {} is in slot {}, not {}",
            e.vertex,
            t.slot_of(e.vertex),
            e.slot
        ));
    }
    let (owner, pe) = (t.owner_of_slot(e.slot), t.primary_epoch(e.slot));
    if owner != Some(from) || pe != e.primary_epoch {
        return Some(format!(
            "slot {} is server {}'s at primary epoch {pe} by table epoch {} here, not server {from}'s at {}",
            e.slot,
            owner.map_or("none".into(), |o| o.to_string()),
            t.epoch(),
            e.primary_epoch
        ));
    }
    if e.copied && !learns {
        return Some(format!(
            "server {me} does not learn slot {} from server {from} at table epoch {}: a copy goes to a learner only",
            e.slot,
            t.epoch()
        ));
    }
    if !t.is_backup(e.slot, me) && !learns {
        return Some(format!(
            "server {me} does not back slot {} by table epoch {}, nor learn it",
            e.slot,
            t.epoch()
        ));
    }
    None
}

/// A slot this machine learns (a rejoin, before the table names it).
#[derive(Debug)]
struct Learning {
    /// The slot's owner.
    from: MachineId,
    /// The table epoch it learns at: a newer table ends it.
    table_epoch: u64,
    /// Vertices a live record wrote since it began: a copy skips them.
    touched: std::collections::HashSet<u32>,
}

/// What a backup holds: per slot, its vertices' lists; and the slots a
/// PROMOTE is taking (records of them are refused).
#[derive(Default)]
struct Held {
    lists: HashMap<u32, HashMap<u32, Vec<u32>>>,
    promoting: std::collections::HashSet<u32>,
    learning: HashMap<u32, Learning>,
}

impl Held {
    /// Whether this machine learns `slot` from `from` at table epoch `epoch`.
    fn learns(&self, slot: u32, from: MachineId, epoch: u64) -> bool {
        self.learning
            .get(&slot)
            .is_some_and(|l| l.from == from && l.table_epoch == epoch)
    }
}

/// A backup's side: its log and map (see the module doc).
pub(crate) struct Backup {
    me: MachineId,
    homes: Arc<Homes>,
    wal: Wal,
    map: Mutex<Held>,
    /// Entries stored and requests refused, for STATS.
    pub(crate) stored: AtomicU64,
    pub(crate) refused: AtomicU64,
    /// Batches of requests made durable by one wait (group commit), for STATS.
    batches: AtomicU64,
    /// Requests those batches held.
    batched: AtomicU64,
    /// The last LSN a checkpoint covered.
    checkpoint_lsn: AtomicU64,
    /// Break on purpose (tests of R2 only): take records whatever their
    /// primary epoch.
    pub(crate) accept_stale: AtomicBool,
    /// Break on purpose (tests of the rejoin only): a copy overwrites what
    /// a live record wrote since the learning began.
    pub(crate) copy_overwrites: AtomicBool,
    /// A fault (tests only): the next this many requests stored here are
    /// answered with an error, as if the answer were lost on the way (the
    /// primary's update is then in doubt while this backup holds it).
    pub(crate) lose_acks: AtomicU64,
}

impl Backup {
    /// Opens the backup log in `dir` and replays it: the map keeps the
    /// slots the installed table has this machine back, or own (a
    /// failover not promoted yet).
    pub(crate) fn open(
        me: MachineId,
        homes: Arc<Homes>,
        mut cfg: WalConfig,
        flusher: locus_wal::Flusher,
    ) -> Result<Backup> {
        cfg.identity = format!("backups of server {me}");
        let mut map: HashMap<u32, HashMap<u32, Vec<u32>>> = HashMap::new();
        let slot_of = |v: u32| homes.slot_of(v);
        let mut apply = |rec: Rec| match rec {
            Rec::Vertices(l) => {
                for (v, ids) in l {
                    let s = map.entry(slot_of(v)).or_default();
                    match ids {
                        Some(ids) => s.insert(v, ids),
                        None => s.remove(&v),
                    };
                }
                Ok(())
            }
            Rec::SlotOut(slots) => {
                for s in slots {
                    map.remove(&s);
                }
                Ok(())
            }
            other => Err(format!("a backup log holds no {other:?} record")),
        };
        let (wal, _) = Wal::open_with(cfg, flusher, |e| match e {
            Entry::Checkpoint(b) | Entry::Record(b) => apply(decode_any(b)?),
        })?;
        let t = homes.current();
        map.retain(|&s, _| t.is_backup(s, me) || t.owner_of_slot(s) == Some(me));
        Ok(Backup {
            me,
            homes,
            wal,
            map: Mutex::new(Held {
                lists: map,
                promoting: Default::default(),
                learning: Default::default(),
            }),
            stored: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            batched: AtomicU64::new(0),
            checkpoint_lsn: AtomicU64::new(0),
            accept_stale: AtomicBool::new(false),
            copy_overwrites: AtomicBool::new(false),
            lose_acks: AtomicU64::new(0),
        })
    }

    /// Held only for steps that do not yield (no fabric operation, no log
    /// wait): the simulation runs one actor at a time, and one blocked on
    /// this lock would hold the baton its holder needs.
    fn map(&self) -> MutexGuard<'_, Held> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes a replication request from `from` (see the module doc): under
    /// the map's lock, checks every entry by the installed table (and that
    /// no PROMOTE of its slot began), appends the record and applies it to
    /// the map; then, without the lock, waits until the record is durable,
    /// and only then answers STORED. So the log never holds a record the
    /// map refused, every record a PROMOTE's copy lacks comes after its
    /// SLOT_OUT, and a record in the map but not yet durable is one no
    /// primary has acknowledged (it may take effect or not).
    pub(crate) fn take(&self, from: MachineId, bytes: &[u8]) -> std::result::Result<(), String> {
        let lsn = self.stage(from, bytes)?;
        if lsn > 0 {
            self.wal
                .wait(lsn)
                .map_err(|e| format!("server {}'s backup log: {e}", self.me))?;
        }
        Ok(())
    }

    /// Several requests that arrived together ([`Backup::take`] each, with
    /// one wait for the last record: the backup's group commit). A refused
    /// request fails alone; a failed sync fails every request it covered.
    pub(crate) fn take_many(
        &self,
        requests: &[(MachineId, &[u8])],
    ) -> Vec<std::result::Result<(), String>> {
        let staged: Vec<std::result::Result<u64, String>> = requests
            .iter()
            .map(|&(from, bytes)| self.stage(from, bytes))
            .collect();
        let last = staged
            .iter()
            .filter_map(|r| r.as_ref().ok().copied())
            .max()
            .unwrap_or(0);
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.batched
            .fetch_add(requests.len() as u64, Ordering::Relaxed);
        let synced = if last > 0 {
            self.wal
                .wait(last)
                .map_err(|e| format!("server {}'s backup log: {e}", self.me))
        } else {
            Ok(())
        };
        staged
            .into_iter()
            .map(|r| match (r, &synced) {
                (Err(e), _) => Err(e),
                (Ok(_), Err(e)) => Err(e.clone()),
                (Ok(_), Ok(())) => Ok(()),
            })
            .collect()
    }

    /// [`Backup::take`]'s first half: under the map's lock, checks the
    /// request, appends its record and applies it to the map; returns the
    /// record's LSN (0: nothing logged), not waited for.
    fn stage(&self, from: MachineId, bytes: &[u8]) -> std::result::Result<u64, String> {
        let entries = decode_request(bytes)?;
        let lsn = {
            let mut map = self.map();
            let t = self.homes.current();
            if !self.accept_stale.load(Ordering::Relaxed) {
                let why = entries.iter().find_map(|e| {
                    if map.promoting.contains(&e.slot) {
                        return Some(format!(
                            "slot {} is being promoted here (it fails over to server {})",
                            e.slot, self.me
                        ));
                    }
                    refusal(&t, self.me, from, e, map.learns(e.slot, from, t.epoch()))
                });
                if let Some(why) = why {
                    self.refused.fetch_add(1, Ordering::Relaxed);
                    return Err(format!("server {} refuses the record: {why}", self.me));
                }
            }
            // A copy skips a vertex a live record wrote since the learning
            // began (that record is newer than the copy may be).
            let overwrite = self.copy_overwrites.load(Ordering::Relaxed);
            let kept: Vec<&Entry1> = entries
                .iter()
                .filter(|e| {
                    !e.copied
                        || overwrite
                        || !map
                            .learning
                            .get(&e.slot)
                            .is_some_and(|l| l.touched.contains(&e.vertex))
                })
                .collect();
            let lists: Vec<(u32, &[u32])> = kept
                .iter()
                .filter_map(|e| e.list.as_deref().map(|l| (e.vertex, l)))
                .collect();
            let removed: Vec<u32> = kept
                .iter()
                .filter(|e| e.list.is_none())
                .map(|e| e.vertex)
                .collect();
            let log = |e: locus_wal::WalError| format!("server {}'s backup log: {e}", self.me);
            let mut lsn = 0;
            if !lists.is_empty() {
                lsn = self
                    .wal
                    .append(&encode_record(lists.into_iter()))
                    .map_err(log)?;
            }
            if !removed.is_empty() {
                lsn = self.wal.append(&encode_removed(&removed)).map_err(log)?;
            }
            for e in kept {
                if !e.copied {
                    if let Some(l) = map.learning.get_mut(&e.slot) {
                        l.touched.insert(e.vertex);
                    }
                }
                let s = map.lists.entry(e.slot).or_default();
                match &e.list {
                    Some(l) => s.insert(e.vertex, l.clone()),
                    None => s.remove(&e.vertex),
                };
                self.stored.fetch_add(1, Ordering::Relaxed);
            }
            lsn
        };
        Ok(lsn)
    }

    /// A rejoin's first step here: from now on takes records of `slots`
    /// from their owner `from` while the installed table is at
    /// `table_epoch` (the table does not name this machine yet), having
    /// dropped whatever it held of them (SLOT_OUT, durable): what it holds
    /// of them is what it is sent from here on. Idempotent (learning them
    /// from `from` at that epoch already: nothing is dropped again).
    pub(crate) fn learn(&self, slots: &[u32], from: MachineId, table_epoch: u64) -> Result<()> {
        let lsn = {
            let mut map = self.map();
            let fresh: Vec<u32> = slots
                .iter()
                .copied()
                .filter(|&s| !map.learns(s, from, table_epoch))
                .collect();
            if fresh.is_empty() {
                return Ok(());
            }
            for &s in &fresh {
                map.lists.remove(&s);
                map.learning.insert(
                    s,
                    Learning {
                        from,
                        table_epoch,
                        touched: Default::default(),
                    },
                );
            }
            self.wal.append(&encode_slot_out(&fresh))
        };
        lsn.and_then(|lsn| self.wal.wait(lsn))
            .map_err(|e| NodeError::Recovery(format!("the backup log's SLOT_OUT: {e}")))?;
        Ok(())
    }

    /// The answer to a request stored here: STORED, unless answers are
    /// being lost on purpose ([`Backup::lose_acks`]).
    fn answer(&self) -> std::result::Result<Vec<u8>, String> {
        let lost = self
            .lose_acks
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok();
        if lost {
            return Err(format!(
                "server {}: the answer was lost (a fault injected by a test)",
                self.me
            ));
        }
        Ok(vec![STORED])
    }

    /// A handover's snapshot at the slots' old primary (H3): `lists` (per
    /// slot, its vertices' lists) replace whatever the map held of those
    /// slots, durably in the backup log (SLOT_OUT, then the lists) before
    /// it returns.
    pub(crate) fn snapshot(&self, lists: HashMap<u32, HashMap<u32, Vec<u32>>>) -> Result<()> {
        let mut slots: Vec<u32> = lists.keys().copied().collect();
        slots.sort_unstable();
        let lsn = {
            let mut map = self.map();
            let log = |e: locus_wal::WalError| {
                NodeError::Recovery(format!("the backup log's handover snapshot: {e}"))
            };
            let mut lsn = self.wal.append(&encode_slot_out(&slots)).map_err(log)?;
            let mut all: Vec<(u32, &[u32])> = lists
                .values()
                .flat_map(|l| l.iter().map(|(v, l)| (*v, l.as_slice())))
                .collect();
            all.sort_unstable_by_key(|(v, _)| *v);
            if !all.is_empty() {
                lsn = self
                    .wal
                    .append(&encode_record(all.into_iter()))
                    .map_err(log)?;
            }
            for (s, l) in lists {
                map.lists.insert(s, l);
            }
            lsn
        };
        self.wal
            .wait(lsn)
            .map_err(|e| NodeError::Recovery(format!("the backup log's handover snapshot: {e}")))
    }

    /// Drops `slots` from the map, their SLOT_OUT durable (a handover given
    /// up: its snapshot goes).
    pub(crate) fn forget(&self, slots: &[u32]) -> Result<()> {
        if slots.is_empty() {
            return Ok(());
        }
        let lsn = {
            let mut map = self.map();
            for s in slots {
                map.lists.remove(s);
            }
            self.wal.append(&encode_slot_out(slots))
        };
        lsn.and_then(|lsn| self.wal.wait(lsn))
            .map_err(|e| NodeError::Recovery(format!("the backup log's SLOT_OUT: {e}")))
    }

    /// Slots held here.
    pub(crate) fn slots(&self) -> Vec<u32> {
        let mut s: Vec<u32> = self.map().lists.keys().copied().collect();
        s.sort_unstable();
        s
    }

    /// `v`'s list as this backup holds it (a stale-ok read): None if it
    /// holds no list of `v`.
    pub(crate) fn list(&self, v: u32) -> Option<Vec<u32>> {
        let s = self.homes.slot_of(v);
        self.map().lists.get(&s)?.get(&v).cloned()
    }

    /// PROMOTE's part here: from now on refuses records of `slots`, copies
    /// their lists, runs `put` on the copy (it logs them in the main log
    /// and puts them in the key table, without the map's lock: it may
    /// yield), then drops the slots from the map and makes their SLOT_OUT
    /// durable in the backup log, before the caller installs the table
    /// that names this machine (a restart then never promotes them again
    /// over updates taken since). If `put` fails the slots stay here.
    pub(crate) fn hand_over<R>(
        &self,
        slots: &[u32],
        put: impl FnOnce(&HashMap<u32, Vec<u32>>) -> Result<R>,
    ) -> Result<R> {
        let lists: HashMap<u32, Vec<u32>> = {
            let mut map = self.map();
            map.promoting.extend(slots.iter().copied());
            slots
                .iter()
                .filter_map(|s| map.lists.get(s))
                .flat_map(|l| l.iter().map(|(v, l)| (*v, l.clone())))
                .collect()
        };
        let r = put(&lists);
        let (r, lsn) = {
            let mut map = self.map();
            for s in slots {
                map.promoting.remove(s);
            }
            let r = r?;
            for s in slots {
                map.lists.remove(s);
            }
            (r, self.wal.append(&encode_slot_out(slots)))
        };
        lsn.and_then(|lsn| self.wal.wait(lsn))
            .map_err(|e| NodeError::Recovery(format!("the backup log's SLOT_OUT: {e}")))?;
        Ok(r)
    }

    /// Drops slots the installed table no longer has this machine back or
    /// own (a backup removed, or a slot moved), logging their SLOT_OUT.
    pub(crate) fn drop_unbacked(&self) -> Result<usize> {
        let t = self.homes.current();
        let (gone, lsn) = {
            let mut map = self.map();
            // A learning ends with any newer table (the rejoin's commit, or
            // a change that makes its commit fail).
            map.learning.retain(|_, l| l.table_epoch == t.epoch());
            let gone: Vec<u32> = map
                .lists
                .keys()
                .copied()
                .filter(|&s| {
                    !t.is_backup(s, self.me)
                        && t.owner_of_slot(s) != Some(self.me)
                        && !map.learning.contains_key(&s)
                })
                .collect();
            if gone.is_empty() {
                return Ok(0);
            }
            for s in &gone {
                map.lists.remove(s);
            }
            (gone.len(), self.wal.append(&encode_slot_out(&gone)))
        };
        lsn.and_then(|lsn| self.wal.wait(lsn))
            .map_err(|e| NodeError::Recovery(format!("the backup log's SLOT_OUT: {e}")))?;
        Ok(gone)
    }

    /// Writes a checkpoint of the map and drops the log before it (nothing
    /// if nothing was logged since the last one).
    pub(crate) fn checkpoint(&self) -> Result<u64> {
        // Under the lock (no record lands between the rotation and the
        // copy); the checkpoint's writes do not yield.
        let map = self.map();
        let lsn = self.wal.last_lsn();
        if lsn == self.checkpoint_lsn.load(Ordering::Acquire) {
            return Ok(0);
        }
        let first = self.wal.rotate()?;
        let mut ck = self.wal.checkpoint_writer(first)?;
        for lists in map.lists.values() {
            for (v, l) in lists {
                ck.entry(&encode_record(std::iter::once((*v, l.as_slice()))))?;
            }
        }
        let n = ck.entries();
        ck.commit()?;
        self.wal.remove_segments_before(first)?;
        self.checkpoint_lsn.store(lsn, Ordering::Release);
        Ok(n)
    }

    /// Counters for STATS.
    pub(crate) fn stats_json(&self) -> serde_json::Value {
        let map = self.map();
        serde_json::json!({
            "slots": map.lists.len(),
            "learning_slots": map.learning.len(),
            "vertices": map.lists.values().map(|m| m.len()).sum::<usize>(),
            "entries_stored": self.stored.load(Ordering::Relaxed),
            "requests_refused": self.refused.load(Ordering::Relaxed),
            "request_batches": self.batches.load(Ordering::Relaxed),
            "requests_in_batches": self.batched.load(Ordering::Relaxed),
            "log_groups": self.wal.stats().groups.load(Ordering::Relaxed),
            "log_syncs": self.wal.stats().syncs.load(Ordering::Relaxed),
        })
    }
}

impl locus_store::NodeHandler for Backup {
    fn handle(&self, from: MachineId, bytes: &[u8]) -> std::result::Result<Vec<u8>, String> {
        self.take(from, bytes).and_then(|()| self.answer())
    }

    fn handle_many(
        &self,
        requests: &[(MachineId, &[u8])],
    ) -> Vec<std::result::Result<Vec<u8>, String>> {
        self.take_many(requests)
            .into_iter()
            .map(|r| r.and_then(|()| self.answer()))
            .collect()
    }
}

#[cfg(test)]
mod tests;
