//! The lab-backed cluster of a fault run: a [`Netlab`] of `room + 2` nodes
//! (`room`, the cluster file's `max_servers`, is the first servers plus
//! [`JOIN_IDS`] ids a join may take), `locus server` i in node i, etcd in
//! node `room`, `locus coordinator` in node `room + 1`, each started inside its namespace by
//! the one supervisor ([`Supervisor::spawn_with`]) or, for etcd, by
//! [`Etcd::spawn_command`]. Every port is the same in every namespace (each
//! has its own), so the cluster file needs no free-port search.
//!
//! Teardown, by field order: the supervisor kills and reaps the servers and
//! the coordinator, then etcd goes, then the lab (its namespaces, rules and
//! delay queues), then the directory (cluster file, logs, logs of the WAL).

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Set (to anything) to keep the lab's directory (the processes' logs,
/// logs and etcd data) after the run, for a post-mortem.
pub const KEEP_ENV: &str = "LOCUS_FAULTS_KEEP";

use locus_client::{Client, ClientConfig};
use locus_fabric::auth::Secret;
use locus_membership::{Etcd, EtcdSpec, Membership};
use locus_netlab::{Netlab, NetlabSpec};
use locus_server::config::{
    ClusterFile, ClusterSection, CoordinatorEntry, DurabilitySection, EtcdSection, PolicySection,
    ServerEntry, StoreSection,
};
use locus_server::supervise::{pid_alive, Role, Supervisor, Tie};

use super::elastic::Members;
use super::Settings;
use crate::{BenchError, Reporter, Result};

/// Server ids past the first servers that a join may take: the cluster is
/// made with room for them (`max_servers`), their namespaces with the lab.
/// Past them a join takes back an id that left, on an empty disk.
pub const JOIN_IDS: usize = 1;

/// A server's fabric port, in its namespace.
const FABRIC_PORT: u16 = 7000;
/// A server's client port.
pub const CLIENT_PORT: u16 = 7001;
/// The coordinator's control port.
pub const CONTROL_PORT: u16 = 7100;
/// etcd's client port.
pub const ETCD_CLIENT_PORT: u16 = 2379;
const ETCD_PEER_PORT: u16 = 2380;
/// etcd lease of every server: a server cut from etcd longer than this is
/// fenced (and exits; the nemesis starts it again).
pub const LEASE_TTL_S: u64 = 3;
/// How long a start (or a restart) may take to answer.
pub const UP_WAIT: Duration = Duration::from_secs(60);
/// Monitoring interval of the coordinator: short, so a short run migrates.
const POLICY_INTERVAL_MS: u64 = 500;

/// The running cluster; everything torn down on drop.
pub struct LabCluster {
    sup: Supervisor,
    membership: Membership,
    etcd: Etcd,
    lab: Netlab,
    /// The cluster file as written, plus the servers that joined since.
    file: ClusterFile,
    file_path: PathBuf,
    /// Ids the cluster has room for (`max_servers`).
    room: usize,
    /// The servers in the cluster now (join and leave change them).
    members: std::sync::Arc<Members>,
    lifetime_s: u64,
    dir: tempfile::TempDir,
}

impl LabCluster {
    /// Makes the lab and starts etcd, the coordinator and the servers;
    /// returns once every server answers and has linked to the coordinator.
    pub fn start(s: &Settings, r: &Reporter) -> Result<LabCluster> {
        let room = s.servers + JOIN_IDS;
        let lab =
            Netlab::create(NetlabSpec::new(room + 2)).map_err(|e| BenchError::Measurement {
                experiment: "faults",
                what: format!("cannot make the fault lab (needs root, ip, iptables): {e}"),
            })?;
        r.note(format!(
            "lab {}: servers at {}.. (room for {room}), etcd at {}, coordinator at {}",
            lab.tag(),
            lab.addr(0),
            lab.addr(room),
            lab.addr(room + 1)
        ));
        let keep = std::env::var_os(KEEP_ENV).is_some();
        let dir = tempfile::Builder::new()
            .prefix("locus-faults-")
            .disable_cleanup(keep)
            .tempdir()
            .map_err(|source| BenchError::Io {
                action: "creating a temporary directory in",
                path: std::env::temp_dir(),
                source,
            })?;
        if keep {
            r.note(format!(
                "{KEEP_ENV}: the processes' logs and data stay in {}",
                dir.path().display()
            ));
        }
        let etcd_node = room;
        let spec = EtcdSpec {
            data_dir: dir.path().join("etcd"),
            client: SocketAddr::new(lab.addr(etcd_node).into(), ETCD_CLIENT_PORT),
            peer: SocketAddr::new(lab.addr(etcd_node).into(), ETCD_PEER_PORT),
        };
        let mut command = lab.command(etcd_node, "etcd");
        command.args(spec.command().get_args());
        let etcd = Etcd::spawn_command(spec.clone(), command, &dir.path().join("etcd.log"))
            .map_err(|e| BenchError::Child {
                program: "etcd".into(),
                reason: e.to_string(),
            })?;
        let servers = (0..s.servers)
            .map(|i| ServerEntry {
                id: i as u8,
                fabric: SocketAddr::new(lab.addr(i).into(), FABRIC_PORT),
                client: SocketAddr::new(lab.addr(i).into(), CLIENT_PORT),
                metrics: None,
            })
            .collect();
        let file = ClusterFile {
            cluster: ClusterSection {
                secret: Some(Secret::generate().expose().to_string()),
                max_servers: Some(room),
            },
            servers,
            coordinator: Some(CoordinatorEntry {
                control: SocketAddr::new(lab.addr(room + 1).into(), CONTROL_PORT),
                metrics: None,
                record: dir.path().join("coordinator.redb"),
            }),
            store: StoreSection {
                value_region_mb: Some(128),
                ..StoreSection::default()
            },
            policy: PolicySection {
                interval_ms: POLICY_INTERVAL_MS,
                ..PolicySection::default()
            },
            limits: Default::default(),
            // sync = "always", the default: an acknowledged update is on disk.
            durability: Some(DurabilitySection {
                dir: "data".into(),
                ..DurabilitySection::default()
            }),
            recovery: Default::default(),
            etcd: Some(EtcdSection {
                endpoints: vec![spec.endpoint()],
                prefix: "/locus".into(),
                lease_ttl_s: LEASE_TTL_S,
            }),
            replication: locus_server::config::ReplicationSection {
                factor: s.replication,
            },
        };
        file.validate()?;
        let membership = file
            .etcd
            .as_ref()
            .map(|e| Membership::connect(&e.config()))
            .expect("the file has [etcd]")
            .map_err(|e| BenchError::Child {
                program: "etcd".into(),
                reason: format!("cannot connect to the lab's etcd: {e}"),
            })?;
        let file_path = dir.path().join("cluster.toml");
        file.write(&file_path)?;
        let sup = Supervisor::new(&s.exe, &file_path, dir.path(), Tie::Owned);
        let mut c = LabCluster {
            sup,
            membership,
            etcd,
            lab,
            file,
            file_path,
            room,
            members: std::sync::Arc::new(Members::new((0..s.servers as u8).collect())),
            lifetime_s: s.duration_s + 300,
            dir,
        };
        c.spawn_coordinator()?;
        for id in 0..s.servers as u8 {
            c.spawn_server(id)?;
        }
        let client = c.client(Duration::from_secs(2))?;
        let ids: Vec<u8> = (0..s.servers as u8).collect();
        c.sup.wait_servers(&client, &ids, UP_WAIT)?;
        c.sup.wait_linked(&client, &ids, UP_WAIT)?;
        Ok(c)
    }

    /// Starts server `id` in its namespace (again, after a kill).
    pub fn spawn_server(&mut self, id: u8) -> Result<u32> {
        let lab = &self.lab;
        Ok(self
            .sup
            .spawn_with(Role::Server(id), &[], Some(self.lifetime_s), |exe| {
                lab.command(id as usize, exe)
            })?)
    }

    /// Whether the cluster file lists server `id` (it joined once).
    pub fn listed(&self, id: u8) -> bool {
        self.file.servers.iter().any(|e| e.id == id)
    }

    /// Lists server `id`, the next id past those listed, in the cluster file
    /// with its namespace's addresses (as `cluster add-server` does; the
    /// running servers learn them from its etcd registration, clients from
    /// SERVERS).
    pub fn list_server(&mut self, id: u8) -> Result<()> {
        assert_eq!(id as usize, self.file.servers.len(), "ids are dense");
        assert!((id as usize) < self.room, "no room for server {id}");
        self.file.servers.push(ServerEntry {
            id,
            fabric: SocketAddr::new(self.lab.addr(id as usize).into(), FABRIC_PORT),
            client: SocketAddr::new(self.lab.addr(id as usize).into(), CLIENT_PORT),
            metrics: None,
        });
        self.file.validate()?;
        self.file.write(&self.file_path)?;
        Ok(())
    }

    /// Removes server `id`'s log and checkpoints: it joins again on an
    /// empty disk, owning nothing (its old log describes slots it handed
    /// away when it left).
    pub fn wipe_disk(&self, id: u8) -> Result<()> {
        let d = self.dir.path().join("data").join(format!("server-{id}"));
        match std::fs::remove_dir_all(&d) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(BenchError::Io {
                action: "removing the disk of a server that left,",
                path: d,
                source: e,
            }),
            _ => Ok(()),
        }
    }

    /// Waits until server `id` answers and has linked to the coordinator
    /// (failing at once if a process exits).
    pub fn wait_joined(&mut self, id: u8) -> Result<()> {
        let client = self.client(Duration::from_secs(2))?;
        self.sup.wait_servers(&client, &[id], UP_WAIT)?;
        self.sup.wait_linked(&client, &[id], UP_WAIT)?;
        Ok(())
    }

    /// Stops server `id` (SIGKILL, reaped); its pid, if it was running.
    pub fn stop_server(&mut self, id: u8) -> Option<u32> {
        let pid = self.pid(&Role::Server(id))?;
        self.sup.kill(pid);
        Some(pid)
    }

    /// Starts the coordinator in its namespace.
    pub fn spawn_coordinator(&mut self) -> Result<u32> {
        let lab = &self.lab;
        let node = self.room + 1;
        Ok(self.sup.spawn_with(
            Role::Coordinator("coordinator".into()),
            &[],
            Some(self.lifetime_s),
            |exe| lab.command(node, exe),
        )?)
    }

    /// A client of the cluster with request deadline `deadline`.
    pub fn client(&self, deadline: Duration) -> Result<Client> {
        Ok(Client::from_file(
            &self.file_path,
            ClientConfig {
                deadline,
                connect_timeout: Duration::from_millis(500),
                ..ClientConfig::default()
            },
        )?)
    }

    /// The lab.
    pub fn membership(&self) -> &Membership {
        &self.membership
    }

    /// The lab's network.
    pub fn lab(&self) -> &Netlab {
        &self.lab
    }

    /// The servers in the cluster now, shared with the clients and the mover.
    pub fn members(&self) -> &std::sync::Arc<Members> {
        &self.members
    }

    /// Ids the cluster has room for; server i is lab node i.
    pub fn room(&self) -> usize {
        self.room
    }

    /// The lab node of etcd.
    pub fn etcd_node(&self) -> usize {
        self.room
    }

    /// The lab node of the coordinator.
    pub fn coordinator_node(&self) -> usize {
        self.room + 1
    }

    /// Node `node`'s address with `port`.
    pub fn addr(&self, node: usize, port: u16) -> SocketAddr {
        SocketAddr::new(self.lab.addr(node).into(), port)
    }

    /// The pid of `role`'s live process, if one was started and not killed.
    pub fn pid(&self, role: &Role) -> Option<u32> {
        self.sup
            .procs()
            .iter()
            .rev()
            .find(|p| &p.role == role)
            .map(|p| p.pid)
    }

    /// Server `id`'s epoch as etcd's membership holds it (`None`: not
    /// registered, or etcd did not answer).
    pub fn epoch(&self, id: u8) -> Option<u64> {
        let (members, _) = self.membership.members().ok()?;
        members.iter().find(|m| m.machine == id).map(|m| m.epoch)
    }

    /// Waits (at most `limit`) until server `id` registers an epoch above
    /// `before`; returns it.
    pub fn wait_epoch_above(&self, id: u8, before: u64, limit: Duration) -> Option<u64> {
        let t0 = Instant::now();
        loop {
            match self.epoch(id) {
                Some(e) if e > before => return Some(e),
                _ if t0.elapsed() > limit => return None,
                _ => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    /// etcd's pid.
    pub fn etcd_pid(&self) -> Option<u32> {
        self.etcd.pid()
    }

    /// SIGKILLs and reaps `pid` (a process of the supervisor's).
    pub fn kill(&mut self, pid: u32) -> bool {
        self.sup.kill(pid)
    }

    /// Restarts every member server or coordinator whose process is gone
    /// (killed, or exited by itself after its fencing); returns the roles
    /// restarted. A server that left is never started again here.
    pub fn revive(&mut self) -> Result<Vec<String>> {
        let members = self.members.ids();
        let mut restarted = Vec::new();
        let dead: Vec<(Role, u32)> = self
            .sup
            .procs()
            .iter()
            .filter(|p| !pid_alive(p.pid))
            .map(|p| (p.role.clone(), p.pid))
            .collect();
        for (role, pid) in dead {
            self.sup.kill(pid);
            match role {
                Role::Server(id) if !members.contains(&id) => continue,
                Role::Server(id) => {
                    self.spawn_server(id)?;
                }
                Role::Coordinator(_) => {
                    self.spawn_coordinator()?;
                }
            }
            restarted.push(role.to_string());
        }
        for id in members {
            if self.pid(&Role::Server(id)).is_none() {
                self.spawn_server(id)?;
                restarted.push(Role::Server(id).to_string());
            }
        }
        Ok(restarted)
    }

    /// Waits until every member answers PING, at most `limit`, restarting
    /// any process that exits meanwhile (a server fenced by an earlier fault
    /// answers NOT_READY until it exits).
    pub fn wait_up(&mut self, limit: Duration) -> Result<()> {
        let client = self.client(Duration::from_secs(2))?;
        let t0 = Instant::now();
        loop {
            self.revive()?;
            let down: Vec<u8> = self
                .members
                .ids()
                .into_iter()
                .filter(|&id| client.ping(id).is_err())
                .collect();
            if down.is_empty() {
                return Ok(());
            }
            if t0.elapsed() > limit {
                let role = Role::Server(down[0]);
                return Err(self
                    .sup
                    .failed(
                        &role,
                        &format!(
                            "servers {down:?} did not answer within {} s",
                            limit.as_secs()
                        ),
                    )
                    .into());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Whether server `id` answers PING within `limit`.
    pub fn answers_within(&self, id: u8, limit: Duration) -> bool {
        let Ok(client) = self.client(Duration::from_secs(2)) else {
            return false;
        };
        let t0 = Instant::now();
        while t0.elapsed() < limit {
            if client.ping(id).is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    /// Fails if any process has exited, quoting its log.
    pub fn check(&mut self) -> Result<()> {
        Ok(self.sup.check()?)
    }

    /// The run's directory (logs).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// Whether a TCP connection from the host to `addr` opens within `timeout`.
pub fn connects(addr: SocketAddr, timeout: Duration) -> bool {
    TcpStream::connect_timeout(&addr, timeout).is_ok()
}

/// The shortest of `tries` round trips of a TCP connect from the host to
/// `addr`: accepted or refused (a reset crosses the link too, so the link is
/// measured even while no process listens); `None` if none was answered.
pub fn connect_ms_min(addr: SocketAddr, tries: usize, timeout: Duration) -> Option<f64> {
    (0..tries)
        .filter_map(|_| {
            let t = Instant::now();
            match TcpStream::connect_timeout(&addr, timeout) {
                Ok(_) => Some(t.elapsed().as_secs_f64() * 1e3),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    Some(t.elapsed().as_secs_f64() * 1e3)
                }
                Err(_) => None,
            }
        })
        .min_by(f64::total_cmp)
}

/// Whether a TCP connection from inside lab node `from` to `addr` opens
/// within a second (bash's `/dev/tcp` under `timeout`, run in the node's
/// namespace).
pub fn connects_from(lab: &Netlab, from: usize, addr: SocketAddr) -> bool {
    lab.command(from, "timeout")
        .args([
            "1",
            "bash",
            "-c",
            &format!("exec 3<>/dev/tcp/{}/{}", addr.ip(), addr.port()),
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
