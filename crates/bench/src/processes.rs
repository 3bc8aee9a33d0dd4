//! Locus as real processes for the benchmarks that measure it over TCP
//! (`locus bench pragh schemes --fabric tcp`, `locus bench client`): one
//! `locus server` per machine and, for schemes that migrate, a
//! `locus coordinator`, all on loopback, all children of the benchmark,
//! started and watched by the supervisor `locus cluster up` uses too
//! ([`locus_server::supervise`], its owned tie).
//!
//! A [`Processes`] guard owns every child it started. Dropping it (at the end
//! of a run, on an error, or while a panic unwinds) kills and reaps them all,
//! and every child is started with `--lifetime-s`, so none outlives a
//! benchmark that was itself killed. Children stay in the benchmark's process
//! group: a Ctrl-C in the terminal reaches them too.
//!
//! Ports are chosen as `locus cluster up` chooses them ([`FreePorts`]).
//! Another program may take such a port before the server binds it; a start
//! that fails with "address in use" is retried with fresh ports, at most
//! [`START_ATTEMPTS_MAX`] times. Anything else that stops a process from
//! coming up is an error quoting the end of its log. A start returns once
//! every server answers PING and, with a coordinator, says in its STATS that
//! its control link is up.

use std::path::{Path, PathBuf};
use std::time::Duration;

use locus_client::{Client, ClientConfig};
use locus_fabric::auth::Secret;
use locus_server::config::{
    ClusterFile, ClusterSection, CoordinatorEntry, DurabilitySection, PolicySection, ServerEntry,
    StoreSection,
};
use locus_server::supervise::{log_tail, FreePorts, Role, Supervisor, Tie, LOG_TAIL_LINES};

use crate::{BenchError, Reporter, Result};

pub use locus_server::supervise::pid_alive;

/// Starts tried before giving up on ports taken by other programs.
pub const START_ATTEMPTS_MAX: usize = 3;
/// How long every server gets to answer PING (and, with a coordinator, to
/// link to it) after it was started.
pub const UP_WAIT: Duration = Duration::from_secs(90);

/// A new temporary directory named `prefix...`.
fn temp_dir(prefix: &str) -> Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|source| BenchError::Io {
            action: "creating a temporary directory in",
            path: std::env::temp_dir(),
            source,
        })
}

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

/// The running processes of one cluster; killed and reaped on drop.
pub struct Processes {
    file: ClusterFile,
    file_path: PathBuf,
    supervisor: Supervisor,
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
        let dir = temp_dir("locus-bench-")?;
        let mut ports = FreePorts::default();
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
                max_servers: None,
            },
            servers,
            coordinator,
            store: spec.store.clone(),
            policy: spec.policy.clone(),
            limits: Default::default(),
            durability,
            recovery: Default::default(),
            etcd: None,
            replication: Default::default(),
        };
        drop(ports);
        file.validate()?;
        let file_path = dir.path().join("cluster.toml");
        file.write(&file_path)?;
        let supervisor = Supervisor::new(&spec.exe, &file_path, dir.path(), Tie::Owned);
        let mut p = Processes {
            file,
            file_path,
            supervisor,
            _dir: dir,
        };
        // From here on, whatever fails, the guard kills what was started.
        let lifetime = Some(spec.lifetime_s);
        if p.file.coordinator.is_some() {
            p.supervisor
                .spawn(Role::Coordinator("coordinator".into()), &[], lifetime)?;
        }
        for id in 0..spec.machines as u8 {
            p.supervisor.spawn(Role::Server(id), &[], lifetime)?;
        }
        p.wait_up()?;
        Ok(p)
    }

    /// Waits until every server answers PING (and, with a coordinator, has
    /// linked to it: the first interval's reports then reach it), or one of
    /// the processes exits.
    fn wait_up(&mut self) -> std::result::Result<(), StartError> {
        let client = self.client(ClientConfig {
            connect_timeout: Duration::from_secs(1),
            deadline: Duration::from_secs(5),
            ..ClientConfig::default()
        })?;
        let ids: Vec<u8> = (0..self.file.machines() as u8).collect();
        let up = self.supervisor.wait_servers(&client, &ids, UP_WAIT);
        if let Err(e) = up {
            let taken = self.supervisor.procs().iter().any(|p| {
                log_tail(&p.log, LOG_TAIL_LINES)
                    .to_ascii_lowercase()
                    .contains("address already in use")
            });
            return Err(if taken {
                StartError::PortTaken(e.to_string())
            } else {
                StartError::Other(e.into())
            });
        }
        if self.file.coordinator.is_some() {
            self.supervisor.wait_linked(&client, &ids, UP_WAIT)?;
        }
        Ok(())
    }

    /// Fails if any process has exited (naming it, with the end of its log).
    pub fn check(&mut self) -> Result<()> {
        Ok(self.supervisor.check()?)
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
        self.supervisor.pids()
    }

    /// Kills and reaps every child (also done on drop).
    pub fn stop(mut self) {
        self.supervisor.kill_all();
    }
}

/// A cluster that `locus cluster up` started in a temporary directory
/// (etcd, coordinators, servers, as a user would start it), for the
/// benchmarks that move slots or kill servers under load; `locus cluster
/// down` stops it on drop.
pub struct UpCluster {
    exe: PathBuf,
    experiment: &'static str,
    dir: tempfile::TempDir,
}

impl UpCluster {
    /// `locus cluster up --dir TMP --lifetime-s 1800` with `extra` flags.
    pub fn up(
        exe: &Path,
        experiment: &'static str,
        extra: &[&str],
        r: &Reporter,
    ) -> Result<UpCluster> {
        let dir = temp_dir(&format!("locus-{experiment}-"))?;
        let c = UpCluster {
            exe: exe.to_path_buf(),
            experiment,
            dir,
        };
        r.note(format!(
            "cluster up {} in {}",
            extra.join(" "),
            c.dir().display()
        ));
        let d = c.dir_str().to_string();
        let mut args = vec!["cluster", "up", "--dir", &d, "--lifetime-s", "1800"];
        args.extend_from_slice(extra);
        c.locus(&args)?;
        Ok(c)
    }

    /// Runs `locus ARGS`; an exit other than success is an error quoting
    /// its stderr.
    pub fn locus(&self, args: &[&str]) -> Result<()> {
        let failed = |what: String, e: String| BenchError::Measurement {
            experiment: self.experiment,
            what: format!("{what}: {e}"),
        };
        let o = std::process::Command::new(&self.exe)
            .args(args)
            .output()
            .map_err(|e| failed("running locus".into(), e.to_string()))?;
        if !o.status.success() {
            return Err(failed(
                format!("locus {}", args.join(" ")),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            ));
        }
        Ok(())
    }

    /// The cluster's directory (cluster file, logs, `pids.json`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The directory as a `--dir` argument.
    pub fn dir_str(&self) -> &str {
        self.dir.path().to_str().expect("a UTF-8 temporary path")
    }

    /// Its cluster file.
    pub fn file_path(&self) -> PathBuf {
        self.dir.path().join("cluster.toml")
    }

    /// The process id of server `id`, from `pids.json`.
    pub fn server_pid(&self, id: u8) -> Result<u32> {
        let path = self.dir.path().join("pids.json");
        let text = std::fs::read_to_string(&path).map_err(|source| BenchError::Io {
            action: "reading",
            path: path.clone(),
            source,
        })?;
        let pids: serde_json::Value = serde_json::from_str(&text)?;
        pids.as_array()
            .into_iter()
            .flatten()
            .find(|p| p["id"] == id)
            .and_then(|p| p["pid"].as_u64())
            .and_then(|p| u32::try_from(p).ok())
            .ok_or_else(|| BenchError::Measurement {
                experiment: self.experiment,
                what: format!("{} names no server {id}", path.display()),
            })
    }
}

impl Drop for UpCluster {
    fn drop(&mut self) {
        let _ = self.locus(&["cluster", "down", "--dir", self.dir_str()]);
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
