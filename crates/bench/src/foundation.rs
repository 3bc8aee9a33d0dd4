//! `locus bench foundation`: the foundation's figures measured side by side in
//! one run: in-process fabric and store latencies, TCP round trips against a
//! `locus serve` process on loopback, and two-hop throughput, Ideal vs 8
//! machines.
//!
//! The TCP figures need a memory node in *another process*, so that the
//! client's and the server's threads do not share an address space: the run
//! starts the `locus` executable named in [`Settings::serve_exe`] as
//! `locus serve` and reads the address it prints. The child is killed when
//! the measurement ends, however it ends, and exits by itself when its
//! standard input closes or its lifetime passes.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_fabric::tcp::{TcpConfig, TcpFabric};
use locus_fabric::{Fabric, Port, WorkRequest};
use locus_store::{Store, StoreConfig};
use locus_workloads::traversal::{run_two_hop, start_vertices, StartDist, TwoHop};
use serde::Serialize;

use crate::cluster::{self, rmat_csr};
use crate::config::Config;
use crate::output::{self, OutDir};
use crate::{BenchError, Preset, Reporter, Result};

/// The experiment's name in errors and file names.
const NAME: &str = "foundation";
/// Reads kept in flight on one TCP connection for the pipelined figure.
const TCP_PIPELINE_WINDOW: usize = 64;
/// Reads of the pipelined TCP figure.
const TCP_PIPELINED_READS: u64 = 200_000;
/// Seconds the `locus serve` child lives at most (it also exits when its
/// standard input closes, that is, when this process goes away).
const SERVE_LIFETIME_S: u64 = 300;

/// What a foundation run measures, from a [`Preset`] and overrides.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The preset the settings came from.
    pub preset: Preset,
    /// R-MAT scale of the two-hop graph.
    pub scale: u32,
    /// Two-hop queries per row.
    pub queries: usize,
    /// Neighbours per hop.
    pub k: usize,
    /// Seed of the start vertices.
    pub seed: u64,
    /// The `locus` executable whose `serve` command the TCP figures run
    /// against; `None` skips them.
    pub serve_exe: Option<PathBuf>,
}

impl Settings {
    /// quick (R-MAT scale 18, 4,000 queries; a minute or so) or full (scale
    /// 22, 20,000 queries). The TCP figures are off until `serve_exe` is set.
    pub fn new(preset: Preset) -> Settings {
        let (scale, queries) = match preset {
            Preset::Quick => (18, 4_000),
            Preset::Full => (22, 20_000),
        };
        Settings {
            preset,
            scale,
            queries,
            k: 100,
            seed: 7,
            serve_exe: None,
        }
    }

    /// Rejects settings that cannot work, naming the flag.
    pub fn validate(&self) -> Result<()> {
        if !(1..=32).contains(&self.scale) {
            return Err(BenchError::setting("--scale", self.scale, "must be 1..=32"));
        }
        if self.queries == 0 {
            return Err(BenchError::setting("--queries", 0, "must be positive"));
        }
        if self.k == 0 {
            return Err(BenchError::setting("--k", 0, "must be positive"));
        }
        Ok(())
    }
}

/// The figures of one run (`foundation.json`).
#[derive(Debug, Serialize, Default)]
pub struct Foundation {
    /// Cores and architecture of the machine ("2 cores, x86_64").
    pub machine: String,
    /// The preset.
    pub preset: Preset,
    /// Median GET of a 100-neighbour value held by the reading machine.
    pub local_get_100_median_ns: f64,
    /// Median GET of a 100-neighbour value held by another machine.
    pub remote_get_100_median_ns: f64,
    /// Median remote 8-byte READ.
    pub remote_read_8b_median_ns: f64,
    /// Median time of 64 remote 8-byte READs posted together.
    pub pipelined_64_remote_reads_median_ns: f64,
    /// The in-process fabric's modelled latency.
    pub model_latency_ns: u64,
    /// Median 8-byte READ round trip over TCP loopback (skipped: `None`).
    pub tcp_read_8b_rtt_median_us: Option<f64>,
    /// 8-byte READs per second with a window of reads in flight on one connection.
    pub tcp_pipelined_reads_per_s: Option<f64>,
    /// That window.
    pub tcp_pipeline_window: Option<usize>,
    /// Two-hop throughput, Ideal vs Hash-8, plain and pipelined.
    pub two_hop: Vec<TwoHopRow>,
}

/// One two-hop measurement.
#[derive(Debug, Serialize)]
pub struct TwoHopRow {
    /// "Ideal" or "Hash-8".
    pub scheme: String,
    /// Machines.
    pub machines: usize,
    /// Whether the second hop's reads were pipelined.
    pub pipelined: bool,
    /// Worker threads.
    pub threads: usize,
    /// Queries measured.
    pub queries: u64,
    /// Queries per second.
    pub throughput_qps: f64,
    /// Queries per second per worker thread.
    pub qps_per_core: f64,
    /// Median latency, microseconds.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Remote one-sided operations / all.
    pub remote_rate: f64,
}

impl Foundation {
    /// Writes `foundation.json` into `dir`. Returns the files written.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        let mut out = OutDir::create(dir)?;
        out.json(&format!("{NAME}.json"), self)?;
        Ok(out.written().to_vec())
    }
}

/// Measures everything `settings` asks for.
pub fn run(settings: &Settings, r: &Reporter) -> Result<Foundation> {
    settings.validate()?;
    let mut out = Foundation {
        machine: format!("{} cores, {}", output::cores(), std::env::consts::ARCH),
        preset: settings.preset,
        ..Foundation::default()
    };
    r.note("measuring the in-process fabric and store ...");
    micro(&mut out)?;
    if let Some(exe) = &settings.serve_exe {
        r.note("measuring the TCP fabric against a `locus serve` process on loopback ...");
        tcp(&mut out, exe)?;
    }
    r.note("measuring two-hop queries, Ideal vs 8 machines ...");
    two_hop_rows(&mut out, settings, r)?;
    Ok(out)
}

/// A measured operation that went wrong: the figure would be meaningless.
fn failed(what: &str) -> BenchError {
    BenchError::Measurement {
        experiment: NAME,
        what: what.into(),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Median time of one call of `f`, from `rounds` timed batches of `batch` calls.
fn median_ns(rounds: usize, batch: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..batch {
        f();
    }
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        for _ in 0..batch {
            f();
        }
        samples.push(t.elapsed().as_nanos() as f64 / batch as f64);
    }
    median(samples)
}

fn micro(out: &mut Foundation) -> Result<()> {
    let fabric = LocalFabric::new(LocalConfig::with_machines(8))?;
    out.model_latency_ns = fabric.config().latency_ns;
    let store = Store::create(
        fabric.clone(),
        StoreConfig {
            buckets_per_machine: 1 << 10,
            value_region_bytes: 16 << 20,
            // The foundation's figures: hash placement, no location cache.
            cache_bytes_max: 0,
            ..StoreConfig::default()
        },
    )?;
    let list: Vec<u32> = (1000..1100).collect();
    // Vertex 8 lives on machine 0, vertex 9 on machine 1.
    store.worker(0)?.put(8, &list)?;
    store.worker(1)?.put(9, &list)?;
    let mut w = store.worker(0)?;
    let mut buf = Vec::with_capacity(128);
    let mut ok = true;
    out.local_get_100_median_ns = median_ns(201, 1000, || {
        buf.clear();
        ok &= w.neighbors(8, usize::MAX, &mut buf).is_ok() && buf.len() == 100;
    });
    out.remote_get_100_median_ns = median_ns(101, 100, || {
        buf.clear();
        ok &= w.neighbors(9, usize::MAX, &mut buf).is_ok() && buf.len() == 100;
    });
    if !ok {
        return Err(failed("a benchmark get returned a wrong result"));
    }
    let region = fabric.lookup(1, "values")?.id;
    let mut p = fabric.port(0)?;
    out.remote_read_8b_median_ns = median_ns(101, 100, || {
        ok &= p.read_word(1, region, 64).is_ok();
    });
    // Buffers come back in completions and are reused, as a real poller would.
    let mut done = Vec::with_capacity(64);
    let mut spare: Vec<Vec<u8>> = (0..64).map(|_| vec![0u8; 8]).collect();
    out.pipelined_64_remote_reads_median_ns = median_ns(101, 20, || {
        for i in 0..64u64 {
            let buf = spare.pop().unwrap_or_else(|| vec![0u8; 8]);
            ok &= p
                .post(WorkRequest::read_into(i, 1, region, 64 + i * 8, buf))
                .is_ok();
        }
        done.clear();
        while done.len() < 64 {
            ok &= p.wait(&mut done).is_ok();
        }
        for c in done.drain(..) {
            match c.result.map(|o| o.into_buf()) {
                Ok(Some(b)) => spare.push(b),
                _ => ok = false,
            }
        }
    });
    if !ok {
        return Err(failed("a fabric operation failed during the benchmark"));
    }
    Ok(())
}

fn two_hop_rows(out: &mut Foundation, s: &Settings, r: &Reporter) -> Result<()> {
    let mut c = Config::default();
    c.graph.scale = s.scale;
    let csr = rmat_csr(&c.graph)?;
    let k = s.k;
    // k x k queries: start where there are at least k neighbours.
    let starts = start_vertices(
        csr.vertex_count(),
        s.queries,
        StartDist::Uniform,
        s.seed,
        |v| csr.degree(v) >= k as u64,
    )?;
    let threads = c.threads();
    for pipelined in [false, true] {
        for machines in [1usize, 8] {
            let e = cluster::build(&csr, machines, &c, r)?;
            let run = run_two_hop(
                &e.stores,
                e.fabric.counters(),
                threads,
                &starts,
                TwoHop { k, pipelined },
                &|_| {},
            )?;
            out.two_hop.push(TwoHopRow {
                scheme: if machines == 1 {
                    "Ideal".into()
                } else {
                    format!("Hash-{machines}")
                },
                machines,
                pipelined,
                threads,
                queries: run.queries,
                throughput_qps: run.throughput_qps,
                qps_per_core: run.throughput_qps / threads as f64,
                p50_us: run.p50_us,
                p99_us: run.p99_us,
                remote_rate: run.remote_rate,
            });
        }
    }
    Ok(())
}

/// A `locus serve` child; killed when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `exe serve` hosting machine 1 of 2 with a 1 MiB region `bench`,
/// and reads the address it listens on from its first line.
fn start_server(exe: &Path) -> Result<Server> {
    let lifetime = SERVE_LIFETIME_S.to_string();
    let child = Command::new(exe)
        .args([
            "serve",
            "--machines",
            "2",
            "--machine",
            "1",
            "--region",
            "bench:1M",
            "--lifetime-s",
            &lifetime,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|source| BenchError::Io {
            action: "starting `serve` with",
            path: exe.to_path_buf(),
            source,
        })?;
    let child_failed = |reason: String| BenchError::Child {
        program: exe.to_path_buf(),
        reason,
    };
    // From here on the child is killed if anything fails.
    let mut server = Server {
        child,
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
    };
    let Some(stdout) = server.child.stdout.take() else {
        return Err(child_failed("`serve` has no standard output".into()));
    };
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .map_err(|source| BenchError::Io {
            action: "reading from `serve` of",
            path: exe.to_path_buf(),
            source,
        })?;
    server.addr = line
        .trim()
        .strip_prefix("listening on ")
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| {
            child_failed(format!(
                "`serve` said {line:?}, expected 'listening on ADDR'"
            ))
        })?;
    Ok(server)
}

/// The TCP figures: one node here (machine 0) against `locus serve` (machine 1).
fn tcp(out: &mut Foundation, exe: &Path) -> Result<()> {
    let server = start_server(exe)?;
    let here = "127.0.0.1:0";
    let socket = |action, source| BenchError::Socket {
        action,
        addr: here.into(),
        source,
    };
    let listener = TcpListener::bind(here).map_err(|e| socket("listening on", e))?;
    let me = listener
        .local_addr()
        .map_err(|e| socket("reading the address of", e))?;
    let node = TcpFabric::from_listener(TcpConfig::new(vec![0], vec![me, server.addr]), listener)?;
    let region = node.lookup(1, "bench")?.id;
    let mut p = node.port(0)?;
    let mut ok = true;
    let rtt_ns = median_ns(201, 20, || {
        ok &= p.read_word(1, region, 0).is_ok();
    });
    out.tcp_read_8b_rtt_median_us = Some(rtt_ns / 1000.0);
    // Keep `window` reads in flight on one connection for `total` reads.
    let window = TCP_PIPELINE_WINDOW;
    let total = TCP_PIPELINED_READS;
    let mut done = Vec::with_capacity(window);
    let mut spare: Vec<Vec<u8>> = (0..window).map(|_| vec![0u8; 8]).collect();
    let (mut posted, mut completed) = (0u64, 0u64);
    let t = Instant::now();
    while completed < total {
        while posted < total && p.inflight() < window {
            let buf = spare.pop().unwrap_or_else(|| vec![0u8; 8]);
            p.post(WorkRequest::read_into(
                posted,
                1,
                region,
                (posted % 1024) * 8,
                buf,
            ))?;
            posted += 1;
        }
        done.clear();
        p.wait(&mut done)?;
        for c in done.drain(..) {
            completed += 1;
            match c.result.map(|o| o.into_buf()) {
                Ok(Some(b)) => spare.push(b),
                _ => ok = false,
            }
        }
    }
    out.tcp_pipelined_reads_per_s = Some(total as f64 / t.elapsed().as_secs_f64());
    out.tcp_pipeline_window = Some(window);
    if !ok {
        return Err(failed("a TCP read failed during the benchmark"));
    }
    drop(p);
    node.shutdown();
    drop(server);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_size_the_two_hop_graph() {
        let q = Settings::new(Preset::Quick);
        let f = Settings::new(Preset::Full);
        assert_eq!((q.scale, q.queries), (18, 4_000));
        assert_eq!((f.scale, f.queries), (22, 20_000));
        assert!(q.serve_exe.is_none(), "TCP figures are opt-in");
        let mut bad = q.clone();
        bad.scale = 40;
        assert!(bad.validate().unwrap_err().to_string().contains("--scale"));
    }

    #[test]
    fn a_serve_exe_that_does_not_exist_is_named() {
        let e = start_server(Path::new("/nonexistent/locus"))
            .err()
            .expect("no such program")
            .to_string();
        assert!(e.contains("/nonexistent/locus"), "{e}");
    }
}
