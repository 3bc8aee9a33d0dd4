//! `locus bench foundation`: the figures of the foundation issue, measured
//! side by side in one run, written as JSON; and `locus serve`, a TCP memory
//! node that the TCP measurements run against in a separate process.

use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, Subcommand};
use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_fabric::{Fabric, Port, WorkRequest};
use locus_store::{Store, StoreConfig};
use locus_workloads::traversal::{run_two_hop, start_vertices, StartDist, TwoHop};
use serde::Serialize;

use crate::config::Config;
use locus_bench::cluster::rmat_csr;

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub which: Bench,
}

#[derive(Subcommand, Debug)]
pub enum Bench {
    /// Fabric and store micro-figures plus two-hop throughput, Ideal vs 8 machines.
    Foundation(FoundationArgs),
    /// Split-migration speed (Pragh Fig. 13): values/s and bytes/s by payload and threads.
    MigrateSpeed(crate::migrate_speed::MigrateSpeedArgs),
    /// Pragh's traversal benchmark (section 6): schemes side by side in one run.
    Pragh(crate::pragh::PraghArgs),
    /// Far-memory analytics (Fargraph+ Figs. 15, 18, 19, Table 4, threads).
    Fargraph(crate::fargraph_bench::FargraphArgs),
    /// Live shard migration (NetMigrate 6: Figs. 4-6, Tables 2-7), every protocol side by side.
    Netmigrate(crate::netmigrate_bench::NetmigrateArgs),
}

#[derive(Args, Debug)]
pub struct FoundationArgs {
    /// quick (a minute or so) or full (larger graph, more queries).
    #[arg(long, default_value = "quick")]
    pub preset: String,
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Directory to write foundation.json into.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Skip the TCP measurements (they start a `locus serve` child process).
    #[arg(long)]
    pub no_tcp: bool,
}

#[derive(Serialize, Default)]
pub struct Foundation {
    pub machine: String,
    pub preset: String,
    pub local_get_100_median_ns: f64,
    pub remote_get_100_median_ns: f64,
    pub remote_read_8b_median_ns: f64,
    pub pipelined_64_remote_reads_median_ns: f64,
    pub model_latency_ns: u64,
    pub tcp_read_8b_rtt_median_us: Option<f64>,
    pub tcp_pipelined_reads_per_s: Option<f64>,
    pub tcp_pipeline_window: Option<usize>,
    pub two_hop: Vec<TwoHopRow>,
}

#[derive(Serialize)]
pub struct TwoHopRow {
    pub scheme: String,
    pub machines: usize,
    pub pipelined: bool,
    pub threads: usize,
    pub queries: u64,
    pub throughput_qps: f64,
    pub qps_per_core: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub remote_rate: f64,
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

fn micro(out: &mut Foundation) -> Result<(), String> {
    let fabric = LocalFabric::new(LocalConfig::with_machines(8)).map_err(|e| e.to_string())?;
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
    )
    .map_err(|e| e.to_string())?;
    let list: Vec<u32> = (1000..1100).collect();
    // Vertex 8 lives on machine 0, vertex 9 on machine 1.
    store
        .worker(0)
        .map_err(|e| e.to_string())?
        .put(8, &list)
        .map_err(|e| e.to_string())?;
    store
        .worker(1)
        .map_err(|e| e.to_string())?
        .put(9, &list)
        .map_err(|e| e.to_string())?;
    let mut w = store.worker(0).map_err(|e| e.to_string())?;
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
        return Err("a benchmark get returned a wrong result".into());
    }
    let region = fabric.lookup(1, "values").map_err(|e| e.to_string())?.id;
    let mut p = fabric.port(0).map_err(|e| e.to_string())?;
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
        return Err("a fabric operation failed during the benchmark".into());
    }
    Ok(())
}

fn two_hop_rows(out: &mut Foundation, full: bool) -> Result<(), String> {
    let mut c = Config::default();
    c.graph.scale = if full { 22 } else { 18 };
    let queries = if full { 20_000 } else { 4_000 };
    let csr = rmat_csr(&c.graph).map_err(|e| e.to_string())?;
    let k = 100;
    // 100 x 100 queries: start where there are at least 100 neighbours.
    let starts = start_vertices(csr.vertex_count(), queries, StartDist::Uniform, 7, |v| {
        csr.degree(v) >= k as u64
    })
    .map_err(|e| e.to_string())?;
    let threads = c.threads();
    for pipelined in [false, true] {
        for machines in [1usize, 8] {
            let e = crate::cluster::build(&csr, machines, &c, &locus_bench::Reporter::terminal())
                .map_err(|e| e.to_string())?;
            let r = run_two_hop(
                &e.store,
                e.fabric.counters(),
                threads,
                &starts,
                TwoHop { k, pipelined },
                &|_| {},
            )
            .map_err(|e| e.to_string())?;
            out.two_hop.push(TwoHopRow {
                scheme: if machines == 1 {
                    "Ideal".into()
                } else {
                    format!("Hash-{machines}")
                },
                machines,
                pipelined,
                threads,
                queries: r.queries,
                throughput_qps: r.throughput_qps,
                qps_per_core: r.throughput_qps / threads as f64,
                p50_us: r.p50_us,
                p99_us: r.p99_us,
                remote_rate: r.remote_rate,
            });
        }
    }
    Ok(())
}

pub fn run(a: BenchArgs) -> crate::CliResult {
    match a.which {
        Bench::Foundation(f) => foundation(f).map_err(Into::into),
        Bench::MigrateSpeed(m) => crate::migrate_speed::run(m).map_err(Into::into),
        Bench::Pragh(p) => crate::pragh::run(p),
        Bench::Fargraph(g) => crate::fargraph_bench::run(g).map_err(Into::into),
        Bench::Netmigrate(n) => crate::netmigrate_bench::run(n).map_err(Into::into),
    }
}

fn foundation(f: FoundationArgs) -> Result<(), String> {
    let full = match f.preset.as_str() {
        "quick" => false,
        "full" => true,
        other => return Err(format!("--preset {other}: expected quick or full")),
    };
    let mut out = Foundation {
        machine: format!(
            "{} cores, {}",
            locus_fabric::pool::default_threads(),
            std::env::consts::ARCH
        ),
        preset: f.preset.clone(),
        ..Foundation::default()
    };
    eprintln!("measuring the in-process fabric and store ...");
    micro(&mut out)?;
    if !f.no_tcp {
        eprintln!("measuring the TCP fabric against a `locus serve` process on loopback ...");
        tcp::measure(&mut out)?;
    }
    eprintln!("measuring two-hop queries, Ideal vs 8 machines ...");
    two_hop_rows(&mut out, full)?;
    let json = serde_json::to_string_pretty(&out).map_err(|e| e.to_string())?;
    if let Some(dir) = &f.out {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let path = dir.join("foundation.json");
        std::fs::write(&path, &json)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    if f.json {
        println!("{json}");
    } else {
        print_table(&out);
    }
    Ok(())
}

fn print_table(o: &Foundation) {
    println!(
        "in-process fabric (model: {} ns + payload / 12.5 GB/s):",
        o.model_latency_ns
    );
    println!(
        "  local get, 100 neighbours      {:>10.0} ns (median)",
        o.local_get_100_median_ns
    );
    println!(
        "  remote get, 100 neighbours     {:>10.0} ns",
        o.remote_get_100_median_ns
    );
    println!(
        "  remote 8-byte read             {:>10.0} ns",
        o.remote_read_8b_median_ns
    );
    println!(
        "  64 pipelined remote reads      {:>10.0} ns for the batch",
        o.pipelined_64_remote_reads_median_ns
    );
    if let (Some(rtt), Some(rate)) = (o.tcp_read_8b_rtt_median_us, o.tcp_pipelined_reads_per_s) {
        println!("TCP fabric, loopback, separate server process:");
        println!("  8-byte read round trip         {:>10.1} us (median)", rtt);
        println!(
            "  pipelined 8-byte reads         {:>10.0} /s on one connection (window {})",
            rate,
            o.tcp_pipeline_window.unwrap_or(0)
        );
    }
    println!("two-hop queries (100 x 100):");
    println!(
        "  {:<8} {:>9} {:>8} {:>12} {:>12} {:>10} {:>10} {:>8}",
        "scheme", "pipelined", "threads", "queries/s", "per core", "p50(us)", "p99(us)", "remote"
    );
    for r in &o.two_hop {
        println!(
            "  {:<8} {:>9} {:>8} {:>12.0} {:>12.0} {:>10.1} {:>10.1} {:>7.1}%",
            r.scheme,
            r.pipelined,
            r.threads,
            r.throughput_qps,
            r.qps_per_core,
            r.p50_us,
            r.p99_us,
            r.remote_rate * 100.0
        );
    }
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on (loopback by default; port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: String,
    /// Machines in the cluster.
    #[arg(long, default_value_t = 2)]
    pub machines: usize,
    /// The machine this process hosts.
    #[arg(long, default_value_t = 1)]
    pub machine: u8,
    /// A region to register, as NAME:BYTES (repeatable).
    #[arg(long = "region", value_name = "NAME:BYTES")]
    pub regions: Vec<String>,
    /// Exit after this many seconds (every server here stops by itself).
    #[arg(long, default_value_t = 600)]
    pub lifetime_s: u64,
}

pub fn serve(a: ServeArgs) -> Result<(), String> {
    tcp::serve(a)
}

mod tcp {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::{SocketAddr, TcpListener};
    use std::process::{Child, Command, Stdio};
    use std::time::Duration;

    use locus_fabric::tcp::{TcpConfig, TcpFabric};

    use super::*;

    /// Parses `NAME:BYTES` (BYTES may end in K, M or G).
    fn parse_region(spec: &str) -> Result<(String, u64), String> {
        let (name, size) = spec
            .split_once(':')
            .ok_or_else(|| format!("--region {spec}: expected NAME:BYTES, e.g. bench:1M"))?;
        let (digits, mult) = match size.chars().last() {
            Some('K' | 'k') => (&size[..size.len() - 1], 1u64 << 10),
            Some('M' | 'm') => (&size[..size.len() - 1], 1 << 20),
            Some('G' | 'g') => (&size[..size.len() - 1], 1 << 30),
            _ => (size, 1),
        };
        let n: u64 = digits
            .parse()
            .map_err(|_| format!("--region {spec}: '{size}' is not a byte count"))?;
        Ok((name.to_string(), n * mult))
    }

    /// Placeholder address for machines a node never talks to.
    fn unused_peer() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 9))
    }

    pub fn serve(a: ServeArgs) -> Result<(), String> {
        if a.machines < 2 || a.machines > locus_fabric::MACHINES_MAX {
            return Err(format!("--machines {} must be 2..=128", a.machines));
        }
        if a.machine as usize >= a.machines {
            return Err(format!(
                "--machine {} is not below --machines {}",
                a.machine, a.machines
            ));
        }
        let listener = TcpListener::bind(&a.listen)
            .map_err(|e| format!("cannot listen on {}: {e}", a.listen))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let mut peers = vec![unused_peer(); a.machines];
        peers[a.machine as usize] = addr;
        let fabric = TcpFabric::from_listener(TcpConfig::new(vec![a.machine], peers), listener)
            .map_err(|e| e.to_string())?;
        for spec in &a.regions {
            let (name, bytes) = parse_region(spec)?;
            fabric
                .register(a.machine, &name, bytes)
                .map_err(|e| e.to_string())?;
        }
        println!("listening on {addr}");
        std::io::stdout().flush().map_err(|e| e.to_string())?;
        // Serve until the lifetime ends or standard input closes (the parent went away).
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            let mut sink = [0u8; 64];
            let mut stdin = std::io::stdin();
            while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
            let _ = tx.send(());
        });
        let _ = rx.recv_timeout(Duration::from_secs(a.lifetime_s));
        fabric.shutdown();
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

    fn start_server() -> Result<Server, String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut child = Command::new(exe)
            .args([
                "serve",
                "--machines",
                "2",
                "--machine",
                "1",
                "--region",
                "bench:1M",
                "--lifetime-s",
                "300",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start `locus serve`: {e}"))?;
        let stdout = child.stdout.take().ok_or("no stdout from `locus serve`")?;
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .map_err(|e| format!("reading from `locus serve`: {e}"))?;
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| format!("`locus serve` said {line:?}, expected 'listening on ADDR'"))?;
        Ok(Server { child, addr })
    }

    pub fn measure(out: &mut Foundation) -> Result<(), String> {
        let server = start_server()?;
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        let me = listener.local_addr().map_err(|e| e.to_string())?;
        let node =
            TcpFabric::from_listener(TcpConfig::new(vec![0], vec![me, server.addr]), listener)
                .map_err(|e| e.to_string())?;
        let region = node.lookup(1, "bench").map_err(|e| e.to_string())?.id;
        let mut p = node.port(0).map_err(|e| e.to_string())?;
        let mut ok = true;
        let rtt_ns = median_ns(201, 20, || {
            ok &= p.read_word(1, region, 0).is_ok();
        });
        out.tcp_read_8b_rtt_median_us = Some(rtt_ns / 1000.0);
        // Keep `window` reads in flight on one connection for `total` reads.
        let window = 64usize;
        let total = 200_000u64;
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
                ))
                .map_err(|e| e.to_string())?;
                posted += 1;
            }
            done.clear();
            p.wait(&mut done).map_err(|e| e.to_string())?;
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
            return Err("a TCP read failed during the benchmark".into());
        }
        drop(p);
        node.shutdown();
        drop(server);
        Ok(())
    }

    #[cfg(test)]
    mod tests {
        use super::parse_region;

        #[test]
        fn region_specs() {
            assert_eq!(parse_region("a:1M").unwrap(), ("a".to_string(), 1 << 20));
            assert_eq!(parse_region("b:4096").unwrap(), ("b".to_string(), 4096));
            assert!(parse_region("c").is_err());
            assert!(parse_region("c:x").is_err());
        }
    }
}
