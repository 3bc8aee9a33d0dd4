//! A server's settings ([`ServerConfig`], every limit validated with its name) and counters
//! ([`ServerStats`]).

use crate::error::{Error, Result};
use crate::group::Geometry;
use crate::wire::NodeId;

/// Server limits and agent settings.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// This server's node id; its own shard has the same id.
    pub id: NodeId,
    /// The router's node id.
    pub router: NodeId,
    /// Shape of this server's own shard.
    pub geometry: Geometry,
    /// Pairs per DATA packet.
    pub batch_items_max: usize,
    /// Unacked DATA packets per migration.
    pub batches_inflight_max: usize,
    /// Groups migrating at once (the paper's parallel migration threads, 6.3: 4): the copy
    /// window, of groups whose START, DATA or late writes are not all acknowledged.
    pub groups_inflight_max: usize,
    /// Groups whose DATA is all acknowledged awaiting their GROUP-COMPLETE ack (NetMigrate and
    /// Fulva): the completing window. A group leaves the copy window when it enters this one,
    /// so the router's COMPLETE round trip overlaps the next group's copy; the CBF then holds
    /// at most `groups_inflight_max + completing_max` groups (design: "NetMigrate: the copy
    /// window and the completing window").
    pub completing_max: usize,
    /// Reads parked at a destination waiting for a PriorityPull or a mirrored write.
    pub parked_reads_max: usize,
    /// Queries held by a frozen source (stop-and-copy, source-based final pause).
    pub held_queries_max: usize,
    /// Dirty-log rounds of the source-based protocol before the final pause.
    pub dirty_rounds_max: u32,
    /// The source-based protocol pauses once the dirty set is at most this big.
    pub final_dirty_keys_max: usize,
    /// Patience: a packet that must be answered (see `reliable`) is given up once it has been
    /// sent `retries_max` more times and waited this long since its first send; a source then
    /// aborts its migration.
    pub ack_timeout_us: u64,
    /// First wait for an answer before sending a packet again (doubling after each send).
    pub retransmit_us: u64,
    /// Times a packet is sent again before it may be given up.
    pub retries_max: u32,
    /// Destination writes are mirrored to the source before they are acked (see module doc).
    pub mirror_writes: bool,
    /// Finished migrations kept for the status API.
    pub status_history_max: usize,
    /// The largest shard this server accepts from a MIGRATE-INIT, as log2 of its buckets: one
    /// packet must not make it allocate an arbitrary table (2^24 buckets of the built-in
    /// [`crate::table::Table`] are about 400 MB before any pair arrives).
    pub incoming_buckets_log2_max: u8,
}

impl ServerConfig {
    /// Defaults for server `id` behind router `router`.
    pub fn new(id: NodeId, router: NodeId, geometry: Geometry) -> Self {
        Self {
            id,
            router,
            geometry,
            batch_items_max: 32,
            batches_inflight_max: 16,
            groups_inflight_max: 4,
            completing_max: 4,
            parked_reads_max: 4096,
            held_queries_max: 4096,
            dirty_rounds_max: 8,
            final_dirty_keys_max: 64,
            ack_timeout_us: 2_000_000,
            retransmit_us: 20_000,
            retries_max: 8,
            mirror_writes: true,
            status_history_max: 16,
            incoming_buckets_log2_max: 24,
        }
    }

    /// Checks every limit.
    pub fn validate(&self) -> Result<()> {
        let per_batch = crate::wire::DATAGRAM_BYTES_MAX
            / (crate::wire::ITEM_BYTES_MIN + crate::wire::VALUE_BYTES_MAX);
        let checks: [(&str, usize, usize, usize); 6] = [
            ("batch_items_max", self.batch_items_max, 1, per_batch),
            (
                "batches_inflight_max",
                self.batches_inflight_max,
                1,
                1 << 16,
            ),
            // The router's table of counted groups (duplicates, see `router`) holds this many.
            (
                "groups_inflight_max",
                self.groups_inflight_max,
                1,
                crate::router::GROUPS_INFLIGHT_MAX,
            ),
            (
                "completing_max",
                self.completing_max,
                1,
                crate::router::GROUPS_INFLIGHT_MAX,
            ),
            ("parked_reads_max", self.parked_reads_max, 1, 1 << 20),
            ("held_queries_max", self.held_queries_max, 1, 1 << 20),
        ];
        for (name, v, lo, hi) in checks {
            if v < lo || v > hi {
                return Err(Error::InvalidSetting {
                    key: name,
                    value: v.to_string(),
                    expected: format!("{lo}..={hi}"),
                });
            }
        }
        // Every group of both windows may be counted in the router's CBF at once.
        let counted = self.groups_inflight_max + self.completing_max;
        if counted > crate::router::GROUPS_INFLIGHT_MAX {
            return Err(Error::InvalidSetting {
                key: "completing_max",
                value: self.completing_max.to_string(),
                expected: format!(
                    "at most {} - groups_inflight_max ({}): the router counts at most {} \
                     groups of an instance at once",
                    crate::router::GROUPS_INFLIGHT_MAX,
                    self.groups_inflight_max,
                    crate::router::GROUPS_INFLIGHT_MAX
                ),
            });
        }
        if self.incoming_buckets_log2_max > Geometry::BUCKETS_LOG2_MAX {
            return Err(Error::InvalidSetting {
                key: "incoming_buckets_log2_max",
                value: self.incoming_buckets_log2_max.to_string(),
                expected: format!("at most {}", Geometry::BUCKETS_LOG2_MAX),
            });
        }
        self.retry_policy().check()?;
        if self.ack_timeout_us == 0 {
            return Err(Error::InvalidSetting {
                key: "ack_timeout_us",
                value: "0".into(),
                expected: "more than 0 (the source's patience with a silent peer)".into(),
            });
        }
        Ok(())
    }
}

/// Counters of one server.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ServerStats {
    /// Client queries executed here.
    pub queries: u64,
    /// Queries forwarded (shard moved away, or held queries released).
    pub forwarded: u64,
    /// PriorityPulls this server sent as a destination.
    pub pulls: u64,
    /// Reads at a NetMigrate destination that pulled past a copy it held, because the group
    /// was not done (its DATA may have overtaken its GROUP-START; `server` module doc).
    pub copy_pulls: u64,
    /// Late dirty writes forwarded as a source (NetMigrate 4.3 corner case).
    pub late_writes: u64,
    /// Writes that reached a source after their group's late writes were flushed (must be 0).
    pub late_after_flush: u64,
    /// Dirty pairs re-sent by the source-based protocol.
    pub dirty_items: u64,
    /// Writes mirrored from a destination to its source.
    pub mirrored: u64,
    /// Queries refused (limits, aborted migration).
    pub refused: u64,
    /// Packets that fit no state (stale after an abort), dropped.
    pub dropped: u64,
    /// MIGRATE-INITs refused because the shard was larger than `incoming_buckets_log2_max`.
    pub inits_too_large: u64,
    /// Packets sent again because their answer had not come (see `reliable`).
    pub resent: u64,
    /// Bytes of those packets (counted in `extra_bytes` too): a slow peer's cost, not the
    /// protocol's own extra traffic.
    pub resent_bytes: u64,
    /// Answers that came twice (or after their packet was given up), ignored.
    pub duplicates: u64,
    /// Packets given up after their retries and patience.
    pub given_up: u64,
    /// Writes a source got for a group its late writes had left (a restarted router's): the
    /// migration aborts, or, every group final at the destination, they go there.
    pub stale_routes: u64,
    /// PROBEs sent to a source silent for `ack_timeout_us` (as a destination).
    pub probes: u64,
    /// Incoming shards whose source stopped answering (PROBE, PULL or MIRROR given up).
    pub sources_lost: u64,
    /// Reads of an orphaned shard answered LOST (the key's data may be only on the dead source).
    pub lost_answers: u64,
    /// Bytes of first-copy migration data sent.
    pub data_bytes: u64,
    /// Server-to-server bytes beyond the first copy: late/dirty batches, pulls, mirrors.
    pub extra_bytes: u64,
}

impl ServerConfig {
    /// When this server sends an unanswered packet again, and when it gives it up.
    pub fn retry_policy(&self) -> crate::reliable::RetryPolicy {
        crate::reliable::RetryPolicy {
            retransmit_us: self.retransmit_us,
            retries_max: self.retries_max,
            patience_us: self.ack_timeout_us,
        }
    }
}
