//! One node's configuration, the same wherever a node runs: the cluster file
//! of `locus cluster up` and `locus server`, and the TOML of the benchmarks
//! and embedded commands (`locus demo --config`, `locus query --config`).
//! One spelling per key; a key that was renamed is an error naming the new
//! one ([`check_renamed`]). Every setting is validated before anything is
//! made, and a bad one names its key.
//!
//! ```toml
//! [store]                        # the same on every machine
//! value_region_mb = 256          # unset: sized for the graph where one is known, else 256
//! cache_mb = 64                  # location cache per machine (Pragh 4.2); 0: off
//! replica_mb = 0                 # read-only replicas per machine; fractions allowed
//!
//! [policy]                       # the coordinator's (Pragh 4.4)
//! interval_ms = 10000
//!
//! [durability]                   # optional: without it, nothing is logged
//! dir = "data"
//! sync = "always"
//!
//! [recovery]
//! scan_interval_ms = 10000
//!
//! [limits]
//! max_clients = 256
//! ```

use std::path::PathBuf;

use locus_coordinator::policy::{Mode, PolicyConfig};
use locus_store::StoreConfig;
use serde::{Deserialize, Serialize};

use crate::{NodeError, Result};

/// Keys that were renamed: (old, new), as `section.key`.
pub const RENAMED: &[(&str, &str)] = &[("store.location_cache_mb", "store.cache_mb")];

/// Fails, naming the new key, if `text` (a TOML file) uses a key's old spelling.
pub fn check_renamed(text: &str) -> Result<()> {
    let Ok(value) = text.parse::<toml::Table>() else {
        // Not TOML: the caller's parser says where.
        return Ok(());
    };
    for (old, new) in RENAMED {
        let (section, key) = old.split_once('.').expect("section.key");
        if value
            .get(section)
            .and_then(|s| s.as_table())
            .is_some_and(|t| t.contains_key(key))
        {
            return Err(NodeError::Renamed { old, new });
        }
    }
    Ok(())
}

/// The sections of a node's configuration.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct NodeConfig {
    /// `[store]`.
    pub store: StoreSection,
    /// `[policy]`.
    pub policy: PolicySection,
    /// `[durability]`, if updates are logged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub durability: Option<DurabilitySection>,
    /// `[recovery]`.
    pub recovery: RecoverySection,
    /// `[limits]`.
    pub limits: LimitsSection,
}

impl NodeConfig {
    /// Rejects settings that cannot work, each section and across them,
    /// naming the key.
    pub fn validate(&self) -> Result<()> {
        self.store.validate()?;
        let store = self.store.store_config();
        store.validate()?;
        self.validate_around(&store)
    }

    /// Every section but `[store]`, and the rules across sections, against
    /// `store`: the store settings in force (`[store]`'s on a server; sized
    /// for the graph and adjusted by a scheme in an embedded cluster, where
    /// `Store::create` validates them).
    pub fn validate_around(&self, store: &StoreConfig) -> Result<()> {
        self.policy.policy_config()?;
        if store.cache_bytes_max > 0 && store.cache_lease_ms < self.policy.interval_ms {
            return Err(NodeError::setting(
                "store.cache_lease_ms",
                store.cache_lease_ms.to_string(),
                "must be at least policy.interval_ms: access counts live in cache entries (Pragh: 60 s lease, 10 s interval)",
            ));
        }
        if self.policy.replicas && store.replica_bytes_max == 0 {
            return Err(NodeError::setting(
                "policy.replicas",
                "true".into(),
                "needs store.replica_mb > 0",
            ));
        }
        if let Some(d) = &self.durability {
            d.validate()?;
        }
        self.recovery.validate()?;
        self.limits.validate()
    }
}

/// `[store]`: the store's settings in friendly units. Sizes left unset are
/// sized for the graph where one is known (benchmarks, embedded commands:
/// [`StoreSection::store_config_for`]), else take a server's defaults
/// ([`StoreSection::store_config`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct StoreSection {
    /// Main buckets of each key table (a power of two); unset: 65,536 on a server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub buckets: Option<u64>,
    /// Overflow buckets of each key table; unset: 16,384 on a server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overflow_buckets: Option<u64>,
    /// MiB of each value region (reserved lazily); unset: 256 on a server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value_region_mb: Option<u64>,
    /// MiB added to each value region past its size: a rewritten value's
    /// old block stays allocated for `reclaim_lease_ms`, so a workload that
    /// rewrites many values within one lease needs more (`bench pragh
    /// put-heavy`).
    pub value_region_extra_mb: u64,
    /// Neighbours per key-value pair at most (vertex decomposition).
    pub part_neighbors_max: u32,
    /// Reclaim lease (Pragh 4.1).
    pub reclaim_lease_ms: u64,
    /// MiB of each location cache (Pragh 4.2); 0 turns it (and the monitor) off.
    pub cache_mb: u64,
    /// Location cache lease; unset: the reclaim lease, at most 60 s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_lease_ms: Option<u64>,
    /// Instant-report threshold per interval (Pragh 6.4).
    pub hot_accesses: u32,
    /// MiB of read-only replicas each machine may hold (fractions allowed);
    /// 0 turns replicas off. Unset: none on a server; a benchmark's Replica
    /// scheme takes a quarter of the value region, at most 256 MiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replica_mb: Option<f64>,
    /// Slots of the cluster (issue 59): a vertex's home is the owner of
    /// slot `vertex % slots`. Fixed when the cluster is made; unset: 4,096.
    /// A cluster whose log was written before slots existed reads it with
    /// `slots` equal to its server count (Pragh's `vertex % machines`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slots: Option<u32>,
}

/// A server's key table and value region when the cluster file sets none.
const SERVER_BUCKETS: u64 = 1 << 16;
const SERVER_OVERFLOW_BUCKETS: u64 = 1 << 14;
const SERVER_VALUE_REGION_MB: u64 = 256;

impl Default for StoreSection {
    fn default() -> Self {
        let d = StoreConfig::default();
        StoreSection {
            buckets: None,
            overflow_buckets: None,
            value_region_mb: None,
            value_region_extra_mb: 0,
            part_neighbors_max: d.part_neighbors_max,
            reclaim_lease_ms: d.reclaim_lease_ms,
            cache_mb: 64,
            cache_lease_ms: None,
            hot_accesses: d.hot_accesses,
            replica_mb: None,
            slots: None,
        }
    }
}

impl StoreSection {
    /// The store's settings on a server, where no graph is known.
    pub fn store_config(&self) -> StoreConfig {
        self.apply(StoreConfig {
            buckets_per_machine: SERVER_BUCKETS,
            overflow_buckets_per_machine: SERVER_OVERFLOW_BUCKETS,
            value_region_bytes: SERVER_VALUE_REGION_MB << 20,
            ..StoreConfig::default()
        })
    }

    /// The store's settings starting from `sized`, a configuration sized
    /// for the graph (`StoreConfig::for_graph`): what this section sets wins.
    pub fn store_config_for(&self, sized: StoreConfig) -> StoreConfig {
        self.apply(sized)
    }

    fn apply(&self, mut c: StoreConfig) -> StoreConfig {
        if let Some(b) = self.buckets {
            c.buckets_per_machine = b;
        }
        if let Some(b) = self.overflow_buckets {
            c.overflow_buckets_per_machine = b;
        }
        if let Some(mb) = self.value_region_mb {
            c.value_region_bytes = mb << 20;
        }
        c.value_region_bytes += self.value_region_extra_mb << 20;
        c.part_neighbors_max = self.part_neighbors_max;
        c.reclaim_lease_ms = self.reclaim_lease_ms;
        c.cache_bytes_max = self.cache_mb << 20;
        c.cache_lease_ms = self
            .cache_lease_ms
            .unwrap_or(self.reclaim_lease_ms.min(60_000));
        c.hot_accesses = self.hot_accesses;
        c.replica_bytes_max = self.replica_bytes();
        if let Some(s) = self.slots {
            c.slots = s;
        }
        c
    }

    /// Bytes of read-only replicas per machine this section sets (0 unset).
    pub fn replica_bytes(&self) -> u64 {
        self.replica_mb
            .map_or(0, |mb| (mb * (1u64 << 20) as f64) as u64)
    }

    /// Rejects values no store setting checks, naming the key.
    pub fn validate(&self) -> Result<()> {
        if let Some(mb) = self.replica_mb {
            if !(mb.is_finite() && (0.0..=1_048_576.0).contains(&mb)) {
                return Err(NodeError::setting(
                    "store.replica_mb",
                    mb.to_string(),
                    "must be between 0 and 1048576 (MiB per machine)",
                ));
            }
        }
        Ok(())
    }
}

/// `[durability]`: where and how each server logs what it homes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct DurabilitySection {
    /// The directory (relative paths are relative to the file); server N
    /// keeps its log and checkpoint in `DIR/server-N`.
    pub dir: PathBuf,
    /// `"always"`: an update is acknowledged after its record is synced
    /// (`fdatasync` per group); `"interval"`: after it is written, with a
    /// sync at most every `interval_ms` (a process crash loses nothing, a
    /// power loss up to that long of acknowledged updates).
    pub sync: String,
    /// The longest time between a write and its sync with `sync = "interval"`.
    pub interval_ms: u64,
    /// How often a checkpoint replaces the log (bounds recovery time).
    pub checkpoint_interval_s: u64,
    /// MiB of one log segment before the next one begins.
    pub segment_mb: u64,
}

impl Default for DurabilitySection {
    fn default() -> Self {
        DurabilitySection {
            dir: PathBuf::from("data"),
            sync: "always".into(),
            interval_ms: 10,
            checkpoint_interval_s: 60,
            segment_mb: 64,
        }
    }
}

impl DurabilitySection {
    /// The log's sync mode; a bad `sync` or `interval_ms` names its key.
    pub fn sync_mode(&self) -> Result<locus_wal::SyncMode> {
        match self.sync.as_str() {
            "always" => Ok(locus_wal::SyncMode::Always),
            "interval" => {
                if !(1..=60_000).contains(&self.interval_ms) {
                    return Err(NodeError::setting(
                        "durability.interval_ms",
                        self.interval_ms.to_string(),
                        "must be 1..=60000 with sync = \"interval\"",
                    ));
                }
                Ok(locus_wal::SyncMode::Interval {
                    interval_ms: self.interval_ms,
                })
            }
            other => Err(NodeError::setting(
                "durability.sync",
                format!("{other:?}"),
                "must be \"always\" (sync before acknowledging) or \"interval\" (sync every interval_ms)",
            )),
        }
    }

    /// Rejects settings that cannot work, naming the key.
    pub fn validate(&self) -> Result<()> {
        if self.dir.as_os_str().is_empty() {
            return Err(NodeError::setting(
                "durability.dir",
                "\"\"".into(),
                "must name a directory",
            ));
        }
        self.sync_mode()?;
        if !(1..=86_400).contains(&self.checkpoint_interval_s) {
            return Err(NodeError::setting(
                "durability.checkpoint_interval_s",
                self.checkpoint_interval_s.to_string(),
                "must be 1..=86400",
            ));
        }
        if !(1..=4096).contains(&self.segment_mb) {
            return Err(NodeError::setting(
                "durability.segment_mb",
                self.segment_mb.to_string(),
                "must be 1..=4096",
            ));
        }
        Ok(())
    }

    /// Server `id`'s own directory.
    pub fn server_dir(&self, id: u8) -> PathBuf {
        self.dir.join(format!("server-{id}"))
    }
}

/// `[policy]`: the coordinator's settings (Pragh 4.4).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct PolicySection {
    /// `"eager"` or `"deferred"`.
    pub mode: String,
    /// Profit threshold (Pragh: 0.5).
    pub profit: f64,
    /// Monitoring interval (Pragh: 10 s).
    pub interval_ms: u64,
    /// Least time between two moves of one key.
    pub dwell_ms: u64,
    /// Rates below this are not worth a migration.
    pub rate_min_per_s: f64,
    /// Eager mode moves without the holder's own counts only at this rate
    /// (accesses/s; Pragh 6.4's 100; 0 for Pragh's eager mode on every key).
    pub eager_rate_min_per_s: f64,
    /// Consecutive intervals an applicant must lead before its key moves,
    /// unless it reads the key at 100/s over a whole interval (1: Pragh's
    /// rule, one report decides).
    pub lead_intervals: u32,
    /// Approve read-only replicas (needs `store.replica_mb > 0`).
    pub replicas: bool,
    /// How often monitors drain hot lists (instant reports).
    pub hot_poll_ms: u64,
    /// Periodic reports carry keys with at least this many accesses; the
    /// policy weighs a machine that reported a key none as having read it
    /// one fewer times.
    pub report_count_min: u32,
    /// Intervals the coordinator listens after it starts or restarts
    /// before it approves any move, so that every machine has reported
    /// once (1; 0 decides from the first report).
    pub listen_intervals: u32,
}

impl Default for PolicySection {
    fn default() -> Self {
        let p = PolicyConfig::default();
        PolicySection {
            mode: "eager".into(),
            profit: p.profit,
            interval_ms: p.interval_ms,
            dwell_ms: p.dwell_ms,
            rate_min_per_s: p.rate_min_per_s,
            eager_rate_min_per_s: p.eager_rate_min_per_s,
            lead_intervals: p.lead_intervals,
            replicas: p.replicas,
            hot_poll_ms: 100,
            report_count_min: p.report_count_min,
            listen_intervals: p.listen_intervals,
        }
    }
}

impl PolicySection {
    /// The policy's settings; an unknown mode names the key.
    pub fn policy_config(&self) -> Result<PolicyConfig> {
        let mode = match self.mode.as_str() {
            "eager" => Mode::Eager,
            "deferred" => Mode::Deferred,
            other => {
                return Err(NodeError::setting(
                    "policy.mode",
                    format!("{other:?}"),
                    "must be \"eager\" or \"deferred\" (Pragh 4.4)",
                ))
            }
        };
        let p = PolicyConfig {
            mode,
            profit: self.profit,
            interval_ms: self.interval_ms,
            dwell_ms: self.dwell_ms,
            rate_min_per_s: self.rate_min_per_s,
            eager_rate_min_per_s: self.eager_rate_min_per_s,
            lead_intervals: self.lead_intervals,
            forget_after_ms: (self.interval_ms * 3).max(PolicyConfig::default().forget_after_ms),
            replicas: self.replicas,
            report_count_min: self.report_count_min,
            listen_intervals: self.listen_intervals,
            ..PolicyConfig::default()
        };
        p.validate()?;
        Ok(p)
    }
}

/// `[limits]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsSection {
    /// Client connections a server serves at once; more get `BUSY`.
    pub max_clients: usize,
    /// Longest a connection may take to authenticate and say HELLO.
    pub handshake_timeout_ms: u64,
    /// How long a starting server waits for its peers before giving up.
    pub peer_wait_ms: u64,
    /// Fabric socket timeout (a peer that stops answering).
    pub fabric_io_timeout_ms: u64,
    /// Largest client frame (header included).
    pub frame_bytes_max: usize,
}

impl Default for LimitsSection {
    fn default() -> Self {
        LimitsSection {
            max_clients: 256,
            handshake_timeout_ms: 5_000,
            peer_wait_ms: 60_000,
            fabric_io_timeout_ms: 5_000,
            frame_bytes_max: locus_client::proto::FRAME_BYTES_MAX,
        }
    }
}

impl LimitsSection {
    /// Rejects limits that cannot work, naming the key.
    pub fn validate(&self) -> Result<()> {
        let l = self;
        for (key, v, min) in [
            ("limits.max_clients", l.max_clients as u64, 1),
            ("limits.handshake_timeout_ms", l.handshake_timeout_ms, 1),
            ("limits.fabric_io_timeout_ms", l.fabric_io_timeout_ms, 1),
            (
                "limits.frame_bytes_max",
                l.frame_bytes_max as u64,
                locus_client::proto::FRAME_BYTES_MIN as u64,
            ),
        ] {
            if v < min {
                return Err(NodeError::setting(key, v.to_string(), "is too small"));
            }
        }
        if l.frame_bytes_max > locus_client::proto::FRAME_BYTES_MAX {
            return Err(NodeError::setting(
                "limits.frame_bytes_max",
                l.frame_bytes_max.to_string(),
                "must be at most 16 MiB (docs/protocol.md)",
            ));
        }
        Ok(())
    }
}

/// `[recovery]`: Pragh 5 recovery's value-region scan.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct RecoverySection {
    /// Milliseconds between rounds of the value-region scan; 0 turns the
    /// background scan off (`peer_rejoined` still runs a round).
    pub scan_interval_ms: u64,
}

impl Default for RecoverySection {
    fn default() -> Self {
        // Pragh's reclaim lease is 60 s and its monitor's interval 10 s: a
        // round every 10 s frees a leaked block within a lease and a round.
        RecoverySection {
            scan_interval_ms: 10_000,
        }
    }
}

impl RecoverySection {
    /// Rejects settings that cannot work, naming the key.
    pub fn validate(&self) -> Result<()> {
        let v = self.scan_interval_ms;
        if v != 0 && !(10..=3_600_000).contains(&v) {
            return Err(NodeError::setting(
                "recovery.scan_interval_ms",
                v.to_string(),
                "must be 0 (off) or 10..=3600000",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_gets_the_sizes_it_always_had_and_a_graph_its_own() {
        let s = StoreSection::default().store_config();
        assert_eq!(s.buckets_per_machine, 1 << 16);
        assert_eq!(s.overflow_buckets_per_machine, 1 << 14);
        assert_eq!(s.value_region_bytes, 256 << 20);
        assert_eq!(s.cache_bytes_max, 64 << 20);
        assert_eq!(s.cache_lease_ms, 60_000);
        assert_eq!(s.replica_bytes_max, 0);
        s.validate().unwrap();
        let sized = StoreConfig::for_graph(1 << 12, 1 << 16, 4, 1 << 16);
        let store = StoreSection {
            value_region_extra_mb: 3,
            replica_mb: Some(0.5),
            reclaim_lease_ms: 1_000,
            ..StoreSection::default()
        };
        let c = store.store_config_for(sized.clone());
        assert_eq!(c.buckets_per_machine, sized.buckets_per_machine);
        assert_eq!(c.value_region_bytes, sized.value_region_bytes + (3 << 20));
        assert_eq!(c.replica_bytes_max, 1 << 19);
        assert_eq!(
            c.cache_lease_ms, 1_000,
            "the reclaim lease bounds the cache lease"
        );
        let set = StoreSection {
            buckets: Some(1 << 8),
            value_region_mb: Some(9),
            ..StoreSection::default()
        };
        let c = set.store_config_for(sized);
        assert_eq!(
            (c.buckets_per_machine, c.value_region_bytes),
            (1 << 8, 9 << 20)
        );
    }

    #[test]
    fn the_sections_round_trip_and_bad_values_name_their_key() {
        let c = NodeConfig {
            durability: Some(DurabilitySection::default()),
            ..NodeConfig::default()
        };
        c.validate().unwrap();
        let text = toml::to_string(&c).unwrap();
        assert_eq!(toml::from_str::<NodeConfig>(&text).unwrap(), c);
        let bad = |text: &str, key: &str| {
            let c: NodeConfig = toml::from_str(text).unwrap();
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains(key), "{text}: {e}");
        };
        bad("[store]\nreplica_mb = 2e9\n", "store.replica_mb");
        bad("[policy]\nreplicas = true\n", "policy.replicas");
        bad("[policy]\nmode = \"lazy\"\n", "policy.mode");
        bad(
            "[store]\ncache_lease_ms = 10\n[policy]\ninterval_ms = 1000\n",
            "store.cache_lease_ms",
        );
        bad("[durability]\nsync = \"sometimes\"\n", "durability.sync");
        bad(
            "[recovery]\nscan_interval_ms = 1\n",
            "recovery.scan_interval_ms",
        );
        bad("[limits]\nframe_bytes_max = 1\n", "limits.frame_bytes_max");
        assert!(toml::from_str::<NodeConfig>("[store]\ncache_mbs = 1\n").is_err());
    }

    #[test]
    fn a_renamed_key_is_an_error_naming_the_new_one() {
        let e = check_renamed("[store]\nlocation_cache_mb = 8\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "store.location_cache_mb was renamed store.cache_mb; write store.cache_mb instead"
        );
        check_renamed("[store]\ncache_mb = 8\n").unwrap();
        check_renamed("not toml at all [").unwrap();
    }
}
