//! [`Server`]: one machine of the store as a process.
//!
//! Start-up, in order (each step's failure names what and why):
//! 1. bind the fabric listener (and the metrics listener, served at step 7,
//!    so that its port stays this server's); build the TCP fabric hosting this machine,
//!    with the cluster secret (every peer connection proves it);
//! 2. create this machine's regions (`Store::create`);
//! 3. wait for every peer's regions, retrying within `limits.peer_wait_ms`
//!    and logging which peer is missing and why;
//! 4. start the store's service thread (forwarded updates, reclaim ring);
//!    then, with `[durability]`, recover: load the checkpoint, replay the
//!    log, put every vertex this server homes back at home (`durable.rs`);
//!    a corrupt log stops the start naming the file and offset; the
//!    checkpointer thread starts with the others;
//!    with `[etcd]` (`member.rs`), the epoch of this incarnation is taken
//!    from etcd right after the fabric is built (step 1), the slot table
//!    is read from etcd (or put there by the first server) before the
//!    regions are awaited, and the server
//!    registers under its lease only now, after recovery, and reads its
//!    peers' epochs; the membership watch and fence threads start with the
//!    others;
//! 5. bind the client listener and accept clients (`conn.rs`), each
//!    connection on its own thread with its own worker, at most
//!    `limits.max_clients` at once;
//! 6. if the cluster has a coordinator, start the control link and the
//!    migration executor (`control.rs`): this machine's monitor reports to
//!    the coordinator process and runs the jobs it approves;
//! 7. serve metrics, if configured.
//!
//! One-sided operations from peers are served by the fabric's service
//! threads, never by workers (Pragh 2.1).

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use locus_fabric::auth::Secret;
use locus_fabric::counting::Counting;
use locus_fabric::tcp::{TcpConfig, TcpFabric};
use locus_fabric::{FabricError, MachineId};
use locus_node::node::recovery::{FailureReport, RejoinReport};
use locus_node::{LogParts, Node, NodeParts};
use locus_store::scan::ScanReport;
use locus_store::{Key, Services, Store, StoreError};

use crate::config::ClusterFile;
use crate::{Result, ServerError};

/// The fabric a server runs on: TCP, with exact counters.
pub type ServerFabric = Counting<TcpFabric>;

/// How often a waiting server retries its peers, and logs.
const PEER_RETRY: Duration = Duration::from_millis(200);
const PEER_LOG_EVERY: Duration = Duration::from_secs(2);

/// What the serving threads of one server share.
pub(crate) struct Shared {
    pub(crate) id: MachineId,
    pub(crate) file: ClusterFile,
    /// This machine of the store: its store, log and recovery (`locus-node`).
    pub(crate) node: Node<TcpFabric>,
    pub(crate) secret: Secret,
    pub(crate) client_addr: SocketAddr,
    pub(crate) started: Instant,
    pub(crate) stop: AtomicBool,
    pub(crate) clients: AtomicUsize,
    pub(crate) auth_refused: AtomicU64,
    pub(crate) requests: [AtomicU64; 16],
    /// The coordinator link's counters (zero without a coordinator).
    pub(crate) control: crate::control::ControlStats,
    /// Membership on etcd, with `[etcd]` (`member.rs`).
    pub(crate) membership: Option<crate::member::MemberState>,
    /// Each server's client address, by id: the cluster file's, then those
    /// of servers added later, learned from etcd (the SERVERS reply).
    pub(crate) known_clients: std::sync::RwLock<Vec<Option<SocketAddr>>>,
}

impl Shared {
    /// Records server `id`'s client address.
    pub(crate) fn set_known_client(&self, id: MachineId, addr: SocketAddr) {
        let mut k = self
            .known_clients
            .write()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = k.get_mut(id as usize) {
            *slot = Some(addr);
        }
    }

    /// The SERVERS reply: every server known, by id.
    pub(crate) fn servers_reply(&self) -> Vec<(MachineId, String)> {
        let k = self.known_clients.read().unwrap_or_else(|e| e.into_inner());
        k.iter()
            .enumerate()
            .filter_map(|(id, a)| Some((id as MachineId, (*a)?.to_string())))
            .collect()
    }

    /// The store.
    pub(crate) fn store(&self) -> &Store<ServerFabric> {
        self.node.store()
    }
}

/// A running server.
pub struct Server {
    pub(crate) shared: Arc<Shared>,
    services: Option<Services>,
    threads: Vec<JoinHandle<()>>,
    metrics_addr: Option<SocketAddr>,
}

impl Server {
    /// Starts server `id` of `file` (see the module doc for the steps).
    pub fn start(file: ClusterFile, id: MachineId) -> Result<Server> {
        let entry = file.server(id)?.clone();
        let secret = file.secret()?;
        let machines = file.machines();
        let listener = bind(entry.fabric, &format!("server {id}"), "peers")?;
        // Bound now, served at step 7: a port chosen by `cluster up` and left
        // free through the start-up could be taken by another process.
        let metrics_listener = match entry.metrics {
            Some(addr) => Some(bind(addr, &format!("server {id}"), "metrics")?),
            None => None,
        };
        // Machines with no server listed yet learn their addresses from
        // etcd when their servers join (`member.rs`).
        let mut peers = vec![locus_fabric::tcp::UNASSIGNED; machines];
        for s in &file.servers {
            peers[s.id as usize] = s.fabric;
        }
        let tcp = TcpFabric::from_listener(
            TcpConfig {
                machines,
                hosted: vec![id],
                peers,
                io_timeout_ms: file.limits.fabric_io_timeout_ms,
                connect_timeout_ms: file.limits.fabric_io_timeout_ms.min(2_000),
                secret: Some(secret.clone()),
                ..TcpConfig::default()
            },
            listener,
        )?;
        let begun = crate::member::begin(&file, id, &tcp)?;
        let known_clients: Vec<Option<SocketAddr>> = (0..machines)
            .map(|m| file.server(m as MachineId).ok().map(|s| s.client))
            .collect();
        let created = Node::create(NodeParts {
            fabric: tcp,
            me: id,
            config: file.node(),
            log: file.durability.as_ref().map(|d| LogParts {
                storage: Arc::new(locus_wal::FileStorage),
                dir: d.server_dir(id),
                runs_on: locus_node::node::RunsOn::Threads,
            }),
            label: format!("server {id}"),
            counters: None,
        })?;
        if file.machines() > file.servers.len() || file.replication.factor > 1 {
            let homes = created.store().homes();
            homes.set_initial(&file.initial_table(homes.slots())?)?;
        }
        if let Some((m, _)) = &begun {
            crate::member::adopt_slots(m, created.store())?;
        }
        // Asked again at each retry: a peer stopped a moment ago may still
        // hold its lease at first.
        let awaited = || crate::member::peers_to_await(begun.as_ref().map(|b| &b.0), &file, id);
        wait_for_peers(created.store(), &file, id, awaited)?;
        let services = created.store().spawn_services()?;
        let mut node = {
            let mut w = created.store().worker(id)?;
            created.recover(&mut w)?
        };
        let client_listener = bind(entry.client, &format!("server {id}"), "clients")?;
        let client_addr = client_listener
            .local_addr()
            .map_err(|e| ServerError::io("client listener address", e))?;
        node.set_label(format!("server {id} ({client_addr})"));
        let membership = match begun {
            Some((m, epoch)) => Some(crate::member::register(
                m,
                epoch,
                &file,
                id,
                &node,
                client_addr,
            )?),
            None => None,
        };
        let shared = Arc::new(Shared {
            id,
            file: file.clone(),
            node,
            secret,
            client_addr,
            started: Instant::now(),
            stop: AtomicBool::new(false),
            clients: AtomicUsize::new(0),
            auth_refused: AtomicU64::new(0),
            requests: Default::default(),
            control: Default::default(),
            membership,
            known_clients: std::sync::RwLock::new(known_clients),
        });
        shared.set_known_client(id, client_addr);
        let mut threads = Vec::new();
        let s = Arc::clone(&shared);
        threads.push(spawn(&format!("locus-accept-{id}"), move || {
            crate::conn::accept_loop(&s, client_listener)
        })?);
        threads.extend(crate::control::start(&shared)?);
        threads.extend(start_scan(&shared)?);
        threads.extend(crate::member::start(&shared)?);
        if shared.node.checkpoint_interval().is_some() {
            let s = Arc::clone(&shared);
            threads.push(spawn(&format!("locus-checkpoint-{id}"), move || {
                checkpointer(&s)
            })?);
        }
        let metrics_addr = match metrics_listener {
            Some(listener) => {
                let s = Arc::clone(&shared);
                let (addr, t) =
                    crate::metrics::serve(listener, move || crate::metrics::server_gauges(&s))?;
                threads.push(t);
                Some(addr)
            }
            None => None,
        };
        tracing::info!(
            server = id,
            fabric = %entry.fabric,
            client = %client_addr,
            metrics = ?metrics_addr,
            "serving"
        );
        Ok(Server {
            shared,
            services: Some(services),
            threads,
            metrics_addr,
        })
    }

    /// The address clients connect to.
    pub fn client_addr(&self) -> SocketAddr {
        self.shared.client_addr
    }

    /// The metrics endpoint's address, if any.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The store (for tests and the embedded coordinator link).
    pub fn store(&self) -> &Store<ServerFabric> {
        self.shared.store()
    }

    /// This machine of the store.
    pub fn node(&self) -> &Node<TcpFabric> {
        &self.shared.node
    }

    /// Pragh 5 at this server for the dead `peer` ([`Node::peer_failed`]):
    /// what the membership watch calls when `peer`'s lease expires (tests
    /// call it directly after stopping a peer).
    pub fn peer_failed(
        &self,
        peer: MachineId,
        epoch: u64,
        recorded: &[Key],
    ) -> Result<FailureReport> {
        Ok(self.shared.node.peer_failed(peer, epoch, recorded)?)
    }

    /// `peer` is back at `epoch` ([`Node::peer_rejoined`]).
    pub fn peer_rejoined(&self, peer: MachineId, epoch: u64) -> Result<RejoinReport> {
        Ok(self.shared.node.peer_rejoined(peer, epoch)?)
    }

    /// One value-region scan round now (tests; the background thread runs
    /// them every `recovery.scan_interval_ms`). Returns the round's report.
    pub fn scan_values(&self) -> Result<ScanReport> {
        let mut w = self.shared.store().worker(self.shared.id)?;
        Ok(self.shared.node.scan_round(&mut w).map(|(r, _)| r)?)
    }

    /// Why this server is fenced out of the cluster, once it is (with
    /// `[etcd]`: its lease was lost); it then serves nothing and should exit.
    pub fn fenced(&self) -> Option<String> {
        self.shared.membership.as_ref().and_then(|m| m.fenced())
    }

    /// This incarnation's epoch (0 without `[etcd]`).
    pub fn epoch(&self) -> u64 {
        self.shared.membership.as_ref().map_or(0, |m| m.epoch)
    }

    /// The first failure of the store's service thread, if any.
    pub fn failure(&self) -> Option<StoreError> {
        self.services.as_ref().and_then(|s| s.failure())
    }

    /// Stops accepting, closes client connections, stops the service thread
    /// and the fabric.
    pub fn stop(mut self) {
        self.stop_inner();
    }

    fn stop_inner(&mut self) {
        if self.shared.stop.swap(true, Ordering::AcqRel) {
            return;
        }
        crate::conn::wake_accept(self.shared.client_addr);
        if let Some(m) = self.metrics_addr {
            crate::conn::wake_accept(m);
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        drop(self.services.take());
        self.shared.store().fabric().inner().shutdown();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_inner();
    }
}

/// Waits until the regions of every peer `peers` names (asked at each
/// try) can be looked up and are where workers expect them, within
/// `limits.peer_wait_ms`.
fn wait_for_peers(
    store: &Store<ServerFabric>,
    file: &ClusterFile,
    id: MachineId,
    peers: impl Fn() -> Result<Vec<MachineId>>,
) -> Result<()> {
    let t0 = Instant::now();
    let mut logged = t0;
    loop {
        match peers()?.iter().try_for_each(|&p| store.check_peer(id, p)) {
            Ok(()) => return Ok(()),
            Err(e) => {
                let (peer, reason) = match &e {
                    StoreError::Fabric(FabricError::PeerUnavailable { machine, reason }) => {
                        (*machine, reason.clone())
                    }
                    StoreError::Fabric(FabricError::NoSuchRegion { machine, .. }) => (
                        *machine,
                        "its regions are not registered yet (starting)".to_string(),
                    ),
                    _ => return Err(e.into()),
                };
                let waited = t0.elapsed();
                if waited.as_millis() as u64 >= file.limits.peer_wait_ms {
                    return Err(ServerError::PeerUnreachable {
                        peer,
                        addr: file.servers[peer as usize].fabric,
                        waited_ms: waited.as_millis() as u64,
                        reason,
                    });
                }
                if logged.elapsed() >= PEER_LOG_EVERY {
                    tracing::warn!(
                        server = id,
                        peer,
                        addr = %file.servers[peer as usize].fabric,
                        waited_ms = waited.as_millis() as u64,
                        "waiting for peer: {reason}"
                    );
                    logged = Instant::now();
                }
                std::thread::sleep(PEER_RETRY);
            }
        }
    }
}

/// How long a starting server retries a listening address still in use.
const BIND_RETRY: Duration = Duration::from_secs(10);

/// Binds `addr`, retrying while it is in use for at most [`BIND_RETRY`]: a
/// server restarted at once after `kill -9` can find its old sockets not yet
/// released (the killed process's threads still exiting).
pub(crate) fn bind(addr: SocketAddr, who: &str, whom: &str) -> Result<TcpListener> {
    let t0 = Instant::now();
    loop {
        match TcpListener::bind(addr) {
            Ok(l) => return Ok(l),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && t0.elapsed() < BIND_RETRY => {
                tracing::debug!(%addr, "{who}: address in use, retrying: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => {
                return Err(ServerError::io(
                    format!(
                        "{who}: cannot listen for {whom} on {addr} (retried {} ms)",
                        t0.elapsed().as_millis()
                    ),
                    e,
                ))
            }
        }
    }
}

/// Writes a checkpoint every `durability.checkpoint_interval_s` (when
/// something was logged since the last one) until the server stops. A
/// failed checkpoint is logged and retried next interval: the log still
/// holds everything, only recovery gets longer.
fn checkpointer(s: &Shared) {
    let Some(interval) = s.node.checkpoint_interval() else {
        return;
    };
    every(s, "checkpointer", interval, |w| {
        if let Err(e) = s.node.checkpoint(w) {
            tracing::error!(server = s.id, "checkpoint failed, will retry: {e}");
        }
    });
}

/// How often the checkpointer and the scan look at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(200);

/// Runs `round` on a worker of this server every `interval` until it stops
/// (the checkpointer, the value-region scan).
fn every(
    s: &Shared,
    what: &str,
    interval: Duration,
    mut round: impl FnMut(&mut locus_store::Worker<ServerFabric>),
) {
    let mut w = match s.store().worker(s.id) {
        Ok(w) => w,
        Err(e) => {
            tracing::error!(server = s.id, "{what}: no worker ({e}); not running");
            return;
        }
    };
    let mut last = Instant::now();
    while !s.stop.load(Ordering::Acquire) {
        std::thread::sleep(STOP_POLL);
        if last.elapsed() < interval {
            continue;
        }
        last = Instant::now();
        round(&mut w);
    }
}

/// Starts the background value-region scan (Pragh 5; none if
/// `recovery.scan_interval_ms` is 0): a round every interval.
fn start_scan(shared: &Arc<Shared>) -> Result<Vec<JoinHandle<()>>> {
    let interval = Duration::from_millis(shared.file.recovery.scan_interval_ms);
    if interval.is_zero() {
        return Ok(Vec::new());
    }
    let s = Arc::clone(shared);
    let t = spawn(&format!("locus-scan-{}", s.id), move || {
        every(&s, "value-region scan", interval, |w| {
            if let Err(e) = s.node.scan_round(w) {
                // A peer down hides its references: nothing was freed (S4).
                tracing::debug!(server = s.id, "value-region scan round skipped: {e}");
            }
        })
    })?;
    Ok(vec![t])
}

/// Starts a named thread.
pub(crate) fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map_err(|source| ServerError::Spawn {
            thread: name.into(),
            source,
        })
}
