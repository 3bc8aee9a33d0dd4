//! `locus sparql`: load N-Triples into an embedded cluster, or open a
//! running cluster's RDF data (`--cluster`), and answer SPARQL queries by
//! graph exploration inside an algebra evaluator (`locus_rdf::sparql`):
//! SELECT as a table or W3C JSON, ASK as true/false, CONSTRUCT and
//! DESCRIBE as N-Triples.

use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, Subcommand};
use locus_fabric::counting::Locality;
use locus_node::progress::Reporter;
use locus_rdf::sparql::{results, Answer, Engine, Trace};

use crate::{CliResult, ClusterFlags};

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct SparqlArgs {
    #[command(subcommand)]
    pub command: Option<SparqlCommand>,
    /// N-Triples file (or Turtle .ttl, N-Quads .nq, TriG .trig) to load into
    /// an embedded cluster.
    #[arg(
        long,
        value_name = "FILE.nt",
        required_unless_present = "cluster_file",
        conflicts_with = "cluster_file"
    )]
    pub data: Option<PathBuf>,
    /// Query the RDF data of the running cluster this file describes
    /// (loaded with `locus rdf load FILE --cluster C`) instead of --data.
    #[arg(long = "cluster", value_name = "FILE")]
    pub cluster_file: Option<PathBuf>,
    /// The query: a file holding it, or the SPARQL text itself. May be
    /// repeated: the data is loaded once and each query answered in turn.
    #[arg(long, value_name = "FILE|TEXT", required = true)]
    pub query: Vec<String>,
    /// A SPARQL update (a file holding it, or the text itself) run on the
    /// embedded store before the queries (--data only; the file is not
    /// written). May be repeated.
    #[arg(long, value_name = "FILE|TEXT", conflicts_with = "cluster_file")]
    pub update: Vec<String>,
    /// Print W3C SPARQL 1.1 Query Results JSON instead of a table (with
    /// several --query, a JSON array of one such document per query).
    #[arg(long)]
    pub json: bool,
    /// Also print the plan: each step's pattern and the rows after it, the
    /// start machine, and the store reads (local and remote) it took.
    #[arg(long)]
    pub explain: bool,
    #[command(flatten)]
    pub cluster: ClusterFlags,
}

#[derive(Subcommand, Debug)]
pub enum SparqlCommand {
    /// Serve the SPARQL 1.1 Protocol over HTTP at /sparql: query by GET or
    /// POST, update by POST; results as JSON, XML, CSV or TSV and graphs as
    /// Turtle or N-Triples, by the Accept header or ?format=.
    Serve(crate::sparql_serve::ServeArgs),
}

/// The SPARQL text of a `--query` or `--update` value: the file it names, or itself.
fn query_text(q: &str) -> CliResult<String> {
    match std::fs::read_to_string(q) {
        Ok(t) => Ok(t),
        Err(_) if q.contains(char::is_whitespace) => Ok(q.to_string()),
        Err(e) => Err(format!("--query {q}: not SPARQL text, and not a readable file: {e}").into()),
    }
}

pub fn run(a: SparqlArgs) -> CliResult {
    if let Some(SparqlCommand::Serve(s)) = a.command {
        return crate::sparql_serve::run(s);
    }
    let texts = a
        .query
        .iter()
        .map(|q| query_text(q))
        .collect::<CliResult<Vec<_>>>()?;
    let reporter = if a.json {
        Reporter::quiet()
    } else {
        Reporter::terminal()
    };
    if let Some(c) = &a.cluster_file {
        return run_cluster(&a, c, &texts);
    }
    let data = a
        .data
        .as_ref()
        .expect("clap requires --data without --cluster");
    let mut l = crate::rdf::load_file(data, &a.cluster, reporter)?;
    for u in &a.update {
        let text = query_text(u)?;
        let mut readers = l.rdf.workers()?;
        let mut writers = l.rdf.workers()?;
        let r = l
            .rdf
            .update(
                &text,
                &mut readers,
                &mut writers,
                locus_rdf::sparql::ROWS_MAX,
            )
            .map_err(|e| format!("--update {u}: {e}"))?;
        eprintln!("{r}");
    }
    let mut engine = Engine::new(&l.rdf)?;
    answer_each(&a, &texts, "machine", |text| {
        let before = l.fabric.counters().total();
        let t0 = Instant::now();
        let (solutions, trace) = engine.answer(text)?;
        let query_s = t0.elapsed().as_secs_f64();
        let cost = l.fabric.counters().total().minus(&before);
        let line = format!(
            "{} store reads; fabric operations: {} local, {} remote ({:.1}% remote); {:.3} ms",
            trace.reads,
            cost.ops_total(Locality::Local),
            cost.ops_total(Locality::Remote),
            100.0 * cost.remote_rate(),
            query_s * 1e3
        );
        Ok((solutions, trace, line))
    })
}

/// Answers each query in turn with `query` (which also gives the last line
/// of its `--explain`, what it cost), printing a table per query or, with
/// `--json`, one results document (an array of them for several queries).
/// `place` names where a query starts ("machine", "server").
fn answer_each(
    a: &SparqlArgs,
    texts: &[String],
    place: &str,
    mut query: impl FnMut(&str) -> locus_rdf::Result<(Answer, Trace, String)>,
) -> CliResult {
    let mut docs = Vec::new();
    for (n, text) in texts.iter().enumerate() {
        let (answer, trace, cost) =
            query(text).map_err(|e| format!("--query {}: {e}", a.query[n]))?;
        if a.json {
            match &answer {
                Answer::Solutions(s) => docs.push(results::to_json(s)),
                Answer::Boolean(b) => docs.push(results::boolean_json(*b)),
                Answer::Graph(_) => {
                    return Err(format!(
                        "--query {}: CONSTRUCT and DESCRIBE answer with a graph, which has no SPARQL JSON results form; run without --json to print N-Triples",
                        a.query[n]
                    )
                    .into())
                }
            }
        } else {
            if texts.len() > 1 {
                println!("# {}", a.query[n]);
            }
            match &answer {
                Answer::Solutions(s) => print!("{}", results::to_table(s)),
                Answer::Boolean(b) => println!("{b}"),
                Answer::Graph(g) => print!("{}", results::to_ntriples(g)),
            }
        }
        if a.explain {
            let start = match trace.start {
                Some(m) => format!("{place} {m} (home of the start constant)"),
                None => format!("every {place} (forked from an index vertex)"),
            };
            eprintln!("started on {start}");
            for (k, (pattern, rows)) in trace.steps.iter().enumerate() {
                eprintln!("  step {}: {pattern}  -> {rows} rows", k + 1);
            }
            eprintln!("{cost}");
        }
    }
    if a.json {
        let out = if docs.len() == 1 {
            docs.pop().expect("one document")
        } else {
            serde_json::Value::Array(docs)
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
    }
    Ok(())
}

/// `locus sparql --cluster C`: reads are requests to the server the query
/// runs on (the start constant's home): LISTS for a batch of keys (an
/// index's parts, a step's rows), NEIGHBORS for one.
fn run_cluster(a: &SparqlArgs, cluster_file: &std::path::Path, texts: &[String]) -> CliResult {
    let (catalog, client) = crate::rdf_cluster::open(cluster_file)?;
    let sources = (0..client.machines())
        .map(|m| crate::rdf_cluster::ClientSource::new(client.clone(), m as u8))
        .collect();
    let mut engine = Engine::with_sources(&catalog, sources)?;
    answer_each(a, texts, "server", |text| {
        let t0 = Instant::now();
        let (solutions, trace) = engine.answer(text)?;
        let line = format!(
            "{} reads, by LISTS requests (many keys each) or NEIGHBORS to the server it runs on; {:.3} ms",
            trace.reads,
            t0.elapsed().as_secs_f64() * 1e3
        );
        Ok((solutions, trace, line))
    })
}
