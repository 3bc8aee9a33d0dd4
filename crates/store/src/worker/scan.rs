//! The value-region scan's I/O (the decision and its invariants S1-S4 are in
//! [`crate::scan`]): list this machine's allocated blocks, read every
//! machine's key table one-sidedly, exclude replicas and reclaim-ring
//! entries, and free what the [`Scanner`] says.

use std::collections::HashSet;
use std::sync::Arc;

use locus_fabric::{Fabric, MachineId, Port};

use super::Worker;
use crate::addr::Addr;
use crate::reclaim::{Collector, CollectorConfig};
use crate::scan::{ScanReport, Scanner};
use crate::Result;

impl<F: Fabric> Worker<F> {
    /// One round of the value-region scan on this worker's machine. An error
    /// (a peer's table could not be read) leaves everything as it was (S4).
    pub fn scan_values(&mut self, scanner: &mut Scanner) -> Result<ScanReport> {
        let me = self.machine;
        let shared = Arc::clone(&self.shared);
        let alloc = shared.alloc(me)?;
        let now = self.port.now_ns();
        let blocks = alloc.live_blocks();
        let mut referenced = HashSet::new();
        for m in 0..shared.machines as MachineId {
            for (_, word) in self.scan_table(m)? {
                if let Some(a) = Addr::decode(word) {
                    if a.holder(m) == me {
                        referenced.insert(a.offset_units());
                    }
                }
            }
        }
        let mut excluded = HashSet::new();
        if let Some(set) = shared.replica_sets[me as usize].as_ref() {
            for (_, w) in set.snapshot() {
                if let Some(a) = Addr::decode(w) {
                    excluded.insert(a.offset_units());
                }
            }
        }
        // Blocks an open snapshot keeps for its pre-images (design S3): no
        // word names them, and they must outlive the snapshot.
        for snap in shared.snapshots.iter().flatten() {
            excluded.extend(snap.pinned_offsets(me));
        }
        // The ring and the collector's FIFO, read under the collector's lock
        // and freed under it too (S3): the collector cannot take an entry
        // between the read and the free.
        let Some(slot) = shared.collectors[me as usize].as_ref() else {
            let (free, r) = scanner.round(now, &blocks, &referenced, &excluded);
            return Ok(self.free_scanned(scanner, free, r));
        };
        // Held by a collection across its fabric operations: spin through
        // `relax`, never block (a simulation runs one actor at a time, and
        // would hang on a lock its holder cannot run to release).
        let mut guard = loop {
            match slot.try_lock() {
                Ok(g) => break g,
                Err(std::sync::TryLockError::Poisoned(p)) => break p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => self.port.relax(),
            }
        };
        if guard.is_none() {
            let (region, layout) = crate::reclaim::lookup(&shared.fabric, me)?;
            let config = CollectorConfig {
                lease_ns: shared.config.reclaim_lease_ms * 1_000_000,
                ..CollectorConfig::default()
            };
            *guard = Some(Collector::open(&mut self.port, region, layout, config)?);
        }
        let collector = guard.as_ref().expect("opened above");
        for w in collector.pending_words() {
            if let Some(a) = Addr::decode(w) {
                excluded.insert(a.offset_units());
            }
        }
        let (region, layout) = (collector.region(), collector.layout());
        let c = crate::reclaim::read_counters(&mut self.port, me, region)?;
        let mut t = c.head.max(collector.head());
        let mut buf = vec![0u8; 8];
        while t < c.tail {
            self.port
                .read(me, region, layout.slot_offset(t), &mut buf)?;
            let w = u64::from_le_bytes(buf[..8].try_into().expect("8 bytes"));
            if let Some(a) = Addr::decode(w) {
                excluded.insert(a.offset_units());
            }
            t += 1;
        }
        let (free, r) = scanner.round(now, &blocks, &referenced, &excluded);
        let r = self.free_scanned(scanner, free, r);
        drop(guard);
        Ok(r)
    }

    /// Frees the blocks a scan round chose: zeroes each header first (a bug
    /// that left an address of it shows as an invalidated value, never as
    /// another key's data), then frees it if it is still that allocation.
    fn free_scanned(
        &mut self,
        scanner: &mut Scanner,
        free: Vec<crate::alloc::LiveBlock>,
        mut r: ScanReport,
    ) -> ScanReport {
        let me = self.machine;
        let shared = Arc::clone(&self.shared);
        let Ok(alloc) = shared.alloc(me) else {
            return r;
        };
        let vr = self.values_region(me);
        for b in free {
            // Only a stalled thread could free it meanwhile (module doc of
            // `crate::scan`); check first so the zero never hits a new value.
            if !alloc.is_current(&b) {
                continue;
            }
            if self.port.write_word(me, vr, b.offset_units * 8, 0).is_err() {
                continue; // our own memory; cannot fail short of a shutdown
            }
            if alloc.free_if_unchanged(&b) {
                r.freed += 1;
                r.freed_bytes += crate::alloc::block_units(b.size_units) * 8;
            }
        }
        scanner.freed_total += r.freed;
        r
    }
}

impl<F: Fabric> Worker<F> {
    /// Checks, for tests, that every address word of every machine's table
    /// names a block its holder's allocator has allocated and not retired
    /// (the scan's safety: "a block in use is never freed"). Needs every
    /// machine hosted by this process. Returns one line per violation.
    pub fn audit_references(&mut self) -> Result<Vec<String>> {
        let shared = Arc::clone(&self.shared);
        let mut bad = Vec::new();
        for m in 0..shared.machines as MachineId {
            for (k, word) in self.scan_table(m)? {
                let Some(a) = Addr::decode(word) else {
                    continue;
                };
                let holder = a.holder(m);
                let alloc = shared.alloc(holder)?;
                if !alloc.holds(a.offset_units()) {
                    bad.push(format!(
                        "key {k:?} at machine {m} names unit {} of machine {holder}, which is free or retired",
                        a.offset_units()
                    ));
                }
            }
        }
        Ok(bad)
    }
}
