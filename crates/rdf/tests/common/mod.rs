//! Shared by the SPARQL scenario tests: Turtle loaded into the real store
//! (embedded, on 1 and 3 machines) and answers as sorted text rows, checked
//! equal on both machine counts.

#![allow(dead_code)]

use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_rdf::sparql::{Answer, Engine};
use locus_rdf::{Dataset, RdfError, RdfStore};

/// `data` (Turtle) in a store on each machine count.
pub fn stores(data: &str) -> Vec<RdfStore<LocalFabric>> {
    let d = Dataset::parse_turtle(data.as_bytes(), "data.ttl", &()).unwrap();
    stores_of(&d)
}

/// A parsed dataset in a store on each machine count.
pub fn stores_of(d: &Dataset) -> Vec<RdfStore<LocalFabric>> {
    [1, 3]
        .into_iter()
        .map(|machines| {
            let f = LocalFabric::new(LocalConfig {
                machines,
                latency_ns: 0,
                bandwidth_bytes_per_s: 0,
                pin_memory: false,
                ..LocalConfig::default()
            })
            .unwrap();
            RdfStore::load(f, d.clone(), |_| {}, &()).unwrap()
        })
        .collect()
}

/// One answer as text: rows `?v=term ...` in order (`ordered`) or sorted,
/// `true`/`false` for ASK, sorted N-Triples lines for a graph.
pub fn text(a: Answer, ordered: bool) -> Vec<String> {
    let mut out: Vec<String> = match a {
        Answer::Solutions(s) => s
            .rows
            .iter()
            .map(|r| {
                s.vars
                    .iter()
                    .zip(r)
                    .filter_map(|(v, t)| t.as_ref().map(|t| format!("{v}={t}")))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect(),
        Answer::Boolean(b) => vec![b.to_string()],
        Answer::Graph(g) => g.iter().map(|t| t.to_string()).collect(),
    };
    if !ordered {
        out.sort();
    }
    out
}

/// The answer of `q` over `data`, the same on every machine count.
pub fn ask(data: &str, q: &str, ordered: bool) -> Vec<String> {
    let mut first: Option<Vec<String>> = None;
    for rdf in stores(data) {
        let mut e = Engine::new(&rdf).unwrap();
        let (a, _) = e.answer(q).unwrap_or_else(|err| panic!("{q}: {err}"));
        let got = text(a, ordered);
        match &first {
            None => first = Some(got),
            Some(f) => assert_eq!(f, &got, "machine counts disagree on {q}"),
        }
    }
    first.unwrap()
}

/// Rows of `q` on one machine, sorted (for answers that make fresh blank nodes).
pub fn rows_once(data: &str, q: &str) -> Vec<String> {
    let rdf = stores(data).remove(0);
    let mut e = Engine::new(&rdf).unwrap();
    let (a, _) = e.answer(q).unwrap_or_else(|err| panic!("{q}: {err}"));
    text(a, false)
}

/// Rows of `q`, sorted.
pub fn rows(data: &str, q: &str) -> Vec<String> {
    ask(data, q, false)
}

/// The error of `q` over `data`.
pub fn error(data: &str, q: &str) -> RdfError {
    let rdf = stores(data).remove(0);
    let mut e = Engine::new(&rdf).unwrap();
    match e.answer(q) {
        Ok(a) => panic!("{q} answered {:?}", a.0),
        Err(err) => err,
    }
}

/// Sorted owned strings of `rows`.
pub fn want(rows: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = rows.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}
