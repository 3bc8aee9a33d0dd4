//! Profiles saved by one run for the placement of another (issue 63).
//!
//! Placement from the timed run's own profile is a leak: a BFS profiled from
//! the same root tells placement exactly which blocks the timed BFS reads.
//! `--save-profile FILE` writes the engine's profile of a run together with
//! the graph's identity and the run's origin (algorithm, BFS root, Radii
//! seed); `--profile FILE` reads one back for a later run, refusing it when
//! it was made on another graph (counts, grid shape, layout or digest
//! differ) or by another algorithm, and refusing (unless the caller accepts
//! it) a profile made with the same root or seed as the run it would place,
//! since that is the leak again. The file is JSON:
//!
//! ```text
//! { "version": 1,
//!   "graph":  { "vertices", "edges", "partitions", "stripes", "edge_layout", "digest" },
//!   "origin": { "algo", "root", "radii_seed", "iterations" },
//!   "profile": { "block_bytes": [[..], [..]], "edges_applied", "vertex_visits", ... } }
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::algo::{default_root, Algo, Params};
use crate::engine::Profile;
use crate::error::{io_err, AnalyticsError, Result};
use crate::grid::{Grid, Order};

/// The format version written and accepted.
pub const SAVED_PROFILE_VERSION: u32 = 1;
/// Largest saved-profile file read (a profile is a few numbers per block).
pub const SAVED_PROFILE_BYTES_MAX: u64 = 256 << 20;

/// What identifies a graph as preprocessed: a profile counts bytes per
/// block, so it only means something on the same grid.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphIdentity {
    /// Vertices.
    pub vertices: u64,
    /// Edges.
    pub edges: u64,
    /// Partitions per side.
    pub partitions: u32,
    /// Stripes per column block.
    pub stripes: u32,
    /// `compact` or `wide`.
    pub edge_layout: String,
    /// CRC-32 (hex) of the out-degrees and every order's block offsets and edge bytes.
    pub digest: String,
}

impl GraphIdentity {
    /// The identity of `grid` (one pass over its edge bytes).
    pub fn of(grid: &Grid) -> GraphIdentity {
        let mut h = crc32fast::Hasher::new();
        let mut buf: Vec<u8> = Vec::with_capacity(1 << 16);
        for chunk in grid.out_degree().chunks(1 << 14) {
            buf.clear();
            buf.extend(chunk.iter().flat_map(|d| d.to_le_bytes()));
            h.update(&buf);
        }
        for o in Order::ALL {
            for chunk in grid.offsets(o).chunks(1 << 13) {
                buf.clear();
                buf.extend(chunk.iter().flat_map(|x| x.to_le_bytes()));
                h.update(&buf);
            }
            h.update(grid.bytes(o));
        }
        GraphIdentity {
            vertices: grid.vertex_count(),
            edges: grid.edge_count(),
            partitions: grid.shape().partitions,
            stripes: grid.stripes(),
            edge_layout: grid.layout().name().to_string(),
            digest: format!("{:08x}", h.finalize()),
        }
    }

    fn describe(&self) -> String {
        format!(
            "{} vertices, {} edges, {}x{} grid of {} edges, {} stripes, digest {}",
            self.vertices,
            self.edges,
            self.partitions,
            self.partitions,
            self.edge_layout,
            self.stripes,
            self.digest
        )
    }
}

/// Which run a profile came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileOrigin {
    /// The algorithm's name.
    pub algo: String,
    /// BFS: the root (resolved: the default root is written as its id).
    pub root: Option<u32>,
    /// Radii: the sample seed.
    pub radii_seed: Option<u64>,
    /// PageRank: iterations.
    pub iterations: Option<u32>,
}

impl ProfileOrigin {
    /// The origin of a run of `algo` with `params` on `grid`.
    pub fn of(grid: &Grid, algo: Algo, params: &Params) -> ProfileOrigin {
        ProfileOrigin {
            algo: algo.name().to_string(),
            root: matches!(algo, Algo::Bfs | Algo::Sssp).then(|| {
                params
                    .root
                    .unwrap_or_else(|| default_root(grid.out_degree()))
            }),
            radii_seed: (algo == Algo::Radii).then_some(params.seed),
            iterations: (algo == Algo::PageRank).then_some(params.iterations),
        }
    }

    /// `bfs from root 7`, `radii with seed 1`, `pagerank (20 iterations)`.
    pub fn describe(&self) -> String {
        match (self.root, self.radii_seed, self.iterations) {
            (Some(r), _, _) => format!("{} from root {r}", self.algo),
            (_, Some(s), _) => format!("{} with seed {s}", self.algo),
            (_, _, Some(i)) => format!("{} ({i} iterations)", self.algo),
            _ => self.algo.clone(),
        }
    }
}

/// A profile with the graph and run it came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SavedProfile {
    /// [`SAVED_PROFILE_VERSION`].
    pub version: u32,
    /// The graph it was measured on.
    pub graph: GraphIdentity,
    /// The run it was measured in.
    pub origin: ProfileOrigin,
    /// The engine's counts.
    pub profile: Profile,
}

/// What [`SavedProfile::check`] found acceptable but worth saying.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Accepted {
    /// The profile was made with the root or seed of the run it places
    /// (accepted only because the caller said so).
    pub same_root: bool,
}

impl SavedProfile {
    /// The profile `profile` of a run of `algo` with `params` on `grid`.
    pub fn new(grid: &Grid, algo: Algo, params: &Params, profile: Profile) -> SavedProfile {
        SavedProfile {
            version: SAVED_PROFILE_VERSION,
            graph: GraphIdentity::of(grid),
            origin: ProfileOrigin::of(grid, algo, params),
            profile,
        }
    }

    /// Writes it as JSON (`PATH.partial`, then renamed).
    pub fn save(&self, path: &Path) -> Result<()> {
        let json = serde_json::to_string(self).map_err(|e| bad(path, e.to_string()))?;
        let mut partial = path.as_os_str().to_owned();
        partial.push(".partial");
        let partial = PathBuf::from(partial);
        std::fs::write(&partial, json).map_err(io_err("write", &partial))?;
        std::fs::rename(&partial, path).map_err(io_err("rename", path))?;
        Ok(())
    }

    /// Reads a file written by [`SavedProfile::save`].
    pub fn load(path: &Path) -> Result<SavedProfile> {
        let len = std::fs::metadata(path).map_err(io_err("open", path))?.len();
        if len > SAVED_PROFILE_BYTES_MAX {
            return Err(bad(
                path,
                format!("{len} bytes exceed the limit of {SAVED_PROFILE_BYTES_MAX}"),
            ));
        }
        let text = std::fs::read_to_string(path).map_err(io_err("read", path))?;
        let s: SavedProfile = serde_json::from_str(&text).map_err(|e| {
            bad(
                path,
                format!(
                    "not a saved profile ({e}); write one with \
                     `locus analytics run ... --save-profile {}`",
                    path.display()
                ),
            )
        })?;
        if s.version != SAVED_PROFILE_VERSION {
            return Err(bad(
                path,
                format!(
                    "format version {} (this build reads {SAVED_PROFILE_VERSION}); save it again",
                    s.version
                ),
            ));
        }
        Ok(s)
    }

    /// Whether it may place a run of `algo` with `params` on `grid`: same
    /// graph, same algorithm, and (unless `same_root_ok`) another root or
    /// seed. WCC and PageRank have no root: a profile of either on the same
    /// graph is the timed run's own, so it needs `same_root_ok` too.
    pub fn check(
        &self,
        path: &Path,
        grid: &Grid,
        algo: Algo,
        params: &Params,
        same_root_ok: bool,
    ) -> Result<Accepted> {
        let here = GraphIdentity::of(grid);
        if self.graph != here {
            return Err(bad(
                path,
                format!(
                    "made on another graph ({}); this run's graph is {}: save a profile on \
                     this graph with --save-profile, or drop --profile",
                    self.graph.describe(),
                    here.describe()
                ),
            ));
        }
        let blocks = grid.shape().blocks();
        if self
            .profile
            .block_bytes
            .iter()
            .any(|b| !b.is_empty() && b.len() != blocks)
        {
            return Err(bad(
                path,
                format!("its block counts are not one per block of the {blocks}-block grid"),
            ));
        }
        // By parse, not by name: CC's profiles saved as `wcc` before issue 63 still match.
        if Algo::parse(&self.origin.algo).ok() != Some(algo) {
            return Err(bad(
                path,
                format!(
                    "made by {}, not {}: profile an earlier {} run",
                    self.origin.describe(),
                    algo.name(),
                    algo.name()
                ),
            ));
        }
        let now = ProfileOrigin::of(grid, algo, params);
        let same_root = match algo {
            Algo::Bfs | Algo::Sssp => self.origin.root == now.root,
            Algo::Radii => self.origin.radii_seed == now.radii_seed,
            Algo::Wcc | Algo::PageRank | Algo::Tc | Algo::Bc => true,
        };
        if same_root && !same_root_ok {
            let what = match algo {
                Algo::Bfs | Algo::Sssp => "the root of this run",
                Algo::Radii => "the seed of this run",
                Algo::Wcc | Algo::PageRank | Algo::Tc | Algo::Bc => {
                    "the same run as this one (it has no root)"
                }
            };
            return Err(bad(
                path,
                format!(
                    "made by {}, {what}: placement would know which blocks this run reads \
                     before it starts (issue 63). Profile another root or seed, use the \
                     default degree placement, or give --profile-same-root-ok to accept it \
                     (the report says so)",
                    self.origin.describe()
                ),
            ));
        }
        Ok(Accepted { same_root })
    }
}

fn bad(path: &Path, reason: String) -> AnalyticsError {
    AnalyticsError::SavedProfile {
        path: path.to_path_buf(),
        reason,
    }
}
