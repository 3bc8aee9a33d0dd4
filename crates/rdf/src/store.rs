//! [`RdfStore`]: a [`Dataset`] stored in Wukong's layout ([`crate::layout`])
//! in an unchanged [`locus_store::Store`].
//!
//! Loading is all or nothing: every key's list is built and the store sized
//! and checked for room first, then each list is PUT by the key's home
//! machine (the keys of term `t` all live in its store slot, so on the
//! slot's owner, [`crate::layout`]). Values are plain store values, so
//! migration, slot moves, the location cache and replicas treat them like
//! any other.

use locus_fabric::Fabric;
use locus_store::{home_of, Store, StoreConfig, Stores, VertexId, Worker};

pub use crate::catalog::Stats;
use crate::catalog::{build, Catalog, Lists};
use crate::dict::Dictionary;
use crate::layout::Layout;
use crate::ntriples::Dataset;
use crate::{Progress, RdfError, Result};

/// What a load stored.
#[derive(Debug, Clone, Default)]
pub struct LoadReport {
    /// Triples (after removing duplicates).
    pub triples: u64,
    /// Store keys written (normal and index vertices).
    pub keys: u64,
    /// Neighbour ids written over all keys.
    pub entries: u64,
    /// Keys per machine.
    pub keys_per_machine: Vec<u64>,
    /// Value bytes per machine.
    pub value_bytes_per_machine: Vec<u64>,
}

/// RDF data in a store.
pub struct RdfStore<F: Fabric> {
    store: Stores<F>,
    catalog: Catalog,
    report: LoadReport,
    /// Every key written, sorted.
    keys: Vec<VertexId>,
}

impl<F: Fabric> RdfStore<F> {
    /// Stores `d` on `fabric`'s machines. The store is sized for the data;
    /// `tweak` may then change its settings (cache, replicas, ...).
    pub fn load(
        fabric: F,
        d: Dataset,
        tweak: impl FnOnce(&mut StoreConfig),
        progress: &dyn Progress,
    ) -> Result<RdfStore<F>> {
        let machines = fabric.machine_count();
        Self::load_into(
            machines,
            d,
            |mut config| {
                tweak(&mut config);
                Ok(Store::create(fabric, config)?.into())
            },
            progress,
        )
    }

    /// Stores `d` on `machines` machines, in the stores `make` creates from
    /// the settings sized for the data (an embedded cluster's nodes); fails
    /// with `make`'s error type.
    pub fn load_into<E: From<RdfError>>(
        machines: usize,
        d: Dataset,
        make: impl FnOnce(StoreConfig) -> std::result::Result<Stores<F>, E>,
        progress: &dyn Progress,
    ) -> std::result::Result<RdfStore<F>, E> {
        // The store is made with the default slot count; the layout packs by it.
        let slots = StoreConfig::default().slots;
        let (catalog, lists) = build(d, slots)?;
        let part_max = StoreConfig::default().part_neighbors_max as u64;
        let mut report = LoadReport {
            triples: lists.triples,
            keys: lists.groups.len() as u64,
            entries: lists.pairs.len() as u64,
            keys_per_machine: vec![0; machines],
            value_bytes_per_machine: vec![0; machines],
        };
        let mut entries_per_machine = vec![0u64; machines];
        for &(i, j) in &lists.groups {
            let m = home_of(lists.pairs[i].0, machines) as usize;
            report.keys_per_machine[m] += ((j - i) as u64).div_ceil(part_max);
            entries_per_machine[m] += (j - i) as u64;
        }
        let max_keys = report.keys_per_machine.iter().copied().max().unwrap_or(0);
        let max_entries = entries_per_machine.iter().copied().max().unwrap_or(0);
        // Sized for the fullest machine, as if every machine were that full.
        let config = StoreConfig::for_graph(
            max_keys * machines as u64,
            max_entries * machines as u64,
            machines,
            part_max as u32,
        );
        let store = make(config)?;
        if store.config().slots != slots {
            return Err(RdfError::Layout(format!(
                "the store was made with {} slots, the data was laid out for {slots}: keep the default slot count",
                store.config().slots
            ))
            .into());
        }
        Ok(Self::fill(catalog, lists, store, report, progress)?)
    }

    /// Puts every key's list of `lists` into `store` (its room checked first).
    fn fill(
        catalog: Catalog,
        lists: Lists,
        store: Stores<F>,
        mut report: LoadReport,
        progress: &dyn Progress,
    ) -> Result<RdfStore<F>> {
        let Lists { pairs, groups, .. } = lists;
        for &(i, j) in &groups {
            let m = store.owner(pairs[i].0) as usize;
            report.value_bytes_per_machine[m] += store.value_bytes_for_degree((j - i) as u64);
        }
        check_room(&store, &report)?;
        let mut workers = store.workers()?;
        progress.start("storing keys", groups.len() as u64);
        let mut list = Vec::new();
        for (n, &(i, j)) in groups.iter().enumerate() {
            let key = pairs[i].0;
            list.clear();
            list.extend(pairs[i..j].iter().map(|p| p.1));
            workers[store.owner(key) as usize].put(key, &list)?;
            if n % 4096 == 4095 {
                progress.inc(4096);
            }
        }
        progress.inc(groups.len() as u64 % 4096);
        progress.finish();
        let keys = groups.iter().map(|&(i, _)| pairs[i].0).collect();
        Ok(RdfStore {
            keys,
            store,
            catalog,
            report,
        })
    }

    /// The machine homing term `id`'s keys now (its store slot's owner):
    /// where a query starting from `id` reads them locally.
    pub fn home(&self, id: u32) -> usize {
        let l = self.layout();
        self.store.owner(l.index(l.slot(id), 0, crate::layout::OUT)) as usize
    }

    /// The store underneath.
    pub fn store(&self) -> &Stores<F> {
        &self.store
    }
    /// The dictionary, layout and statistics queries plan and decode with.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }
    /// The dictionary.
    pub fn dict(&self) -> &Dictionary {
        self.catalog.dict()
    }
    /// The key layout.
    pub fn layout(&self) -> &Layout {
        self.catalog.layout()
    }
    /// The pt of `rdf:type`, if the data has type triples.
    pub fn type_pt(&self) -> Option<u32> {
        self.catalog.type_pt()
    }
    /// Sizes for planning.
    pub fn stats(&self) -> &Stats {
        self.catalog.stats()
    }
    /// What the load stored.
    pub fn report(&self) -> &LoadReport {
        &self.report
    }
    /// Every key written (normal and index vertices), sorted.
    pub fn keys(&self) -> &[VertexId] {
        &self.keys
    }
    /// The catalog, for an update.
    pub(crate) fn catalog_mut(&mut self) -> &mut Catalog {
        &mut self.catalog
    }
    /// The statistics, for an update.
    pub(crate) fn stats_mut(&mut self) -> &mut Stats {
        self.catalog.parts_mut().3
    }
    /// Records `key` as written (an update's first entry of it).
    pub(crate) fn note_key(&mut self, key: VertexId) {
        self.catalog.note_key(key);
        if let Err(i) = self.keys.binary_search(&key) {
            self.keys.insert(i, key);
        }
    }
    /// One worker per machine, for a thread that acts as every machine in turn.
    pub fn workers(&self) -> Result<Vec<Worker<F>>> {
        Ok(self.store.workers()?)
    }
}

/// Refuses a load that would not fit, before anything is written.
fn check_room<F: Fabric>(store: &Stores<F>, r: &LoadReport) -> Result<()> {
    let c = store.config();
    // The allocator keeps its first units; a quarter of the key slots stays free for hashing.
    let bytes_max = c.value_region_bytes.saturating_sub(64);
    let keys_max = (c.buckets_per_machine + c.overflow_buckets_per_machine)
        * locus_store::table::KEY_SLOTS
        * 3
        / 4;
    for (m, (&keys, &bytes)) in r
        .keys_per_machine
        .iter()
        .zip(&r.value_bytes_per_machine)
        .enumerate()
    {
        if bytes > bytes_max || keys > keys_max {
            return Err(RdfError::Layout(format!(
                "machine {m} needs {keys} keys and {bytes} value bytes, its store holds {keys_max} keys and {bytes_max} bytes; raise value_region_bytes or buckets_per_machine"
            )));
        }
    }
    Ok(())
}
