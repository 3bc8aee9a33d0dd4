//! The SPARQL benchmark of Pragh 6.5 (Wukong+M, Fig. 16): LUBM in Wukong's
//! layout on an embedded 8-machine cluster, a mixed workload of six light
//! query classes whose start constants are drawn Zipf(0.99), and the schemes
//! of Pragh 6 side by side (Orig is Wukong as published: hash placement, no
//! cache; Shard, Split, Split+Cache, and Locus's Replica; Ideal and Cache
//! for reference).
//!
//! A run of a scheme ([`run`]'s inner loop, in `scheme.rs`): load the data
//! into a fresh store shaped by the scheme, start its services and, for the
//! schemes that migrate, the monitor/coordinator/executor driver; warm up
//! with the warm-up sequence until a round of at least one and a half
//! monitoring intervals approves nothing new; then measure the measured
//! sequence, repeated until it lasts the settings' measuring time. Runs are
//! interleaved (every scheme once, then again) and each figure is reported
//! as the median of the runs with min and max.
//!
//! The six classes are this benchmark's own templates in the style of
//! Wukong's emulator mix: Wukong's light LUBM queries L4, L5 and L6 with
//! their constant drawn, and three one-to-two-hop lookups from a course, a
//! student and a publication. Every class starts from its constant, so a
//! query runs on the machine that homes the constant and reads the rest
//! one-sidedly, as Wukong runs light queries.

mod scheme;

use std::collections::HashSet;
use std::path::PathBuf;

use locus_rdf::lubm::Lubm;
use locus_rdf::Dataset;
use locus_workloads::zipf::Zipf;
use oxrdf::{NamedNode, Term};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use crate::config::Config;
use crate::output::{MachineMeta, OutDir, Spread};
use crate::pragh::Scheme;
use crate::{BenchError, Preset, Reporter, Result};

const RDF_TYPE: &str = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type";
const UB: &str = "http://swat.cse.lehigh.edu/onto/univ-bench.owl#";

/// One query class of the mix: a template whose `START` is a constant
/// drawn from the class's candidates.
#[derive(Debug, Clone, Copy)]
pub struct Class {
    /// Short name in tables.
    pub name: &'static str,
    /// The candidates: instances of this univ-bench class ...
    pub start_type: &'static str,
    /// ... that are the object (true) or the subject of this predicate.
    pub via: &'static str,
    /// Whether the start is the object of `via`.
    pub start_is_object: bool,
    /// The query (prefixes `rdf:` and `ub:` are declared for it).
    pub text: &'static str,
}

/// The mix, in equal shares.
pub const CLASSES: [Class; 6] = [
    Class {
        name: "L4",
        start_type: "Department",
        via: "worksFor",
        start_is_object: true,
        text: "SELECT ?X ?Y1 ?Y2 ?Y3 WHERE { ?X ub:worksFor <START> . ?X rdf:type ub:FullProfessor . ?X ub:name ?Y1 . ?X ub:emailAddress ?Y2 . ?X ub:telephone ?Y3 }",
    },
    Class {
        name: "L5",
        start_type: "Department",
        via: "subOrganizationOf",
        start_is_object: true,
        text: "SELECT ?X WHERE { ?X ub:subOrganizationOf <START> . ?X rdf:type ub:ResearchGroup }",
    },
    Class {
        name: "L6",
        start_type: "University",
        via: "subOrganizationOf",
        start_is_object: true,
        text: "SELECT ?X ?Y WHERE { ?Y ub:subOrganizationOf <START> . ?Y rdf:type ub:Department . ?X ub:worksFor ?Y . ?X rdf:type ub:FullProfessor }",
    },
    Class {
        name: "course",
        start_type: "Course",
        via: "takesCourse",
        start_is_object: true,
        text: "SELECT ?X ?N WHERE { ?X ub:takesCourse <START> . ?X ub:name ?N }",
    },
    Class {
        name: "advisor",
        start_type: "GraduateStudent",
        via: "advisor",
        start_is_object: false,
        text: "SELECT ?Y ?N ?E WHERE { <START> ub:advisor ?Y . ?Y ub:name ?N . ?Y ub:emailAddress ?E }",
    },
    Class {
        name: "authors",
        start_type: "Publication",
        via: "publicationAuthor",
        start_is_object: false,
        text: "SELECT ?A ?N WHERE { <START> ub:publicationAuthor ?A . ?A ub:name ?N }",
    },
];

impl Class {
    /// The query text with `start` as its constant.
    pub fn query(&self, start: &str) -> String {
        format!(
            "PREFIX rdf: <{RDF_TYPE_NS}> PREFIX ub: <{UB}> {}",
            self.text.replace("START", start),
            RDF_TYPE_NS = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
        )
    }
}

/// Settings of one run, from a [`Preset`] and overrides.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    /// The preset the settings came from.
    pub preset: Preset,
    /// LUBM universities.
    pub universities: u32,
    /// Machines of every scheme but Ideal (Pragh: 8).
    pub machines: usize,
    /// Worker threads.
    pub threads: usize,
    /// Queries per warm-up round and per measured sequence.
    pub queries: usize,
    /// The measured sequence is repeated until it lasts this long.
    pub measure_s_min: f64,
    /// Warm-up gives up after this long.
    pub warm_s_max: f64,
    /// The monitoring interval (Pragh 6: 10 s).
    pub interval_ms: u64,
    /// Zipf skew of the start constants (Pragh 6.5: 0.99).
    pub theta: f64,
    /// Interleaved runs of every scheme (medians with min and max).
    pub runs: usize,
    /// Data and workload seed.
    pub seed: u64,
}

impl Settings {
    /// quick: LUBM-2, 1 s interval, a few minutes here; full: LUBM-20 and
    /// Pragh's 10 s interval.
    pub fn new(preset: Preset, seed: u64) -> Settings {
        let threads = locus_fabric::pool::default_threads();
        match preset {
            Preset::Quick => Settings {
                preset,
                universities: 2,
                machines: 8,
                threads,
                queries: 20_000,
                measure_s_min: 2.0,
                warm_s_max: 30.0,
                interval_ms: 1_000,
                theta: 0.99,
                runs: 3,
                seed,
            },
            Preset::Full => Settings {
                preset,
                universities: 20,
                machines: 8,
                threads,
                queries: 100_000,
                measure_s_min: 10.0,
                warm_s_max: 120.0,
                interval_ms: 10_000,
                theta: 0.99,
                runs: 3,
                seed,
            },
        }
    }

    /// Rejects settings that cannot work, naming the flag.
    pub fn validate(&self) -> Result<()> {
        Lubm {
            universities: self.universities,
            seed: self.seed,
        }
        .validate()
        .map_err(|e| BenchError::setting("--universities", self.universities, e.to_string()))?;
        if self.threads == 0 {
            return Err(BenchError::setting("--threads", 0, "must be positive"));
        }
        if self.queries == 0 {
            return Err(BenchError::setting("--queries", 0, "must be positive"));
        }
        if self.runs == 0 || self.runs > 99 {
            return Err(BenchError::setting("--runs", self.runs, "must be 1..=99"));
        }
        if !(self.theta > 0.0 && self.theta < 1.0) {
            return Err(BenchError::setting(
                "--theta",
                self.theta,
                "must be in (0, 1)",
            ));
        }
        if !(self.warm_s_max >= 0.0 && self.warm_s_max <= 3600.0) {
            return Err(BenchError::setting(
                "--warm-s-max",
                self.warm_s_max,
                "must be in [0, 3600]",
            ));
        }
        Ok(self.config().validate()?)
    }

    /// The cluster configuration every scheme starts from.
    pub fn config(&self) -> Config {
        let mut c = Config::default();
        c.cluster.threads = self.threads;
        c.cluster.machines = self.machines;
        c.store.cache_mb = 0;
        c
    }
}

/// One scheme's run.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The scheme.
    pub scheme: String,
    /// Which interleaved run (0-based).
    pub run: usize,
    /// Queries per second over the measured part.
    pub throughput_qps: f64,
    /// Query latency percentiles, microseconds.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Remote one-sided operations / all one-sided operations (Pragh's remote access rate).
    pub remote_rate: f64,
    /// Values read from another machine than the query's / all values read.
    pub remote_gets: f64,
    /// Store values read per query.
    pub reads_per_query: f64,
    /// Rows found per query.
    pub rows_per_query: f64,
    /// Share of keys whose value is held away from the key's machine at the
    /// end (Split schemes), or of keys moved with their shards (Shard).
    pub migrated_fraction: f64,
    /// Values (Split) or keys (Shard) moved in all.
    pub values_moved: u64,
    /// Bytes moved in all.
    pub bytes_moved: u64,
    /// Seconds of warm-up.
    pub warm_s: f64,
    /// Seconds loading the data into the scheme's store.
    pub load_s: f64,
    /// Queries measured.
    pub queries: u64,
    /// Machines.
    pub machines: usize,
    /// Median latency per class, microseconds (in [`CLASSES`] order).
    pub class_p50_us: Vec<f64>,
}

/// One scheme over the runs.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The scheme.
    pub scheme: String,
    /// Queries per second.
    pub throughput_qps: Spread,
    /// Median latency, microseconds.
    pub p50_us: Spread,
    /// 99th percentile latency, microseconds.
    pub p99_us: Spread,
    /// Remote one-sided operations / all.
    pub remote_rate: Spread,
    /// Values read from another machine / all values read.
    pub remote_gets: Spread,
    /// Keys away from their machine (Split schemes) or moved (Shard).
    pub migrated_fraction: Spread,
    /// Median throughput over Orig's median.
    pub vs_orig: f64,
    /// Median throughput over Ideal's median.
    pub vs_ideal: f64,
}

/// What the benchmark measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The settings.
    pub settings: Settings,
    /// Triples loaded (LUBM-N, seed).
    pub triples: u64,
    /// Start candidates per class (in [`CLASSES`] order).
    pub candidates: Vec<u64>,
    /// Every run of every scheme, in the order they ran.
    pub rows: Vec<Row>,
    /// Medians with min and max, per scheme.
    pub summary: Vec<Summary>,
    /// The machine it ran on.
    pub machine: MachineMeta,
}

/// The workload: each class's template constant and candidates, and the
/// warm-up and measured sequences of (class, start id).
pub(crate) struct Workload {
    /// (template's constant, candidates) per class.
    pub(crate) classes: Vec<(String, Vec<u32>)>,
    pub(crate) warm: Vec<(u8, u32)>,
    pub(crate) measure: Vec<(u8, u32)>,
}

/// Instances of `class` that are the object (or subject) of `via`, sorted.
fn candidates(d: &Dataset, c: &Class) -> Vec<u32> {
    let id = |iri: &str| {
        NamedNode::new(iri)
            .ok()
            .and_then(|n| d.dict.id(&Term::NamedNode(n)))
    };
    let (Some(ty), Some(class), Some(via)) = (
        id(RDF_TYPE).and_then(|t| d.dict.predicate_pt(t)),
        id(&format!("{UB}{}", c.start_type)),
        id(&format!("{UB}{}", c.via)).and_then(|p| d.dict.predicate_pt(p)),
    ) else {
        return Vec::new();
    };
    let typed: HashSet<u32> = d
        .triples
        .iter()
        .filter(|t| t[1] == ty && t[2] == class)
        .map(|t| t[0])
        .collect();
    let mut out: Vec<u32> = d
        .triples
        .iter()
        .filter(|t| t[1] == via)
        .map(|t| if c.start_is_object { t[2] } else { t[0] })
        .filter(|v| typed.contains(v))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The mix over `d`: each query draws its class uniformly, then its start
/// Zipf(theta) over the class's candidates, ranked in a seeded random order
/// (so popularity does not follow ids and therefore homes).
pub(crate) fn workload(d: &Dataset, p: &Settings) -> Result<Workload> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(p.seed ^ 0x5a5a);
    let mut classes = Vec::new();
    let mut zipfs = Vec::new();
    for c in &CLASSES {
        let mut cands = candidates(d, c);
        if cands.is_empty() {
            return Err(BenchError::Measurement {
                experiment: "sparql",
                what: format!(
                    "class {}: no ub:{} is the {} of ub:{} in the data",
                    c.name,
                    c.start_type,
                    if c.start_is_object {
                        "object"
                    } else {
                        "subject"
                    },
                    c.via
                ),
            });
        }
        cands.shuffle(&mut rng);
        let first = match d.dict.term(cands[0]) {
            Some(Term::NamedNode(n)) => n.as_str().to_string(),
            other => {
                return Err(BenchError::Measurement {
                    experiment: "sparql",
                    what: format!("class {}: start {other:?} is not an IRI", c.name),
                })
            }
        };
        zipfs.push(Zipf::new(cands.len() as u64, p.theta)?);
        classes.push((first, cands));
    }
    let draw = |n: usize, rng: &mut Xoshiro256PlusPlus| -> Vec<(u8, u32)> {
        (0..n)
            .map(|_| {
                let c = rng.gen_range(0..CLASSES.len());
                let rank = zipfs[c].sample(rng) as usize;
                (c as u8, classes[c].1[rank])
            })
            .collect()
    };
    let warm = draw(p.queries, &mut rng);
    let measure = draw(p.queries, &mut rng);
    Ok(Workload {
        classes,
        warm,
        measure,
    })
}

/// Generates the data, then runs every scheme of `only` (Fig. 16's five
/// and Ideal and Cache when empty) `p.runs` times, interleaved.
pub fn run(p: &Settings, only: &[Scheme], r: &Reporter) -> Result<Report> {
    p.validate()?;
    let mut machine = MachineMeta::start();
    r.note(format!(
        "generating LUBM-{} (seed {}) ...",
        p.universities, p.seed
    ));
    let (bytes, _) = Lubm {
        universities: p.universities,
        seed: p.seed,
    }
    .to_vec()?;
    let d = Dataset::parse(bytes.as_slice(), "LUBM", &())?;
    drop(bytes);
    let w = workload(&d, p)?;
    let schemes: Vec<Scheme> = Scheme::ALL
        .into_iter()
        .filter(|s| only.is_empty() || only.contains(s))
        .collect();
    let mut rows = Vec::new();
    for run in 0..p.runs {
        for &s in &schemes {
            r.note(format!("run {} of {}: {} ...", run + 1, p.runs, s.name()));
            let mut row = scheme::run_scheme(s, &d, &w, p, r).map_err(|e| e.in_scheme(s.name()))?;
            row.run = run;
            rows.push(row);
        }
    }
    machine.finish();
    Ok(Report {
        settings: p.clone(),
        triples: d.triples.len() as u64,
        candidates: w.classes.iter().map(|c| c.1.len() as u64).collect(),
        summary: summarize(&rows, &schemes),
        rows,
        machine,
    })
}

/// Medians with min and max per scheme, and the ratios of medians.
pub fn summarize(rows: &[Row], schemes: &[Scheme]) -> Vec<Summary> {
    let of =
        |s: &str, f: &dyn Fn(&Row) -> f64| Spread::of(rows.iter().filter(|r| r.scheme == s).map(f));
    let median_qps = |s: Scheme| {
        schemes
            .contains(&s)
            .then(|| of(s.name(), &|r| r.throughput_qps).median)
    };
    let (orig, ideal) = (median_qps(Scheme::Orig), median_qps(Scheme::Ideal));
    schemes
        .iter()
        .map(|s| {
            let qps = of(s.name(), &|r| r.throughput_qps);
            Summary {
                scheme: s.name().into(),
                vs_orig: orig.map_or(0.0, |o| qps.median / o),
                vs_ideal: ideal.map_or(0.0, |i| qps.median / i),
                throughput_qps: qps,
                p50_us: of(s.name(), &|r| r.p50_us),
                p99_us: of(s.name(), &|r| r.p99_us),
                remote_rate: of(s.name(), &|r| r.remote_rate),
                remote_gets: of(s.name(), &|r| r.remote_gets),
                migrated_fraction: of(s.name(), &|r| r.migrated_fraction),
            }
        })
        .collect()
}

impl Report {
    /// Writes `sparql-mix.json` (every run and the summary),
    /// `sparql-mix.meta.json` and the two PNGs of Fig. 16 into `dir`.
    pub fn write(&self, dir: &std::path::Path) -> Result<Vec<PathBuf>> {
        let mut out = OutDir::create(dir)?;
        out.json(
            "sparql-mix.json",
            &serde_json::json!({ "summary": self.summary, "rows": self.rows }),
        )?;
        let c = self.settings.config();
        let classes: Vec<_> = CLASSES
            .iter()
            .zip(&self.candidates)
            .map(|(c, n)| serde_json::json!({ "class": c.name, "query": c.text, "candidates": n }))
            .collect();
        out.json(
            "sparql-mix.meta.json",
            &serde_json::json!({
                "experiment": "sparql-mix",
                "settings": self.settings,
                "triples": self.triples,
                "classes": classes,
                "latency_ns": c.cluster.latency_ns,
                "machine": self.machine,
            }),
        )?;
        let groups: Vec<String> = self.summary.iter().map(|s| s.scheme.clone()).collect();
        let bars = |f: &dyn Fn(&Spread) -> f64, get: &dyn Fn(&Summary) -> Spread| {
            self.summary
                .iter()
                .map(|s| f(&get(s)))
                .collect::<Vec<f64>>()
        };
        let path = out.path("sparql-mix-throughput.png");
        locus_plot::BarChart {
            title: "SPARQL mix on LUBM: throughput by scheme (Pragh Fig. 16a; median, min, max)"
                .into(),
            y_label: "queries per second".into(),
            groups: groups.clone(),
            series: vec![
                ("median".into(), bars(&|s| s.median, &|s| s.throughput_qps)),
                ("min".into(), bars(&|s| s.min, &|s| s.throughput_qps)),
                ("max".into(), bars(&|s| s.max, &|s| s.throughput_qps)),
            ],
        }
        .write_png(&path)?;
        out.wrote(path);
        let path = out.path("sparql-mix-remote.png");
        locus_plot::BarChart {
            title: "SPARQL mix on LUBM: remote accesses by scheme (Pragh Fig. 16b; median)".into(),
            y_label: "remote one-sided operations (%)".into(),
            groups,
            series: vec![(
                "remote (%)".into(),
                bars(&|s| s.median * 100.0, &|s| s.remote_rate),
            )],
        }
        .write_png(&path)?;
        out.wrote(path);
        Ok(out.written().to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lubm1() -> Dataset {
        let (bytes, _) = Lubm {
            universities: 1,
            seed: 1,
        }
        .to_vec()
        .unwrap();
        Dataset::parse(bytes.as_slice(), "LUBM", &()).unwrap()
    }

    #[test]
    fn every_class_has_candidates_and_the_mix_is_skewed_and_deterministic() {
        let d = lubm1();
        let mut p = Settings::new(Preset::Quick, 5);
        p.queries = 6_000;
        let w = workload(&d, &p).unwrap();
        let again = workload(&d, &p).unwrap();
        assert_eq!(w.measure, again.measure);
        assert_ne!(w.warm, w.measure);
        for (c, (_, cands)) in w.classes.iter().enumerate() {
            assert!(!cands.is_empty(), "class {}", CLASSES[c].name);
            let drawn: Vec<u32> = w
                .measure
                .iter()
                .filter(|q| q.0 as usize == c)
                .map(|q| q.1)
                .collect();
            // Equal shares: about 1,000 of 6,000 each.
            assert!((700..1300).contains(&drawn.len()), "{}", drawn.len());
            assert!(drawn.iter().all(|s| cands.contains(s)));
            // Zipf: the most drawn start takes far more than a uniform share.
            if cands.len() >= 50 {
                let mut counts = std::collections::HashMap::new();
                for s in &drawn {
                    *counts.entry(s).or_insert(0usize) += 1;
                }
                let top = counts.values().max().copied().unwrap_or(0);
                assert!(
                    top * cands.len() > drawn.len() * 5,
                    "class {}: top {top} of {} over {} candidates",
                    CLASSES[c].name,
                    drawn.len(),
                    cands.len()
                );
            }
        }
    }
}
