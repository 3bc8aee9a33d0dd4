//! What a scheme is (Pragh 6): its store and driver settings, its running
//! cluster ([`Running`]), the workload's operation sequences, and the Shard
//! baseline's plan. One scheme's run is in `run.rs`.

use std::sync::atomic::Ordering;

use locus_coordinator::{Driver, DriverConfig, Mode, PolicyConfig};
use locus_store::{Services, StoreConfig};
use locus_workloads::traversal::{
    mix_ops, run_ops, start_vertices, MixReport, Op, StartDist, StartSampler, TwoHop,
};

use super::graph::Graph;
use super::Settings;
use crate::cluster::Embedded;
use crate::config::Config;
use crate::{BenchError, Reporter, Result};

/// The schemes of Pragh 6, and Locus's Replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// Everything on one machine: every access is local (the upper bound).
    Ideal,
    /// Hash placement, no location cache: Pragh's starting point.
    Orig,
    /// Shard-based placement with an optimal plan from full access counts (Pragh 2.3).
    Shard,
    /// Split live migration without the location cache.
    Split,
    /// The location cache without migration.
    Cache,
    /// Split live migration with the location cache (Pragh).
    SplitCache,
    /// Split+Cache with read-only replicas of shared values (a Locus extension).
    Replica,
    /// A second Orig cluster, run only when named (`--schemes
    /// Orig,Orig-again,...`): a control whose ratio to Orig in the same
    /// round is the benchmark's own noise between two identical schemes
    /// (an A/A comparison), the floor against which "at or above Orig" is read.
    OrigAgain,
}

impl Scheme {
    /// Every scheme, in the order the tables show them.
    pub const ALL: [Scheme; 7] = [
        Scheme::Ideal,
        Scheme::Orig,
        Scheme::Shard,
        Scheme::Split,
        Scheme::Cache,
        Scheme::SplitCache,
        Scheme::Replica,
    ];

    /// Schemes run only when `--schemes` names them.
    pub const ON_REQUEST: [Scheme; 1] = [Scheme::OrigAgain];

    /// The scheme's name in tables, plots and `--schemes`.
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Ideal => "Ideal",
            Scheme::Orig => "Orig",
            Scheme::Shard => "Shard",
            Scheme::Split => "Split",
            Scheme::Cache => "Cache",
            Scheme::SplitCache => "Split+Cache",
            Scheme::Replica => "Replica",
            Scheme::OrigAgain => "Orig-again",
        }
    }

    /// The scheme named `name` (case-insensitive).
    pub fn parse(name: &str) -> Result<Scheme> {
        Scheme::ALL
            .into_iter()
            .chain(Scheme::ON_REQUEST)
            .find(|s| s.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                BenchError::setting(
                    "--schemes",
                    name,
                    "must be one of Ideal, Orig, Shard, Split, Cache, Split+Cache, Replica, Orig-again",
                )
            })
    }

    /// Whether the scheme moves values with split live migration.
    pub fn migrates(self) -> bool {
        matches!(self, Scheme::Split | Scheme::SplitCache | Scheme::Replica)
    }

    /// Machines the scheme runs on for a cluster of `machines`.
    pub fn machines(self, machines: usize) -> usize {
        if self == Scheme::Ideal {
            1
        } else {
            machines
        }
    }

    /// How the scheme sets up a store sized for its graph; `replica_mb`
    /// (Replica only) overrides the default replica budget per machine.
    ///
    /// Every scheme sets every setting [`locus_store::Store::reconfigure`]
    /// may change, so a store loaded for one scheme can be reconfigured for
    /// another and end as if it had been created for it.
    pub fn configure(self, s: &mut StoreConfig, replica_mb: Option<f64>) {
        s.cache_lookups = true;
        s.replica_bytes_max = 0;
        match self {
            Scheme::Ideal | Scheme::Orig | Scheme::OrigAgain => s.cache_bytes_max = 0,
            Scheme::Shard => {
                s.cache_bytes_max = 0;
                s.shards_per_machine = locus_store::shard::SHARDS_PER_MACHINE_DEFAULT;
                // Room for the shards a machine may receive (the plan allows 2x its share).
                s.buckets_per_machine *= 2;
                s.overflow_buckets_per_machine *= 2;
                s.value_region_bytes *= 2;
            }
            Scheme::Cache | Scheme::SplitCache => s.cache_bytes_max = 128 << 20,
            Scheme::Replica => {
                s.cache_bytes_max = 128 << 20;
                s.replica_bytes_max = match replica_mb {
                    Some(mb) => (mb * (1u64 << 20) as f64) as u64 / 8 * 8,
                    None => (s.value_region_bytes / 4).min(256 << 20) / 8 * 8,
                };
            }
            Scheme::Split => {
                // The cache still counts accesses for the monitor, but no lookup uses it.
                s.cache_bytes_max = 128 << 20;
                s.cache_lookups = false;
            }
        }
    }

    /// [`Scheme::configure`] for a store about to be loaded with `config`'s
    /// settings, whose value region holds `[store] value_region_extra_mb`
    /// past the graph's sizing: the replica budget is set from the region
    /// without it, so the room for rewritten values does not raise
    /// Replica's default budget.
    pub fn configure_for(self, s: &mut StoreConfig, config: &Config) {
        let extra = config.store.value_region_extra_mb << 20;
        s.value_region_bytes -= extra;
        self.configure(s, config.store.replica_mb);
        s.value_region_bytes += extra;
    }

    /// The migration driver's settings for this scheme (Pragh 4.4): monitoring
    /// interval, dwell and forgetting in intervals; replicas for Replica.
    pub fn driver_config(self, interval_ms: u64, mode: Mode) -> DriverConfig {
        DriverConfig {
            policy: PolicyConfig {
                mode,
                interval_ms,
                dwell_ms: interval_ms,
                forget_after_ms: interval_ms * 3,
                replicas: self == Scheme::Replica,
                ..PolicyConfig::default()
            },
            ..DriverConfig::default()
        }
    }
}

/// A scheme's cluster while it runs: the loaded store, its service threads
/// and, for schemes that migrate, the driver.
///
/// Fields drop in declaration order: the driver stops before the services
/// it may be waiting on (a replica registration is answered by a service).
pub struct Running {
    /// The scheme.
    pub scheme: Scheme,
    /// The monitor/coordinator/executor driver (schemes that migrate).
    pub driver: Option<Driver<crate::cluster::EmbeddedFabric>>,
    /// Service threads answering forwarded updates.
    pub services: Services,
    /// The loaded cluster.
    pub cluster: Embedded,
}

impl Running {
    /// Builds `scheme`'s cluster for `graph` and starts its services and driver.
    pub fn start(
        scheme: Scheme,
        graph: &Graph,
        config: &Config,
        machines: usize,
        interval_ms: u64,
        mode: Mode,
        r: &Reporter,
    ) -> Result<Running> {
        let cluster = graph.build(scheme.machines(machines), config, r, |s| {
            scheme.configure_for(s, config)
        })?;
        Running::on(scheme, cluster, config, interval_ms, mode)
    }

    /// Starts `scheme`'s services and driver on a loaded cluster, first
    /// giving its store the scheme's cache and replica settings if it was
    /// loaded for another scheme (the cluster must have as many machines as
    /// the scheme runs on, and the same layout).
    pub fn on(
        scheme: Scheme,
        mut cluster: Embedded,
        config: &Config,
        interval_ms: u64,
        mode: Mode,
    ) -> Result<Running> {
        // Only the settings `reconfigure` may change are taken from the
        // scheme (Shard's `configure` also resizes the layout it loaded with).
        let current = cluster.stores.config().clone();
        let mut fresh = current.clone();
        // Replica's default budget is a quarter of the region the graph
        // needs, not of the room added for rewrites (`configure_for`).
        fresh.value_region_bytes = fresh
            .value_region_bytes
            .saturating_sub(config.store.value_region_extra_mb << 20);
        scheme.configure(&mut fresh, config.store.replica_mb);
        let store_config = StoreConfig {
            cache_bytes_max: fresh.cache_bytes_max,
            cache_lookups: fresh.cache_lookups,
            replica_bytes_max: fresh.replica_bytes_max,
            ..current
        };
        if &store_config != cluster.stores.config() {
            cluster.reconfigure(store_config)?;
        }
        let services = cluster.stores.spawn_services()?;
        let driver = if scheme.migrates() {
            let mut d = scheme.driver_config(interval_ms, mode);
            // A zero budget makes Replica Split+Cache (no replicas to approve).
            d.policy.replicas &= config.store.replica_mb != Some(0.0);
            Some(Driver::start(cluster.stores.clone(), d)?)
        } else {
            None
        };
        Ok(Running {
            scheme,
            cluster,
            services,
            driver,
        })
    }

    /// Fails if a service thread or the driver has stopped on an error: a
    /// dead service would otherwise show up only as forwards timing out.
    pub fn check(&self) -> Result<()> {
        if let Some(e) = self.services.failure() {
            return Err(BenchError::Service {
                scheme: self.scheme.name().into(),
                source: e,
            });
        }
        if let Some(e) = self.driver.as_ref().and_then(|d| d.error()) {
            return Err(BenchError::Driver {
                scheme: self.scheme.name().into(),
                source: e,
            });
        }
        Ok(())
    }

    /// Runs `ops` on the cluster (queries on their start vertex's home) and
    /// checks the services and driver after.
    pub fn run(
        &self,
        ops: &[Op],
        q: TwoHop,
        threads: usize,
        label: &str,
        r: &Reporter,
    ) -> Result<MixReport> {
        let pb = r.bar(ops.len() as u64, label);
        let report = run_ops(
            &self.cluster.stores,
            self.cluster.fabric.counters(),
            threads,
            ops,
            q,
            &|d| pb.set_position(d),
        );
        pb.finish_and_clear();
        // A stopped service explains a failed run better than the run's own error.
        self.check()?;
        Ok(report?)
    }

    /// Pauses the driver and quiets the services (see
    /// [`Driver::pause`], [`Services::set_quiet`]): while another scheme's
    /// cluster in this process is measured, this one does no work of its own.
    pub fn pause(&self) {
        if let Some(d) = &self.driver {
            d.pause();
        }
        self.services.set_quiet(true);
    }

    /// Undoes [`Running::pause`].
    pub fn resume(&self) {
        self.services.set_quiet(false);
        if let Some(d) = &self.driver {
            d.resume();
        }
    }

    /// (values or keys moved, bytes moved, migrations approved) so far.
    pub fn moved(&self) -> (u64, u64, u64) {
        self.driver.as_ref().map_or((0, 0, 0), |d| {
            (
                d.stats().moved.load(Ordering::Relaxed),
                d.stats().bytes_moved.load(Ordering::Relaxed),
                d.stats().approved.load(Ordering::Relaxed),
            )
        })
    }
}

/// The operation sequences of one experiment: a warm-up and a measured
/// sequence drawn from the same start distribution, and fresh draws from it
/// for every further warm-up round and measured repetition.
pub struct Workload<'a> {
    pub(super) graph: &'a Graph,
    /// Vertices with a value (sorted): update endpoints are drawn from them.
    pub(super) endpoints: Vec<u32>,
    pub(super) warm: Vec<Op>,
    pub(super) measure: Vec<Op>,
    sampler: StartSampler,
    update_fraction: f64,
    seed: u64,
}

/// Which sequence a fresh draw continues ([`Workload::fresh`]).
#[derive(Clone, Copy)]
pub(super) enum Stream {
    Warm = 1,
    Measure = 2,
}

impl Workload<'_> {
    /// Repetition `rep` of `stream`: as many operations as the first
    /// sequence, with start vertices and edge inserts drawn afresh from the
    /// same distribution (a query stream, as in Pragh 6). Repeating one draw
    /// would make a uniform workload a fixed set of about `ops` starts, whose
    /// neighbourhoods a machine reads again every round: locality that a
    /// uniform stream does not have, and that the measured sequence (another
    /// draw) does not share.
    pub(super) fn fresh(&self, stream: Stream, rep: u64) -> Vec<Op> {
        let seed = self.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ ((stream as u64) << 56) ^ rep;
        let starts = self.sampler.draw(self.warm.len(), seed);
        mix_ops(&starts, self.update_fraction, &self.endpoints, seed)
    }
}

impl Workload<'_> {
    /// Part `rep` of the measured stream: the measured sequence (0), then
    /// fresh draws of it (1, 2, ...), as [`Warmed::measure`] runs them.
    pub(super) fn measured(&self, rep: u64) -> Vec<Op> {
        if rep == 0 {
            self.measure.clone()
        } else {
            self.fresh(Stream::Measure, rep)
        }
    }
}

/// The vertices a loaded graph has values for (degree > 0), sorted.
pub(super) fn endpoints(graph: &Graph) -> Vec<u32> {
    (0..graph.vertex_count() as u32)
        .filter(|&v| graph.has_edges(v))
        .collect()
}

/// The warm-up and measured sequences for `dist`: `p.ops` operations each,
/// `p.update_fraction` of them edge inserts.
pub(super) fn workload<'a>(
    graph: &'a Graph,
    p: &Settings,
    dist: StartDist,
) -> Result<Workload<'a>> {
    let eligible = |v: u32| graph.has_edges(v);
    let n = graph.vertex_count();
    // The measured and warm-up sequences share the start set (same seed for
    // the scope choice) but draw different operations from it.
    let starts = start_vertices(n, p.ops * 2, dist, p.seed, eligible)?;
    let sampler = StartSampler::new(n, dist, p.seed, eligible)?;
    let (warm, measure) = starts.split_at(p.ops);
    let ends = endpoints(graph);
    // The placement bound and the Shard plan read the start vertices' lists.
    graph.remember_lists(&starts, p.threads)?;
    Ok(Workload {
        graph,
        warm: mix_ops(warm, p.update_fraction, &ends, p.seed ^ 1),
        measure: mix_ops(measure, p.update_fraction, &ends, p.seed ^ 2),
        endpoints: ends,
        sampler,
        update_fraction: p.update_fraction,
        seed: p.seed,
    })
}

/// Vertices whose value is held away from their key's machine.
pub fn values_away(e: &Embedded, graph: &Graph) -> Result<u64> {
    let mut w0 = e.stores.worker(0)?;
    let mut away = 0u64;
    for v in 0..graph.vertex_count() as u32 {
        if !graph.has_edges(v) {
            continue;
        }
        let word = w0.address_word(v)?;
        let home = e.stores.owner(v);
        if locus_store::addr::Addr::decode(word).is_some_and(|a| a.holder(home) != home) {
            away += 1;
        }
    }
    Ok(away)
}

/// The shard baseline's plan and move (Pragh 6: "optimal migration plans ...
/// by tracking every access", tracking cost not charged): `ops`' accesses are
/// counted per shard and machine offline, the plan sends each shard to its
/// busiest accessor within 2x a machine's share of keys, and the shards move
/// with traffic paused. Returns (keys, bytes) moved.
pub(super) fn move_shards_optimally(
    e: &Embedded,
    ops: &[Op],
    graph: &Graph,
    k: usize,
    r: &Reporter,
) -> Result<(u64, u64)> {
    let store = &e.stores;
    let map = store.shard_map().ok_or(BenchError::setting(
        "scheme",
        "Shard",
        "needs a store with shard-based placement",
    ))?;
    let shards = map.shards() as usize;
    let machines = store.machines();
    let mut counts = vec![vec![0u64; machines]; shards];
    for op in ops {
        let at = store.owner(op.start()) as usize;
        match *op {
            Op::TwoHop(s) => {
                counts[map.shard_of(s) as usize][at] += 1;
                for u in graph.neighbors(s, k) {
                    counts[map.shard_of(u) as usize][at] += 1;
                }
            }
            Op::InsertEdge(v, _) | Op::InsertUndone(v, _) => {
                counts[map.shard_of(v) as usize][at] += 1
            }
        }
    }
    let mut keys = vec![0u64; shards];
    for v in 0..graph.vertex_count() as u32 {
        if graph.has_edges(v) {
            keys[map.shard_of(v) as usize] += 1;
        }
    }
    let current: Vec<u8> = (0..shards as u32).map(|s| map.owner_of_shard(s)).collect();
    let total: u64 = keys.iter().sum();
    let moves = locus_store::shard::plan(&counts, &keys, &current, total * 2 / machines as u64 + 1);
    r.note(format!(
        "Shard: moving {} of {} shards",
        moves.len(),
        shards
    ));
    Ok(store.move_shards(&moves)?)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::super::run::run_scheme;
    use super::*;
    use locus_fabric::faulty::{Fault, Faulty};
    use locus_fabric::local::{LocalConfig, LocalFabric};

    fn tiny_csr() -> Graph {
        let mut g = Config::default().graph;
        g.scale = 6;
        Graph::Csr(crate::cluster::rmat_csr(&g).unwrap())
    }

    /// `[store] value_region_extra_mb` grows every scheme's value region
    /// by that much and leaves Replica's default budget where the graph's
    /// sizing puts it (`put-heavy`'s room for rewrites is not replica room).
    #[test]
    fn extra_value_room_grows_the_region_and_not_the_replica_budget() {
        let base = StoreConfig::for_graph(1 << 12, 1 << 16, 8, 1 << 16);
        let mut config = Config::default();
        for scheme in [Scheme::Orig, Scheme::SplitCache, Scheme::Replica] {
            // As `cluster::store_config` makes them: the extra room included.
            config.store.value_region_extra_mb = 0;
            let mut plain = config.store.store_config_for(base.clone());
            scheme.configure_for(&mut plain, &config);
            config.store.value_region_extra_mb = 448;
            let mut grown = config.store.store_config_for(base.clone());
            scheme.configure_for(&mut grown, &config);
            assert_eq!(
                grown.value_region_bytes,
                plain.value_region_bytes + (448 << 20),
                "{}",
                scheme.name()
            );
            assert_eq!(grown.replica_bytes_max, plain.replica_bytes_max);
            grown.validate().unwrap();
        }
    }

    /// Quick settings for a small graph: `seed`, R-MAT `scale`, `ops`
    /// operations a round, two worker threads, no minimum measured window.
    fn small_settings(seed: u64, scale: u32, ops: usize) -> Settings {
        let mut p = Settings::new(crate::Preset::Quick, seed);
        p.scale = scale;
        p.ops = ops;
        p.measure_s_min = 0.0;
        p.threads = 2;
        p
    }

    /// Orig reads every value at its key's home, so its measured remote GET
    /// share is exactly the bound's hash-placement share (same unit, same
    /// queries); Ideal's is zero; and the bound counts any number of machines.
    #[test]
    fn orig_measures_the_hash_placement_bound_in_gets() {
        let csr = tiny_csr();
        let mut p = small_settings(3, 6, 400);
        p.update_fraction = 0.0;
        let r = Reporter::quiet();
        for machines in [4, 12] {
            p.machines = machines;
            let w = workload(&csr, &p, StartDist::Uniform).unwrap();
            let b = super::super::placement_bound(&csr, &w.measure, machines, p.k);
            assert!(b.gets > 400, "{b:?}");
            let orig = run_scheme(Scheme::Orig, &w, &p, Mode::Eager, &r).unwrap();
            assert!(
                (orig.remote_gets - b.hash_remote_gets).abs() < 1e-12,
                "{machines} machines: measured {} bound {}",
                orig.remote_gets,
                b.hash_remote_gets
            );
            assert!(b.best_single_copy_remote_gets <= b.hash_remote_gets);
            // The CPU accounting of the measured window sees the workers
            // (their group is there even if a short window got no tick).
            if cfg!(target_os = "linux") {
                assert!(
                    orig.measure_cpu_s.contains_key(crate::threads::EXITED),
                    "{:?}",
                    orig.measure_cpu_s
                );
                assert!((0.0..=1.5).contains(&orig.measure_machine_share));
                assert!((0.0..=1.0).contains(&orig.measure_background_share));
                // Ticks of 10 ms over a short window: bounded below only.
                assert!(orig.measure_steal_share >= 0.0 && orig.measure_steal_share.is_finite());
            }
        }
        let ideal = run_scheme(
            Scheme::Ideal,
            &workload(&csr, &p, StartDist::Uniform).unwrap(),
            &p,
            Mode::Eager,
            &r,
        )
        .unwrap();
        assert_eq!(ideal.remote_gets, 0.0);
    }

    /// Every scheme warms by one rule, rounds of an interval and a half
    /// until one approves nothing new and at least two: a scheme with no
    /// driver warms as long as a migrating one at the least, not one round.
    #[test]
    fn every_scheme_warms_at_least_two_rounds_of_an_interval_and_a_half() {
        let csr = tiny_csr();
        let mut p = small_settings(3, 6, 200);
        p.machines = 4;
        p.interval_ms = 100;
        let r = Reporter::quiet();
        let w = workload(&csr, &p, StartDist::Uniform).unwrap();
        for s in [Scheme::Ideal, Scheme::Orig, Scheme::Split] {
            let row = run_scheme(s, &w, &p, Mode::Eager, &r).unwrap();
            let rounds = &row.warm_rounds_approved;
            assert!(rounds.len() >= 2, "{}: {rounds:?}", s.name());
            assert_eq!(rounds.last(), Some(&0), "{}: {rounds:?}", s.name());
            if !s.migrates() {
                assert_eq!(rounds, &[0, 0], "{}", s.name());
            }
            assert!(row.warm_s >= 0.3, "{}: warmed {} s", s.name(), row.warm_s);
        }
    }

    /// Every scheme is measured on the same graph: its warm-up applies the
    /// updates of its first draw only, so a scheme that warms longer or
    /// faster (Ideal runs several times as many warm-up operations as Orig)
    /// inserts no more edges. With one worker thread the measured sequence
    /// then reads exactly as many values in every scheme. (Before, every
    /// warm-up draw inserted its edges, and Ideal's queries read more.)
    #[test]
    fn every_scheme_is_measured_on_the_same_graph_however_long_it_warmed() {
        let csr = tiny_csr();
        let mut p = small_settings(9, 6, 200);
        p.machines = 4;
        p.interval_ms = 100;
        p.threads = 1;
        p.update_fraction = 0.3;
        p.k = 1_000;
        let r = Reporter::quiet();
        let w = workload(&csr, &p, StartDist::Uniform).unwrap();
        let rows: Vec<super::super::Row> = [Scheme::Ideal, Scheme::Orig, Scheme::Split]
            .into_iter()
            .map(|s| run_scheme(s, &w, &p, Mode::Eager, &r).unwrap())
            .collect();
        assert!(rows[0].gets_per_query > 1.0, "{}", rows[0].gets_per_query);
        for row in &rows[1..] {
            assert_eq!(
                row.gets_per_query, rows[0].gets_per_query,
                "{} against Ideal (queries {} and {})",
                row.scheme, row.queries, rows[0].queries
            );
        }
    }

    /// A graph held without its CSR gives the run the same workload, the
    /// same placement bound and the same store contents as the CSR.
    #[test]
    fn the_ranged_graph_runs_the_same_experiment_as_the_csr() {
        let mut g = Config::default().graph;
        g.scale = 8;
        let r = Reporter::quiet();
        let csr = Graph::generate(&g, super::super::Loader::Csr, 2, &r).unwrap();
        let ranged = Graph::generate(&g, super::super::Loader::Ranged, 2, &r).unwrap();
        assert_eq!(csr.vertex_count(), ranged.vertex_count());
        let mut p = small_settings(5, 8, 300);
        p.update_fraction = 0.0;
        p.machines = 4;
        let (wc, wr) = (
            workload(&csr, &p, StartDist::Uniform).unwrap(),
            workload(&ranged, &p, StartDist::Uniform).unwrap(),
        );
        assert_eq!(wc.measure, wr.measure);
        assert_eq!(wc.endpoints, wr.endpoints);
        let (bc, br) = (
            super::super::placement_bound(&csr, &wc.measure, 4, p.k),
            super::super::placement_bound(&ranged, &wr.measure, 4, p.k),
        );
        assert_eq!((bc.gets, bc.shared_vertices), (br.gets, br.shared_vertices));
        assert_eq!(bc.hash_remote_gets, br.hash_remote_gets);
        let orig = run_scheme(Scheme::Orig, &wr, &p, Mode::Eager, &r).unwrap();
        assert!((orig.remote_gets - br.hash_remote_gets).abs() < 1e-12);
        assert_eq!(ranged.stored_edges(), csr.stored_edges());
    }

    /// A started Replica cluster has the extra room in its value region
    /// and the budget it would have without it.
    #[test]
    fn a_started_replica_keeps_its_budget_when_the_region_grows() {
        let r = Reporter::quiet();
        let mut config = Config::default();
        let start = |config: &Config| {
            let run = Running::start(
                Scheme::Replica,
                &tiny_csr(),
                config,
                2,
                1000,
                Mode::Eager,
                &r,
            )
            .unwrap();
            let c = run.cluster.stores.config().clone();
            (c.value_region_bytes, c.replica_bytes_max)
        };
        let (region, budget) = start(&config);
        config.store.value_region_extra_mb = 8;
        assert_eq!(start(&config), (region + (8 << 20), budget));
    }

    #[test]
    fn a_run_with_a_dead_service_is_an_error_naming_it() {
        let config = Config::default();
        let r = Reporter::quiet();
        let mut run =
            Running::start(Scheme::Orig, &tiny_csr(), &config, 2, 1000, Mode::Eager, &r).unwrap();
        run.check().unwrap();
        // Services of a store whose memory fails from now on: its idle
        // services' garbage collection stops them.
        let f = Faulty::new(LocalFabric::new(LocalConfig::with_machines(2)).unwrap());
        let broken = locus_store::Store::create(f.clone(), StoreConfig::default()).unwrap();
        run.services = broken.spawn_services().unwrap();
        f.inject(Fault::FailFrom(0));
        let t = Instant::now();
        let e = loop {
            if let Err(e) = run.check() {
                break e;
            }
            assert!(t.elapsed() < Duration::from_secs(60), "no failure seen");
            std::thread::sleep(Duration::from_millis(10));
        };
        let text = e.to_string();
        assert!(matches!(e, BenchError::Service { .. }), "{text}");
        assert!(text.starts_with("Orig: the service of machine"), "{text}");
        // A run reports the dead service, whatever the run itself returned.
        let q = TwoHop {
            k: 2,
            pipelined: false,
        };
        let e = run.run(&[Op::TwoHop(0)], q, 1, "", &r).unwrap_err();
        assert!(matches!(e, BenchError::Service { .. }), "{e}");
    }
}
