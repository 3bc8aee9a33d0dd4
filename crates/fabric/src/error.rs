//! The fabric's error type.

use crate::{MachineId, RegionId};

/// Everything a fabric operation can fail with. Expected failures only: a
/// caller bug that the fabric can detect cheaply (a misaligned offset, an
/// out-of-bounds access) is still an error rather than a panic, because over
/// TCP it arrives from another process.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FabricError {
    /// A machine id at or past the cluster size.
    #[error(
        "machine {machine} does not exist: the cluster has {machines} machines (0..{machines})"
    )]
    NoSuchMachine {
        /// The id asked for.
        machine: MachineId,
        /// Machines in the cluster.
        machines: usize,
    },
    /// A region id or name that the machine never registered.
    #[error("machine {machine} has no region {region}")]
    NoSuchRegion {
        /// The machine asked.
        machine: MachineId,
        /// The region's name or id, as asked for.
        region: String,
    },
    /// A region name registered twice on one machine.
    #[error("machine {machine} already has a region named '{name}'")]
    DuplicateRegion {
        /// The machine.
        machine: MachineId,
        /// The region name.
        name: String,
    },
    /// Registration, a port, or fencing on a machine this process (or node
    /// view, `hosting_only`) does not host.
    #[error("machine {machine} is not hosted by this process or node view; register its regions, open its ports and set its epochs where it runs")]
    NotHosted {
        /// The machine.
        machine: MachineId,
    },
    /// An access that does not fit in the region.
    #[error(
        "access of {len} bytes at offset {offset} is outside region {region} of machine {machine} ({region_len} bytes)"
    )]
    OutOfBounds {
        /// Target machine.
        machine: MachineId,
        /// Target region.
        region: RegionId,
        /// Byte offset asked for.
        offset: u64,
        /// Bytes asked for.
        len: u64,
        /// The region's size in bytes.
        region_len: u64,
    },
    /// Offsets and lengths are in whole 8-byte words (the store's unit, Pragh 4.1).
    #[error("offset {offset} and length {len} must be multiples of 8 bytes")]
    Misaligned {
        /// Byte offset asked for.
        offset: u64,
        /// Bytes asked for.
        len: u64,
    },
    /// A region larger than the fabric allows or the machine can map.
    #[error("region '{name}' of {len} bytes is too large: the limit is {limit} bytes")]
    RegionTooLarge {
        /// The region name.
        name: String,
        /// Requested bytes.
        len: u64,
        /// Largest allowed.
        limit: u64,
    },
    /// Too many operations posted and not yet polled.
    #[error("{inflight} operations are in flight, the limit is {limit}: poll completions before posting more")]
    TooManyInflight {
        /// Operations in flight.
        inflight: usize,
        /// The port's limit.
        limit: usize,
    },
    /// The receiving machine's message inbox is full (back-pressure; retry later).
    #[error(
        "the message inbox of machine {machine} is full ({limit} messages); retry after it drains"
    )]
    InboxFull {
        /// The receiver.
        machine: MachineId,
        /// Inbox capacity.
        limit: usize,
    },
    /// A message larger than the fabric carries.
    #[error("message of {len} bytes exceeds the limit of {limit} bytes")]
    MessageTooLarge {
        /// Payload bytes.
        len: usize,
        /// Largest payload.
        limit: usize,
    },
    /// The peer serving a machine cannot be reached, stopped answering, or
    /// closed the connection. Operations in flight to it are lost.
    #[error("machine {machine} is unavailable: {reason}")]
    PeerUnavailable {
        /// The machine whose server failed.
        machine: MachineId,
        /// What happened (I/O error, timeout, closed connection).
        reason: String,
    },
    /// The peer sent bytes that do not decode as a frame.
    #[error("protocol error from machine {machine}: {reason}")]
    Protocol {
        /// The peer.
        machine: MachineId,
        /// What was wrong.
        reason: String,
    },
    /// A fault injected on purpose by [`crate::faulty::Faulty`].
    #[error("injected fault on operation {op_index}")]
    Injected {
        /// The 0-based index of the failed operation on its port.
        op_index: u64,
    },
    /// A job on a worker pool panicked; the pool refuses further work.
    #[error("a worker thread failed and the pool is poisoned: {reason}")]
    WorkerPanicked {
        /// The panic message.
        reason: String,
    },
    /// A configuration that cannot work.
    #[error("invalid fabric configuration: {0}")]
    Config(String),
    /// The operating system would not map a region this large (with strict
    /// overcommit, `vm.overcommit_memory = 2`, regions count in full).
    #[error("region '{name}' of {len} bytes could not be mapped: the machine will not reserve that much memory (see free memory and vm.overcommit_memory)")]
    NoMemory {
        /// The region name.
        name: String,
        /// Requested bytes.
        len: u64,
    },
}

/// Result alias for fabric operations.
pub type Result<T> = std::result::Result<T, FabricError>;
