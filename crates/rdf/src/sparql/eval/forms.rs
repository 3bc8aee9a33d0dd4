//! The query forms (SPARQL 1.1, 16): SELECT, ASK, CONSTRUCT and DESCRIBE
//! over the evaluator's solutions.

use std::collections::HashSet;

use oxrdf::{BlankNode, NamedNode, NamedOrBlankNode, Term, Triple};
use spargebra::algebra::GraphPattern;
use spargebra::term::{NamedNodePattern, TermPattern};

use super::{check, decode, Evaluator};
use crate::catalog::Catalog;
use crate::sparql::exec::Trace;
use crate::sparql::{Solutions, Source};
use crate::Result;

/// A query's answer by form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// SELECT: variables and rows.
    Solutions(Solutions),
    /// ASK.
    Boolean(bool),
    /// CONSTRUCT and DESCRIBE: triples, without duplicates, in the order made.
    Graph(Vec<Triple>),
}

/// The variables a SELECT (or DESCRIBE) projects: its outermost `Project`.
fn projected(p: &GraphPattern) -> Option<&[spargebra::term::Variable]> {
    match p {
        GraphPattern::Project { variables, .. } => Some(variables),
        GraphPattern::Slice { inner, .. }
        | GraphPattern::Distinct { inner }
        | GraphPattern::Reduced { inner }
        | GraphPattern::OrderBy { inner, .. } => projected(inner),
        _ => None,
    }
}

/// Answers the parsed query `q` with the evaluator.
pub(crate) fn answer<S: Source>(
    rdf: &Catalog,
    workers: &mut [S],
    rows_max: usize,
    q: spargebra::Query,
) -> Result<(Answer, Trace)> {
    let (dataset, pattern, base) = match &q {
        spargebra::Query::Select {
            dataset,
            pattern,
            base_iri,
        }
        | spargebra::Query::Ask {
            dataset,
            pattern,
            base_iri,
        }
        | spargebra::Query::Construct {
            dataset,
            pattern,
            base_iri,
            ..
        }
        | spargebra::Query::Describe {
            dataset,
            pattern,
            base_iri,
        } => (dataset, pattern, base_iri),
    };
    check(pattern)?;
    let base = base.as_ref().map(|b| b.as_str().to_string());
    let mut ev = Evaluator::new(rdf, workers, rows_max, base);
    if let Some(ds) = dataset {
        // SPARQL 1.1, 13.2: FROM's graphs merge into the default graph (none:
        // an empty one), FROM NAMED's are the named graphs (none: no named
        // graphs); a graph the store lacks is an empty graph.
        let d = rdf.dict();
        let graphs = rdf.graphs_with_triples();
        let stored = |n: &NamedNode| {
            d.id(&Term::NamedNode(n.clone()))
                .filter(|id| graphs.binary_search(id).is_ok())
        };
        ev.graphs = ds.default.iter().filter_map(stored).map(Some).collect();
        ev.graphs.sort_unstable();
        ev.graphs.dedup();
        ev.named = ds
            .named
            .iter()
            .flatten()
            .filter_map(stored)
            .collect::<Vec<u32>>();
        ev.named.sort_unstable();
        ev.named.dedup();
    }
    let rows = ev.eval(pattern, &Vec::new())?;
    let answer = match &q {
        spargebra::Query::Select { .. } => {
            let vars: Vec<String> = match projected(pattern) {
                Some(vs) => vs.iter().map(|v| v.as_str().to_string()).collect(),
                None => {
                    let mut named: Vec<(usize, String)> = ev
                        .slots
                        .iter()
                        .filter(|(n, _)| !n.starts_with("_:"))
                        .map(|(n, &k)| (k, n.clone()))
                        .collect();
                    named.sort();
                    named.into_iter().map(|(_, n)| n).collect()
                }
            };
            let slots: Vec<usize> = vars.iter().map(|v| ev.slot(v)).collect();
            let rows = rows
                .iter()
                .map(|r| slots.iter().map(|&k| decode(&ev.terms, r, k)).collect())
                .collect();
            Answer::Solutions(Solutions { vars, rows })
        }
        spargebra::Query::Ask { .. } => Answer::Boolean(!rows.is_empty()),
        spargebra::Query::Construct { template, .. } => {
            let mut out = Vec::new();
            let mut seen = HashSet::new();
            for r in &rows {
                // Template blank nodes are fresh for each solution (16.2).
                let mut fresh: Vec<(String, BlankNode)> = Vec::new();
                let mut inst = |t: &TermPattern, ev: &mut Evaluator<'_, S>| -> Option<Term> {
                    match t {
                        TermPattern::NamedNode(n) => Some(n.clone().into()),
                        TermPattern::Literal(l) => Some(l.clone().into()),
                        TermPattern::BlankNode(b) => {
                            let b = b.as_str().to_string();
                            let node = match fresh.iter().find(|(l, _)| *l == b) {
                                Some((_, n)) => n.clone(),
                                None => {
                                    let n = BlankNode::default();
                                    fresh.push((b, n.clone()));
                                    n
                                }
                            };
                            Some(node.into())
                        }
                        TermPattern::Variable(v) => {
                            let k = ev.slot(v.as_str());
                            decode(&ev.terms, r, k)
                        }
                        #[allow(unreachable_patterns)]
                        _ => None,
                    }
                };
                for t in template {
                    let s = inst(&t.subject, &mut ev);
                    let p = match &t.predicate {
                        NamedNodePattern::NamedNode(n) => Some(n.clone().into()),
                        NamedNodePattern::Variable(v) => {
                            let k = ev.slot(v.as_str());
                            decode(&ev.terms, r, k)
                        }
                    };
                    let o = inst(&t.object, &mut ev);
                    if let Some(tr) = triple(s, p, o) {
                        if seen.insert(tr.clone()) {
                            out.push(tr);
                        }
                    }
                }
            }
            Answer::Graph(out)
        }
        spargebra::Query::Describe { .. } => {
            let vars: Vec<usize> = projected(pattern)
                .unwrap_or_default()
                .iter()
                .map(|v| ev.slot(v.as_str()))
                .collect();
            let mut todo: Vec<u32> = Vec::new();
            for r in &rows {
                todo.extend(vars.iter().filter_map(|&k| r.get(k).copied().flatten()));
            }
            Answer::Graph(describe(&mut ev, todo)?)
        }
    };
    Ok((answer, ev.trace))
}

/// A triple from instantiated positions, if they make one (16.2: a
/// literal subject or a non-IRI predicate leaves the triple out).
fn triple(s: Option<Term>, p: Option<Term>, o: Option<Term>) -> Option<Triple> {
    let s = match s? {
        Term::NamedNode(n) => NamedOrBlankNode::NamedNode(n),
        Term::BlankNode(b) => NamedOrBlankNode::BlankNode(b),
        Term::Literal(_) => return None,
    };
    let Term::NamedNode(p) = p? else { return None };
    Some(Triple::new(s, p, o?))
}

/// DESCRIBE's description: every triple of each resource as subject, and
/// of the blank nodes it reaches (a concise bounded description).
fn describe<S: Source>(ev: &mut Evaluator<'_, S>, mut todo: Vec<u32>) -> Result<Vec<Triple>> {
    let mut done = HashSet::new();
    let mut out = Vec::new();
    let preds = ev.predicates();
    while let Some(s) = todo.pop() {
        if !done.insert(s) {
            continue;
        }
        let subject = ev.terms.term(s).clone();
        if matches!(subject, Term::Literal(_)) {
            continue;
        }
        for (pts, pid) in &preds {
            let pid = *pid;
            let p: NamedNode = match ev.terms.term(pid) {
                Term::NamedNode(n) => n.clone(),
                _ => continue,
            };
            for o in ev.objects(s, pts)? {
                let object = ev.terms.term(o).clone();
                if matches!(object, Term::BlankNode(_)) {
                    todo.push(o);
                }
                if let Some(t) = triple(Some(subject.clone()), Some(p.clone().into()), Some(object))
                {
                    out.push(t);
                }
            }
        }
    }
    Ok(out)
}
