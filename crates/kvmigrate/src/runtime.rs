//! A whole cluster in one process: the router and every server on threads over one shared
//! [`Transport`](crate::transport::Transport), and blocking clients.
//!
//! Node ids: the router is 0, servers are `1..=servers`, clients follow. Each thread runs the
//! crate's one node loop ([`crate::node`]; the same loop `locus kv` runs per process): a server
//! enforces its CPU budget itself (NetMigrate 4.4, 6.5). What this module adds through
//! [`NodeHooks`] is the cluster's side: a bounded command queue per server (load, migrate,
//! abort, peek, stats) drained at the start of every step, and published router counters and
//! migration status that [`Cluster`] reads without stopping anyone.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, SendTimeoutError, Sender};

use crate::client::{Outcome, ReplyMerger};
use crate::error::{Error, Result};
use crate::node::{NodeHooks, RouterNode, ServerNode, Step};
use crate::router::{Router, RouterConfig, RouterStats};
use crate::server::{Server, ServerConfig, ServerStats, StoreFactory};
use crate::status::MigrationStatus;
use crate::table::{ShardStore, Table};
use crate::transport::InProcess;
use crate::wire::{Body, Item, Key, NodeId, Packet, Protocol, ShardId, Status, FLAG_DOUBLE};

pub use crate::node::{BudgetMeter, CpuBudget, Policy};
pub use crate::transport::SharedTransport;

/// The router's node id.
pub const ROUTER: NodeId = 0;

/// Commands queued per server thread before a caller waits (the thread drains them every step).
pub const COMMANDS_QUEUED_MAX: usize = 64;
/// The router thread publishes its counters after this many packets (and whenever it idles).
pub const ROUTER_STATS_EVERY_PACKETS: u32 = 256;
/// A server thread publishes its migration status this often.
pub const STATUS_PUBLISH_US: u64 = 1000;

/// A cluster of one router and some servers.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// Servers (ids 1..=servers).
    pub servers: u16,
    /// Client handles that may be created.
    pub clients_max: u16,
    /// Router settings (its id is forced to [`ROUTER`]).
    pub router: RouterConfig,
    /// Template for every server (id and router are set per server).
    pub server: ServerConfig,
    /// Budget per server id; missing ids get the default (100%).
    pub budgets: BTreeMap<NodeId, CpuBudget>,
    /// A client gives up on a query after this long.
    pub op_timeout_ms: u64,
}

impl ClusterConfig {
    /// Two or more servers with default settings.
    pub fn new(servers: u16, clients_max: u16, server: ServerConfig) -> Self {
        Self {
            servers,
            clients_max,
            router: RouterConfig::default(),
            server,
            budgets: BTreeMap::new(),
            op_timeout_ms: 5000,
        }
    }

    /// Nodes a transport for this cluster must serve: router, servers, clients.
    pub fn nodes(&self) -> usize {
        1 + self.servers as usize + self.clients_max as usize
    }
}

enum Command {
    Load(ShardId, Vec<(Key, Vec<u8>)>, Sender<Result<()>>),
    Recover(ShardId, Sender<Result<()>>),
    Abandon(ShardId, Sender<Result<()>>),
    Migrate(ShardId, NodeId, Protocol, Sender<Result<()>>),
    Abort(ShardId),
    Peek(ShardId, Key, Sender<Option<Item>>),
    Stats(Sender<ServerStats>),
}

/// A running cluster. Dropping it stops every thread.
pub struct Cluster {
    transport: SharedTransport,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    commands: BTreeMap<NodeId, Sender<Command>>,
    status: Arc<Mutex<BTreeMap<NodeId, Vec<MigrationStatus>>>>,
    store_failures: Arc<Mutex<BTreeMap<NodeId, String>>>,
    router_stats: Arc<Mutex<RouterStats>>,
    next_client: AtomicUsize,
    cfg: ClusterConfig,
    epoch: Instant,
}

fn now_us(epoch: Instant) -> u64 {
    epoch.elapsed().as_micros() as u64
}

impl Cluster {
    /// Starts the router and server threads over the in-process transport.
    pub fn start(cfg: ClusterConfig) -> Result<Self> {
        let nodes = cfg.nodes();
        Self::start_with(cfg, Arc::new(InProcess::new(nodes)))
    }

    /// Starts the router and server threads over `transport`, which must serve
    /// [`ClusterConfig::nodes`] nodes.
    pub fn start_with(cfg: ClusterConfig, transport: SharedTransport) -> Result<Self> {
        Self::start_with_stores(cfg, transport, |_| {
            Ok(Box::new(|_, geometry| Table::new(geometry)) as StoreFactory<Table>)
        })
    }

    /// Starts the router and server threads over `transport`, server `id` keeping its shards in
    /// the stores `stores(id)` makes (for example a `redis-server` per server). A server whose
    /// store fails stops: what it produced in that step is dropped and it goes silent, as if it
    /// had crashed.
    pub fn start_with_stores<S: ShardStore + 'static>(
        cfg: ClusterConfig,
        transport: SharedTransport,
        mut stores: impl FnMut(NodeId) -> Result<StoreFactory<S>>,
    ) -> Result<Self> {
        if cfg.servers < 2 || cfg.servers > 64 {
            return Err(Error::InvalidSetting {
                key: "servers",
                value: cfg.servers.to_string(),
                expected: "2..=64".into(),
            });
        }
        if cfg.nodes() > u16::MAX as usize {
            return Err(Error::TooManyClients {
                clients_max: cfg.clients_max,
                servers: cfg.servers,
                clients_fit: u16::MAX as usize - 1 - cfg.servers as usize,
            });
        }
        for (&server, b) in &cfg.budgets {
            b.check(server)?;
        }
        let (servers, epoch) = (cfg.servers, Instant::now());
        let stop = Arc::new(AtomicBool::new(false));
        // Built first so that a failure half-way drops it, which stops the threads started.
        let mut cluster = Self {
            transport: transport.clone(),
            stop: stop.clone(),
            threads: Vec::new(),
            commands: BTreeMap::new(),
            status: Arc::new(Mutex::new(BTreeMap::new())),
            store_failures: Arc::new(Mutex::new(BTreeMap::new())),
            router_stats: Arc::new(Mutex::new(RouterStats::default())),
            next_client: AtomicUsize::new(0),
            cfg,
            epoch,
        };
        let router = Router::new(RouterConfig {
            id: ROUTER,
            ..cluster.cfg.router.clone()
        })?;
        let mut router = RouterNode::new(router, transport.clone());
        let mut router_hooks = RouterThread {
            stats: cluster.router_stats.clone(),
            since_publish: 0,
        };
        let router_stop = stop.clone();
        cluster.threads.push(spawn("kv-router", move || {
            // An error means the router was marked down: it stops, as a dead switch would.
            let _ = router.run(&router_stop, &mut router_hooks);
            router_hooks.publish(&router);
        })?);
        for id in 1..=servers {
            let server = Server::with_store(
                ServerConfig {
                    id,
                    router: ROUTER,
                    ..cluster.cfg.server.clone()
                },
                stores(id)?,
            )?;
            let budget = cluster.cfg.budgets.get(&id).copied().unwrap_or_default();
            let mut node = ServerNode::new(server, transport.clone(), budget, epoch)?;
            let (tx, rx) = crossbeam_channel::bounded(COMMANDS_QUEUED_MAX);
            cluster.commands.insert(id, tx);
            let mut hooks = ServerThread {
                commands: rx,
                status: cluster.status.clone(),
                last_publish_us: 0,
            };
            let (stop, failures) = (stop.clone(), cluster.store_failures.clone());
            cluster
                .threads
                .push(spawn(&format!("kv-server-{id}"), move || {
                    match node.run(&stop, &mut hooks) {
                        // Stopped, or poisoned by its store: its last status stands.
                        Ok(()) | Err(Error::StoreFailed { .. }) => hooks.publish(&node),
                        // Killed: it vanishes mid-step, as a crashed server would.
                        Err(_) => {}
                    }
                    if let Some(e) = node.store_error() {
                        let mut g = failures.lock().unwrap_or_else(|p| p.into_inner());
                        g.insert(id, e);
                    }
                })?);
        }
        Ok(cluster)
    }

    /// Microseconds since the cluster started (the servers' clock).
    pub fn now_us(&self) -> u64 {
        now_us(self.epoch)
    }

    /// The transport (for byte counters and fault injection).
    pub fn transport(&self) -> &SharedTransport {
        &self.transport
    }

    fn command<T>(&self, server: NodeId, make: impl FnOnce(Sender<T>) -> Command) -> Result<T> {
        let tx = self
            .commands
            .get(&server)
            .ok_or(Error::Unreachable(server))?;
        let (rtx, rrx) = crossbeam_channel::bounded(1);
        let timeout = Duration::from_millis(self.cfg.op_timeout_ms);
        tx.send_timeout(make(rtx), timeout).map_err(|e| match e {
            SendTimeoutError::Timeout(_) => Error::Timeout(self.cfg.op_timeout_ms, server),
            SendTimeoutError::Disconnected(_) => Error::Unreachable(server),
        })?;
        rrx.recv_timeout(timeout)
            .map_err(|_| Error::Timeout(self.cfg.op_timeout_ms, server))
    }

    /// Bulk-loads pairs into `server`'s own shard.
    pub fn load(&self, server: NodeId, pairs: Vec<(Key, Vec<u8>)>) -> Result<()> {
        self.command(server, |tx| Command::Load(server, pairs, tx))?
    }

    /// Starts migrating `shard` from its current server `source` to `dst`.
    pub fn migrate(
        &self,
        source: NodeId,
        shard: ShardId,
        dst: NodeId,
        protocol: Protocol,
    ) -> Result<()> {
        self.command(source, |tx| Command::Migrate(shard, dst, protocol, tx))?
    }

    /// Asks `source` to abort its migration of `shard`.
    pub fn abort(&self, source: NodeId, shard: ShardId) -> Result<()> {
        let tx = self
            .commands
            .get(&source)
            .ok_or(Error::Unreachable(source))?;
        let timeout = Duration::from_millis(self.cfg.op_timeout_ms);
        tx.send_timeout(Command::Abort(shard), timeout)
            .map_err(|e| match e {
                SendTimeoutError::Timeout(_) => Error::Timeout(self.cfg.op_timeout_ms, source),
                SendTimeoutError::Disconnected(_) => Error::Unreachable(source),
            })
    }

    /// Operator: `server` accepts the loss of its orphaned `shard`'s uncopied groups and owns
    /// the shard (`kv migration recover`; design: "NetMigrate: a dead source").
    pub fn recover(&self, server: NodeId, shard: ShardId) -> Result<()> {
        self.command(server, |tx| Command::Recover(shard, tx))?
    }

    /// Operator: `server` drops its orphaned `shard` and hands it back to the source, which came
    /// back with its data (`kv migration abort`).
    pub fn hand_back(&self, server: NodeId, shard: ShardId) -> Result<()> {
        self.command(server, |tx| Command::Abandon(shard, tx))?
    }

    /// A server's entry for `key` in `shard`, bypassing the router.
    pub fn peek(&self, server: NodeId, shard: ShardId, key: Key) -> Result<Option<Item>> {
        self.command(server, |tx| Command::Peek(shard, key, tx))
    }

    /// A server's counters.
    pub fn server_stats(&self, server: NodeId) -> Result<ServerStats> {
        self.command(server, Command::Stats)
    }

    /// The router's counters (published every few hundred packets and when idle).
    pub fn router_stats(&self) -> RouterStats {
        match self.router_stats.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Every migration's status, from every live server (what `locus kv migration status` prints).
    pub fn migration_status(&self) -> Vec<MigrationStatus> {
        let g = match self.status.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        g.values().flatten().cloned().collect()
    }

    /// Servers that stopped because their store failed, with the store's first error.
    pub fn store_failures(&self) -> BTreeMap<NodeId, String> {
        match self.store_failures.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Waits until the migration of `shard` is done or aborted.
    pub fn wait_migration(&self, shard: ShardId, timeout: Duration) -> Result<MigrationStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            let last = self
                .migration_status()
                .into_iter()
                .rfind(|s| s.shard == shard);
            if let Some(s) = &last {
                // The destination's entry for a dead source is an outcome too.
                if matches!(
                    s.phase,
                    crate::MigrationPhase::Done
                        | crate::MigrationPhase::Aborted
                        | crate::MigrationPhase::SourceLost
                        | crate::MigrationPhase::Recovered
                        | crate::MigrationPhase::RolledBack
                ) {
                    return Ok(s.clone());
                }
            }
            if Instant::now() >= deadline {
                return Err(Error::MigrationNotFinished {
                    shard,
                    waited_ms: timeout.as_millis() as u64,
                });
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Kills a node: its thread stops and packets to it vanish.
    pub fn kill(&self, node: NodeId) {
        self.transport.set_down(node);
    }

    /// A blocking client with its own node id.
    pub fn client(&self) -> Result<Client> {
        let n = self.next_client.fetch_add(1, Ordering::SeqCst);
        if n >= self.cfg.clients_max as usize {
            return Err(Error::ClientsExhausted {
                clients_max: self.cfg.clients_max,
            });
        }
        Ok(Client {
            id: 1 + self.cfg.servers + n as u16,
            transport: self.transport.clone(),
            seq: 0,
            timeout: Duration::from_millis(self.cfg.op_timeout_ms),
            bytes_sent: 0,
            bytes_received: 0,
            extra_bytes: 0,
        })
    }

    /// Stops every thread and waits for them.
    pub fn shutdown(mut self) -> Result<()> {
        self.stop_threads()
    }

    fn stop_threads(&mut self) -> Result<()> {
        self.stop.store(true, Ordering::SeqCst);
        let mut failed = None;
        for t in self.threads.drain(..) {
            let name = t.thread().name().unwrap_or("?").to_string();
            if t.join().is_err() {
                failed = Some(name);
            }
        }
        match failed {
            Some(thread) => Err(Error::ThreadPanicked { thread }),
            None => Ok(()),
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.stop_threads();
    }
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(f)
        .map_err(|source| Error::ThreadSpawn {
            name: name.to_string(),
            source,
        })
}

/// The router thread's hooks: publish the counters every few hundred packets and when idle.
struct RouterThread {
    stats: Arc<Mutex<RouterStats>>,
    since_publish: u32,
}

impl RouterThread {
    fn publish(&mut self, node: &RouterNode) {
        self.since_publish = 0;
        let s = node.router().stats();
        match self.stats.lock() {
            Ok(mut g) => *g = s.clone(),
            Err(p) => *p.into_inner() = s.clone(),
        }
    }
}

impl NodeHooks<RouterNode> for RouterThread {
    fn after(&mut self, node: &mut RouterNode, step: Step) {
        match step {
            Step::Idle => self.publish(node),
            _ => {
                self.since_publish += 1;
                if self.since_publish >= ROUTER_STATS_EVERY_PACKETS {
                    self.publish(node);
                }
            }
        }
    }
}

/// A server thread's hooks: the cluster's commands before each step, status after.
struct ServerThread {
    commands: Receiver<Command>,
    status: Arc<Mutex<BTreeMap<NodeId, Vec<MigrationStatus>>>>,
    last_publish_us: u64,
}

impl ServerThread {
    fn publish<S: ShardStore>(&mut self, node: &ServerNode<S>) {
        let s = node.server().migration_status();
        let mut g = self.status.lock().unwrap_or_else(|p| p.into_inner());
        g.insert(node.id(), s);
    }
}

impl<S: ShardStore> NodeHooks<ServerNode<S>> for ServerThread {
    fn poll(&mut self, node: &mut ServerNode<S>) {
        while let Ok(c) = self.commands.try_recv() {
            match c {
                Command::Recover(shard, tx) => {
                    let _ = tx.send(node.recover_orphan(shard));
                }
                Command::Abandon(shard, tx) => {
                    let _ = tx.send(node.abandon_orphan(shard));
                }
                Command::Load(shard, pairs, tx) => {
                    let _ = tx.send(node.load(shard, pairs));
                }
                Command::Migrate(shard, dst, protocol, tx) => {
                    let _ = tx.send(node.start_migration(shard, dst, protocol));
                }
                Command::Abort(shard) => {
                    // A store failure here stops the node in this same step.
                    let _ = node.abort_migration(shard);
                }
                Command::Peek(shard, key, tx) => {
                    let _ = tx.send(node.server().peek(shard, key));
                }
                Command::Stats(tx) => {
                    let _ = tx.send(node.server().stats().clone());
                }
            }
        }
    }

    fn after(&mut self, node: &mut ServerNode<S>, _step: Step) {
        let now = node.now_us();
        if now >= self.last_publish_us + STATUS_PUBLISH_US {
            self.last_publish_us = now;
            self.publish(node);
        }
    }
}

/// A blocking client: one query at a time (closed loop), through the router.
pub struct Client {
    id: NodeId,
    transport: SharedTransport,
    seq: u32,
    timeout: Duration,
    /// Bytes of queries sent.
    pub bytes_sent: u64,
    /// Bytes of replies received.
    pub bytes_received: u64,
    /// Bytes of the second replies of double reads (client-side extra bandwidth).
    pub extra_bytes: u64,
}

impl Client {
    /// This client's node id.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// Sends one query to the router and waits for its reply or replies.
    pub fn call(&mut self, shard: ShardId, body: Body) -> Result<Outcome> {
        self.seq = self.seq.wrapping_add(1);
        let p = Packet {
            from: self.id,
            shard,
            seq: self.seq,
            flags: 0,
            body,
        };
        self.bytes_sent += p.encoded_len() as u64;
        self.transport.send(ROUTER, p)?;
        let deadline = Instant::now() + self.timeout;
        let mut merger = ReplyMerger::default();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::QueryTimeout {
                    shard,
                    waited_ms: self.timeout.as_millis() as u64,
                });
            }
            let Some(r) = self.transport.recv(self.id, left)? else {
                continue;
            };
            if r.seq != self.seq {
                continue; // a late reply to an earlier, timed-out query
            }
            self.bytes_received += r.encoded_len() as u64;
            let double = r.flags & FLAG_DOUBLE != 0;
            if let Some(out) = merger.feed(&r) {
                if double {
                    self.extra_bytes += r.encoded_len() as u64;
                }
                return match out.status {
                    Status::Error => Err(Error::Refused(r.from)),
                    Status::Lost => Err(Error::DataLost {
                        server: r.from,
                        message: String::from_utf8_lossy(&out.value).into_owned(),
                    }),
                    _ => Ok(out),
                };
            }
        }
    }

    /// GET: the value, or `None` if absent.
    pub fn get(&mut self, shard: ShardId, key: Key) -> Result<Option<Vec<u8>>> {
        let o = self.call(shard, Body::Get { key })?;
        Ok((o.status == Status::Ok).then_some(o.value))
    }

    /// SET.
    pub fn set(&mut self, shard: ShardId, key: Key, value: Vec<u8>) -> Result<()> {
        self.call(shard, Body::Set { key, value }).map(|_| ())
    }

    /// DELETE.
    pub fn delete(&mut self, shard: ShardId, key: Key) -> Result<()> {
        self.call(shard, Body::Delete { key }).map(|_| ())
    }
}

/// A shared logical clock for recording histories across threads: each call is later than
/// every call that returned before it started.
#[derive(Debug, Default)]
pub struct HistoryClock(AtomicU64);

impl HistoryClock {
    /// The next instant.
    pub fn tick(&self) -> u64 {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }
}
