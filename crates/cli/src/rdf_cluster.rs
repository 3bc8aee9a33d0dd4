//! RDF on a running cluster: `locus rdf load FILE --cluster C` stores every
//! key's list at its home server with LOAD batches and persists the catalog
//! (dictionary, statistics) beside the cluster file; `locus sparql --cluster
//! C` plans with that catalog and explores through the client protocol.
//!
//! A query runs as Wukong runs it, on the server that homes its start
//! constant: every read of the query is a NEIGHBORS request to that one
//! server, which reads the key with one-sided operations wherever its value
//! lives (at home, migrated, cached or replicated). So the server's monitor
//! sees the query's remote reads, and the coordinator migrates hot values to
//! it, as for any other key. (The exploration itself, joins and filters,
//! runs in this client; each read is one round trip to the start server.)

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use locus_client::proto::{ErrorCode, Reply, Request};
use locus_client::{Client, ClientConfig, ClientError};
use locus_node::progress::Reporter;
use locus_rdf::sparql::Source;
use locus_rdf::{catalog, Catalog, Dataset, Progress, RdfError};
use locus_store::VertexId;

use crate::rdf::Bars;
use crate::CliResult;

/// Keys per LOAD batch, and neighbour ids per batch (well inside a frame).
const BATCH_KEYS_MAX: usize = 16 << 10;
const BATCH_IDS_MAX: usize = 1 << 20;

/// Reads lists through one server of a cluster (the one a query runs on).
#[derive(Clone)]
pub struct ClientSource {
    client: Arc<Client>,
    server: u8,
}

impl ClientSource {
    pub fn new(client: Arc<Client>, server: u8) -> ClientSource {
        ClientSource { client, server }
    }
}

impl Source for ClientSource {
    fn home(&mut self, key: VertexId) -> usize {
        self.client.home(key) as usize
    }

    fn lists(
        &mut self,
        keys: &[VertexId],
        out: &mut Vec<u32>,
        ends: &mut Vec<usize>,
    ) -> locus_rdf::Result<()> {
        match keys {
            [] => Ok(()),
            [key] => {
                self.list(*key, out)?;
                ends.push(out.len());
                Ok(())
            }
            _ => self.lists_at_once(keys, out, ends),
        }
    }

    fn list(&mut self, key: VertexId, out: &mut Vec<u32>) -> locus_rdf::Result<()> {
        let req = Request::Neighbors { vertex: key, k: 0 };
        match self.client.call(self.server, &req, None) {
            Ok(Reply::Neighbors(ids)) => {
                let from = out.len();
                out.extend(ids);
                // LOAD merges keep first-seen order; exploration binary-searches.
                if !out[from..].is_sorted() {
                    out[from..].sort_unstable();
                }
                Ok(())
            }
            Err(ClientError::Server {
                code: ErrorCode::UnknownVertex,
                ..
            }) => Ok(()),
            Ok(other) => Err(RdfError::Source {
                key,
                message: format!("server {} answered {other:?}", self.server),
            }),
            Err(e) => Err(RdfError::Source {
                key,
                message: e.to_string(),
            }),
        }
    }
}

impl ClientSource {
    /// The lists of `keys` in one LISTS round trip per
    /// [`locus_client::proto::LISTS_VERTICES_MAX`] keys (the server reads
    /// them with its reads posted together), each sorted as `list` sorts.
    fn lists_at_once(
        &mut self,
        keys: &[VertexId],
        out: &mut Vec<u32>,
        ends: &mut Vec<usize>,
    ) -> locus_rdf::Result<()> {
        let got = self
            .client
            .lists(self.server, keys)
            .map_err(|e| RdfError::Source {
                key: keys[0],
                message: e.to_string(),
            })?;
        for l in got {
            let from = out.len();
            out.extend(l.unwrap_or_default());
            if !out[from..].is_sorted() {
                out[from..].sort_unstable();
            }
            ends.push(out.len());
        }
        Ok(())
    }
}

/// One LOAD request's vertices and lists.
type Batch = Vec<(u32, Vec<u32>)>;

/// What a load into a cluster did.
pub struct ClusterLoad {
    pub triples: u64,
    pub terms: usize,
    pub pts: u32,
    pub keys: u64,
    pub entries: u64,
    pub parse_s: f64,
    pub load_s: f64,
    pub keys_per_machine: Vec<u64>,
    pub catalog_dir: std::path::PathBuf,
}

/// Parses `file` whole (nothing is sent unless every line is valid), lays it
/// out by the cluster's slots, sends every key's list to its home in
/// LOAD batches, then writes the catalog beside `cluster_file`. A cluster
/// that already has a catalog is refused before anything is sent.
pub fn load(file: &Path, cluster_file: &Path, reporter: Reporter) -> CliResult<ClusterLoad> {
    let client = Client::from_file(cluster_file, ClientConfig::default())?;
    // The slot table names every server (learnt past the file's) and the slot count.
    let slots = client.slot_table()?.slots();
    let machines = client.machines();
    let dir = Catalog::dir_beside(cluster_file);
    if dir.join("catalog.json").exists() {
        return Err(format!(
            "{}: this cluster already holds an RDF dataset (its catalog is there); Locus keeps one RDF dataset per cluster, so start another cluster for this file",
            dir.display()
        )
        .into());
    }
    let bytes = std::fs::metadata(file)
        .map_err(|e| format!("{}: {e}", file.display()))?
        .len();
    let bars = Bars::new(reporter);
    let t0 = Instant::now();
    bars.start("parsing", bytes);
    let d = Dataset::parse_file(file, &bars);
    bars.finish();
    let d = d?;
    let parse_s = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let (cat, lists) = catalog::build(d, slots)?;
    // Per server: the batch being filled and its neighbour ids.
    let mut pending: Vec<(Batch, usize)> = vec![(Vec::new(), 0); machines];
    let mut keys_per_machine = vec![0u64; machines];
    bars.start("storing keys", lists.groups.len() as u64);
    let total = lists.groups.len();
    let sent = std::cell::Cell::new(0usize);
    let send = |m: usize, batch: Batch| -> CliResult {
        let n = batch.len();
        client.load_batch(m as u8, batch, None).map_err(|e| {
            format!(
                "{e}\nthe load stopped after {} of {total} keys and no catalog was written; LOAD merges lists, so running the same command again completes it",
                sent.get()
            )
        })?;
        sent.set(sent.get() + n);
        bars.inc(n as u64);
        Ok(())
    };
    for g in 0..lists.groups.len() {
        let (key, ids) = lists.group(g);
        let m = client.home(key) as usize;
        keys_per_machine[m] += 1;
        let ids: Vec<u32> = ids.collect();
        let (batch, batch_ids) = &mut pending[m];
        *batch_ids += ids.len();
        batch.push((key, ids));
        if batch.len() >= BATCH_KEYS_MAX || *batch_ids >= BATCH_IDS_MAX {
            *batch_ids = 0;
            send(m, std::mem::take(batch))?;
        }
    }
    for (m, (batch, _)) in pending.into_iter().enumerate() {
        if !batch.is_empty() {
            send(m, batch)?;
        }
    }
    bars.finish();
    cat.save(&dir)?;
    Ok(ClusterLoad {
        triples: lists.triples,
        terms: cat.dict().len(),
        pts: cat.dict().pts(),
        keys: lists.groups.len() as u64,
        entries: lists.pairs.len() as u64,
        parse_s,
        load_s: t1.elapsed().as_secs_f64(),
        keys_per_machine,
        catalog_dir: dir,
    })
}

/// The catalog and a client of the cluster described by `cluster_file`
/// (any number of servers: the data is laid out by slot; the client has
/// fetched the slot table, so it knows every server added since the file).
pub fn open(cluster_file: &Path) -> CliResult<(Catalog, Arc<Client>)> {
    let client = Client::from_file(cluster_file, ClientConfig::default())?;
    let dir = Catalog::dir_beside(cluster_file);
    if !dir.join("catalog.json").exists() {
        return Err(format!(
            "{}: no RDF catalog beside this cluster file; load data first with `locus rdf load FILE.nt --cluster {}`",
            dir.display(),
            cluster_file.display()
        )
        .into());
    }
    let cat = Catalog::load(&dir)?;
    let slots = client.slot_table()?.slots();
    if slots != cat.layout().slots() {
        return Err(format!(
            "{}: the data was laid out for {} store slots, the cluster has {slots}; load it again into this cluster",
            dir.display(),
            cat.layout().slots()
        )
        .into());
    }
    Ok((cat, Arc::new(client)))
}
