//! Hosted machines and the port-side region handle cache: the bookkeeping
//! that every fabric holding memory in this process shares.
//!
//! The in-process fabric ([`crate::local`]), the simulated fabric
//! ([`crate::sim`]) and a TCP node ([`crate::tcp`]) each keep some machines'
//! memory here, a [`MachineMemory`] (named regions plus inbox) per machine.
//! [`Hosted`] is that bookkeeping, written once: which machines the cluster
//! has and which of them are here, registering and looking up named regions,
//! and putting messages into and taking them out of inboxes, with the same
//! checks in the same order and the same errors on every fabric. The local and
//! simulated fabrics host every machine; a TCP node hosts the ones its config
//! lists.
//!
//! [`RegionCache`] is what a port embeds to reach regions without the
//! machine's region lock or a reference-count update per operation: it
//! resolves `(machine, RegionId)` once and keeps the handle. Regions are
//! unregistered only by a crash of their machine (the local and simulated
//! fabrics), which marks them gone: the cache checks that flag, on the
//! region's line that every access reads anyway, lets a gone region go and
//! resolves the id again: a restarted machine registers its regions from
//! id 0 again, as a restarted TCP node does (fencing keeps a peer that has
//! not learned of the restart away from them).
//!
//! Shared because they were copies: two fabrics with their own copy can drift
//! apart (a check, an error message, an order of checks), and the conformance
//! suite and the simulation's determinism rely on their being the same. What
//! differs between fabrics stays in them: the local fabric's time model, the
//! simulation's scheduler and pending-request reordering, the TCP fabric's
//! routing to remote nodes. The limits every such fabric validates
//! ([`check_machine_count`], [`check_queue_limits`], [`check_inflight`]) live
//! here too, so every config reports them with the same words.

use std::sync::Arc;

use crate::memory::{apply_on, apply_region, gone, read_to, MachineMemory, VerbRef};
use crate::{
    check_machine, FabricError, MachineId, Message, Output, Region, RegionId, RegionInfo, Result,
    Verb, MACHINES_MAX,
};

/// Rejects a cluster size outside `1..=MACHINES_MAX`.
pub(crate) fn check_machine_count(machines: usize) -> Result<()> {
    if machines == 0 || machines > MACHINES_MAX {
        return Err(FabricError::Config(format!(
            "machines = {machines} but must be 1..={MACHINES_MAX}"
        )));
    }
    Ok(())
}

/// Rejects a zero port window, inbox or message limit.
pub(crate) fn check_queue_limits(
    inflight_ops_max: usize,
    inbox_messages_max: usize,
    message_bytes_max: usize,
) -> Result<()> {
    if inflight_ops_max == 0 || inbox_messages_max == 0 || message_bytes_max == 0 {
        return Err(FabricError::Config(
            "inflight_ops_max, inbox_messages_max and message_bytes_max must be positive".into(),
        ));
    }
    Ok(())
}

/// Refuses one more posted request when a port has `inflight` of at most `limit`.
#[inline]
pub(crate) fn check_inflight(inflight: usize, limit: usize) -> Result<()> {
    if inflight >= limit {
        return Err(FabricError::TooManyInflight { inflight, limit });
    }
    Ok(())
}

/// The machines of a cluster whose memory this process holds.
#[derive(Debug)]
pub(crate) struct Hosted {
    /// One slot per machine of the cluster; `Some` for the machines held here.
    memories: Vec<Option<MachineMemory>>,
    /// Largest message payload.
    message_bytes_max: usize,
}

impl Hosted {
    /// Every machine of a `machines`-machine cluster (the local and simulated fabrics).
    pub(crate) fn all(
        machines: usize,
        inbox_messages_max: usize,
        message_bytes_max: usize,
        pin_memory: bool,
    ) -> Hosted {
        Hosted::some(
            machines,
            (0..machines).map(|m| m as MachineId),
            inbox_messages_max,
            message_bytes_max,
            pin_memory,
        )
    }

    /// The machines `hosted` of a `machines`-machine cluster (a TCP node).
    /// Configs validate both first, so a bad one is a bug.
    pub(crate) fn some(
        machines: usize,
        hosted: impl IntoIterator<Item = MachineId>,
        inbox_messages_max: usize,
        message_bytes_max: usize,
        pin_memory: bool,
    ) -> Hosted {
        assert!(
            (1..=MACHINES_MAX).contains(&machines),
            "a cluster of {machines} machines passed validation"
        );
        let mut memories: Vec<Option<MachineMemory>> = (0..machines).map(|_| None).collect();
        for m in hosted {
            let slot = &mut memories[m as usize];
            assert!(slot.is_none(), "machine {m} hosted twice");
            *slot = Some(MachineMemory::new(m, inbox_messages_max, pin_memory));
        }
        Hosted {
            memories,
            message_bytes_max,
        }
    }

    /// Machines in the cluster (hosted here or not).
    #[inline]
    pub(crate) fn count(&self) -> usize {
        self.memories.len()
    }

    /// Whether `machine`'s memory is here.
    pub(crate) fn hosts(&self, machine: MachineId) -> bool {
        self.get(machine).is_some()
    }

    /// The memory of `machine` if it is here (`None` outside the cluster too).
    #[inline]
    pub(crate) fn get(&self, machine: MachineId) -> Option<&MachineMemory> {
        self.memories.get(machine as usize)?.as_ref()
    }

    /// The memory of `machine`: [`FabricError::NoSuchMachine`] outside the
    /// cluster, [`FabricError::NotHosted`] if another process holds it.
    #[inline]
    pub(crate) fn memory(&self, machine: MachineId) -> Result<&MachineMemory> {
        check_machine(machine, self.count())?;
        self.get(machine).ok_or(FabricError::NotHosted { machine })
    }

    /// [`Hosted::memory`] for a fabric that may be a view of one machine
    /// (`only`: a node of the cluster, see `hosting_only` on the local and
    /// simulated fabrics): another machine is [`FabricError::NotHosted`].
    #[inline]
    pub(crate) fn memory_for(
        &self,
        machine: MachineId,
        only: Option<MachineId>,
    ) -> Result<&MachineMemory> {
        let memory = self.memory(machine)?;
        match only {
            Some(m) if m != machine => Err(FabricError::NotHosted { machine }),
            _ => Ok(memory),
        }
    }

    /// Whether `machine` is hosted here and, for a view (`only`), is its machine.
    pub(crate) fn hosts_for(&self, machine: MachineId, only: Option<MachineId>) -> bool {
        self.hosts(machine) && only.is_none_or(|m| m == machine)
    }

    /// Fails an operation on `target` from a port of `me` opened at
    /// `incarnation` if `me` crashed since: that port belongs to an
    /// incarnation that ended.
    pub(crate) fn check_incarnation(
        &self,
        me: MachineId,
        incarnation: u64,
        target: MachineId,
    ) -> Result<()> {
        let now = self.memory(me)?.incarnation();
        if now != incarnation {
            return Err(FabricError::PeerUnavailable {
                machine: target,
                reason: format!(
                    "this port of machine {me} was opened by an incarnation that crashed (the \
                     machine has crashed {now} times, {incarnation} when the port opened): a \
                     restarted machine opens new ports"
                ),
            });
        }
        Ok(())
    }

    /// Registers a zeroed region on a hosted machine (a name at most once per machine).
    pub(crate) fn register(
        &self,
        machine: MachineId,
        name: &str,
        len_bytes: u64,
    ) -> Result<RegionInfo> {
        self.memory(machine)?.register(name, len_bytes)
    }

    /// Looks a region of a hosted machine up by name.
    pub(crate) fn lookup(&self, machine: MachineId, name: &str) -> Result<RegionInfo> {
        self.memory(machine)?.lookup(name)
    }

    /// Checks a message before anything happens for it: `target` is in the
    /// cluster (not necessarily here) and `len` is within the message limit.
    pub(crate) fn check_send(&self, target: MachineId, len: usize) -> Result<()> {
        check_machine(target, self.count())?;
        if len > self.message_bytes_max {
            return Err(FabricError::MessageTooLarge {
                len,
                limit: self.message_bytes_max,
            });
        }
        Ok(())
    }

    /// Queues `payload` from `from` in hosted machine `target`'s inbox,
    /// visible from `visible_at_ns` on ([`FabricError::InboxFull`] if full).
    pub(crate) fn deliver(
        &self,
        from: MachineId,
        target: MachineId,
        payload: &[u8],
        visible_at_ns: u64,
    ) -> Result<()> {
        self.memory(target)?.deliver(
            Message {
                from,
                payload: payload.to_vec(),
            },
            visible_at_ns,
        )
    }

    /// Has every message delivered to hosted machine `machine` unpark `waker`.
    pub(crate) fn set_waker(&self, machine: MachineId, waker: std::thread::Thread) -> Result<()> {
        self.memory(machine)?.set_waker(Some(waker));
        Ok(())
    }

    /// Takes the oldest message of hosted machine `machine` if it is visible at `now_ns`.
    pub(crate) fn take(&self, machine: MachineId, now_ns: u64) -> Result<Option<Message>> {
        Ok(self.memory(machine)?.take(now_ns))
    }
}

/// A port's handles to the regions it has used, per machine by id.
///
/// Each machine's list is a prefix of its region ids (dense, in registration
/// order), filled up to the highest id asked for; `None` for a region a crash
/// dropped. An id not registered yet is not remembered, so it resolves once
/// it is registered.
#[derive(Debug)]
pub(crate) struct RegionCache {
    regions: Vec<Vec<Option<Arc<Region>>>>,
}

impl RegionCache {
    /// An empty cache for a `machines`-machine cluster.
    pub(crate) fn new(machines: usize) -> RegionCache {
        RegionCache {
            regions: (0..machines).map(|_| Vec::new()).collect(),
        }
    }

    /// The region `region` of `target` (errors as [`Hosted::memory`] and
    /// [`MachineMemory::region`]); the machine's lock is taken only on a miss.
    #[inline]
    pub(crate) fn region(
        &mut self,
        hosted: &Hosted,
        target: MachineId,
        region: RegionId,
    ) -> Result<&Region> {
        check_machine(target, self.regions.len())?;
        let cache = &mut self.regions[target as usize];
        let i = region.0 as usize;
        if i >= cache.len() {
            Self::fill(cache, hosted, target, region)?;
        }
        if !matches!(cache[i].as_deref(), Some(r) if !r.is_gone()) {
            Self::refresh(&mut cache[i], hosted, target, region)?;
        }
        Ok(cache[i].as_deref().expect("checked above"))
    }

    /// Extends `cache` (`target`'s list) up to and including `region`.
    #[cold]
    #[inline(never)]
    fn fill(
        cache: &mut Vec<Option<Arc<Region>>>,
        hosted: &Hosted,
        target: MachineId,
        region: RegionId,
    ) -> Result<()> {
        let memory = hosted.memory(target)?;
        // The asked-for region first, so an error names it; the ids below it
        // were registered (ids are dense), and are `None` if a crash dropped them.
        let wanted = memory.region(region)?;
        for id in cache.len()..region.0 as usize {
            cache.push(memory.region(RegionId(id as u16)).ok());
        }
        cache.push(Some(wanted));
        Ok(())
    }

    /// Lets go of a region its machine dropped in a crash (the memory is
    /// unmapped when no port holds it any more) and resolves the id again:
    /// the restarted machine's region of that id, or the error that it is
    /// gone.
    #[cold]
    #[inline(never)]
    fn refresh(
        slot: &mut Option<Arc<Region>>,
        hosted: &Hosted,
        target: MachineId,
        region: RegionId,
    ) -> Result<()> {
        match hosted.memory(target).and_then(|m| m.region(region)) {
            Ok(r) => {
                *slot = Some(r);
                Ok(())
            }
            Err(_) => Err(Self::forget(slot, target, region)),
        }
    }

    /// Lets go of a region its machine dropped in a crash and says so.
    #[cold]
    #[inline(never)]
    fn forget(slot: &mut Option<Arc<Region>>, target: MachineId, region: RegionId) -> FabricError {
        *slot = None;
        gone(target, region)
    }

    /// Prefetches `len` bytes at `offset` of `target`'s region (a hint:
    /// an unknown machine or region is ignored, see [`Region::prefetch`]).
    #[inline]
    pub(crate) fn prefetch(
        &mut self,
        hosted: &Hosted,
        target: MachineId,
        region: RegionId,
        offset: u64,
        len: u64,
        for_write: bool,
    ) {
        if let Ok(r) = self.region(hosted, target, region) {
            r.prefetch(offset, len, for_write);
        }
    }

    /// Applies `verb` to `target`'s region through the cache, as machine
    /// `me` (whose region a [`Verb::ReadTo`] lands in).
    #[inline]
    pub(crate) fn apply(
        &mut self,
        hosted: &Hosted,
        me: MachineId,
        target: MachineId,
        region: RegionId,
        offset: u64,
        verb: Verb,
    ) -> Result<Output> {
        if let Verb::ReadTo {
            region: local,
            offset: local_offset,
            len,
        } = verb
        {
            // Both lookups first (each may fill the cache), then both borrows.
            self.region(hosted, target, region)?;
            self.region(hosted, me, local)?;
            let resolved = "resolved just above";
            let src = self.regions[target as usize][region.0 as usize]
                .as_deref()
                .expect(resolved);
            let dst = self.regions[me as usize][local.0 as usize]
                .as_deref()
                .expect(resolved);
            return read_to(
                src,
                target,
                region,
                offset,
                (dst, me, local),
                local_offset,
                len,
            );
        }
        let r = self.region(hosted, target, region)?;
        apply_on(r, target, region, offset, verb)
    }

    /// Applies a verb on borrowed buffers through the cache (the synchronous
    /// fast path: no allocation). Returns the previous word of a CAS or fetch-add.
    #[inline]
    pub(crate) fn apply_ref(
        &mut self,
        hosted: &Hosted,
        target: MachineId,
        region: RegionId,
        offset: u64,
        verb: VerbRef<'_>,
    ) -> Result<u64> {
        let r = self.region(hosted, target, region)?;
        apply_region(r, target, region, offset, verb)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(machines: usize) -> Hosted {
        Hosted::all(machines, 4, 64, false)
    }

    #[test]
    fn registering_a_name_twice_is_an_error_naming_it() {
        let h = all(2);
        let info = h.register(1, "values", 64).unwrap();
        assert_eq!(info.id, RegionId(0));
        let e = h.register(1, "values", 128).unwrap_err();
        assert!(
            matches!(&e, FabricError::DuplicateRegion { machine: 1, name } if name == "values"),
            "{e:?}"
        );
        assert!(e.to_string().contains("'values'"), "{e}");
        // The same name on another machine is a different region.
        assert_eq!(h.register(0, "values", 8).unwrap().id, RegionId(0));
        assert_eq!(h.lookup(1, "values").unwrap(), info);
    }

    #[test]
    fn unknown_regions_and_machines_are_errors() {
        let h = all(3);
        h.register(2, "keys", 64).unwrap();
        let e = h.lookup(2, "nope").unwrap_err();
        assert!(
            matches!(&e, FabricError::NoSuchRegion { machine: 2, region } if region == "'nope'"),
            "{e:?}"
        );
        for m in [3, 127, 128, 255] {
            assert_eq!(
                h.lookup(m, "keys"),
                Err(FabricError::NoSuchMachine {
                    machine: m,
                    machines: 3
                })
            );
            assert!(h.register(m, "keys", 8).is_err());
            assert!(!h.hosts(m));
            assert!(h.check_send(m, 0).is_err());
            assert!(h.take(m, 0).is_err());
        }
        let mut cache = RegionCache::new(h.count());
        assert!(matches!(
            cache.region(&h, 3, RegionId(0)),
            Err(FabricError::NoSuchMachine { machine: 3, .. })
        ));
        // An unknown id is named as asked, even when ids below it exist.
        let e = cache.region(&h, 2, RegionId(5)).unwrap_err();
        assert!(
            matches!(&e, FabricError::NoSuchRegion { machine: 2, region } if region == "#5"),
            "{e:?}"
        );
    }

    #[test]
    fn a_node_hosts_only_its_machines() {
        let h = Hosted::some(4, [1, 3], 4, 64, false);
        assert_eq!(h.count(), 4);
        assert!(h.hosts(1) && h.hosts(3) && !h.hosts(0) && !h.hosts(2) && !h.hosts(4));
        assert_eq!(
            h.register(2, "r", 8),
            Err(FabricError::NotHosted { machine: 2 })
        );
        assert_eq!(
            h.deliver(0, 2, b"hi", 0),
            Err(FabricError::NotHosted { machine: 2 })
        );
        // A message to a machine elsewhere passes the check; delivery is the route's job.
        assert!(h.check_send(2, 64).is_ok());
        assert!(h.register(3, "r", 8).is_ok());
        let mut cache = RegionCache::new(h.count());
        assert_eq!(
            cache.region(&h, 0, RegionId(0)).unwrap_err(),
            FabricError::NotHosted { machine: 0 }
        );
    }

    #[test]
    fn the_cache_returns_the_registered_region_every_time() {
        let h = all(2);
        let a = h.register(1, "a", 64).unwrap().id;
        let mut cache = RegionCache::new(h.count());
        let held = h.memory(1).unwrap().region(a).unwrap();
        let first: *const Region = cache.region(&h, 1, a).unwrap();
        let again: *const Region = cache.region(&h, 1, a).unwrap();
        assert!(std::ptr::eq(first, Arc::as_ptr(&held)));
        assert!(std::ptr::eq(first, again));
        // An id asked for before it exists is not remembered as missing.
        assert!(cache.region(&h, 1, RegionId(2)).is_err());
        h.register(1, "b", 8).unwrap();
        let c = h.register(1, "c", 16).unwrap().id;
        assert_eq!(cache.region(&h, 1, c).unwrap().name(), "c");
        assert_eq!(cache.region(&h, 1, RegionId(1)).unwrap().name(), "b");
        assert!(std::ptr::eq(cache.region(&h, 1, a).unwrap(), first));
        // Effects through the cache are effects on the machine's memory.
        assert_eq!(
            cache
                .apply_ref(&h, 1, a, 8, VerbRef::FetchAdd { add: 5 })
                .unwrap(),
            0
        );
        let out = cache
            .apply(&h, 0, 1, a, 8, Verb::Read { buf: vec![0; 8] })
            .unwrap();
        assert_eq!(out, Output::Data(5u64.to_le_bytes().to_vec()));
        assert!(matches!(
            cache.apply_ref(
                &h,
                1,
                a,
                64,
                VerbRef::Cas {
                    expected: 0,
                    new: 1
                }
            ),
            Err(FabricError::OutOfBounds { .. })
        ));
    }

    #[test]
    fn the_cache_lets_a_crashed_region_go_and_resolves_its_id_to_the_restarted_region() {
        let h = all(2);
        let a = h.register(1, "a", 64).unwrap().id;
        let b = h.register(1, "b", 64).unwrap().id;
        let mut cache = RegionCache::new(h.count());
        cache.region(&h, 1, b).unwrap(); // holds a and b
        let held = Arc::downgrade(&h.memory(1).unwrap().region(a).unwrap());
        h.memory(1).unwrap().crash();
        assert!(held.upgrade().is_some(), "the cache still holds the region");
        let e = cache.region(&h, 1, a).unwrap_err();
        assert!(
            matches!(&e, FabricError::PeerUnavailable { machine: 1, reason } if reason.contains("gone")),
            "{e:?}"
        );
        assert!(held.upgrade().is_none(), "the memory outlived the crash");
        assert!(cache.region(&h, 1, a).is_err(), "asked again");
        // Restarted: ids from 0 again, as a restarted TCP node's.
        let c = h.register(1, "c", 64).unwrap().id;
        assert_eq!(c, a, "ids start over");
        h.memory(1).unwrap().region(c).unwrap().words()[0]
            .store(5, std::sync::atomic::Ordering::Relaxed);
        let r = cache
            .region(&h, 1, a)
            .expect("the id resolves to the new region");
        assert_eq!(r.words()[0].load(std::sync::atomic::Ordering::Relaxed), 5);
        assert!(cache.region(&h, 1, b).is_err(), "b is not registered again");
        assert_eq!(h.memory(1).unwrap().region_count(), 1);
    }

    #[test]
    fn machine_127_is_the_last_of_a_full_cluster() {
        let h = all(MACHINES_MAX);
        let last = (MACHINES_MAX - 1) as MachineId;
        assert_eq!(last, 127);
        assert!(h.hosts(last) && !h.hosts(128));
        let r = h.register(last, "r", 16).unwrap();
        assert_eq!(h.lookup(last, "r").unwrap(), r);
        let mut cache = RegionCache::new(h.count());
        cache
            .apply_ref(&h, last, r.id, 8, VerbRef::Write(&7u64.to_le_bytes()))
            .unwrap();
        let mut b = [0u8; 8];
        cache
            .apply_ref(&h, last, r.id, 8, VerbRef::Read(&mut b))
            .unwrap();
        assert_eq!(u64::from_le_bytes(b), 7);
        assert_eq!(
            cache.region(&h, 128, r.id).unwrap_err(),
            FabricError::NoSuchMachine {
                machine: 128,
                machines: MACHINES_MAX
            }
        );
        h.check_send(last, 64).unwrap();
        h.deliver(0, last, b"to 127", 0).unwrap();
        let m = h.take(last, 0).unwrap().unwrap();
        assert_eq!((m.from, m.payload.as_slice()), (0, &b"to 127"[..]));
    }

    #[test]
    fn messages_respect_limits_and_visibility() {
        let h = Hosted::all(2, 2, 4, false);
        assert_eq!(
            h.check_send(1, 5),
            Err(FabricError::MessageTooLarge { len: 5, limit: 4 })
        );
        h.check_send(1, 4).unwrap();
        h.deliver(0, 1, b"a", 100).unwrap();
        h.deliver(0, 1, b"b", 0).unwrap();
        assert_eq!(
            h.deliver(0, 1, b"c", 0),
            Err(FabricError::InboxFull {
                machine: 1,
                limit: 2
            })
        );
        // In order: the first is not visible yet, so nothing overtakes it.
        assert_eq!(h.take(1, 99).unwrap(), None);
        assert_eq!(h.take(1, 100).unwrap().unwrap().payload, b"a");
        assert_eq!(h.take(1, 100).unwrap().unwrap().payload, b"b");
        assert_eq!(h.take(1, u64::MAX).unwrap(), None);
    }

    #[test]
    fn limits_are_checked_with_the_same_words_everywhere() {
        assert!(check_machine_count(0).is_err());
        assert!(check_machine_count(MACHINES_MAX + 1).is_err());
        assert!(check_machine_count(1).is_ok() && check_machine_count(MACHINES_MAX).is_ok());
        assert!(check_queue_limits(1, 1, 0).is_err());
        assert!(check_queue_limits(1, 1, 1).is_ok());
        assert_eq!(
            check_inflight(4, 4),
            Err(FabricError::TooManyInflight {
                inflight: 4,
                limit: 4
            })
        );
        assert!(check_inflight(3, 4).is_ok());
    }
}
