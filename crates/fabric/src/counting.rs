//! A decorator that counts every operation, per machine, local versus remote,
//! by kind, in operations and payload bytes. Exact: every operation issued to
//! the fabric is counted once, on the machine that issued it, whether or not
//! it then fails (a rejected access still cost a round trip); a `post`
//! refused for too many in flight was never issued and is not counted.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use crate::{
    Completion, Fabric, Fencing, MachineId, Message, OpKind, Output, PeerEpoch, Port, RegionId,
    RegionInfo, Result, WorkRequest,
};

/// Where an operation went relative to its issuer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Locality {
    /// Target is the issuing machine.
    Local = 0,
    /// Target is another machine.
    Remote = 1,
}

#[derive(Default)]
struct Cell {
    ops: [[AtomicU64; OpKind::COUNT]; 2],
    bytes: [[AtomicU64; OpKind::COUNT]; 2],
}

/// Cells per machine. A port adds to one of its machine's cells, chosen in
/// turn as ports open, and a snapshot sums them: threads acting as the same
/// machine (every thread of a one-machine cluster) do not pass one cache
/// line back and forth on every operation, whose cost moves with how far
/// apart the host has put the cores at the time (issue 13, requirement 7;
/// stop 33 in docs/results.md).
pub const STRIPES: usize = 8;

/// Shared counters of a cluster (cache-padded cells, [`STRIPES`] per machine).
pub struct Counters {
    machines: usize,
    /// Machine `m`'s cells are `[m * STRIPES, (m + 1) * STRIPES)`.
    cells: Vec<CachePadded<Cell>>,
    /// The cell the next port of each machine adds to.
    next_stripe: Vec<AtomicUsize>,
}

impl std::fmt::Debug for Counters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counters")
            .field("machines", &self.machines)
            .finish()
    }
}

impl Counters {
    /// Zeroed counters for `machines` machines.
    pub fn new(machines: usize) -> Self {
        Counters {
            machines,
            cells: (0..machines * STRIPES)
                .map(|_| CachePadded::new(Cell::default()))
                .collect(),
            next_stripe: (0..machines).map(|_| AtomicUsize::new(0)).collect(),
        }
    }

    /// The cell a new port of `machine` adds to (`None`: no such machine).
    fn open_cell(&self, machine: MachineId) -> Option<usize> {
        let next = self.next_stripe.get(machine as usize)?;
        let stripe = next.fetch_add(1, Ordering::Relaxed) % STRIPES;
        Some(machine as usize * STRIPES + stripe)
    }

    #[inline]
    fn add(&self, cell: usize, local: bool, kind: OpKind, bytes: u64) {
        let loc = if local {
            Locality::Local
        } else {
            Locality::Remote
        } as usize;
        let cell = &self.cells[cell];
        cell.ops[loc][kind as usize].fetch_add(1, Ordering::Relaxed);
        cell.bytes[loc][kind as usize].fetch_add(bytes, Ordering::Relaxed);
    }

    /// A copy of every machine's counters.
    pub fn snapshot(&self) -> Vec<MachineStats> {
        self.cells
            .chunks(STRIPES)
            .map(|stripes| {
                let mut s = MachineStats::default();
                for c in stripes {
                    for loc in 0..2 {
                        for k in 0..OpKind::COUNT {
                            s.ops[loc][k] += c.ops[loc][k].load(Ordering::Relaxed);
                            s.bytes[loc][k] += c.bytes[loc][k].load(Ordering::Relaxed);
                        }
                    }
                }
                s
            })
            .collect()
    }

    /// The sum over all machines.
    pub fn total(&self) -> MachineStats {
        self.snapshot()
            .into_iter()
            .fold(MachineStats::default(), |a, b| a.plus(&b))
    }

    /// Sets every counter to zero.
    pub fn reset(&self) {
        for c in &self.cells {
            for loc in 0..2 {
                for k in 0..OpKind::COUNT {
                    c.ops[loc][k].store(0, Ordering::Relaxed);
                    c.bytes[loc][k].store(0, Ordering::Relaxed);
                }
            }
        }
    }
}

/// One machine's counters at a moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MachineStats {
    /// Operations, indexed `[Locality][OpKind]`.
    pub ops: [[u64; OpKind::COUNT]; 2],
    /// Payload bytes, indexed `[Locality][OpKind]`.
    pub bytes: [[u64; OpKind::COUNT]; 2],
}

impl MachineStats {
    /// Operations of one kind and locality.
    pub fn ops_of(&self, loc: Locality, kind: OpKind) -> u64 {
        self.ops[loc as usize][kind as usize]
    }
    /// Bytes of one kind and locality.
    pub fn bytes_of(&self, loc: Locality, kind: OpKind) -> u64 {
        self.bytes[loc as usize][kind as usize]
    }
    /// All operations of a locality.
    pub fn ops_total(&self, loc: Locality) -> u64 {
        self.ops[loc as usize].iter().sum()
    }
    /// All bytes of a locality.
    pub fn bytes_total(&self, loc: Locality) -> u64 {
        self.bytes[loc as usize].iter().sum()
    }
    /// Remote operations as a fraction of all operations (0 if none).
    pub fn remote_rate(&self) -> f64 {
        let r = self.ops_total(Locality::Remote) as f64;
        let all = r + self.ops_total(Locality::Local) as f64;
        if all == 0.0 {
            0.0
        } else {
            r / all
        }
    }
    /// Element-wise sum.
    pub fn plus(&self, o: &MachineStats) -> MachineStats {
        let mut s = *self;
        for loc in 0..2 {
            for k in 0..OpKind::COUNT {
                s.ops[loc][k] += o.ops[loc][k];
                s.bytes[loc][k] += o.bytes[loc][k];
            }
        }
        s
    }
    /// Element-wise difference (`self - earlier`).
    pub fn minus(&self, earlier: &MachineStats) -> MachineStats {
        let mut s = *self;
        for loc in 0..2 {
            for k in 0..OpKind::COUNT {
                // Saturating: a reset between the two snapshots must not underflow.
                s.ops[loc][k] = s.ops[loc][k].saturating_sub(earlier.ops[loc][k]);
                s.bytes[loc][k] = s.bytes[loc][k].saturating_sub(earlier.bytes[loc][k]);
            }
        }
        s
    }
}

/// Wraps a fabric and counts what its ports do.
#[derive(Clone)]
pub struct Counting<F> {
    inner: F,
    counters: Arc<Counters>,
}

impl<F: Fabric> Counting<F> {
    /// Wraps `inner` with fresh counters.
    pub fn new(inner: F) -> Self {
        let counters = Arc::new(Counters::new(inner.machine_count()));
        Counting { inner, counters }
    }
    /// Wraps `inner` counting into `counters` (an embedded cluster's nodes,
    /// each over a view of one fabric, count into one table).
    pub fn with_counters(inner: F, counters: Arc<Counters>) -> Self {
        assert_eq!(
            counters.machines,
            inner.machine_count(),
            "counters sized for another cluster"
        );
        Counting { inner, counters }
    }
    /// The counters (shared with every port).
    pub fn counters(&self) -> &Arc<Counters> {
        &self.counters
    }
    /// The wrapped fabric.
    pub fn inner(&self) -> &F {
        &self.inner
    }
}

impl<F: Fencing> Fencing for Counting<F> {
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

impl<F: Fabric> Fabric for Counting<F> {
    type Port = CountingPort<F::Port>;

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
        Ok(CountingPort {
            inner: self.inner.port(machine)?,
            cell: self.counters.open_cell(machine),
            counters: Arc::clone(&self.counters),
            machine,
            own: PortTotals::default(),
            scratch: Vec::new(),
        })
    }
}

/// A port that counts, then delegates.
pub struct CountingPort<P> {
    inner: P,
    counters: Arc<Counters>,
    /// This port's cell of its machine's counters (`None`: the wrapped
    /// fabric has more machines than the counters, which count none of it).
    cell: Option<usize>,
    machine: MachineId,
    /// This port's own totals: what one thread's operations cost (a
    /// server reports them per query). Plain cells: a port is one thread's.
    own: PortTotals,
    /// What a list being posted counts, reused across lists.
    scratch: Vec<(MachineId, OpKind, u64)>,
}

/// What one port issued, local versus remote: operations and payload bytes.
#[derive(Debug, Default)]
pub struct PortTotals {
    ops: [std::cell::Cell<u64>; 2],
    bytes: [std::cell::Cell<u64>; 2],
}

impl PortTotals {
    /// Operations issued to `loc`.
    pub fn ops(&self, loc: Locality) -> u64 {
        self.ops[loc as usize].get()
    }
    /// Payload bytes of the operations issued to `loc`.
    pub fn bytes(&self, loc: Locality) -> u64 {
        self.bytes[loc as usize].get()
    }
}

impl<P: Port> CountingPort<P> {
    #[inline]
    fn count(&self, target: MachineId, kind: OpKind, bytes: u64) {
        if let (Some(cell), true) = (self.cell, (target as usize) < self.counters.machines) {
            self.counters.add(cell, target == self.machine, kind, bytes);
            let loc = (target != self.machine) as usize;
            self.own.ops[loc].set(self.own.ops[loc].get() + 1);
            self.own.bytes[loc].set(self.own.bytes[loc].get() + bytes);
        }
    }

    /// What this port has issued so far (subtract two readings for the cost
    /// of what ran between them).
    pub fn totals(&self) -> &PortTotals {
        &self.own
    }
}

impl<P: Port> Port for CountingPort<P> {
    fn machine(&self) -> MachineId {
        self.machine
    }
    fn machine_count(&self) -> usize {
        self.inner.machine_count()
    }
    fn post(&mut self, wr: WorkRequest) -> Result<()> {
        let (target, kind, bytes) = (wr.target, wr.verb.kind(), wr.verb.payload_bytes());
        self.inner.post(wr)?;
        self.count(target, kind, bytes);
        Ok(())
    }
    fn post_many(&mut self, wrs: &mut Vec<WorkRequest>) -> Result<()> {
        let mut ops = std::mem::take(&mut self.scratch);
        ops.clear();
        ops.extend(
            wrs.iter()
                .map(|wr| (wr.target, wr.verb.kind(), wr.verb.payload_bytes())),
        );
        let r = self.inner.post_many(wrs);
        // On an error, the requests left in `wrs` and the refused one were not posted.
        let posted = if r.is_ok() {
            ops.len()
        } else {
            ops.len() - wrs.len() - 1
        };
        for &(target, kind, bytes) in &ops[..posted] {
            self.count(target, kind, bytes);
        }
        self.scratch = ops;
        r
    }
    fn poll(&mut self, out: &mut Vec<Completion>) -> Result<usize> {
        self.inner.poll(out)
    }
    fn wait(&mut self, out: &mut Vec<Completion>) -> Result<usize> {
        self.inner.wait(out)
    }
    fn inflight(&self) -> usize {
        self.inner.inflight()
    }
    #[inline]
    fn prefetch(&mut self, wr: &WorkRequest) {
        self.inner.prefetch(wr)
    }
    fn execute(&mut self, wr: WorkRequest) -> Result<Output> {
        self.count(wr.target, wr.verb.kind(), wr.verb.payload_bytes());
        self.inner.execute(wr)
    }
    #[inline]
    fn read(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<()> {
        self.count(target, OpKind::Read, buf.len() as u64);
        self.inner.read(target, region, offset, buf)
    }
    #[inline]
    fn read_overlapped(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        buf: &mut [u8],
        meanwhile: &mut dyn FnMut(),
    ) -> Result<()> {
        self.count(target, OpKind::Read, buf.len() as u64);
        self.inner
            .read_overlapped(target, region, offset, buf, meanwhile)
    }
    #[inline]
    fn read_word(&mut self, target: MachineId, region: RegionId, offset: u64) -> Result<u64> {
        self.count(target, OpKind::Read, 8);
        self.inner.read_word(target, region, offset)
    }
    #[inline]
    fn write(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        data: &[u8],
    ) -> Result<()> {
        self.count(target, OpKind::Write, data.len() as u64);
        self.inner.write(target, region, offset, data)
    }
    #[inline]
    fn write_word(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        word: u64,
    ) -> Result<()> {
        self.count(target, OpKind::Write, 8);
        self.inner.write_word(target, region, offset, word)
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
        self.count(target, OpKind::Cas, 8);
        self.inner.cas(target, region, offset, expected, new)
    }
    #[inline]
    fn fetch_add(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        add: u64,
    ) -> Result<u64> {
        self.count(target, OpKind::FetchAdd, 8);
        self.inner.fetch_add(target, region, offset, add)
    }
    fn send(&mut self, target: MachineId, payload: &[u8]) -> Result<()> {
        self.inner.send(target, payload)?;
        self.count(target, OpKind::Send, payload.len() as u64);
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::{LocalConfig, LocalFabric};

    /// More ports of one machine than it has cells, on threads at once:
    /// every operation is counted once, on the issuing machine, whichever
    /// cell its port adds to, and a reset clears them all.
    #[test]
    fn ports_of_one_machine_on_many_threads_are_counted_exactly() {
        let f =
            Counting::new(LocalFabric::new(LocalConfig::with_machines(2).without_model()).unwrap());
        let r = f.register(0, "r", 4096).unwrap();
        let ports = STRIPES + 3;
        std::thread::scope(|s| {
            for t in 0..ports {
                let f = &f;
                s.spawn(move || {
                    let mut p = f.port(0).unwrap();
                    for i in 0..1000u64 {
                        p.write_word(0, r.id, (t as u64 % 8) * 8, i).unwrap();
                        p.read_word(1, r.id, 0).ok(); // remote, and refused: still counted
                    }
                });
            }
        });
        let s = f.counters().snapshot();
        let n = 1000 * ports as u64;
        assert_eq!(s[0].ops_of(Locality::Local, OpKind::Write), n);
        assert_eq!(s[0].bytes_of(Locality::Local, OpKind::Write), 8 * n);
        assert_eq!(s[0].ops_of(Locality::Remote, OpKind::Read), n);
        assert_eq!(s[1], MachineStats::default(), "machine 1 issued nothing");
        assert_eq!(f.counters().total().ops_total(Locality::Local), n);
        f.counters().reset();
        assert_eq!(f.counters().total(), MachineStats::default());
    }
}
