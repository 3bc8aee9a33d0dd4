//! What a node does for each client request (docs/protocol.md section 3),
//! on a session's worker acting as this node's machine. Every failure
//! becomes an error reply naming this node; nothing here panics on input.
//! Transport-free: the server's TCP connections and the simulated
//! cluster's clients call [`Node::handle`] alike. Deadlines are on the
//! fabric's clock (`Port::now_ns`), simulated time in a simulation.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;

use locus_client::proto::{ErrorCode, KhopReply, Reply, Request, FRAME_BYTES_MAX};
use locus_fabric::counting::{Counting, Locality};
use locus_fabric::{Fabric, FabricError, Fencing, Port};
use locus_store::addr::Addr;
use locus_store::{home_of, HopReads, KhopLimits, StoreError};
use locus_wal::Lsn;

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

    fn store_error(&self, e: &StoreError) -> Reply {
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
        let r = match req {
            Request::Hello { .. } => Ok(self.error(ErrorCode::Invalid, "HELLO was already said")),
            Request::Stats => Ok(self.error(
                ErrorCode::Invalid,
                "STATS is answered by the server process, not the node",
            )),
            Request::Ping => Ok(Reply::Pong),
            // Reads are idempotent: one retry after a peer error, since the
            // first operation on a connection to a restarted peer fails and
            // the next one reconnects (Pragh 5 recovery, `recovery.rs`).
            Request::Neighbors { vertex, k } => match self.neighbors(s, vertex, k) {
                Err(e) if peer_error(&e) => self.neighbors(s, vertex, k),
                r => r,
            },
            Request::Put { vertex, ids } => self.update(s, vertex, |w| {
                w.put(vertex, &ids).map(|()| (Reply::Put, true))
            }),
            Request::InsertEdge { vertex, neighbor } => self.update(s, vertex, |w| {
                w.insert_edge(vertex, neighbor)
                    .map(|c| (Reply::Changed(c), c))
            }),
            Request::DeleteEdge { vertex, neighbor } => self.update(s, vertex, |w| {
                w.delete_edge(vertex, neighbor)
                    .map(|c| (Reply::Changed(c), c))
            }),
            Request::DeleteVertex { vertex } => self.update(s, vertex, |w| {
                w.delete_vertex(vertex).map(|list| {
                    let changed = list.is_some();
                    (Reply::Removed(list), changed)
                })
            }),
            Request::Khop { vertex, hops, k } => match self.khop(s, vertex, hops, k, deadline_ns) {
                Err(e) if peer_error(&e) => self.khop(s, vertex, hops, k, deadline_ns),
                r => r,
            },
            Request::Load { vertices } => self.load(s, vertices, deadline_ns),
            Request::Migrate { vertex } => self.migrate(s, vertex),
            Request::Where { vertex } => self.locate(s, vertex),
        };
        r.unwrap_or_else(|e| self.store_error(&e))
    }

    /// One vertex update. Without durability: `apply` as is. With it (see
    /// `durable.rs`, D1 and D2): only at `v`'s home; `apply`, then `v`'s
    /// new list read back and logged, under `v`'s stripe lock; the reply
    /// waits until the record is durable. `apply` says whether it changed
    /// anything: an unchanged list is not logged, but the reply still waits
    /// for whatever was logged before (the answer may depend on it). An
    /// update applied whole whose list cannot be read back is answered with
    /// an error: in doubt, never acknowledged unlogged ([`to_log`]).
    fn update(
        &self,
        s: &mut Session<F>,
        v: u32,
        apply: impl FnOnce(&mut Worker<Counting<F>>) -> locus_store::Result<(Reply, bool)>,
    ) -> locus_store::Result<Reply> {
        let Some(d) = &self.durable else {
            return apply(s.worker(self)?).map(|(r, _)| r);
        };
        let home = home_of(v, self.machines);
        if home != self.me {
            return Ok(self.error(
                ErrorCode::WrongHome,
                format!("vertex {v} is homed on server {home}; with [durability] updates go to the home, which logs them"),
            ));
        }
        let (result, logged) = {
            let w = s.worker(self)?;
            let _stripe = d.lock(v, &mut || w.relax());
            let result = apply(w);
            let outcome = match &result {
                Ok((_, false)) => Applied::Unchanged,
                Ok((_, true)) => Applied::Changed,
                Err(_) => Applied::FailedPartWay,
            };
            let logged: std::result::Result<Lsn, String> = match to_log(outcome, || w.get(v)) {
                ToLog::Nothing => Ok(d.last_lsn()),
                ToLog::List(list) => d
                    .log([(v, list.as_slice())].into_iter())
                    .map_err(|e| e.to_string()),
                ToLog::Removed => d.log_removed(&[v]).map_err(|e| e.to_string()),
                ToLog::Refuse(why) => Err(why),
                ToLog::Unreadable(e) => {
                    tracing::warn!(
                        server = self.me,
                        vertex = v,
                        "cannot read back a vertex whose update failed part-way to log it: {e}"
                    );
                    Ok(d.last_lsn())
                }
            };
            (result, logged)
        };
        if let Err(e) = logged.and_then(|lsn| d.wait(lsn).map_err(|e| e.to_string())) {
            return Ok(self.error(
                ErrorCode::Internal,
                format!("vertex {v}: the update was applied but could not be made durable ({e}); it is not acknowledged"),
            ));
        }
        result.map(|(r, _)| r)
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
        if out.len() * 4 + 64 > FRAME_BYTES_MAX {
            return Ok(self.error(
                ErrorCode::TooLarge,
                format!(
                    "vertex {v} has {} neighbours, past one reply frame; ask for fewer (k)",
                    out.len()
                ),
            ));
        }
        Ok(Reply::Neighbors(out))
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
        let machines = self.machines;
        let entries: Vec<u32> = vertices.iter().map(|(v, _)| *v).collect();
        // Merge repeated vertices, keeping first-seen order.
        let mut order: Vec<u32> = Vec::new();
        let mut adds: HashMap<u32, Vec<u32>> = HashMap::new();
        for (v, ids) in vertices {
            if home_of(v, machines) != me {
                return Ok(self.error(
                    ErrorCode::WrongHome,
                    format!(
                        "vertex {v} is homed on server {}, not here; send it there",
                        home_of(v, machines)
                    ),
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
        let w = s.worker(self)?;
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
                if undo_failed.is_some() {
                    self.log_current(w, plan[..i].iter().map(|(u, _, _)| *u));
                }
                let what = match undo_failed {
                    None => format!("applying vertex {v} failed: {e}; the {undone} vertices already changed were put back, nothing of the batch remains"),
                    Some(f) => format!("applying vertex {v} failed: {e}; putting back the batch also failed ({f}): {undone} of {i} vertices were restored"),
                };
                return Ok(self.error(code_of(&e), what));
            }
        }
        if let Some(d) = &self.durable {
            let logged = d.log(plan.iter().map(|(v, _, m)| (*v, m.as_slice())));
            drop(_stripes);
            if let Err(e) = logged.and_then(|lsn| d.wait(lsn)) {
                return Ok(self.error(
                    ErrorCode::Internal,
                    format!("the batch was applied but could not be made durable ({e}); it is not acknowledged"),
                ));
            }
        }
        let changed: HashSet<u32> = plan.iter().map(|(v, _, _)| *v).collect();
        Ok(Reply::Load {
            vertices: plan.len() as u32,
            edges_added,
            changed: entries.iter().map(|v| changed.contains(v)).collect(),
        })
    }

    /// After a LOAD that could not be put back whole: logs the lists of
    /// `vertices` as they now are, so the log follows memory (best effort:
    /// nothing of it is acknowledged). Called under every stripe lock.
    fn log_current(&self, w: &mut Worker<Counting<F>>, vertices: impl Iterator<Item = u32>) {
        let Some(d) = &self.durable else {
            return;
        };
        let lists: Vec<(u32, Vec<u32>)> = vertices
            .filter_map(|u| w.get(u).ok().flatten().map(|l| (u, l)))
            .collect();
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
        let home = home_of(v, self.machines);
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

/// What an update did, for [`to_log`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Applied {
    /// Nothing changed: nothing to log.
    Unchanged,
    /// Applied whole.
    Changed,
    /// Failed, possibly after changing some parts.
    FailedPartWay,
}

/// What to log after an update (D1 in `durable.rs`).
#[derive(Debug, PartialEq, Eq)]
enum ToLog {
    /// Nothing (wait for what was logged before).
    Nothing,
    /// The vertex's list as it now is.
    List(Vec<u32>),
    /// The vertex has no entry now (it was removed).
    Removed,
    /// An applied update whose list cannot be read back: answer with an
    /// error, never acknowledge it unlogged (it is in doubt, like any
    /// update whose reply is lost).
    Refuse(String),
    /// A failed update whose list cannot be read back: it is answered with
    /// its own error anyway; logged as a warning.
    Unreadable(String),
}

/// Decides what an update logs. The list is read back (`read_back`) after
/// a change or a part-way failure. An applied update whose list cannot be
/// read back (its holder died right after the write) was once acknowledged
/// unlogged here, and so lost across the holder's death: the kill -9 test
/// in `crates/cli/tests/durable_processes.rs` found it.
fn to_log(
    applied: Applied,
    read_back: impl FnOnce() -> locus_store::Result<Option<Vec<u32>>>,
) -> ToLog {
    if applied == Applied::Unchanged {
        return ToLog::Nothing;
    }
    match read_back() {
        Ok(Some(list)) => ToLog::List(list),
        Ok(None) => ToLog::Removed,
        Err(e) if applied == Applied::Changed => ToLog::Refuse(format!(
            "its new list could not be read back to log it: {e}"
        )),
        Err(e) => ToLog::Unreadable(e.to_string()),
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

    fn down() -> locus_store::Result<Option<Vec<u32>>> {
        Err(StoreError::Fabric(FabricError::PeerUnavailable {
            machine: 1,
            reason: "killed".into(),
        }))
    }

    #[test]
    fn an_applied_update_whose_list_cannot_be_read_back_is_refused_not_acknowledged() {
        assert!(matches!(to_log(Applied::Changed, down), ToLog::Refuse(w) if w.contains("killed")));
        assert!(matches!(
            to_log(Applied::FailedPartWay, down),
            ToLog::Unreadable(_)
        ));
        assert_eq!(
            to_log(Applied::Changed, || Ok(Some(vec![1, 2]))),
            ToLog::List(vec![1, 2])
        );
        assert_eq!(
            to_log(Applied::FailedPartWay, || Ok(Some(vec![3]))),
            ToLog::List(vec![3])
        );
        assert_eq!(
            to_log(Applied::Unchanged, || panic!("not read back")),
            ToLog::Nothing
        );
        // A change that leaves no entry is a removal: logged as one, or a
        // restart would bring the vertex back.
        assert_eq!(to_log(Applied::Changed, || Ok(None)), ToLog::Removed);
        assert_eq!(to_log(Applied::FailedPartWay, || Ok(None)), ToLog::Removed);
    }
}
