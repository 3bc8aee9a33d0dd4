//! Locus as real processes for the benchmarks that measure it over TCP
//! (`locus bench pragh schemes --fabric tcp`, `locus bench client`): one
//! `locus server` per machine and, for schemes that migrate, a
//! `locus coordinator`, all on loopback, all children of the benchmark.
//!
//! A [`Processes`] guard owns every child it started. Dropping it (at the end
//! of a run, on an error, or while a panic unwinds) kills and reaps them all,
//! and every child is started with `--lifetime-s`, so none outlives a
//! benchmark that was itself killed. Children stay in the benchmark's process
//! group: a Ctrl-C in the terminal reaches them too.
//!
//! Ports are found as `locus cluster up` finds them: bind port 0 on loopback,
//! read the port, release it, write it into the cluster file. Another program
//! may take such a port before the server binds it; a start that fails with
//! "address in use" is retried with fresh ports, at most
//! [`START_ATTEMPTS_MAX`] times. Anything else that stops a process from
//! coming up is an error quoting the end of its log. A start returns once
//! every server answers PING and, with a coordinator, says in its STATS that
//! its control link is up.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use locus_client::{Client, ClientConfig};
use locus_fabric::auth::Secret;
use locus_server::config::{
    ClusterFile, ClusterSection, CoordinatorEntry, DurabilitySection, PolicySection, ServerEntry,
    StoreSection,
};

use crate::{BenchError, Reporter, Result};

/// Starts tried before giving up on ports taken by other programs.
pub const START_ATTEMPTS_MAX: usize = 3;
/// How long every server gets to answer PING (and, with a coordinator, to
/// link to it) after it was started.
pub const UP_WAIT: Duration = Duration::from_secs(90);
/// Lines of a child's log quoted in an error.
const LOG_TAIL_LINES: usize = 20;

/// What to start.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The `locus` executable (its `server` and `coordinator` commands).
    pub exe: PathBuf,
    /// Servers (machines).
    pub machines: usize,
    /// `[store]` of the cluster file.
    pub store: StoreSection,
    /// `[policy]` of the cluster file.
    pub policy: PolicySection,
    /// Whether to write a `[coordinator]` section and start `locus coordinator`.
    pub coordinator: bool,
    /// Every child exits by itself after this long.
    pub lifetime_s: u64,
}

/// Which process a child is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `locus server --id N`.
    Server(u8),
    /// `locus coordinator`.
    Coordinator,
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Role::Server(id) => write!(f, "server {id}"),
            Role::Coordinator => write!(f, "coordinator"),
        }
    }
}

struct Proc {
    role: Role,
    child: Child,
    log: PathBuf,
}

/// The running processes of one cluster; killed and reaped on drop.
pub struct Processes {
    exe: PathBuf,
    file: ClusterFile,
    file_path: PathBuf,
    children: Vec<Proc>,
    // Last: the directory (cluster file, logs, the coordinator's record)
    // goes after the children are gone.
    _dir: tempfile::TempDir,
}

impl std::fmt::Debug for Processes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Processes")
            .field("file", &self.file_path)
            .field("pids", &self.pids())
            .finish()
    }
}

/// Free loopback ports, distinct: each is held until all are chosen (a
/// port released at once could be handed out again), then released.
struct Ports(Vec<TcpListener>);

impl Ports {
    fn take(&mut self) -> Result<SocketAddr> {
        let socket = |action, source| BenchError::Socket {
            action,
            addr: "127.0.0.1:0".into(),
            source,
        };
        let l = TcpListener::bind("127.0.0.1:0").map_err(|e| socket("listening on", e))?;
        let a = l
            .local_addr()
            .map_err(|e| socket("reading the address of", e))?;
        self.0.push(l);
        Ok(a)
    }
}

/// The last lines of a log file.
pub fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
}

impl Processes {
    /// Writes a cluster file for `spec` and starts its processes; returns once
    /// every server answers PING.
    pub fn start(spec: &Spec, r: &Reporter) -> Result<Processes> {
        Processes::start_durable(spec, None, r)
    }

    /// As [`start`](Self::start), with a `[durability]` section (its `dir`
    /// relative to the run's temporary directory).
    pub fn start_durable(
        spec: &Spec,
        durability: Option<DurabilitySection>,
        r: &Reporter,
    ) -> Result<Processes> {
        let mut attempt = 1;
        loop {
            match Processes::start_once(spec, durability.clone()) {
                Ok(p) => return Ok(p),
                Err(StartError::PortTaken(what)) if attempt < START_ATTEMPTS_MAX => {
                    r.note(format!(
                        "{what}: a port was taken by another program; retrying with fresh ports"
                    ));
                    attempt += 1;
                }
                Err(StartError::PortTaken(what)) => {
                    return Err(BenchError::Child {
                        program: spec.exe.clone(),
                        reason: format!(
                            "{what}: ports kept being taken by other programs ({START_ATTEMPTS_MAX} attempts)"
                        ),
                    })
                }
                Err(StartError::Other(e)) => return Err(e),
            }
        }
    }

    fn start_once(
        spec: &Spec,
        durability: Option<DurabilitySection>,
    ) -> std::result::Result<Processes, StartError> {
        let dir = tempfile::Builder::new()
            .prefix("locus-bench-")
            .tempdir()
            .map_err(|source| BenchError::Io {
                action: "creating a temporary directory in",
                path: std::env::temp_dir(),
                source,
            })?;
        let mut ports = Ports(Vec::new());
        let mut servers = Vec::with_capacity(spec.machines);
        for id in 0..spec.machines {
            servers.push(ServerEntry {
                id: u8::try_from(id).map_err(|_| {
                    BenchError::setting("machines", spec.machines, "must be 1..=128")
                })?,
                fabric: ports.take()?,
                client: ports.take()?,
                metrics: None,
            });
        }
        let coordinator = if spec.coordinator {
            Some(CoordinatorEntry {
                control: ports.take()?,
                metrics: None,
                record: dir.path().join("coordinator.redb"),
            })
        } else {
            None
        };
        let file = ClusterFile {
            cluster: ClusterSection {
                secret: Some(Secret::generate().expose().to_string()),
            },
            servers,
            coordinator,
            store: spec.store.clone(),
            policy: spec.policy.clone(),
            limits: Default::default(),
            durability,
            recovery: Default::default(),
            etcd: None,
        };
        drop(ports);
        file.validate()?;
        let file_path = dir.path().join("cluster.toml");
        file.write(&file_path)?;
        let mut p = Processes {
            exe: spec.exe.clone(),
            file,
            file_path,
            children: Vec::new(),
            _dir: dir,
        };
        // From here on, whatever fails, the guard kills what was started.
        if p.file.coordinator.is_some() {
            p.spawn(Role::Coordinator, spec.lifetime_s)?;
        }
        for id in 0..spec.machines as u8 {
            p.spawn(Role::Server(id), spec.lifetime_s)?;
        }
        p.wait_up()?;
        Ok(p)
    }

    fn spawn(&mut self, role: Role, lifetime_s: u64) -> Result<()> {
        let name = match role {
            Role::Server(id) => format!("server-{id}.log"),
            Role::Coordinator => "coordinator.log".into(),
        };
        let log = self.file_path.with_file_name(name);
        let io = |action, source| BenchError::Io {
            action,
            path: log.clone(),
            source,
        };
        let out = std::fs::File::create(&log).map_err(|e| io("creating", e))?;
        let err = out.try_clone().map_err(|e| io("opening", e))?;
        let mut cmd = Command::new(&self.exe);
        match role {
            Role::Server(id) => cmd.args(["server", "--id", &id.to_string()]),
            Role::Coordinator => cmd.arg("coordinator"),
        };
        cmd.arg("--config")
            .arg(&self.file_path)
            .args(["--lifetime-s", &lifetime_s.to_string()])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "warn");
        }
        let child = cmd.spawn().map_err(|source| BenchError::Io {
            action: "starting",
            path: self.exe.clone(),
            source,
        })?;
        self.children.push(Proc { role, child, log });
        Ok(())
    }

    /// Waits until every server answers PING, or one of the processes exits.
    fn wait_up(&mut self) -> std::result::Result<(), StartError> {
        let client = self.client(ClientConfig {
            connect_timeout: Duration::from_secs(1),
            deadline: Duration::from_secs(5),
            ..ClientConfig::default()
        })?;
        let t0 = Instant::now();
        for id in 0..self.file.machines() as u8 {
            loop {
                if let Err(e) = self.check() {
                    let taken = self.children.iter().any(|p| {
                        log_tail(&p.log)
                            .to_ascii_lowercase()
                            .contains("address already in use")
                    });
                    return Err(if taken {
                        StartError::PortTaken(e.to_string())
                    } else {
                        StartError::Other(e)
                    });
                }
                match client.ping(id) {
                    Ok(()) => break,
                    Err(e) if t0.elapsed() < UP_WAIT => {
                        tracing::debug!("waiting for server {id}: {e}");
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    Err(e) => {
                        return Err(StartError::Other(self.failed(
                            Role::Server(id),
                            format!("did not answer within {} s: {e}", UP_WAIT.as_secs()),
                        )))
                    }
                }
            }
        }
        if self.file.coordinator.is_none() {
            return Ok(());
        }
        // Migrating clusters: every server's control link is up before the
        // run starts, so the first interval's reports reach the coordinator.
        for id in 0..self.file.machines() as u8 {
            loop {
                self.check()?;
                let st = client.stats(id).map_err(BenchError::from)?;
                if st["coordinator"]["linked"].as_bool() == Some(true) {
                    break;
                }
                if t0.elapsed() >= UP_WAIT {
                    return Err(StartError::Other(self.failed(
                        Role::Coordinator,
                        format!("has no link from server {id} after {} s", UP_WAIT.as_secs()),
                    )));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(())
    }

    /// An error about `role`, with the end of its log.
    fn failed(&self, role: Role, what: String) -> BenchError {
        let log = self
            .children
            .iter()
            .find(|p| p.role == role)
            .map(|p| p.log.clone())
            .unwrap_or_default();
        BenchError::Child {
            program: self.exe.clone(),
            reason: format!(
                "{role} {what}\n--- last lines of {} ---\n{}",
                log.display(),
                log_tail(&log)
            ),
        }
    }

    /// Fails if any process has exited (naming it, with the end of its log).
    pub fn check(&mut self) -> Result<()> {
        for i in 0..self.children.len() {
            let status = self.children[i].child.try_wait();
            let role = self.children[i].role;
            match status {
                Ok(None) => {}
                Ok(Some(s)) => return Err(self.failed(role, format!("exited ({s})"))),
                Err(e) => return Err(self.failed(role, format!("cannot be waited for: {e}"))),
            }
        }
        Ok(())
    }

    /// A client of the cluster (secret and addresses from its file).
    pub fn client(&self, config: ClientConfig) -> Result<Client> {
        Ok(Client::from_file(&self.file_path, config)?)
    }

    /// The cluster file.
    pub fn file(&self) -> &ClusterFile {
        &self.file
    }

    /// The process ids of every child.
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(|p| p.child.id()).collect()
    }

    /// Kills and reaps every child (also done on drop).
    pub fn stop(mut self) {
        self.kill_all();
    }

    fn kill_all(&mut self) {
        for p in &mut self.children {
            let _ = p.child.kill();
        }
        for p in &mut self.children {
            let _ = p.child.wait();
        }
        self.children.clear();
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// Why one start failed.
enum StartError {
    /// A port was taken between choosing and binding it: worth another try.
    PortTaken(String),
    Other(BenchError),
}

impl From<BenchError> for StartError {
    fn from(e: BenchError) -> Self {
        StartError::Other(e)
    }
}

impl From<locus_server::ServerError> for StartError {
    fn from(e: locus_server::ServerError) -> Self {
        StartError::Other(e.into())
    }
}

/// Whether a process with id `pid` still exists (a zombie counts as gone).
pub fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A guard around `script` (run for any role) with a one-server file.
    fn guard(script: &str) -> Processes {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("fake-locus");
        std::fs::write(&exe, format!("#!/bin/sh\n{script}\n")).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let mut ports = Ports(Vec::new());
        let file = ClusterFile {
            cluster: ClusterSection {
                secret: Some(Secret::generate().expose().to_string()),
            },
            servers: vec![ServerEntry {
                id: 0,
                fabric: ports.take().unwrap(),
                client: ports.take().unwrap(),
                metrics: None,
            }],
            coordinator: None,
            store: StoreSection::default(),
            policy: PolicySection::default(),
            limits: Default::default(),
            durability: None,
            recovery: Default::default(),
            etcd: None,
        };
        let file_path = dir.path().join("cluster.toml");
        file.write(&file_path).unwrap();
        Processes {
            exe,
            file,
            file_path,
            children: Vec::new(),
            _dir: dir,
        }
    }

    #[test]
    fn dropping_the_guard_kills_and_reaps_its_children() {
        let mut p = guard("exec sleep 600");
        p.spawn(Role::Server(0), 600).unwrap();
        p.spawn(Role::Coordinator, 600).unwrap();
        let pids = p.pids();
        assert_eq!(pids.len(), 2);
        assert!(pids.iter().all(|&pid| pid_alive(pid)));
        p.check().unwrap();
        drop(p);
        assert!(
            pids.iter().all(|&pid| !pid_alive(pid)),
            "{pids:?} outlived the guard"
        );
    }

    #[test]
    fn a_panic_kills_the_children_too() {
        let mut p = guard("exec sleep 600");
        p.spawn(Role::Server(0), 600).unwrap();
        let pids = p.pids();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            let _keep = p;
            panic!("a bug in the middle of a run");
        }));
        assert!(r.is_err());
        assert!(
            pids.iter().all(|&pid| !pid_alive(pid)),
            "{pids:?} outlived the panic"
        );
    }

    #[test]
    fn a_child_that_exits_is_named_with_its_log() {
        let mut p = guard("echo 'cannot do it: no such region' >&2; exit 3");
        p.spawn(Role::Server(0), 600).unwrap();
        let t = Instant::now();
        let e = loop {
            match p.check() {
                Err(e) => break e.to_string(),
                Ok(()) if t.elapsed() < Duration::from_secs(30) => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Ok(()) => panic!("the child did not exit"),
            }
        };
        assert!(e.contains("server 0 exited"), "{e}");
        assert!(e.contains("cannot do it: no such region"), "{e}");
    }

    #[test]
    fn ports_are_distinct_while_held() {
        let mut ports = Ports(Vec::new());
        let a: Vec<SocketAddr> = (0..32).map(|_| ports.take().unwrap()).collect();
        let mut b = a.clone();
        b.sort();
        b.dedup();
        assert_eq!(a.len(), b.len());
    }
}
