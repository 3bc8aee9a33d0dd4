//! `locus server`, `locus coordinator`, `locus cluster up|down|status`: a
//! machine of the store as a process, the coordinator as a process, and a
//! local cluster of them on loopback for trying Locus out.
//!
//! `cluster up` picks free loopback ports, generates a secret, writes
//! `DIR/cluster.toml` (what `--cluster FILE` takes), starts the coordinator
//! and one `locus server` per machine as detached processes (logs in
//! `DIR/logs/`, process ids in `DIR/pids.json`) and waits until each server
//! answers and has linked to the coordinator. `down` stops them (SIGTERM,
//! then SIGKILL after a grace period); `status` asks each server for its
//! statistics and the coordinator for its metrics.
//!
//! `up` on a directory that already holds a cluster file restarts, with
//! that file, whichever of its processes are not running (a server then
//! recovers from its checkpoint and log, `[durability]`) and leaves the
//! running ones alone.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use locus_client::{Client, ClientConfig};
use locus_fabric::auth::Secret;
use locus_server::config::{
    ClusterFile, ClusterSection, CoordinatorEntry, DurabilitySection, ServerEntry,
};
use locus_server::{CoordinatorProcess, Server};
use serde::{Deserialize, Serialize};

use crate::cluster_ports::FreePorts;
use crate::CliResult;

#[derive(Args, Debug)]
pub struct ServerArgs {
    /// The cluster file (written by `locus cluster up`).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// This server's machine id (its `[[server]] id` in the file).
    #[arg(long)]
    pub id: u8,
    /// Stop after this many seconds (default: run until SIGTERM or SIGINT).
    #[arg(long)]
    pub lifetime_s: Option<u64>,
}

pub fn server(a: ServerArgs) -> CliResult {
    let file = ClusterFile::load(&a.config)?;
    let s = Server::start(file, a.id)?;
    println!(
        "server {} serving clients on {}{}",
        a.id,
        s.client_addr(),
        s.metrics_addr()
            .map(|m| format!(", metrics on http://{m}/metrics"))
            .unwrap_or_default()
    );
    crate::wait_for_signal_or(a.lifetime_s.map(Duration::from_secs), || {
        s.fenced().is_some()
    });
    if let Some(why) = s.fenced() {
        eprintln!(
            "server {} (epoch {}) is fenced out of the cluster: {why}; exiting",
            a.id,
            s.epoch()
        );
        // Its fabric is already shut down; exit as a crash would (the log
        // holds everything acknowledged), without waiting on any thread.
        std::process::exit(3);
    }
    tracing::info!(server = a.id, "stopping");
    s.stop();
    Ok(())
}

#[derive(Args, Debug)]
pub struct CoordinatorArgs {
    /// The cluster file (its `[coordinator]` section: control address, record, metrics).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// Stop after this many seconds (default: run until SIGTERM or SIGINT).
    #[arg(long)]
    pub lifetime_s: Option<u64>,
    /// Listen for servers here instead of the file's `[coordinator] control`
    /// (a standby beside the first coordinator; with `[etcd]` servers find
    /// whichever leads through etcd).
    #[arg(long, value_name = "ADDR")]
    pub control: Option<SocketAddr>,
    /// Serve metrics here instead of the file's `[coordinator] metrics`.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<SocketAddr>,
    /// Serve no metrics (the file's metrics address belongs to another coordinator).
    #[arg(long)]
    pub no_metrics: bool,
}

pub fn coordinator(a: CoordinatorArgs) -> CliResult {
    let mut file = ClusterFile::load(&a.config)?;
    if let Some(entry) = file.coordinator.as_mut() {
        if let Some(c) = a.control {
            entry.control = c;
        }
        if a.metrics.is_some() {
            entry.metrics = a.metrics;
        }
        if a.no_metrics {
            entry.metrics = None;
        }
    }
    if file.etcd.is_some() {
        println!("coordinator campaigning in etcd (a standby waits here until it leads)");
    }
    let c = CoordinatorProcess::start(file)?;
    println!(
        "coordinator listening for servers on {} ({} keys restored from its record){}",
        c.control_addr(),
        c.restored(),
        c.metrics_addr()
            .map(|m| format!(", metrics on http://{m}/metrics"))
            .unwrap_or_default()
    );
    if let Some(term) = c.term() {
        println!("coordinator leads (term {term})");
    }
    crate::wait_for_signal_or(a.lifetime_s.map(Duration::from_secs), || {
        c.fenced().is_some()
    });
    if let Some(why) = c.fenced() {
        eprintln!("coordinator is fenced out: {why}; exiting");
        std::process::exit(3);
    }
    tracing::info!("coordinator stopping");
    c.stop();
    Ok(())
}

#[derive(Args, Debug)]
pub struct ClusterArgs {
    #[command(subcommand)]
    pub command: ClusterCommand,
}

#[derive(Subcommand, Debug)]
pub enum ClusterCommand {
    /// Start a local cluster of N servers on loopback and write its cluster file.
    Up(UpArgs),
    /// Stop the local cluster started in DIR.
    Down(DirArgs),
    /// Show each server: up or down, keys, values here and away, bytes,
    /// cache hit rate, migrations, replicas, reclaim backlog.
    Status(StatusArgs),
}

#[derive(Args, Debug)]
pub struct UpArgs {
    /// Servers (machines) to start.
    #[arg(long, default_value_t = 3)]
    pub servers: usize,
    /// Directory for the cluster file, logs and process ids.
    #[arg(long, default_value = "locus-cluster")]
    pub dir: PathBuf,
    /// MiB of each server's value region.
    #[arg(long, default_value_t = 256)]
    pub value_region_mb: u64,
    /// Stop every process after this many seconds (default: run until `down`).
    #[arg(long)]
    pub lifetime_s: Option<u64>,
    /// The coordinator's monitoring interval in ms (Pragh: 10000).
    #[arg(long, default_value_t = 10_000)]
    pub interval_ms: u64,
    /// Approve read-only replicas of values several servers read (a Locus extension).
    #[arg(long)]
    pub replicas: bool,
    /// Start no coordinator: values move only by `locus migrate`.
    #[arg(long)]
    pub no_coordinator: bool,
    /// Start no etcd: no membership, leases or epochs, one coordinator with
    /// its record in redb (the behaviour before issue 15's membership).
    #[arg(long)]
    pub no_etcd: bool,
    /// Durability of acknowledged updates: `always` (fdatasync before each
    /// acknowledgement, group commit), `interval` (written before, synced
    /// every --sync-interval-ms) or `off` (nothing logged; a restarted server
    /// starts empty). Logs and checkpoints go to DIR/data/server-N.
    #[arg(long, default_value = "always", value_parser = ["always", "interval", "off"])]
    pub sync: String,
    /// With `--sync interval`: the longest time between a write and its sync.
    #[arg(long, default_value_t = 10)]
    pub sync_interval_ms: u64,
    /// How often each server checkpoints what it homes (bounds recovery time).
    #[arg(long, default_value_t = 60)]
    pub checkpoint_interval_s: u64,
}

#[derive(Args, Debug)]
pub struct DirArgs {
    /// The directory `cluster up` used.
    #[arg(long, default_value = "locus-cluster")]
    pub dir: PathBuf,
}

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The directory `cluster up` used (or give --cluster).
    #[arg(long, default_value = "locus-cluster")]
    pub dir: PathBuf,
    /// A cluster file (default: DIR/cluster.toml).
    #[arg(long, value_name = "FILE")]
    pub cluster: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// One process `cluster up` started.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Started {
    pub(crate) role: String,
    pub(crate) id: Option<u8>,
    pub(crate) pid: u32,
}

pub(crate) const CLUSTER_FILE: &str = "cluster.toml";
const PIDS_FILE: &str = "pids.json";
/// How long `up` waits for every server to answer.
const UP_WAIT: Duration = Duration::from_secs(60);
/// How long `up` waits for every server to link to the coordinator.
const LINK_WAIT: Duration = Duration::from_secs(20);
/// How long `down` waits after SIGTERM before SIGKILL.
const DOWN_GRACE: Duration = Duration::from_secs(5);

pub fn run(a: ClusterArgs) -> CliResult {
    match a.command {
        ClusterCommand::Up(u) => up(u),
        ClusterCommand::Down(d) => down(&d.dir),
        ClusterCommand::Status(s) => crate::cluster_status::status(s),
    }
}

fn up(a: UpArgs) -> CliResult {
    if a.servers == 0 || a.servers > locus_fabric::MACHINES_MAX {
        return Err(format!("--servers {}: must be 1..=128", a.servers).into());
    }
    std::fs::create_dir_all(a.dir.join("logs"))
        .map_err(|e| format!("cannot create {}: {e}", a.dir.display()))?;
    if a.dir.join(CLUSTER_FILE).exists() {
        return restart(&a);
    }
    if let Some(live) = live_pids(&a.dir).filter(|l| !l.is_empty()) {
        return Err(format!(
            "{} already runs a cluster ({} live processes); `locus cluster down --dir {}` first",
            a.dir.display(),
            live.len(),
            a.dir.display()
        )
        .into());
    }
    let mut ports = FreePorts::default();
    let mut servers = Vec::new();
    for id in 0..a.servers {
        servers.push(ServerEntry {
            id: id as u8,
            fabric: ports.next()?,
            client: ports.next()?,
            metrics: Some(ports.next()?),
        });
    }
    let mut file = ClusterFile {
        cluster: ClusterSection {
            secret: Some(Secret::generate().expose().to_string()),
        },
        servers,
        coordinator: None,
        store: Default::default(),
        policy: Default::default(),
        limits: Default::default(),
        durability: None,
        recovery: Default::default(),
        etcd: None,
    };
    if !a.no_coordinator {
        file.coordinator = Some(CoordinatorEntry {
            control: ports.next()?,
            metrics: Some(ports.next()?),
            record: PathBuf::from("coordinator.redb"),
        });
    }
    let etcd_ports = if a.no_etcd {
        None
    } else {
        let standby = match a.no_coordinator {
            true => None,
            false => Some((ports.next()?, ports.next()?)),
        };
        let p = crate::cluster_etcd::EtcdPorts {
            client: ports.next()?,
            peer: ports.next()?,
            standby,
        };
        file.etcd = Some(p.section());
        Some(p)
    };
    file.store.value_region_mb = Some(a.value_region_mb);
    file.policy.interval_ms = a.interval_ms;
    file.policy.dwell_ms = a.interval_ms;
    // Access counts live in cache entries: keep them for a few intervals (Pragh: 60 s lease, 10 s interval).
    let lease = file.store.store_config().cache_lease_ms;
    file.store.cache_lease_ms = Some(lease.max(a.interval_ms * 6));
    if a.sync != "off" {
        file.durability = Some(DurabilitySection {
            dir: PathBuf::from("data"),
            sync: a.sync.clone(),
            interval_ms: a.sync_interval_ms,
            checkpoint_interval_s: a.checkpoint_interval_s,
            ..DurabilitySection::default()
        });
    }
    if a.replicas {
        file.policy.replicas = true;
        let quarter = (a.value_region_mb / 4) as f64;
        file.store.replica_mb = Some(file.store.replica_mb.unwrap_or(0.0).max(quarter));
    }
    file.validate()?;
    drop(ports);
    let path = a.dir.join(CLUSTER_FILE);
    file.write(&path)?;
    let exe = std::env::current_exe()?;
    let mut started = Vec::new();
    if let Some(p) = etcd_ports {
        p.save(&a.dir)?;
        let pid = crate::cluster_etcd::start(&a.dir, p, a.lifetime_s)?;
        started.push(Started {
            role: "etcd".into(),
            id: None,
            pid,
        });
    }
    if let Some(entry) = &file.coordinator {
        for role in coordinators(&file) {
            let pid = spawn_coordinator(&exe, &path, &a.dir, role, a.lifetime_s)?;
            started.push(Started {
                role: role.into(),
                id: None,
                pid,
            });
            if role == "coordinator" && file.etcd.is_some() {
                // The first coordinator leads a new cluster: the standby
                // starts once it does.
                crate::cluster_etcd::wait_leader(&file, entry.control, LINK_WAIT)?;
            }
        }
    }
    for s in &file.servers {
        let log = a.dir.join("logs").join(format!("server-{}.log", s.id));
        let mut cmd = Command::new(&exe);
        cmd.arg("server")
            .arg("--config")
            .arg(&path)
            .arg("--id")
            .arg(s.id.to_string());
        let pid = spawn_detached(cmd, &log, a.lifetime_s)?;
        started.push(Started {
            role: "server".into(),
            id: Some(s.id),
            pid,
        });
    }
    write_pids(&a.dir, &started)?;
    let pid_of = |id: u8| {
        started
            .iter()
            .find(|p| p.id == Some(id))
            .map_or(0, |p| p.pid)
    };
    let client = Client::from_file(&path, ClientConfig::default())?;
    let t0 = Instant::now();
    for s in &file.servers {
        loop {
            match client.ping(s.id) {
                Ok(()) => break,
                Err(e) if t0.elapsed() < UP_WAIT && alive(pid_of(s.id)) => {
                    tracing::debug!("waiting for server {}: {e}", s.id);
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => {
                    let log = a.dir.join("logs").join(format!("server-{}.log", s.id));
                    let tail = log_tail(&log);
                    let _ = down(&a.dir);
                    return Err(format!(
                        "server {} did not come up: {e}\n--- last lines of {} ---\n{tail}",
                        s.id,
                        log.display()
                    )
                    .into());
                }
            }
        }
    }
    if let Some(c) = &file.coordinator {
        wait_linked(&client, &file, &a.dir)?;
        println!(
            "started a coordinator and {} servers in {:.1} s; cluster file: {}",
            file.servers.len(),
            t0.elapsed().as_secs_f64(),
            path.display()
        );
        for co in started.iter().filter(|s| s.role.starts_with("coordinator")) {
            if co.role == STANDBY {
                println!(
                    "  {STANDBY} (a standby; leads if the leader dies): pid {}",
                    co.pid
                );
            } else {
                println!(
                    "  coordinator: control {}  metrics http://{}/metrics  pid {}",
                    c.control,
                    c.metrics.map(|m| m.to_string()).unwrap_or_default(),
                    co.pid
                );
            }
        }
    } else {
        println!(
            "started {} servers (no coordinator) in {:.1} s; cluster file: {}",
            file.servers.len(),
            t0.elapsed().as_secs_f64(),
            path.display()
        );
    }
    if let (Some(e), Some(p)) = (&file.etcd, started.iter().find(|s| s.role == "etcd")) {
        println!(
            "  etcd: {}  data {}  pid {}",
            e.endpoints.join(","),
            a.dir.join("etcd").display(),
            p.pid
        );
    }
    for s in &file.servers {
        println!(
            "  server {}: clients {}  fabric {}  metrics http://{}/metrics  pid {}",
            s.id,
            s.client,
            s.fabric,
            s.metrics.map(|m| m.to_string()).unwrap_or_default(),
            pid_of(s.id)
        );
    }
    println!("try: locus load --cluster {} FILE", path.display());
    println!("stop: locus cluster down --dir {}", a.dir.display());
    Ok(())
}

/// `up` on an existing cluster directory: starts, with its cluster file,
/// the coordinator and the servers that are not running; leaves the others
/// alone; waits (bounded) until every server answers. On failure nothing is
/// stopped: the running processes keep serving.
fn restart(a: &UpArgs) -> CliResult {
    let path = a.dir.join(CLUSTER_FILE);
    let file = ClusterFile::load(&path)?;
    let exe = std::env::current_exe()?;
    let old = read_pids(&a.dir).unwrap_or_default();
    let mut kept: Vec<Started> = old.iter().filter(|s| alive(s.pid)).cloned().collect();
    let mut started: Vec<Started> = Vec::new();
    if file.etcd.is_some() && !kept.iter().any(|s| s.role == "etcd") {
        let ports = crate::cluster_etcd::EtcdPorts::load(&a.dir)?;
        let pid = crate::cluster_etcd::start(&a.dir, ports, a.lifetime_s)?;
        println!("  etcd: restarted, pid {pid}");
        started.push(Started {
            role: "etcd".into(),
            id: None,
            pid,
        });
    }
    if file.coordinator.is_some() {
        for role in coordinators(&file) {
            if kept.iter().any(|s| s.role == role) {
                continue;
            }
            let pid = spawn_coordinator(&exe, &path, &a.dir, role, a.lifetime_s)?;
            started.push(Started {
                role: role.into(),
                id: None,
                pid,
            });
        }
    }
    for s in &file.servers {
        if kept
            .iter()
            .any(|k| k.role == "server" && k.id == Some(s.id))
        {
            continue;
        }
        let log = a.dir.join("logs").join(format!("server-{}.log", s.id));
        let mut cmd = Command::new(&exe);
        cmd.arg("server")
            .arg("--config")
            .arg(&path)
            .arg("--id")
            .arg(s.id.to_string());
        let pid = spawn_detached(cmd, &log, a.lifetime_s)?;
        started.push(Started {
            role: "server".into(),
            id: Some(s.id),
            pid,
        });
    }
    let restarted: Vec<Started> = started.clone();
    kept.append(&mut started);
    write_pids(&a.dir, &kept)?;
    if restarted.is_empty() {
        println!(
            "every process of {} is running ({}); nothing to restart",
            path.display(),
            kept.len()
        );
        return Ok(());
    }
    let client = Client::from_file(&path, ClientConfig::default())?;
    let t0 = Instant::now();
    for r in restarted.iter().filter(|r| r.role == "server") {
        let id = r.id.expect("a server has an id");
        loop {
            match client.stats(id) {
                Ok(st) => {
                    let d = &st["durability"];
                    println!(
                        "  server {id}: restarted, pid {}{}, {}",
                        r.pid,
                        st["membership"]["epoch"]
                            .as_u64()
                            .map(|e| format!(", epoch {e}"))
                            .unwrap_or_default(),
                        if d.is_null() {
                            "no [durability]: it starts empty".to_string()
                        } else {
                            format!(
                                "recovered {} vertices ({} checkpoint entries, {} log records) in {} ms",
                                d["recovered_vertices"],
                                d["recovered_checkpoint_entries"],
                                d["recovered_records"],
                                d["recovery_ms"]
                            )
                        }
                    );
                    break;
                }
                Err(e) if t0.elapsed() < UP_WAIT && alive(r.pid) => {
                    tracing::debug!("waiting for server {id}: {e}");
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => {
                    let log = a.dir.join("logs").join(format!("server-{id}.log"));
                    return Err(format!(
                        "server {id} did not come back: {e}\n--- last lines of {} ---\n{}",
                        log.display(),
                        log_tail(&log)
                    )
                    .into());
                }
            }
        }
    }
    println!(
        "restarted {} of {} processes of {} in {:.1} s (the others were running)",
        restarted.len(),
        kept.len(),
        path.display(),
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The role (in `pids.json`) of the second coordinator `up` runs with `[etcd]`.
const STANDBY: &str = "coordinator-1";

/// The coordinators `up` runs, by role: with `[etcd]`, `coordinator` (the
/// file's control and metrics addresses) and `coordinator-1` (any free
/// control port, no metrics: servers find the leader through etcd), which
/// campaign in etcd: one leads, the other stands by; without, the one
/// coordinator of the file.
fn coordinators(file: &ClusterFile) -> Vec<&'static str> {
    if file.etcd.is_some() {
        vec!["coordinator", STANDBY]
    } else {
        vec!["coordinator"]
    }
}

/// Starts the coordinator of `role` (see [`coordinators`]) detached, its
/// log `DIR/logs/<role>.log`.
fn spawn_coordinator(
    exe: &Path,
    path: &Path,
    dir: &Path,
    role: &str,
    lifetime_s: Option<u64>,
) -> CliResult<u32> {
    let log = dir.join("logs").join(format!("{role}.log"));
    let mut cmd = Command::new(exe);
    cmd.arg("coordinator").arg("--config").arg(path);
    if role == STANDBY {
        match crate::cluster_etcd::EtcdPorts::load(dir)?.standby {
            Some((control, metrics)) => cmd
                .arg("--control")
                .arg(control.to_string())
                .arg("--metrics")
                .arg(metrics.to_string()),
            None => cmd.args(["--control", "127.0.0.1:0", "--no-metrics"]),
        };
    }
    spawn_detached(cmd, &log, lifetime_s)
}

/// Starts `cmd` detached, its output appended to `log`; returns its pid.
fn spawn_detached(mut cmd: Command, log: &Path, lifetime_s: Option<u64>) -> CliResult<u32> {
    // Appended, so a restarted process's log keeps what its predecessor said.
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("cannot open {}: {e}", log.display()))?;
    cmd.stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out);
    if let Some(l) = lifetime_s {
        cmd.arg("--lifetime-s").arg(l.to_string());
    }
    if std::env::var_os("RUST_LOG").is_none() {
        cmd.env("RUST_LOG", "info");
    }
    detach(&mut cmd);
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
    Ok(child.id())
}

/// Waits until every server says its control link is up (bounded); on
/// failure stops the cluster and shows the coordinator's log.
fn wait_linked(client: &Client, file: &ClusterFile, dir: &Path) -> CliResult {
    let t0 = Instant::now();
    let mut unlinked: Vec<u8> = file.servers.iter().map(|s| s.id).collect();
    while !unlinked.is_empty() {
        unlinked.retain(|&id| {
            client
                .stats(id)
                .map(|st| st["coordinator"]["linked"].as_bool() != Some(true))
                .unwrap_or(true)
        });
        if unlinked.is_empty() {
            break;
        }
        if t0.elapsed() >= LINK_WAIT {
            let log = dir.join("logs").join("coordinator.log");
            let tail = log_tail(&log);
            let _ = down(dir);
            return Err(format!(
                "servers {unlinked:?} did not link to the coordinator within {} s\n--- last lines of {} ---\n{tail}",
                LINK_WAIT.as_secs(),
                log.display()
            )
            .into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// Starts the child in its own session, so it outlives this command and a
/// Ctrl-C in this terminal does not reach it.
pub(crate) fn detach(cmd: &mut Command) {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: setsid is async-signal-safe and touches no Rust state.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
    }
}

fn write_pids(dir: &Path, started: &[Started]) -> CliResult {
    let path = dir.join(PIDS_FILE);
    std::fs::write(&path, serde_json::to_string_pretty(started)?)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(())
}

pub(crate) fn read_pids(dir: &Path) -> Option<Vec<Started>> {
    serde_json::from_str(&std::fs::read_to_string(dir.join(PIDS_FILE)).ok()?).ok()
}

/// Whether `pid` is a live `locus` process (not a recycled id).
fn alive(pid: u32) -> bool {
    match std::fs::read(format!("/proc/{pid}/cmdline")) {
        Ok(c) => {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // A zombie (state Z) has exited.
            let zombie = stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
            let mut args = c.split(|&b| b == 0);
            let etcd = args.next().is_some_and(|a0| a0.ends_with(b"etcd"));
            !zombie && (etcd || args.any(|a| a == b"server" || a == b"coordinator"))
        }
        Err(_) => false,
    }
}

fn live_pids(dir: &Path) -> Option<Vec<Started>> {
    Some(
        read_pids(dir)?
            .into_iter()
            .filter(|s| alive(s.pid))
            .collect(),
    )
}

pub(crate) fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

fn down(dir: &Path) -> CliResult {
    let Some(started) = read_pids(dir) else {
        return Err(format!(
            "{} has no {PIDS_FILE}: no cluster was started there (see `locus cluster up --dir`)",
            dir.display()
        )
        .into());
    };
    let live: Vec<&Started> = started.iter().filter(|s| alive(s.pid)).collect();
    // Servers and coordinators first (they leave etcd cleanly), etcd last.
    let mut killed = 0;
    for etcd_phase in [false, true] {
        let phase: Vec<&&Started> = live
            .iter()
            .filter(|s| (s.role == "etcd") == etcd_phase)
            .collect();
        for s in &phase {
            // SAFETY: plain kill(2) on a pid checked to be a locus or etcd process.
            unsafe { libc::kill(s.pid as i32, libc::SIGTERM) };
        }
        let t0 = Instant::now();
        while t0.elapsed() < DOWN_GRACE && phase.iter().any(|s| alive(s.pid)) {
            std::thread::sleep(Duration::from_millis(50));
        }
        for s in &phase {
            if alive(s.pid) {
                // SAFETY: as above.
                unsafe { libc::kill(s.pid as i32, libc::SIGKILL) };
                killed += 1;
            }
        }
    }
    let _ = std::fs::remove_file(dir.join(PIDS_FILE));
    println!(
        "stopped {} of {} processes{}",
        live.len(),
        started.len(),
        if killed > 0 {
            format!(
                " ({killed} did not stop within {} s and were killed)",
                DOWN_GRACE.as_secs()
            )
        } else {
            String::new()
        }
    );
    Ok(())
}
