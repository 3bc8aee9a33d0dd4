//! The cluster file: one TOML file that every server, the coordinator and
//! every client read (`locus cluster up` writes it). The servers and their
//! addresses come from here; with `[etcd]`, which incarnation of each is
//! alive (and at which epoch) comes from etcd (`locus-membership`). Every setting is validated
//! before anything starts, and a bad one names its key.
//!
//! ```toml
//! [cluster]
//! secret = "…64 hex characters…"   # LOCUS_SECRET, if set, wins
//!
//! [[server]]
//! id = 0
//! fabric = "127.0.0.1:7400"        # one-sided operations (peers only)
//! client = "127.0.0.1:7500"        # the client protocol (docs/protocol.md)
//! metrics = "127.0.0.1:7600"       # Prometheus text, GET /metrics
//!
//! [coordinator]
//! control = "127.0.0.1:7390"
//! metrics = "127.0.0.1:7391"
//! record = "coordinator.redb"      # relative to this file's directory
//!
//! [store]                           # the same on every server
//! value_region_mb = 256
//!
//! [policy]                          # the coordinator's (Pragh 4.4)
//! interval_ms = 10000
//!
//! [etcd]                            # optional: membership, epochs, election on etcd
//! endpoints = ["http://127.0.0.1:2379"]
//! prefix = "/locus"                 # every key of this cluster lives under it
//! lease_ttl_s = 3                   # a server that stops renewing is dead after this
//!
//! [durability]                      # optional: without it, nothing is logged
//! dir = "data"                      # relative to this file; server N uses DIR/server-N
//! sync = "always"                   # or "interval": fdatasync at most every interval_ms
//! interval_ms = 10
//! checkpoint_interval_s = 60
//! ```

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use locus_coordinator::policy::{Mode, PolicyConfig};
use locus_fabric::auth::Secret;
use locus_store::StoreConfig;
use serde::{Deserialize, Serialize};

use crate::{Result, ServerError};

/// The variable whose value, if set and non-empty, is the cluster secret.
pub const SECRET_ENV: &str = "LOCUS_SECRET";

/// The whole file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    /// Cluster-wide settings.
    #[serde(default)]
    pub cluster: ClusterSection,
    /// The servers, one per machine (ids 0..n-1).
    #[serde(rename = "server", default)]
    pub servers: Vec<ServerEntry>,
    /// The coordinator, if the cluster runs one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coordinator: Option<CoordinatorEntry>,
    /// Store settings (the same on every server).
    #[serde(default)]
    pub store: StoreSection,
    /// The coordinator's policy.
    #[serde(default)]
    pub policy: PolicySection,
    /// Limits of the serving side.
    #[serde(default)]
    pub limits: LimitsSection,
    /// The write-ahead log and checkpoints (`durable.rs`); none: updates are
    /// not logged and a restarted server starts empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub durability: Option<DurabilitySection>,
    /// Pragh 5 recovery and the value-region scan (`recovery.rs`).
    #[serde(default)]
    pub recovery: crate::recovery::RecoverySection,
    /// Membership on etcd (`locus-membership`); none: no leases, no epochs
    /// (all 0), the coordinator at its fixed address, its record in redb.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd: Option<EtcdSection>,
}

/// `[etcd]`: where the membership lives.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct EtcdSection {
    /// Client endpoints, `http://HOST:PORT`.
    pub endpoints: Vec<String>,
    /// The prefix of every key of this cluster.
    pub prefix: String,
    /// Lease time-to-live in seconds: the bound on detecting a dead server.
    pub lease_ttl_s: u64,
}

impl Default for EtcdSection {
    fn default() -> Self {
        EtcdSection {
            endpoints: Vec::new(),
            prefix: "/locus".into(),
            lease_ttl_s: 3,
        }
    }
}

impl EtcdSection {
    /// The membership client's settings.
    pub fn config(&self) -> locus_membership::EtcdConfig {
        locus_membership::EtcdConfig {
            endpoints: self.endpoints.clone(),
            prefix: self.prefix.clone(),
            lease_ttl_s: self.lease_ttl_s,
        }
    }

    /// Rejects settings that cannot work, naming the key.
    pub fn validate(&self) -> Result<()> {
        self.config().validate().map_err(|e| {
            let msg = e.to_string();
            let key = if msg.contains("lease_ttl_s") {
                "etcd.lease_ttl_s"
            } else if msg.contains("prefix") {
                "etcd.prefix"
            } else {
                "etcd.endpoints"
            };
            ServerError::setting(key, format!("{:?}", self.endpoints).replace('"', "'"), msg)
        })
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
                    return Err(ServerError::setting(
                        "durability.interval_ms",
                        self.interval_ms.to_string(),
                        "must be 1..=60000 with sync = \"interval\"",
                    ));
                }
                Ok(locus_wal::SyncMode::Interval {
                    interval_ms: self.interval_ms,
                })
            }
            other => Err(ServerError::setting(
                "durability.sync",
                format!("{other:?}"),
                "must be \"always\" (sync before acknowledging) or \"interval\" (sync every interval_ms)",
            )),
        }
    }

    /// Rejects settings that cannot work, naming the key.
    pub fn validate(&self) -> Result<()> {
        if self.dir.as_os_str().is_empty() {
            return Err(ServerError::setting(
                "durability.dir",
                "\"\"".into(),
                "must name a directory",
            ));
        }
        self.sync_mode()?;
        if !(1..=86_400).contains(&self.checkpoint_interval_s) {
            return Err(ServerError::setting(
                "durability.checkpoint_interval_s",
                self.checkpoint_interval_s.to_string(),
                "must be 1..=86400",
            ));
        }
        if !(1..=4096).contains(&self.segment_mb) {
            return Err(ServerError::setting(
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

/// `[cluster]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterSection {
    /// The shared secret every connection proves (or `LOCUS_SECRET`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

/// `[[server]]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ServerEntry {
    /// Its machine id.
    pub id: u8,
    /// Address of its fabric listener (one-sided operations; peers only).
    pub fabric: SocketAddr,
    /// Address of its client listener.
    pub client: SocketAddr,
    /// Address of its metrics endpoint, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<SocketAddr>,
}

/// `[coordinator]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CoordinatorEntry {
    /// Address of its control listener (servers connect here).
    pub control: SocketAddr,
    /// Address of its metrics endpoint, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<SocketAddr>,
    /// Its durable record (relative paths are relative to the file).
    pub record: PathBuf,
}

/// `[store]`: the store's settings in friendly units.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct StoreSection {
    /// Main buckets of each key table (a power of two).
    pub buckets: u64,
    /// Overflow buckets of each key table.
    pub overflow_buckets: u64,
    /// MiB of each value region (reserved lazily).
    pub value_region_mb: u64,
    /// Neighbours per key-value pair at most (vertex decomposition).
    pub part_neighbors_max: u32,
    /// Reclaim lease (Pragh 4.1).
    pub reclaim_lease_ms: u64,
    /// MiB of each location cache (Pragh 4.2); 0 turns it (and the monitor) off.
    pub cache_mb: u64,
    /// Location cache lease.
    pub cache_lease_ms: u64,
    /// Instant-report threshold per interval (Pragh 6.4).
    pub hot_accesses: u32,
    /// MiB of read-only replicas each server may hold; 0 turns replicas off.
    pub replica_mb: u64,
}

impl Default for StoreSection {
    fn default() -> Self {
        let d = StoreConfig::default();
        StoreSection {
            buckets: 1 << 16,
            overflow_buckets: 1 << 14,
            value_region_mb: 256,
            part_neighbors_max: d.part_neighbors_max,
            reclaim_lease_ms: d.reclaim_lease_ms,
            cache_mb: 64,
            cache_lease_ms: d.cache_lease_ms,
            hot_accesses: d.hot_accesses,
            replica_mb: 0,
        }
    }
}

impl StoreSection {
    /// The store's settings.
    pub fn store_config(&self) -> StoreConfig {
        StoreConfig {
            buckets_per_machine: self.buckets,
            overflow_buckets_per_machine: self.overflow_buckets,
            value_region_bytes: self.value_region_mb << 20,
            part_neighbors_max: self.part_neighbors_max,
            reclaim_lease_ms: self.reclaim_lease_ms,
            cache_bytes_max: self.cache_mb << 20,
            cache_lease_ms: self.cache_lease_ms,
            hot_accesses: self.hot_accesses,
            replica_bytes_max: self.replica_mb << 20,
            ..StoreConfig::default()
        }
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
                return Err(ServerError::setting(
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

impl ClusterFile {
    /// Reads and validates `path`; `record` is made absolute against the file's directory.
    pub fn load(path: &Path) -> Result<ClusterFile> {
        let text = std::fs::read_to_string(path).map_err(|source| ServerError::Io {
            what: format!("cannot read the cluster file {}", path.display()),
            source,
        })?;
        let mut f: ClusterFile = toml::from_str(&text).map_err(|e| ServerError::ClusterFile {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        let dir = path.parent().unwrap_or(Path::new("."));
        if let Some(c) = &mut f.coordinator {
            if c.record.is_relative() {
                c.record = dir.join(&c.record);
            }
        }
        if let Some(d) = &mut f.durability {
            if d.dir.is_relative() {
                d.dir = dir.join(&d.dir);
            }
        }
        f.validate().map_err(|e| match e {
            ServerError::Setting { .. } => ServerError::ClusterFile {
                path: path.to_path_buf(),
                reason: e.to_string(),
            },
            e => e,
        })?;
        Ok(f)
    }

    /// Writes the file atomically (temporary file, then rename), readable by its owner only
    /// (it holds the secret).
    pub fn write(&self, path: &Path) -> Result<()> {
        let text = toml::to_string_pretty(self).map_err(|e| ServerError::ClusterFile {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        let tmp = path.with_extension("toml.tmp");
        let io = |what: &str, source| ServerError::Io {
            what: format!("{what} {}", tmp.display()),
            source,
        };
        {
            use std::io::Write;
            #[cfg(unix)]
            use std::os::unix::fs::OpenOptionsExt;
            let mut o = std::fs::OpenOptions::new();
            o.write(true).create(true).truncate(true);
            #[cfg(unix)]
            o.mode(0o600);
            let mut f = o.open(&tmp).map_err(|e| io("cannot create", e))?;
            f.write_all(
                b"# Locus cluster file (docs/protocol.md, ARCHITECTURE.md). Holds the cluster secret.\n",
            )
            .and_then(|()| f.write_all(text.as_bytes()))
            .and_then(|()| f.sync_all())
            .map_err(|e| io("cannot write", e))?;
        }
        std::fs::rename(&tmp, path).map_err(|e| io("cannot rename", e))
    }

    /// Rejects files that cannot work, naming the key.
    pub fn validate(&self) -> Result<()> {
        let n = self.servers.len();
        if n == 0 || n > locus_fabric::MACHINES_MAX {
            return Err(ServerError::setting(
                "server",
                format!("{n} entries"),
                "must list 1..=128 servers",
            ));
        }
        let mut seen = vec![false; n];
        for s in &self.servers {
            let i = s.id as usize;
            if i >= n || seen[i] {
                return Err(ServerError::setting(
                    "server.id",
                    s.id.to_string(),
                    "must number the servers 0..n-1, each once",
                ));
            }
            seen[i] = true;
        }
        let mut addrs: Vec<(SocketAddr, String)> = Vec::new();
        let mut add = |a: SocketAddr, what: String| -> Result<()> {
            if a.port() != 0 {
                if let Some((_, other)) = addrs.iter().find(|(b, _)| *b == a) {
                    return Err(ServerError::setting(
                        "address",
                        format!("{a} ({what})"),
                        format!("is also {other}"),
                    ));
                }
            }
            addrs.push((a, what));
            Ok(())
        };
        for s in &self.servers {
            add(s.fabric, format!("server {} fabric", s.id))?;
            add(s.client, format!("server {} client", s.id))?;
            if let Some(m) = s.metrics {
                add(m, format!("server {} metrics", s.id))?;
            }
        }
        if let Some(c) = &self.coordinator {
            add(c.control, "coordinator control".into())?;
            if let Some(m) = c.metrics {
                add(m, "coordinator metrics".into())?;
            }
        }
        if let Some(e) = &self.etcd {
            e.validate()?;
        }
        self.store_config().validate()?;
        self.policy.policy_config()?;
        if self.store.cache_mb > 0 && self.store.cache_lease_ms < self.policy.interval_ms {
            return Err(ServerError::setting(
                "store.cache_lease_ms",
                self.store.cache_lease_ms.to_string(),
                "must be at least policy.interval_ms: access counts live in cache entries (Pragh: 60 s lease, 10 s interval)",
            ));
        }
        if self.coordinator.is_some() && self.store.cache_mb == 0 {
            return Err(ServerError::setting(
                "store.cache_mb",
                "0".into(),
                "must be positive with a [coordinator]: monitors read the location cache's access counts (Pragh 4.4)",
            ));
        }
        if self.policy.replicas && self.store.replica_mb == 0 {
            return Err(ServerError::setting(
                "policy.replicas",
                "true".into(),
                "needs store.replica_mb > 0",
            ));
        }
        if let Some(d) = &self.durability {
            d.validate()?;
        }
        self.recovery.validate()?;
        let l = &self.limits;
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
                return Err(ServerError::setting(key, v.to_string(), "is too small"));
            }
        }
        if l.frame_bytes_max > locus_client::proto::FRAME_BYTES_MAX {
            return Err(ServerError::setting(
                "limits.frame_bytes_max",
                l.frame_bytes_max.to_string(),
                "must be at most 16 MiB (docs/protocol.md)",
            ));
        }
        Ok(())
    }

    /// The store's settings.
    pub fn store_config(&self) -> StoreConfig {
        self.store.store_config()
    }

    /// Machines in the cluster.
    pub fn machines(&self) -> usize {
        self.servers.len()
    }

    /// The entry of server `id`.
    pub fn server(&self, id: u8) -> Result<&ServerEntry> {
        self.servers.iter().find(|s| s.id == id).ok_or_else(|| {
            ServerError::setting(
                "--id",
                id.to_string(),
                "is not a server of the cluster file",
            )
        })
    }

    /// The cluster secret: `LOCUS_SECRET` if set, else `[cluster] secret`.
    /// Servers refuse to start without one.
    pub fn secret(&self) -> Result<Secret> {
        match Secret::from_env_or(self.cluster.secret.as_deref(), SECRET_ENV) {
            Ok(Some(s)) => Ok(s),
            Ok(None) => Err(ServerError::setting(
                "cluster.secret",
                "(none)".into(),
                "must be set (or LOCUS_SECRET): no one may reach a server's memory without it; `locus cluster up` generates one",
            )),
            Err(e) => Err(ServerError::setting(
                "cluster.secret",
                "(hidden)".into(),
                e.to_string(),
            )),
        }
    }
}
