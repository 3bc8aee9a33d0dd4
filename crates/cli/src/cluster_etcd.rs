//! The etcd of a `locus cluster up` directory (issue 15 requirement 2): a
//! single-member etcd on loopback whose data lives in `DIR/etcd`, its
//! addresses in `DIR/etcd.json` (so `up --dir` restarts it on the same
//! ports, with the membership, epochs, election and record it had), its log
//! in `DIR/logs/etcd.log`. `cluster.rs` starts it before the coordinators and
//! servers, stops it after them, and restarts it when it is down.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use locus_membership::{EtcdConfig, EtcdSpec, Membership};
use locus_server::config::EtcdSection;
use serde::{Deserialize, Serialize};

use crate::CliResult;

const ETCD_FILE: &str = "etcd.json";
/// How long `up` waits for etcd to be healthy.
const ETCD_WAIT: Duration = Duration::from_secs(30);
/// The key prefix a `cluster up` cluster uses.
pub const PREFIX: &str = "/locus";
/// The lease TTL of a `cluster up` cluster: a dead server is noticed within it.
pub const LEASE_TTL_S: u64 = 3;

/// Where the directory's etcd listens.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct EtcdPorts {
    pub client: SocketAddr,
    pub peer: SocketAddr,
    /// The standby coordinator's control and metrics addresses (the first
    /// coordinator's are in the cluster file).
    #[serde(default)]
    pub standby: Option<(SocketAddr, SocketAddr)>,
}

impl EtcdPorts {
    fn spec(&self, dir: &Path) -> EtcdSpec {
        EtcdSpec {
            data_dir: dir.join("etcd"),
            client: self.client,
            peer: self.peer,
        }
    }

    /// The cluster file's `[etcd]` for these ports.
    pub fn section(&self) -> EtcdSection {
        EtcdSection {
            endpoints: vec![format!("http://{}", self.client)],
            prefix: PREFIX.into(),
            lease_ttl_s: LEASE_TTL_S,
        }
    }

    pub fn save(&self, dir: &Path) -> CliResult {
        let p = dir.join(ETCD_FILE);
        std::fs::write(&p, serde_json::to_string_pretty(self)?)
            .map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        Ok(())
    }

    pub fn load(dir: &Path) -> CliResult<EtcdPorts> {
        let p = dir.join(ETCD_FILE);
        let text = std::fs::read_to_string(&p)
            .map_err(|e| format!("cannot read {} (written by `cluster up`): {e}", p.display()))?;
        Ok(serde_json::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))?)
    }
}

/// Starts the directory's etcd detached (its own session, output appended to
/// `DIR/logs/etcd.log`) and waits until it is healthy; returns its pid. With
/// `lifetime_s`, a detached watchdog kills it 30 s after the other processes'
/// lifetime, so a test's cluster never outlives it.
pub fn start(dir: &Path, ports: EtcdPorts, lifetime_s: Option<u64>) -> CliResult<u32> {
    let log = dir.join("logs").join("etcd.log");
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .map_err(|e| format!("cannot open {}: {e}", log.display()))?;
    let spec = ports.spec(dir);
    let mut cmd = spec.command();
    cmd.stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out);
    locus_server::supervise::detach(&mut cmd);
    let mut child = cmd.spawn().map_err(|e| {
        format!("cannot start etcd ({e}): install Debian's etcd-server (scripts/setup does), or pass --no-etcd")
    })?;
    let pid = child.id();
    if let Err(e) = locus_membership::wait_healthy(ports.client, ETCD_WAIT) {
        let _ = child.kill();
        let _ = child.wait();
        return Err(format!(
            "{e}\n--- last lines of {} ---\n{}",
            log.display(),
            crate::cluster::log_tail(&log)
        )
        .into());
    }
    if let Some(l) = lifetime_s {
        let mut w = Command::new("sh");
        w.arg("-c")
            .arg(format!(
                "sleep {}; kill -9 {pid} 2>/dev/null",
                l.saturating_add(30)
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        locus_server::supervise::detach(&mut w);
        let _ = w.spawn();
    }
    Ok(pid)
}

/// Waits (at most `limit`) until etcd names the coordinator at `control` as
/// the leader.
pub fn wait_leader(
    file: &locus_server::ClusterFile,
    control: SocketAddr,
    limit: Duration,
) -> CliResult {
    let Some(e) = &file.etcd else { return Ok(()) };
    let m = Membership::connect(&e.config())?;
    let t0 = std::time::Instant::now();
    loop {
        if let Some(l) = m.leader()? {
            if l.value == control.to_string() {
                return Ok(());
            }
        }
        if t0.elapsed() > limit {
            return Err(format!(
                "the coordinator at {control} did not lead within {} s",
                limit.as_secs()
            )
            .into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The leader's metrics address: the file's coordinator's, or the standby's
/// (from `DIR/etcd.json`) when the standby leads.
pub fn leader_metrics(
    dir: &Path,
    file_control: SocketAddr,
    file_metrics: Option<SocketAddr>,
    leader: Option<&str>,
) -> (Option<String>, Option<SocketAddr>) {
    let standby = EtcdPorts::load(dir).ok().and_then(|p| p.standby);
    match (leader, standby) {
        (Some(l), Some((control, metrics))) if l == control.to_string() => {
            (Some(l.to_string()), Some(metrics))
        }
        (Some(l), _) if l == file_control.to_string() => (Some(l.to_string()), file_metrics),
        (l, _) => (l.map(str::to_string), file_metrics),
    }
}

/// The coordinator leader's control address and term, and each machine's
/// last epoch, as etcd holds them (for `cluster status`); `None` if etcd
/// does not answer.
pub fn status(section: &EtcdSection, machines: usize) -> Option<serde_json::Value> {
    let m = Membership::connect(&EtcdConfig {
        endpoints: section.endpoints.clone(),
        prefix: section.prefix.clone(),
        lease_ttl_s: section.lease_ttl_s,
    })
    .ok()?;
    let leader = m.leader().ok()?;
    let (members, _) = m.members().ok()?;
    let epochs: Vec<serde_json::Value> = (0..machines as u8)
        .map(|id| {
            let live = members.iter().find(|x| x.machine == id);
            serde_json::json!({"id": id, "live": live.is_some(),
                "epoch": live.map(|x| x.epoch).or_else(|| m.last_epoch(id).ok())})
        })
        .collect();
    Some(serde_json::json!({
        "endpoints": section.endpoints,
        "leader": leader.as_ref().map(|l| l.value.clone()),
        "term": leader.as_ref().map(|l| l.term),
        "epochs": epochs,
    }))
}
