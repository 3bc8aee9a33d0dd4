//! RDF and SPARQL on Locus (Pragh 6.5: Wukong+M).
//!
//! Wukong (OSDI'16) stores an RDF graph as key-value pairs and answers SPARQL
//! by graph exploration; Pragh ports split live migration into it. This crate
//! does the same over the unchanged [`locus_store`]:
//!
//! - [`dict`]: the dictionary, terms to dense `u32` ids and back, with
//!   bounded term sizes and a checksummed file format to persist it beside
//!   the data; predicates and classes also get small **pt ids**.
//! - [`layout`]: Wukong's keys. A *normal vertex* `(term, pt, dir)` holds the
//!   term's neighbours along a predicate, out (as subject) or in (as
//!   object); *index vertices* list a predicate's subjects and objects and a
//!   class's instances, one part per store slot (Wukong has one per
//!   machine). Each key packs into one store vertex in its term's store slot
//!   (`term % slots`), so a term's keys and the index parts listing it move
//!   together when a slot moves between servers, any number of servers reads
//!   the data, and values migrate, are cached and replicated by the store's
//!   own mechanisms.
//! - [`ntriples`]: N-Triples and N-Quads input through `oxttl`, validated
//!   line by line, every error naming its line (Turtle and TriG whole, at
//!   the parser's line), all or nothing. A named graph's triples go under
//!   pts of their own ([`dict`]), so the default graph lays out as without
//!   graphs.
//! - [`catalog`]: [`Catalog`] (dictionary, layout, statistics: what a query
//!   needs besides the lists, persisted beside a cluster's data) and every
//!   key's list of a dataset, built once for any store.
//! - [`store`]: [`RdfStore`], a dataset loaded into an embedded store in that layout.
//! - [`update`]: SPARQL 1.1 Update on an embedded store, as edge inserts
//!   and deletes of the store, the dictionary and statistics kept current.
//! - [`lubm`]: the LUBM generator (UBA's univ-bench data), seeded.
//! - [`sparql`]: SPARQL 1.1 queries parsed by `spargebra`; basic graph
//!   patterns executed by graph exploration from a constant on the machine
//!   that homes it, or from an index on every machine over the parts of the
//!   slots it owns, the algebra around them (OPTIONAL,
//!   UNION, MINUS, EXISTS, aggregates, paths, the query forms, GRAPH, FROM
//!   and FROM NAMED) by an evaluator over rows of term ids; anything else is
//!   an error naming it.

#![warn(missing_docs)]

pub mod catalog;
pub mod dict;
mod error;
mod fastnt;
pub mod layout;
pub mod lubm;
pub mod ntriples;
pub mod sparql;
pub mod store;
pub mod update;

pub use catalog::Catalog;
pub use error::{RdfError, Result};
pub use ntriples::Dataset;
pub use store::RdfStore;

/// Progress of a long step (a bar on a terminal; nothing in tests).
pub trait Progress {
    /// A step of `total` units begins.
    fn start(&self, _what: &str, _total: u64) {}
    /// `n` more units are done.
    fn inc(&self, _n: u64) {}
    /// The step is over.
    fn finish(&self) {}
}

/// No progress reporting.
impl Progress for () {}
