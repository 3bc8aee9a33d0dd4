//! The in-process fabric: N machines in one process over shared memory.
//!
//! Every machine's regions are real atomic words in this process, so the
//! semantics are exactly those of [`crate::memory`]. What is modelled is time:
//! an operation on another machine's memory completes `latency_ns` plus
//! `payload / bandwidth` after it starts (defaults 2.0 us and 12.5 GB/s, a
//! 100 Gb/s RDMA NIC), and the waiting thread spends that time polling, as an
//! RDMA worker polls its completion queue. Operations on the port's own machine
//! cost nothing extra.
//!
//! Time model:
//! ```text
//!   post at t ──► start = max(t, nic_free[initiator])        (link is shared by
//!                 nic_free[initiator] = start + bytes/bw      every port of a machine)
//!                 ready = start + bytes/bw + latency          (fenced: start >= last ready)
//! ```
//! The operation's effect on memory is applied at post time (any moment
//! between post and completion is legal for RDMA); its completion becomes
//! visible at `ready`. Because `ready` only grows along a port, requests in
//! flight overlap: k pipelined 8-byte reads cost about one latency, not k.
//! Setting both numbers to 0 turns the model off.

use std::collections::VecDeque;

use crate::fencing::Access;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::fencing::{fencing_by_tables, Fences, PeerEpoch};
use crate::hosted::{check_inflight, check_machine_count, check_queue_limits, Hosted, RegionCache};
use crate::memory::{MachineMemory, VerbRef};
use crate::{
    Completion, Fabric, MachineId, Message, Output, Port, RegionId, RegionInfo, Result, Verb,
    WorkRequest,
};

/// Settings of the in-process fabric.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalConfig {
    /// Machines in the cluster (1..=128).
    pub machines: usize,
    /// Fixed cost of a remote operation, in nanoseconds (0 with bandwidth 0: no model).
    pub latency_ns: u64,
    /// Link bandwidth in bytes per second (0: infinite).
    pub bandwidth_bytes_per_s: u64,
    /// Operations a port may have posted and not yet polled.
    pub inflight_ops_max: usize,
    /// Messages an inbox holds before senders see back-pressure.
    pub inbox_messages_max: usize,
    /// Largest message payload.
    pub message_bytes_max: usize,
    /// Fault in every region's pages when it is registered, as RDMA
    /// registration pins memory (off: pages are mapped on first write).
    pub pin_memory: bool,
}

impl Default for LocalConfig {
    fn default() -> Self {
        LocalConfig {
            machines: 8,
            latency_ns: 2_000,
            bandwidth_bytes_per_s: 12_500_000_000,
            inflight_ops_max: 4096,
            inbox_messages_max: 65_536,
            message_bytes_max: 1 << 20,
            pin_memory: false,
        }
    }
}

impl LocalConfig {
    /// `machines` machines with the default model.
    pub fn with_machines(machines: usize) -> Self {
        LocalConfig {
            machines,
            ..Self::default()
        }
    }

    /// The same settings with the latency model turned off.
    pub fn without_model(mut self) -> Self {
        self.latency_ns = 0;
        self.bandwidth_bytes_per_s = 0;
        self
    }

    /// Rejects settings that cannot work.
    pub fn validate(&self) -> Result<()> {
        check_machine_count(self.machines)?;
        check_queue_limits(
            self.inflight_ops_max,
            self.inbox_messages_max,
            self.message_bytes_max,
        )
    }

    /// Modelled transfer time of `bytes`, in ns.
    fn xfer_ns(&self, bytes: u64) -> u64 {
        if self.bandwidth_bytes_per_s == 0 {
            0
        } else {
            (bytes as u128 * 1_000_000_000 / self.bandwidth_bytes_per_s as u128) as u64
        }
    }

    fn model_on(&self) -> bool {
        self.latency_ns > 0 || self.bandwidth_bytes_per_s > 0
    }
}

struct Inner {
    config: LocalConfig,
    hosted: Hosted,
    /// Every machine's epoch table (`fencing.rs`).
    fences: Fences,
    /// The model's clock: the CPU's time-stamp counter, calibrated (about 10 ns
    /// a reading instead of the system clock's 30-60 ns on a VM), because every
    /// posted remote operation reads it.
    clock: quanta::Clock,
    epoch_raw: u64,
}

impl Inner {
    #[inline]
    fn now_ns(&self) -> u64 {
        self.clock.delta_as_nanos(self.epoch_raw, self.clock.raw())
    }

    /// Reserves the initiator's link for `bytes` and returns when the
    /// operation completes.
    #[inline]
    fn reserve(&self, initiator: MachineId, bytes: u64) -> u64 {
        let xfer = self.config.xfer_ns(bytes);
        self.reserve_span(initiator, xfer) + xfer + self.config.latency_ns
    }

    /// Reserves the initiator's link for `xfer_ns` from now (or from when it
    /// is free) and returns when that span starts ([`Port::post_many`]).
    #[inline]
    fn reserve_span(&self, initiator: MachineId, xfer_ns: u64) -> u64 {
        let now = self.now_ns();
        let nic = &self
            .hosted
            .memory(initiator)
            .expect("an initiator is a port's own machine, checked when it opened")
            .nic_free_ns;
        let mut free = nic.load(Ordering::Relaxed);
        loop {
            let start = free.max(now);
            match nic.compare_exchange_weak(
                free,
                start + xfer_ns,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return start,
                Err(cur) => free = cur,
            }
        }
    }

    /// Modelled time of an operation of `bytes` on an idle link.
    #[inline]
    fn cost_ns(&self, bytes: u64) -> u64 {
        self.config.xfer_ns(bytes) + self.config.latency_ns
    }

    #[inline]
    fn spin_until(&self, t_ns: u64) {
        while self.now_ns() < t_ns {
            std::hint::spin_loop();
        }
    }
}

/// N machines in one process; cheap to clone (shared).
#[derive(Clone)]
pub struct LocalFabric {
    inner: Arc<Inner>,
    /// A node view ([`LocalFabric::hosting_only`]): the one machine it hosts.
    only: Option<MachineId>,
}

impl std::fmt::Debug for LocalFabric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalFabric")
            .field("config", &self.inner.config)
            .field("only", &self.only)
            .finish()
    }
}

impl LocalFabric {
    /// A cluster with the given settings.
    pub fn new(config: LocalConfig) -> Result<Self> {
        config.validate()?;
        let hosted = Hosted::all(
            config.machines,
            config.inbox_messages_max,
            config.message_bytes_max,
            config.pin_memory,
        );
        Ok(LocalFabric {
            only: None,
            inner: Arc::new({
                let clock = quanta::Clock::new();
                let epoch_raw = clock.raw();
                Inner {
                    fences: Fences::new(config.machines),
                    config,
                    hosted,
                    clock,
                    epoch_raw,
                }
            }),
        })
    }

    /// The settings.
    pub fn config(&self) -> &LocalConfig {
        &self.inner.config
    }

    /// Direct access to a machine's memory (for tools and tests).
    pub fn memory(&self, machine: MachineId) -> Result<&MachineMemory> {
        self.hosted(machine)
    }

    /// The same cluster seen as the node that hosts only machine `m`: its
    /// `hosts(x)` is `x == m`, and registering on, opening a port of or
    /// fencing another machine is refused ([`crate::FabricError::NotHosted`]);
    /// lookups and operations reach every machine. So one store per view,
    /// each created on its own node, makes a cluster of nodes in one process.
    pub fn hosting_only(&self, m: MachineId) -> Result<LocalFabric> {
        self.hosted(m)?;
        Ok(LocalFabric {
            inner: Arc::clone(&self.inner),
            only: Some(m),
        })
    }

    /// Machine `m` crashes: its regions are dropped (operations on them
    /// fail with `PeerUnavailable` from any port, and their ids are not
    /// reused), lookups by name fail until it registers again, its inbox
    /// is emptied, its ports fail, and its epoch table starts over. Then it
    /// can register its regions again, as a restarted node. Operations are
    /// applied at their post on this fabric, so none is pending.
    pub fn crash(&self, m: MachineId) -> Result<()> {
        self.hosted(m)?.crash();
        self.inner.fences.reset(m);
        Ok(())
    }

    /// The memory of `machine` if this fabric (or view) hosts it.
    fn hosted(&self, machine: MachineId) -> Result<&MachineMemory> {
        self.inner.hosted.memory_for(machine, self.only)
    }
}

fencing_by_tables!(LocalFabric);

impl Fabric for LocalFabric {
    type Port = LocalPort;

    fn machine_count(&self) -> usize {
        self.inner.hosted.count()
    }

    fn hosts(&self, machine: MachineId) -> bool {
        self.inner.hosted.hosts_for(machine, self.only)
    }

    fn register(&self, machine: MachineId, name: &str, len_bytes: u64) -> Result<RegionInfo> {
        self.hosted(machine)?.register(name, len_bytes)
    }

    fn lookup(&self, machine: MachineId, name: &str) -> Result<RegionInfo> {
        self.inner.hosted.lookup(machine, name)
    }

    fn wake_on_message(&self, machine: MachineId, waker: std::thread::Thread) -> Result<bool> {
        self.hosted(machine)?;
        self.inner.hosted.set_waker(machine, waker).map(|()| true)
    }

    fn port(&self, machine: MachineId) -> Result<LocalPort> {
        let incarnation = self.hosted(machine)?.incarnation();
        Ok(LocalPort {
            inner: Arc::clone(&self.inner),
            machine,
            incarnation,
            ready: VecDeque::new(),
            timed: VecDeque::new(),
            last_ready_ns: 0,
            local_timed: 0,
            regions: RegionCache::new(self.inner.hosted.count()),
        })
    }
}

/// A port of the in-process fabric.
pub struct LocalPort {
    inner: Arc<Inner>,
    machine: MachineId,
    /// The machine's incarnation when the port opened (it fails after a crash).
    incarnation: u64,
    /// Completions ready at once (local targets, or the model off).
    ready: VecDeque<Completion>,
    /// Remote completions with the time they become ready (non-decreasing).
    timed: VecDeque<(u64, Completion)>,
    /// Latest ready time handed out, for fences.
    last_ready_ns: u64,
    /// Local completions waiting in `timed` behind a fence.
    local_timed: usize,
    /// Regions seen by this port: no lock or reference-count update per operation.
    regions: RegionCache,
}

impl LocalPort {
    /// Applies a verb on borrowed buffers through the port's region cache
    /// (the synchronous fast path, no allocation); errors are returned.
    #[inline]
    fn apply_ref(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        verb: VerbRef<'_>,
    ) -> Result<u64> {
        self.admit(target, verb.access())?;
        self.regions
            .apply_ref(&self.inner.hosted, target, region, offset, verb)
    }

    /// The fencing rules for an operation on `target` (`fencing.rs`;
    /// `access`: what it does there), and the port's incarnation:
    /// one relaxed load while no epoch was ever set and no machine crashed.
    #[inline]
    fn admit(&self, target: MachineId, access: Access) -> Result<()> {
        if self.inner.fences.armed() {
            return self.admit_armed(target, access);
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn admit_armed(&self, target: MachineId, access: Access) -> Result<()> {
        self.inner
            .hosted
            .check_incarnation(self.machine, self.incarnation, target)?;
        self.inner.fences.check(self.machine, target, access)
    }

    #[inline]
    fn is_remote(&self, target: MachineId) -> bool {
        target != self.machine && self.inner.config.model_on()
    }

    /// Applies a posted request and queues its completion: at `ready` (the
    /// model's completion time) for a remote one, else at once unless a
    /// fence or an earlier fenced local request holds it back.
    #[inline]
    fn enqueue(&mut self, wr: WorkRequest, ready: Option<u64>) {
        let bytes = wr.verb.payload_bytes();
        let fence = wr.fence;
        let result = self.admit(wr.target, wr.verb.access()).and_then(|()| {
            self.regions.apply(
                &self.inner.hosted,
                self.machine,
                wr.target,
                wr.region,
                wr.offset,
                wr.verb,
            )
        });
        let completion = Completion {
            id: wr.id,
            target: wr.target,
            result,
        };
        if let Some(mut ready) = ready {
            if fence {
                // Starts after everything earlier; the shared link is not held for it.
                ready = ready.max(self.last_ready_ns + self.inner.cost_ns(bytes));
            }
            self.last_ready_ns = self.last_ready_ns.max(ready);
            self.timed.push_back((ready, completion));
        } else if (fence && !self.timed.is_empty()) || self.local_timed > 0 {
            // A fenced local request completes no earlier than what precedes
            // it, and later local requests queue behind it (per-target order).
            let at = self.timed.back().map_or(0, |b| b.0).max(self.last_ready_ns);
            self.local_timed += 1;
            self.timed.push_back((at, completion));
        } else {
            self.ready.push_back(completion);
        }
    }

    /// Charges the modelled time of a synchronous remote operation.
    #[inline]
    fn charge_sync(&mut self, target: MachineId, bytes: u64) {
        if self.is_remote(target) {
            let ready = self.inner.reserve(self.machine, bytes);
            self.inner.spin_until(ready);
        }
    }
}

impl Port for LocalPort {
    fn machine(&self) -> MachineId {
        self.machine
    }

    fn machine_count(&self) -> usize {
        self.inner.hosted.count()
    }

    fn post(&mut self, wr: WorkRequest) -> Result<()> {
        check_inflight(self.inflight(), self.inner.config.inflight_ops_max)?;
        let ready = if self.is_remote(wr.target) {
            Some(self.inner.reserve(self.machine, wr.verb.payload_bytes()))
        } else {
            None
        };
        self.enqueue(wr, ready);
        Ok(())
    }

    /// One doorbell for the list: the clock is read and the machine's link
    /// reserved once for all of its remote bytes, and each remote request
    /// starts on the link where the one before it ends, as if all were
    /// posted one by one at the same instant.
    fn post_many(&mut self, wrs: &mut Vec<WorkRequest>) -> Result<()> {
        if self.inflight() + wrs.len() > self.inner.config.inflight_ops_max {
            // Some will be refused: one by one, refused where `post` refuses.
            let mut list = wrs.drain(..);
            while let Some(wr) = list.next() {
                if let Err(e) = self.post(wr) {
                    let rest: Vec<WorkRequest> = list.collect();
                    wrs.extend(rest);
                    return Err(e);
                }
            }
            return Ok(());
        }
        let (mut remotes, mut xfer_ns) = (0, 0);
        for wr in wrs.iter().filter(|wr| self.is_remote(wr.target)) {
            remotes += 1;
            xfer_ns += self.inner.config.xfer_ns(wr.verb.payload_bytes());
        }
        let mut start = if remotes > 0 {
            self.inner.reserve_span(self.machine, xfer_ns)
        } else {
            0
        };
        let mut list = std::mem::take(wrs);
        for wr in list.drain(..) {
            let ready = if self.is_remote(wr.target) {
                start += self.inner.config.xfer_ns(wr.verb.payload_bytes());
                Some(start + self.inner.config.latency_ns)
            } else {
                None
            };
            self.enqueue(wr, ready);
        }
        // The caller's vector keeps its room for the next list.
        *wrs = list;
        Ok(())
    }

    #[inline]
    fn prefetch(&mut self, wr: &WorkRequest) {
        let (len, for_write) = match &wr.verb {
            Verb::Read { buf } => (buf.len() as u64, false),
            // The lines the bytes land in are not asked for: they are
            // written whole, and asking for them measured slower.
            Verb::ReadTo { len, .. } => (*len, false),
            Verb::Write { data } => (data.len() as u64, true),
            Verb::Cas { .. } | Verb::FetchAdd { .. } => (8, true),
        };
        self.regions.prefetch(
            &self.inner.hosted,
            wr.target,
            wr.region,
            wr.offset,
            len,
            for_write,
        );
    }

    fn poll(&mut self, out: &mut Vec<Completion>) -> Result<usize> {
        let before = out.len();
        out.extend(self.ready.drain(..));
        if let Some(&(first, _)) = self.timed.front() {
            let now = self.inner.now_ns();
            if first <= now {
                while let Some(&(t, _)) = self.timed.front() {
                    if t > now {
                        break;
                    }
                    let (_, c) = self.timed.pop_front().expect("front exists");
                    if c.target == self.machine {
                        self.local_timed -= 1;
                    }
                    out.push(c);
                }
            }
        }
        Ok(out.len() - before)
    }

    fn wait(&mut self, out: &mut Vec<Completion>) -> Result<usize> {
        if self.ready.is_empty() {
            if let Some(&(first, _)) = self.timed.front() {
                self.inner.spin_until(first);
            }
        }
        self.poll(out)
    }

    fn inflight(&self) -> usize {
        self.ready.len() + self.timed.len()
    }

    fn execute(&mut self, wr: WorkRequest) -> Result<Output> {
        let bytes = wr.verb.payload_bytes();
        let target = wr.target;
        // Refused at once, as the synchronous verbs are (no modelled time).
        self.admit(target, wr.verb.access())?;
        let out = self.regions.apply(
            &self.inner.hosted,
            self.machine,
            target,
            wr.region,
            wr.offset,
            wr.verb,
        );
        if self.is_remote(target) {
            let mut ready = self.inner.reserve(self.machine, bytes);
            if wr.fence {
                ready = ready.max(self.last_ready_ns + self.inner.cost_ns(bytes));
            }
            self.inner.spin_until(ready);
        }
        out
    }

    #[inline]
    fn read(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<()> {
        self.apply_ref(target, region, offset, VerbRef::Read(buf))?;
        self.charge_sync(target, buf.len() as u64);
        Ok(())
    }

    /// The READ applies at once; `meanwhile` runs in the modelled flight,
    /// which is then waited out.
    #[inline]
    fn read_overlapped(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        buf: &mut [u8],
        meanwhile: &mut dyn FnMut(),
    ) -> Result<()> {
        self.apply_ref(target, region, offset, VerbRef::Read(buf))?;
        if self.is_remote(target) {
            let ready = self.inner.reserve(self.machine, buf.len() as u64);
            meanwhile();
            self.inner.spin_until(ready);
        } else {
            meanwhile();
        }
        Ok(())
    }

    #[inline]
    fn read_word(&mut self, target: MachineId, region: RegionId, offset: u64) -> Result<u64> {
        let mut b = [0u8; 8];
        self.apply_ref(target, region, offset, VerbRef::Read(&mut b))?;
        let w = u64::from_le_bytes(b);
        self.charge_sync(target, 8);
        Ok(w)
    }

    #[inline]
    fn write(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        data: &[u8],
    ) -> Result<()> {
        self.apply_ref(target, region, offset, VerbRef::Write(data))?;
        self.charge_sync(target, data.len() as u64);
        Ok(())
    }

    #[inline]
    fn cas(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        expected: u64,
        new: u64,
    ) -> Result<u64> {
        let prev = self.apply_ref(target, region, offset, VerbRef::Cas { expected, new })?;
        self.charge_sync(target, 8);
        Ok(prev)
    }

    #[inline]
    fn fetch_add(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        add: u64,
    ) -> Result<u64> {
        let prev = self.apply_ref(target, region, offset, VerbRef::FetchAdd { add })?;
        self.charge_sync(target, 8);
        Ok(prev)
    }

    fn send(&mut self, target: MachineId, payload: &[u8]) -> Result<()> {
        self.inner.hosted.check_send(target, payload.len())?;
        self.admit(target, Access::Message)?;
        let visible_at = if self.is_remote(target) {
            self.inner.reserve(self.machine, payload.len() as u64)
        } else {
            0
        };
        self.inner
            .hosted
            .deliver(self.machine, target, payload, visible_at)
    }

    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }

    fn check_peer(&self, target: MachineId) -> Result<()> {
        self.admit(target, Access::Message)
    }

    fn try_recv(&mut self) -> Result<Option<Message>> {
        self.admit(self.machine, Access::Message)?;
        let now = self.inner.now_ns();
        self.inner.hosted.take(self.machine, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_limits() {
        assert!(LocalConfig::with_machines(0).validate().is_err());
        assert!(LocalConfig::with_machines(129).validate().is_err());
        assert!(LocalConfig::with_machines(128).validate().is_ok());
    }

    #[test]
    fn transfer_time_follows_bandwidth() {
        let c = LocalConfig::default();
        // 12.5 GB/s: 12,500 bytes take 1 us.
        assert_eq!(c.xfer_ns(12_500), 1_000);
        assert_eq!(c.clone().without_model().xfer_ns(1 << 20), 0);
    }
}
