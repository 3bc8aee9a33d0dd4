//! SPARQL by graph exploration (Wukong OSDI'16, 5; Pragh 6.5) inside an
//! algebra evaluator (SPARQL 1.1, 18).
//!
//! [`Engine::answer`] parses the text with `spargebra`. A SELECT over one
//! basic graph pattern with FILTERs, projection, DISTINCT and LIMIT/OFFSET
//! takes the fast path: [`query`] keeps that shape, [`exec`] plans and
//! explores, and the ids are decoded. Everything else goes to [`eval`],
//! which runs each basic graph pattern by the same exploration and the
//! operators around it over solution sequences. [`results`] writes the
//! answer as a table or as W3C SPARQL 1.1 Query Results JSON.

mod eval;
pub mod exec;
pub mod protocol;
mod query;
pub mod results;

pub use eval::Answer;

use std::collections::HashSet;

use locus_fabric::Fabric;
use locus_store::{VertexId, Worker};
use oxrdf::Term;

pub use exec::{Outcome, Trace, ROWS_MAX};

use crate::catalog::Catalog;
use crate::store::RdfStore;
use crate::{RdfError, Result};

/// A query's answer: variable names and rows of terms (`None`: unbound).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Solutions {
    /// Projected variables, without `?`.
    pub vars: Vec<String>,
    /// One entry per variable per row.
    pub rows: Vec<Vec<Option<Term>>>,
}

/// Where exploration reads a key's list: a store worker acting as one
/// machine (embedded), or a client that asks one server (a cluster). Any
/// source reads any key; the one of the key's home reads it locally.
pub trait Source {
    /// Appends the list of `key` (empty if the key is absent) to `out`.
    fn list(&mut self, key: VertexId, out: &mut Vec<u32>) -> Result<()>;

    /// The machine homing `key` now, as this source sees the store's slot
    /// table (a hint: slots move; a read anywhere is still right).
    fn home(&mut self, key: VertexId) -> usize;

    /// The lists of `keys` appended to `out` one after another, each as
    /// [`Source::list`] gives it, pushing to `ends` where each one ends in
    /// `out`. A source that can read many keys in one round trip (a
    /// cluster's) overrides this; the default reads each.
    fn lists(
        &mut self,
        keys: &[VertexId],
        out: &mut Vec<u32>,
        ends: &mut Vec<usize>,
    ) -> Result<()> {
        for &k in keys {
            self.list(k, out)?;
            ends.push(out.len());
        }
        Ok(())
    }
}

impl<F: Fabric> Source for Worker<F> {
    fn home(&mut self, key: VertexId) -> usize {
        self.home_of(key) as usize
    }

    fn list(&mut self, key: VertexId, out: &mut Vec<u32>) -> Result<()> {
        let from = out.len();
        self.neighbors(key, usize::MAX, out)?;
        // A load writes sorted lists; an update appends (the store's edge
        // insert). Exploration binary-searches.
        if !out[from..].is_sorted() {
            out[from..].sort_unstable();
        }
        Ok(())
    }
}

/// A source borrowed (an endpoint keeps its workers across queries and updates).
impl<S: Source + ?Sized> Source for &mut S {
    fn list(&mut self, key: VertexId, out: &mut Vec<u32>) -> Result<()> {
        (**self).list(key, out)
    }
    fn lists(
        &mut self,
        keys: &[VertexId],
        out: &mut Vec<u32>,
        ends: &mut Vec<usize>,
    ) -> Result<()> {
        (**self).lists(keys, out, ends)
    }
    fn home(&mut self, key: VertexId) -> usize {
        (**self).home(key)
    }
}

/// The source of the machine homing `key` among `sources` (one per machine,
/// index = machine); a home without a source of its own (a server added
/// after the sources were made) is read through source `home % len`.
pub(crate) fn source_of<S: Source>(sources: &mut [S], key: VertexId) -> usize {
    sources[0].home(key) % sources.len()
}

/// A time limit shared by the [`Timed`] sources of one engine: the instant
/// a query must be done by and the limit it came from (for the message).
pub type Clock = std::rc::Rc<std::cell::Cell<Option<(std::time::Instant, u64)>>>;

/// A [`Source`] that fails every read past its clock's deadline, so a query
/// stops at its next store read once over its time (a decorator: the inner
/// source reads). Work between reads is bounded by the engine's `rows_max`.
pub struct Timed<S> {
    inner: S,
    clock: Clock,
}

impl<S> Timed<S> {
    /// `inner`, limited by `clock` (no limit while it holds `None`).
    pub fn new(inner: S, clock: Clock) -> Self {
        Timed { inner, clock }
    }
}

impl<S> Timed<S> {
    /// Fails once the clock's deadline has passed.
    fn in_time(&self) -> Result<()> {
        match self.clock.get() {
            Some((deadline, ms)) if std::time::Instant::now() >= deadline => {
                Err(RdfError::Timeout { ms })
            }
            _ => Ok(()),
        }
    }
}

impl<S: Source> Source for Timed<S> {
    fn list(&mut self, key: VertexId, out: &mut Vec<u32>) -> Result<()> {
        self.in_time()?;
        self.inner.list(key, out)
    }
    fn lists(
        &mut self,
        keys: &[VertexId],
        out: &mut Vec<u32>,
        ends: &mut Vec<usize>,
    ) -> Result<()> {
        self.in_time()?;
        self.inner.lists(keys, out, ends)
    }
    fn home(&mut self, key: VertexId) -> usize {
        self.inner.home(key)
    }
}

/// Answers queries from one thread that acts as every machine in turn (a
/// source per machine: store workers, or a cluster's client).
pub struct Engine<'a, S: Source> {
    rdf: &'a Catalog,
    workers: Vec<S>,
    /// Intermediate rows a query may keep at most.
    pub rows_max: usize,
}

impl<'a, F: Fabric> Engine<'a, Worker<F>> {
    /// An engine with a worker for every machine of `rdf`'s store.
    pub fn new(rdf: &'a RdfStore<F>) -> Result<Self> {
        Ok(Engine {
            rdf: rdf.catalog(),
            workers: rdf.workers()?,
            rows_max: ROWS_MAX,
        })
    }
}

impl<'a, S: Source> Engine<'a, S> {
    /// An engine over `catalog`'s data read through `sources`, one per
    /// machine of the cluster now (index = machine; any number: the layout
    /// names no machine).
    pub fn with_sources(catalog: &'a Catalog, sources: Vec<S>) -> Result<Self> {
        if sources.is_empty() {
            return Err(crate::RdfError::Layout(
                "no sources: an engine reads through at least one machine".into(),
            ));
        }
        Ok(Engine {
            rdf: catalog,
            workers: sources,
            rows_max: ROWS_MAX,
        })
    }

    /// Answers the SPARQL `text` (any query form).
    pub fn answer(&mut self, text: &str) -> Result<(Answer, Trace)> {
        let parsed = spargebra::SparqlParser::new()
            .parse_query(text)
            .map_err(|e| RdfError::QuerySyntax(e.to_string()))?;
        if let spargebra::Query::Select {
            dataset: None,
            pattern,
            ..
        } = &parsed
        {
            // The fast path pays nothing for the evaluator.
            match query::Query::from_pattern(pattern.clone()) {
                Ok(q) => {
                    let (s, t) = self.explore(q)?;
                    return Ok((Answer::Solutions(s), t));
                }
                Err(RdfError::Unsupported(_)) => {}
                Err(e) => return Err(e),
            }
        }
        eval::answer(self.rdf, &mut self.workers, self.rows_max, parsed)
    }

    /// Answers the SPARQL SELECT `text`.
    pub fn query(&mut self, text: &str) -> Result<(Solutions, Trace)> {
        match self.answer(text)? {
            (Answer::Solutions(s), t) => Ok((s, t)),
            _ => Err(RdfError::Unsupported(
                "ASK, CONSTRUCT and DESCRIBE through Engine::query (use Engine::answer)".into(),
            )),
        }
    }

    /// A query of the fast path's shape, by exploration alone.
    fn explore(&mut self, q: query::Query) -> Result<(Solutions, Trace)> {
        let plan = exec::plan(&q, self.rdf);
        let (mut rows, trace) =
            exec::execute(self.rdf, &q, &plan, &mut self.workers, self.rows_max)?;
        if q.distinct {
            let mut seen = HashSet::with_capacity(rows.len());
            rows.retain(|r| seen.insert(r.clone()));
        }
        let rows = rows
            .into_iter()
            .skip(q.offset)
            .take(q.limit.unwrap_or(usize::MAX));
        let dict = self.rdf.dict();
        let rows = rows
            .map(|r| {
                r.into_iter()
                    .map(|id| id.and_then(|id| dict.term(id).cloned()))
                    .collect()
            })
            .collect();
        let vars = q.projection.iter().map(|&v| q.vars[v].clone()).collect();
        Ok((Solutions { vars, rows }, trace))
    }
}

/// Answers a parsed query with the evaluator (an update's WHERE part).
pub(crate) fn eval_answer<S: Source>(
    rdf: &Catalog,
    workers: &mut [S],
    rows_max: usize,
    q: spargebra::Query,
) -> Result<Answer> {
    Ok(eval::answer(rdf, workers, rows_max, q)?.0)
}

/// A query parsed and planned once, then run many times with its start
/// constant swapped for another (a benchmark's query class: one template,
/// start constants drawn from a distribution). Runs count rows only; they do
/// no DISTINCT, OFFSET, LIMIT or decoding, so a run costs its store reads
/// and joins, not parsing and planning.
#[derive(Debug, Clone)]
pub struct Prepared {
    q: query::Query,
    plan: exec::Plan,
    /// The template's start constant.
    start: u32,
}

impl Prepared {
    /// Parses and plans `text` against `rdf`. The plan must start from the
    /// constant `start` (which the data must hold): runs swap it for theirs.
    pub fn new(rdf: &Catalog, text: &str, start: &Term) -> Result<Prepared> {
        let q = query::Query::parse(text)?;
        let plan = exec::plan(&q, rdf);
        let id = rdf.dict().id(start);
        let invalid = |why: String| RdfError::Template(format!("{text:?} {why}"));
        let Some(id) = id else {
            return Err(invalid(format!(
                "starts from {start}, which is not in the data"
            )));
        };
        if plan.empty {
            return Err(invalid("names a constant that is not in the data".into()));
        }
        if plan.start != Some(rdf.layout().slot(id)) || !plan.starts_from(id) {
            return Err(invalid(format!(
                "is planned to start elsewhere than at its constant {start}"
            )));
        }
        Ok(Prepared { q, plan, start: id })
    }

    /// The machine a run starting from `start` executes on (the constant's
    /// home now: its store slot's owner).
    pub fn machine<F: Fabric>(&self, rdf: &RdfStore<F>, start: u32) -> usize {
        rdf.home(start)
    }

    /// Runs the query with `start` in place of the template's constant on
    /// `worker`, which must act as `start`'s home ([`Prepared::machine`]).
    /// Every key read is appended to `log` when given.
    pub fn run<S: Source>(
        &self,
        rdf: &Catalog,
        worker: &mut S,
        start: u32,
        log: Option<&mut Vec<VertexId>>,
    ) -> Result<Outcome> {
        exec::execute_swapped(
            rdf,
            &self.q,
            &self.plan,
            worker,
            (self.start, start),
            ROWS_MAX,
            log,
        )
    }
}
