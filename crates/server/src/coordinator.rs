//! The coordinator as its own process (Pragh 3 "Execution flow", 4.4, 5;
//! `locus coordinator`). Servers' monitors report to it over the control
//! link (docs/protocol.md section 5); it applies the policy
//! ([`locus_coordinator::Coordinator`]), makes every approval durable in its
//! record, and only then sends the job to the migration's target.
//!
//! ```text
//!  accept thread ─▶ link thread per server (locus-link):
//!                    prove the secret (kind 3) ▸ HELLO ▸ REGISTER{m} ▸ read frames
//!                        │ REPORT / HOT / TRACKED / MIGRATED
//!                        ▼
//!                    events (bounded: reports that find it full are dropped, counted)
//!                        │
//!  coordinator thread:  Coordinator::step ▸ Record::persist_approvals ▸ send
//!                        │ JOBS / TRACK / COLLECT
//!                        ▼
//!                    links[m]: the writing half of server m's connection
//! ```
//!
//! Invariants (tests: `crates/cli/tests/coordinator_process.rs`):
//! 1. Persist-then-act: an approval's target is in the record before its
//!    JOBS frame is written (Pragh 4.4).
//! 2. No approval waits on a server that is not linked: a migration whose
//!    target has no link, or whose JOBS frame cannot be written, ends at once
//!    as not moved, so the policy may approve it again from later reports.
//! 3. One link per machine: a REGISTER for a machine already linked replaces
//!    the old link (the server reconnected); a link thread removes only its
//!    own link (generation numbers).
//! 4. Restart: the process restores every key's latest target from its
//!    record (Pragh 5); servers keep serving while it is down, drop their
//!    reports (counted) and reconnect within a second.
//! 5. Deferred mode: a COLLECT that cannot be delivered is answered here with
//!    no counts, so the holder counts as untracked (as in eager mode).

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};
use locus_client::proto::{
    self, AccessEntry, Control, Header, Op, Reply, Request, HEADER_BYTES, VERSION,
};
use locus_coordinator::dispatch::{self, Dispatch};
use locus_coordinator::policy::{Access, Action, Coordinator, Event, Stats};
use locus_fabric::auth::{self, Listener, Secret};
use locus_fabric::MachineId;
use locus_store::Key;

use crate::config::ClusterFile;
use crate::{Result, ServerError};

/// Events waiting for the coordinator thread at most.
pub const EVENTS_MAX: usize = 4096;
/// The machine id a coordinator gives in its HELLO reply.
pub const COORDINATOR_ID: u8 = u8::MAX;
/// How often an idle link checks whether the process is stopping.
const IDLE_POLL: Duration = Duration::from_millis(250);
/// Longest wait for the rest of a frame, and for a frame to be written.
const FRAME_TIMEOUT: Duration = Duration::from_secs(10);

/// What the coordinator process did (its metrics).
#[derive(Debug, Default)]
pub struct CoordinatorStats {
    /// Control links that came up (REGISTER received).
    pub links: AtomicU64,
    /// Connections refused at the handshake.
    pub auth_refused: AtomicU64,
    /// Periodic reports received.
    pub reports: AtomicU64,
    /// Instant reports received.
    pub hot_reports: AtomicU64,
    /// Reports dropped because the event queue was full.
    pub events_dropped: AtomicU64,
    /// Migration jobs sent.
    pub migrate_jobs: AtomicU64,
    /// Replica jobs sent.
    pub replica_jobs: AtomicU64,
    /// Migrations that ended at once because their target was not linked.
    pub unlinked: AtomicU64,
    /// Migrations reported done (value at its target).
    pub migrated_ok: AtomicU64,
    /// Migrations reported not done.
    pub migrated_failed: AtomicU64,
    /// Batches of approvals the record could not persist.
    pub persist_failed: AtomicU64,
}

/// The writing half of a server's link.
struct LinkOut {
    generation: u64,
    stream: TcpStream,
}

struct Shared {
    file: ClusterFile,
    secret: Secret,
    control_addr: SocketAddr,
    stop: AtomicBool,
    links: Mutex<HashMap<MachineId, LinkOut>>,
    generations: AtomicU64,
    events_tx: Sender<Event>,
    stats: CoordinatorStats,
    policy: Mutex<Stats>,
    restored: usize,
    /// Leadership, with `[etcd]` (election.rs).
    lead: Option<crate::election::Lead>,
}

/// A running coordinator process.
pub struct CoordinatorProcess {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    metrics_addr: Option<SocketAddr>,
}

impl CoordinatorProcess {
    /// Opens the record, restores the policy's state from it, listens for
    /// servers and serves metrics (if configured). Fails if the file has no
    /// `[coordinator]` section, the record cannot be opened, or a port is taken.
    pub fn start(file: ClusterFile) -> Result<CoordinatorProcess> {
        let entry = file.coordinator.clone().ok_or_else(|| {
            ServerError::setting(
                "coordinator",
                "(missing)".into(),
                "the cluster file has no [coordinator] section (control, record)",
            )
        })?;
        let secret = file.secret()?;
        let policy = file.policy.policy_config()?;
        let listener = crate::server::bind(entry.control, "coordinator", "servers")?;
        let control_addr = listener
            .local_addr()
            .map_err(|e| ServerError::io("control listener address", e))?;
        // Bound before leading: a standby may wait long, and its port must
        // stay its own meanwhile.
        let metrics_listener = match entry.metrics {
            Some(addr) => Some(crate::server::bind(addr, "coordinator", "metrics")?),
            None => None,
        };
        // With [etcd]: blocks until this process leads (election.rs).
        let (record, lead) = crate::election::lead(&file, &control_addr.to_string())?;
        let restored = record.load()?;
        let n_restored = restored.len();
        let coordinator = Coordinator::restore(policy, restored)?;
        let (events_tx, events_rx) = bounded(EVENTS_MAX);
        let shared = Arc::new(Shared {
            file,
            secret,
            control_addr,
            stop: AtomicBool::new(false),
            links: Mutex::new(HashMap::new()),
            generations: AtomicU64::new(0),
            events_tx,
            stats: CoordinatorStats::default(),
            policy: Mutex::new(Stats::default()),
            restored: n_restored,
            lead,
        });
        let mut threads = Vec::new();
        let s = Arc::clone(&shared);
        threads.push(crate::server::spawn("locus-coordinator", move || {
            coordinator_loop(&s, &events_rx, coordinator, &record)
        })?);
        let s = Arc::clone(&shared);
        threads.push(crate::server::spawn("locus-control-accept", move || {
            accept_loop(&s, listener)
        })?);
        if shared.lead.is_some() {
            let s = Arc::clone(&shared);
            threads.push(crate::server::spawn(
                "locus-coordinator-watch",
                move || {
                    let lead = s.lead.as_ref().expect("checked above");
                    let stop = || s.stop.load(Ordering::Acquire);
                    crate::election::watch_servers(lead, &stop, &|m| {
                        if let Some(l) = lock(&s.links).remove(&m) {
                            let _ = l.stream.shutdown(std::net::Shutdown::Both);
                        }
                    })
                },
            )?);
        }
        if shared.lead.is_some() {
            // MV3: batches no driver holds are settled by the leader.
            let s = Arc::clone(&shared);
            threads.push(crate::server::spawn("locus-move-settler", move || {
                let lead = s.lead.as_ref().expect("checked above");
                let term = lead.leadership.term();
                let stop = || s.stop.load(Ordering::Acquire);
                let leading = || lead.may_approve();
                crate::settler::settle_loop(&s.file, &s.secret, term, &stop, &leading)
            })?);
        }
        let metrics_addr = match metrics_listener {
            Some(listener) => {
                let s = Arc::clone(&shared);
                let (addr, t) = crate::metrics::serve(listener, move || gauges(&s))?;
                threads.push(t);
                Some(addr)
            }
            None => None,
        };
        tracing::info!(
            control = %control_addr,
            metrics = ?metrics_addr,
            record = %entry.record.display(),
            restored = n_restored,
            "coordinator serving"
        );
        Ok(CoordinatorProcess {
            shared,
            threads,
            metrics_addr,
        })
    }

    /// The address servers connect to.
    pub fn control_addr(&self) -> SocketAddr {
        self.shared.control_addr
    }

    /// The metrics endpoint's address, if any.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// Counters.
    pub fn stats(&self) -> &CoordinatorStats {
        &self.shared.stats
    }

    /// The policy's counters, as of its last step.
    pub fn policy_stats(&self) -> Stats {
        *lock(&self.shared.policy)
    }

    /// With `[etcd]`: this leader's term (the leader key's create revision).
    pub fn term(&self) -> Option<i64> {
        self.shared.lead.as_ref().map(|l| l.leadership.term())
    }

    /// With `[etcd]`: why this coordinator is fenced out (its leadership
    /// lease was lost), once it is; it then approves nothing and should exit.
    pub fn fenced(&self) -> Option<String> {
        self.shared.lead.as_ref().and_then(|l| l.fenced())
    }

    /// Keys whose latest target the record held at start.
    pub fn restored(&self) -> usize {
        self.shared.restored
    }

    /// Machines linked now.
    pub fn linked(&self) -> Vec<MachineId> {
        let mut v: Vec<MachineId> = lock(&self.shared.links).keys().copied().collect();
        v.sort_unstable();
        v
    }

    /// Stops every thread (the record stays on disk) and closes the links.
    pub fn stop(mut self) {
        self.stop_inner();
    }

    fn stop_inner(&mut self) {
        if self.shared.stop.swap(true, Ordering::AcqRel) {
            return;
        }
        crate::conn::wake_accept(self.shared.control_addr);
        if let Some(m) = self.metrics_addr {
            crate::conn::wake_accept(m);
        }
        for l in lock(&self.shared.links).values() {
            let _ = l.stream.shutdown(std::net::Shutdown::Both);
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for CoordinatorProcess {
    fn drop(&mut self) {
        self.stop_inner();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn gauges(s: &Shared) -> bool {
    if s.stop.load(Ordering::Acquire) {
        return false;
    }
    let st = &s.stats;
    let p = *lock(&s.policy);
    metrics::gauge!("locus_coordinator_servers_linked").set(lock(&s.links).len() as f64);
    metrics::gauge!("locus_process_id").set(std::process::id() as f64);
    metrics::counter!("locus_auth_refused_total", "listener" => "control")
        .absolute(st.auth_refused.load(Ordering::Relaxed));
    for (name, v) in [
        (
            "locus_coordinator_links_total",
            st.links.load(Ordering::Relaxed),
        ),
        (
            "locus_coordinator_reports_total",
            st.reports.load(Ordering::Relaxed),
        ),
        (
            "locus_coordinator_hot_reports_total",
            st.hot_reports.load(Ordering::Relaxed),
        ),
        (
            "locus_coordinator_events_dropped_total",
            st.events_dropped.load(Ordering::Relaxed),
        ),
        (
            "locus_coordinator_migrate_jobs_total",
            st.migrate_jobs.load(Ordering::Relaxed),
        ),
        (
            "locus_coordinator_replica_jobs_total",
            st.replica_jobs.load(Ordering::Relaxed),
        ),
        (
            "locus_coordinator_migrated_ok_total",
            st.migrated_ok.load(Ordering::Relaxed),
        ),
        (
            "locus_coordinator_migrated_failed_total",
            st.migrated_failed.load(Ordering::Relaxed),
        ),
        (
            "locus_coordinator_unlinked_total",
            st.unlinked.load(Ordering::Relaxed),
        ),
        (
            "locus_coordinator_persist_failed_total",
            st.persist_failed.load(Ordering::Relaxed),
        ),
        ("locus_coordinator_approved_total", p.approved),
        (
            "locus_coordinator_replicas_approved_total",
            p.replicas_approved,
        ),
        ("locus_coordinator_contended_total", p.contended),
        ("locus_coordinator_dwelling_total", p.dwelling),
        ("locus_coordinator_keys_ignored_total", p.keys_ignored),
    ] {
        metrics::counter!(name).absolute(v);
    }
    true
}

fn accept_loop(s: &Arc<Shared>, listener: TcpListener) {
    loop {
        let accepted = listener.accept();
        if s.stop.load(Ordering::Acquire) {
            return;
        }
        match accepted {
            Ok((stream, peer)) => {
                let sc = Arc::clone(s);
                let spawned = std::thread::Builder::new()
                    .name("locus-link".into())
                    .spawn(move || link(&sc, stream, peer));
                if let Err(e) = spawned {
                    tracing::warn!(%peer, "cannot start a link thread: {e}");
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// Reads one frame into `body`: `Ok(None)` if no byte came within `idle`.
fn read_frame(
    stream: &mut TcpStream,
    idle: Duration,
    frame_bytes_max: usize,
    body: &mut Vec<u8>,
) -> std::result::Result<Option<Header>, String> {
    let _ = stream.set_read_timeout(Some(idle));
    let mut h = [0u8; HEADER_BYTES];
    match stream.read(&mut h[..1]) {
        Ok(0) => return Err("the server closed the link".into()),
        Ok(_) => {}
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            return Ok(None)
        }
        Err(e) => return Err(format!("the link broke: {e}")),
    }
    let _ = stream.set_read_timeout(Some(FRAME_TIMEOUT));
    stream
        .read_exact(&mut h[1..])
        .map_err(|e| format!("a frame stopped half-way: {e}"))?;
    let header = Header::parse(&h, frame_bytes_max).map_err(|e| e.to_string())?;
    if header.version != VERSION {
        return Err(format!(
            "protocol version {} (this coordinator speaks {VERSION})",
            header.version
        ));
    }
    body.clear();
    let got = (&mut *stream)
        .take(header.body_len as u64)
        .read_to_end(body)
        .map_err(|e| format!("a frame stopped half-way: {e}"))?;
    if got < header.body_len as usize {
        return Err("a frame stopped half-way".into());
    }
    Ok(Some(header))
}

/// One server's link: handshake, then its frames become events.
fn link(s: &Shared, mut stream: TcpStream, peer: SocketAddr) {
    let handshake = Duration::from_millis(s.file.limits.handshake_timeout_ms);
    if stream.set_nodelay(true).is_err() || stream.set_write_timeout(Some(handshake)).is_err() {
        return;
    }
    if let Err(e) = auth::accept(&mut stream, &s.secret, Listener::Control, handshake) {
        s.stats.auth_refused.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(%peer, "control link refused at the handshake: {e}");
        return;
    }
    let frame_max = s.file.limits.frame_bytes_max;
    let mut body = Vec::new();
    // HELLO, then REGISTER, each within the handshake timeout.
    let hello = match read_frame(&mut stream, handshake, frame_max, &mut body) {
        Ok(Some(h)) if h.op == Op::Hello as u8 => h,
        other => {
            tracing::warn!(%peer, "control link closed: expected HELLO, got {other:?}");
            return;
        }
    };
    let name = match Request::decode(hello.op, &body) {
        Ok((_, Request::Hello { client })) => client,
        _ => {
            tracing::warn!(%peer, "control link closed: malformed HELLO");
            return;
        }
    };
    let mut out = Vec::new();
    Reply::Hello {
        server_id: COORDINATOR_ID,
        machines: s.file.machines() as u16,
        frame_bytes_max: frame_max as u32,
        server: format!("locus-coordinator {}", env!("CARGO_PKG_VERSION")),
    }
    .encode(&mut out, Op::Hello, hello.id);
    if stream.write_all(&out).is_err() {
        return;
    }
    let machine = match read_frame(&mut stream, handshake, frame_max, &mut body) {
        Ok(Some(h)) => match Control::decode(h.op, &body) {
            Ok(Control::Register { machine }) if (machine as usize) < s.file.machines() => machine,
            other => {
                tracing::warn!(%peer, name, "control link closed: expected REGISTER of a server of the cluster file, got {other:?}");
                return;
            }
        },
        other => {
            tracing::warn!(%peer, name, "control link closed: expected REGISTER, got {other:?}");
            return;
        }
    };
    let Ok(writer) = stream.try_clone() else {
        return;
    };
    let _ = writer.set_write_timeout(Some(FRAME_TIMEOUT));
    let generation = s.generations.fetch_add(1, Ordering::Relaxed);
    if let Some(old) = lock(&s.links).insert(
        machine,
        LinkOut {
            generation,
            stream: writer,
        },
    ) {
        // The server reconnected: its old link is dead to it.
        let _ = old.stream.shutdown(std::net::Shutdown::Both);
    }
    s.stats.links.fetch_add(1, Ordering::Relaxed);
    tracing::info!(server = machine, %peer, "control link up");
    let why = serve_link(s, &mut stream, machine, &mut body);
    {
        let mut links = lock(&s.links);
        if links
            .get(&machine)
            .is_some_and(|l| l.generation == generation)
        {
            links.remove(&machine);
        }
    }
    if !s.stop.load(Ordering::Acquire) {
        tracing::warn!(server = machine, %peer, "control link down: {why}");
    }
}

/// Reads server `machine`'s frames until the link ends; returns why it ended.
fn serve_link(
    s: &Shared,
    stream: &mut TcpStream,
    machine: MachineId,
    body: &mut Vec<u8>,
) -> String {
    let machines = s.file.machines();
    let access = |e: &AccessEntry| -> std::result::Result<Access, String> {
        if (e.holder as usize) >= machines {
            return Err(format!("a report names holder {}, not a server", e.holder));
        }
        Ok(Access {
            key: Key(e.key),
            holder: e.holder,
            count: e.count,
        })
    };
    while !s.stop.load(Ordering::Acquire) {
        let h = match read_frame(stream, IDLE_POLL, s.file.limits.frame_bytes_max, body) {
            Ok(Some(h)) => h,
            Ok(None) => continue,
            Err(why) => return why,
        };
        let c = match Control::decode(h.op, body) {
            Ok(c) => c,
            Err(e) => return format!("malformed control frame: {e}"),
        };
        let from = match &c {
            Control::Report { machine, .. }
            | Control::Hot { machine, .. }
            | Control::Tracked { machine, .. } => Some(*machine),
            _ => None,
        };
        if from.is_some_and(|m| m != machine) {
            return format!("server {machine} sent a report as server {from:?}");
        }
        let event = match c {
            Control::Report {
                interval_ms,
                accesses,
                ..
            } => {
                let accesses = match accesses.iter().map(access).collect() {
                    Ok(a) => a,
                    Err(why) => return why,
                };
                s.stats.reports.fetch_add(1, Ordering::Relaxed);
                Event::Report {
                    machine,
                    interval_ms,
                    accesses,
                }
            }
            Control::Hot {
                elapsed_ms,
                access: a,
                ..
            } => {
                let access = match access(&a) {
                    Ok(a) => a,
                    Err(why) => return why,
                };
                s.stats.hot_reports.fetch_add(1, Ordering::Relaxed);
                Event::Hot {
                    machine,
                    elapsed_ms,
                    access,
                }
            }
            Control::Tracked {
                interval_ms,
                counts,
                ..
            } => Event::Tracked {
                machine,
                interval_ms,
                counts: counts.into_iter().map(|(k, n)| (Key(k), n)).collect(),
            },
            Control::Migrated(list) => {
                for (key, to, ok) in list {
                    let counter = if ok {
                        &s.stats.migrated_ok
                    } else {
                        &s.stats.migrated_failed
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                    // Must not be lost while the coordinator runs: wait briefly.
                    let e = Event::Migrated {
                        key: Key(key),
                        to,
                        ok,
                    };
                    if s.events_tx
                        .send_timeout(e, Duration::from_millis(500))
                        .is_err()
                    {
                        s.stats.events_dropped.fetch_add(1, Ordering::Relaxed);
                    }
                }
                continue;
            }
            other => {
                return format!(
                    "the server sent {:?}, which only the coordinator sends",
                    other.op()
                )
            }
        };
        if s.events_tx.try_send(event).is_err() {
            s.stats.events_dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
    "the coordinator is stopping".into()
}

/// Writes `c` to server `m`'s link; false if it is not linked or the write
/// failed (then the link is closed, and its thread removes it).
fn send(s: &Shared, m: MachineId, c: &Control, buf: &mut Vec<u8>) -> bool {
    let mut links = lock(&s.links);
    let Some(l) = links.get_mut(&m) else {
        return false;
    };
    buf.clear();
    c.encode(buf);
    match l.stream.write_all(buf) {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(server = m, "cannot write to the control link: {e}");
            let _ = l.stream.shutdown(std::net::Shutdown::Both);
            false
        }
    }
}

fn coordinator_loop(
    s: &Shared,
    events: &Receiver<Event>,
    mut c: Coordinator,
    record: &crate::election::Rec,
) {
    let t0 = Instant::now();
    let tick = Duration::from_millis(50);
    let mut d = Links {
        s,
        jobs_max: (s.file.limits.frame_bytes_max.saturating_sub(64) / 9).max(1),
        buf: Vec::new(),
    };
    while !s.stop.load(Ordering::Acquire) {
        let event = match events.recv_timeout(tick) {
            Ok(e) => e,
            Err(RecvTimeoutError::Timeout) => Event::Tick,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let now = &mut || t0.elapsed().as_millis() as u64;
        if dispatch::step(&mut c, now, event, record, &mut d).is_err() {
            return; // fenced out: another coordinator may lead now (election.rs)
        }
        *lock(&s.policy) = c.stats();
    }
}

/// The coordinator process's dispatch: JOBS, TRACK and COLLECT frames to
/// the target's control link.
struct Links<'a> {
    s: &'a Shared,
    /// Keys of one JOBS or TRACK frame at most (the servers' frame limit).
    jobs_max: usize,
    buf: Vec<u8>,
}

impl Dispatch<String> for Links<'_> {
    fn may_approve(&self) -> bool {
        self.s.lead.as_ref().is_none_or(|l| l.may_approve())
    }

    fn persist_failed(&mut self, error: String) {
        // Not durable: nothing approved; the keys come back in later reports.
        self.s.stats.persist_failed.fetch_add(1, Ordering::Relaxed);
        tracing::error!("cannot persist approvals: {error}");
    }

    fn dispatch(&mut self, actions: Vec<Action>, next: &mut Vec<Event>) {
        let (s, jobs_max, buf) = (self.s, self.jobs_max, &mut self.buf);
        let mut jobs: BTreeMap<MachineId, Vec<(proto::JobKind, u64)>> = BTreeMap::new();
        for a in actions {
            match a {
                Action::Persist { .. } => {}
                Action::Migrate { key, to, .. } => jobs
                    .entry(to)
                    .or_default()
                    .push((proto::JobKind::Migrate, key.0)),
                Action::Replicate { key, to } => jobs
                    .entry(to)
                    .or_default()
                    .push((proto::JobKind::Replicate, key.0)),
                Action::Track { machine, keys } => {
                    let keys: Vec<u64> = keys.into_iter().map(|k| k.0).collect();
                    for chunk in keys.chunks(jobs_max) {
                        if !send(s, machine, &Control::Track(chunk.to_vec()), buf) {
                            break;
                        }
                    }
                }
                Action::Collect { machine } => {
                    if !send(s, machine, &Control::Collect, buf) {
                        next.push(Event::Tracked {
                            machine,
                            interval_ms: s.file.policy.interval_ms,
                            counts: Vec::new(),
                        });
                    }
                }
            }
        }
        for (to, list) in jobs {
            for chunk in list.chunks(jobs_max) {
                if send(s, to, &Control::Jobs(chunk.to_vec()), buf) {
                    for (kind, _) in chunk {
                        match kind {
                            proto::JobKind::Migrate => &s.stats.migrate_jobs,
                            proto::JobKind::Replicate => &s.stats.replica_jobs,
                        }
                        .fetch_add(1, Ordering::Relaxed);
                    }
                    continue;
                }
                // A migration to an unlinked server ends at once as not moved.
                for &(kind, key) in chunk {
                    if kind == proto::JobKind::Migrate {
                        s.stats.unlinked.fetch_add(1, Ordering::Relaxed);
                        next.push(Event::Migrated {
                            key: Key(key),
                            to,
                            ok: false,
                        });
                    }
                }
            }
        }
    }
}
