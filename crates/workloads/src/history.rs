//! Per-vertex histories and their linearizability checker (Wing & Gong
//! with memoisation, as in Lowe's and Porcupine's checkers), against a
//! sequential model of one adjacency list. The one checker of the store's
//! simulation (`store/tests/sim_linearizability.rs`), the simulated cluster
//! of nodes (`node/tests/sim_cluster.rs`) and the fault lab's runs over
//! processes (`locus bench faults`).
//!
//! An operation whose outcome is unknown (its node crashed before it
//! answered, or it failed after it may have taken effect) is recorded with
//! [`Ret::Unknown`] and response `u64::MAX`: it may take effect at any
//! point after its invocation, or never (linearized after everything).

use std::collections::HashSet;
use std::fmt::Write as _;

use locus_fabric::MachineId;
use locus_store::VertexId;

/// Search nodes one vertex's check may visit before it gives up, loudly.
pub const SEARCH_NODES_MAX: u64 = 2_000_000;
/// Operations one vertex's history may hold (the search keeps a `u128` set).
pub const HISTORY_OPS_MAX: usize = 128;

/// What an operation asked for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Call {
    /// `neighbors(v, k)` (`get` for `usize::MAX`).
    Read {
        /// How many neighbours were asked for.
        k: usize,
    },
    /// `put(v, list)`: the list replaced.
    Put(Vec<VertexId>),
    /// `insert_edge(v, u)`.
    Insert(VertexId),
    /// `delete_edge(v, u)`.
    Delete(VertexId),
    /// `delete_vertex(v)`.
    Remove,
}

/// What an operation returned.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Ret {
    /// A read's neighbours.
    List(Vec<VertexId>),
    /// A read found no vertex (it was removed).
    Missing,
    /// What `delete_vertex` removed (`None`: no entry).
    Removed(Option<Vec<VertexId>>),
    /// Whether an insert or delete changed the list.
    Bool(bool),
    /// A put was done.
    Done,
    /// Not known: the operation may have taken effect, or not.
    Unknown,
}

/// One completed operation on one vertex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The vertex.
    pub vertex: VertexId,
    /// Client index, or `usize::MAX` for the reads after the run.
    pub client: usize,
    /// The machine that served it.
    pub machine: MachineId,
    /// What it asked.
    pub call: Call,
    /// What it returned.
    pub ret: Ret,
    /// Global order of invocations and responses (exact real-time order).
    pub invoke: u64,
    /// Its response's place in that order (`u64::MAX`: none, unknown).
    pub response: u64,
    /// Time of the invocation (ns, the run's clock).
    pub invoke_ns: u64,
    /// Time of the response (ns).
    pub response_ns: u64,
}

/// A vertex's state: its adjacency list as a sequence, or no entry.
pub type State = Option<Vec<VertexId>>;

/// The sequential specification of one vertex.
pub fn apply(state: &mut State, call: &Call) -> Ret {
    match (call, state.as_mut()) {
        (Call::Read { .. }, None) => Ret::Missing,
        (Call::Read { k }, Some(l)) => Ret::List(l.iter().take(*k).copied().collect()),
        (Call::Put(list), _) => {
            *state = Some(list.clone());
            Ret::Done
        }
        (Call::Insert(u), None) => {
            *state = Some(vec![*u]);
            Ret::Bool(true)
        }
        (Call::Insert(u), Some(l)) => {
            let absent = !l.contains(u);
            if absent {
                l.push(*u);
            }
            Ret::Bool(absent)
        }
        (Call::Delete(_), None) => Ret::Bool(false),
        (Call::Delete(u), Some(l)) => {
            let present = l.contains(u);
            l.retain(|x| x != u);
            Ret::Bool(present)
        }
        (Call::Remove, _) => Ret::Removed(state.take()),
    }
}

// ---------------------------------------------------------------------------
// Checker (Wing & Gong with memoisation, as in Lowe's and Porcupine's checkers)

/// What the search found.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A linearization: indexes into the history, in order.
    Linearizable(Vec<usize>),
    /// None exists; the longest linearizable prefix the search found.
    Violation {
        /// Indexes of the longest prefix.
        deepest: Vec<usize>,
    },
    /// The search visited more than `SEARCH_NODES_MAX` nodes.
    TooLong {
        /// Nodes visited.
        nodes: u64,
    },
}

struct Search<'a> {
    ops: &'a [Event],
    all: u128,
    nodes: u64,
    nodes_max: u64,
    /// (done set, list) configurations known to lead nowhere.
    dead: HashSet<(u128, State)>,
    order: Vec<usize>,
    deepest: Vec<usize>,
}

impl Search<'_> {
    fn run(&mut self, done: u128, state: &State) -> Option<bool> {
        if done == self.all {
            return Some(true);
        }
        self.nodes += 1;
        if self.nodes > self.nodes_max {
            return None;
        }
        if self.dead.contains(&(done, state.clone())) {
            return Some(false);
        }
        let pending = |i: &usize| done & (1u128 << i) == 0;
        // An op may go next only if no pending op responded before it was invoked.
        let horizon = (0..self.ops.len())
            .filter(pending)
            .map(|i| self.ops[i].response)
            .min()
            .expect("some op is pending");
        for i in (0..self.ops.len()).filter(pending) {
            let op = &self.ops[i];
            if op.invoke > horizon {
                continue;
            }
            let mut next = state.clone();
            let ret = apply(&mut next, &op.call);
            if op.ret != Ret::Unknown && ret != op.ret {
                continue;
            }
            self.order.push(i);
            if self.order.len() > self.deepest.len() {
                self.deepest.clone_from(&self.order);
            }
            if self.run(done | 1u128 << i, &next)? {
                return Some(true);
            }
            self.order.pop();
        }
        self.dead.insert((done, state.clone()));
        Some(false)
    }
}

/// Searches for a linearization of `ops` (one vertex) from `initial`.
pub fn check_history(initial: &[VertexId], ops: &[Event], nodes_max: u64) -> Verdict {
    let initial: State = Some(initial.to_vec());
    assert!(
        ops.len() <= HISTORY_OPS_MAX,
        "{} ops on one vertex: more than the checker's {HISTORY_OPS_MAX}",
        ops.len()
    );
    let mut s = Search {
        ops,
        all: if ops.len() == 128 {
            u128::MAX
        } else {
            (1u128 << ops.len()) - 1
        },
        nodes: 0,
        nodes_max,
        dead: HashSet::new(),
        order: Vec::new(),
        deepest: Vec::new(),
    };
    match s.run(0, &initial) {
        Some(true) => Verdict::Linearizable(s.order),
        Some(false) => Verdict::Violation { deepest: s.deepest },
        None => Verdict::TooLong { nodes: s.nodes },
    }
}

/// A call as text.
pub fn show_call(c: &Call) -> String {
    match c {
        Call::Read { k: usize::MAX } => "get".into(),
        Call::Read { k } => format!("neighbors(k={k})"),
        Call::Put(l) => format!("put({l:?})"),
        Call::Insert(u) => format!("insert({u})"),
        Call::Delete(u) => format!("delete({u})"),
        Call::Remove => "delete_vertex".into(),
    }
}

/// A return as text.
pub fn show_ret(r: &Ret) -> String {
    match r {
        Ret::List(l) => format!("{l:?}"),
        Ret::Missing => "None (vertex missing)".into(),
        Ret::Bool(b) => b.to_string(),
        Ret::Done => "ok".into(),
        Ret::Removed(None) => "removed nothing (no entry)".into(),
        Ret::Removed(Some(l)) => format!("removed {l:?}"),
        Ret::Unknown => "unknown (no answer, or an error after it may have applied)".into(),
    }
}

/// The history as a table, in invocation order.
pub fn show_history(initial: &[VertexId], ops: &[Event]) -> String {
    let mut s = format!("  initial list {initial:?}\n");
    for (i, e) in ops.iter().enumerate() {
        let who = if e.client == usize::MAX {
            format!("after-run read on m{}", e.machine)
        } else {
            format!("client {} on m{}", e.client, e.machine)
        };
        let _ = writeln!(
            s,
            "  #{i:<3} seq {:>5}..{:<5} t {:>9}..{:<9} ns  {who:<22} {} -> {}",
            e.invoke,
            e.response,
            e.invoke_ns,
            e.response_ns,
            show_call(&e.call),
            show_ret(&e.ret)
        );
    }
    s
}

/// Checks every vertex's history; the error is the report of the first bad one.
pub fn check_all(
    seed: u64,
    histories: &[Vec<Event>],
    initial_list: impl Fn(VertexId) -> Vec<VertexId>,
) -> Result<(), String> {
    for (v, ops) in histories.iter().enumerate() {
        let v = v as VertexId;
        let initial = initial_list(v);
        if ops.len() > HISTORY_OPS_MAX {
            return Err(format!(
                "seed {seed}: vertex {v}: {} ops, more than the checker's {HISTORY_OPS_MAX}; \
                 shrink the per-seed work",
                ops.len()
            ));
        }
        match check_history(&initial, ops, SEARCH_NODES_MAX) {
            Verdict::Linearizable(_) => {}
            Verdict::Violation { deepest } => {
                let mut state = Some(initial.clone());
                for &i in &deepest {
                    apply(&mut state, &ops[i].call);
                }
                return Err(format!(
                    "seed {seed}: vertex {v}: history is not linearizable \
                     (replay with LOCUS_SIM_SEED={seed})\n{}  longest linearizable prefix: {:?} \
                     (ops by #), list then {state:?}",
                    show_history(&initial, ops),
                    deepest
                ));
            }
            Verdict::TooLong { nodes } => {
                return Err(format!(
                    "seed {seed}: vertex {v}: the linearizability search gave up after {nodes} \
                     nodes (SEARCH_NODES_MAX); shrink the per-seed work\n{}",
                    show_history(&initial, ops)
                ));
            }
        }
    }
    Ok(())
}
