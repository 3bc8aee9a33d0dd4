//! The status API: what `locus kv migration status` prints for each migration (issue item 10).
//! A stuck migration shows as a large `idle_us` with its phase; an aborted one keeps its error.

use serde::Serialize;

use crate::wire::{NodeId, Protocol, ShardId};

/// Where a migration is in the workflow (NetMigrate 4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum MigrationPhase {
    /// Destination notified, router registration pending.
    Registering,
    /// Groups being copied.
    Copying,
    /// Source-based: re-sending dirty pairs.
    DirtyRounds,
    /// Source frozen (stop-and-copy, source-based final pause).
    FinalPause,
    /// Destination owns the shard; waiting for the router to drop the instance.
    Terminating,
    /// Finished; the source cleaned up.
    Done,
    /// Aborted; the source is the owner again.
    Aborted,
    /// As the destination sees it: the source stopped answering mid-copy. The shard is served
    /// here as orphaned (copied groups and keys written here; LOST for the rest) until an
    /// operator runs `recover` or `abort` (design: "NetMigrate: a dead source").
    SourceLost,
    /// The operator accepted the loss of the uncopied groups: the destination owns the shard.
    Recovered,
    /// The operator sent the shard back to its source: the destination dropped its copy.
    RolledBack,
}

/// One migration's progress, as the source agent sees it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MigrationStatus {
    /// The source server's number for this migration (1, 2, ... in the order it started
    /// them), so that a caller can follow the attempt it started among earlier ones.
    pub attempt: u64,
    /// The shard.
    pub shard: ShardId,
    /// Source server.
    pub source: NodeId,
    /// Destination server.
    pub destination: NodeId,
    /// Protocol.
    pub protocol: Protocol,
    /// Phase.
    pub phase: MigrationPhase,
    /// Groups completed.
    pub groups_done: u32,
    /// Groups in the shard.
    pub groups_total: u32,
    /// Time since the migration started (or its whole duration once finished).
    pub elapsed_us: u64,
    /// Average rate so far.
    pub groups_per_s: f64,
    /// Time since the destination or router last answered.
    pub idle_us: u64,
    /// Errors so far (an abort counts one).
    pub errors: u64,
    /// The last error, in words.
    pub last_error: Option<String>,
    /// Late dirty writes forwarded by this source so far (all its migrations).
    pub late_writes: u64,
    /// Dirty-log rounds (source-based).
    pub dirty_rounds: u32,
    /// Time the shard was frozen (stop-and-copy, source-based).
    pub pause_us: u64,
}
