//! [`SimPort`]: every operation is a scheduling point, and posted requests
//! wait in the port until its RNG applies them (see the module doc of `sim.rs`).

use std::collections::VecDeque;

use crate::fencing::Access;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::{Inner, SimRng, REORDER_WINDOW};
use crate::hosted::{check_inflight, RegionCache};
use crate::memory::VerbRef;
use crate::{
    Completion, FabricError, MachineId, Message, Output, Port, RegionId, Result, WorkRequest,
};

/// A posted request waiting in its port, with its target's incarnation at
/// the post: if the target crashes before the request applies, it fails
/// (its memory, and the request with it, is gone).
pub(super) struct Posted {
    pub(super) wr: WorkRequest,
    pub(super) target_incarnation: u64,
}

/// A port of the simulated fabric. Every operation is a scheduling point when
/// called from an actor during a run (see the module doc).
pub struct SimPort {
    pub(super) inner: Arc<Inner>,
    pub(super) machine: MachineId,
    /// The machine's incarnation when the port opened (it fails after a crash).
    pub(super) incarnation: u64,
    /// Posted requests not yet applied, in posting order (`posted_delay` only).
    pub(super) pending: VecDeque<Posted>,
    /// Applied requests' completions, in application order.
    pub(super) done: VecDeque<Completion>,
    /// Decides when pending requests apply.
    pub(super) rng: SimRng,
    /// Regions seen by this port (never unregistered, so stable).
    pub(super) regions: RegionCache,
}

impl std::fmt::Debug for SimPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimPort")
            .field("machine", &self.machine)
            .field("pending", &self.pending.len())
            .field("done", &self.done.len())
            .finish()
    }
}

impl SimPort {
    /// Applies a verb on borrowed buffers through the port's region cache.
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

    /// The fencing rules for an operation on `target` (`access`: what it does
    /// there), when it applies (`fencing.rs`; a posted request
    /// is judged on arrival, as over TCP), and the port's incarnation
    /// (checked once the flag is armed).
    fn admit(&self, target: MachineId, access: Access) -> Result<()> {
        if self.inner.fences.armed() {
            self.inner
                .hosted
                .check_incarnation(self.machine, self.incarnation, target)?;
            return self.inner.fences.check(self.machine, target, access);
        }
        Ok(())
    }

    /// The target's incarnation now (0 for a machine outside the cluster,
    /// which the request's own checks refuse).
    fn incarnation_of(&self, target: MachineId) -> u64 {
        self.inner.hosted.get(target).map_or(0, |m| m.incarnation())
    }

    /// Fails a posted request whose target crashed after its post.
    fn check_survived(&self, target: MachineId, at_post: u64) -> Result<()> {
        if self.incarnation_of(target) != at_post {
            return Err(FabricError::PeerUnavailable {
                machine: target,
                reason: format!(
                    "machine {target} crashed while this request was posted to it: the request \
                     was lost with the machine's memory"
                ),
            });
        }
        Ok(())
    }

    /// Posts `wr` into the pending queue.
    fn hold(&mut self, wr: WorkRequest) {
        let target_incarnation = self.incarnation_of(wr.target);
        self.pending.push_back(Posted {
            wr,
            target_incarnation,
        });
    }

    /// Applies a posted request and queues its completion.
    fn complete_posted(&mut self, p: Posted) {
        if let Err(e) = self.check_survived(p.wr.target, p.target_incarnation) {
            return self.done.push_back(Completion {
                id: p.wr.id,
                target: p.wr.target,
                result: Err(e),
            });
        }
        self.complete(p.wr);
    }

    /// Applies a request and queues its completion.
    fn complete(&mut self, wr: WorkRequest) {
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
        self.done.push_back(Completion {
            id: wr.id,
            target: wr.target,
            result,
        });
    }

    /// Every operation's scheduling point; then pending requests may progress.
    fn point(&mut self) {
        self.inner.sched.point(&self.inner.config);
        // Each draw applies one more pending request with probability 1/2.
        while !self.pending.is_empty() && self.rng.below(2) == 1 {
            self.apply_one();
        }
    }

    /// Applies one pending request that the ordering guarantees allow next:
    /// the oldest of its target, and if fenced the oldest of all.
    fn apply_one(&mut self) {
        let mut seen = [0u64; 4]; // targets met so far, a bit per MachineId
        let mut eligible = [0usize; REORDER_WINDOW];
        let mut n = 0;
        for (i, Posted { wr, .. }) in self.pending.iter().take(REORDER_WINDOW).enumerate() {
            let t = wr.target as usize;
            let first_of_target = seen[t / 64] & (1 << (t % 64)) == 0;
            seen[t / 64] |= 1 << (t % 64);
            if first_of_target && (!wr.fence || i == 0) {
                eligible[n] = i;
                n += 1;
            }
        }
        debug_assert!(n > 0, "the oldest pending request is always eligible");
        let i = eligible[self.rng.below(n as u64) as usize];
        let p = self.pending.remove(i).expect("eligible index");
        self.complete_posted(p);
    }

    /// Applies, in posting order, every pending request up to the last one to
    /// `target` (a synchronous operation or a message to `target` follows them).
    fn flush_to(&mut self, target: MachineId) {
        if let Some(last) = self.pending.iter().rposition(|p| p.wr.target == target) {
            for _ in 0..=last {
                let p = self.pending.pop_front().expect("within pending");
                self.complete_posted(p);
            }
        }
    }

    fn flush_all(&mut self) {
        while let Some(p) = self.pending.pop_front() {
            self.complete_posted(p);
        }
    }
}

impl Drop for SimPort {
    fn drop(&mut self) {
        // Posted requests take effect even if nobody polls them (as on a NIC).
        self.flush_all();
    }
}

impl Port for SimPort {
    fn machine(&self) -> MachineId {
        self.machine
    }

    fn machine_count(&self) -> usize {
        self.inner.hosted.count()
    }

    fn post(&mut self, wr: WorkRequest) -> Result<()> {
        self.point();
        check_inflight(self.inflight(), self.inner.config.inflight_ops_max)?;
        if self.inner.config.posted_delay {
            self.hold(wr);
        } else {
            self.complete(wr);
        }
        Ok(())
    }

    fn poll(&mut self, out: &mut Vec<Completion>) -> Result<usize> {
        self.point();
        let n = self.done.len();
        out.extend(self.done.drain(..));
        Ok(n)
    }

    fn wait(&mut self, out: &mut Vec<Completion>) -> Result<usize> {
        self.point();
        if self.done.is_empty() && !self.pending.is_empty() {
            self.apply_one();
        }
        let n = self.done.len();
        out.extend(self.done.drain(..));
        Ok(n)
    }

    fn inflight(&self) -> usize {
        self.pending.len() + self.done.len()
    }

    fn execute(&mut self, wr: WorkRequest) -> Result<Output> {
        self.point();
        if wr.fence {
            self.flush_all();
        } else {
            self.flush_to(wr.target);
        }
        self.admit(wr.target, wr.verb.access())?;
        self.regions.apply(
            &self.inner.hosted,
            self.machine,
            wr.target,
            wr.region,
            wr.offset,
            wr.verb,
        )
    }

    fn read(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<()> {
        self.point();
        self.flush_to(target);
        self.apply_ref(target, region, offset, VerbRef::Read(buf))?;
        Ok(())
    }

    fn read_word(&mut self, target: MachineId, region: RegionId, offset: u64) -> Result<u64> {
        let mut b = [0u8; 8];
        self.read(target, region, offset, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    fn write(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        data: &[u8],
    ) -> Result<()> {
        self.point();
        self.flush_to(target);
        self.apply_ref(target, region, offset, VerbRef::Write(data))?;
        Ok(())
    }

    fn cas(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        expected: u64,
        new: u64,
    ) -> Result<u64> {
        self.point();
        self.flush_to(target);
        self.apply_ref(target, region, offset, VerbRef::Cas { expected, new })
    }

    fn fetch_add(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        add: u64,
    ) -> Result<u64> {
        self.point();
        self.flush_to(target);
        self.apply_ref(target, region, offset, VerbRef::FetchAdd { add })
    }

    fn send(&mut self, target: MachineId, payload: &[u8]) -> Result<()> {
        self.point();
        self.inner.hosted.check_send(target, payload.len())?;
        self.flush_to(target);
        self.admit(target, Access::Message)?;
        self.inner.hosted.deliver(self.machine, target, payload, 0)
    }

    fn try_recv(&mut self) -> Result<Option<Message>> {
        self.point();
        self.admit(self.machine, Access::Message)?;
        self.inner.hosted.take(self.machine, u64::MAX)
    }

    fn check_peer(&self, target: MachineId) -> Result<()> {
        self.admit(target, Access::Message)
    }

    /// In an actor, `timeout` is simulated time (a scheduling point per try);
    /// elsewhere it is wall-clock time, as on the in-process fabric.
    fn recv_timeout(&mut self, timeout: Duration) -> Result<Option<Message>> {
        if self.inner.sched.current_actor().is_none() {
            let deadline = std::time::Instant::now() + timeout;
            loop {
                if let Some(m) = self.try_recv()? {
                    return Ok(Some(m));
                }
                if std::time::Instant::now() >= deadline {
                    return Ok(None);
                }
                std::thread::yield_now();
            }
        }
        let timeout_ns = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        let deadline_ns = self.now_ns().saturating_add(timeout_ns);
        loop {
            if let Some(m) = self.try_recv()? {
                return Ok(Some(m));
            }
            if self.now_ns() >= deadline_ns {
                return Ok(None);
            }
        }
    }

    /// Simulated time (as [`SimFabric::now_ns`](super::SimFabric::now_ns)).
    fn now_ns(&self) -> u64 {
        self.inner.sched.clock_ns.load(Ordering::Relaxed)
    }

    fn relax(&mut self) {
        if self.inner.sched.current_actor().is_none() {
            std::thread::yield_now();
        }
        self.point();
    }
}
