//! Threads that run the router and the servers over a [`Transport`], and blocking clients.
//!
//! Node ids: the router is 0, servers are `1..=servers`, clients follow. Each server thread
//! enforces its CPU budget itself (NetMigrate 4.4, 6.5): in every `interval_us` it spends at most
//! `query_pct` percent handling its inbox; the rest of the interval goes to migration work, or
//! idles. With 100% the inbox always comes first and migration runs between packets.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use crate::client::{Outcome, ReplyMerger};
use crate::error::{Error, Result};
use crate::router::{Router, RouterConfig, RouterStats};
use crate::server::{Server, ServerConfig, ServerStats, StoreFactory};
use crate::status::MigrationStatus;
use crate::table::{ShardStore, Table};
use crate::transport::{InProcess, Transport};

/// A shared transport.
pub type SharedTransport = Arc<dyn Transport>;
use crate::wire::{Body, Item, Key, NodeId, Packet, Protocol, ShardId, Status, FLAG_DOUBLE};

/// The router's node id.
pub const ROUTER: NodeId = 0;

/// A server's CPU budget (NetMigrate 4.4's policy knob).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuBudget {
    /// Accounting interval.
    pub interval_us: u64,
    /// Share of each interval the server may spend serving its inbox (1..=100).
    pub query_pct: u8,
}

impl Default for CpuBudget {
    fn default() -> Self {
        Self {
            interval_us: 1000,
            query_pct: 100,
        }
    }
}

/// Enforces a [`CpuBudget`] from observed handling times (pure; the server loop feeds it).
#[derive(Clone, Debug)]
pub struct BudgetMeter {
    budget: CpuBudget,
    allowance_ns: u64,
    interval_start_us: u64,
    used_ns: u64,
}

impl BudgetMeter {
    /// A meter whose first interval starts at `now_us`.
    pub fn new(budget: CpuBudget, now_us: u64) -> Self {
        Self {
            budget,
            allowance_ns: budget.interval_us * 1000 * budget.query_pct.min(100) as u64 / 100,
            interval_start_us: now_us,
            used_ns: 0,
        }
    }

    /// Whether the inbox may be served at `now_us` (starts a new interval when one is over).
    pub fn may_serve(&mut self, now_us: u64) -> bool {
        if now_us >= self.interval_start_us + self.budget.interval_us {
            self.interval_start_us = now_us;
            self.used_ns = 0;
        }
        self.budget.query_pct >= 100 || self.used_ns < self.allowance_ns
    }

    /// Charges handling time to the current interval.
    pub fn charge(&mut self, ns: u64) {
        self.used_ns += ns;
    }

    /// Microseconds left in the current interval.
    pub fn interval_left_us(&self, now_us: u64) -> u64 {
        (self.interval_start_us + self.budget.interval_us).saturating_sub(now_us)
    }
}

/// NetMigrate's migration policies (4.4), as source budgets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Shortest migration (Rocksteady-like time): the source serves queries 40% of the time.
    MinimizeTime,
    /// The medium setting: 70%.
    Medium,
    /// Best query throughput: the source serves queries whenever it has any (100%).
    MaximizeThroughput,
}

impl Policy {
    /// The source budget of this policy.
    pub fn source_budget(self) -> CpuBudget {
        let query_pct = match self {
            Policy::MinimizeTime => 40,
            Policy::Medium => 70,
            Policy::MaximizeThroughput => 100,
        };
        CpuBudget {
            query_pct,
            ..CpuBudget::default()
        }
    }
}

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
            return Err(Error::Config(format!(
                "servers = {} must be in 2..=64",
                cfg.servers
            )));
        }
        if cfg.nodes() > u16::MAX as usize {
            return Err(Error::Config("too many clients".into()));
        }
        for b in cfg.budgets.values() {
            if b.query_pct == 0 || b.query_pct > 100 || b.interval_us == 0 {
                return Err(Error::Config(format!(
                    "budget query_pct = {} must be in 1..=100 with interval_us > 0",
                    b.query_pct
                )));
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let status = Arc::new(Mutex::new(BTreeMap::new()));
        let store_failures = Arc::new(Mutex::new(BTreeMap::new()));
        let router_stats = Arc::new(Mutex::new(RouterStats::default()));
        let epoch = Instant::now();
        let mut threads = Vec::new();
        let mut router = Router::new(RouterConfig {
            id: ROUTER,
            ..cfg.router.clone()
        })?;
        {
            let (t, stop, rs) = (transport.clone(), stop.clone(), router_stats.clone());
            threads.push(spawn("kv-router", move || {
                let mut since_publish = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    match t.recv(ROUTER, Duration::from_millis(5)) {
                        Ok(Some(p)) => {
                            for (to, out) in router.on_packet(p) {
                                let _ = t.send(to, out);
                            }
                            since_publish += 1;
                            if since_publish >= 256 {
                                since_publish = 0;
                                publish(&rs, router.stats());
                            }
                        }
                        Ok(None) => publish(&rs, router.stats()),
                        Err(_) => break,
                    }
                }
                publish(&rs, router.stats());
            })?);
        }
        let mut commands = BTreeMap::new();
        for id in 1..=cfg.servers {
            let server = Server::with_store(
                ServerConfig {
                    id,
                    router: ROUTER,
                    ..cfg.server.clone()
                },
                stores(id)?,
            )?;
            let (tx, rx) = crossbeam_channel::unbounded();
            commands.insert(id, tx);
            let budget = cfg.budgets.get(&id).copied().unwrap_or_default();
            let (t, stop, st) = (transport.clone(), stop.clone(), status.clone());
            let failures = store_failures.clone();
            threads.push(spawn(&format!("kv-server-{id}"), move || {
                let mut server = server;
                server_loop(&mut server, budget, t, rx, stop, st, epoch);
                if let Some(e) = server.store_error() {
                    let mut g = failures.lock().unwrap_or_else(|p| p.into_inner());
                    g.insert(id, e);
                }
            })?);
        }
        Ok(Self {
            transport,
            stop,
            threads,
            commands,
            status,
            store_failures,
            router_stats,
            next_client: AtomicUsize::new(0),
            cfg,
            epoch,
        })
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
        tx.send(make(rtx)).map_err(|_| Error::Unreachable(server))?;
        rrx.recv_timeout(Duration::from_millis(self.cfg.op_timeout_ms))
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
        tx.send(Command::Abort(shard))
            .map_err(|_| Error::Unreachable(source))
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
                if matches!(
                    s.phase,
                    crate::MigrationPhase::Done | crate::MigrationPhase::Aborted
                ) {
                    return Ok(s.clone());
                }
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout(timeout.as_millis() as u64, shard));
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
            return Err(Error::Config(format!(
                "clients_max = {} reached",
                self.cfg.clients_max
            )));
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
            Some(name) => Err(Error::Runtime(format!("thread {name} panicked"))),
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
        .map_err(|e| Error::Runtime(format!("spawn {name}: {e}")))
}

fn publish(to: &Mutex<RouterStats>, s: &RouterStats) {
    match to.lock() {
        Ok(mut g) => *g = s.clone(),
        Err(p) => *p.into_inner() = s.clone(),
    }
}

fn server_loop<S: ShardStore>(
    server: &mut Server<S>,
    budget: CpuBudget,
    t: SharedTransport,
    commands: Receiver<Command>,
    stop: Arc<AtomicBool>,
    status: Arc<Mutex<BTreeMap<NodeId, Vec<MigrationStatus>>>>,
    epoch: Instant,
) {
    let id = server.id();
    let send_all = |out: Vec<(NodeId, Packet)>| {
        for (to, p) in out {
            let _ = t.send(to, p);
        }
    };
    // A failed store poisons the node (see `start_with_stores`): nothing computed from it leaves.
    let send_all = |server: &Server<S>, out: Vec<(NodeId, Packet)>| -> bool {
        if server.store_error().is_some() {
            return false;
        }
        send_all(out);
        true
    };
    let mut meter = BudgetMeter::new(budget, now_us(epoch));
    let mut last_publish = 0u64;
    while !stop.load(Ordering::Relaxed) {
        while let Ok(c) = commands.try_recv() {
            let now = now_us(epoch);
            match c {
                Command::Load(shard, pairs, tx) => {
                    let r = pairs
                        .into_iter()
                        .try_for_each(|(k, v)| server.load(shard, k, v));
                    let r = match server.store_error() {
                        Some(e) => Err(Error::Runtime(format!("server {id}'s store failed: {e}"))),
                        None => r,
                    };
                    let _ = tx.send(r);
                }
                Command::Migrate(shard, dst, protocol, tx) => {
                    let r = server.start_migration(now, shard, dst, protocol);
                    let r = r.and_then(|out| {
                        if send_all(server, out) {
                            Ok(())
                        } else {
                            Err(Error::Runtime(format!("server {id}'s store failed")))
                        }
                    });
                    let _ = tx.send(r);
                }
                Command::Abort(shard) => {
                    let out = server.abort_migration(now, shard);
                    send_all(server, out);
                }
                Command::Peek(shard, key, tx) => {
                    let _ = tx.send(server.peek(shard, key));
                }
                Command::Stats(tx) => {
                    let _ = tx.send(server.stats().clone());
                }
            }
        }
        if meter.may_serve(now_us(epoch)) {
            let wait = if server.has_background_work() {
                Duration::ZERO
            } else {
                Duration::from_micros(500)
            };
            let got = if wait.is_zero() {
                t.recv(id, Duration::from_micros(1))
            } else {
                t.recv(id, wait)
            };
            match got {
                Ok(Some(p)) => {
                    let start = Instant::now();
                    let out = server.handle(now_us(epoch), p);
                    send_all(server, out);
                    meter.charge(start.elapsed().as_nanos() as u64);
                }
                Ok(None) => {}
                Err(_) => return, // killed
            }
        } else if !server.has_background_work() {
            // Budget spent and nothing to migrate: idle out the interval.
            let left = meter.interval_left_us(now_us(epoch));
            std::thread::sleep(Duration::from_micros(left.min(budget.interval_us)));
        }
        let out = server.tick(now_us(epoch));
        if !send_all(server, out) {
            // The node is dead from here on; packets to it vanish.
            t.set_down(id);
            break;
        }
        let now = now_us(epoch);
        if now >= last_publish + 1000 {
            last_publish = now;
            let s = server.migration_status();
            match status.lock() {
                Ok(mut g) => {
                    g.insert(id, s);
                }
                Err(p) => {
                    p.into_inner().insert(id, s);
                }
            }
        }
    }
    let s = server.migration_status();
    if let Ok(mut g) = status.lock() {
        g.insert(id, s);
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
                return Err(Error::Timeout(self.timeout.as_millis() as u64, shard));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_meter_enforces_the_share_per_interval() {
        let mut m = BudgetMeter::new(Policy::MinimizeTime.source_budget(), 0);
        assert!(m.may_serve(0));
        m.charge(399_000);
        assert!(m.may_serve(10), "399 us of 400 us used");
        m.charge(2_000);
        assert!(!m.may_serve(500), "40% of 1 ms spent");
        assert_eq!(m.interval_left_us(500), 500);
        assert!(m.may_serve(1000), "a new interval starts");
        let mut full = BudgetMeter::new(Policy::MaximizeThroughput.source_budget(), 0);
        full.charge(10_000_000);
        assert!(full.may_serve(1));
        assert_eq!(Policy::Medium.source_budget().query_pct, 70);
    }
}
