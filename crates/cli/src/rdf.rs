//! `locus rdf load` and `locus rdf generate-lubm`: RDF into an embedded
//! cluster in Wukong's layout, and the LUBM generator (`locus-rdf`).

use std::cell::RefCell;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Args, Subcommand};
use indicatif::ProgressBar;
use locus_node::embedded::{self as cluster, EmbeddedFabric};
use locus_node::progress::Reporter;
use locus_rdf::lubm::Lubm;
use locus_rdf::{Dataset, Progress, RdfStore};
use serde::Serialize;

use crate::{CliResult, ClusterFlags};

#[derive(Args, Debug)]
pub struct RdfArgs {
    #[command(subcommand)]
    pub command: RdfCommand,
}

#[derive(Subcommand, Debug)]
pub enum RdfCommand {
    /// Validate an N-Triples or Turtle file (the failing line is named;
    /// nothing is loaded unless all of it is valid), load it in Wukong's
    /// layout into an embedded cluster, or into a running one with
    /// --cluster, and summarise it.
    Load(LoadArgs),
    /// Write a LUBM dataset (UBA's univ-bench data) as N-Triples.
    GenerateLubm(GenerateArgs),
}

#[derive(Args, Debug)]
pub struct LoadArgs {
    /// N-Triples (.nt), Turtle (.ttl), N-Quads (.nq) or TriG (.trig) file.
    pub file: PathBuf,
    /// Load into the running cluster this file describes (`locus cluster
    /// up` writes it) instead of an embedded one; the catalog (dictionary
    /// and statistics) is written to `rdf/` beside it, for `locus sparql
    /// --cluster`.
    #[arg(long = "cluster", value_name = "FILE")]
    pub cluster_file: Option<PathBuf>,
    /// Also write the dictionary (terms to ids) to this file.
    #[arg(long, value_name = "FILE")]
    pub save_dict: Option<PathBuf>,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub cluster: ClusterFlags,
}

#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// Universities (LUBM-N), 1..=65536.
    #[arg(long, default_value_t = 1)]
    pub universities: u32,
    /// Seed of every random choice (same seed, same file).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Output file (`-`: standard output).
    #[arg(long, short)]
    pub out: PathBuf,
}

pub fn run(a: RdfArgs) -> CliResult {
    match a.command {
        RdfCommand::Load(a) => load(a),
        RdfCommand::GenerateLubm(a) => generate(a),
    }
}

/// A [`Progress`] drawn as the reporter's bars.
pub struct Bars {
    reporter: Reporter,
    bar: RefCell<Option<ProgressBar>>,
}

impl Bars {
    pub fn new(reporter: Reporter) -> Bars {
        Bars {
            reporter,
            bar: RefCell::new(None),
        }
    }
}

impl Progress for Bars {
    fn start(&self, what: &str, total: u64) {
        *self.bar.borrow_mut() = Some(self.reporter.bar(total, what));
    }
    fn inc(&self, n: u64) {
        if let Some(b) = &*self.bar.borrow() {
            b.inc(n);
        }
    }
    fn finish(&self) {
        if let Some(b) = self.bar.borrow_mut().take() {
            b.finish_and_clear();
        }
    }
}

/// A file parsed and loaded into an embedded cluster, with the time each step took.
pub struct Loaded {
    pub rdf: RdfStore<EmbeddedFabric>,
    /// The fabric every node counts into.
    pub fabric: EmbeddedFabric,
    /// The nodes holding the data, one per machine (held while the data is used).
    pub _nodes: cluster::Embedded,
    pub parse_s: f64,
    pub load_s: f64,
}

/// Parses `file` (a bar over its bytes) and loads it (a bar over its keys).
pub fn load_file(file: &Path, flags: &ClusterFlags, reporter: Reporter) -> CliResult<Loaded> {
    let c = flags.resolve()?;
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
    let machines = c.cluster.machines;
    let mut nodes = None;
    let rdf = RdfStore::load_into(
        machines,
        d,
        |mut s| -> CliResult<_> {
            s.reclaim_lease_ms = c.store.reclaim_lease_ms;
            s.cache_bytes_max = c.store.cache_mb << 20;
            s.cache_lease_ms = c.store.reclaim_lease_ms.min(60_000);
            let e = cluster::Embedded::create(machines, &c, s)?;
            let stores = e.stores.clone();
            nodes = Some(e);
            Ok(stores)
        },
        &bars,
    )?;
    let load_s = t1.elapsed().as_secs_f64();
    let cluster = nodes.expect("load_into made the cluster");
    let fabric = cluster.fabric.clone();
    fabric.counters().reset();
    Ok(Loaded {
        rdf,
        fabric,
        _nodes: cluster,
        parse_s,
        load_s,
    })
}

#[derive(Serialize)]
struct MachineSummary {
    machine: usize,
    keys: u64,
    value_bytes: u64,
}

#[derive(Serialize)]
struct LoadSummary {
    file: String,
    triples: u64,
    terms: usize,
    predicates_and_types: u32,
    keys: u64,
    neighbour_ids: u64,
    parse_s: f64,
    load_s: f64,
    triples_per_s: f64,
    machines: Vec<MachineSummary>,
}

fn load(a: LoadArgs) -> CliResult {
    if let Some(c) = &a.cluster_file {
        return load_cluster(&a, c);
    }
    let l = load_file(&a.file, &a.cluster, Reporter::terminal())?;
    let r = l.rdf.report();
    if let Some(p) = &a.save_dict {
        l.rdf.dict().save(p)?;
    }
    let s = LoadSummary {
        file: a.file.display().to_string(),
        triples: r.triples,
        terms: l.rdf.dict().len(),
        predicates_and_types: l.rdf.dict().pts(),
        keys: r.keys,
        neighbour_ids: r.entries,
        parse_s: l.parse_s,
        load_s: l.load_s,
        triples_per_s: r.triples as f64 / (l.parse_s + l.load_s).max(1e-9),
        machines: r
            .keys_per_machine
            .iter()
            .zip(&r.value_bytes_per_machine)
            .enumerate()
            .map(|(machine, (&keys, &value_bytes))| MachineSummary {
                machine,
                keys,
                value_bytes,
            })
            .collect(),
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(());
    }
    println!(
        "{}: {} triples, {} terms, {} predicates and classes",
        s.file, s.triples, s.terms, s.predicates_and_types
    );
    println!(
        "parsed in {:.2} s, stored in {:.2} s ({:.0} triples/s); {} keys, {} neighbour ids",
        s.parse_s, s.load_s, s.triples_per_s, s.keys, s.neighbour_ids
    );
    if let Some(p) = &a.save_dict {
        println!("dictionary written to {}", p.display());
    }
    println!("{:>8} {:>12} {:>14}", "machine", "keys", "value bytes");
    for m in &s.machines {
        println!("{:>8} {:>12} {:>14}", m.machine, m.keys, m.value_bytes);
    }
    Ok(())
}

/// `locus rdf load FILE --cluster C`.
fn load_cluster(a: &LoadArgs, cluster_file: &Path) -> CliResult {
    let reporter = if a.json {
        Reporter::quiet()
    } else {
        Reporter::terminal()
    };
    let l = crate::rdf_cluster::load(&a.file, cluster_file, reporter)?;
    if let Some(p) = &a.save_dict {
        locus_rdf::dict::Dictionary::load(&l.catalog_dir.join("dict"))?.save(p)?;
    }
    let s = LoadSummary {
        file: a.file.display().to_string(),
        triples: l.triples,
        terms: l.terms,
        predicates_and_types: l.pts,
        keys: l.keys,
        neighbour_ids: l.entries,
        parse_s: l.parse_s,
        load_s: l.load_s,
        triples_per_s: l.triples as f64 / (l.parse_s + l.load_s).max(1e-9),
        machines: l
            .keys_per_machine
            .iter()
            .enumerate()
            .map(|(machine, &keys)| MachineSummary {
                machine,
                keys,
                value_bytes: 0,
            })
            .collect(),
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(());
    }
    println!(
        "{}: {} triples, {} terms, {} predicates and classes",
        s.file, s.triples, s.terms, s.predicates_and_types
    );
    println!(
        "parsed in {:.2} s, sent to {} servers in {:.2} s ({:.0} triples/s); {} keys, {} neighbour ids",
        s.parse_s,
        s.machines.len(),
        s.load_s,
        s.triples_per_s,
        s.keys,
        s.neighbour_ids
    );
    println!("catalog written to {}", l.catalog_dir.display());
    println!("{:>8} {:>12}", "server", "keys");
    for m in &s.machines {
        println!("{:>8} {:>12}", m.machine, m.keys);
    }
    Ok(())
}

fn generate(a: GenerateArgs) -> CliResult {
    let lubm = Lubm {
        universities: a.universities,
        seed: a.seed,
    };
    lubm.validate()?;
    let bars = Bars::new(Reporter::terminal());
    let t0 = Instant::now();
    let counts = if a.out.as_os_str() == "-" {
        let mut w = std::io::BufWriter::new(std::io::stdout().lock());
        let c = lubm.write(&mut w, &bars)?;
        w.flush()?;
        c
    } else {
        let io = |e: std::io::Error| format!("{}: {e}", a.out.display());
        let tmp = a.out.with_extension("tmp");
        let f = std::fs::File::create(&tmp).map_err(io)?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
        let c = lubm.write(&mut w, &bars)?;
        w.into_inner()
            .map_err(|e| io(e.into_error()))?
            .sync_all()
            .map_err(io)?;
        std::fs::rename(&tmp, &a.out).map_err(io)?;
        c
    };
    eprintln!(
        "LUBM-{} (seed {}): {} triples, {} departments, {} faculty, {} students in {:.1} s",
        a.universities,
        a.seed,
        counts.triples,
        counts.departments,
        counts.faculty.iter().sum::<u64>(),
        counts.undergraduates + counts.graduates,
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}
