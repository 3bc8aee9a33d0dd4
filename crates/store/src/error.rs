//! The store's error type.

use locus_fabric::{FabricError, MachineId};

/// What a store operation can fail with.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The fabric failed (peer down, bounds, ...).
    #[error(transparent)]
    Fabric(#[from] FabricError),
    /// A field of the address word would overflow (Pragh 4.1's limits).
    #[error("address limit: {0}")]
    Limit(String),
    /// A value larger than a value can be.
    #[error("value of {bytes} bytes exceeds the limit of {limit} bytes; lower part_neighbors_max to decompose the vertex")]
    ValueTooLarge {
        /// Bytes the value needs (header included).
        bytes: u64,
        /// Largest value.
        limit: u64,
    },
    /// The value region of a machine has no room.
    #[error("the value region of machine {machine} is full: {requested_bytes} bytes requested, {capacity_bytes} bytes in all, of which {retired_bytes} bytes are retired and wait out the reclaim lease; raise value_region_bytes (or lower reclaim_lease_ms if updates are frequent)")]
    RegionFull {
        /// The machine.
        machine: MachineId,
        /// The block asked for.
        requested_bytes: u64,
        /// The region's capacity.
        capacity_bytes: u64,
        /// Bytes held by retired values until their lease expires.
        retired_bytes: u64,
    },
    /// The key table of a machine has no free slot.
    #[error("the key table of machine {machine} has no free slot for the key: all {overflow_buckets} overflow buckets are in use ({capacity_keys} key slots in all); raise buckets_per_machine or overflow_buckets_per_machine")]
    TableFull {
        /// The machine.
        machine: MachineId,
        /// Key slots in all (main and overflow buckets).
        capacity_keys: u64,
        /// Overflow buckets of the table.
        overflow_buckets: u64,
    },
    /// An update was issued on a machine that does not hold the vertex's value;
    /// updates run where the value is (Pragh 4.3).
    #[error("vertex {vertex}'s value is held by machine {holder}, not machine {this}; run the update there")]
    NotHolder {
        /// The vertex.
        vertex: u32,
        /// The machine holding its value.
        holder: MachineId,
        /// The machine that tried.
        this: MachineId,
    },
    /// A port was asked for a machine whose memory lives in another process.
    #[error("machine {machine} is not hosted by this process")]
    NotHosted {
        /// The machine.
        machine: MachineId,
    },
    /// A read kept finding invalidated values (a live-lock guard).
    #[error("gave up on key {key:#x} after {retries} retries on invalidated values")]
    Contention {
        /// The key.
        key: u64,
        /// Retries made.
        retries: u32,
    },
    /// A k-hop query's frontier grew past its limit.
    #[error("the frontier of hop {hop} passed {vertices_max} vertices; lower k or hops")]
    FrontierTooLarge {
        /// The hop (1-based) whose frontier passed the limit.
        hop: u32,
        /// The limit (counting repeats).
        vertices_max: usize,
    },
    /// A k-hop query's deadline passed between two hops.
    #[error("deadline passed after hop {hops_done}")]
    DeadlinePassed {
        /// Hops finished before the deadline.
        hops_done: u32,
    },
    /// A forwarded update failed at, or got no answer from, another machine.
    #[error("update forwarded to machine {machine} failed: {reason}")]
    Forwarded {
        /// The machine it was forwarded to.
        machine: MachineId,
        /// What happened there.
        reason: String,
    },
    /// A peer sent a check-and-forward message that does not decode.
    #[error("malformed message from machine {machine}: {reason}")]
    Malformed {
        /// The sending machine (as the fabric reports it).
        machine: MachineId,
        /// What was wrong with it.
        reason: String,
    },
    /// A forwarded request was answered with another kind of reply.
    #[error("machine {machine} answered a {request} request with a {reply} reply")]
    ReplyMismatch {
        /// The machine that answered.
        machine: MachineId,
        /// The kind of request sent.
        request: &'static str,
        /// The kind of reply received.
        reply: &'static str,
    },
    /// A key changed while its shard was being moved (shard moves are stop-the-world).
    #[error("key {key:#x} changed at machine {machine} while its shard was moving; pause every other operation during move_shards")]
    ShardMoveRace {
        /// The key.
        key: u64,
        /// The machine whose copy changed.
        machine: MachineId,
    },
    /// A shard move named a shard that is not where the move says.
    #[error("shard {shard} is on machine {actual}, not on machine {expected}")]
    ShardElsewhere {
        /// The shard.
        shard: u32,
        /// Where the move said it was.
        expected: MachineId,
        /// Where the shard map says it is.
        actual: MachineId,
    },
    /// An operation needs a feature the store was created without.
    #[error("{operation} needs {setting}")]
    FeatureOff {
        /// The operation asked for.
        operation: &'static str,
        /// The setting that turns the feature on.
        setting: &'static str,
    },
    /// A bounded queue of a machine is full; the request was refused, not queued.
    #[error("machine {machine} is overloaded: its {queue} holds its limit of {limit} entries; retry later")]
    Overloaded {
        /// The machine.
        machine: MachineId,
        /// Which queue.
        queue: &'static str,
        /// Its limit.
        limit: usize,
    },
    /// A machine's service thread stopped; forwarded requests to it cannot complete.
    #[error("the service of machine {machine} stopped: {reason}")]
    ServiceStopped {
        /// The machine.
        machine: MachineId,
        /// Why it stopped.
        reason: String,
    },
    /// A machine's reclaim ring holds impossible counters.
    #[error("machine {machine}'s reclaim ring has head {head} and tail {tail}, impossible for a capacity of {capacity} entries; is the layout the one the region was registered with?")]
    RingCorrupt {
        /// The machine.
        machine: MachineId,
        /// The ring's head counter.
        head: u64,
        /// The ring's tail counter.
        tail: u64,
        /// The layout's capacity in entries.
        capacity: u64,
    },
    /// More keys were asked to be tracked on one machine than the tracker takes.
    #[error(
        "asked to track more than {limit} keys on one machine; track fewer candidates per interval"
    )]
    TrackedKeysFull {
        /// The tracker's limit.
        limit: usize,
    },
    /// A thread could not be started.
    #[error("cannot start thread {name}: {reason}")]
    Thread {
        /// The thread's name.
        name: String,
        /// The operating system's reason.
        reason: String,
    },
    /// The key's value lived on a machine that died, and its home had no
    /// durable copy to reload it from (recovery marked it lost).
    #[error("the value of key {key:#x} (vertex {vertex}) was lost with machine {machine}: it held the only copy and the home keeps no write-ahead log; configure [durability] so homes can reload such values")]
    ValueLost {
        /// The key.
        key: u64,
        /// Its vertex.
        vertex: u32,
        /// The machine that died holding it.
        machine: MachineId,
    },
    /// The key was handed to another machine by a slot move (issue 59): its
    /// old home keeps only a marker. The caller asks the new home.
    #[error("key {key:#x} (vertex {vertex}) was handed to machine {to} by a slot move; fetch the slot table and ask machine {to}")]
    Moved {
        /// The key.
        key: u64,
        /// Its vertex.
        vertex: u32,
        /// Its new home.
        to: MachineId,
    },
    /// The key's new home holds a copy that is not its own yet: the old
    /// home still answers for it (its handoff is in flight, issue 59).
    #[error("key {key:#x} (vertex {vertex}) is still machine {owner}'s: its handoff to this machine is in flight; ask machine {owner}")]
    NotOwnedYet {
        /// The key.
        key: u64,
        /// Its vertex.
        vertex: u32,
        /// The machine that still owns it.
        owner: MachineId,
    },
    /// A key of a slot this machine serves ahead of the slot table (a move
    /// handed it here, the table not committed yet) would be created or
    /// removed: that waits for the commit (design V3).
    #[error("vertex {vertex}'s slot {slot} is moving here and the slot table does not name this machine yet: keys of it are created or removed once it does; retry")]
    AheadOfTable {
        /// The vertex.
        vertex: u32,
        /// Its slot.
        slot: u32,
    },
    /// BEGIN of a snapshot while another one is open at this home (one at
    /// a time, `crate::snapshot`).
    #[error(
        "machine {machine} cannot begin snapshot {id}: snapshot {open} is open there; end it first"
    )]
    SnapshotBusy {
        /// The snapshot asked for.
        id: u64,
        /// The one open.
        open: u64,
        /// The home.
        machine: MachineId,
    },
    /// The home ended the snapshot on its own before its END (design S3's
    /// bound): its pre-images are gone; run the analytics again.
    #[error("snapshot {id} was ended by machine {machine} because {why}; its pre-images are gone: run again (and raise the limit if the run is that long)")]
    SnapshotEnded {
        /// The snapshot.
        id: u64,
        /// The home.
        machine: MachineId,
        /// What ended it.
        why: String,
    },
    /// PRE-IMAGES or END of a snapshot this home does not have open.
    #[error("snapshot {id} is not open at machine {machine}: BEGIN it there first")]
    SnapshotNotOpen {
        /// The snapshot.
        id: u64,
        /// The home.
        machine: MachineId,
    },
    /// A configuration that cannot work (the message names the setting).
    #[error("invalid store configuration: {0}")]
    Config(String),
}

/// Result alias for the store.
pub type Result<T> = std::result::Result<T, StoreError>;
