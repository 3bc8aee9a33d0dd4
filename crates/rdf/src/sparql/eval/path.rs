//! Reads over Wukong's keys for what exploration does not cover: variable
//! predicates and property paths (SPARQL 1.1, 9).
//!
//! The layout keys a list by `(term, predicate, direction)` and keeps no
//! list of a term's predicates, so a variable predicate costs one read per
//! predicate of the data from a known end, and a pattern with no known end
//! (`?s ?p ?o`) reads every predicate's index vertices (a part per store
//! slot) and then each subject's lists. Paths step along the same
//! lists; `*` and `+` are a breadth-first search with a visited set.
//!
//! A predicate stands for its pts in the active graphs ([`Pts`]): one in a
//! single graph, one per graph over a merge (FROM), whose lists are united
//! without duplicates (a triple in two graphs is one triple of the merge).

use std::collections::HashSet;

use oxrdf::{NamedNode, Term};
use spargebra::algebra::PropertyPathExpression as Ppe;

use super::{Evaluator, Row};

/// A predicate's pt in each active graph that has it, with the graph.
pub(super) type Pts = Vec<(u32, Option<u32>)>;

/// Sorts and deduplicates a union of `parts` lists (one list is left as is).
fn union(mut v: Vec<u32>, parts: usize) -> Vec<u32> {
    if parts > 1 {
        v.sort_unstable();
        v.dedup();
    }
    v
}
use crate::dict::PtKind;
use crate::layout::{IN, OUT};
use crate::sparql::{source_of, Source};
use crate::Result;

impl<S: Source> Evaluator<'_, S> {
    /// Reads `key` through the source of its home.
    fn read(&mut self, key: locus_store::VertexId, out: &mut Vec<u32>) -> Result<()> {
        self.trace.reads += 1;
        let m = source_of(self.workers, key);
        self.workers[m].list(key, out)
    }

    /// Reads `keys` as [`Self::read`] reads each, grouped by the source of
    /// each key's home, each group in one call (a cluster's source reads a
    /// group in one round trip). The lists come grouped, not in `keys`' order.
    fn read_many(&mut self, keys: &[locus_store::VertexId], out: &mut Vec<u32>) -> Result<()> {
        self.trace.reads += keys.len() as u64;
        let mut by: Vec<Vec<locus_store::VertexId>> = vec![Vec::new(); self.workers.len()];
        for &k in keys {
            by[source_of(self.workers, k)].push(k);
        }
        let mut ends = Vec::new();
        for (m, keys) in by.iter().enumerate().filter(|(_, k)| !k.is_empty()) {
            self.workers[m].lists(keys, out, &mut ends)?;
        }
        Ok(())
    }

    /// Whether `id` is a term of the stored data (not one a query made).
    fn stored(&self, id: u32) -> bool {
        (id as usize) < self.rdf.dict().len()
    }

    /// Objects of `s` along a predicate's pts.
    pub(super) fn objects(&mut self, s: u32, pts: &Pts) -> Result<Vec<u32>> {
        let mut out = Vec::new();
        if self.stored(s) {
            let l = *self.rdf.layout();
            for &(pt, _) in pts {
                self.read(l.normal(s, pt, OUT), &mut out)?;
            }
        }
        Ok(union(out, pts.len()))
    }

    /// Subjects of `o` along a predicate's pts (for `rdf:type`, the class's
    /// type index in each graph).
    pub(super) fn subjects(&mut self, o: u32, pts: &Pts) -> Result<Vec<u32>> {
        let mut out = Vec::new();
        if !self.stored(o) {
            return Ok(out);
        }
        let l = *self.rdf.layout();
        let d = self.rdf.dict();
        let type_term = d.id(&oxrdf::vocab::rdf::TYPE.into());
        for &(pt, g) in pts {
            if type_term.is_some() && d.pt(pt).map(|x| x.1) == type_term {
                if let Some(c) = d.type_pt_in(o, g) {
                    let keys: Vec<_> = self
                        .rdf
                        .parts()
                        .slots(c, OUT)
                        .map(|s| l.index(s, c, OUT))
                        .collect();
                    self.read_many(&keys, &mut out)?;
                    out.sort_unstable();
                }
            } else {
                self.read(l.normal(o, pt, IN), &mut out)?;
            }
        }
        Ok(union(out, pts.len()))
    }

    /// Every subject (`dir` OUT) or object (IN) of a predicate's pts, from their index vertices.
    pub(super) fn index_all(&mut self, pts: &Pts, dir: u32) -> Result<Vec<u32>> {
        let l = *self.rdf.layout();
        let mut out = Vec::new();
        for &(pt, _) in pts {
            let keys: Vec<_> = self
                .rdf
                .parts()
                .slots(pt, dir)
                .map(|s| l.index(s, pt, dir))
                .collect();
            self.read_many(&keys, &mut out)?;
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    /// The predicates of the active graphs: (their pts, term id), by term id.
    pub(super) fn predicates(&self) -> Vec<(Pts, u32)> {
        let d = self.rdf.dict();
        let mut by: std::collections::BTreeMap<u32, Pts> = Default::default();
        for pt in 0..d.pts() {
            if let Some((PtKind::Predicate, id)) = d.pt(pt) {
                let g = d.pt_graph(pt);
                if self.graphs.contains(&g) {
                    by.entry(id).or_default().push((pt, g));
                }
            }
        }
        by.into_iter().map(|(id, pts)| (pts, id)).collect()
    }

    /// Every term in a subject or object position.
    pub(super) fn nodes(&mut self) -> Result<Vec<u32>> {
        let mut all = Vec::new();
        for (pts, _) in self.predicates() {
            all.extend(self.index_all(&pts, OUT)?);
            all.extend(self.index_all(&pts, IN)?);
        }
        all.sort_unstable();
        all.dedup();
        Ok(all)
    }

    /// The pts of predicate `p` in the active graphs (empty: none has it).
    fn pt_of(&self, p: &NamedNode) -> Pts {
        let d = self.rdf.dict();
        d.id(&Term::NamedNode(p.clone()))
            .map_or(Vec::new(), |id| d.predicate_pts(id, &self.graphs))
    }

    /// Nodes one `p` step from `n` (forward: `n` is the subject), with
    /// duplicates where SPARQL counts them (sequences, alternatives).
    pub(super) fn step(&mut self, p: &Ppe, n: u32, forward: bool) -> Result<Vec<u32>> {
        Ok(match p {
            Ppe::NamedNode(iri) => {
                let pts = self.pt_of(iri);
                if forward {
                    self.objects(n, &pts)?
                } else {
                    self.subjects(n, &pts)?
                }
            }
            Ppe::Reverse(q) => self.step(q, n, !forward)?,
            Ppe::Sequence(a, b) => {
                let (first, second) = if forward { (a, b) } else { (b, a) };
                let mut out = Vec::new();
                for x in self.step(first, n, forward)? {
                    out.extend(self.step(second, x, forward)?);
                }
                out
            }
            Ppe::Alternative(a, b) => {
                let mut out = self.step(a, n, forward)?;
                out.extend(self.step(b, n, forward)?);
                out
            }
            Ppe::ZeroOrOne(q) => {
                let mut out = vec![n];
                out.extend(self.step(q, n, forward)?);
                out.sort_unstable();
                out.dedup();
                out
            }
            Ppe::ZeroOrMore(q) => self.closure(q, n, forward, true)?,
            Ppe::OneOrMore(q) => self.closure(q, n, forward, false)?,
            Ppe::NegatedPropertySet(not) => {
                let d = self.rdf.dict();
                let skip: HashSet<u32> = not
                    .iter()
                    .filter_map(|i| d.id(&Term::NamedNode(i.clone())))
                    .collect();
                let mut out = Vec::new();
                for (pts, pid) in self.predicates() {
                    if !skip.contains(&pid) {
                        out.extend(if forward {
                            self.objects(n, &pts)?
                        } else {
                            self.subjects(n, &pts)?
                        });
                    }
                }
                out
            }
        })
    }

    /// Nodes reachable from `n` by one or more `q` steps (and `n` itself if `zero`).
    fn closure(&mut self, q: &Ppe, n: u32, forward: bool, zero: bool) -> Result<Vec<u32>> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        if zero {
            seen.insert(n);
            out.push(n);
        }
        let mut frontier = vec![n];
        while let Some(x) = frontier.pop() {
            for y in self.step(q, x, forward)? {
                if seen.insert(y) {
                    out.push(y);
                    frontier.push(y);
                }
            }
            self.check_rows(out.len(), "a property path")?;
        }
        Ok(out)
    }

    /// `(s, o)` pairs of path `p` with the ends given or not.
    pub(super) fn path_pairs(
        &mut self,
        p: &Ppe,
        s: Option<u32>,
        o: Option<u32>,
    ) -> Result<Vec<(u32, u32)>> {
        let mut out = Vec::new();
        match (s, o) {
            (Some(s), _) => {
                for x in self.step(p, s, true)? {
                    if o.is_none_or(|o| o == x) {
                        out.push((s, x));
                    }
                }
            }
            (None, Some(o)) => {
                for x in self.step(p, o, false)? {
                    out.push((x, o));
                }
            }
            (None, None) => {
                let starts = match p {
                    Ppe::NamedNode(iri) => {
                        let pts = self.pt_of(iri);
                        self.index_all(&pts, OUT)?
                    }
                    _ => self.nodes()?,
                };
                for s in starts {
                    for x in self.step(p, s, true)? {
                        out.push((s, x));
                    }
                    self.check_rows(out.len(), "a property path")?;
                }
            }
        }
        Ok(out)
    }

    /// Rows of `row` extended by the triple pattern `(s, ?p, o)` with a
    /// variable predicate: one read per predicate from a known end.
    pub(super) fn var_predicate(
        &mut self,
        row: &Row,
        s: End,
        p: usize,
        o: End,
        out: &mut Vec<Row>,
    ) -> Result<()> {
        let get = |e: End| match e {
            End::Id(id) => Some(id),
            End::Slot(k) => row.get(k).copied().flatten(),
            End::Absent => None,
        };
        if matches!(s, End::Absent) || matches!(o, End::Absent) {
            return Ok(());
        }
        let (sv, ov) = (get(s), get(o));
        let pv = row.get(p).copied().flatten();
        for (pts, pid) in self.predicates() {
            if pv.is_some_and(|v| v != pid) {
                continue;
            }
            let pairs: Vec<(u32, u32)> = match (sv, ov) {
                (Some(s), _) => self.objects(s, &pts)?.into_iter().map(|x| (s, x)).collect(),
                (None, Some(o)) => self
                    .subjects(o, &pts)?
                    .into_iter()
                    .map(|x| (x, o))
                    .collect(),
                (None, None) => {
                    let mut v = Vec::new();
                    for s in self.index_all(&pts, OUT)? {
                        v.extend(self.objects(s, &pts)?.into_iter().map(|x| (s, x)));
                    }
                    v
                }
            };
            for (x, y) in pairs {
                if ov.is_some_and(|o| o != y) {
                    continue;
                }
                let mut r = row.clone();
                let ok =
                    bind(&mut r, s, x) && bind(&mut r, End::Slot(p), pid) && bind(&mut r, o, y);
                if ok {
                    out.push(r);
                }
            }
            self.check_rows(out.len(), "a variable predicate")?;
        }
        Ok(())
    }
}

/// An end of a pattern the evaluator matches itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    /// A constant of the data (or one the query made).
    Id(u32),
    /// A variable's slot.
    Slot(usize),
    /// A constant absent from the data: nothing matches.
    Absent,
}

/// Binds `e` to `id` in `r`; false if it holds another value.
pub(super) fn bind(r: &mut Row, e: End, id: u32) -> bool {
    match e {
        End::Id(x) => x == id,
        End::Absent => false,
        End::Slot(k) => {
            if r.len() <= k {
                r.resize(k + 1, None);
            }
            match r[k] {
                Some(x) => x == id,
                None => {
                    r[k] = Some(id);
                    true
                }
            }
        }
    }
}
