//! A decorator that fails or delays chosen operations, for fault tests.
//!
//! Operations are numbered 0, 1, 2, ... in the order they are issued through
//! any port of the decorated fabric (one shared counter), so a test can say
//! "the 3rd one-sided operation fails" and get exactly that. A failed
//! operation has no effect on memory.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::{
    Completion, Fabric, FabricError, Fencing, MachineId, Message, Output, PeerEpoch, Port,
    RegionId, RegionInfo, Result, WorkRequest,
};

/// What to do to which operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Operation `index` fails with [`FabricError::Injected`].
    FailAt(u64),
    /// Operation `index` and every later one fail (a peer that vanished).
    FailFrom(u64),
    /// Operation `index` is delayed by the given time before it runs.
    DelayAt(u64, Duration),
}

/// Wraps a fabric and injects the planned faults.
#[derive(Clone)]
pub struct Faulty<F> {
    inner: F,
    state: Arc<State>,
}

struct State {
    next_op: AtomicU64,
    faults: Mutex<Vec<Fault>>,
}

enum Action {
    Run,
    Fail(u64),
    Delay(Duration),
}

impl State {
    fn next(&self) -> Action {
        let index = self.next_op.fetch_add(1, Ordering::Relaxed);
        let faults = self.faults.lock().unwrap_or_else(|e| e.into_inner());
        for f in faults.iter() {
            match *f {
                Fault::FailAt(k) if k == index => return Action::Fail(index),
                Fault::FailFrom(k) if index >= k => return Action::Fail(index),
                Fault::DelayAt(k, d) if k == index => return Action::Delay(d),
                _ => {}
            }
        }
        Action::Run
    }
}

impl<F: Fabric> Faulty<F> {
    /// Wraps `inner` with no faults planned.
    pub fn new(inner: F) -> Self {
        Faulty {
            inner,
            state: Arc::new(State {
                next_op: AtomicU64::new(0),
                faults: Mutex::new(Vec::new()),
            }),
        }
    }
    /// Plans a fault (op indices count from the fabric's creation).
    pub fn inject(&self, fault: Fault) {
        self.state
            .faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(fault);
    }
    /// Forgets every planned fault.
    pub fn clear(&self) {
        self.state
            .faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
    /// Operations issued so far (the index the next one gets).
    pub fn ops_issued(&self) -> u64 {
        self.state.next_op.load(Ordering::Relaxed)
    }
    /// The wrapped fabric.
    pub fn inner(&self) -> &F {
        &self.inner
    }
}

/// Fencing is not an operation: it is never failed or delayed, nor counted.
impl<F: Fencing> Fencing for Faulty<F> {
    fn own_epoch(&self, me: MachineId) -> Result<u64> {
        self.inner.own_epoch(me)
    }
    fn set_own_epoch(&self, me: MachineId, epoch: u64) -> Result<()> {
        self.inner.set_own_epoch(me, epoch)
    }
    fn peer_epoch(&self, me: MachineId, peer: MachineId) -> Result<PeerEpoch> {
        self.inner.peer_epoch(me, peer)
    }
    fn set_peer_epoch(&self, me: MachineId, peer: MachineId, epoch: u64) -> Result<()> {
        self.inner.set_peer_epoch(me, peer, epoch)
    }
    fn mark_down(&self, me: MachineId, peer: MachineId, epoch: u64) -> Result<()> {
        self.inner.mark_down(me, peer, epoch)
    }
    fn fence(&self, me: MachineId) -> Result<()> {
        self.inner.fence(me)
    }
    fn is_fenced(&self, me: MachineId) -> Result<bool> {
        self.inner.is_fenced(me)
    }
    fn hold_peers(&self, me: MachineId) -> Result<()> {
        self.inner.hold_peers(me)
    }
    fn serve_peers(&self, me: MachineId) -> Result<()> {
        self.inner.serve_peers(me)
    }
}

impl<F: Fabric> Fabric for Faulty<F> {
    type Port = FaultyPort<F::Port>;
    fn machine_count(&self) -> usize {
        self.inner.machine_count()
    }
    fn hosts(&self, machine: MachineId) -> bool {
        self.inner.hosts(machine)
    }
    fn register(&self, machine: MachineId, name: &str, len_bytes: u64) -> Result<RegionInfo> {
        self.inner.register(machine, name, len_bytes)
    }
    fn lookup(&self, machine: MachineId, name: &str) -> Result<RegionInfo> {
        self.inner.lookup(machine, name)
    }
    fn wake_on_message(&self, machine: MachineId, waker: std::thread::Thread) -> Result<bool> {
        self.inner.wake_on_message(machine, waker)
    }
    fn port(&self, machine: MachineId) -> Result<Self::Port> {
        Ok(FaultyPort {
            inner: self.inner.port(machine)?,
            state: Arc::clone(&self.state),
            failed: Vec::new(),
        })
    }
}

/// A port whose operations may fail or stall on plan.
pub struct FaultyPort<P> {
    inner: P,
    state: Arc<State>,
    /// Completions of posted requests that were failed on purpose.
    failed: Vec<Completion>,
}

impl<P: Port> FaultyPort<P> {
    /// Decides the fate of the next operation; `Err` if it must fail.
    fn gate(&self) -> Result<()> {
        match self.state.next() {
            Action::Run => Ok(()),
            Action::Fail(op_index) => Err(FabricError::Injected { op_index }),
            Action::Delay(d) => {
                std::thread::sleep(d);
                Ok(())
            }
        }
    }
}

impl<P: Port> Port for FaultyPort<P> {
    fn machine(&self) -> MachineId {
        self.inner.machine()
    }
    fn machine_count(&self) -> usize {
        self.inner.machine_count()
    }
    fn post(&mut self, wr: WorkRequest) -> Result<()> {
        match self.gate() {
            Ok(()) => self.inner.post(wr),
            Err(e) => {
                self.failed.push(Completion {
                    id: wr.id,
                    target: wr.target,
                    result: Err(e),
                });
                Ok(())
            }
        }
    }
    fn poll(&mut self, out: &mut Vec<Completion>) -> Result<usize> {
        let n = self.failed.len();
        out.append(&mut self.failed);
        Ok(n + self.inner.poll(out)?)
    }
    fn wait(&mut self, out: &mut Vec<Completion>) -> Result<usize> {
        if !self.failed.is_empty() {
            return self.poll(out);
        }
        self.inner.wait(out)
    }
    fn inflight(&self) -> usize {
        self.failed.len() + self.inner.inflight()
    }
    fn prefetch(&mut self, wr: &WorkRequest) {
        self.inner.prefetch(wr)
    }
    fn execute(&mut self, wr: WorkRequest) -> Result<Output> {
        self.gate()?;
        self.inner.execute(wr)
    }
    fn read(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<()> {
        self.gate()?;
        self.inner.read(target, region, offset, buf)
    }
    fn read_overlapped(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        buf: &mut [u8],
        meanwhile: &mut dyn FnMut(),
    ) -> Result<()> {
        self.gate()?;
        self.inner
            .read_overlapped(target, region, offset, buf, meanwhile)
    }
    fn read_word(&mut self, target: MachineId, region: RegionId, offset: u64) -> Result<u64> {
        self.gate()?;
        self.inner.read_word(target, region, offset)
    }
    fn write(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        data: &[u8],
    ) -> Result<()> {
        self.gate()?;
        self.inner.write(target, region, offset, data)
    }
    fn write_word(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        word: u64,
    ) -> Result<()> {
        self.gate()?;
        self.inner.write_word(target, region, offset, word)
    }
    fn cas(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        expected: u64,
        new: u64,
    ) -> Result<u64> {
        self.gate()?;
        self.inner.cas(target, region, offset, expected, new)
    }
    fn fetch_add(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        add: u64,
    ) -> Result<u64> {
        self.gate()?;
        self.inner.fetch_add(target, region, offset, add)
    }
    fn send(&mut self, target: MachineId, payload: &[u8]) -> Result<()> {
        self.gate()?;
        self.inner.send(target, payload)
    }
    fn try_recv(&mut self) -> Result<Option<Message>> {
        self.inner.try_recv()
    }
    fn check_peer(&self, target: MachineId) -> Result<()> {
        self.inner.check_peer(target)
    }
    fn relax(&mut self) {
        self.inner.relax()
    }
    fn back_off(&mut self, round: u32) {
        self.inner.back_off(round)
    }
    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }
    fn recv_timeout(&mut self, timeout: Duration) -> Result<Option<Message>> {
        self.inner.recv_timeout(timeout)
    }
}
