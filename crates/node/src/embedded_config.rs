//! The configuration of an embedded cluster (every machine in this
//! process): the TOML file of `locus demo`, `locus query`, `locus load` and
//! the benchmarks (`--config`); command-line flags override its values.
//! `[store]` is a node's ([`crate::config::StoreSection`]).
//!
//! ```toml
//! [cluster]
//! fabric = "local"             # the one-sided fabric the machines use ("local": in process)
//! machines = 8                 # 1..=128
//! threads = 0                  # worker threads; 0 = one per core
//! latency_ns = 2000            # modelled remote latency (0 with bandwidth 0: off)
//! bandwidth_bytes_per_s = 12500000000
//!
//! [store]                      # a node's [store], as in the cluster file (locus_node::config)
//! part_neighbors_max = 65536   # vertex decomposition
//! reclaim_lease_ms = 60000
//! cache_mb = 64                # location cache per machine; 0 = off (Pragh's "Orig")
//! value_region_extra_mb = 0    # per machine, beyond the graph's sizing (which leaves 64 MiB)
//! # buckets, overflow_buckets, value_region_mb: unset, sized for the graph
//!
//! [graph]                      # the R-MAT graph of `demo`, `query --scale`
//! scale = 20
//! edge_factor = 16
//! seed = 1
//!
//! [workload]
//! queries = 20000
//! k = 100                      # neighbours per hop
//! dist = "zipf"                # or "uniform"
//! zipf_theta = 0.99
//! scope = 1024                 # distinct start vertices under zipf
//! pipelined = false            # pipeline the second hop's reads
//! seed = 7
//! ```

use std::path::Path;

use serde::{Deserialize, Serialize};

pub use crate::config::StoreSection;
use crate::{NodeError, Result};

/// The whole file.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// `[cluster]`: the machines and the fabric between them.
    pub cluster: ClusterConfig,
    /// A node's `[store]` (`locus_node::config::StoreSection`): one spelling
    /// with the cluster file.
    pub store: StoreSection,
    /// `[graph]`.
    pub graph: GraphSection,
    /// `[workload]`.
    pub workload: WorkloadSection,
}

/// Which fabric an embedded cluster's machines reach each other's memory
/// over: the configuration's name for a [`locus_fabric::any::FabricKind`].
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum FabricChoice {
    /// Every machine in this process, with the calibrated latency model.
    #[default]
    Local,
    /// Machines in separate server processes over TCP.
    Tcp,
}

impl From<FabricChoice> for locus_fabric::any::FabricKind {
    fn from(c: FabricChoice) -> Self {
        match c {
            FabricChoice::Local => locus_fabric::any::FabricKind::Local,
            FabricChoice::Tcp => locus_fabric::any::FabricKind::Tcp,
        }
    }
}

/// `[cluster]`: the machines and the fabric between them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    /// The fabric (`"local"`; embedded clusters refuse `"tcp"`: over TCP the
    /// machines are server processes, see `pragh::tcp`).
    pub fabric: FabricChoice,
    /// Machines in the cluster.
    pub machines: usize,
    /// Worker threads; 0 = one per core.
    pub threads: usize,
    /// Modelled remote latency in ns.
    pub latency_ns: u64,
    /// Modelled link bandwidth (0: infinite).
    pub bandwidth_bytes_per_s: u64,
    /// Fault in region pages at registration, as RDMA registration pins memory.
    pub pin_memory: bool,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            fabric: FabricChoice::Local,
            machines: 8,
            threads: 0,
            latency_ns: 2000,
            bandwidth_bytes_per_s: 12_500_000_000,
            pin_memory: true,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
/// `[graph]`: the R-MAT graph of `demo` and `query --scale`.
pub struct GraphSection {
    /// 2^scale vertices.
    pub scale: u32,
    /// Edges per vertex.
    pub edge_factor: u32,
    /// The generator's seed.
    pub seed: u64,
}

impl Default for GraphSection {
    fn default() -> Self {
        GraphSection {
            scale: 20,
            edge_factor: 16,
            seed: 1,
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
/// How start vertices are drawn.
pub enum Dist {
    /// Zipf over `scope` vertices.
    Zipf,
    /// Uniform over every vertex.
    Uniform,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
/// `[workload]`: the queries `locus demo` and the benchmarks run.
pub struct WorkloadSection {
    /// Queries measured.
    pub queries: usize,
    /// Neighbours per hop.
    pub k: usize,
    /// Start vertices' distribution.
    pub dist: Dist,
    /// Zipf's skew, in (0, 1).
    pub zipf_theta: f64,
    /// Distinct start vertices under Zipf.
    pub scope: u64,
    /// Post each hop's reads at once (default: one GET at a time, as Pragh Fig. 8).
    pub pipelined: bool,
    /// The start vertices' seed.
    pub seed: u64,
}

impl Default for WorkloadSection {
    fn default() -> Self {
        WorkloadSection {
            queries: 20_000,
            k: 100,
            dist: Dist::Zipf,
            zipf_theta: 0.99,
            scope: 1024,
            pipelined: false,
            seed: 7,
        }
    }
}

impl Config {
    /// Reads a config file, or the defaults when `path` is `None`.
    pub fn load(path: Option<&Path>) -> Result<Config> {
        let Some(path) = path else {
            return Ok(Config::default());
        };
        let bad = |reason: String| NodeError::ConfigFile {
            path: path.to_path_buf(),
            reason,
        };
        let text =
            std::fs::read_to_string(path).map_err(|e| bad(format!("cannot read it: {e}")))?;
        crate::config::check_renamed(&text).map_err(|e| bad(e.to_string()))?;
        toml::from_str(&text).map_err(|e| bad(e.to_string()))
    }

    /// Rejects values that cannot work, naming the setting.
    pub fn validate(&self) -> Result<()> {
        let c = &self.cluster;
        if c.fabric == FabricChoice::Tcp {
            return Err(NodeError::setting(
                "cluster.fabric",
                "\"tcp\"".to_string(),
                "must be \"local\": over TCP the machines are server processes (`locus cluster up`, `locus bench pragh schemes --fabric tcp`)",
            ));
        }
        if c.machines == 0 || c.machines > locus_fabric::MACHINES_MAX {
            return Err(NodeError::setting(
                "cluster.machines",
                c.machines.to_string(),
                format!("must be 1..={}", locus_fabric::MACHINES_MAX),
            ));
        }
        if c.threads > 1024 {
            return Err(NodeError::setting(
                "cluster.threads",
                c.threads.to_string(),
                "must be at most 1024",
            ));
        }
        self.store.validate()?;
        let w = &self.workload;
        if w.queries == 0 {
            return Err(NodeError::setting(
                "workload.queries",
                0.to_string(),
                "must be positive",
            ));
        }
        if w.k == 0 {
            return Err(NodeError::setting(
                "workload.k",
                0.to_string(),
                "must be positive",
            ));
        }
        if !(w.zipf_theta > 0.0 && w.zipf_theta < 1.0) {
            return Err(NodeError::setting(
                "workload.zipf_theta",
                w.zipf_theta.to_string(),
                "must be in (0, 1)",
            ));
        }
        if w.scope == 0 {
            return Err(NodeError::setting(
                "workload.scope",
                0.to_string(),
                "must be positive",
            ));
        }
        Ok(())
    }

    /// Worker threads to run (resolving 0 to one per core).
    pub fn threads(&self) -> usize {
        if self.cluster.threads == 0 {
            locus_fabric::pool::default_threads()
        } else {
            self.cluster.threads
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_round_trip_through_toml() {
        let c = Config::default();
        let text = toml::to_string(&c).unwrap();
        assert_eq!(toml::from_str::<Config>(&text).unwrap(), c);
        c.validate().unwrap();
    }

    #[test]
    fn unknown_keys_and_bad_values_are_errors() {
        assert!(toml::from_str::<Config>("[cluster]\nmachnes = 3\n").is_err());
        let c: Config = toml::from_str("[cluster]\nmachines = 200\n").unwrap();
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("cluster.machines"));
        let c: Config = toml::from_str("[workload]\nzipf_theta = 1.5\n").unwrap();
        assert!(c.validate().unwrap_err().to_string().contains("zipf_theta"));
        let c: Config = toml::from_str("[cluster]\nfabric = \"tcp\"\n").unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("cluster.fabric") && e.contains("local"), "{e}");
        let e = toml::from_str::<Config>("[cluster]\nfabric = \"rdma\"\n").unwrap_err();
        assert!(e.to_string().contains("local"), "{e}");
    }

    #[test]
    fn an_old_spelling_names_the_new_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, "[store]\nlocation_cache_mb = 8\n").unwrap();
        let e = Config::load(Some(&path)).unwrap_err().to_string();
        assert!(
            e.contains("store.location_cache_mb was renamed store.cache_mb"),
            "{e}"
        );
        std::fs::write(&path, "[store]\ncache_mb = 8\nreplica_mb = 0.5\n").unwrap();
        let c = Config::load(Some(&path)).unwrap();
        assert_eq!((c.store.cache_mb, c.store.replica_mb), (8, Some(0.5)));
        std::fs::write(&path, "[store]\nreplica_mb = -1\n").unwrap();
        let c = Config::load(Some(&path)).unwrap();
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("store.replica_mb"));
    }
}
