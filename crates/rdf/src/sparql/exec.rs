//! Planning and graph exploration (Wukong OSDI'16, 5).
//!
//! The planner orders the triple patterns greedily: at each point it takes
//! the pattern that keeps the fewest estimated rows (a check of two known
//! ends first, then the smallest fan-out from a known end, an index start
//! last), so every step but a start extends rows through a known vertex.
//! Execution keeps a table of bindings and, step by step, reads one store
//! value per row: the neighbours of the known end along the predicate. New
//! variables widen the table; known ones are checked against the (sorted)
//! list, and each FILTER runs as soon as its variables are bound, so rows
//! are pruned on the way.
//!
//! A query starting from a constant runs on the machine homing it (its
//! store slot's owner now); one starting from an index (a predicate's
//! subjects, a class's instances) is forked to every machine, each starting
//! from the index parts of the store slots it owns in the slot table as the
//! query starts, and the rows are joined, as Wukong does. Every slot's part
//! is read by exactly one fork, so a table that changes under the query
//! costs locality, never rows (any machine reads any key).
//!
//! A pattern over a merge of graphs (FROM, `docs/design.md` "Named
//! graphs") reads its predicate's pt in each graph that has it and takes
//! the union of the lists without duplicates; in one graph it is one read,
//! as without graphs.

use std::collections::HashMap;

use locus_store::VertexId;
use oxrdf::Term;

use super::eval::expr::{self, Ctx, VarEnv};
use super::query::{End, Query};
use super::{source_of, Source};
use crate::catalog::Catalog;
use crate::layout::{IN, OUT};
use crate::{RdfError, Result};

/// Intermediate rows a query may keep at most, by default.
pub const ROWS_MAX: usize = 1 << 24;

/// An end resolved against the dictionary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Node {
    Var(usize),
    Id(u32),
}

/// How a step reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    /// From the subject: its out-list along the predicate.
    Subject,
    /// From the object: its in-list (for `rdf:type`, the class's type index).
    Object,
    /// Neither end known: the predicate index's subjects, then as `Subject`.
    Index,
}

#[derive(Debug, Clone)]
struct Step {
    s: Node,
    o: Node,
    /// The predicate's pt in each active graph that has it, with the graph.
    pts: Vec<(u32, Option<u32>)>,
    is_type: bool,
    via: Via,
    text: String,
    /// Filters to run once this step is done.
    filters: Vec<usize>,
}

/// A query planned against one store.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    steps: Vec<Step>,
    /// The store slot of the start constant (run on its owner), or `None`:
    /// fork over every machine, each from the index parts of its slots.
    pub(crate) start: Option<u32>,
    /// Filters with a variable no pattern binds (run at the end).
    late_filters: Vec<usize>,
    /// A constant is absent from the data: no rows.
    pub(crate) empty: bool,
}

/// What a run did, for reports.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    /// Each step's pattern and the rows after it (summed over forks).
    pub steps: Vec<(String, usize)>,
    /// Machine the query started on (`None`: forked to every machine).
    pub start: Option<usize>,
    /// Store values read.
    pub reads: u64,
}

impl Plan {
    /// Whether the first step reads from the constant `id`.
    pub(crate) fn starts_from(&self, id: u32) -> bool {
        if self.steps.first().is_some_and(|st| st.pts.len() != 1) {
            return false;
        }
        self.steps.first().is_some_and(|st| match st.via {
            Via::Subject => st.s == Node::Id(id),
            Via::Object => !st.is_type && st.o == Node::Id(id),
            Via::Index => false,
        })
    }
}

pub(crate) fn plan(q: &Query, rdf: &Catalog) -> Plan {
    let dict = rdf.dict();
    let stats = rdf.stats();
    let mut empty = false;
    let resolve = |e: &End, empty: &mut bool| match e {
        End::Var(v) => Node::Var(*v),
        End::Const(t) => match dict.id(t) {
            Some(id) => Node::Id(id),
            None => {
                *empty = true;
                Node::Id(0)
            }
        },
    };
    let mut pending: Vec<Step> = Vec::new();
    let graphs = q.active_graphs();
    let type_term = dict.id(&oxrdf::vocab::rdf::TYPE.into());
    for p in &q.patterns {
        let (s, o) = (resolve(&p.s, &mut empty), resolve(&p.o, &mut empty));
        let pid = dict.id(&Term::NamedNode(p.p.clone()));
        let pts = pid.map_or(Vec::new(), |id| dict.predicate_pts(id, graphs));
        if pts.is_empty() {
            empty = true;
        }
        pending.push(Step {
            s,
            o,
            pts,
            // rdf:type by its term: in a named graph it has that graph's pt.
            is_type: pid.is_some() && pid == type_term && !empty,
            via: Via::Index,
            text: p.text.clone(),
            filters: Vec::new(),
        });
    }
    if empty {
        // No rows; and an absent predicate has no statistics to index (an empty store has none).
        return Plan {
            steps: Vec::new(),
            start: None,
            late_filters: Vec::new(),
            empty,
        };
    }
    let per = |n: u64, d: u64| n as f64 / d.max(1) as f64;
    let mut bound = vec![false; q.vars.len()];
    let known = |n: Node, bound: &[bool]| match n {
        Node::Id(_) => true,
        Node::Var(v) => bound[v],
    };
    let mut steps = Vec::new();
    let mut est = 1.0f64;
    while !pending.is_empty() {
        let mut best: Option<(f64, usize, Via)> = None;
        for (i, st) in pending.iter().enumerate() {
            // Over a merge, the sizes of every graph's pt added up.
            let sum = |v: &[u64]| st.pts.iter().map(|&(pt, _)| v[pt as usize]).sum::<u64>();
            let (triples, subjects, objects) = (
                sum(&stats.triples),
                sum(&stats.subjects),
                sum(&stats.objects),
            );
            let (sk, ok) = (known(st.s, &bound), known(st.o, &bound));
            let (cost, via) = if sk && ok {
                (est * 0.5, Via::Subject)
            } else if sk {
                (est * per(triples, subjects), Via::Subject)
            } else if ok {
                let fan = match (st.is_type, st.o) {
                    (true, Node::Id(c)) => st
                        .pts
                        .iter()
                        .filter_map(|&(_, g)| dict.type_pt_in(c, g))
                        .map(|t| stats.subjects[t as usize] as f64)
                        .sum(),
                    _ => per(triples, objects),
                };
                (est * fan, Via::Object)
            } else {
                (est * triples.max(1) as f64 * 4.0, Via::Index)
            };
            if best.is_none_or(|b| cost < b.0) {
                best = Some((cost, i, via));
            }
        }
        let (cost, i, via) = best.expect("pending is not empty");
        let mut st = pending.remove(i);
        st.via = via;
        est = cost.max(1.0);
        for n in [st.s, st.o] {
            if let Node::Var(v) = n {
                bound[v] = true;
            }
        }
        steps.push(st);
    }
    // Each filter after the first step that binds all its variables.
    let mut late_filters = Vec::new();
    let mut seen = vec![false; q.vars.len()];
    let mut when = vec![None; q.filters.len()];
    for (k, st) in steps.iter().enumerate() {
        for n in [st.s, st.o] {
            if let Node::Var(v) = n {
                seen[v] = true;
            }
        }
        for (f, e) in q.filters.iter().enumerate() {
            if when[f].is_none() && e.vars.iter().all(|&v| seen[v]) {
                when[f] = Some(k);
            }
        }
    }
    for (f, w) in when.into_iter().enumerate() {
        match w {
            Some(k) => steps[k].filters.push(f),
            None => late_filters.push(f),
        }
    }
    let start = steps.first().and_then(|st| match st.via {
        Via::Subject => match st.s {
            Node::Id(id) => Some(rdf.layout().slot(id)),
            Node::Var(_) => None,
        },
        Via::Object if !st.is_type => match st.o {
            Node::Id(id) => Some(rdf.layout().slot(id)),
            Node::Var(_) => None,
        },
        _ => None,
    });
    Plan {
        steps,
        start,
        late_filters,
        empty,
    }
}

/// Bindings: one column per bound variable, `rows` rows of `width` ids.
/// Before the first step the table has one row of width 0.
struct Table {
    col_of: Vec<Option<usize>>,
    width: usize,
    rows: usize,
    data: Vec<u32>,
}

impl Table {
    fn row(&self, r: usize) -> &[u32] {
        &self.data[r * self.width..(r + 1) * self.width]
    }
}

/// Rows whose keys a step reads in one call of its source.
const ROWS_PER_READ: usize = 4096;

struct Run<'a, S: Source> {
    rdf: &'a Catalog,
    q: &'a Query,
    worker: &'a mut S,
    /// The store slots whose index parts the first step reads (a forked
    /// run: the slots its machine owns), or `None`: every slot's.
    part: Option<Vec<u32>>,
    /// Whole indexes `(pt, dir)` read after the first step, kept for the
    /// next row (each is one read per store slot).
    whole: HashMap<(u32, u32), Vec<u32>>,
    rows_max: usize,
    list: Vec<u32>,
    reads: u64,
    /// A prepared query's start constant and the constant of this run (`None`: as planned).
    swap: Option<(u32, u32)>,
    /// Every key read, in order, when the caller wants them.
    log: Option<&'a mut Vec<VertexId>>,
}

impl<S: Source> Run<'_, S> {
    fn read(&mut self, key: VertexId, out: &mut Vec<u32>) -> Result<()> {
        self.reads += 1;
        if let Some(log) = self.log.as_mut() {
            log.push(key);
        }
        self.worker.list(key, out)?;
        Ok(())
    }

    /// Reads `keys` as [`Run::read`] reads each, in one call of the source
    /// (a cluster's reads them in one round trip); `ends` gets where each
    /// list ends in `out`.
    fn read_many(
        &mut self,
        keys: &[VertexId],
        out: &mut Vec<u32>,
        ends: &mut Vec<usize>,
    ) -> Result<()> {
        self.reads += keys.len() as u64;
        if let Some(log) = self.log.as_mut() {
            log.extend_from_slice(keys);
        }
        self.worker.lists(keys, out, ends)
    }

    /// `n`, with a prepared query's start constant replaced by this run's.
    fn node(&self, n: Node) -> Node {
        match (n, self.swap) {
            (Node::Id(id), Some((from, to))) if id == from => Node::Id(to),
            _ => n,
        }
    }

    /// Index `(pt, dir)`: the parts of this run's slots at its first step,
    /// else every slot's part (read once per run); parts the catalog knows
    /// empty are not read.
    fn read_index(&mut self, first: bool, pt: u32, dir: u32, out: &mut Vec<u32>) -> Result<()> {
        let l = *self.rdf.layout();
        let rdf = self.rdf;
        let parts = rdf.parts();
        let from = out.len();
        match (first, self.part.take()) {
            (true, Some(slots)) => {
                let keys: Vec<VertexId> = slots
                    .iter()
                    .filter(|&&s| parts.holds(s, pt, dir))
                    .map(|&s| l.index(s, pt, dir))
                    .collect();
                self.part = Some(slots);
                self.read_many(&keys, out, &mut Vec::new())?;
            }
            (_, part) => {
                self.part = part;
                if let Some(all) = self.whole.get(&(pt, dir)) {
                    out.extend_from_slice(all);
                    return Ok(());
                }
                let mut all = Vec::new();
                let keys: Vec<VertexId> =
                    parts.slots(pt, dir).map(|s| l.index(s, pt, dir)).collect();
                self.read_many(&keys, &mut all, &mut Vec::new())?;
                all.sort_unstable();
                out.extend_from_slice(&all);
                self.whole.insert((pt, dir), all);
                return Ok(());
            }
        }
        // Each part is sorted; the union must be too (members are binary-searched).
        out[from..].sort_unstable();
        Ok(())
    }

    fn step(&mut self, k: usize, st: &Step, t: Table) -> Result<Table> {
        let l = *self.rdf.layout();
        let is_type = st.is_type;
        let np = st.pts.len();
        let value = |n: Node, t: &Table, row: &[u32]| match n {
            Node::Id(id) => Some(id),
            Node::Var(v) => t.col_of[v].map(|c| row[c]),
        };
        // The variable this step binds, if any (the far end of the read).
        let mut out = Table {
            col_of: t.col_of.clone(),
            width: t.width,
            rows: 0,
            data: Vec::new(),
        };
        let new_var = |n: Node, t: &Table| match n {
            Node::Var(v) if t.col_of[v].is_none() => Some(v),
            _ => None,
        };
        let (s, o) = (self.node(st.s), self.node(st.o));
        let (near, far) = match st.via {
            Via::Subject | Via::Index => (s, o),
            Via::Object => (o, s),
        };
        let index_var = if st.via == Via::Index {
            new_var(s, &t)
        } else {
            None
        };
        let mut binds = Vec::new();
        if let Some(v) = index_var {
            binds.push(v);
        }
        let far_new = match far {
            Node::Var(v) if t.col_of[v].is_none() && !binds.contains(&v) => Some(v),
            _ => None,
        };
        binds.extend(far_new);
        for &v in &binds {
            out.col_of[v] = Some(out.width);
            out.width += 1;
        }
        let mut starts = Vec::new();
        let mut list = std::mem::take(&mut self.list);
        // A step that reads one normal key per row reads them ROWS_PER_READ
        // rows at a time, in one call of the source (one round trip on a
        // cluster): `pre` holds the lists of rows `pre_from..`, `ends` where
        // each ends.
        let batched = st.via != Via::Index && !(st.via == Via::Object && is_type);
        let dir = if st.via == Via::Object { IN } else { OUT };
        let (mut pre, mut ends, mut keys) = (Vec::new(), Vec::new(), Vec::new());
        let mut pre_from = 0;
        for r in 0..t.rows {
            let row = t.row(r);
            // The near ends to explore from for this row.
            starts.clear();
            if st.via == Via::Index {
                for &(pt, _) in &st.pts {
                    self.read_index(k == 0, pt, OUT, &mut starts)?;
                }
                if np > 1 {
                    starts.sort_unstable();
                    starts.dedup();
                }
            } else {
                starts.push(value(near, &t, row).expect("the near end is known"));
            }
            if batched && r == pre_from + ends.len() / np {
                pre_from = r;
                keys.clear();
                pre.clear();
                ends.clear();
                // `np` keys a row (a pt per graph of the merge), rows in order.
                for rr in r..t.rows.min(r + ROWS_PER_READ) {
                    let n = value(near, &t, t.row(rr)).expect("the near end is known");
                    keys.extend(st.pts.iter().map(|&(pt, _)| l.normal(n, pt, dir)));
                }
                self.read_many(&keys, &mut pre, &mut ends)?;
            }
            for &n in &starts {
                list.clear();
                match (st.via, is_type) {
                    _ if batched => {
                        let i = (r - pre_from) * np;
                        let from = if i == 0 { 0 } else { ends[i - 1] };
                        list.extend_from_slice(&pre[from..ends[i + np - 1]]);
                    }
                    (Via::Object, true) => {
                        for &(_, g) in &st.pts {
                            if let Some(c) = self.rdf.dict().type_pt_in(n, g) {
                                self.read_index(k == 0, c, OUT, &mut list)?;
                            }
                        }
                    }
                    (Via::Object, false) => {
                        for &(pt, _) in &st.pts {
                            self.read(l.normal(n, pt, IN), &mut list)?;
                        }
                    }
                    _ => {
                        for &(pt, _) in &st.pts {
                            self.read(l.normal(n, pt, OUT), &mut list)?;
                        }
                    }
                }
                // A merge's lists: one sorted list without duplicates (a
                // triple in two graphs is one triple of the merge).
                if np > 1 {
                    list.sort_unstable();
                    list.dedup();
                }
                let emit = |far_id: u32, out: &mut Table| {
                    out.rows += 1;
                    out.data.extend_from_slice(row);
                    if index_var.is_some() {
                        out.data.push(n);
                    }
                    if far_new.is_some() {
                        out.data.push(far_id);
                    }
                };
                // The far end: known from the row, or the near end itself (?x p ?x).
                let far_known = match far {
                    Node::Id(id) => Some(id),
                    Node::Var(v) if Some(v) == index_var => Some(n),
                    Node::Var(v) => t.col_of[v].map(|c| row[c]),
                };
                match far_known {
                    Some(f) => {
                        if list.binary_search(&f).is_ok() {
                            emit(f, &mut out);
                        }
                    }
                    None => list.iter().for_each(|&f| emit(f, &mut out)),
                }
                if out.rows > self.rows_max {
                    return Err(RdfError::TooManyRows {
                        rows_max: self.rows_max,
                        step: k + 1,
                        pattern: st.text.clone(),
                    });
                }
            }
        }
        self.list = list;
        if !st.filters.is_empty() {
            out = self.filter(out, &st.filters);
        }
        Ok(out)
    }

    fn filter(&self, t: Table, fs: &[usize]) -> Table {
        let dict = self.rdf.dict();
        let mut out = Table {
            col_of: t.col_of.clone(),
            width: t.width,
            rows: 0,
            data: Vec::with_capacity(t.data.len()),
        };
        let mut ctx = Ctx::new(0x5eed, None);
        for r in 0..t.rows {
            let row = t.row(r);
            let lookup = |name: &str| {
                let v = self.q.vars.iter().position(|v| v == name)?;
                t.col_of[v].and_then(|c| dict.term(row[c]).cloned())
            };
            let mut env = VarEnv {
                lookup,
                ctx: &mut ctx,
            };
            if fs
                .iter()
                .all(|&f| expr::holds(&self.q.filters[f].expr, &mut env))
            {
                out.rows += 1;
                out.data.extend_from_slice(row);
            }
        }
        out
    }
}

/// Runs `plan`; returns the projected rows as ids (`None`: unbound) and the trace.
pub(crate) fn execute<S: Source>(
    rdf: &Catalog,
    q: &Query,
    plan: &Plan,
    workers: &mut [S],
    rows_max: usize,
) -> Result<(Vec<Vec<Option<u32>>>, Trace)> {
    let mut trace = Trace {
        start: None,
        steps: plan.steps.iter().map(|s| (s.text.clone(), 0)).collect(),
        ..Trace::default()
    };
    if plan.empty {
        return Ok((Vec::new(), trace));
    }
    let l = *rdf.layout();
    let runs: Vec<(usize, Option<Vec<u32>>)> = match plan.start {
        Some(slot) => {
            let m = source_of(workers, l.index(slot, 0, OUT));
            trace.start = Some(m);
            vec![(m, None)]
        }
        None if plan.steps.is_empty() => vec![(0, None)],
        None => {
            // Each slot to one fork: its owner's, as the sources see the table now.
            let mut slots = vec![Vec::new(); workers.len()];
            for s in 0..l.slots() {
                slots[source_of(workers, l.index(s, 0, OUT))].push(s);
            }
            slots
                .into_iter()
                .enumerate()
                .filter(|(_, part)| !part.is_empty())
                .map(|(m, part)| (m, Some(part)))
                .collect()
        }
    };
    let mut result = Vec::new();
    for (machine, part) in runs {
        let mut run = Run {
            rdf,
            q,
            worker: &mut workers[machine],
            part,
            whole: HashMap::new(),
            rows_max,
            list: Vec::new(),
            reads: 0,
            swap: None,
            log: None,
        };
        let mut t = Table {
            col_of: vec![None; q.vars.len()],
            width: 0,
            rows: 1,
            data: Vec::new(),
        };
        for (k, st) in plan.steps.iter().enumerate() {
            t = run.step(k, st, t)?;
            trace.steps[k].1 += t.rows;
        }
        if !plan.late_filters.is_empty() {
            t = run.filter(t, &plan.late_filters);
        }
        trace.reads += run.reads;
        for r in 0..t.rows {
            result.push(
                q.projection
                    .iter()
                    .map(|&v| t.col_of[v].map(|c| t.data[r * t.width + c]))
                    .collect(),
            );
        }
    }
    Ok((result, trace))
}

/// What one run of a prepared query did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Rows found (before DISTINCT, OFFSET and LIMIT).
    pub rows: usize,
    /// Store values read.
    pub reads: u64,
}

/// Runs `plan`, planned for the start constant `from`, with `to` in its
/// place, on `worker` (which must act as `to`'s home); counts rows only.
/// Every key read is appended to `log` when given.
#[allow(clippy::too_many_arguments)]
pub(crate) fn execute_swapped<S: Source>(
    rdf: &Catalog,
    q: &Query,
    plan: &Plan,
    worker: &mut S,
    (from, to): (u32, u32),
    rows_max: usize,
    log: Option<&mut Vec<VertexId>>,
) -> Result<Outcome> {
    debug_assert!(
        plan.start.is_some(),
        "a prepared plan starts from a constant"
    );
    let mut run = Run {
        rdf,
        q,
        worker,
        part: None,
        whole: HashMap::new(),
        rows_max,
        list: Vec::new(),
        reads: 0,
        swap: Some((from, to)),
        log,
    };
    let mut t = Table {
        col_of: vec![None; q.vars.len()],
        width: 0,
        rows: 1,
        data: Vec::new(),
    };
    for (k, st) in plan.steps.iter().enumerate() {
        t = run.step(k, st, t)?;
        if t.rows == 0 {
            break;
        }
    }
    if !plan.late_filters.is_empty() {
        t = run.filter(t, &plan.late_filters);
    }
    Ok(Outcome {
        rows: t.rows,
        reads: run.reads,
    })
}
