//! What a node does for each client request (docs/protocol.md section 3),
//! on a session's worker acting as this node's machine. Every failure
//! becomes an error reply naming this node; nothing here panics on input.
//! Transport-free: the server's TCP connections and the simulated
//! cluster's clients call [`Node::handle`] alike. Deadlines are on the
//! fabric's clock (`Port::now_ns`), simulated time in a simulation.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;

use locus_client::proto::{ErrorCode, KhopReply, Reply, Request, FRAME_BYTES_MAX, LIST_ABSENT};
use locus_fabric::counting::{Counting, Locality};
use locus_fabric::{Fabric, FabricError, Fencing, Port};
use locus_store::addr::Addr;
use locus_store::{HopReads, KhopLimits, StoreError};

use locus_store::Worker;

use super::Node;

pub use locus_store::FRONTIER_MAX;

/// A client connection's state at a node: its worker (made on first use).
pub struct Session<F: Fabric> {
    worker: Option<Worker<Counting<F>>>,
}

impl<F: Fabric> Session<F> {
    pub(super) fn new() -> Self {
        Session { worker: None }
    }

    /// This session's worker, made on first use.
    pub fn worker(&mut self, node: &Node<F>) -> locus_store::Result<&mut Worker<Counting<F>>> {
        if self.worker.is_none() {
            self.worker = Some(node.store.worker(node.me)?);
        }
        Ok(self.worker.as_mut().expect("just made"))
    }

    /// Nanoseconds on the fabric's clock (the clock deadlines are on).
    pub fn now_ns(&mut self, node: &Node<F>) -> locus_store::Result<u64> {
        Ok(self.worker(node)?.port().now_ns())
    }
}

/// The error code of a store failure.
pub fn code_of(e: &StoreError) -> ErrorCode {
    match e {
        StoreError::RegionFull { .. } | StoreError::TableFull { .. } => ErrorCode::Full,
        StoreError::ValueTooLarge { .. } => ErrorCode::TooLarge,
        StoreError::Fabric(FabricError::PeerUnavailable { .. })
        | StoreError::ServiceStopped { .. } => ErrorCode::PeerUnavailable,
        StoreError::Overloaded { .. } => ErrorCode::Busy,
        // The client fetches the slot table again and asks the owner.
        StoreError::Moved { .. }
        | StoreError::NotOwnedYet { .. }
        | StoreError::AheadOfTable { .. } => ErrorCode::WrongHome,
        StoreError::Forwarded { reason, .. } if reason.contains("full") => ErrorCode::Full,
        _ => ErrorCode::Internal,
    }
}

impl<F: Fabric> Node<F> {
    /// Prefixes `what` with this node's label, as every error message is.
    pub fn named(&self, what: &str) -> String {
        format!("{}: {what}", self.label)
    }

    /// An error reply naming this node.
    pub fn error(&self, code: ErrorCode, what: impl AsRef<str>) -> Reply {
        Reply::Error {
            code,
            message: self.named(what.as_ref()),
        }
    }

    pub(super) fn store_error(&self, e: &StoreError) -> Reply {
        self.error(code_of(e), e.to_string())
    }

    fn past(&self, s: &mut Session<F>, deadline_ns: u64, what: &str) -> Option<Reply> {
        let now = match s.now_ns(self) {
            Ok(n) => n,
            Err(e) => return Some(self.store_error(&e)),
        };
        (now > deadline_ns)
            .then(|| self.error(ErrorCode::Deadline, format!("deadline passed {what}")))
    }
}

impl<F: Fabric + Fencing> Node<F> {
    /// Answers one request on session `s`, by `deadline_ns` on the fabric's
    /// clock ([`Session::now_ns`]). HELLO and STATS are the transport's:
    /// answered here with an error. A fenced node answers `NOT_READY` (N1),
    /// checked per request: a thread that notices the fence later is too late.
    pub fn handle(&self, s: &mut Session<F>, req: Request, deadline_ns: u64) -> Reply {
        if let Some(why) = self.fenced() {
            return self.error(ErrorCode::NotReady, why);
        }
        if let Some(r) = self.past(s, deadline_ns, "before the request started") {
            return r;
        }
        // While a PROMOTE puts a failed-over slot's lists in (issue 60),
        // this node answers no data request: some lists are in, some not.
        let _gate =
            match &req {
                Request::Move { .. } | Request::Ping | Request::Slots => None,
                _ => match self.promoting.enter() {
                    Some(g) => Some(g),
                    None => return self.error(
                        ErrorCode::WrongHome,
                        "this server is taking over slots of a failed server (a failover); retry",
                    ),
                },
            };
        let r = match req {
            Request::Hello { .. } => Ok(self.error(ErrorCode::Invalid, "HELLO was already said")),
            Request::Stats => Ok(self.error(
                ErrorCode::Invalid,
                "STATS is answered by the server process, not the node",
            )),
            Request::Servers => Ok(self.error(
                ErrorCode::Invalid,
                "SERVERS is answered by the server process, not the node",
            )),
            Request::Ping => Ok(Reply::Pong),
            Request::Slots => Ok(Reply::Slots {
                table: self.store.homes().table().encode(),
                hints: self.move_hints(),
            }),
            // Reads are idempotent: one retry after a peer error, since the
            // first operation on a connection to a restarted peer fails and
            // the next one reconnects (Pragh 5 recovery, `recovery.rs`).
            Request::Neighbors { vertex, k } => match self.neighbors(s, vertex, k) {
                Err(e) if peer_error(&e) => self.neighbors(s, vertex, k),
                r => r,
            },
            Request::StaleNeighbors { vertex, k } => match self.stale_neighbors(s, vertex, k) {
                Err(e) if peer_error(&e) => self.stale_neighbors(s, vertex, k),
                r => r,
            },
            Request::Lists { vertices } => match self.lists(s, &vertices) {
                Err(e) if peer_error(&e) => self.lists(s, &vertices),
                r => r,
            },
            Request::Put { vertex, ids } => self.update(s, vertex, Edit::Put(ids)),
            Request::InsertEdge { vertex, neighbor } => {
                self.update(s, vertex, Edit::Insert(neighbor))
            }
            Request::DeleteEdge { vertex, neighbor } => {
                self.update(s, vertex, Edit::Delete(neighbor))
            }
            Request::DeleteVertex { vertex } => self.update(s, vertex, Edit::Remove),
            Request::Khop { vertex, hops, k } => match self.khop(s, vertex, hops, k, deadline_ns) {
                Err(e) if peer_error(&e) => self.khop(s, vertex, hops, k, deadline_ns),
                r => r,
            },
            Request::Load { vertices } => self.load(s, vertices, deadline_ns),
            Request::Migrate { vertex } => self.migrate(s, vertex),
            Request::Where { vertex } => self.locate(s, vertex),
            Request::Move {
                step,
                peer,
                slots,
                table,
                keys,
            } => Ok(self.move_step(s, step, peer, &slots, &table, &keys)),
        };
        r.unwrap_or_else(|e| self.store_error(&e))
    }

    /// One vertex update. Without durability: applied as is. With it (see
    /// `durable.rs`, D1 and D2), only at `v`'s home, under `v`'s stripe
    /// lock: `v`'s list is read, the edit's new list (or removal) logged and
    /// made durable, and only then applied, so no reader ever sees a change
    /// a crash could lose (the simulated cluster found a read of an insert
    /// that a crash then lost when the log followed memory). An edit that
    /// changes nothing logs nothing, but its reply still waits for whatever
    /// was logged before (the answer may depend on it). A record that cannot
    /// be made durable is answered with an error, and nothing is applied; an
    /// edit that fails after its record is durable is answered with an error
    /// (in doubt: it takes effect at the latest when the log is replayed).
    fn update(&self, s: &mut Session<F>, v: u32, edit: Edit) -> locus_store::Result<Reply> {
        let Some(d) = &self.durable else {
            return edit.apply(s.worker(self)?, v);
        };
        let home = self.store.owner(v);
        if home != self.me {
            return Ok(self.error(
                ErrorCode::WrongHome,
                format!("vertex {v} is homed on server {home}; with [durability] updates go to the home, which logs them"),
            ));
        }
        let w = s.worker(self)?;
        // Before the record (design M5): a move of v's slot waits for this
        // update, or this update is refused before it logs anything.
        let _op = w.enter_home_op(v)?;
        let _stripe = d.lock(v, &mut || w.relax());
        let current = w.get(v)?;
        // V3: a slot served here ahead of the table creates and removes no
        // key (a new part counts) until the commit; refused before the log.
        let max = self.store.config().part_neighbors_max.max(1) as usize;
        let parts = |l: Option<&Vec<u32>>| l.map_or(0, |l| l.len().div_ceil(max).max(1));
        let had = parts(current.as_ref());
        let (new, reply) = edit.outcome(current);
        if let Some(n) = &new {
            if n.is_none() || parts(n.as_ref()) > had {
                w.check_not_ahead(locus_store::Key::part(v, 0))?;
            }
        }
        if new.is_some() {
            if let Some(why) = self.backups_down(w, std::iter::once(v)) {
                return Ok(self.error(ErrorCode::PeerUnavailable, why));
            }
        }
        let logged = match &new {
            None => Ok(d.last_lsn()),
            Some(Some(list)) => d.log([(v, list.as_slice())].into_iter()),
            Some(None) => d.log_removed(&[v]),
        };
        if let Err(e) = logged.and_then(|lsn| d.wait(lsn)) {
            return Ok(self.error(
                ErrorCode::Internal,
                format!(
                    "vertex {v}: the update could not be made durable ({e}); nothing was applied"
                ),
            ));
        }
        let change = match &new {
            None => return Ok(reply),
            Some(l) => [(v, l.as_deref())],
        };
        // R1: every backup of v's slot has the record before anyone sees it.
        if let Err(why) = self.replicate(w, &change) {
            return Ok(self.error(
                ErrorCode::Internal,
                format!("vertex {v}: the update is logged here but {why}; not applied (in doubt: it takes effect only if this server's log is replayed while it still homes the vertex)"),
            ));
        }
        match edit.apply(w, v) {
            Ok(r) if r == reply => Ok(r),
            Ok(r) => Err(locus_store::StoreError::Config(format!(
                "vertex {v}: the update answered {r:?} where its logged outcome is {reply:?}: \
                 an update of it bypassed its home's stripe lock"
            ))),
            Err(e) => {
                self.in_doubt.note(std::iter::once(v));
                Ok(self.error(
                    code_of(&e),
                    format!("vertex {v}: the update is logged but applying it failed ({e}); it takes effect when the log is replayed"),
                ))
            }
        }
    }

    fn unknown(&self, v: u32) -> Reply {
        self.error(ErrorCode::UnknownVertex, format!("vertex {v} has no entry"))
    }

    fn neighbors(&self, s: &mut Session<F>, v: u32, k: u32) -> locus_store::Result<Reply> {
        let k = if k == 0 { usize::MAX } else { k as usize };
        let mut out = Vec::new();
        if !s.worker(self)?.neighbors(v, k, &mut out)? {
            return Ok(self.unknown(v));
        }
        if let Some(too_large) = self.past_a_frame(v, out.len()) {
            return Ok(too_large);
        }
        Ok(Reply::Neighbors(out))
    }

    /// TOO_LARGE if `n` neighbours of `v` do not fit one reply frame.
    fn past_a_frame(&self, v: u32, n: usize) -> Option<Reply> {
        (n * 4 + 64 > FRAME_BYTES_MAX).then(|| {
            self.error(
                ErrorCode::TooLarge,
                format!("vertex {v} has {n} neighbours, past one reply frame; ask for fewer (k)"),
            )
        })
    }

    /// STALE_NEIGHBORS (`--read stale-ok`, issue 60 requirement 4): from
    /// this node's backup map if the installed table has it back `v`'s
    /// slot (a copy that may lag the primary by the updates in flight, and
    /// that a failover may have left behind), else as NEIGHBORS reads it,
    /// at the primary. The reply says which.
    fn stale_neighbors(&self, s: &mut Session<F>, v: u32, k: u32) -> locus_store::Result<Reply> {
        let t = self.store.homes().current();
        if self.backup.is_none() || !t.is_backup(t.slot_of(v), self.me) {
            return Ok(match self.neighbors(s, v, k)? {
                Reply::Neighbors(ids) => Reply::StaleNeighbors {
                    from_backup: false,
                    ids,
                },
                other => other,
            });
        }
        let Some(mut ids) = self.backup_list(v) else {
            return Ok(self.unknown(v));
        };
        if k > 0 {
            ids.truncate(k as usize);
        }
        if let Some(too_large) = self.past_a_frame(v, ids.len()) {
            return Ok(too_large);
        }
        Ok(Reply::StaleNeighbors {
            from_backup: true,
            ids,
        })
    }

    /// LISTS: every list read with the reads posted together
    /// (`Worker::get_many`), refused whole if the answer is past a frame.
    fn lists(&self, s: &mut Session<F>, vertices: &[u32]) -> locus_store::Result<Reply> {
        let got = s.worker(self)?.get_many(vertices)?;
        let total: usize = got.iter().flatten().map(Vec::len).sum();
        if (total + vertices.len()) * 4 + 64 > FRAME_BYTES_MAX {
            return Ok(self.error(
                ErrorCode::TooLarge,
                format!(
                    "{} vertices with {total} neighbours in all are past one reply frame; ask for fewer",
                    vertices.len()
                ),
            ));
        }
        let mut ids = Vec::with_capacity(total);
        let lens = got
            .into_iter()
            .map(|l| match l {
                Some(l) => {
                    ids.extend_from_slice(&l);
                    l.len() as u32
                }
                None => LIST_ABSENT,
            })
            .collect();
        Ok(Reply::Lists { lens, ids })
    }

    fn khop(
        &self,
        s: &mut Session<F>,
        v: u32,
        hops: u8,
        k: u32,
        deadline_ns: u64,
    ) -> locus_store::Result<Reply> {
        let w = s.worker(self)?;
        let t = w.port().totals();
        let before = [
            t.ops(Locality::Local),
            t.ops(Locality::Remote),
            t.bytes(Locality::Local),
            t.bytes(Locality::Remote),
        ];
        let t0 = w.port().now_ns();
        // The k-hop checks the deadline between hops.
        let limits = KhopLimits {
            frontier_max: FRONTIER_MAX,
            deadline_ns: Some(deadline_ns),
        };
        let mut frontier = Vec::new();
        match w.k_hop(
            v,
            hops as u32,
            k as usize,
            HopReads::Pipelined,
            limits,
            &mut frontier,
        ) {
            Ok(h) if !h.found => return Ok(self.unknown(v)),
            Ok(_) => {}
            Err(e @ StoreError::FrontierTooLarge { .. }) => {
                return Ok(self.error(ErrorCode::TooLarge, e.to_string()))
            }
            Err(e @ StoreError::DeadlinePassed { .. }) => {
                return Ok(self.error(ErrorCode::Deadline, e.to_string()))
            }
            Err(e) => return Err(e),
        }
        let w = s.worker(self)?;
        let elapsed_ns = w.port().now_ns().saturating_sub(t0);
        let t = w.port().totals();
        let with_repeats = frontier.len() as u64;
        let mut distinct = frontier;
        distinct.sort_unstable();
        distinct.dedup();
        if distinct.len() * 4 + 128 > FRAME_BYTES_MAX {
            return Ok(self.error(
                ErrorCode::TooLarge,
                format!(
                    "{} distinct vertices do not fit one reply frame; lower k or hops",
                    distinct.len()
                ),
            ));
        }
        Ok(Reply::Khop(KhopReply {
            with_repeats,
            elapsed_ns,
            local_ops: t.ops(Locality::Local) - before[0],
            remote_ops: t.ops(Locality::Remote) - before[1],
            local_bytes: t.bytes(Locality::Local) - before[2],
            remote_bytes: t.bytes(Locality::Remote) - before[3],
            distinct,
        }))
    }

    /// LOAD: validate the whole batch, then apply it; if applying fails
    /// part-way, put back what was changed (docs/protocol.md).
    fn load(
        &self,
        s: &mut Session<F>,
        vertices: Vec<(u32, Vec<u32>)>,
        deadline_ns: u64,
    ) -> locus_store::Result<Reply> {
        let me = self.me;
        let entries: Vec<u32> = vertices.iter().map(|(v, _)| *v).collect();
        // Merge repeated vertices, keeping first-seen order.
        let mut order: Vec<u32> = Vec::new();
        let mut adds: HashMap<u32, Vec<u32>> = HashMap::new();
        for (v, ids) in vertices {
            let home = self.store.owner(v);
            if home != me {
                return Ok(self.error(
                    ErrorCode::WrongHome,
                    format!("vertex {v} is homed on server {home}, not here; send it there"),
                ));
            }
            if self
                .store
                .homes()
                .ahead_of_table(self.store.homes().slot_of(v))
            {
                return Ok(self.error(
                    ErrorCode::WrongHome,
                    format!("vertex {v}'s slot is moving here and the slot table does not name this server yet; retry"),
                ));
            }
            adds.entry(v)
                .or_insert_with(|| {
                    order.push(v);
                    Vec::new()
                })
                .extend(ids);
        }
        let store = &self.store;
        // With durability, the batch reads, merges and puts under every
        // stripe lock, and is logged as one record (durable.rs, D2).
        let w = s.worker(self)?;
        // Every vertex's slot guard before the record (design M5).
        let mut _ops = Vec::new();
        if self.durable.is_some() {
            for v in &order {
                _ops.push(w.enter_home_op(*v)?);
            }
        }
        let _stripes = self.durable.as_ref().map(|d| d.lock_all(&mut || w.relax()));
        let mut plan: Vec<(u32, Option<Vec<u32>>, Vec<u32>)> = Vec::new();
        let mut bytes_needed = 0u64;
        let mut edges_added = 0u64;
        for v in order {
            let old = w.get(v)?;
            let mut merged = old.clone().unwrap_or_default();
            let mut seen: HashSet<u32> = merged.iter().copied().collect();
            let before = merged.len();
            for u in adds.remove(&v).unwrap_or_default() {
                if seen.insert(u) {
                    merged.push(u);
                }
            }
            if merged.len() == before && old.is_some() {
                continue;
            }
            edges_added += (merged.len() - before) as u64;
            bytes_needed += store.value_bytes_for_degree(merged.len() as u64);
            plan.push((v, old, merged));
        }
        let usage = store.usage();
        if let Some(u) = usage.iter().find(|u| u.machine == me) {
            let capacity = store.config().value_region_bytes;
            if u.value_live_bytes + bytes_needed > capacity {
                return Ok(self.error(
                    ErrorCode::Full,
                    format!(
                        "the batch needs {bytes_needed} bytes of values and the value region holds {} of {capacity} live; nothing applied; raise store.value_region_mb",
                        u.value_live_bytes
                    ),
                ));
            }
        }
        if self.durable.is_some() {
            let bytes = super::durable::record_bytes(plan.iter().map(|(_, _, m)| m.as_slice()));
            if bytes > locus_wal::frame::RECORD_BYTES_MAX {
                return Ok(self.error(
                    ErrorCode::TooLarge,
                    format!("the batch's new lists take {bytes} bytes, past one log record ({} bytes); nothing applied; send smaller batches", locus_wal::frame::RECORD_BYTES_MAX),
                ));
            }
        }
        if let Some(r) = self.past(
            s,
            deadline_ns,
            "before the batch was applied; nothing applied",
        ) {
            return Ok(r);
        }
        if let Some(why) = self.backups_down(s.worker(self)?, plan.iter().map(|(v, _, _)| *v)) {
            return Ok(self.error(ErrorCode::PeerUnavailable, why));
        }
        // Logged and durable before it is applied (D1: no reader sees a
        // batch a crash could lose).
        if let Some(d) = &self.durable {
            let logged = d.log(plan.iter().map(|(v, _, m)| (*v, m.as_slice())));
            if let Err(e) = logged.and_then(|lsn| d.wait(lsn)) {
                return Ok(self.error(
                    ErrorCode::Internal,
                    format!("the batch could not be made durable ({e}); nothing applied"),
                ));
            }
        }
        let w = s.worker(self)?;
        let changes: Vec<(u32, Option<&[u32]>)> = plan
            .iter()
            .map(|(v, _, m)| (*v, Some(m.as_slice())))
            .collect();
        if let Err(why) = self.replicate(w, &changes) {
            return Ok(self.error(
                ErrorCode::Internal,
                format!("the batch is logged here but {why}; nothing applied (in doubt: it takes effect only if this server's log is replayed while it still homes the vertices)"),
            ));
        }
        for (i, (v, _, merged)) in plan.iter().enumerate() {
            if let Err(e) = w.put(*v, merged) {
                // Put back what this batch changed, newest first.
                let mut undone = 0;
                let mut undo_failed = None;
                for (u, old, _) in plan[..i].iter().rev() {
                    match w.put(*u, old.as_deref().unwrap_or(&[])) {
                        Ok(()) => undone += 1,
                        Err(e2) => {
                            undo_failed.get_or_insert(format!("vertex {u}: {e2}"));
                        }
                    }
                }
                // The log holds the whole batch: log the lists as they now
                // are, so that a replay ends where memory is.
                self.log_current(w, plan.iter().map(|(u, _, _)| *u));
                let what = match undo_failed {
                    None => format!("applying vertex {v} failed: {e}; the {undone} vertices already changed were put back, nothing of the batch remains"),
                    Some(f) => format!("applying vertex {v} failed: {e}; putting back the batch also failed ({f}): {undone} of {i} vertices were restored"),
                };
                return Ok(self.error(code_of(&e), what));
            }
        }
        drop(_stripes);
        let changed: HashSet<u32> = plan.iter().map(|(v, _, _)| *v).collect();
        Ok(Reply::Load {
            vertices: plan.len() as u32,
            edges_added,
            changed: entries.iter().map(|v| changed.contains(v)).collect(),
        })
    }

    /// After a LOAD that failed part-way: logs the lists of `vertices` as
    /// they now are (a vertex with no entry as removed), so a replay ends
    /// where memory is (best effort: nothing of it is acknowledged). Called
    /// under every stripe lock.
    fn log_current(&self, w: &mut Worker<Counting<F>>, vertices: impl Iterator<Item = u32>) {
        let Some(d) = &self.durable else {
            return;
        };
        let lists: Vec<(u32, Vec<u32>)> = vertices
            .filter_map(|u| w.get(u).ok().flatten().map(|l| (u, l)))
            .collect();
        let changes: Vec<(u32, Option<&[u32]>)> = lists
            .iter()
            .map(|(u, l)| (*u, Some(l.as_slice())))
            .collect();
        if let Err(why) = self.replicate(w, &changes) {
            tracing::warn!(server = self.me, "a batch put back in part: {why}");
        }
        if let Err(e) = d.log(lists.iter().map(|(u, l)| (*u, l.as_slice()))) {
            tracing::warn!(
                server = self.me,
                "cannot log a batch that was put back in part: {e}"
            );
        }
    }

    fn migrate(&self, s: &mut Session<F>, v: u32) -> locus_store::Result<Reply> {
        let me = self.me;
        let r = s.worker(self)?.migrate_vertex_report(v)?;
        if !r.found {
            return Ok(self.unknown(v));
        }
        self.migrations_in
            .fetch_add(r.parts as u64, Ordering::Relaxed);
        self.migrated_bytes.fetch_add(r.bytes, Ordering::Relaxed);
        metrics::counter!("locus_migrations_total", "how" => "manual").increment(r.parts as u64);
        metrics::counter!("locus_migrated_bytes_total", "how" => "manual").increment(r.bytes);
        Ok(Reply::Migrate {
            from: r.from.unwrap_or(me),
            to: me,
            parts: r.parts,
            bytes: r.bytes,
        })
    }

    fn locate(&self, s: &mut Session<F>, v: u32) -> locus_store::Result<Reply> {
        let home = self.store.owner(v);
        let word = s.worker(self)?.address_word(v)?;
        Ok(match Addr::decode(word) {
            Some(a) => Reply::Where {
                home,
                holder: a.holder(home),
                found: true,
            },
            None => Reply::Where {
                home,
                holder: home,
                found: false,
            },
        })
    }
}

/// A vertex update, as the home applies and logs it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Edit {
    Put(Vec<u32>),
    Insert(u32),
    Delete(u32),
    Remove,
}

/// What an edit leaves: `None` if nothing changes, else the new list
/// (`None` for a vertex removed).
type NewList = Option<Option<Vec<u32>>>;

impl Edit {
    /// Applies the edit through the store.
    fn apply<F: Fabric>(&self, w: &mut Worker<F>, v: u32) -> locus_store::Result<Reply> {
        Ok(match self {
            Edit::Put(ids) => w.put(v, ids).map(|()| Reply::Put)?,
            Edit::Insert(u) => Reply::Changed(w.insert_edge(v, *u)?),
            Edit::Delete(u) => Reply::Changed(w.delete_edge(v, *u)?),
            Edit::Remove => Reply::Removed(w.delete_vertex(v)?),
        })
    }

    /// The list this edit makes of `current` (as the store's op does:
    /// inserts append, deletes remove every occurrence), and the reply.
    fn outcome(&self, current: Option<Vec<u32>>) -> (NewList, Reply) {
        match (self, current) {
            (Edit::Put(ids), _) => (Some(Some(ids.clone())), Reply::Put),
            (Edit::Insert(u), None) => (Some(Some(vec![*u])), Reply::Changed(true)),
            (Edit::Insert(u), Some(l)) if l.contains(u) => (None, Reply::Changed(false)),
            (Edit::Insert(u), Some(mut l)) => {
                l.push(*u);
                (Some(Some(l)), Reply::Changed(true))
            }
            (Edit::Delete(u), Some(l)) if l.contains(u) => {
                let l: Vec<u32> = l.into_iter().filter(|x| x != u).collect();
                (Some(Some(l)), Reply::Changed(true))
            }
            (Edit::Delete(_), _) => (None, Reply::Changed(false)),
            (Edit::Remove, None) => (None, Reply::Removed(None)),
            (Edit::Remove, Some(l)) => (Some(None), Reply::Removed(Some(l))),
        }
    }
}

/// A peer could not be reached (a read worth one retry: see `handle`).
fn peer_error(e: &StoreError) -> bool {
    matches!(
        e,
        StoreError::Fabric(locus_fabric::FabricError::PeerUnavailable { .. })
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_predicts_the_store_ops_list_and_reply() {
        let l = |x: &[u32]| Some(x.to_vec());
        assert_eq!(
            Edit::Insert(3).outcome(l(&[1, 2])),
            (Some(l(&[1, 2, 3])), Reply::Changed(true))
        );
        assert_eq!(
            Edit::Insert(2).outcome(l(&[1, 2])),
            (None, Reply::Changed(false))
        );
        assert_eq!(
            Edit::Insert(2).outcome(None),
            (Some(l(&[2])), Reply::Changed(true))
        );
        assert_eq!(
            Edit::Delete(2).outcome(l(&[2, 1, 2])),
            (Some(l(&[1])), Reply::Changed(true))
        );
        assert_eq!(Edit::Delete(2).outcome(None), (None, Reply::Changed(false)));
        assert_eq!(Edit::Remove.outcome(None), (None, Reply::Removed(None)));
        assert_eq!(
            Edit::Remove.outcome(l(&[4])),
            (Some(None), Reply::Removed(l(&[4])))
        );
        assert_eq!(
            Edit::Put(vec![9]).outcome(None),
            (Some(l(&[9])), Reply::Put)
        );
    }
}
