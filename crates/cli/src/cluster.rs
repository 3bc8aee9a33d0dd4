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
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use locus_client::{Client, ClientConfig};
use locus_fabric::auth::Secret;
use locus_server::config::{
    ClusterFile, ClusterSection, CoordinatorEntry, DurabilitySection, ServerEntry,
};
use locus_server::supervise::{self, FreePorts, Role, Supervisor, Tie};
use locus_server::{CoordinatorProcess, Server};
use serde::{Deserialize, Serialize};

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

/// The variable that keeps a fenced `locus server` alive this many
/// milliseconds (refusing every client request and fabric operation) before it
/// exits with code 3. Unset: it exits as soon as it notices (within 100 ms),
/// as always. For tests that send requests to a fenced server
/// (`tests/fenced_server_refuses.rs`): without it that window is too short
/// to hit on a loaded machine.
pub const FENCED_EXIT_DELAY_ENV: &str = "LOCUS_FENCED_EXIT_DELAY_MS";
/// The largest `LOCUS_FENCED_EXIT_DELAY_MS`.
const FENCED_EXIT_DELAY_MS_MAX: u64 = 60_000;

/// `LOCUS_FENCED_EXIT_DELAY_MS`, validated (0 when unset or empty).
fn fenced_exit_delay() -> CliResult<Duration> {
    let Some(v) = std::env::var_os(FENCED_EXIT_DELAY_ENV).filter(|v| !v.is_empty()) else {
        return Ok(Duration::ZERO);
    };
    let v = v.to_string_lossy();
    match v.parse::<u64>() {
        Ok(ms) if ms <= FENCED_EXIT_DELAY_MS_MAX => Ok(Duration::from_millis(ms)),
        _ => Err(format!(
            "{FENCED_EXIT_DELAY_ENV}={v:?} is not a number of milliseconds from 0 to \
             {FENCED_EXIT_DELAY_MS_MAX}; unset it to exit as soon as fenced"
        )
        .into()),
    }
}

pub fn server(a: ServerArgs) -> CliResult {
    let fenced_exit_delay = fenced_exit_delay()?;
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
        if !fenced_exit_delay.is_zero() {
            // Its connection threads keep refusing (member.rs) meanwhile.
            eprintln!(
                "server {}: staying {} ms before exiting ({FENCED_EXIT_DELAY_ENV})",
                a.id,
                fenced_exit_delay.as_millis()
            );
            std::thread::sleep(fenced_exit_delay);
        }
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
    /// Move slots (and the vertices they home) to another server while the
    /// cluster serves; a move an earlier run left half done is finished or
    /// rolled back first. Needs etcd.
    Move(crate::cluster_move::MoveArgs),
    /// Balance slots over the servers that answer (within one slot of each
    /// other), with the fewest moves; `--plan` prints them only.
    Rebalance(crate::cluster_move::RebalanceArgs),
    /// Start one more server and move slots to it until they are balanced.
    /// Needs etcd and room (`cluster up --max-servers`).
    AddServer(crate::cluster_add::AddArgs),
    /// Move every slot off server N, bring home the values it holds for
    /// other servers, and stop it.
    RemoveServer(crate::cluster_move::RemoveArgs),
    /// Show each server's slot count and the moves in flight through it.
    Moves(crate::cluster_move::MovesArgs),
}

#[derive(Args, Debug)]
pub struct UpArgs {
    /// Servers (machines) to start.
    #[arg(long, default_value_t = 3)]
    pub servers: usize,
    /// The most servers the cluster may grow to with `cluster add-server`
    /// (fixed now: the fabric, slot table and logs are made for it).
    /// Default: 8 (or --servers if more); without etcd, --servers.
    #[arg(long)]
    pub max_servers: Option<usize>,
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
    /// Servers holding each slot (1, 2 or 3): a primary and R-1 backups;
    /// when a primary dies, the leading coordinator fails its slots over
    /// to their backups (issue 60). Above 1 needs etcd, the log and the
    /// coordinator.
    #[arg(long, default_value_t = 1)]
    pub replication: u8,
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
/// Room for servers of a cluster on etcd unless `--max-servers` says.
const MAX_SERVERS_DEFAULT: usize = 8;
/// How long `up` waits for every server to answer.
pub(crate) const UP_WAIT: Duration = Duration::from_secs(60);
/// How long `up` waits for every server to link to the coordinator.
pub(crate) const LINK_WAIT: Duration = Duration::from_secs(20);
/// How long `down` waits after SIGTERM before SIGKILL.
const DOWN_GRACE: Duration = Duration::from_secs(5);

pub fn run(a: ClusterArgs) -> CliResult {
    match a.command {
        ClusterCommand::Up(u) => up(u),
        ClusterCommand::Down(d) => down(&d.dir),
        ClusterCommand::Status(s) => crate::cluster_status::status(s),
        ClusterCommand::Move(m) => crate::cluster_move::run(m),
        ClusterCommand::Rebalance(r) => crate::cluster_move::rebalance(r),
        ClusterCommand::AddServer(a) => crate::cluster_add::add_server(a),
        ClusterCommand::RemoveServer(r) => crate::cluster_move::remove_server(r),
        ClusterCommand::Moves(m) => crate::cluster_move::moves(m),
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
            fabric: ports.take()?,
            client: ports.take()?,
            metrics: Some(ports.take()?),
        });
    }
    let mut file = ClusterFile {
        cluster: ClusterSection {
            secret: Some(Secret::generate().expose().to_string()),
            max_servers: match (a.max_servers, a.no_etcd) {
                (Some(m), _) => Some(m),
                (None, true) => None,
                (None, false) => Some(a.servers.max(MAX_SERVERS_DEFAULT)),
            },
        },
        servers,
        coordinator: None,
        store: Default::default(),
        policy: Default::default(),
        limits: Default::default(),
        durability: None,
        recovery: Default::default(),
        etcd: None,
        replication: locus_server::config::ReplicationSection {
            factor: a.replication,
        },
    };
    if !a.no_coordinator {
        file.coordinator = Some(CoordinatorEntry {
            control: ports.take()?,
            metrics: Some(ports.take()?),
            record: PathBuf::from("coordinator.redb"),
        });
    }
    let etcd_ports = if a.no_etcd {
        None
    } else {
        let standby = match a.no_coordinator {
            true => None,
            false => Some((ports.take()?, ports.take()?)),
        };
        let p = crate::cluster_etcd::EtcdPorts {
            client: ports.take()?,
            peer: ports.take()?,
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
    let mut sup = Supervisor::new(&exe, &path, &a.dir.join("logs"), Tie::Detached);
    if let Some(entry) = &file.coordinator {
        for role in coordinators(&file) {
            let pid = spawn_coordinator(&mut sup, &a.dir, role, a.lifetime_s)?;
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
        let pid = sup.spawn(Role::Server(s.id), &[], a.lifetime_s)?;
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
    let ids: Vec<u8> = file.servers.iter().map(|s| s.id).collect();
    if let Err(e) = sup.wait_servers(&client, &ids, UP_WAIT) {
        let _ = down(&a.dir);
        return Err(format!("the cluster did not come up: {e}").into());
    }
    if let Some(c) = &file.coordinator {
        if let Err(e) = sup.wait_linked(&client, &ids, LINK_WAIT) {
            let _ = down(&a.dir);
            return Err(format!("the servers did not link to the coordinator: {e}").into());
        }
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
    let mut sup = Supervisor::new(&exe, &path, &a.dir.join("logs"), Tie::Detached);
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
            let pid = spawn_coordinator(&mut sup, &a.dir, role, a.lifetime_s)?;
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
        let pid = sup.spawn(Role::Server(s.id), &[], a.lifetime_s)?;
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
    let ids: Vec<u8> = restarted.iter().filter_map(|r| r.id).collect();
    sup.wait_servers(&client, &ids, UP_WAIT)
        .map_err(|e| format!("a restarted server did not come back: {e}"))?;
    for r in restarted.iter().filter(|r| r.role == "server") {
        let id = r.id.expect("a server has an id");
        let st = client.stats(id)?;
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
    sup: &mut Supervisor,
    dir: &Path,
    role: &str,
    lifetime_s: Option<u64>,
) -> CliResult<u32> {
    let mut extra: Vec<String> = Vec::new();
    if role == STANDBY {
        match crate::cluster_etcd::EtcdPorts::load(dir)?.standby {
            Some((control, metrics)) => extra.extend([
                "--control".into(),
                control.to_string(),
                "--metrics".into(),
                metrics.to_string(),
            ]),
            None => extra.extend([
                "--control".into(),
                "127.0.0.1:0".into(),
                "--no-metrics".into(),
            ]),
        }
    }
    Ok(sup.spawn(Role::Coordinator(role.into()), &extra, lifetime_s)?)
}

pub(crate) fn write_pids(dir: &Path, started: &[Started]) -> CliResult {
    let path = dir.join(PIDS_FILE);
    std::fs::write(&path, serde_json::to_string_pretty(started)?)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(())
}

pub(crate) fn read_pids(dir: &Path) -> Option<Vec<Started>> {
    serde_json::from_str(&std::fs::read_to_string(dir.join(PIDS_FILE)).ok()?).ok()
}

/// Whether `pid` is a live `locus` process (not a recycled id).
pub(crate) fn alive(pid: u32) -> bool {
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

/// The last lines of a log.
pub(crate) fn log_tail(path: &Path) -> String {
    supervise::log_tail(path, 15)
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
        let phase: Vec<u32> = live
            .iter()
            .filter(|s| (s.role == "etcd") == etcd_phase)
            .map(|s| s.pid)
            .collect();
        killed += supervise::terminate(&phase, DOWN_GRACE, alive);
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
