//! Prometheus metrics: the `metrics` facade with its Prometheus exporter's
//! recorder, rendered on `GET /metrics` by a small HTTP/1.1 responder on the
//! configured (loopback by default) address. Counters and histograms are
//! recorded where things happen (`conn.rs`, the node's `handle.rs`, the control link);
//! gauges that are cheaper to read than to keep (fabric counters, cache hit
//! rate, reclaim backlog) are set from the store just before each render.
//!
//! | metric | kind | labels |
//! |--------|------|--------|
//! | `locus_requests_total` | counter | `op`, `outcome` (ok, error) |
//! | `locus_request_seconds` | histogram | `op` |
//! | `locus_auth_refused_total` | counter | `listener` (client, control) |
//! | `locus_migrations_total`, `locus_migrated_bytes_total` | counter | `how` (manual, coordinator) |
//! | `locus_replicas_total`, `locus_reports_dropped_total` | counter | |
//! | `locus_reports_total` | counter | `kind` (periodic, hot) |
//! | `locus_replica_bytes_total` | counter | (bytes copied into replicas on the coordinator's jobs) |
//! | `locus_coordinator_linked` | gauge | (1 while the control link is up) |
//!
//! The coordinator process exports `locus_coordinator_*`: links, reports and
//! hot reports received, events dropped, migrate and replica jobs sent,
//! migrations reported done and failed, approvals (migrations, replicas),
//! decisions held back (contended, dwelling), and `servers_linked`.
//! | `locus_one_sided_ops`, `locus_one_sided_bytes` | gauge | `locality` (local, remote) |
//! | `locus_cache_hit_rate`, `locus_cache_entries` | gauge | |
//! | `locus_forwarded_served`, `locus_reclaim_backlog`, `locus_clients` | gauge | |
//! | `locus_value_live_bytes`, `locus_fabric_auth_refused` | gauge | |

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::OnceLock;
use std::thread::JoinHandle;
use std::time::Duration;

use locus_fabric::counting::Locality;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::server::Shared;
use crate::{Result, ServerError};

/// The process's recorder handle (one per process: the facade is global).
static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the Prometheus recorder (once per process) and returns its handle.
fn handle() -> Result<&'static PrometheusHandle> {
    if let Some(h) = HANDLE.get() {
        return Ok(h);
    }
    let recorder = PrometheusBuilder::new()
        .set_buckets(&[
            25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 0.1,
            0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
        ])
        .map_err(|e| ServerError::Metrics(e.to_string()))?
        .build_recorder();
    let h = recorder.handle();
    // Another thread may have won the race; only the winner's recorder is global.
    if HANDLE.set(h).is_ok() {
        metrics::set_global_recorder(recorder)
            .map_err(|e| ServerError::Metrics(format!("cannot install the recorder: {e}")))?;
    }
    Ok(HANDLE.get().expect("set above"))
}

/// Serves `GET /metrics` on `listener` (bound at the start of the process,
/// so that no other process can take the port while it starts up);
/// `refresh` sets gauges before each render. Returns the bound address and
/// the thread, which ends at the first request after `refresh` returns false
/// (the server is stopping).
pub(crate) fn serve(
    listener: TcpListener,
    refresh: impl Fn() -> bool + Send + 'static,
) -> Result<(SocketAddr, JoinHandle<()>)> {
    let h = handle()?;
    let bound = listener
        .local_addr()
        .map_err(|e| ServerError::io("metrics listener address", e))?;
    let t = crate::server::spawn("locus-metrics", move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            if !refresh() {
                return;
            }
            answer(stream, h);
        }
    })?;
    Ok((bound, t))
}

/// Answers one HTTP request (bounded: 8 KiB of request, 2 s).
fn answer(mut stream: TcpStream, h: &PrometheusHandle) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(2)));
    let mut req = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while req.len() < 8192 && !req.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => req.extend_from_slice(&buf[..n]),
        }
    }
    let line = req.split(|&b| b == b'\r').next().unwrap_or(&[]);
    let (status, body) = if line.starts_with(b"GET /metrics ") || line.starts_with(b"GET / ") {
        ("200 OK", h.render())
    } else {
        ("404 Not Found", "try GET /metrics\n".to_string())
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// Sets a server's gauges from its store; false once the server is stopping.
pub(crate) fn server_gauges(s: &Shared) -> bool {
    if s.stop.load(Ordering::Acquire) {
        return false;
    }
    let me = s.id;
    let store = s.store();
    let ops = store.fabric().counters().snapshot()[me as usize];
    for (loc, name) in [(Locality::Local, "local"), (Locality::Remote, "remote")] {
        metrics::gauge!("locus_one_sided_ops", "locality" => name).set(ops.ops_total(loc) as f64);
        metrics::gauge!("locus_one_sided_bytes", "locality" => name)
            .set(ops.bytes_total(loc) as f64);
    }
    if let Some(c) = store.cache(me) {
        metrics::gauge!("locus_cache_hit_rate").set(c.stats().hit_rate());
        metrics::gauge!("locus_cache_entries").set(c.len() as f64);
    }
    if let Some(st) = store.service_stats(me) {
        metrics::gauge!("locus_forwarded_served").set(st.requests_served as f64);
    }
    if let Some(u) = store.usage().into_iter().find(|u| u.machine == me) {
        metrics::gauge!("locus_value_live_bytes").set(u.value_live_bytes as f64);
    }
    metrics::gauge!("locus_reclaim_backlog").set(store.reclaim_backlog(me) as f64);
    metrics::gauge!("locus_clients").set(s.clients.load(Ordering::Relaxed) as f64);
    if s.file.coordinator.is_some() {
        let c = &s.control;
        metrics::gauge!("locus_coordinator_linked")
            .set(u8::from(c.linked.load(Ordering::Acquire)) as f64);
        metrics::counter!("locus_reports_dropped_total")
            .absolute(c.driver.reports_dropped.load(Ordering::Relaxed));
        metrics::counter!("locus_reports_total", "kind" => "periodic")
            .absolute(c.driver.reports.load(Ordering::Relaxed));
        metrics::counter!("locus_reports_total", "kind" => "hot")
            .absolute(c.driver.hot_reports.load(Ordering::Relaxed));
        metrics::counter!("locus_replica_bytes_total")
            .absolute(c.driver.replica_bytes.load(Ordering::Relaxed));
    }
    metrics::gauge!("locus_fabric_auth_refused").set(store.fabric().inner().auth_refusals() as f64);
    true
}
