//! The one-sided memory fabric that every layer of Locus stands on.
//!
//! A cluster is machines `0..N` (N <= [`MACHINES_MAX`]). Each machine registers
//! named memory regions; any machine can READ, WRITE, compare-and-swap and
//! fetch-and-add any region by offset without the owner's threads taking part,
//! as RDMA's one-sided verbs do (Pragh 2.1, 3). Two-sided messages (SEND/RECV
//! through a per-machine inbox) carry forwarded updates and control.
//!
//! The [`Fabric`] trait hands out [`Port`]s. A port is what a queue pair plus
//! its completion queue is to an RDMA worker: it belongs to one thread, issues
//! operations *as* one machine, keeps up to a bounded number in flight
//! ([`Port::post`]) and reports their completions ([`Port::poll`],
//! [`Port::wait`]). Implementations are siblings: [`local`] (every machine in
//! this process, a modelled remote latency spent by polling), [`tcp`] (machines
//! in other processes, served by a service thread), [`sim`] (a seeded
//! simulation, one actor at a time, where machines can crash and restart), and
//! decorators that wrap any fabric: [`counting`] (exact per-machine counters)
//! and [`faulty`] (fail or delay the k-th operation). [`any`] holds one of the
//! implementations chosen at run time ([`any::AnyFabric`], for a fabric named
//! in a configuration file). Every one of them implements [`Fencing`]
//! ([`fencing`]: epochs of machines' incarnations, and the rules that keep an
//! incarnation that ended out). [`conformance`] is the one test suite every
//! implementation must pass; [`pool`] runs work in the context of a machine so
//! that N emulated machines share one pool of worker threads.
//!
//! # Ordering guarantees (what the store may rely on)
//! 1. **Granularity.** Offsets and lengths are whole 8-byte words.
//! 2. **Word atomicity.** Every aligned 8-byte word is read and written
//!    atomically: no torn words. A multi-word READ is *not* atomic as a whole;
//!    it may see some words before and some after a concurrent WRITE (as RDMA).
//! 3. **Atomics.** CAS and fetch-add act on one word atomically with respect to
//!    every other operation on that word, local or remote.
//! 4. **Visibility.** When an operation's completion is reported, its effect is
//!    visible to every later operation by anyone. A READ that observes a word
//!    written by a CAS also observes every word that the CAS's issuer wrote and
//!    saw complete before posting the CAS (release/acquire), which is what
//!    "write the value, then CAS the address word to publish it" needs.
//! 5. **Per-port order.** Operations posted on one port to one target machine
//!    take effect in posting order. Across targets there is no order unless the
//!    later request is *fenced* ([`WorkRequest::fenced`]): a fenced request
//!    starts only after every earlier request of its port has completed.
//! 6. **Completions** of one port to one target are reported in posting order.
//! 7. **Messages** from one sender to one receiver arrive in sending order,
//!    at most once.
//! 8. **Failures.** An error from a peer that became unavailable means
//!    "maybe applied": over a network the operation (or message) may have taken
//!    effect before the connection broke. Callers that retry must be idempotent
//!    or re-read first. Validation errors (bounds, alignment, unknown region)
//!    mean "not applied".

#![warn(missing_docs)]

pub mod any;
pub mod auth;
pub mod conformance;
pub mod counting;
mod error;
pub mod faulty;
pub mod fencing;
mod hosted;
pub mod local;
mod memory;
mod op;
pub mod pool;
pub mod sim;
pub mod sync;
pub mod tcp;

pub use error::{FabricError, Result};
pub use fencing::{Fencing, PeerEpoch};
pub use memory::{MachineMemory, Region, REGION_BYTES_MAX};
pub use op::{check_alignment, Completion, Message, OpKind, Output, Verb, WorkRequest, WrId};

use std::time::Duration;

/// Largest cluster: the remote address word has a 7-bit machine id (Pragh 4.1).
pub const MACHINES_MAX: usize = 128;
/// The unit of every offset and length, in bytes.
pub const WORD_BYTES: u64 = 8;

/// A machine's index in the cluster, `0..N`.
pub type MachineId = u8;

/// A region's index on its machine, in registration order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RegionId(pub u16);

impl std::fmt::Display for RegionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// What a machine says about one of its regions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionInfo {
    /// The region's id on its machine.
    pub id: RegionId,
    /// Size in bytes (a multiple of 8).
    pub len_bytes: u64,
}

/// Checks a machine id against a cluster size.
pub fn check_machine(machine: MachineId, machines: usize) -> Result<()> {
    if (machine as usize) < machines {
        Ok(())
    } else {
        Err(FabricError::NoSuchMachine { machine, machines })
    }
}

/// A cluster of machines reachable by one-sided operations.
pub trait Fabric: Send + Sync + 'static {
    /// The per-thread handle that issues operations.
    type Port: Port;

    /// Number of machines in the cluster.
    fn machine_count(&self) -> usize;

    /// Whether this process holds `machine`'s memory (it can register regions there).
    fn hosts(&self, machine: MachineId) -> bool;

    /// Registers a zero-filled region of `len_bytes` (a multiple of 8) on a
    /// hosted machine. Memory is reserved lazily: untouched pages cost nothing.
    fn register(&self, machine: MachineId, name: &str, len_bytes: u64) -> Result<RegionInfo>;

    /// Looks up a region of any machine by name (a network round trip for a
    /// machine in another process).
    fn lookup(&self, machine: MachineId, name: &str) -> Result<RegionInfo>;

    /// Opens a port that issues operations as `machine`. Ports are cheap; open
    /// one per thread per machine the thread acts for.
    fn port(&self, machine: MachineId) -> Result<Self::Port>;

    /// Has the fabric unpark `waker` whenever a message is delivered to
    /// hosted `machine`'s inbox, whoever sent it (a service thread may then
    /// park until a message comes instead of polling its inbox). Returns
    /// whether it will: a fabric that cannot returns false.
    fn wake_on_message(&self, machine: MachineId, waker: std::thread::Thread) -> Result<bool> {
        let _ = (machine, waker);
        Ok(false)
    }
}

/// A queue pair plus completion queue: one thread's way to issue operations as one machine.
///
/// The synchronous helpers (`read`, `write`, `cas`, ...) wait for their own
/// operation only; completions of requests posted earlier stay queued for
/// [`Port::poll`].
pub trait Port: Send {
    /// The machine this port acts as.
    fn machine(&self) -> MachineId;

    /// Number of machines in the cluster.
    fn machine_count(&self) -> usize;

    /// Posts an operation without waiting. Validation errors (bad machine,
    /// region, bounds, alignment) come back in its completion, not here; `Err`
    /// here means the request could not be queued (too many in flight).
    fn post(&mut self, wr: WorkRequest) -> Result<()>;

    /// Posts the requests of `wrs` in order, as one list (RDMA's
    /// `ibv_post_send` with chained work requests: one doorbell), leaving
    /// `wrs` empty. Each request behaves as if posted alone with
    /// [`Port::post`]; a fabric may do the per-post work once per list. On
    /// an `Err` (the request refused is gone) `wrs` holds the requests after
    /// it, not posted.
    fn post_many(&mut self, wrs: &mut Vec<WorkRequest>) -> Result<()> {
        let mut list = wrs.drain(..);
        while let Some(wr) = list.next() {
            if let Err(e) = self.post(wr) {
                let rest: Vec<WorkRequest> = list.collect();
                wrs.extend(rest);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Appends the completions that are ready to `out`, without blocking.
    /// Returns how many were appended.
    fn poll(&mut self, out: &mut Vec<Completion>) -> Result<usize>;

    /// Like [`Port::poll`] but waits until at least one completion is ready,
    /// unless nothing is in flight (then returns 0 at once).
    fn wait(&mut self, out: &mut Vec<Completion>) -> Result<usize>;

    /// Operations posted and not yet returned by `poll`/`wait`.
    fn inflight(&self) -> usize;

    /// A hint that `wr` will be posted soon; changes nothing a request can
    /// observe. The in-process fabric brings the first lines of the
    /// target's bytes into the CPU's cache (`memory::PREFETCH_BYTES_MAX`),
    /// as a NIC's DMA would fetch them without the CPU, so a
    /// caller that prefetches a batch of requests and then posts them does
    /// not stall on a miss per request. Other fabrics ignore it.
    #[inline]
    fn prefetch(&mut self, wr: &WorkRequest) {
        let _ = wr;
    }

    /// Posts one operation and waits for its completion.
    fn execute(&mut self, wr: WorkRequest) -> Result<Output>;

    /// Reads `buf.len()` bytes.
    fn read(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<()> {
        let out = self.execute(WorkRequest::read(0, target, region, offset, buf.len()))?;
        match out {
            Output::Data(data) => {
                buf.copy_from_slice(&data);
                Ok(())
            }
            other => unreachable!("a READ completed with {other:?}"),
        }
    }

    /// [`Port::read`], running `meanwhile` while the READ is in flight:
    /// after it is issued and before its completion is awaited, as an RDMA
    /// worker does its own bookkeeping between posting a READ and polling
    /// for it. `meanwhile` runs only if the READ was issued (a request
    /// refused at once runs nothing). The default runs it after the READ.
    fn read_overlapped(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        buf: &mut [u8],
        meanwhile: &mut dyn FnMut(),
    ) -> Result<()> {
        self.read(target, region, offset, buf)?;
        meanwhile();
        Ok(())
    }

    /// Reads one word.
    fn read_word(&mut self, target: MachineId, region: RegionId, offset: u64) -> Result<u64> {
        let mut b = [0u8; 8];
        self.read(target, region, offset, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// Writes `data`.
    fn write(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        data: &[u8],
    ) -> Result<()> {
        self.execute(WorkRequest::write(0, target, region, offset, data.to_vec()))?;
        Ok(())
    }

    /// Writes one word.
    fn write_word(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        word: u64,
    ) -> Result<()> {
        self.write(target, region, offset, &word.to_le_bytes())
    }

    /// Compare-and-swap; returns the previous word (success iff it equals `expected`).
    fn cas(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        expected: u64,
        new: u64,
    ) -> Result<u64> {
        let out = self.execute(WorkRequest::cas(0, target, region, offset, expected, new))?;
        Ok(out.word().expect("a CAS completes with a word"))
    }

    /// Fetch-and-add (wrapping); returns the previous word.
    fn fetch_add(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        add: u64,
    ) -> Result<u64> {
        let out = self.execute(WorkRequest::fetch_add(0, target, region, offset, add))?;
        Ok(out.word().expect("a fetch-add completes with a word"))
    }

    /// Sends a two-sided message to `target`'s inbox.
    fn send(&mut self, target: MachineId, payload: &[u8]) -> Result<()>;

    /// Takes the next message delivered to this port's machine, if any.
    fn try_recv(&mut self) -> Result<Option<Message>>;

    /// Fails with the error an operation to `target` would get at once if
    /// the fabric already knows it cannot be reached (the TCP fabric: marked
    /// down by membership), so a wait for `target`'s reply to a message can
    /// end instead of running out its timeout. Fabrics without failures say Ok.
    fn check_peer(&self, target: MachineId) -> Result<()> {
        let _ = target;
        Ok(())
    }

    /// Hint that the caller is waiting for another thread (spinning on a lock or a
    /// flag). Real fabrics yield the CPU; the simulated fabric makes it a
    /// scheduling point so the awaited thread can run.
    fn relax(&mut self) {
        std::thread::yield_now()
    }

    /// [`Port::relax`] for a wait that has already relaxed `round` times
    /// without what it waits for: a fabric whose waits can last
    /// milliseconds (TCP: a reply behind another process's log sync) sleeps
    /// once the wait is long, so that waiting threads do not keep the
    /// cores the awaited ones need; the others relax.
    fn back_off(&mut self, round: u32) {
        let _ = round;
        self.relax()
    }

    /// Nanoseconds on this fabric's clock (monotonic; its origin is
    /// unspecified). Leases are measured with it; the simulated fabric makes
    /// it simulated time, so lease expiry is deterministic there.
    fn now_ns(&self) -> u64 {
        use std::sync::OnceLock;
        static EPOCH: OnceLock<std::time::Instant> = OnceLock::new();
        EPOCH
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_nanos() as u64
    }

    /// Waits up to `timeout` for a message.
    fn recv_timeout(&mut self, timeout: Duration) -> Result<Option<Message>> {
        let deadline = std::time::Instant::now() + timeout;
        let mut spins = 0u32;
        loop {
            if let Some(m) = self.try_recv()? {
                return Ok(Some(m));
            }
            if std::time::Instant::now() >= deadline {
                return Ok(None);
            }
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }
}
