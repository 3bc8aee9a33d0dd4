//! The driver of migrations: carries out the steps of [`MigrateJob`]s
//! (`crate::migrate`, which holds the protocol and its state diagram) on this
//! worker's port, for one key or for a window of keys whose one-sided
//! operations overlap (Pragh 5, "Optimizations"). `migrate(k)` is a batch of one.

use std::sync::Arc;

use locus_fabric::{Fabric, MachineId, Port, WorkRequest};

use super::{Worker, PIPELINE_WINDOW, READ_RETRIES_MAX};
use crate::alloc::ValueAllocator;
use crate::block::Unpublished;
use crate::migrate::{Access, Cached, MigrateJob, Migration, Outcome, Restart, Step};
use crate::snapshot::Kept;
use crate::table::{Key, BUCKET_BYTES};
use crate::{Result, StoreError, VertexId};

/// A moved key's new address for the location cache: `(key, word,
/// position of the address word, stamp)`, as [`crate::cache::LocationCache::insert_many_at`] takes it.
type Remembered = (Key, u64, u64, u64);

/// What a pass over a batch's completions gathers, and when it began.
struct Pass<'p> {
    /// The clock when the pass began (see `run_batch`).
    now_ns: u64,
    /// Requests to post together before the next wait.
    posts: &'p mut Vec<WorkRequest>,
    /// Keys moved here, to cache together at the batch's end.
    moved: &'p mut Vec<Remembered>,
}

/// One job of a batch, with the copy it allocated (if any).
struct InFlight<'a> {
    /// The key's index in the batch.
    index: usize,
    job: MigrateJob,
    block: Option<Unpublished<'a>>,
    /// The address word its last restarts found naming an invalidated
    /// copy, and since when (the clock of the pass).
    stuck_on: Option<(u64, u64)>,
}

impl<F: Fabric> Worker<F> {
    /// MIGRATE (Pragh 4.1, Fig. 6): moves `key`'s value into this machine's
    /// value region, alone, with one-sided operations; the holder's and the
    /// home's threads take no part. See [`crate::migrate`] for the steps and
    /// why the old copy is invalidated before the CAS that publishes the new one.
    pub fn migrate(&mut self, key: Key) -> Result<Migration> {
        let mut r = self.migrate_batch(std::slice::from_ref(&key))?;
        Ok(r.pop().expect("one result per key"))
    }

    /// Migrates many keys here with their one-sided operations pipelined
    /// (Pragh 5): up to [`PIPELINE_WINDOW`] jobs are in flight at once, each
    /// with one operation posted, so one thread keeps the network busy
    /// instead of waiting out one round trip per step. The requests a pass over
    /// the completions makes are prefetched as they are made and posted
    /// together before the next wait ([`Port::prefetch`]: on the in-process
    /// fabric the copy a NIC would make then finds its bytes cached). The old blocks go to
    /// their holders' reclaim rings in bulk at the end. Returns what happened
    /// to each key, in order.
    ///
    /// On an error the port is drained first; copies never published are
    /// freed, copies whose CAS was in flight are leaked (it may have been
    /// applied), and the old blocks of keys already moved still reach their rings.
    pub fn migrate_batch(&mut self, keys: &[Key]) -> Result<Vec<Migration>> {
        let shared = Arc::clone(&self.shared);
        let alloc = shared.alloc(self.machine)?;
        let mut results: Vec<Option<Migration>> = vec![None; keys.len()];
        // A fixed set of slots; a slot's index is the id of its job's one
        // operation in flight, and a slot is reused only once its job is done.
        let window = PIPELINE_WINDOW.min(keys.len());
        let mut slots: Vec<Option<InFlight<'_>>> = (0..window).map(|_| None).collect();
        let mut moved = Vec::with_capacity(keys.len());
        let r = self.run_batch(keys, alloc, &mut slots, &mut results, &mut moved);
        // The new addresses are cached together (Pragh 4.1's target caches
        // each one), whatever the batch's end: they are published.
        self.remember_many(&mut moved);
        if let Err(e) = r {
            self.drain_all();
            drop(slots);
            // Blocks of keys already published must still reach their rings.
            let _ = self.flush_reclaims();
            return Err(e);
        }
        self.flush_reclaims()?;
        Ok(results
            .into_iter()
            .map(|m| m.expect("every key finished"))
            .collect())
    }

    fn run_batch<'a>(
        &mut self,
        keys: &[Key],
        alloc: &'a ValueAllocator,
        slots: &mut [Option<InFlight<'a>>],
        results: &mut [Option<Migration>],
        moved: &mut Vec<Remembered>,
    ) -> Result<()> {
        let (me, layout) = (self.machine, self.shared.layout);
        let lease_ns = self.shared.config.reclaim_lease_ms * 1_000_000;
        let mut next = 0;
        let mut active = 0;
        let mut done = Vec::new();
        // Requests of this pass, posted together before the wait (one
        // doorbell, as an RDMA driver posts a list): each is prefetched when
        // it is made, so the fabric's copy of it finds its bytes cached.
        let mut posts: Vec<WorkRequest> = Vec::with_capacity(slots.len());
        // Empty slots, so a refill after a wait visits only those, not the
        // whole window.
        let mut free: Vec<usize> = (0..slots.len()).rev().collect();
        // The clock, read once per pass (a reading costs ~12 ns on this VM,
        // and a migration took five). It stamps what may be stamped early: a
        // job's start (a time before the READ that finds its address word),
        // an allocation (the scan spares blocks younger than a lease, so an
        // early stamp by a pass's length of a lease's 60 s is harmless) and
        // the CAS (the new address's cache entry must be stamped before it).
        // The lease check before an invalidation reads the clock afresh.
        let mut pass_ns = self.port.now_ns();
        loop {
            while next < keys.len() {
                let Some(id) = free.pop() else { break };
                let slot = &mut slots[id];
                while slot.is_none() && next < keys.len() {
                    let key = keys[next];
                    let mut f = InFlight {
                        index: next,
                        job: MigrateJob::new(key, me, self.home(key), layout, lease_ns),
                        block: None,
                        stuck_on: None,
                    };
                    next += 1;
                    let step = f.job.start(self.cached_address(key, pass_ns), pass_ns)?;
                    // A job can finish without posting (no value, or here already).
                    let mut pass = Pass {
                        now_ns: pass_ns,
                        posts: &mut posts,
                        moved,
                    };
                    match self.drive(&mut f, id, step, alloc, &mut pass)? {
                        Some(m) => results[f.index] = Some(m),
                        None => {
                            *slot = Some(f);
                            active += 1;
                        }
                    }
                }
                if slot.is_none() {
                    free.push(id); // the keys ran out
                }
            }
            self.port.post_many(&mut posts)?;
            if active == 0 {
                return Ok(());
            }
            done.clear();
            self.port.wait(&mut done)?;
            pass_ns = self.port.now_ns();
            for c in done.drain(..) {
                let id = c.id as usize;
                let f = slots[id].as_mut().expect("a completion for a live job");
                // Only the invalidation's completion wants the clock here
                // (its CAS is stamped); the check's is read in `drive`.
                let step = f.job.on_completion(c.result?, pass_ns)?;
                if let Some(b) = f.job.take_spare() {
                    self.keep(b);
                }
                let mut pass = Pass {
                    now_ns: pass_ns,
                    posts: &mut posts,
                    moved,
                };
                if let Some(m) = self.drive(f, id, step, alloc, &mut pass)? {
                    results[f.index] = Some(m);
                    slots[id] = None;
                    free.push(id);
                    active -= 1;
                }
            }
        }
    }

    /// Carries out `step` and the ones that follow it without I/O, until the
    /// job has an operation to post (`None`: prefetched and added to
    /// `posts`, which the caller posts before it waits) or finishes (its result).
    #[inline]
    fn drive<'a>(
        &mut self,
        f: &mut InFlight<'a>,
        id: usize,
        mut step: Step,
        alloc: &'a ValueAllocator,
        pass: &mut Pass<'_>,
    ) -> Result<Option<Migration>> {
        loop {
            step = match step {
                Step::Post(access) => {
                    if matches!(access, Access::Publish { .. }) {
                        f.block
                            .as_mut()
                            .expect("a copy is allocated before its CAS")
                            .publishing();
                    }
                    // A READ of this machine's own memory (a copy's header)
                    // costs no round trip: a load, at once. The rest go with
                    // the pass, each prefetched (its first lines) as it is made.
                    if let Access::ReadOwnHeader { offset_units } = access {
                        let vr = self.values_region(self.machine);
                        let word = self.port.read_word(self.machine, vr, offset_units * 8)?;
                        let now = if f.job.wants_clock() {
                            self.port.now_ns()
                        } else {
                            0
                        };
                        f.job.on_own_header(word, now)?
                    } else {
                        let wr = self.work_request(id as u64, access);
                        self.port.prefetch(&wr);
                        pass.posts.push(wr);
                        return Ok(None);
                    }
                }
                Step::Alloc { size_units } => {
                    let block = Unpublished::alloc(alloc, size_units, pass.now_ns)?;
                    let offset = block.offset_units();
                    f.block = Some(block);
                    f.job.on_allocated(offset)?
                }
                Step::Restart(why) => {
                    // A copy that read an invalidated value, lost its CAS or
                    // outlived half a lease is never published.
                    if let Some(b) = f.block.take() {
                        debug_assert!(why != Restart::StaleCache);
                        b.refused();
                    }
                    match why {
                        Restart::Conflict => self.stats.migrate_conflicts += 1,
                        Restart::Expired => self.stats.migrate_expired += 1,
                        Restart::StaleCache | Restart::Invalidated => {}
                    }
                    let key = f.job.key();
                    // The word read is stale (or about to be): drop it if cached.
                    if let (Some(c), Some(w)) = (
                        self.cache(),
                        super::cache_form(self.home(key), f.job.seen_word()),
                    ) {
                        c.remove_if(key, w);
                    }
                    // A value left invalidated (a migration whose target died
                    // between invalidating it and publishing its copy, F5)
                    // restarts the job on the same address word for as long
                    // as it stays so: only Pragh 5 at its home repairs it.
                    // Give up after the read stall on one word, as a read
                    // does, so the thread running this job (a server's
                    // service) goes back to its other work.
                    let seen = f.job.seen_word();
                    let stalled = match (why, f.stuck_on) {
                        (Restart::Invalidated, Some((w, since))) if w == seen => {
                            pass.now_ns.saturating_sub(since) > self.shared.config.read_stall_ns()
                        }
                        (Restart::Invalidated, _) => {
                            f.stuck_on = Some((seen, pass.now_ns));
                            false
                        }
                        _ => {
                            f.stuck_on = None;
                            false
                        }
                    };
                    if f.job.restarts() >= READ_RETRIES_MAX || stalled {
                        return Err(StoreError::Contention {
                            key: key.0,
                            retries: f.job.restarts(),
                        });
                    }
                    let cached = self.cached_address(key, pass.now_ns);
                    f.job.start(cached, pass.now_ns)?
                }
                Step::Done(outcome) => {
                    if let Outcome::Moved(p) = outcome {
                        f.block.take().expect("a published copy").published();
                        pass.moved
                            .push((f.job.key(), p.new_word, p.addr_offset, p.cas_ns));
                        // The old copy goes to its holder's ring unless
                        // an open snapshot keeps it as a pre-image (S3).
                        let key = f.job.key();
                        let home = self.home(key);
                        match self.snapshot_keeps(key, home, f.job.seen_word(), p.from, p.old_entry)
                        {
                            Kept::No => self.reclaim_queue.push((p.from, p.old_entry)),
                            // A write of the key recorded this word, then
                            // lost its CAS to this MIGRATE: the race S3 is for.
                            Kept::Recorded => self.stats.snapshot_migrate_races += 1,
                            Kept::RecordedNow => {}
                        }
                        self.stats.migrated += 1;
                    }
                    return Ok(Some(outcome.migration()));
                }
            };
        }
    }

    /// Caches the new addresses of keys moved here whose home is elsewhere.
    fn remember_many(&mut self, moved: &mut Vec<Remembered>) {
        let me = self.machine;
        moved.retain(|m| self.home(m.0) != me);
        if let Some(c) = self.cache() {
            c.insert_many_at(moved);
        }
        moved.clear();
    }

    /// The location cache's entry for `key`, if the cache is used for
    /// lookups and has a live entry with the position of the address word.
    #[inline]
    fn cached_address(&self, key: Key, now_ns: u64) -> Option<Cached> {
        // A key homed here is looked up in the local table: an entry cached
        // while another server homed it names a place in that server's.
        if !self.shared.config.cache_lookups || self.home(key) == self.machine {
            return None;
        }
        let (word, position, stamped_ns) = self.cache()?.get_stamped(key, now_ns)?;
        (position != u64::MAX).then_some(Cached {
            word: super::table_form(self.home(key), word),
            position,
            stamped_ns,
        })
    }

    /// The fabric request for a job's access, with id `id`.
    #[inline]
    pub(super) fn work_request(&mut self, id: u64, access: Access) -> WorkRequest {
        let me = self.machine;
        match access {
            Access::ReadBucket { home, offset } => {
                let buf = self.buffer(BUCKET_BYTES as usize);
                WorkRequest::read_into(id, home, self.keys_region(home), offset, buf)
            }
            Access::ReadOwnHeader { .. } => {
                unreachable!("a job's own header is read with a load (drive)")
            }
            Access::ReadValue {
                holder,
                offset_units,
                size_units,
                into_units,
            } => WorkRequest::read_to(
                id,
                holder,
                self.values_region(holder),
                offset_units * 8,
                self.values_region(me),
                into_units * 8,
                size_units * 8,
            ),
            Access::Invalidate {
                holder,
                offset_units,
            } => {
                let mut zero = self.buffer(8);
                zero.fill(0);
                let vr = self.values_region(holder);
                WorkRequest::write(id, holder, vr, offset_units * 8, zero)
            }
            Access::Publish {
                home,
                offset,
                expected,
                new,
            } => WorkRequest::cas(id, home, self.keys_region(home), offset, expected, new),
        }
    }

    /// Migrates every part of vertex `v` here. Returns how many parts moved.
    pub fn migrate_vertex(&mut self, v: VertexId) -> Result<u32> {
        Ok(self.migrate_vertex_report(v)?.parts)
    }

    /// Migrates every part of vertex `v` here, saying what moved.
    pub fn migrate_vertex_report(&mut self, v: VertexId) -> Result<VertexMoved> {
        let mut r = VertexMoved::default();
        let mut part = 0;
        loop {
            match self.migrate(Key::part(v, part))? {
                Migration::Absent => return Ok(r),
                Migration::Moved { from, bytes } => {
                    r.parts += 1;
                    r.bytes += bytes;
                    r.from.get_or_insert(from);
                }
                Migration::AlreadyHere => {}
            }
            r.found = true;
            if self.read_value(Key::part(v, part))?.is_none() || !self.current_part().more() {
                return Ok(r);
            }
            part += 1;
        }
    }
}

/// What [`Worker::migrate_vertex_report`] moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VertexMoved {
    /// Whether the vertex has an entry.
    pub found: bool,
    /// Parts moved (0: all were here already).
    pub parts: u32,
    /// Bytes copied (headers included).
    pub bytes: u64,
    /// The holder of the first part that moved.
    pub from: Option<MachineId>,
}
