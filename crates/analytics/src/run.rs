//! One analytics run end to end: profile (when placement needs it), place,
//! build the backend's store, stream, report.
//!
//! Disk and far runs place blocks from a [`Profile`]; [`PlacementSource`]
//! says which one, and the report carries it (issue 63): by default one
//! estimated from block sizes and degrees before the run
//! ([`placement::degree_profile`]), or a profile saved by an earlier run
//! (passed to [`run`]), or a profiling run on the Oracle made here and timed
//! (`profile_s`, and in `wall_s`), since it reads the whole graph in local
//! memory and knows exactly which blocks the timed run will read.

use std::path::PathBuf;
use std::time::Instant;

use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_fabric::Fabric;
use serde::Serialize;

use crate::algo::{self, Algo, Params};
use crate::engine::{Engine, EngineConfig, Profile};
use crate::error::{config_err, Result};
use crate::grid::Grid;
use crate::placement::{self, Plan};
use crate::server;
use crate::store::disk::DiskStore;
use crate::store::far::{segment_bytes_for, FarConfig, FarStore};
use crate::store::local::LocalStore;
use crate::store::paged::{PagedStore, READAHEAD_PAGES_DEFAULT};
use crate::store::{
    check_chunk_bytes, Backend, BlockTable, EdgeStore, CHUNK_BYTES_DEFAULT, PAGE_BYTES,
};
use crate::vertex::VertexPagingStats;

/// Memory the in-process far-memory server may lend (no limit beyond the machine's).
pub const LOCAL_SERVER_BYTES_MAX: u64 = u64::MAX;

/// Where a disk or far run's placement profile comes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PlacementSource {
    /// Estimated before the run from block sizes and in-degrees
    /// ([`placement::degree_profile`]): what a real run knows.
    #[default]
    Degrees,
    /// A profile from an earlier run, given to [`run`].
    SavedProfile,
    /// The same algorithm run first on the Oracle (untimed before issue 63;
    /// now timed as `profile_s`).
    ProfilingRun,
}

impl PlacementSource {
    /// `degrees`, `saved_profile` or `profiling_run`.
    pub fn name(self) -> &'static str {
        match self {
            PlacementSource::Degrees => "degrees",
            PlacementSource::SavedProfile => "saved_profile",
            PlacementSource::ProfilingRun => "profiling_run",
        }
    }
}

/// Everything one run needs besides the graph and the fabric.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// The algorithm.
    pub algo: Algo,
    /// Its settings.
    pub params: Params,
    /// Where edge blocks live.
    pub backend: Backend,
    /// α: far memory over all memory (Fargraph+ 3.1).
    pub far_ratio: f64,
    /// Threads and double buffering.
    pub engine: EngineConfig,
    /// Far backend: bytes per one-sided READ.
    pub chunk_bytes: u64,
    /// Disk backend: where its block file goes.
    pub disk_dir: PathBuf,
    /// Far and paged: the machine that computes and the far-memory server.
    pub far: FarConfig,
    /// Paged: pages read ahead after a fault (0: none; Linux's default 8).
    pub readahead_pages: u32,
    /// Paged: vertex arrays page too, in the same budget as the edge pages
    /// (through userfaultfd, [`crate::store::vpage`]); other backends refuse it.
    pub paged_vertices: bool,
    /// Disk and far, when [`run`] is given no profile: estimate one from
    /// degrees, or make a (timed) profiling run.
    pub placement: PlacementSource,
}

impl RunConfig {
    /// Defaults for `algo` on `backend` at ratio `far_ratio`, one thread.
    pub fn new(algo: Algo, backend: Backend, far_ratio: f64) -> RunConfig {
        RunConfig {
            algo,
            params: Params::default(),
            backend,
            far_ratio,
            engine: EngineConfig::default(),
            chunk_bytes: CHUNK_BYTES_DEFAULT,
            disk_dir: std::env::temp_dir(),
            far: FarConfig::default(),
            readahead_pages: READAHEAD_PAGES_DEFAULT,
            paged_vertices: false,
            placement: PlacementSource::Degrees,
        }
    }
}

/// What a run did, for the CLI and the benchmarks.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Algorithm.
    pub algo: Algo,
    /// Backend.
    pub backend: Backend,
    /// Engine threads.
    pub threads: usize,
    /// Double buffering on.
    pub buffering: bool,
    /// Far chunk size.
    pub chunk_bytes: u64,
    /// Vertices.
    pub vertices: u64,
    /// Edges (per order).
    pub edges: u64,
    /// Partitions per side.
    pub partitions: u32,
    /// The grid's edge encoding: `compact` (4 bytes) or `wide` (8).
    pub edge_layout: crate::layout::EdgeLayout,
    /// α asked for.
    pub far_ratio: f64,
    /// α as placed (paged: page-cache-less bytes over all).
    pub far_ratio_achieved: f64,
    /// Seconds building the store (copying, writing far memory or the file).
    pub setup_s: f64,
    /// Seconds of the algorithm itself.
    pub time_s: f64,
    /// Disk and far: where the placement profile came from (None: the
    /// backend places nothing).
    pub placement_source: Option<PlacementSource>,
    /// With a profiling run: its seconds (load to result on the Oracle).
    pub profile_s: Option<f64>,
    /// Seconds of the whole run: profiling run, placement, setup and the
    /// algorithm (`time_s` is the algorithm alone).
    pub wall_s: f64,
    /// With a saved profile: the run it came from (set by the caller, who read it).
    pub profile_origin: Option<crate::saved::ProfileOrigin>,
    /// With a saved profile made with this run's own root or seed (accepted
    /// on request): true.
    pub profile_same_root: Option<bool>,
    /// How the input's edges were taken: `directed` as given, or
    /// `symmetrized` (set by the caller that loaded the graph).
    pub edges_as: crate::input::EdgeMode,
    /// The input's edge weights were dropped on request (`--ignore-weights`;
    /// set by the caller that loaded the graph).
    pub weights_dropped: bool,
    /// Where the weights an algorithm used came from (SSSP; set from the
    /// grid here, refined by the caller that loaded the graph).
    pub weights: crate::weighted::WeightSource,
    /// Iterations.
    pub iterations: u32,
    /// PageRank: its value type.
    pub precision: Option<crate::algo::Precision>,
    /// Edges handed to the update function.
    pub edges_applied: u64,
    /// Bytes fetched from far memory or disk.
    pub bytes_fetched: u64,
    /// One-sided READs or disk reads.
    pub fetch_ops: u64,
    /// Paged: faults and hits.
    pub page_faults: u64,
    /// Paged: hits.
    pub page_hits: u64,
    /// Paged: the readahead window asked for (pages).
    pub readahead_window: u32,
    /// Paged: pages fetched by readahead.
    pub readahead_pages: u64,
    /// Paged with `paged_vertices`: what the vertex pager did (its faults,
    /// READs and write-backs are not in the edge counters above).
    pub vertex_paging: Option<VertexPagingStats>,
    /// Seconds threads spent waiting for data (summed over threads).
    pub wait_s: f64,
    /// Local memory budget.
    pub local_budget_bytes: u64,
    /// Vertex data (local, or paging in the page cache with `paged_vertices`).
    pub vertex_bytes: u64,
    /// Edge bytes kept local.
    pub resident_edge_bytes: u64,
    /// Edge bytes far or on disk.
    pub remote_edge_bytes: u64,
    /// Paged: page cache capacity.
    pub page_cache_bytes: u64,
    /// Fetch buffers held at once, all threads.
    pub buffer_bytes_peak: u64,
    /// Disk: whether reads bypassed the page cache.
    pub direct_io: Option<bool>,
    /// Result digest (hex).
    pub digest: String,
    /// Result summary.
    pub summary: String,
    /// Placement (disk, far).
    pub placement: Option<Plan>,
}

/// A two-machine in-process fabric (machine 0 computes, 1 serves far
/// memory) with the default model: 2 us per operation plus payload at 12.5
/// GB/s; regions are faulted in when registered, as RDMA pins them.
pub fn local_fabric() -> Result<LocalFabric> {
    Ok(LocalFabric::new(LocalConfig {
        machines: 2,
        pin_memory: true,
        ..LocalConfig::default()
    })?)
}

/// The store of `cfg.backend` for `grid`. Far and paged borrow memory from
/// the server on `fabric` (started in this process when the fabric hosts it).
pub fn build_store<F: Fabric + Clone>(
    grid: &Grid,
    fabric: Option<&F>,
    cfg: &RunConfig,
    plan: Option<&Plan>,
) -> Result<Box<dyn EdgeStore>> {
    let orders = cfg.algo.orders();
    let need_fabric = || {
        fabric.ok_or_else(|| {
            config_err(
                "backend",
                format!(
                    "{} needs a fabric with a far-memory server",
                    cfg.backend.name()
                ),
            )
        })
    };
    let need_plan = || plan.ok_or_else(|| config_err("placement", "no placement plan"));
    Ok(match cfg.backend {
        Backend::Local => Box::new(LocalStore::new(grid, orders)?),
        Backend::Disk => Box::new(DiskStore::new(
            grid,
            orders,
            &need_plan()?.residency,
            &cfg.disk_dir,
        )?),
        Backend::Far => {
            let f = need_fabric()?;
            let far = FarConfig {
                chunk_bytes: cfg.chunk_bytes,
                ..cfg.far
            };
            let residency = &need_plan()?.residency;
            server::with_server(f, cfg.far.server, LOCAL_SERVER_BYTES_MAX, || {
                Ok(
                    Box::new(FarStore::new(f.clone(), grid, orders, residency, far)?)
                        as Box<dyn EdgeStore>,
                )
            })?
        }
        Backend::Paged => {
            let f = need_fabric()?;
            let cache = paged_cache_bytes(grid, cfg)?;
            let vertex_bytes_max = cfg
                .paged_vertices
                .then(|| paged_vertex_bytes_max(grid, cfg));
            server::with_server(f, cfg.far.server, LOCAL_SERVER_BYTES_MAX, || {
                Ok(Box::new(PagedStore::with_vertices(
                    f.clone(),
                    grid,
                    orders,
                    cache,
                    cfg.far,
                    cfg.readahead_pages,
                    vertex_bytes_max,
                )?) as Box<dyn EdgeStore>)
            })?
        }
    })
}

/// The paged baseline's page cache: what the budget leaves after vertex data
/// (the same room the far backend fills with resident blocks), but never
/// less than the far backend's fetch buffers at the same settings, so both
/// hold the same local memory for edges. With `paged_vertices` the vertex
/// data pages in it too, so it is the whole budget (with the same floor).
pub fn paged_cache_bytes(grid: &Grid, cfg: &RunConfig) -> Result<u64> {
    placement::check_ratio(cfg.far_ratio)?;
    let table = BlockTable::new(grid, cfg.algo.orders())?;
    let vertex = cfg
        .algo
        .vertex_bytes_at(grid.vertex_count(), cfg.params.precision);
    let budget = placement::local_budget(cfg.far_ratio, vertex + table.total_bytes());
    let buffers = cfg.engine.threads as u64 * 2 * segment_bytes_for(CHUNK_BYTES_DEFAULT);
    if cfg.paged_vertices {
        return Ok(budget.max(buffers));
    }
    // A cache holds whole pages: round the room up, or at ratio 0 (room =
    // edge bytes, rarely a page multiple) the cache is one page short of the
    // region and its LRU misses on every page of every cyclic pass (issue 63:
    // PageRank fetched 155 MB for 16.8 MB of edges).
    Ok(budget
        .saturating_sub(vertex)
        .next_multiple_of(PAGE_BYTES)
        .max(buffers))
}

/// The address space (and far slots) for vertex arrays with
/// `paged_vertices`: twice the algorithm's vertex bytes, since a pass may
/// hold a new array beside the one it replaces (Radii's masks, bitmaps), plus
/// a page of rounding per array.
pub fn paged_vertex_bytes_max(grid: &Grid, cfg: &RunConfig) -> u64 {
    2 * cfg
        .algo
        .vertex_bytes_at(grid.vertex_count(), cfg.params.precision)
        + (1 << 20)
}

/// Runs `cfg` on `grid`. Disk and far need a placement: from `profile` if
/// given (a saved profile), else as `cfg.placement` says (degrees, or a
/// profiling run on the Oracle, timed). Returns the report, the result, and
/// the engine's profile of this run.
pub fn run<F: Fabric + Clone>(
    grid: &Grid,
    fabric: Option<&F>,
    cfg: &RunConfig,
    profile: Option<&Profile>,
) -> Result<(Report, algo::Run, Profile)> {
    placement::check_ratio(cfg.far_ratio)?;
    check_chunk_bytes(cfg.chunk_bytes)?;
    if cfg.paged_vertices && cfg.backend != Backend::Paged {
        return Err(config_err(
            "paged_vertices",
            format!(
                "only the paged backend pages vertex data (the backend is {})",
                cfg.backend.name()
            ),
        ));
    }
    let wall = Instant::now();
    let mut profile_s = None;
    let (plan, placement_source) = match cfg.backend {
        Backend::Disk | Backend::Far => {
            let table = BlockTable::new(grid, cfg.algo.orders())?;
            let owned;
            let (prof, source) = match (profile, cfg.placement) {
                (Some(p), _) => (p, PlacementSource::SavedProfile),
                (None, PlacementSource::SavedProfile) => {
                    return Err(config_err(
                        "placement",
                        "saved_profile placement needs a profile (give --profile FILE)",
                    ))
                }
                (None, PlacementSource::Degrees) => {
                    owned = placement::degree_profile(cfg.algo, &cfg.params, &table);
                    (&owned, PlacementSource::Degrees)
                }
                (None, PlacementSource::ProfilingRun) => {
                    let oracle = RunConfig {
                        backend: Backend::Local,
                        paged_vertices: false,
                        ..cfg.clone()
                    };
                    let t = Instant::now();
                    owned = run::<F>(grid, None, &oracle, None)?.2;
                    profile_s = Some(t.elapsed().as_secs_f64());
                    (&owned, PlacementSource::ProfilingRun)
                }
            };
            let plan =
                placement::plan(cfg.algo, cfg.params.precision, &table, prof, cfg.far_ratio)?;
            (Some(plan), Some(source))
        }
        _ => (None, None),
    };
    let t = Instant::now();
    let store = build_store(grid, fabric, cfg, plan.as_ref())?;
    let setup_s = t.elapsed().as_secs_f64();
    let direct_io = store.direct_io();
    let engine = Engine::new(store.as_ref(), cfg.engine)?;
    let t = Instant::now();
    let result = algo::run(&engine, cfg.algo, grid.out_degree(), &cfg.params)?;
    let time_s = t.elapsed().as_secs_f64();
    let wall_s = wall.elapsed().as_secs_f64();
    let stats = engine.stream_stats();
    let vertex_paging = store.vertex_memory().map(|m| m.stats());
    let profile = engine.profile();
    let fp = store.footprint();
    let vertex_bytes = cfg
        .algo
        .vertex_bytes_at(grid.vertex_count(), cfg.params.precision);
    let total = vertex_bytes + store.table().total_bytes();
    let far_ratio_achieved = match cfg.backend {
        Backend::Paged if cfg.paged_vertices => {
            ((fp.remote_bytes + vertex_bytes).saturating_sub(fp.page_cache_bytes)) as f64
                / total as f64
        }
        Backend::Paged => {
            (fp.remote_bytes.saturating_sub(fp.page_cache_bytes)) as f64 / total as f64
        }
        _ => fp.remote_bytes as f64 / total as f64,
    };
    let report = Report {
        algo: cfg.algo,
        backend: cfg.backend,
        threads: cfg.engine.threads,
        buffering: cfg.engine.buffering,
        chunk_bytes: cfg.chunk_bytes,
        vertices: grid.vertex_count(),
        edges: grid.edge_count(),
        partitions: grid.shape().partitions,
        edge_layout: grid.layout(),
        far_ratio: cfg.far_ratio,
        far_ratio_achieved,
        setup_s,
        time_s,
        placement_source,
        profile_s,
        wall_s,
        profile_origin: None,
        profile_same_root: None,
        edges_as: crate::input::EdgeMode::Directed,
        weights_dropped: false,
        weights: match (cfg.algo.uses_weights(), grid.weighted()) {
            (false, _) => crate::weighted::WeightSource::Unused,
            (true, true) => crate::weighted::WeightSource::Input,
            (true, false) => crate::weighted::WeightSource::UnitNoneInInput,
        },
        iterations: result.iterations,
        precision: (cfg.algo == Algo::PageRank).then_some(cfg.params.precision),
        edges_applied: profile.edges_applied,
        bytes_fetched: stats.bytes_fetched,
        fetch_ops: stats.fetch_ops,
        page_faults: stats.page_faults,
        page_hits: stats.page_hits,
        readahead_window: match cfg.backend {
            Backend::Paged => cfg.readahead_pages,
            _ => 0,
        },
        readahead_pages: stats.readahead_pages,
        vertex_paging,
        wait_s: stats.wait_ns as f64 / 1e9,
        local_budget_bytes: placement::local_budget(cfg.far_ratio, total),
        vertex_bytes,
        resident_edge_bytes: fp.resident_bytes,
        remote_edge_bytes: fp.remote_bytes,
        page_cache_bytes: fp.page_cache_bytes,
        buffer_bytes_peak: stats.buffer_bytes_peak,
        direct_io,
        digest: format!("{:016x}", result.output.digest()),
        summary: result.output.summary(),
        placement: plan,
    };
    Ok((report, result, profile))
}
