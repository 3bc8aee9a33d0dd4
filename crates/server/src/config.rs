//! The cluster file: one TOML file that every server, the coordinator and
//! every client read (`locus cluster up` writes it). The servers and their
//! addresses come from here; with `[etcd]`, which incarnation of each is
//! alive (and at which epoch) comes from etcd (`locus-membership`). Every setting is validated
//! before anything starts, and a bad one names its key.
//!
//! ```toml
//! [cluster]
//! secret = "…64 hex characters…"   # LOCUS_SECRET, if set, wins
//! max_servers = 8                   # room for servers added later (default: those listed)
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
//! [replication]                     # optional: each slot on `factor` servers (issue 60)
//! factor = 2                        # 1..=3; above 1 needs [etcd], [durability], a [coordinator]
//!
//! [durability]                      # optional: without it, nothing is logged
//! dir = "data"                      # relative to this file; server N uses DIR/server-N
//! sync = "always"                   # or "interval": fdatasync at most every interval_ms
//! interval_ms = 10
//! checkpoint_interval_s = 60
//! ```

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use locus_fabric::auth::Secret;
pub use locus_node::config::{
    DurabilitySection, LimitsSection, NodeConfig, PolicySection, RecoverySection, StoreSection,
};
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
    pub recovery: RecoverySection,
    /// Membership on etcd (`locus-membership`); none: no leases, no epochs
    /// (all 0), the coordinator at its fixed address, its record in redb.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd: Option<EtcdSection>,
    /// Each slot kept on more than one server (issue 60).
    #[serde(default, skip_serializing_if = "ReplicationSection::is_default")]
    pub replication: ReplicationSection,
}

/// `[replication]`: each slot on a primary and `factor - 1` backups (issue
/// 60; `docs/design.md`, "Replication and failover").
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ReplicationSection {
    /// Servers holding each slot: 1 (no backups), 2 or 3.
    pub factor: u8,
}

impl Default for ReplicationSection {
    fn default() -> Self {
        ReplicationSection { factor: 1 }
    }
}

impl ReplicationSection {
    fn is_default(&self) -> bool {
        *self == ReplicationSection::default()
    }
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

/// `[cluster]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterSection {
    /// The shared secret every connection proves (or `LOCUS_SECRET`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// The most servers the cluster may ever have (`cluster add-server`
    /// adds them; with `[etcd]` only): the fabric, the slot table and the
    /// logs are made for this many machines, so it is fixed when the
    /// cluster is made. Default: the servers listed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_servers: Option<usize>,
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

impl ClusterFile {
    /// Reads and validates `path`; `record` is made absolute against the file's directory.
    pub fn load(path: &Path) -> Result<ClusterFile> {
        let mut f = ClusterFile::load_raw(path)?;
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

    /// Reads `path` as written: relative paths stay relative, nothing is
    /// validated beyond the syntax (to rewrite the file, e.g. with one more
    /// server).
    pub fn load_raw(path: &Path) -> Result<ClusterFile> {
        let text = std::fs::read_to_string(path).map_err(|source| ServerError::Io {
            what: format!("cannot read the cluster file {}", path.display()),
            source,
        })?;
        locus_node::config::check_renamed(&text).map_err(|e| ServerError::ClusterFile {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        toml::from_str(&text).map_err(|e| ServerError::ClusterFile {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })
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
        if let Some(m) = self.cluster.max_servers {
            if m < n || m > locus_fabric::MACHINES_MAX {
                return Err(ServerError::setting(
                    "cluster.max_servers",
                    m.to_string(),
                    format!("must be {n}..=128: at least the {n} servers listed"),
                ));
            }
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
        let r = self.replication.factor;
        if !(1..=locus_placement::slots::REPLICATION_MAX).contains(&r) {
            return Err(ServerError::setting(
                "replication.factor",
                r.to_string(),
                format!("must be 1..={}", locus_placement::slots::REPLICATION_MAX),
            ));
        }
        if r > 1 {
            let missing = [
                (
                    self.etcd.is_none(),
                    "[etcd] (a dead primary is found by its lease)",
                ),
                (
                    self.durability.is_none(),
                    "[durability] (backups keep what they back in a log)",
                ),
                (
                    self.coordinator.is_none(),
                    "a [coordinator] (the leading one fails slots over)",
                ),
            ];
            if let Some((_, what)) = missing.iter().find(|m| m.0) {
                return Err(ServerError::setting(
                    "replication.factor",
                    r.to_string(),
                    format!("above 1 needs {what}"),
                ));
            }
            if usize::from(r) > n {
                return Err(ServerError::setting(
                    "replication.factor",
                    r.to_string(),
                    format!("must be at most the {n} servers listed: each slot needs {r} servers"),
                ));
            }
        }
        self.node().validate()?;
        if self.coordinator.is_some() && self.store.cache_mb == 0 {
            return Err(ServerError::setting(
                "store.cache_mb",
                "0".into(),
                "must be positive with a [coordinator]: monitors read the location cache's access counts (Pragh 4.4)",
            ));
        }
        Ok(())
    }

    /// The store's settings.
    pub fn store_config(&self) -> StoreConfig {
        self.store.store_config()
    }

    /// The node's sections of this file.
    pub fn node(&self) -> NodeConfig {
        NodeConfig {
            store: self.store.clone(),
            policy: self.policy.clone(),
            durability: self.durability.clone(),
            recovery: self.recovery.clone(),
            limits: self.limits.clone(),
        }
    }

    /// Machines the cluster is made for: `[cluster] max_servers`, or the
    /// servers listed. Machine ids past the servers listed have no server
    /// yet (`cluster add-server`).
    pub fn machines(&self) -> usize {
        self.cluster.max_servers.unwrap_or(self.servers.len())
    }

    /// The slot table a new cluster of `slots` slots starts with: every
    /// slot dealt over the servers listed, owners below
    /// [`ClusterFile::machines`]. (A cluster on etcd keeps its table there;
    /// servers added later take it from etcd.)
    /// With `[replication] factor` above 1, each slot's backups are the
    /// next servers after its owner (still epoch 1).
    pub fn initial_table(&self, slots: u32) -> Result<locus_store::SlotTable> {
        let bad = |e: locus_placement::PlacementError| {
            ServerError::setting("store.slots", slots.to_string(), e.to_string())
        };
        let t = locus_store::SlotTable::uniform_among(
            slots,
            self.machines() as u16,
            self.servers.len() as u16,
        )
        .map_err(bad)?;
        let r = self.replication.factor;
        if r <= 1 {
            return Ok(t);
        }
        let servers: Vec<u8> = self.servers.iter().map(|s| s.id).collect();
        let bad = |e: locus_placement::PlacementError| {
            ServerError::setting("replication.factor", r.to_string(), e.to_string())
        };
        let r_table = t.with_replication(r, &servers).map_err(bad)?;
        locus_store::SlotTable::from_parts(
            1,
            r_table.machines(),
            r_table.owners().to_vec(),
            r,
            (0..slots)
                .map(|s| r_table.backups_of_slot(s).to_vec())
                .collect(),
            vec![1; slots as usize],
        )
        .map_err(bad)
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
