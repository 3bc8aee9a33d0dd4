//! SPARQL by graph exploration (Wukong OSDI'16, 5; Pragh 6.5).
//!
//! [`Engine::query`] parses the text with `spargebra` ([`query`] keeps the
//! supported subset and names anything else), plans and explores
//! ([`exec`]), then applies DISTINCT, OFFSET and LIMIT and decodes the ids.
//! [`results`] writes the answer as a table or as W3C SPARQL 1.1 Query
//! Results JSON.

pub mod exec;
mod filter;
mod query;
pub mod results;

use std::collections::HashSet;

use locus_fabric::Fabric;
use locus_store::Worker;
use oxrdf::Term;

pub use exec::{Trace, ROWS_MAX};

use crate::store::RdfStore;
use crate::Result;

/// A query's answer: variable names and rows of terms (`None`: unbound).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Solutions {
    /// Projected variables, without `?`.
    pub vars: Vec<String>,
    /// One entry per variable per row.
    pub rows: Vec<Vec<Option<Term>>>,
}

/// Answers queries over one [`RdfStore`] from one thread that acts as every
/// machine in turn (a worker per machine).
pub struct Engine<'a, F: Fabric> {
    rdf: &'a RdfStore<F>,
    workers: Vec<Worker<F>>,
    /// Intermediate rows a query may keep at most.
    pub rows_max: usize,
}

impl<'a, F: Fabric> Engine<'a, F> {
    /// An engine with a worker for every machine of `rdf`'s store.
    pub fn new(rdf: &'a RdfStore<F>) -> Result<Self> {
        Ok(Engine {
            rdf,
            workers: rdf.workers()?,
            rows_max: ROWS_MAX,
        })
    }

    /// Answers the SPARQL `text`.
    pub fn query(&mut self, text: &str) -> Result<(Solutions, Trace)> {
        let q = query::Query::parse(text)?;
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
