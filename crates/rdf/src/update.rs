//! SPARQL 1.1 Update on an embedded [`RdfStore`]: INSERT DATA, DELETE DATA,
//! DELETE/INSERT ... WHERE, LOAD of a file, CLEAR (and DROP), of the
//! default graph and of named graphs (`GRAPH <g>` in data and templates,
//! LOAD INTO GRAPH, CLEAR GRAPH/NAMED/ALL): a triple of graph `g` is a
//! triple under `g`'s pts ([`crate::dict`]), so it is the same four keys. Every change is an edge insert or delete of the store
//! (`Worker::insert_edge`/`delete_edge`, run at the key's home under its
//! vertex lock), so migration, caches and replicas see it as any update.
//!
//! A triple `(s, p, o)` is four keys, as a load writes them
//! ([`crate::catalog`]): `(s, p, OUT)` holds `o`; `(o, p, IN)` holds `s`
//! (for `rdf:type`, the type index part `(slot(s), class, OUT)` holds `s`
//! instead); the predicate index parts `(slot(s), p, OUT)` and
//! `(slot(o), p, IN)` hold `s` and `o` while they have any triple of `p`
//! (`slot(t)`: term `t`'s store slot, [`crate::layout`]).
//! The dictionary takes new terms (ids are never reused), and new
//! predicates and classes take pt ids inside the layout's reserved capacity
//! ([`crate::layout::Layout::with_headroom`]), so no key moves. The statistics
//! (triples, subjects, objects per pt) move with every edge that changes.
//!
//! Order: the WHERE part and every template are evaluated, and every term is
//! interned and checked against the layout, before the first write; then
//! deletions, then insertions (SPARQL 1.1 Update 3.1.3). A store failure in
//! the middle leaves the operations before it applied.

use std::path::PathBuf;

use locus_fabric::Fabric;
use locus_store::{VertexId, Worker};
use oxrdf::{BlankNode, NamedNode, NamedOrBlankNode, Term, Triple};
use spargebra::algebra::GraphPattern;
use spargebra::term::{
    GraphName, GraphNamePattern, GroundQuadPattern, GroundTermPattern, NamedNodePattern, Quad,
    QuadPattern, TermPattern, TriplePattern, Variable,
};
use spargebra::{GraphUpdateOperation, Query};

use crate::layout::{IN, OUT};
use crate::sparql::{Answer, Source};
use crate::store::RdfStore;
use crate::{Dataset, RdfError, Result};

/// What an update changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UpdateReport {
    /// Triples added (not counting those already there).
    pub inserted: u64,
    /// Triples removed (not counting those absent).
    pub deleted: u64,
}

impl std::fmt::Display for UpdateReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = |n: u64| if n == 1 { "" } else { "s" };
        write!(
            f,
            "update done: {} triple{} inserted, {} deleted",
            self.inserted,
            s(self.inserted),
            self.deleted
        )
    }
}

fn unsupported(what: &str) -> RdfError {
    RdfError::Unsupported(what.to_string())
}

/// The graph a triple of an update goes to (`None`: the default graph).
type In = Option<NamedNode>;

/// Triples with their graphs.
type Quads = Vec<(Triple, In)>;

fn graph_of(g: GraphName) -> In {
    match g {
        GraphName::DefaultGraph => None,
        GraphName::NamedNode(n) => Some(n),
    }
}

fn graph_of_pattern(g: &GraphNamePattern) -> Result<In> {
    match g {
        GraphNamePattern::DefaultGraph => Ok(None),
        GraphNamePattern::NamedNode(n) => Ok(Some(n.clone())),
        GraphNamePattern::Variable(v) => Err(unsupported(&format!(
            "GRAPH ?{} in an update template (a graph named by a variable)",
            v.as_str()
        ))),
    }
}

/// Fresh blank nodes for the labels of INSERT DATA (scoped to the request:
/// they never join a node already stored).
fn fresh(t: Term, map: &mut Vec<(BlankNode, BlankNode)>) -> Term {
    match t {
        Term::BlankNode(b) => {
            if let Some((_, n)) = map.iter().find(|(k, _)| *k == b) {
                return n.clone().into();
            }
            let n = BlankNode::default();
            map.push((b, n.clone()));
            n.into()
        }
        t => t,
    }
}

fn ground(t: &GroundTermPattern) -> TermPattern {
    match t {
        GroundTermPattern::NamedNode(n) => n.clone().into(),
        GroundTermPattern::Literal(l) => l.clone().into(),
        GroundTermPattern::Variable(v) => v.clone().into(),
        #[allow(unreachable_patterns)]
        _ => unreachable!("quoted triples need spargebra's rdf-star feature, which is off"),
    }
}

impl<F: Fabric> RdfStore<F> {
    /// Runs the SPARQL update `text` through `workers` (one per machine,
    /// any [`Source`] wrapper of them: the WHERE parts read through it, so a
    /// time limit on it bounds them). `rows_max` bounds the solutions of a
    /// WHERE part.
    pub fn update<S: Source>(
        &mut self,
        text: &str,
        readers: &mut [S],
        writers: &mut [Worker<F>],
        rows_max: usize,
    ) -> Result<UpdateReport> {
        let u = spargebra::SparqlParser::new()
            .parse_update(text)
            .map_err(|e| RdfError::QuerySyntax(e.to_string()))?;
        let mut report = UpdateReport::default();
        for op in u.operations {
            let (delete, insert) = self.plan(op, readers, rows_max)?;
            let r = self.apply(&delete, &insert, writers)?;
            report.inserted += r.inserted;
            report.deleted += r.deleted;
        }
        Ok(report)
    }

    /// The triples one operation deletes and inserts, read before any write.
    fn plan<S: Source>(
        &self,
        op: GraphUpdateOperation,
        readers: &mut [S],
        rows_max: usize,
    ) -> Result<(Quads, Quads)> {
        // USING and USING NAMED are the WHERE part's FROM and FROM NAMED (3.1.3).
        let construct_in = |template: Vec<TriplePattern>,
                            pattern: GraphPattern,
                            dataset: Option<spargebra::algebra::QueryDataset>,
                            readers: &mut [S]|
         -> Result<Vec<Triple>> {
            if template.is_empty() {
                return Ok(Vec::new());
            }
            let q = Query::Construct {
                template,
                dataset,
                pattern,
                base_iri: None,
            };
            match crate::sparql::eval_answer(self.catalog(), readers, rows_max, q)? {
                Answer::Graph(g) => Ok(g),
                _ => unreachable!("CONSTRUCT answers with a graph"),
            }
        };
        let construct =
            |template, pattern, readers: &mut [S]| construct_in(template, pattern, None, readers);
        let tag = |ts: Vec<Triple>, g: &In| -> Vec<(Triple, In)> {
            ts.into_iter().map(|t| (t, g.clone())).collect()
        };
        // A template's triples by graph, each group instantiated apart.
        let by_graph = |ts: Vec<(TriplePattern, In)>| {
            let mut groups: Vec<(In, Vec<TriplePattern>)> = Vec::new();
            for (t, g) in ts {
                match groups.iter_mut().find(|x| x.0 == g) {
                    Some(x) => x.1.push(t),
                    None => groups.push((g, vec![t])),
                }
            }
            groups
        };
        Ok(match op {
            GraphUpdateOperation::InsertData { data } => {
                let mut map = Vec::new();
                let mut out = Vec::with_capacity(data.len());
                for Quad {
                    subject,
                    predicate,
                    object,
                    graph_name,
                } in data
                {
                    let s = match fresh(Term::from(subject), &mut map) {
                        Term::NamedNode(n) => NamedOrBlankNode::from(n),
                        Term::BlankNode(b) => NamedOrBlankNode::from(b),
                        Term::Literal(_) => unreachable!("a subject is no literal"),
                    };
                    let t = Triple::new(s, predicate, fresh(object, &mut map));
                    out.push((t, graph_of(graph_name)));
                }
                (Vec::new(), out)
            }
            GraphUpdateOperation::DeleteData { data } => {
                let mut out = Vec::with_capacity(data.len());
                for q in data {
                    let t = Triple::new(q.subject, q.predicate, q.object);
                    // Ground triples: the same types as any triple.
                    out.push((t, graph_of(q.graph_name)));
                }
                (out, Vec::new())
            }
            GraphUpdateOperation::DeleteInsert {
                delete,
                insert,
                using,
                pattern,
            } => {
                // spargebra gives WITH <g> as a dataset of default graph
                // `g` with no named graphs listed; WITH sets the default
                // graph only (3.1.3), so the store's named graphs stay.
                let using = using.map(|mut u| {
                    if u.named.is_none() {
                        let c = self.catalog();
                        let all = c.graphs_with_triples().into_iter().filter_map(|g| {
                            match c.dict().term(g) {
                                Some(Term::NamedNode(n)) => Some(n.clone()),
                                _ => None,
                            }
                        });
                        u.named = Some(all.collect());
                    }
                    u
                });
                let mut del = Vec::with_capacity(delete.len());
                for GroundQuadPattern {
                    subject,
                    predicate,
                    object,
                    graph_name,
                } in delete
                {
                    let t = TriplePattern {
                        subject: ground(&subject),
                        predicate,
                        object: ground(&object),
                    };
                    del.push((t, graph_of_pattern(&graph_name)?));
                }
                let mut ins = Vec::with_capacity(insert.len());
                for QuadPattern {
                    subject,
                    predicate,
                    object,
                    graph_name,
                } in insert
                {
                    let t = TriplePattern {
                        subject,
                        predicate,
                        object,
                    };
                    ins.push((t, graph_of_pattern(&graph_name)?));
                }
                let (mut d, mut i) = (Vec::new(), Vec::new());
                for (g, ts) in by_graph(del) {
                    let ts = construct_in(ts, (*pattern).clone(), using.clone(), readers)?;
                    d.extend(tag(ts, &g));
                }
                for (g, ts) in by_graph(ins) {
                    let ts = construct_in(ts, (*pattern).clone(), using.clone(), readers)?;
                    i.extend(tag(ts, &g));
                }
                (d, i)
            }
            GraphUpdateOperation::Load {
                silent,
                source,
                destination,
            } => match self.load_triples(source.as_str()) {
                Ok(ts) => (Vec::new(), tag(ts, &graph_of(destination))),
                Err(_) if silent => (Vec::new(), Vec::new()),
                Err(e) => return Err(e),
            },
            GraphUpdateOperation::Clear { silent, graph }
            | GraphUpdateOperation::Drop { silent, graph } => {
                use spargebra::algebra::GraphTarget as G;
                // The graphs it empties (a graph is gone once empty: the
                // dataset lists the graphs that have triples).
                let c = self.catalog();
                let named: Vec<In> = c
                    .graphs_with_triples()
                    .into_iter()
                    .map(|g| match c.dict().term(g) {
                        Some(Term::NamedNode(n)) => Ok(Some(n.clone())),
                        t => Err(unsupported(&format!(
                            "CLEAR or DROP of the graph named by {t:?} (SPARQL names graphs by IRI)"
                        ))),
                    })
                    .collect::<Result<_>>()?;
                let targets: Vec<In> = match graph {
                    G::DefaultGraph => vec![None],
                    G::NamedGraphs => named,
                    G::AllGraphs => std::iter::once(None).chain(named).collect(),
                    G::NamedNode(n) if named.contains(&Some(n.clone())) => vec![Some(n)],
                    // An absent graph: an error unless SILENT (SPARQL 1.1 Update 3.2.2).
                    G::NamedNode(_) if silent => Vec::new(),
                    G::NamedNode(n) => {
                        return Err(RdfError::Unsupported(format!(
                            "CLEAR or DROP GRAPH {n}: the store has no graph {n} (add SILENT to ignore)"
                        )))
                    }
                };
                let v = |n: &str| TermPattern::Variable(Variable::new_unchecked(n));
                let all = TriplePattern {
                    subject: v("s"),
                    predicate: NamedNodePattern::Variable(Variable::new_unchecked("p")),
                    object: v("o"),
                };
                let mut out = Vec::new();
                for g in targets {
                    let bgp = GraphPattern::Bgp {
                        patterns: vec![all.clone()],
                    };
                    let pattern = match &g {
                        None => bgp,
                        Some(n) => GraphPattern::Graph {
                            name: NamedNodePattern::NamedNode(n.clone()),
                            inner: Box::new(bgp),
                        },
                    };
                    out.extend(tag(construct(vec![all.clone()], pattern, readers)?, &g));
                }
                (out, Vec::new())
            }
            GraphUpdateOperation::Create { silent: true, .. } => (Vec::new(), Vec::new()),
            // A graph exists while it has triples, so a new one needs no
            // record; creating one that exists is an error (3.2.3).
            GraphUpdateOperation::Create { graph, .. } => {
                let c = self.catalog();
                let id = c.dict().id(&Term::from(graph.clone()));
                if id.is_some_and(|g| c.graphs_with_triples().contains(&g)) {
                    return Err(RdfError::Unsupported(format!(
                        "CREATE GRAPH {graph}: the store has that graph already (add SILENT to ignore)"
                    )));
                }
                (Vec::new(), Vec::new())
            }
        })
    }

    /// The triples of a LOAD source: a `file:` IRI or a path.
    fn load_triples(&self, source: &str) -> Result<Vec<Triple>> {
        let path = load_path(source)?;
        let d = Dataset::parse_file(&path, &())?;
        if !d.dict.graphs().is_empty() {
            return Err(unsupported(&format!(
                "LOAD of {}, a dataset of {} named graphs (LOAD reads triples into one graph; load a dataset with `locus rdf load`)",
                path.display(),
                d.dict.graphs().len()
            )));
        }
        let term = |id: u32| {
            d.dict
                .term(id)
                .cloned()
                .expect("a dataset's ids are its terms")
        };
        d.triples
            .iter()
            .map(|&[s, p, o]| {
                let (_, pid) = d.dict.pt(p).expect("a dataset's pts are its own");
                let s = match term(s) {
                    Term::NamedNode(n) => NamedOrBlankNode::from(n),
                    Term::BlankNode(b) => NamedOrBlankNode::from(b),
                    Term::Literal(_) => unreachable!("a parsed subject is no literal"),
                };
                let Term::NamedNode(p) = term(pid) else {
                    unreachable!("a parsed predicate is an IRI")
                };
                Ok(Triple::new(s, p, term(o)))
            })
            .collect()
    }

    /// Deletes `delete`, then inserts `insert`.
    fn apply(
        &mut self,
        delete: &[(Triple, In)],
        insert: &[(Triple, In)],
        w: &mut [Worker<F>],
    ) -> Result<UpdateReport> {
        let mut report = UpdateReport::default();
        // Deleting needs no new term: a triple with an unknown term is absent.
        let ids: Vec<[u32; 3]> = delete
            .iter()
            .filter_map(|(t, g)| self.ids_of(t, g))
            .collect();
        for [s, p, o] in ids {
            report.deleted += self.delete_one(w, s, p, o)? as u64;
        }
        let ids = insert
            .iter()
            .map(|(t, g)| self.intern(t, g))
            .collect::<Result<Vec<_>>>()?;
        for [s, p, o] in ids {
            report.inserted += self.insert_one(w, s, p, o)? as u64;
        }
        Ok(report)
    }

    /// `(s, predicate pt in graph g, o)` ids of a triple whose terms (and
    /// graph) are all stored.
    fn ids_of(&self, t: &Triple, g: &In) -> Option<[u32; 3]> {
        let d = self.catalog().dict();
        let g = match g {
            Some(n) => Some(d.id(&Term::from(n.clone()))?),
            None => None,
        };
        let s = d.id(&Term::from(t.subject.clone()))?;
        let p = d.predicate_pt_in(d.id(&Term::from(t.predicate.clone()))?, g)?;
        let o = d.id(&t.object)?;
        if t.predicate == oxrdf::vocab::rdf::TYPE {
            d.type_pt_in(o, g)?;
        }
        Some([s, p, o])
    }

    /// Interns a triple's terms (and its predicate's or class's pt), checking
    /// that the layout has room: no key moves.
    fn intern(&mut self, t: &Triple, g: &In) -> Result<[u32; 3]> {
        let layout_err = |m: String| RdfError::Layout(m);
        let (dict, layout, type_pt, stats) = self.catalog_mut().parts_mut();
        let g = match g {
            Some(n) => Some(dict.intern(&Term::from(n.clone())).map_err(layout_err)?),
            None => None,
        };
        let s = dict
            .intern(&Term::from(t.subject.clone()))
            .map_err(layout_err)?;
        let pid = dict
            .intern(&Term::from(t.predicate.clone()))
            .map_err(layout_err)?;
        let o = dict.intern(&t.object).map_err(layout_err)?;
        let p = dict.intern_predicate_in(pid, g).map_err(layout_err)?;
        if t.predicate == oxrdf::vocab::rdf::TYPE {
            if g.is_none() {
                *type_pt = Some(p);
            }
            dict.intern_type_in(o, g).map_err(layout_err)?;
        }
        let pts = dict.pts() as u64;
        if pts > layout.pts_capacity() {
            return Err(RdfError::Unsupported(format!(
                "a new predicate or class past the {} the layout reserved when the data was loaded (moving every key to a wider layout is not implemented); reload the data with the new triples",
                layout.pts_capacity()
            )));
        }
        *layout = layout.with_terms(dict.len() as u64)?;
        for v in [&mut stats.triples, &mut stats.subjects, &mut stats.objects] {
            v.resize(pts as usize, 0);
        }
        Ok([s, p, o])
    }

    /// Adds `(s, p, o)`'s four keys' entries; false if it was there.
    fn insert_one(&mut self, w: &mut [Worker<F>], s: u32, p: u32, o: u32) -> Result<bool> {
        let l = *self.layout();
        let class = self.class_of(p, o);
        if !self.add(w, l.normal(s, p, OUT), o)? {
            return Ok(false);
        }
        let (hs, ho) = (l.slot(s), l.slot(o));
        self.stats_mut().triples[p as usize] += 1;
        if self.add(w, l.index(hs, p, OUT), s)? {
            self.stats_mut().subjects[p as usize] += 1;
        }
        if self.add(w, l.index(ho, p, IN), o)? {
            self.stats_mut().objects[p as usize] += 1;
        }
        match class {
            Some(c) => {
                if self.add(w, l.index(hs, c, OUT), s)? {
                    self.stats_mut().subjects[c as usize] += 1;
                }
            }
            None => {
                self.add(w, l.normal(o, p, IN), s)?;
            }
        }
        Ok(true)
    }

    /// Removes `(s, p, o)`'s entries, and a term from an index part once it
    /// has no triple of `p` left; false if the triple was absent.
    fn delete_one(&mut self, w: &mut [Worker<F>], s: u32, p: u32, o: u32) -> Result<bool> {
        let l = *self.layout();
        let class = self.class_of(p, o);
        let (hs, ho) = (l.slot(s), l.slot(o));
        if !at(w, l.normal(s, p, OUT)).delete_edge(l.normal(s, p, OUT), o)? {
            return Ok(false);
        }
        self.stats_mut().triples[p as usize] -= 1;
        let o_left = match class {
            Some(c) => {
                let k = l.index(hs, c, OUT);
                if at(w, k).delete_edge(k, s)? {
                    self.stats_mut().subjects[c as usize] -= 1;
                }
                // The class is an object of rdf:type while it has instances
                // in any slot: the type index's count of them (exact: each
                // instance is in one part, its slot's).
                self.stats().subjects[c as usize] > 0
            }
            None => {
                let k = l.normal(o, p, IN);
                at(w, k).delete_edge(k, s)?;
                !list(w, k)?.is_empty()
            }
        };
        let k = l.index(ho, p, IN);
        if !o_left && at(w, k).delete_edge(k, o)? {
            self.stats_mut().objects[p as usize] -= 1;
        }
        let k = l.index(hs, p, OUT);
        if list(w, l.normal(s, p, OUT))?.is_empty() && at(w, k).delete_edge(k, s)? {
            self.stats_mut().subjects[p as usize] -= 1;
        }
        Ok(true)
    }

    /// The class pt of object `o` when `p` is `rdf:type` (in `p`'s graph).
    fn class_of(&self, p: u32, o: u32) -> Option<u32> {
        let d = self.dict();
        let type_term = d.id(&oxrdf::vocab::rdf::TYPE.into());
        if type_term.is_some() && d.pt(p).map(|x| x.1) == type_term {
            Some(
                d.type_pt_in(o, d.pt_graph(p))
                    .expect("an rdf:type object is interned as a class in its graph"),
            )
        } else {
            None
        }
    }

    /// Adds `u` to `key`'s list; records a key never written before.
    fn add(&mut self, w: &mut [Worker<F>], key: VertexId, u: u32) -> Result<bool> {
        let added = at(w, key).insert_edge(key, u)?;
        if added {
            self.note_key(key);
        }
        Ok(added)
    }
}

/// The worker of `key`'s home in the store's live slot table, so the
/// update runs there without a forward (after a slot moved, too).
fn at<F: Fabric>(w: &mut [Worker<F>], key: VertexId) -> &mut Worker<F> {
    let m = w[0].home_of(key) as usize;
    &mut w[m]
}

fn list<F: Fabric>(w: &mut [Worker<F>], key: VertexId) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    at(w, key).neighbors(key, usize::MAX, &mut out)?;
    Ok(out)
}

/// The file a LOAD source names: a `file:` IRI or a path; other IRIs are refused.
fn load_path(source: &str) -> Result<PathBuf> {
    match source.strip_prefix("file://") {
        Some(p) => Ok(PathBuf::from(p)),
        None if source.contains("://") => Err(RdfError::Unsupported(format!(
            "LOAD <{source}>: only files (file:///path) are loaded"
        ))),
        None => Ok(PathBuf::from(source)),
    }
}

/// Refuses an update whose LOADs read files outside `dir` (symbolic links
/// and `..` resolved), or any LOAD when there is no `dir`: an endpoint must
/// not read whatever file its process can.
pub fn check_loads(text: &str, dir: Option<&std::path::Path>) -> Result<()> {
    let u = spargebra::SparqlParser::new()
        .parse_update(text)
        .map_err(|e| RdfError::QuerySyntax(e.to_string()))?;
    for op in &u.operations {
        let GraphUpdateOperation::Load { source, .. } = op else {
            continue;
        };
        let Some(dir) = dir else {
            return Err(RdfError::Forbidden(format!(
                "LOAD <{}>: this endpoint loads no files (start it with --load-dir DIR to allow files under DIR)",
                source.as_str()
            )));
        };
        let path = load_path(source.as_str())?;
        let inside = match (path.canonicalize(), dir.canonicalize()) {
            (Ok(p), Ok(d)) => p.starts_with(d),
            _ => false,
        };
        if !inside {
            return Err(RdfError::Forbidden(format!(
                "LOAD <{}>: not a readable file under --load-dir {}",
                source.as_str(),
                dir.display()
            )));
        }
    }
    Ok(())
}
