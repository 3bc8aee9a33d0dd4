//! The algebra around exploration (SPARQL 1.1, 18): every operator that is
//! not a basic graph pattern, evaluated over solution sequences of term ids.
//!
//! A row is a `Vec<Option<u32>>` indexed by variable slot (one slot per
//! variable name of the query; rows grow as slots are added). Ids below the
//! dictionary's size are the store's terms; terms a query makes (BIND,
//! aggregates, VALUES constants absent from the data) get ids past it in a
//! per-query table, so joins compare ids only.
//!
//! Each pattern is evaluated under a *seed* row whose bindings act as
//! constants (SPARQL's substitution for EXISTS, 18.6): a basic graph pattern
//! turns them into exploration start constants. Basic graph patterns run as
//! [`super::exec`]'s exploration on the store; variable predicates and
//! property paths read the same keys ([`path`]).

mod aggregate;
mod check;
pub(crate) mod expr;
mod forms;
mod func;
mod path;
pub(crate) mod value;

use std::collections::{HashMap, HashSet};

use oxrdf::Term;
use spargebra::algebra::{Expression, GraphPattern, OrderExpression};
use spargebra::term::{GroundTerm, NamedNodePattern, TermPattern, TriplePattern};

use super::exec::{self, Trace};
use super::query::{self, Filter};
use super::Source;
use crate::catalog::Catalog;
use crate::dict::Dictionary;
use crate::{RdfError, Result};
use expr::{Ctx, Env};
use path::End;

pub(crate) use check::check;
pub(crate) use forms::answer;
pub use forms::Answer;

/// One solution: a term id (or unbound) per variable slot.
pub(crate) type Row = Vec<Option<u32>>;

/// A row without its trailing unbound slots (rows of one meaning compare equal).
pub(crate) fn trim(r: &Row) -> &[Option<u32>] {
    let n = r.iter().rposition(Option::is_some).map_or(0, |i| i + 1);
    &r[..n]
}

/// The store's terms and those a query made, by id.
pub(crate) struct Terms<'a> {
    dict: &'a Dictionary,
    extra: Vec<Term>,
    ids: HashMap<Term, u32>,
}

impl<'a> Terms<'a> {
    fn new(dict: &'a Dictionary) -> Self {
        Terms {
            dict,
            extra: Vec::new(),
            ids: HashMap::new(),
        }
    }

    /// The term of `id`.
    pub(crate) fn term(&self, id: u32) -> &Term {
        let n = self.dict.len();
        match self.dict.term(id) {
            Some(t) => t,
            None => &self.extra[id as usize - n],
        }
    }

    /// The id of `t`, made if the data lacks it.
    pub(crate) fn id(&mut self, t: &Term) -> u32 {
        if let Some(id) = self.dict.id(t) {
            return id;
        }
        if let Some(&id) = self.ids.get(t) {
            return id;
        }
        let id = (self.dict.len() + self.extra.len()) as u32;
        self.extra.push(t.clone());
        self.ids.insert(t.clone(), id);
        id
    }
}

/// Evaluates one query's algebra over the store.
pub(crate) struct Evaluator<'a, S: Source> {
    rdf: &'a Catalog,
    workers: &'a mut [S],
    rows_max: usize,
    pub(crate) terms: Terms<'a>,
    slots: HashMap<String, usize>,
    ctx: Ctx,
    pub(crate) trace: Trace,
    /// A failure inside an expression (EXISTS), reported after it.
    error: Option<RdfError>,
    /// Slots BIND has bound, and BNODE(str)'s nodes per solution without them.
    extend_slots: HashSet<usize>,
    bnode_scopes: HashMap<Row, HashMap<String, oxrdf::BlankNode>>,
    /// The active graph: the graphs whose merge patterns match (`None`: the
    /// store's default graph; empty: an empty graph), `[Some(g)]` inside
    /// `GRAPH g`.
    pub(crate) graphs: Vec<Option<u32>>,
    /// The dataset's named graphs (term ids, ascending).
    pub(crate) named: Vec<u32>,
}

/// The environment of an expression over one row.
pub(crate) struct RowEnv<'e, 'a, S: Source> {
    ev: &'e mut Evaluator<'a, S>,
    row: &'e Row,
}

impl<S: Source> Env for RowEnv<'_, '_, S> {
    fn var(&self, name: &str) -> Option<Term> {
        let &k = self.ev.slots.get(name)?;
        let id = self.row.get(k).copied().flatten()?;
        Some(self.ev.terms.term(id).clone())
    }
    fn exists(&mut self, p: &GraphPattern) -> Option<bool> {
        match self.ev.eval(p, self.row) {
            Ok(rows) => Some(!rows.is_empty()),
            Err(e) => {
                self.ev.error.get_or_insert(e);
                None
            }
        }
    }
    fn ctx(&mut self) -> &mut Ctx {
        &mut self.ev.ctx
    }
}

/// Variables every row of `rows` binds (the keys a hash join may use).
fn always_bound(rows: &[Row]) -> Vec<usize> {
    let Some(first) = rows.first() else {
        return Vec::new();
    };
    (0..first.len())
        .filter(|&k| rows.iter().all(|r| r.get(k).is_some_and(Option::is_some)))
        .collect()
}

fn compatible(a: &Row, b: &Row) -> bool {
    a.iter()
        .zip(b.iter())
        .all(|(x, y)| x.is_none() || y.is_none() || x == y)
}

fn merge(a: &Row, b: &Row) -> Row {
    let mut r = a.clone();
    if r.len() < b.len() {
        r.resize(b.len(), None);
    }
    for (k, v) in b.iter().enumerate() {
        if v.is_some() {
            r[k] = *v;
        }
    }
    r
}

/// Rows of a left-side row's matches on the right (by the shared keys).
struct Matcher<'r> {
    keys: Vec<usize>,
    index: HashMap<Vec<u32>, Vec<usize>>,
    right: &'r [Row],
}

impl<'r> Matcher<'r> {
    fn new(left: &[Row], right: &'r [Row]) -> Self {
        let l: HashSet<usize> = always_bound(left).into_iter().collect();
        let keys: Vec<usize> = always_bound(right)
            .into_iter()
            .filter(|k| l.contains(k))
            .collect();
        let mut index: HashMap<Vec<u32>, Vec<usize>> = HashMap::new();
        if !keys.is_empty() {
            for (i, r) in right.iter().enumerate() {
                let k = keys.iter().map(|&k| r[k].expect("always bound")).collect();
                index.entry(k).or_default().push(i);
            }
        }
        Matcher { keys, index, right }
    }

    /// Indexes of right rows compatible with `l`.
    fn matches(&self, l: &Row, out: &mut Vec<usize>) {
        out.clear();
        if self.keys.is_empty() {
            out.extend((0..self.right.len()).filter(|&i| compatible(l, &self.right[i])));
        } else {
            let k: Vec<u32> = self
                .keys
                .iter()
                .map(|&k| l[k].expect("always bound"))
                .collect();
            if let Some(is) = self.index.get(&k) {
                out.extend(
                    is.iter()
                        .copied()
                        .filter(|&i| compatible(l, &self.right[i])),
                );
            }
        }
    }
}

impl<'a, S: Source> Evaluator<'a, S> {
    pub(crate) fn new(
        rdf: &'a Catalog,
        workers: &'a mut [S],
        rows_max: usize,
        base: Option<String>,
    ) -> Self {
        Evaluator {
            rdf,
            workers,
            rows_max,
            terms: Terms::new(rdf.dict()),
            slots: HashMap::new(),
            ctx: Ctx::new(0x5eed, base),
            trace: Trace::default(),
            error: None,
            extend_slots: HashSet::new(),
            bnode_scopes: HashMap::new(),
            graphs: vec![None],
            named: rdf.graphs_with_triples(),
        }
    }

    /// `GRAPH name { inner }` (SPARQL 1.1, 18.6 Graph): `inner` with each
    /// matching named graph as the active graph; a variable name is bound
    /// to the graph afterwards (a join with `{?g -> g}`, so inside `inner`
    /// the variable is as unbound as SPARQL has it).
    fn graph(
        &mut self,
        name: &NamedNodePattern,
        inner: &GraphPattern,
        seed: &Row,
    ) -> Result<Vec<Row>> {
        let (graphs, slot) = match name {
            NamedNodePattern::NamedNode(n) => {
                let id = self.rdf.dict().id(&Term::NamedNode(n.clone()));
                let g = id.filter(|g| self.named.binary_search(g).is_ok());
                (g.into_iter().collect::<Vec<u32>>(), None)
            }
            NamedNodePattern::Variable(v) => {
                let k = self.slot(v.as_str());
                let graphs = match seed.get(k).copied().flatten() {
                    Some(g) if self.named.binary_search(&g).is_ok() => vec![g],
                    Some(_) => Vec::new(),
                    None => self.named.clone(),
                };
                (graphs, Some(k))
            }
        };
        let outer = std::mem::take(&mut self.graphs);
        let mut out = Vec::new();
        let mut result = Ok(());
        for g in graphs {
            self.graphs = vec![Some(g)];
            match self.eval(inner, seed) {
                Ok(rows) => out.extend(rows.into_iter().filter_map(|mut r| {
                    let ok = slot.is_none_or(|k| path::bind(&mut r, End::Slot(k), g));
                    ok.then_some(r)
                })),
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
            if let Err(e) = self.check_rows(out.len(), "GRAPH") {
                result = Err(e);
                break;
            }
        }
        self.graphs = outer;
        result.map(|()| out)
    }

    /// The slot of variable `name` (blank nodes as `_:label`).
    pub(crate) fn slot(&mut self, name: &str) -> usize {
        let n = self.slots.len();
        *self.slots.entry(name.to_string()).or_insert(n)
    }

    fn check_rows(&self, n: usize, what: &str) -> Result<()> {
        if n > self.rows_max {
            return Err(RdfError::TooManySolutions {
                rows_max: self.rows_max,
                operator: what.to_string(),
            });
        }
        Ok(())
    }

    /// Whether `e` is true on `row` (an EXISTS failure is returned).
    fn holds(&mut self, e: &Expression, row: &Row) -> Result<bool> {
        let mut env = RowEnv { ev: self, row };
        let ok = expr::holds(e, &mut env);
        match self.error.take() {
            Some(err) => Err(err),
            None => Ok(ok),
        }
    }

    fn value(&mut self, e: &Expression, row: &Row) -> Result<Option<Term>> {
        let mut env = RowEnv { ev: self, row };
        let v = expr::eval(e, &mut env);
        match self.error.take() {
            Some(err) => Err(err),
            None => Ok(v),
        }
    }

    /// `e` on `row` with BNODE(str)'s nodes of that solution: the row
    /// without what BINDs added names it, so two BINDs of one solution
    /// share nodes and two solutions do not.
    fn value_in_bnode_scope(&mut self, e: &Expression, row: &Row) -> Result<Option<Term>> {
        let mut key = row.clone();
        for &k in &self.extend_slots {
            if let Some(x) = key.get_mut(k) {
                *x = None;
            }
        }
        let key = trim(&key).to_vec();
        let scope = self.bnode_scopes.remove(&key).unwrap_or_default();
        let before = std::mem::replace(&mut self.ctx.bnodes, scope);
        let v = self.value(e, row);
        let scope = std::mem::replace(&mut self.ctx.bnodes, before);
        self.bnode_scopes.insert(key, scope);
        v
    }

    /// The solutions of `p` under `seed` (each extends `seed`).
    pub(crate) fn eval(&mut self, p: &GraphPattern, seed: &Row) -> Result<Vec<Row>> {
        use GraphPattern as G;
        let rows = match p {
            G::Bgp { patterns } => self.bgp(patterns, &[], seed)?,
            G::Path {
                subject,
                path,
                object,
            } => {
                // Constants absent from the data still match zero-length paths.
                let (s, o) = (self.path_end(subject, seed), self.path_end(object, seed));
                let val = |e: End| match e {
                    End::Id(id) => Some(id),
                    _ => None,
                };
                let pairs = self.path_pairs(path, val(s), val(o))?;
                let mut out = Vec::with_capacity(pairs.len());
                for (x, y) in pairs {
                    let mut r = seed.clone();
                    if path::bind(&mut r, s, x) && path::bind(&mut r, o, y) {
                        out.push(r);
                    }
                }
                out
            }
            G::Join { left, right } => {
                let l = self.eval(left, seed)?;
                if l.is_empty() {
                    return Ok(l);
                }
                // A path or a small left side: run the right side from each
                // row's bindings (exploration from constants); else hash join.
                let bound_join = match &**right {
                    G::Path { .. } => true,
                    G::Bgp { .. } => l.len() <= 16,
                    _ => false,
                };
                if bound_join {
                    let mut out = Vec::new();
                    for r in &l {
                        out.extend(self.eval(right, r)?);
                        self.check_rows(out.len(), "a join")?;
                    }
                    out
                } else {
                    let r = self.eval(right, seed)?;
                    self.join(&l, &r)?
                }
            }
            G::LeftJoin {
                left,
                right,
                expression,
            } => {
                let l = self.eval(left, seed)?;
                if l.is_empty() {
                    return Ok(l);
                }
                let r = self.eval(right, seed)?;
                let m = Matcher::new(&l, &r);
                let mut out = Vec::with_capacity(l.len());
                let mut hits = Vec::new();
                for lr in &l {
                    m.matches(lr, &mut hits);
                    let mut any = false;
                    for &i in &hits {
                        let merged = merge(lr, &r[i]);
                        let keep = match expression {
                            Some(e) => self.holds(e, &merged)?,
                            None => true,
                        };
                        if keep {
                            any = true;
                            out.push(merged);
                        }
                    }
                    if !any {
                        out.push(lr.clone());
                    }
                    self.check_rows(out.len(), "OPTIONAL")?;
                }
                out
            }
            G::Filter { expr, inner } => {
                let rows = match &**inner {
                    // A FILTER straight over a pattern runs inside exploration.
                    G::Bgp { patterns }
                        if trim(seed).is_empty()
                            && !expr::has_exists(expr)
                            && patterns
                                .iter()
                                .all(|t| matches!(t.predicate, NamedNodePattern::NamedNode(_))) =>
                    {
                        return self.bgp(patterns, std::slice::from_ref(expr), seed);
                    }
                    _ => self.eval(inner, seed)?,
                };
                let mut out = Vec::with_capacity(rows.len());
                for r in rows {
                    if self.holds(expr, &r)? {
                        out.push(r);
                    }
                }
                out
            }
            G::Union { left, right } => {
                let mut l = self.eval(left, seed)?;
                l.extend(self.eval(right, seed)?);
                l
            }
            G::Extend {
                inner,
                variable,
                expression,
            } => {
                let rows = self.eval(inner, seed)?;
                let k = self.slot(variable.as_str());
                self.extend_slots.insert(k);
                let scoped = expr::calls_bnode(expression);
                let mut out = Vec::with_capacity(rows.len());
                for mut r in rows {
                    let v = if scoped {
                        self.value_in_bnode_scope(expression, &r)?
                    } else {
                        self.value(expression, &r)?
                    };
                    if let Some(t) = v {
                        let id = self.terms.id(&t);
                        // A seeded variable keeps the row only if the values agree.
                        if !path::bind(&mut r, End::Slot(k), id) {
                            continue;
                        }
                    }
                    out.push(r);
                }
                out
            }
            G::Minus { left, right } => {
                let l = self.eval(left, seed)?;
                if l.is_empty() {
                    return Ok(l);
                }
                let r = self.eval(right, seed)?;
                let m = Matcher::new(&l, &r);
                let mut hits = Vec::new();
                let mut out = Vec::with_capacity(l.len());
                for lr in l {
                    m.matches(&lr, &mut hits);
                    // Removed only by a compatible row sharing a bound variable (18.5).
                    let shares = |rr: &Row| {
                        lr.iter()
                            .zip(rr.iter())
                            .any(|(x, y)| x.is_some() && y.is_some())
                    };
                    if !hits.iter().any(|&i| shares(&r[i])) {
                        out.push(lr);
                    }
                }
                out
            }
            G::Values {
                variables,
                bindings,
            } => {
                let slots: Vec<usize> = variables.iter().map(|v| self.slot(v.as_str())).collect();
                let mut out = Vec::with_capacity(bindings.len());
                'rows: for b in bindings {
                    let mut r = seed.clone();
                    for (&k, v) in slots.iter().zip(b) {
                        if let Some(v) = v {
                            let t: Term = match v {
                                GroundTerm::NamedNode(n) => n.clone().into(),
                                GroundTerm::Literal(l) => l.clone().into(),
                                #[allow(unreachable_patterns)]
                                _ => continue 'rows,
                            };
                            let id = self.terms.id(&t);
                            if !path::bind(&mut r, End::Slot(k), id) {
                                continue 'rows;
                            }
                        }
                    }
                    out.push(r);
                }
                out
            }
            G::OrderBy { inner, expression } => {
                let rows = self.eval(inner, seed)?;
                let mut keyed = Vec::with_capacity(rows.len());
                for r in rows {
                    let mut k = Vec::with_capacity(expression.len());
                    for o in expression {
                        let (OrderExpression::Asc(e) | OrderExpression::Desc(e)) = o;
                        k.push(self.value(e, &r)?);
                    }
                    keyed.push((k, r));
                }
                keyed.sort_by(|(a, _), (b, _)| {
                    for (i, o) in expression.iter().enumerate() {
                        let c = value::order(a[i].as_ref(), b[i].as_ref());
                        let c = match o {
                            OrderExpression::Asc(_) => c,
                            OrderExpression::Desc(_) => c.reverse(),
                        };
                        if c.is_ne() {
                            return c;
                        }
                    }
                    std::cmp::Ordering::Equal
                });
                keyed.into_iter().map(|(_, r)| r).collect()
            }
            G::Project { inner, variables } => {
                // A subquery sees only the seed's projected variables (its others are its own).
                let slots: Vec<usize> = variables.iter().map(|v| self.slot(v.as_str())).collect();
                let mut inner_seed: Row = Vec::new();
                for &k in &slots {
                    if let Some(v) = seed.get(k).copied().flatten() {
                        path::bind(&mut inner_seed, End::Slot(k), v);
                    }
                }
                let rows = self.eval(inner, &inner_seed)?;
                rows.into_iter()
                    .map(|r| {
                        let mut out = seed.clone();
                        for &k in &slots {
                            if let Some(v) = r.get(k).copied().flatten() {
                                path::bind(&mut out, End::Slot(k), v);
                            }
                        }
                        out
                    })
                    .collect()
            }
            G::Distinct { inner } => {
                let rows = self.eval(inner, seed)?;
                let mut seen = HashSet::with_capacity(rows.len());
                rows.into_iter()
                    .filter(|r| seen.insert(trim(r).to_vec()))
                    .collect()
            }
            // REDUCED permits, but does not require, removing duplicates.
            G::Reduced { inner } => self.eval(inner, seed)?,
            G::Slice {
                inner,
                start,
                length,
            } => {
                let rows = self.eval(inner, seed)?;
                rows.into_iter()
                    .skip(*start)
                    .take(length.unwrap_or(usize::MAX))
                    .collect()
            }
            G::Group {
                inner,
                variables,
                aggregates,
            } => {
                let rows = self.eval(inner, seed)?;
                self.group(rows, variables, aggregates, seed)?
            }
            G::Graph { name, inner } => self.graph(name, inner, seed)?,
            G::Service { .. } => {
                unreachable!("refused by check before the query runs")
            }
            #[allow(unreachable_patterns)]
            _ => return Err(RdfError::Unsupported(format!("the graph pattern {p}"))),
        };
        self.check_rows(rows.len(), "a graph pattern")?;
        Ok(rows)
    }

    fn join(&mut self, l: &[Row], r: &[Row]) -> Result<Vec<Row>> {
        let m = Matcher::new(l, r);
        let mut out = Vec::new();
        let mut hits = Vec::new();
        for lr in l {
            m.matches(lr, &mut hits);
            out.extend(hits.iter().map(|&i| merge(lr, &r[i])));
            self.check_rows(out.len(), "a join")?;
        }
        Ok(out)
    }

    /// A pattern end under `seed`: a constant (the seed's value for a bound variable) or a slot.
    fn end(&mut self, t: &TermPattern, seed: &Row) -> End {
        let name = match t {
            TermPattern::Variable(v) => v.as_str().to_string(),
            TermPattern::BlankNode(b) => format!("_:{}", b.as_str()),
            TermPattern::NamedNode(n) => return self.const_end(&n.clone().into()),
            TermPattern::Literal(l) => return self.const_end(&l.clone().into()),
            #[allow(unreachable_patterns)]
            _ => return End::Absent,
        };
        let k = self.slot(&name);
        match seed.get(k).copied().flatten() {
            Some(id) => End::Id(id),
            None => End::Slot(k),
        }
    }

    fn path_end(&mut self, t: &TermPattern, seed: &Row) -> End {
        let c: Term = match t {
            TermPattern::NamedNode(n) => n.clone().into(),
            TermPattern::Literal(l) => l.clone().into(),
            _ => return self.end(t, seed),
        };
        End::Id(self.terms.id(&c))
    }

    fn const_end(&self, t: &Term) -> End {
        match self.rdf.dict().id(t) {
            Some(id) => End::Id(id),
            None => End::Absent,
        }
    }

    /// A basic graph pattern: its constant-predicate triples by exploration
    /// (with `filters` pushed into it), then any variable-predicate triples
    /// row by row.
    fn bgp(
        &mut self,
        patterns: &[TriplePattern],
        filters: &[Expression],
        seed: &Row,
    ) -> Result<Vec<Row>> {
        let mut q = query::Query::default();
        let mut later = Vec::new();
        let as_end = |ev: &mut Self, q: &mut query::Query, t: &TermPattern| -> query::End {
            let name = match t {
                TermPattern::Variable(v) => v.as_str().to_string(),
                TermPattern::BlankNode(b) => format!("_:{}", b.as_str()),
                TermPattern::NamedNode(n) => return query::End::Const(n.clone().into()),
                TermPattern::Literal(l) => return query::End::Const(l.clone().into()),
                #[allow(unreachable_patterns)]
                _ => unreachable!("quoted triples are not parsed"),
            };
            let k = ev.slot(&name);
            match seed.get(k).copied().flatten() {
                Some(id) => query::End::Const(ev.terms.term(id).clone()),
                None => query::End::Var(q.var(name)),
            }
        };
        for t in patterns {
            let pred = match &t.predicate {
                NamedNodePattern::NamedNode(n) => Some(n.clone()),
                NamedNodePattern::Variable(v) => {
                    let k = self.slot(v.as_str());
                    match seed
                        .get(k)
                        .copied()
                        .flatten()
                        .map(|id| self.terms.term(id).clone())
                    {
                        Some(Term::NamedNode(n)) => Some(n),
                        Some(_) => return Ok(Vec::new()),
                        None => None,
                    }
                }
            };
            match pred {
                Some(p) => {
                    let s = as_end(self, &mut q, &t.subject);
                    let o = as_end(self, &mut q, &t.object);
                    q.patterns.push(query::Pattern {
                        s,
                        p,
                        o,
                        text: t.to_string(),
                    });
                }
                None => later.push(t),
            }
        }
        for f in filters {
            let f = Filter::new(&mut q, f.clone());
            q.filters.push(f);
        }
        q.projection = (0..q.vars.len()).collect();
        if self.graphs != [None] {
            q.graphs = Some(self.graphs.clone());
        }
        let plan = exec::plan(&q, self.rdf);
        let (rows, trace) = exec::execute(self.rdf, &q, &plan, self.workers, self.rows_max)?;
        if self.trace.steps.is_empty() {
            self.trace.start = trace.start;
        }
        self.trace.steps.extend(trace.steps);
        self.trace.reads += trace.reads;
        let slots: Vec<usize> = q.vars.iter().map(|v| self.slot(v)).collect();
        let mut out: Vec<Row> = rows
            .into_iter()
            .map(|r| {
                let mut row = seed.clone();
                for (&k, v) in slots.iter().zip(r) {
                    if let Some(id) = v {
                        path::bind(&mut row, End::Slot(k), id);
                    }
                }
                row
            })
            .collect();
        for t in later {
            let NamedNodePattern::Variable(pv) = &t.predicate else {
                unreachable!("only variable predicates are left")
            };
            let p = self.slot(pv.as_str());
            let mut next = Vec::new();
            for r in &out {
                let s = self.end(&t.subject, r);
                let o = self.end(&t.object, r);
                self.var_predicate(r, s, p, o, &mut next)?;
            }
            out = next;
        }
        Ok(out)
    }
}

/// What an expression evaluated to in a row, decoded (for forms).
pub(crate) fn decode(terms: &Terms<'_>, row: &Row, k: usize) -> Option<Term> {
    row.get(k)
        .copied()
        .flatten()
        .map(|id| terms.term(id).clone())
}
