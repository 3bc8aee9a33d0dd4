//! The clients of a fault run: threads on the host, client i sending its
//! reads to member `i % members` (the members change as servers join and
//! leave), all on one small window of checked vertices so that operations
//! contend. Each operation's invocation and
//! completion take places in one global sequence (exact real-time order in
//! this process), as the simulated twin records them.
//!
//! Updates go to the vertex's home by the client's slot table (with
//! `[durability]` only the home takes them); reads and two-hop queries to
//! the client's own server. The table is fetched again after `WRONG_HOME`
//! or a refused connection (its owner may have left); a table naming a
//! server the client does not know makes it ask SERVERS (the client
//! library does), as does a read server that joined since.
//!
//! Outcomes: a reply is a known result; `NOT_READY` (a fenced or starting
//! node refuses before it runs anything, N1), `WRONG_HOME` and a connection
//! that could not be opened are failures with no effect; a deadline, a
//! broken connection or any other error may or may
//! not have taken effect: an update is then recorded as [`Ret::Unknown`], a
//! read is left out of the history (it changed nothing). Every failure keeps
//! its reason. A failed operation is retried at most [`RETRIES_MAX`] times,
//! each retry a new operation, counted.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use locus_client::proto::{ErrorCode, Reply, Request};
use locus_client::{Client, ClientError};
use locus_workloads::history::{Call, Event, Ret, HISTORY_OPS_MAX};

use super::elastic::Members;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Operations one checked vertex takes before it retires (the final read
/// makes one more; the checker takes [`HISTORY_OPS_MAX`]).
pub const VERTEX_OPS_MAX: u32 = 100;
/// Updates of unknown outcome one vertex takes before it retires: each may
/// apply at any later point, and the search grows with their number.
pub const VERTEX_UNKNOWN_MAX: u32 = 6;
/// Share of a client's picks among its own vertices (see `Window::claim`).
const OWN_PCT: u32 = 60;
/// Retries of one failed operation.
pub const RETRIES_MAX: u32 = 2;
/// Pause before a retry.
const RETRY_PAUSE: Duration = Duration::from_millis(100);
/// Neighbour ids inserted start here, one fresh id per insert in the run.
pub const FRESH_BASE: u32 = 100_000_000;
/// Checked vertex v is loaded with the list `[marker(v)]`, marker j with
/// `[TARGET_BASE + j]`, so a two-hop query from v has one answer no update
/// removes (deletes only take inserted ids).
pub const MARKER_BASE: u32 = 20_000_000;
/// See [`MARKER_BASE`].
pub const TARGET_BASE: u32 = 40_000_000;

/// Checked vertex `i` (of the pool `0..pool`) is `i * CHECKED_STRIDE`: an
/// odd stride spreads a window's vertices over the slots, and so over the
/// servers, whatever slots a join or leave moves (a rebalance moves each
/// giver's lowest slots: with ids `0..pool` the checked vertices would sit
/// in the slots a join takes, and a leave would drain none of them).
/// `65_536 * 293` stays below [`MARKER_BASE`].
pub const CHECKED_STRIDE: u32 = 293;

/// The vertex id of checked vertex `i`.
pub fn checked_vertex(i: u32) -> u32 {
    i * CHECKED_STRIDE
}

const _: () = assert!((1u64 << 16) * (CHECKED_STRIDE as u64) < MARKER_BASE as u64);

/// The marker of checked vertex `v`: one per client, shared by the vertices
/// that client favours (see `Window::claim`). Markers live through the run
/// and are read by every two-hop query, mostly from their client's server:
/// the values the coordinator migrates (a checked vertex retires too soon).
pub fn marker(v: u32, clients: usize) -> u32 {
    MARKER_BASE + v % clients as u32
}

/// The one vertex two hops from checked vertex `v`.
pub fn target(v: u32, clients: usize) -> u32 {
    TARGET_BASE + v % clients as u32
}

const _: () = assert!((VERTEX_OPS_MAX as usize) < HISTORY_OPS_MAX);

/// What kind of operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    /// INSERT_EDGE of a fresh id.
    Insert,
    /// DELETE_EDGE of an id inserted earlier on the vertex.
    Delete,
    /// NEIGHBORS (all).
    Read,
    /// KHOP, two hops.
    TwoHop,
}

/// How an operation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A reply.
    Ok,
    /// Refused before it ran: no effect.
    Failed(String),
    /// May or may not have taken effect.
    Unknown(String),
}

/// One operation as the run saw it.
#[derive(Debug, Clone)]
pub struct Op {
    /// The history event (`ret` is `Ret::Unknown` for an unknown update).
    pub event: Event,
    /// Its kind.
    pub kind: OpKind,
    /// How it ended.
    pub outcome: Outcome,
    /// Whether it retried a failed operation.
    pub retry: bool,
    /// A two-hop query's answer.
    pub two_hop: Option<Vec<u32>>,
}

/// The shared record of a run: the sequence and every operation.
pub struct Recorder {
    seq: AtomicU64,
    t0: Instant,
    ops: Mutex<Vec<Op>>,
    retries: AtomicU64,
}

impl Recorder {
    /// An empty record whose clock starts now.
    pub fn new() -> Recorder {
        Recorder {
            seq: AtomicU64::new(0),
            t0: Instant::now(),
            ops: Mutex::new(Vec::new()),
            retries: AtomicU64::new(0),
        }
    }

    /// The next place in the sequence and the time (ns since the start).
    pub fn tick(&self) -> (u64, u64) {
        let s = self.seq.fetch_add(1, Ordering::SeqCst);
        (s, self.t0.elapsed().as_nanos() as u64)
    }

    /// Nanoseconds since the start.
    pub fn now_ns(&self) -> u64 {
        self.t0.elapsed().as_nanos() as u64
    }

    fn push(&self, op: Op) {
        self.ops.lock().unwrap_or_else(|e| e.into_inner()).push(op);
    }

    /// Every operation recorded, and the retries counted.
    pub fn finish(self) -> (Vec<Op>, u64) {
        (
            self.ops.into_inner().unwrap_or_else(|e| e.into_inner()),
            self.retries.into_inner(),
        )
    }
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

struct Slot {
    v: u32,
    ops: u32,
    unknown: u32,
    /// Ids inserted on v (acknowledged or not), candidates for deletes.
    inserted: Vec<u32>,
}

/// The active window of checked vertices.
pub struct Window {
    active: Mutex<Vec<Slot>>,
    next: AtomicU32,
    pool: u32,
    fresh: AtomicU32,
    /// Set when the pool of loaded vertices ran out.
    pub exhausted: AtomicBool,
}

impl Window {
    /// A window of `size` vertices over the loaded checked vertices `0..pool`.
    pub fn new(size: u32, pool: u32) -> Window {
        let size = size.min(pool);
        Window {
            active: Mutex::new(
                (0..size)
                    .map(|i| Slot {
                        v: checked_vertex(i),
                        ops: 0,
                        unknown: 0,
                        inserted: Vec::new(),
                    })
                    .collect(),
            ),
            next: AtomicU32::new(size),
            pool,
            fresh: AtomicU32::new(FRESH_BASE),
            exhausted: AtomicBool::new(false),
        }
    }

    /// How many checked vertices ever joined (`checked_vertex(0..used)`).
    pub fn used(&self) -> u32 {
        self.next.load(Ordering::SeqCst).min(self.pool)
    }

    /// Picks the next operation of client `me` of `clients`: on `on` (a
    /// retry) while it is active, else on a random active vertex, with
    /// [`OWN_PCT`]% of picks among the vertices `v % clients == me` (so that
    /// each vertex has a client, and a server, that reads it most: what
    /// makes the coordinator migrate it). `None`: no vertex left.
    fn claim(
        &self,
        rng: &mut Xoshiro256PlusPlus,
        me: (usize, usize),
        on: Option<(u32, Call)>,
    ) -> Option<(u32, Call)> {
        let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        let own: Vec<usize> = (0..active.len())
            .filter(|&i| active[i].v as usize % me.1 == me.0)
            .collect();
        let i = match &on {
            Some((v, _)) => active.iter().position(|s| s.v == *v)?,
            None if active.is_empty() => return None,
            None if !own.is_empty() && rng.gen_range(0..100) < OWN_PCT => {
                own[rng.gen_range(0..own.len())]
            }
            None => rng.gen_range(0..active.len()),
        };
        let slot = &mut active[i];
        let call = match on {
            Some((_, call)) => call,
            None => match rng.gen_range(0..100) {
                0..=39 => Call::Insert(self.fresh.fetch_add(1, Ordering::SeqCst)),
                40..=59 if !slot.inserted.is_empty() => {
                    Call::Delete(slot.inserted[rng.gen_range(0..slot.inserted.len())])
                }
                40..=59 => Call::Insert(self.fresh.fetch_add(1, Ordering::SeqCst)),
                60..=84 => Call::Read { k: usize::MAX },
                // Two hops: recorded as a read of k = 2 hops (checked apart).
                _ => Call::Read { k: TWO_HOP_K },
            },
        };
        if let Call::Insert(u) = call {
            slot.inserted.push(u);
        }
        let v = slot.v;
        slot.ops += 1;
        if slot.ops >= VERTEX_OPS_MAX {
            self.retire(&mut active, i);
        }
        Some((v, call))
    }

    /// Notes an update of unknown outcome on `v`; retires v past the limit.
    fn unknown(&self, v: u32) {
        let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = active.iter().position(|s| s.v == v) {
            active[i].unknown += 1;
            if active[i].unknown >= VERTEX_UNKNOWN_MAX {
                self.retire(&mut active, i);
            }
        }
    }

    fn retire(&self, active: &mut Vec<Slot>, i: usize) {
        active.swap_remove(i);
        let i = self.next.fetch_add(1, Ordering::SeqCst);
        if i < self.pool {
            active.push(Slot {
                v: checked_vertex(i),
                ops: 0,
                unknown: 0,
                inserted: Vec::new(),
            });
        } else {
            self.exhausted.store(true, Ordering::SeqCst);
        }
    }
}

/// Marks a two-hop query in a [`Call::Read`] while it is being made; never
/// enters a history.
const TWO_HOP_K: usize = usize::MAX - 2;

/// One client thread until `stop` is set.
#[allow(clippy::too_many_arguments)]
pub fn run_client(
    index: usize,
    clients: usize,
    members: &Members,
    client: &Client,
    window: &Window,
    rec: &Recorder,
    seed: u64,
    stop: &AtomicBool,
) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ (index as u64).wrapping_mul(0x9e37));
    while !stop.load(Ordering::SeqCst) {
        let Some((v, call)) = window.claim(&mut rng, (index, clients), None) else {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        let server = members.pick(index);
        if server as usize >= client.machines() {
            // It joined after this client read the cluster file.
            let _ = client.learn_servers(members.pick(index + 1));
        }
        let mut failed = one(index, server, client, window, rec, v, call.clone(), false);
        let mut retries = 0;
        while failed && retries < RETRIES_MAX && !stop.load(Ordering::SeqCst) {
            std::thread::sleep(RETRY_PAUSE);
            let Some((v, call)) = window.claim(&mut rng, (index, clients), Some((v, call.clone())))
            else {
                break;
            };
            rec.retries.fetch_add(1, Ordering::SeqCst);
            retries += 1;
            failed = one(index, server, client, window, rec, v, call, true);
        }
    }
}

/// One operation, recorded; true if it failed.
#[allow(clippy::too_many_arguments)]
fn one(
    index: usize,
    server: u8,
    client: &Client,
    window: &Window,
    rec: &Recorder,
    v: u32,
    call: Call,
    retry: bool,
) -> bool {
    let (kind, req) = match &call {
        Call::Insert(u) => (
            OpKind::Insert,
            Request::InsertEdge {
                vertex: v,
                neighbor: *u,
            },
        ),
        Call::Delete(u) => (
            OpKind::Delete,
            Request::DeleteEdge {
                vertex: v,
                neighbor: *u,
            },
        ),
        Call::Read { k } if *k == TWO_HOP_K => (
            OpKind::TwoHop,
            Request::Khop {
                vertex: v,
                hops: 2,
                k: 1000,
            },
        ),
        _ => (OpKind::Read, Request::Neighbors { vertex: v, k: 0 }),
    };
    // With [durability] an update is taken only at the vertex's home (which
    // logs it); reads and two-hop queries go to the client's own server.
    let read_server = server;
    let server = match kind {
        OpKind::Insert | OpKind::Delete => client.home(v),
        OpKind::Read | OpKind::TwoHop => server,
    };
    let (invoke, invoke_ns) = rec.tick();
    let r = client.call(server, &req, None);
    let (response, response_ns) = rec.tick();
    if matches!(&r, Err(e) if e.code() == Some(ErrorCode::WrongHome)) {
        // A slot moved: the next operation routes by the newer table.
        let _ = client.refresh_slot_table(server);
    } else if matches!(&r, Err(ClientError::Unavailable { reason, .. }) if reason.starts_with("cannot connect:"))
        && matches!(kind, OpKind::Insert | OpKind::Delete)
    {
        // The home may have left (its slots moved away first): ask the
        // client's own read server, then the others, for the table.
        let _ = client.refresh_slot_table(read_server);
    }
    let (ret, outcome, two_hop) = classify(kind, r);
    if kind != OpKind::Read && kind != OpKind::TwoHop && matches!(outcome, Outcome::Unknown(_)) {
        window.unknown(v);
    }
    let failed = outcome != Outcome::Ok;
    rec.push(Op {
        event: Event {
            vertex: v,
            client: index,
            machine: server,
            call: if kind == OpKind::TwoHop {
                Call::Read { k: 0 }
            } else {
                call
            },
            ret,
            invoke,
            response: if matches!(outcome, Outcome::Unknown(_)) {
                u64::MAX
            } else {
                response
            },
            invoke_ns,
            response_ns,
        },
        kind,
        outcome,
        retry,
        two_hop,
    });
    failed
}

fn classify(kind: OpKind, r: Result<Reply, ClientError>) -> (Ret, Outcome, Option<Vec<u32>>) {
    match (kind, r) {
        (OpKind::Insert | OpKind::Delete, Ok(Reply::Changed(c))) => {
            (Ret::Bool(c), Outcome::Ok, None)
        }
        (OpKind::Read, Ok(Reply::Neighbors(ids))) => (Ret::List(ids), Outcome::Ok, None),
        (OpKind::Read, Err(e)) if e.code() == Some(ErrorCode::UnknownVertex) => {
            (Ret::Missing, Outcome::Ok, None)
        }
        (OpKind::TwoHop, Ok(Reply::Khop(k))) => (Ret::Unknown, Outcome::Ok, Some(k.distinct)),
        (_, Ok(other)) => (
            Ret::Unknown,
            Outcome::Unknown(format!("unexpected reply {other:?}")),
            None,
        ),
        (_, Err(e)) if refused_before_running(&e) => {
            (Ret::Unknown, Outcome::Failed(e.to_string()), None)
        }
        (_, Err(e)) => (Ret::Unknown, Outcome::Unknown(e.to_string()), None),
    }
}

/// Whether `e` says the request never ran: a fenced or starting node's
/// `NOT_READY` (N1), a `WRONG_HOME` refusal, or a connection that could not
/// be opened (the client sends the frame only on an open connection).
fn refused_before_running(e: &ClientError) -> bool {
    match e {
        ClientError::Unavailable { reason, .. } => reason.starts_with("cannot connect:"),
        _ => matches!(e.code(), Some(ErrorCode::NotReady | ErrorCode::WrongHome)),
    }
}
