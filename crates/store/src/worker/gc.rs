//! Reclaim-ring appends and garbage collection (Pragh 4.1, footnotes 4-5):
//! retired blocks of other machines go to their holders' rings in bulk; each
//! machine frees its own retired blocks, and those its ring received, a
//! reclaim lease after they were retired.

use std::sync::Arc;

use locus_fabric::{Fabric, MachineId, Port, RegionId};

use super::Worker;
use crate::addr::Addr;
use crate::reclaim::{Collector, CollectorConfig, RingLayout};
use crate::Result;

impl<F: Fabric> Worker<F> {
    /// Appends the queued retired blocks to their holders' reclaim rings,
    /// reserving a run of slots with one CAS per holder and writing the run
    /// with one or two WRITEs (two when it wraps). Waits while a ring is full
    /// (back-pressure; the owner's GC drains it).
    pub(super) fn flush_reclaims(&mut self) -> Result<()> {
        let mut queue = std::mem::take(&mut self.reclaim_queue);
        if self.lose_reclaims {
            return Ok(()); // fault injection: as if this machine died here
        }
        queue.sort_by_key(|e| e.0);
        for group in queue.chunk_by(|a, b| a.0 == b.0) {
            let holder = group[0].0;
            let (region, layout) = self.ring_of(holder)?;
            let mut rest: Vec<u64> = group.iter().map(|e| e.1).collect();
            while !rest.is_empty() {
                let c = crate::reclaim::read_counters(&mut self.port, holder, region)?;
                let used = c.tail.saturating_sub(c.head).min(layout.capacity);
                let room = layout.capacity - used;
                if room == 0 {
                    self.stats.reclaim_waits += 1;
                    self.port.relax();
                    continue;
                }
                let k = (rest.len() as u64).min(room);
                let tail = c.tail;
                let prev =
                    self.port
                        .cas(holder, region, crate::reclaim::TAIL_OFFSET, tail, tail + k)?;
                if prev != tail {
                    continue;
                }
                // Slots tail..tail+k are ours: write them, in at most two runs.
                let taken: Vec<u64> = rest.drain(..k as usize).collect();
                let mut t = tail;
                let mut at = 0usize;
                while at < taken.len() {
                    let first = t % layout.capacity;
                    let run = ((layout.capacity - first) as usize).min(taken.len() - at);
                    let mut bytes = Vec::with_capacity(run * 8);
                    for e in &taken[at..at + run] {
                        bytes.extend_from_slice(&e.to_le_bytes());
                    }
                    self.port
                        .write(holder, region, layout.slot_offset(t), &bytes)?;
                    t += run as u64;
                    at += run;
                }
            }
        }
        Ok(())
    }

    /// Fault injection for tests of the value-region scan: with `on`, this
    /// worker's migrations CAS and invalidate as usual but never append the
    /// old block to its holder's reclaim ring, as if the migrating machine
    /// died between the two (Pragh 5's leak). The block leaks until the scan
    /// ([`Worker::scan_values`]) frees it.
    pub fn inject_lost_reclaims(&mut self, on: bool) {
        self.lose_reclaims = on;
    }

    pub(super) fn ring_of(&mut self, machine: MachineId) -> Result<(RegionId, RingLayout)> {
        match self.shared.rings[machine as usize].get() {
            Some(r) => Ok(*r),
            None => {
                let r = crate::reclaim::lookup(&self.shared.fabric, machine)?;
                Ok(*self.shared.rings[machine as usize].get_or_init(|| r))
            }
        }
    }

    /// Garbage collection on this worker's machine: frees the blocks this
    /// machine retired itself, and those other machines appended to its
    /// reclaim ring, once the reclaim lease has passed. Returns blocks freed.
    pub fn collect_garbage(&mut self) -> Result<usize> {
        let me = self.machine;
        let shared = Arc::clone(&self.shared);
        let Some(alloc) = shared.allocs[me as usize].as_ref() else {
            return Ok(0);
        };
        // A snapshot open too long is ended here too, with no caller (S3's bound).
        self.snapshot_expire()?;
        let mut freed = alloc.collect(self.port.now_ns());
        let Some(slot) = shared.collectors[me as usize].as_ref() else {
            return Ok(freed);
        };
        // One collector per machine; if another thread is collecting, leave it to it.
        let mut guard = match slot.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return Ok(freed),
        };
        if guard.is_none() {
            let (region, layout) = crate::reclaim::lookup(&shared.fabric, me)?;
            let config = CollectorConfig {
                lease_ns: shared.config.reclaim_lease_ms * 1_000_000,
                ..CollectorConfig::default()
            };
            *guard = Some(Collector::open(&mut self.port, region, layout, config)?);
        }
        let collector = guard.as_mut().expect("opened above");
        let mut entries = Vec::new();
        let now = self.port.now_ns();
        collector.collect(&mut self.port, now, &mut entries)?;
        for e in entries {
            if let Some(a) = Addr::decode(e) {
                alloc.free_now(a.offset_units(), a.size_units());
                freed += 1;
            }
        }
        Ok(freed)
    }
}
