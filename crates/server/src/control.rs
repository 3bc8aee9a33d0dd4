//! A server's side of the control link (Pragh 3 "Execution flow", 4.4): its
//! monitor's reports go to the coordinator process, and the coordinator's
//! jobs come back and run here, as the target (Pragh 4.1).
//!
//! ```text
//!  link thread (locus-control-N)                         coordinator process
//!   every hot_poll_ms: Monitor::poll(this machine's cache) ──REPORT/HOT──▶
//!   JOBS ◀──────────────────────────────────────────────────────────────────
//!    └─▶ job queue ─▶ executor thread (locus-jobs-N, runs as machine N)
//!   MIGRATED ◀── result queue ◀──┘ ─────────────────────────────────────────▶
//!   TRACK / COLLECT ◀─────── this machine's AccessTracker ──TRACKED────────▶
//!
//!  link states:
//!   down ──connect, prove the secret (kind 3), HELLO, REGISTER──▶ up
//!   up ──any I/O or protocol error, coordinator gone──▶ down (retry every second)
//! ```
//!
//! Invariants:
//! * Workers never wait for the link: the link thread takes the cache's
//!   counts itself, and reports made while the link is down are dropped and
//!   counted (`reports_dropped`), as Pragh's monitors may lose reports while
//!   the coordinator restarts.
//! * Every migration job received is answered by exactly one MIGRATED entry,
//!   unless the link breaks first; a restarted coordinator then learns where
//!   the value is from its record and from the next reports (each entry
//!   names the holder it found).
//! * A job runs as this machine only: JOBS carries no target, the receiver is
//!   the target.
//! * Reports, results and tracked counts are split into frames that fit the
//!   coordinator's frame limit.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use locus_client::proto::{AccessEntry, Control, JobKind};
use locus_client::Conn;
use locus_coordinator::driver::DriverStats;
use locus_coordinator::policy::{Access, Event};
use locus_coordinator::{Executor, Monitor};
use locus_fabric::auth::Listener;
use locus_store::Key;

use crate::server::Shared;

/// How often a broken link is retried.
const RECONNECT_EVERY: Duration = Duration::from_secs(1);
/// How long a connection attempt (and a control write) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest wait for a coordinator frame before the link thread looks at its
/// other duties (results to send, the next poll).
const RECV_SLICE: Duration = Duration::from_millis(10);
/// JOBS frames waiting for the executor at most.
const JOB_FRAMES_MAX: usize = 64;
/// A failed connection attempt is logged at warn level at most this often.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// What the control link did (STATS `coordinator`, metrics).
#[derive(Debug, Default)]
pub(crate) struct ControlStats {
    /// Whether the link is up.
    pub(crate) linked: AtomicBool,
    /// Times the link came up.
    pub(crate) links: AtomicU64,
    /// Jobs received.
    pub(crate) jobs: AtomicU64,
    /// The monitor's and executor's counters (reports, drops, moves, replicas).
    pub(crate) driver: DriverStats,
}

/// Starts the link and executor threads if the cluster file has a
/// coordinator.
pub(crate) fn start(s: &Arc<Shared>) -> crate::Result<Vec<std::thread::JoinHandle<()>>> {
    if s.file.coordinator.is_none() {
        return Ok(Vec::new());
    }
    let (jobs_tx, jobs_rx) = mpsc::sync_channel(JOB_FRAMES_MAX);
    let (results_tx, results_rx) = mpsc::channel();
    let id = s.id;
    let (a, b) = (Arc::clone(s), Arc::clone(s));
    Ok(vec![
        crate::server::spawn(&format!("locus-control-{id}"), move || {
            link_loop(&a, &jobs_tx, &results_rx)
        })?,
        crate::server::spawn(&format!("locus-jobs-{id}"), move || {
            executor_loop(&b, &jobs_rx, &results_tx)
        })?,
    ])
}

/// The link's connection, and what is needed to split frames for it.
struct Link {
    conn: Conn,
    /// List entries per frame (from the coordinator's frame limit).
    entries_max: usize,
}

impl Link {
    fn send(&mut self, c: &Control) -> locus_client::Result<()> {
        self.conn.send_control(c)
    }
}

/// Where the coordinator is: with `[etcd]`, the elected leader's control
/// address, looked up on every (re)connect; else the file's.
fn coordinator_addr(s: &Shared) -> locus_client::Result<std::net::SocketAddr> {
    let entry = s.file.coordinator.as_ref().expect("checked in start");
    let Some(ms) = &s.membership else {
        return Ok(entry.control);
    };
    let unavailable = |reason: String| locus_client::ClientError::Unavailable {
        server: locus_client::ServerRef {
            id: Some(crate::COORDINATOR_ID),
            addr: entry.control,
        },
        reason,
    };
    match ms.membership.leader() {
        Ok(Some(l)) => l.value.parse().map_err(|_| {
            unavailable(format!(
                "etcd names {:?} as the coordinator leader, which is not an address",
                l.value
            ))
        }),
        Ok(None) => Err(unavailable("no coordinator leads in etcd yet".into())),
        Err(e) => Err(unavailable(format!(
            "cannot ask etcd for the coordinator: {e}"
        ))),
    }
}

fn connect(s: &Shared) -> locus_client::Result<Link> {
    let mut conn = Conn::connect(
        coordinator_addr(s)?,
        Some(&s.secret),
        Listener::Control,
        &format!("server {}", s.id),
        CONNECT_TIMEOUT,
    )?;
    conn.send_control(&Control::Register { machine: s.id })?;
    // The largest entry is 13 bytes (REPORT); keep room for the header and counts.
    let entries_max = ((conn.hello().frame_bytes_max.saturating_sub(64)) / 13).max(1);
    Ok(Link { conn, entries_max })
}

fn entry(a: &Access) -> AccessEntry {
    AccessEntry {
        key: a.key.0,
        holder: a.holder,
        count: a.count,
    }
}

/// The frames that carry a monitor's event.
fn frames_of(e: Event, entries_max: usize) -> Vec<Control> {
    match e {
        Event::Report {
            machine,
            interval_ms,
            accesses,
        } => accesses
            .chunks(entries_max)
            .map(|c| Control::Report {
                machine,
                interval_ms,
                accesses: c.iter().map(entry).collect(),
            })
            .collect(),
        Event::Hot {
            machine,
            elapsed_ms,
            access,
        } => vec![Control::Hot {
            machine,
            elapsed_ms,
            access: entry(&access),
        }],
        // A monitor makes no other events.
        _ => Vec::new(),
    }
}

fn link_loop(
    s: &Shared,
    jobs_tx: &SyncSender<Vec<(JobKind, u64)>>,
    results_rx: &Receiver<Vec<(u64, u8, bool)>>,
) {
    let stats = &s.control;
    let poll = Duration::from_millis(s.file.policy.hot_poll_ms.max(1));
    let mut monitor = Monitor::new(
        s.id,
        Arc::clone(s.store().homes()),
        s.file.policy.interval_ms,
        s.file.policy.report_count_min,
    );
    let mut link: Option<Link> = None;
    let mut next_connect = Instant::now();
    let mut next_poll = Instant::now() + poll;
    let mut last_warn: Option<Instant> = None;
    let mut tracking_since = Instant::now();
    let mut events = Vec::new();
    let down = |link: &mut Option<Link>, why: &dyn std::fmt::Display| {
        if link.take().is_some() {
            stats.linked.store(false, Ordering::Release);
            tracing::warn!(
                server = s.id,
                "coordinator link down: {why}; retrying every second"
            );
        }
    };
    while !s.stop.load(Ordering::Acquire) {
        let now = Instant::now();
        if link.is_none() && now >= next_connect {
            match connect(s) {
                Ok(l) => {
                    stats.linked.store(true, Ordering::Release);
                    stats.links.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(server = s.id, "coordinator link up");
                    link = Some(l);
                }
                Err(e) => {
                    next_connect = now + RECONNECT_EVERY;
                    if !matches!(last_warn, Some(t) if t.elapsed() < WARN_EVERY) {
                        tracing::warn!(server = s.id, "cannot reach the coordinator: {e}");
                        last_warn = Some(now);
                    }
                }
            }
        }
        if now >= next_poll {
            next_poll = now + poll;
            if let Some(cache) = s.store().cache(s.id) {
                monitor.poll(cache, &mut events);
            }
            for e in events.drain(..) {
                let counter = match e {
                    Event::Hot { .. } => &stats.driver.hot_reports,
                    _ => &stats.driver.reports,
                };
                let sent = match &mut link {
                    Some(l) => {
                        let mut r = Ok(());
                        for f in frames_of(e, l.entries_max) {
                            r = l.send(&f);
                            if r.is_err() {
                                break;
                            }
                        }
                        r.map_err(|e| down(&mut link, &e)).is_ok()
                    }
                    None => false,
                };
                if sent {
                    counter.fetch_add(1, Ordering::Relaxed);
                } else {
                    stats.driver.reports_dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        while let Ok(results) = results_rx.try_recv() {
            let Some(l) = &mut link else {
                // Lost with the link; the coordinator's record and the next
                // reports say where these values are.
                continue;
            };
            let mut r = Ok(());
            for c in results.chunks(l.entries_max) {
                r = l.send(&Control::Migrated(c.to_vec()));
                if r.is_err() {
                    break;
                }
            }
            if let Err(e) = r {
                down(&mut link, &e);
            }
        }
        let wait = next_poll
            .saturating_duration_since(Instant::now())
            .min(RECV_SLICE);
        let Some(l) = &mut link else {
            std::thread::sleep(wait);
            continue;
        };
        let frame = match l.conn.recv_control(wait) {
            Ok(f) => f,
            Err(e) => {
                down(&mut link, &e);
                continue;
            }
        };
        match frame {
            None => {}
            Some(Control::Jobs(list)) => {
                stats.jobs.fetch_add(list.len() as u64, Ordering::Relaxed);
                if let Err(TrySendError::Full(list) | TrySendError::Disconnected(list)) =
                    jobs_tx.try_send(list)
                {
                    // Too many queued: these migrations did not happen.
                    let failed: Vec<(u64, u8, bool)> = list
                        .into_iter()
                        .filter(|(k, _)| *k == JobKind::Migrate)
                        .map(|(_, key)| (key, s.id, false))
                        .collect();
                    for c in failed.chunks(l.entries_max) {
                        if let Err(e) = l.send(&Control::Migrated(c.to_vec())) {
                            down(&mut link, &e);
                            break;
                        }
                    }
                }
            }
            Some(Control::Track(keys)) => {
                if let Some(t) = s.store().tracker(s.id) {
                    if let Err(e) = t.install(keys.into_iter().map(Key)) {
                        tracing::warn!(server = s.id, "cannot track the coordinator's keys: {e}");
                    }
                    tracking_since = Instant::now();
                }
            }
            Some(Control::Collect) => {
                let counts: Vec<(u64, u32)> = s
                    .store()
                    .tracker(s.id)
                    .map(|t| t.take())
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, n)| (k.0, n))
                    .collect();
                let interval_ms = tracking_since.elapsed().as_millis() as u64;
                let mut r = Ok(());
                // An empty answer is still an answer: the coordinator waits for one.
                let chunks: Vec<&[(u64, u32)]> = if counts.is_empty() {
                    vec![&[]]
                } else {
                    counts.chunks(l.entries_max).collect()
                };
                for c in chunks {
                    r = l.send(&Control::Tracked {
                        machine: s.id,
                        interval_ms,
                        counts: c.to_vec(),
                    });
                    if r.is_err() {
                        break;
                    }
                }
                if let Err(e) = r {
                    down(&mut link, &e);
                }
            }
            Some(other) => down(
                &mut link,
                &format!(
                    "the coordinator sent {:?}, which only servers send",
                    other.op()
                ),
            ),
        }
    }
}

fn executor_loop(
    s: &Shared,
    jobs_rx: &Receiver<Vec<(JobKind, u64)>>,
    results_tx: &mpsc::Sender<Vec<(u64, u8, bool)>>,
) {
    let stats = &s.control.driver;
    let batch_max = locus_coordinator::DriverConfig::default().batch_keys_max;
    let mut ex = Executor::new();
    loop {
        let list = match jobs_rx.recv_timeout(Duration::from_millis(100)) {
            Ok(l) => l,
            Err(RecvTimeoutError::Timeout) => {
                if s.stop.load(Ordering::Acquire) {
                    return;
                }
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => return,
        };
        let migrate: Vec<Key> = list
            .iter()
            .filter(|(k, _)| *k == JobKind::Migrate)
            .map(|&(_, key)| Key(key))
            .collect();
        for keys in migrate.chunks(batch_max) {
            let (moved0, bytes0) = (
                stats.moved.load(Ordering::Relaxed),
                stats.bytes_moved.load(Ordering::Relaxed),
            );
            let (ok, err) = ex.migrate(s.store(), s.id, keys, stats);
            if let Some(e) = err {
                stats.failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(server = s.id, "coordinator's migration jobs failed: {e}");
            }
            let moved = stats.moved.load(Ordering::Relaxed) - moved0;
            let bytes = stats.bytes_moved.load(Ordering::Relaxed) - bytes0;
            s.node.add_migrations_in(moved, bytes);
            metrics::counter!("locus_migrations_total", "how" => "coordinator").increment(moved);
            metrics::counter!("locus_migrated_bytes_total", "how" => "coordinator")
                .increment(bytes);
            let results = keys.iter().zip(ok).map(|(k, ok)| (k.0, s.id, ok)).collect();
            if results_tx.send(results).is_err() {
                return;
            }
        }
        for &(kind, key) in &list {
            if kind != JobKind::Replicate || s.stop.load(Ordering::Acquire) {
                continue;
            }
            let made0 = stats.replicas_created.load(Ordering::Relaxed);
            match ex.replicate(s.store(), s.id, Key(key), stats) {
                Ok(()) => metrics::counter!("locus_replicas_total")
                    .increment(stats.replicas_created.load(Ordering::Relaxed) - made0),
                Err(e) => {
                    stats.failed.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(server = s.id, "replica job failed: {e}");
                }
            }
        }
    }
}
