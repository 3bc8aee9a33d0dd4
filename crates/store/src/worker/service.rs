//! Check-and-forward's messaging (Pragh 4.3) and the service threads that
//! answer it.
//!
//! A worker that must run an op elsewhere sends a request and waits for the
//! reply, handling its own machine's inbox meanwhile (part ops addressed here
//! are applied at once, so two machines forwarding to each other never
//! deadlock; vertex ops are left for the machine's service, which may wait).
//!
//! Bounds and failures, all per machine:
//! - **Waiting forwards.** At most [`FORWARDS_WAITING_MAX`] wait at once. A
//!   reply is filed only under the id of a forward still waiting for it; a
//!   reply to a forward that timed out is dropped and counted, so filed
//!   replies never outnumber the waiters.
//! - **Deferred vertex ops.** At most [`DEFERRED_VERTEX_OPS_MAX`] wait for the
//!   service; beyond that a vertex op is answered at once with an
//!   [`StoreError::Overloaded`] failure instead of being queued.
//! - **Requests that fail** where they run (a full value region at the holder,
//!   say) or that do not decode are counted and answered with a `Failed`
//!   reply: the sender gets the reason at once, and the service goes on.
//!   Only a failure of the machine's own port or of its garbage collection
//!   stops a service; it is recorded ([`Services::failure`]) and forwards to
//!   that machine then fail at once instead of waiting out their timeout.
//! - **A target the fabric knows is down** (`Port::check_peer`: the TCP
//!   fabric's membership table) fails a forward waiting for its reply at
//!   once; the forward timeout bounds the wait only while it looks alive.
//!   (A wait for a dead peer held the home's stripe lock and so delayed
//!   Pragh 5 recovery by the whole timeout.)
//! - **Reply addresses** come from the fabric (the machine that sent the
//!   message), never from the message's payload; a request whose payload
//!   names another sender is malformed.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use locus_fabric::{Fabric, FabricError, MachineId, Port};

use super::Worker;
use crate::forward::{self, Envelope, Reply, Request};
use crate::store::{Shared, Store};
use crate::table::Key;
use crate::{Result, StoreError};

/// Forwards of one machine that may wait for their replies at once.
pub const FORWARDS_WAITING_MAX: usize = 4096;
/// Vertex ops one machine queues for its service at most.
pub const DEFERRED_VERTEX_OPS_MAX: usize = 4096;
/// How long a service keeps looking at its inbox (yielding between looks)
/// after its last work or wake-up before it parks. Bounded by time, not by
/// looks: on a machine with as many busy workers as cores each yield hands a
/// core to a worker until the scheduler takes it back, so the 64 looks this
/// once was cost the workers up to 64 preemptions per message (stop 44). It
/// covers a message's flight on the modelled fabric (2 us plus queueing).
const SERVICE_SPIN: Duration = Duration::from_micros(50);

/// Longest park of a quiet service ([`Services::set_quiet`]).
const SERVICE_QUIET_NAP: Duration = Duration::from_secs(1);
/// How long an idle service parks between looks at its inbox (a forwarded
/// request wakes it at once).
const SERVICE_IDLE_SLEEP_US: u64 = 200;
/// The longest park of an idle service when every message wakes it (the
/// fabric unparks it on delivery, `Fabric::wake_on_message`, and every
/// worker that leaves it a vertex op wakes it): each park that found nothing
/// doubles the next, up to this or the garbage-collection interval,
/// whichever is shorter. On a fabric that wakes no one it keeps looking
/// every [`SERVICE_IDLE_SLEEP_US`].
const SERVICE_IDLE_SLEEP_MAX_US: u64 = 50_000;
/// An idle service collects garbage every hundredth of the reclaim lease
/// (a retired block waits its lease and at most 1% more), never less often
/// than every [`SERVICE_GC_INTERVAL_MAX`] nor more often than every
/// [`SERVICE_GC_INTERVAL_MIN`].
const SERVICE_GC_LEASE_SHARE: u32 = 100;
/// See [`SERVICE_GC_LEASE_SHARE`].
const SERVICE_GC_INTERVAL_MIN: Duration = Duration::from_millis(10);
/// See [`SERVICE_GC_LEASE_SHARE`].
const SERVICE_GC_INTERVAL_MAX: Duration = Duration::from_millis(100);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One machine's forwarding state, shared by every worker acting as it
/// (they share the machine's inbox, so a reply may be read by any of them).
#[derive(Default)]
pub(crate) struct Mailroom {
    next_id: AtomicU64,
    /// Forwards waiting for their replies: id, and the reply once filed.
    waiting: Mutex<HashMap<u64, Option<Reply>>>,
    /// Vertex ops and node requests read by a worker that was only waiting
    /// for a reply; the machine's service runs them. (from, id, request).
    deferred: Mutex<VecDeque<(MachineId, u64, Request)>>,
    /// The node above this machine's store, answering [`Request::Node`].
    pub(crate) node: std::sync::OnceLock<Arc<dyn crate::NodeHandler>>,
    /// Why this machine's service stopped, once it has (cleared when services start).
    stopped: Mutex<Option<String>>,
    counts: Counts,
}

#[derive(Default)]
struct Counts {
    served: AtomicU64,
    failed: AtomicU64,
    malformed: AtomicU64,
    late_replies: AtomicU64,
    refused: AtomicU64,
    undeliverable: AtomicU64,
}

/// What a machine's messaging has handled (counters since the store was created).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServiceStats {
    /// Requests from other machines answered (successfully or not).
    pub requests_served: u64,
    /// Requests that failed where they ran and were answered with the reason.
    pub requests_failed: u64,
    /// Messages that did not decode, or named a sender other than the one
    /// that sent them.
    pub malformed_messages: u64,
    /// Replies that arrived after their forward had stopped waiting, dropped.
    pub late_replies_dropped: u64,
    /// Vertex ops refused because the deferred queue was full.
    pub overloaded_refusals: u64,
    /// Replies that could not be sent (the requester vanished).
    pub replies_undeliverable: u64,
}

impl Mailroom {
    /// Files a reply for its waiter; a reply nobody waits for is dropped.
    pub(super) fn file_reply(&self, id: u64, reply: Reply) {
        match lock(&self.waiting).get_mut(&id) {
            Some(slot) => *slot = Some(reply),
            None => {
                self.counts.late_replies.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    pub(super) fn take_reply(&self, id: u64) -> Option<Reply> {
        let mut waiting = lock(&self.waiting);
        let reply = waiting.get_mut(&id)?.take()?;
        waiting.remove(&id);
        Some(reply)
    }

    pub(crate) fn stats(&self) -> ServiceStats {
        let c = &self.counts;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ServiceStats {
            requests_served: get(&c.served),
            requests_failed: get(&c.failed),
            malformed_messages: get(&c.malformed),
            late_replies_dropped: get(&c.late_replies),
            overloaded_refusals: get(&c.refused),
            replies_undeliverable: get(&c.undeliverable),
        }
    }
}

impl<F: Fabric> Shared<F> {
    /// Why `machine`'s service stopped, if this process runs it and it did.
    pub(super) fn stopped(&self, machine: MachineId) -> Option<String> {
        self.mail[machine as usize]
            .as_ref()
            .and_then(|m| lock(&m.stopped).clone())
    }
}

impl<F: Fabric> Worker<F> {
    /// Sends `request` to `target` and waits for its reply, answering part
    /// ops addressed to this machine meanwhile (so two machines forwarding to
    /// each other cannot deadlock). A `Failed` reply is an error.
    pub(super) fn forward(&mut self, target: MachineId, request: Request) -> Result<Reply> {
        let shared = Arc::clone(&self.shared);
        let mail = shared.mailroom(self.machine)?;
        let id = self.post(mail, target, &request)?;
        self.shared.wake(target);
        let r = self.await_reply(mail, target, id);
        // On every way out: a reply that comes later is dropped, not kept.
        lock(&mail.waiting).remove(&id);
        failed_is_error(r, target)
    }

    /// [`Worker::forward`] for several requests at once: every request is
    /// sent before any reply is awaited, and each target's service is woken
    /// once, so the round trips overlap. Replies (or each request's own
    /// error) in the order of `requests`.
    pub(super) fn forward_all(&mut self, requests: &[(MachineId, Request)]) -> Vec<Result<Reply>> {
        let shared = Arc::clone(&self.shared);
        let mail = match shared.mailroom(self.machine) {
            Ok(m) => m,
            Err(e) => return requests.iter().map(|_| Err(e.clone())).collect(),
        };
        let posted: Vec<Result<u64>> = requests
            .iter()
            .map(|(target, request)| self.post(mail, *target, request))
            .collect();
        let mut woken: Vec<MachineId> = Vec::new();
        for ((target, _), id) in requests.iter().zip(&posted) {
            if id.is_ok() && !woken.contains(target) {
                woken.push(*target);
                self.shared.wake(*target);
            }
        }
        requests
            .iter()
            .zip(posted)
            .map(|((target, _), id)| {
                let id = id?;
                let r = self.await_reply(mail, *target, id);
                lock(&mail.waiting).remove(&id);
                failed_is_error(r, *target)
            })
            .collect()
    }

    /// Waits at most `ms` for each forward's reply (None: the store's
    /// `forward_timeout_ms`) until set again: for a caller that retries
    /// what is idempotent, where a reply may be lost rather than late (a
    /// restarted node's first requests, before its peers took its new
    /// incarnation).
    pub fn set_forward_timeout_ms(&mut self, ms: Option<u64>) {
        self.forward_timeout_ms = ms;
    }

    /// Fails at once if the fabric knows `target` is down (its membership
    /// ended that incarnation); Ok says only that it is not known down.
    pub fn check_peer(&self, target: MachineId) -> Result<()> {
        Ok(self.port.check_peer(target)?)
    }

    /// Sends each `(target, bytes)` to the node above `target`'s store as a
    /// [`Request::Node`], all before any reply is awaited, and returns each
    /// node's answer (or the error: a `Failed` reply, a peer the fabric
    /// knows is down, no reply within the forward timeout), in order.
    pub fn node_requests(&mut self, requests: Vec<(MachineId, Vec<u8>)>) -> Vec<Result<Vec<u8>>> {
        let requests: Vec<(MachineId, Request)> = requests
            .into_iter()
            .map(|(m, b)| (m, Request::Node(b)))
            .collect();
        self.forward_all(&requests)
            .into_iter()
            .zip(&requests)
            .map(|(r, (target, _))| match r? {
                Reply::Node(answer) => Ok(answer),
                other => Err(StoreError::Forwarded {
                    machine: *target,
                    reason: format!("a {} reply to a node request", other.kind()),
                }),
            })
            .collect()
    }

    /// Files a waiting slot for a new forward and sends its request (the
    /// target is not woken). Returns the forward's id.
    fn post(&mut self, mail: &Mailroom, target: MachineId, request: &Request) -> Result<u64> {
        let id = mail.next_id.fetch_add(1, Ordering::Relaxed);
        {
            let mut waiting = lock(&mail.waiting);
            if waiting.len() >= FORWARDS_WAITING_MAX {
                return Err(StoreError::Overloaded {
                    machine: self.machine,
                    queue: "table of forwards waiting for replies",
                    limit: FORWARDS_WAITING_MAX,
                });
            }
            waiting.insert(id, None);
        }
        let mut bytes = Vec::new();
        forward::encode_request(self.machine, id, request, &mut bytes);
        if let Err(e) = self.send_with_backpressure(target, &bytes) {
            lock(&mail.waiting).remove(&id);
            return Err(e);
        }
        self.stats.forwarded += 1;
        Ok(id)
    }

    /// Waits for the reply to forward `id`, sent to `target`, handling this
    /// machine's inbox meanwhile. The caller removes `id`'s waiting slot.
    pub(super) fn await_reply(
        &mut self,
        mail: &Mailroom,
        target: MachineId,
        id: u64,
    ) -> Result<Reply> {
        let timeout_ms = self
            .forward_timeout_ms
            .unwrap_or(self.shared.config.forward_timeout_ms);
        let deadline = self.port.now_ns() + timeout_ms * 1_000_000;
        let mut round = 0u32;
        loop {
            if let Some(r) = mail.take_reply(id) {
                return Ok(r);
            }
            if self.pump(false)? == 0 {
                if let Some(reason) = self.shared.stopped(target) {
                    return Err(StoreError::ServiceStopped {
                        machine: target,
                        reason,
                    });
                }
                // A target the fabric knows is down (membership ended its
                // incarnation) will not answer: fail now, not at the deadline,
                // since the waiting op may hold a lock recovery needs.
                self.port.check_peer(target)?;
                if self.port.now_ns() > deadline {
                    return Err(StoreError::Forwarded {
                        machine: target,
                        reason: format!(
                            "no reply within {timeout_ms} ms (is its service running?)"
                        ),
                    });
                }
                // A long wait gives the cores away (`Port::back_off`).
                self.port.back_off(round);
                round = round.saturating_add(1);
            } else {
                round = 0;
            }
        }
    }

    pub(super) fn send_with_backpressure(&mut self, target: MachineId, bytes: &[u8]) -> Result<()> {
        loop {
            match self.port.send(target, bytes) {
                Err(FabricError::InboxFull { .. }) => {
                    if let Some(reason) = self.shared.stopped(target) {
                        return Err(StoreError::ServiceStopped {
                            machine: target,
                            reason,
                        });
                    }
                    self.pump(false)?;
                    self.port.relax();
                }
                r => return Ok(r?),
            }
        }
    }

    /// Handles the messages in this machine's inbox: replies are filed for
    /// their waiters, part ops and replica registrations are applied and
    /// answered, vertex ops are run if `vertex_ops` (else kept for the
    /// service). Returns messages handled. Fails only if this machine's own
    /// port fails; a bad message or a failed request is answered and counted.
    pub(super) fn pump(&mut self, vertex_ops: bool) -> Result<usize> {
        let shared = Arc::clone(&self.shared);
        let mail = shared.mailroom(self.machine)?;
        let mut handled = 0;
        while let Some(m) = self.port.try_recv()? {
            handled += 1;
            match forward::decode(&m.payload) {
                Ok(Envelope::Reply { id, reply }) => mail.file_reply(id, reply),
                Ok(Envelope::Request { from, id, .. }) if from != m.from => {
                    mail.counts.malformed.fetch_add(1, Ordering::Relaxed);
                    let e = StoreError::Malformed {
                        machine: m.from,
                        reason: format!("a request that names machine {from} as its sender"),
                    };
                    self.answer(mail, m.from, id, Reply::Failed(e.to_string()));
                }
                Ok(Envelope::Request { id, request, .. }) => {
                    self.handle_request(mail, m.from, id, request, vertex_ops)
                }
                Err(bad) => {
                    mail.counts.malformed.fetch_add(1, Ordering::Relaxed);
                    let e = StoreError::Malformed {
                        machine: m.from,
                        reason: bad.reason.clone(),
                    };
                    if let Some(id) = bad.request_id() {
                        self.answer(mail, m.from, id, Reply::Failed(e.to_string()));
                    } else if let Some(id) = bad.reply_id() {
                        // Its waiter learns at once that the reply was unreadable.
                        mail.file_reply(id, Reply::Failed(e.to_string()));
                    }
                }
            }
        }
        Ok(handled)
    }

    pub(super) fn handle_request(
        &mut self,
        mail: &Mailroom,
        from: MachineId,
        id: u64,
        request: Request,
        vertex_ops: bool,
    ) {
        let outcome = match request {
            Request::Part { key, op } => self.part_op_here(Key(key), &op).map(Reply::Part),
            Request::Replica {
                key,
                seen,
                offset_units,
            } => self
                .list_replica(Key(key), from, seen, offset_units)
                .map(Reply::Replica),
            vertex @ Request::Vertex { .. } if vertex_ops => {
                return self.run_vertex_request(mail, from, id, vertex);
            }
            // A node request may wait (a backup's log sync): like a vertex
            // op, it is left for the service, never run by a worker that is
            // waiting for a reply of its own; the service runs those that
            // wait together as one batch (`serve`), even the ones it pumps.
            vertex @ (Request::Vertex { .. } | Request::Node(_)) => {
                let mut deferred = lock(&mail.deferred);
                if deferred.len() < DEFERRED_VERTEX_OPS_MAX {
                    deferred.push_back((from, id, vertex));
                    drop(deferred);
                    // The service may be parked: nothing else tells it.
                    self.shared.wake(self.machine);
                    return;
                }
                drop(deferred);
                mail.counts.refused.fetch_add(1, Ordering::Relaxed);
                Err(StoreError::Overloaded {
                    machine: self.machine,
                    queue: "queue of vertex ops waiting for the service",
                    limit: DEFERRED_VERTEX_OPS_MAX,
                })
            }
        };
        self.answer_outcome(mail, from, id, outcome);
    }

    pub(super) fn run_vertex_request(
        &mut self,
        mail: &Mailroom,
        from: MachineId,
        id: u64,
        request: Request,
    ) {
        let outcome = match request {
            Request::Vertex { vertex, op } => self.vertex_op_here(vertex, op),
            Request::Node(bytes) => Ok(match mail.node.get() {
                Some(node) => match node.handle(from, &bytes) {
                    Ok(answer) => Reply::Node(answer),
                    Err(why) => Reply::Failed(why),
                },
                None => Reply::Failed(format!(
                    "machine {}: no node answers node requests here",
                    self.machine
                )),
            }),
            _ => unreachable!("only vertex ops and node requests are deferred"),
        };
        self.answer_outcome(mail, from, id, outcome);
    }

    pub(super) fn answer_outcome(
        &mut self,
        mail: &Mailroom,
        to: MachineId,
        id: u64,
        outcome: Result<Reply>,
    ) {
        let reply = outcome.unwrap_or_else(|e| {
            mail.counts.failed.fetch_add(1, Ordering::Relaxed);
            match e {
                // Typed, so the sender learns whom to ask (issue 59).
                StoreError::Moved { key, to, .. } => Reply::Handed { key, to },
                StoreError::NotOwnedYet { key, owner, .. } => Reply::NotOwnedYet { key, owner },
                StoreError::AheadOfTable { vertex, slot } => Reply::AheadOfTable { vertex, slot },
                e => Reply::Failed(e.to_string()),
            }
        });
        self.answer(mail, to, id, reply);
    }

    /// Sends a reply; a requester that vanished is counted, not an error here.
    pub(super) fn answer(&mut self, mail: &Mailroom, to: MachineId, id: u64, reply: Reply) {
        mail.counts.served.fetch_add(1, Ordering::Relaxed);
        let mut bytes = Vec::new();
        forward::encode_reply(self.machine, id, &reply, &mut bytes);
        if self.send_with_backpressure(to, &bytes).is_err() {
            mail.counts.undeliverable.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// One round of this machine's service: runs vertex ops left by waiting
    /// workers, then handles the inbox. Returns the work done (0: idle).
    /// Some thread acting as each machine must call this regularly (see
    /// [`Store::spawn_services`]) for updates forwarded to it to complete.
    /// Fails only if this machine's own port does.
    pub fn serve(&mut self) -> Result<usize> {
        let shared = Arc::clone(&self.shared);
        let mail = shared.mailroom(self.machine)?;
        let mut done = self.run_deferred(mail);
        let pumped = self.pump(true)?;
        // Node requests the pump deferred, answered now as one batch.
        done += self.run_deferred(mail);
        Ok(done + pumped)
    }

    /// Runs the deferred vertex ops one by one and the deferred node
    /// requests as one batch ([`crate::NodeHandler::handle_many`]: a
    /// backup syncs its log once for all of them). Returns how many ran.
    fn run_deferred(&mut self, mail: &Mailroom) -> usize {
        let waiting: Vec<(MachineId, u64, Request)> = lock(&mail.deferred).drain(..).collect();
        let done = waiting.len();
        let mut nodes: Vec<(MachineId, u64, Vec<u8>)> = Vec::new();
        for (from, id, request) in waiting {
            match request {
                Request::Node(bytes) => nodes.push((from, id, bytes)),
                r => self.run_vertex_request(mail, from, id, r),
            }
        }
        if nodes.is_empty() {
            return done;
        }
        let answers = match mail.node.get() {
            Some(node) => {
                let requests: Vec<(MachineId, &[u8])> =
                    nodes.iter().map(|(f, _, b)| (*f, b.as_slice())).collect();
                node.handle_many(&requests)
            }
            None => nodes
                .iter()
                .map(|_| {
                    Err(format!(
                        "machine {}: no node answers node requests here",
                        self.machine
                    ))
                })
                .collect(),
        };
        for ((from, id, _), answer) in nodes.iter().zip(answers) {
            let reply = match answer {
                Ok(a) => Reply::Node(a),
                Err(why) => Reply::Failed(why),
            };
            self.answer_outcome(mail, *from, *id, Ok(reply));
        }
        done
    }
}

/// Service threads, one per hosted machine, that answer forwarded updates
/// and collect garbage. Stopped and joined on drop.
pub struct Services {
    stop: Arc<AtomicBool>,
    /// Set by [`Services::set_quiet`].
    quiet: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    failure: Arc<Mutex<Option<StoreError>>>,
    /// Marks the served machines stopped, so forwards to them fail at once
    /// instead of waiting out their timeout.
    mark_stopped: Vec<Box<dyn Fn() + Send + Sync>>,
}

impl Services {
    /// The first error a service thread stopped on, if any
    /// ([`StoreError::ServiceStopped`], naming the machine).
    pub fn failure(&self) -> Option<StoreError> {
        lock(&self.failure).clone()
    }

    /// Quiet services (where every sender is in this process) still answer
    /// every message at once but do nothing else: no garbage collection, no
    /// waking on a clock. For benchmarks that keep several clusters in one
    /// process and measure them in turns (`bench pragh --slices`): a
    /// waiting cluster's collections would run in another's turn. Retired
    /// blocks wait for the next collection after `set_quiet(false)`.
    pub fn set_quiet(&self, quiet: bool) {
        self.quiet.store(quiet, Ordering::Release);
        if !quiet {
            for t in &self.threads {
                t.thread().unpark();
            }
        }
    }
}

impl Drop for Services {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        for t in &self.threads {
            t.thread().unpark();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        for mark in &self.mark_stopped {
            mark();
        }
    }
}

impl Services {
    /// Services with no thread yet ([`Store::add_services`] adds them).
    pub fn none() -> Services {
        Services {
            stop: Arc::new(AtomicBool::new(false)),
            quiet: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
            failure: Arc::new(Mutex::new(None)),
            mark_stopped: Vec::new(),
        }
    }
}

impl<F: Fabric> Store<F> {
    /// Starts one service thread per machine this process hosts. Updates
    /// forwarded to a machine (check-and-forward) complete only while some
    /// thread serves it; with services running, any worker may update any vertex.
    pub fn spawn_services(&self) -> Result<Services> {
        let mut s = Services::none();
        self.add_services(&mut s)?;
        Ok(s)
    }

    /// Starts the service threads of this store's hosted machines as part
    /// of `services` (one stop, one quiet switch and one failure for the
    /// stores of every machine of an embedded cluster).
    pub fn add_services(&self, services: &mut Services) -> Result<()> {
        let mut served = Vec::new();
        for m in 0..self.shared.machines {
            let m = m as MachineId;
            if !self.shared.fabric.hosts(m) {
                continue;
            }
            *lock(&self.shared.mailroom(m)?.stopped) = None;
            served.push(m);
            let w = self.worker(m)?;
            let (stop, failure) = (Arc::clone(&services.stop), Arc::clone(&services.failure));
            let quiet = Arc::clone(&services.quiet);
            let shared = Arc::clone(&self.shared);
            let name = format!("locus-service-{m}");
            let t = std::thread::Builder::new()
                .name(name.clone())
                .spawn(move || service_loop(w, &shared, &stop, &quiet, &failure))
                .map_err(|e| StoreError::Thread {
                    name,
                    reason: e.to_string(),
                })?;
            services.threads.push(t);
        }
        let shared = Arc::clone(&self.shared);
        services.mark_stopped.push(Box::new(move || {
            for &m in &served {
                if let Ok(mail) = shared.mailroom(m) {
                    lock(&mail.stopped)
                        .get_or_insert_with(|| "its service threads were stopped".into());
                }
            }
        }));
        Ok(())
    }

    /// Sets the node that answers `machine`'s node requests (once; a second
    /// call is an error).
    pub fn set_node_handler(
        &self,
        machine: MachineId,
        node: Arc<dyn crate::NodeHandler>,
    ) -> Result<()> {
        self.shared.mailroom(machine)?.node.set(node).map_err(|_| {
            StoreError::Config(format!("machine {machine} has a node handler already"))
        })
    }

    /// What `machine`'s messaging has handled, if this process hosts it.
    pub fn service_stats(&self, machine: MachineId) -> Option<ServiceStats> {
        Some(self.shared.mail.get(machine as usize)?.as_ref()?.stats())
    }
}

/// The body of one machine's service thread.
fn service_loop<F: Fabric>(
    mut w: Worker<F>,
    shared: &Shared<F>,
    stop: &AtomicBool,
    quiet: &AtomicBool,
    failure: &Mutex<Option<StoreError>>,
) {
    let m = w.machine();
    *lock(&shared.wakers[m as usize]) = Some(std::thread::current());
    let fail = |reason: String| {
        if let Ok(mail) = shared.mailroom(m) {
            lock(&mail.stopped).get_or_insert_with(|| reason.clone());
        }
        lock(failure).get_or_insert(StoreError::ServiceStopped { machine: m, reason });
    };
    // Every sender is in this process and wakes us: an idle service may
    // park longer and longer. An idle service that looked every 200 us
    // woke 5,000 times a second, and eight of them took a sixth of a core
    // from the workers of a 2-core machine (docs/results.md, stop 30); at
    // 5 ms parks and a collection every 10 ms they still took 1% of it
    // (stop 37).
    // With a machine in another process, the fabric wakes us on each
    // message delivered here (`Fabric::wake_on_message`): an idle service
    // that looked every 200 us instead woke 3,800 times a second in each of
    // eight server processes. In one process the senders wake us themselves
    // (`Shared::wake`), and only for requests: a fabric wake-up on every
    // message would also wake us for each reply a worker takes itself
    // (`tests/service_spin.rs` counts the switches).
    let in_process =
        (0..shared.fabric.machine_count() as MachineId).all(|m| shared.fabric.hosts(m));
    let woken_by_senders = in_process
        || shared
            .fabric
            .wake_on_message(m, std::thread::current())
            .unwrap_or(false);
    let gc_interval = (Duration::from_millis(shared.config.reclaim_lease_ms)
        / SERVICE_GC_LEASE_SHARE)
        .clamp(SERVICE_GC_INTERVAL_MIN, SERVICE_GC_INTERVAL_MAX);
    let sleep_max_us = SERVICE_IDLE_SLEEP_MAX_US.min(gc_interval.as_micros() as u64);
    let mut busy_at = Instant::now();
    let mut sleep_us = SERVICE_IDLE_SLEEP_US;
    let mut gc_at = Instant::now();
    while !stop.load(Ordering::Acquire) {
        match w.serve() {
            Ok(0) => {
                if busy_at.elapsed() < SERVICE_SPIN {
                    std::thread::yield_now();
                    continue;
                }
                if woken_by_senders && quiet.load(Ordering::Acquire) {
                    // Quiet: a sender or the end of quiet unparks us; the
                    // timeout only bounds a missed wake-up.
                    let parked = Instant::now();
                    std::thread::park_timeout(SERVICE_QUIET_NAP);
                    if parked.elapsed() < SERVICE_QUIET_NAP {
                        busy_at = Instant::now();
                        sleep_us = SERVICE_IDLE_SLEEP_US;
                    }
                    continue;
                }
                if gc_at.elapsed() >= gc_interval {
                    if let Err(e) = w.collect_garbage() {
                        return fail(format!("garbage collection failed: {e}"));
                    }
                    gc_at = Instant::now();
                }
                // A request sent here unparks us (`Shared::wake`); the
                // timeout bounds the wait for anything else.
                let nap = Duration::from_micros(sleep_us);
                let parked = Instant::now();
                std::thread::park_timeout(nap);
                if parked.elapsed() < nap {
                    // Woken: a message is on its way (on the modelled fabric
                    // it may not be visible yet), so spin for it again.
                    busy_at = Instant::now();
                    sleep_us = SERVICE_IDLE_SLEEP_US;
                } else if woken_by_senders {
                    sleep_us = (sleep_us * 2).min(sleep_max_us);
                }
            }
            Ok(_) => {
                busy_at = Instant::now();
                sleep_us = SERVICE_IDLE_SLEEP_US;
            }
            Err(e) => return fail(format!("its port failed: {e}")),
        }
    }
}

/// A `Failed` reply is the forward's error.
fn failed_is_error(r: Result<Reply>, target: MachineId) -> Result<Reply> {
    match r? {
        Reply::Failed(reason) => Err(StoreError::Forwarded {
            machine: target,
            reason,
        }),
        Reply::Handed { key, to } => Err(StoreError::Moved {
            key,
            vertex: crate::Key(key).vertex(),
            to,
        }),
        Reply::NotOwnedYet { key, owner } => Err(StoreError::NotOwnedYet {
            key,
            vertex: crate::Key(key).vertex(),
            owner,
        }),
        Reply::AheadOfTable { vertex, slot } => Err(StoreError::AheadOfTable { vertex, slot }),
        reply => Ok(reply),
    }
}
