//! `locus sparql serve`: the SPARQL 1.1 Protocol over HTTP at `/sparql`, for
//! an N-Triples file loaded into an embedded cluster (`--data`) or a running
//! cluster's RDF data (`--cluster`). This file is the driver: it reads each
//! HTTP request (the body up to its limit), hands it to
//! `locus_rdf::sparql::protocol::handle`, which decides everything, and
//! writes the response. Requests are answered one at a time by one engine,
//! so a query and an update never interleave; the time limit bounds how long
//! one request holds the others up. The HTTP I/O (reading bodies, writing
//! responses) runs on a few threads around the engine, so a slow client
//! holds one of them, not the engine.

use std::io::{Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::mpsc;

use clap::Args;
use locus_node::progress::Reporter;
use locus_rdf::sparql::protocol::{self, Limits, Service};

use crate::{CliResult, ClusterFlags};

/// The environment variable read for the token when --token is absent (a
/// token in an environment variable does not show in `ps`).
const TOKEN_ENV: &str = "LOCUS_SPARQL_TOKEN";

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// N-Triples file (or Turtle .ttl, N-Quads .nq, TriG .trig) to load into
    /// an embedded cluster and serve
    /// (SPARQL Update by POST changes that store, in memory: the file is not
    /// written).
    #[arg(
        long,
        value_name = "FILE.nt",
        required_unless_present = "cluster_file",
        conflicts_with = "cluster_file"
    )]
    pub data: Option<PathBuf>,
    /// Serve the RDF data of the running cluster this file describes
    /// (loaded with `locus rdf load FILE --cluster C`), read-only: updates
    /// are refused (501) on a cluster.
    #[arg(long = "cluster", value_name = "FILE")]
    pub cluster_file: Option<PathBuf>,
    /// Address to listen on. Loopback by default; any other address needs
    /// --token. Port 0 picks a free port (the first line printed names it).
    #[arg(long, default_value = "127.0.0.1:7878", value_name = "ADDR")]
    pub listen: String,
    /// Require `Authorization: Bearer TOKEN` on every request (also read
    /// from LOCUS_SPARQL_TOKEN, which does not show in `ps`).
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// A query or update runs at most this long, checked at every store
    /// read (503 past it).
    #[arg(long, default_value_t = 30_000, value_name = "MS")]
    pub timeout_ms: u64,
    /// An answer holds at most this many rows or triples (503 above it: an
    /// answer is never cut short).
    #[arg(long, default_value_t = 100_000, value_name = "N")]
    pub max_rows: usize,
    /// Allow SPARQL LOAD of files under this directory (with --data; without
    /// it every LOAD is refused with 403: an endpoint must not read any
    /// file its process can).
    #[arg(long, value_name = "DIR")]
    pub load_dir: Option<PathBuf>,
    /// A request body holds at most this many bytes (413 above it).
    #[arg(long, default_value_t = 1 << 20, value_name = "BYTES")]
    pub body_bytes_max: usize,
    #[command(flatten)]
    pub cluster: ClusterFlags,
}

/// The limits of `a`, validated, and the token from the flag or environment.
fn limits(a: &ServeArgs) -> CliResult<Limits> {
    for (name, v) in [
        ("--timeout-ms", a.timeout_ms),
        ("--max-rows", a.max_rows as u64),
        ("--body-bytes-max", a.body_bytes_max as u64),
    ] {
        if v == 0 {
            return Err(format!("{name} 0: must be at least 1").into());
        }
    }
    let token = a
        .token
        .clone()
        .or_else(|| std::env::var(TOKEN_ENV).ok())
        .filter(|t| !t.is_empty());
    if let Some(t) = &token {
        if t.len() < 16 || t.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "--token: must be at least 16 characters without spaces (got {} characters); e.g. openssl rand -hex 24",
                t.len()
            )
            .into());
        }
    }
    Ok(Limits {
        timeout_ms: a.timeout_ms,
        rows_max: a.max_rows,
        body_bytes_max: a.body_bytes_max,
        token,
    })
}

/// The address to bind: refused when it is not loopback and there is no token.
fn bind_addr(listen: &str, token: bool) -> CliResult<SocketAddr> {
    let addrs: Vec<SocketAddr> = listen
        .to_socket_addrs()
        .map_err(|e| format!("--listen {listen}: {e}"))?
        .collect();
    let addr = *addrs
        .first()
        .ok_or_else(|| format!("--listen {listen}: resolves to no address"))?;
    if !token && addrs.iter().any(|a| !a.ip().is_loopback()) {
        return Err(format!(
            "--listen {listen}: refusing to serve a non-loopback address without --token (or {TOKEN_ENV}); anyone who reaches it could query and update the data"
        )
        .into());
    }
    Ok(addr)
}

pub fn run(a: ServeArgs) -> CliResult {
    let limits = limits(&a)?;
    let addr = bind_addr(&a.listen, limits.token.is_some())?;
    if let Some(c) = &a.cluster_file {
        let (catalog, client) = crate::rdf_cluster::open(c)?;
        let sources = (0..client.machines())
            .map(|m| crate::rdf_cluster::ClientSource::new(client.clone(), m as u8))
            .collect();
        let mut service = protocol::ReadService::new(&catalog, sources)?;
        return serve(addr, &limits, &mut service);
    }
    let data = a
        .data
        .as_ref()
        .expect("clap requires --data without --cluster");
    let mut l = crate::rdf::load_file(data, &a.cluster, Reporter::terminal())?;
    let mut service = protocol::StoreService::new(&mut l.rdf)?;
    service.load_dir = a.load_dir.clone();
    serve(addr, &limits, &mut service)
}

/// Threads that read requests and write responses: a client that sends its
/// body or reads its response slowly holds one of them, never the engine.
const IO_THREADS: usize = 8;

/// A request as an I/O thread read it, and where its response goes.
struct Job {
    method: String,
    url: String,
    content_type: Option<String>,
    accept: Option<String>,
    authorization: Option<String>,
    body: Vec<u8>,
    reply: mpsc::SyncSender<protocol::Response>,
}

/// Serves until the process is stopped. The engine answers on this thread,
/// one request at a time; `IO_THREADS` threads do the HTTP I/O around it.
fn serve(addr: SocketAddr, limits: &Limits, service: &mut dyn Service) -> CliResult {
    let server = tiny_http::Server::http(addr)
        .map_err(|e| format!("--listen {addr}: cannot listen: {e}"))?;
    let bound = server
        .server_addr()
        .to_ip()
        .ok_or("the HTTP server is not on an IP address")?;
    // The first line of standard output names the port (for --listen ...:0).
    println!("listening on http://{bound}/sparql");
    std::io::stdout().flush()?;
    let (tx, rx) = mpsc::sync_channel::<Job>(IO_THREADS);
    std::thread::scope(|scope| {
        for _ in 0..IO_THREADS {
            let tx = tx.clone();
            let server = &server;
            scope.spawn(move || io_loop(server, limits.body_bytes_max, tx));
        }
        drop(tx);
        for job in rx {
            let req = protocol::Request {
                method: &job.method,
                url: &job.url,
                content_type: job.content_type.as_deref(),
                accept: job.accept.as_deref(),
                authorization: job.authorization.as_deref(),
                body: &job.body,
            };
            let r = protocol::handle(&req, limits, service);
            let path = job.url.split('?').next().unwrap_or("");
            tracing::info!("{} {path} -> {}", job.method, r.status);
            // The I/O thread may have given up on its client; nothing to do then.
            let _ = job.reply.send(r);
        }
    });
    Ok(())
}

/// One I/O thread: reads a request and its body (up to one byte past the
/// limit, so the protocol sees it is over; a declared length over it is not
/// read), hands it to the engine and writes the response.
fn io_loop(server: &tiny_http::Server, body_bytes_max: usize, engine: mpsc::SyncSender<Job>) {
    for mut request in server.incoming_requests() {
        let header = |name: &'static str| {
            request
                .headers()
                .iter()
                .find(|h| h.field.equiv(name))
                .map(|h| h.value.as_str().to_string())
        };
        let (content_type, accept, authorization) = (
            header("Content-Type"),
            header("Accept"),
            header("Authorization"),
        );
        let declared_over = request.body_length().is_some_and(|n| n > body_bytes_max);
        let mut body = Vec::new();
        if declared_over {
            body.resize(body_bytes_max + 1, 0);
        } else if let Err(e) = request
            .as_reader()
            .take(body_bytes_max as u64 + 1)
            .read_to_end(&mut body)
        {
            tracing::debug!("reading a request body: {e}");
            continue;
        }
        let (reply, answer) = mpsc::sync_channel(1);
        let job = Job {
            method: request.method().as_str().to_string(),
            url: request.url().to_string(),
            content_type,
            accept,
            authorization,
            body,
            reply,
        };
        if engine.send(job).is_err() {
            return;
        }
        let Ok(r) = answer.recv() else { return };
        let mut response = tiny_http::Response::from_data(r.body).with_status_code(r.status);
        let headers = std::iter::once(("Content-Type", r.content_type.to_string()))
            .chain(r.headers)
            .chain(declared_over.then(|| ("Connection", "close".to_string())));
        for (name, value) in headers {
            match tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()) {
                Ok(h) => response.add_header(h),
                Err(()) => tracing::warn!("header {name}: {value:?} is not valid in HTTP"),
            }
        }
        if let Err(e) = request.respond(response) {
            tracing::debug!("writing a response: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_loopback_needs_a_token() {
        assert!(bind_addr("127.0.0.1:0", false).is_ok());
        assert!(bind_addr("[::1]:0", false).is_ok());
        let e = bind_addr("0.0.0.0:0", false).unwrap_err().to_string();
        assert!(e.contains("refusing"), "{e}");
        assert!(bind_addr("0.0.0.0:0", true).is_ok());
    }
}
