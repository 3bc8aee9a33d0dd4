//! What a Redis user would do instead of the agents: Redis Cluster's own live resharding.
//!
//! [`ClusterNodes`] starts stock `redis-server`s in cluster mode on 127.0.0.1 (private ports, a
//! private temp dir removed on drop, each process under `timeout -s KILL` so it cannot outlive
//! its bound even if this process dies), gives every slot to node 0 and joins the others with
//! `CLUSTER MEET`. [`ClusterClient`] is a cluster-aware client over [`crate::resp::Client`]: it
//! sends each key to its slot's owner, follows `MOVED` (updating its slot map) and `ASK` (one
//! `ASKING` before the command, map unchanged), and retries `TRYAGAIN` and `CLUSTERDOWN` for at
//! most its I/O timeout.
//! [`measure_redis_cluster`] runs [`crate::measure::drive`], the agents' driver, with the same
//! load and the same keys, while `redis-cli --cluster reshard` moves every slot (so every key)
//! from node 0 to node 1: per slot `CLUSTER SETSLOT .. IMPORTING` / `MIGRATING`,
//! `CLUSTER GETKEYSINSLOT`, `MIGRATE .. KEYS`, `CLUSTER SETSLOT .. NODE`.
//!
//! Keys are the decimal digits of the driver's key (`key_slot` hashes them as Redis does, CRC16
//! XMODEM modulo 16384, hash tags honoured); values are the driver's bytes, unversioned: Redis
//! Cluster needs no versions, a key lives on exactly one node at a time.

use std::collections::HashMap;
use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::measure::{
    drive, MeasureConfig, MeasureReport, OpChooser, Outcome, Subject, SubjectClient,
    SubjectCounters,
};
use crate::resp::{Client, Command, Config, Reply, RespError};
use crate::status::MigrationStatus;
use crate::wire::Key;

/// Hash slots of a Redis Cluster.
pub const SLOTS: usize = 16384;
/// Redirects followed for one command before it fails (a slot moves at most a few times).
pub const REDIRECTS_MAX: u32 = 16;
/// Pause between retries of a command answered `TRYAGAIN` or `CLUSTERDOWN` (retried until the
/// client's `io_timeout_ms` has passed since the command started, as cluster clients do).
pub const RETRY_PAUSE_MS: u64 = 1;
/// Bound on the nodes agreeing on the cluster's configuration after start.
pub const CONVERGE_MS_MAX: u64 = 30_000;
/// Keys per `MIGRATE` of `redis-cli --cluster reshard` (`--cluster-pipeline`).
pub const RESHARD_PIPELINE_KEYS: u32 = 100;

/// CRC16-XMODEM (polynomial 0x1021, initial 0), the hash of Redis Cluster's key slots.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= (b as u16) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The slot of `key`: CRC16 of the key, or of its hash tag (the bytes between the first `{`
/// and the next `}`, if not empty), modulo 16384.
pub fn key_slot(key: &[u8]) -> usize {
    let hashed = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    crc16(hashed) as usize % SLOTS
}

/// The Redis key of a driver key.
pub fn redis_key(key: Key) -> Vec<u8> {
    key.to_string().into_bytes()
}

fn cluster_error(what: String) -> Error {
    Error::RedisCluster { what }
}

/// The next port to probe: a process-wide cursor from a per-process offset in 20000..40000.
fn next_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static CURSOR: AtomicU32 = AtomicU32::new(u32::MAX);
    let _ = CURSOR.compare_exchange(
        u32::MAX,
        std::process::id() % 20_000,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    20_000 + (CURSOR.fetch_add(1, Ordering::Relaxed) % 20_000) as u16
}

/// Whether the redis-server behind `c` runs in `dir` (`CONFIG GET dir`).
fn serves_from(c: &mut Client, dir: &Path) -> bool {
    let Ok(Reply::Array(Some(kv))) = c.call(&Command::new("CONFIG").arg("GET").arg("dir")) else {
        return false;
    };
    let want = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    matches!(kv.get(1), Some(Reply::Bulk(Some(d)))
        if Path::new(&*String::from_utf8_lossy(d)) == want)
}

/// Whether `port` and its cluster bus port (`port + 10000`) are both free on 127.0.0.1 now.
fn ports_free(port: u16) -> bool {
    port.checked_add(10_000).is_some_and(|bus| {
        TcpListener::bind(("127.0.0.1", port)).is_ok()
            && TcpListener::bind(("127.0.0.1", bus)).is_ok()
    })
}

fn admin_config() -> Config {
    Config {
        connect_timeout_ms: 1_000,
        io_timeout_ms: 10_000,
        ..Config::default()
    }
}

/// One cluster-mode `redis-server` (under `timeout`).
#[derive(Debug)]
struct Node {
    child: Option<Child>,
    addr: String,
    id: String,
}

/// Stock `redis-server`s in cluster mode on loopback; killed, and their directory removed, on
/// drop.
#[derive(Debug)]
pub struct ClusterNodes {
    nodes: Vec<Node>,
    dir: PathBuf,
    cli: PathBuf,
    lifetime_s: u64,
}

impl ClusterNodes {
    /// Starts `count` nodes of `redis_bin`, each killed after `lifetime_s` at the latest;
    /// node 0 owns every slot. `redis-cli` is looked up beside `redis_bin` (or on PATH).
    pub fn start(redis_bin: &Path, count: usize, lifetime_s: u64) -> Result<Self> {
        if count == 0 || count > 16 {
            return Err(Error::InvalidSetting {
                key: "redis cluster nodes",
                value: count.to_string(),
                expected: "1..=16".into(),
            });
        }
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!(
            "locus-redis-cluster-{}-{stamp}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).map_err(|source| Error::Io {
            what: format!("creating {}", dir.display()),
            source,
        })?;
        let cli = match redis_bin.parent() {
            Some(p) if p.join("redis-cli").is_file() => p.join("redis-cli"),
            _ => PathBuf::from("redis-cli"),
        };
        let mut me = ClusterNodes {
            nodes: Vec::new(),
            dir,
            cli,
            lifetime_s: lifetime_s.max(1),
        };
        // Ports from a per-process offset, skipping taken ones (and their bus ports). The
        // cursor is shared by the whole process, so clusters started at once by parallel
        // tests never probe the same port.
        for i in 0..count {
            let mut last = String::new();
            let mut started = None;
            for _ in 0..64 {
                let port = next_port();
                if !ports_free(port) {
                    continue;
                }
                match me.spawn(redis_bin, port) {
                    Ok(node) => {
                        started = Some(node);
                        break;
                    }
                    Err(e) => last = e,
                }
            }
            let Some(node) = started else {
                return Err(Error::RedisStartFailed {
                    bin: redis_bin.to_path_buf(),
                    attempts: 64,
                    last: format!("cluster node {i}: {last}"),
                });
            };
            me.nodes.push(node);
        }
        me.form()?;
        Ok(me)
    }

    fn spawn(&self, bin: &Path, port: u16) -> std::result::Result<Node, String> {
        let conf = self.dir.join(format!("nodes-{port}.conf"));
        let log = File::create(self.dir.join(format!("redis-{port}.log")))
            .map_err(|e| format!("log file: {e}"))?;
        let child = Process::new("timeout")
            .args(["-s", "KILL", &self.lifetime_s.to_string()])
            .arg(bin)
            .args(["--port", &port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--cluster-enabled", "yes"])
            .arg("--cluster-config-file")
            .arg(&conf)
            .args(["--cluster-node-timeout", "15000"])
            .arg("--dir")
            .arg(&self.dir)
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot run timeout {}: {e}", bin.display()))?;
        let mut node = Node {
            child: Some(child),
            addr: format!("127.0.0.1:{port}"),
            id: String::new(),
        };
        let deadline = Instant::now() + Duration::from_millis(super::process::STARTUP_MS_MAX);
        while Instant::now() < deadline {
            if let Some(Ok(Some(status))) = node.child.as_mut().map(|c| c.try_wait()) {
                return Err(format!("redis-server on {} exited: {status}", node.addr));
            }
            if let Ok(mut c) = Client::connect(&node.addr, admin_config()) {
                if c.ping().is_ok() {
                    let id = c
                        .call(&Command::new("CLUSTER").arg("MYID"))
                        .map_err(|e| e.to_string())?;
                    match id {
                        Reply::Bulk(Some(id)) => {
                            node.id = String::from_utf8_lossy(&id).into_owned();
                            // The server that answered must be ours (another process may
                            // have taken the port between the probe and the bind): its
                            // working directory is this cluster's own.
                            if !serves_from(&mut c, &self.dir) {
                                stop(&mut node);
                                return Err(format!(
                                    "{} is another redis-server's (not in {})",
                                    node.addr,
                                    self.dir.display()
                                ));
                            }
                            return Ok(node);
                        }
                        other => return Err(format!("CLUSTER MYID answered {other}")),
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        stop(&mut node);
        Err(format!("redis-server on {} did not answer PING", node.addr))
    }

    /// Distinct config epochs, every slot to node 0, MEET, then waits until every node sees
    /// every other and the cluster is ok.
    fn form(&mut self) -> Result<()> {
        for (i, n) in self.nodes.iter().enumerate() {
            let mut c = Client::connect(&n.addr, admin_config())?;
            c.call(
                &Command::new("CLUSTER")
                    .arg("SET-CONFIG-EPOCH")
                    .arg_int(i as i64 + 1),
            )?;
            if i == 0 {
                c.call(
                    &Command::new("CLUSTER")
                        .arg("ADDSLOTSRANGE")
                        .arg("0")
                        .arg((SLOTS - 1).to_string()),
                )?;
            } else {
                let (host, port) = self.nodes[0]
                    .addr
                    .split_once(':')
                    .expect("addresses are host:port");
                c.call(&Command::new("CLUSTER").arg("MEET").arg(host).arg(port))?;
            }
        }
        let deadline = Instant::now() + Duration::from_millis(CONVERGE_MS_MAX);
        loop {
            let mut ok = true;
            for n in &self.nodes {
                let mut c = Client::connect(&n.addr, admin_config())?;
                let info = c.call(&Command::new("CLUSTER").arg("INFO"))?;
                let nodes = c.call(&Command::new("CLUSTER").arg("NODES"))?;
                let text = |r: &Reply| match r {
                    Reply::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
                    _ => String::new(),
                };
                let (info, nodes) = (text(&info), text(&nodes));
                let connected = nodes
                    .lines()
                    .filter(|l| l.contains(" connected") && !l.contains("handshake"))
                    .count();
                let slots_known = nodes
                    .lines()
                    .any(|l| l.starts_with(&self.nodes[0].id) && l.contains("0-16383"));
                ok &= info.contains("cluster_state:ok")
                    && connected == self.nodes.len()
                    && slots_known;
            }
            if ok {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(cluster_error(format!(
                    "the {} nodes did not agree on the cluster within {CONVERGE_MS_MAX} ms (logs in {})",
                    self.nodes.len(),
                    self.dir.display()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Every node's `host:port`.
    pub fn addrs(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.addr.clone()).collect()
    }

    /// Node `i`'s cluster id.
    pub fn id(&self, i: usize) -> &str {
        &self.nodes[i].id
    }

    /// A plain (not cluster-aware) connection to node `i`, for administration.
    pub fn admin(&self, i: usize) -> Result<Client> {
        Ok(Client::connect(&self.nodes[i].addr, admin_config())?)
    }

    /// Starts `redis-cli --cluster reshard` moving `slots` slots from node `from` to node `to`
    /// (bounded by `timeout_s`), its output in the cluster's directory.
    pub fn start_reshard(
        &self,
        from: usize,
        to: usize,
        slots: usize,
        timeout_s: u64,
    ) -> Result<Child> {
        let args = [
            "--cluster-from".to_string(),
            self.id(from).to_string(),
            "--cluster-to".into(),
            self.id(to).into(),
            "--cluster-slots".into(),
            slots.to_string(),
        ];
        self.start_tool("reshard", from, &args, timeout_s)
    }

    /// Starts `redis-cli --cluster rebalance` through node 0 with `extra` options (e.g.
    /// `--cluster-use-empty-masters`, or `--cluster-weight ID=0` to drain a node), bounded
    /// by `timeout_s`, its output in the cluster's directory (`rebalance.log`).
    pub fn start_rebalance(&self, extra: &[String], timeout_s: u64) -> Result<Child> {
        self.start_tool("rebalance", 0, extra, timeout_s)
    }

    /// Starts `redis-cli --cluster <command>` through node `via` with `args`, pipelining
    /// [`RESHARD_PIPELINE_KEYS`] keys per MIGRATE, killed after `timeout_s`, its output in
    /// `<command>.log` of the cluster's directory.
    fn start_tool(
        &self,
        command: &str,
        via: usize,
        args: &[String],
        timeout_s: u64,
    ) -> Result<Child> {
        let out = self.dir.join(format!("{command}.log"));
        let io = |source| Error::Io {
            what: format!("creating {}", out.display()),
            source,
        };
        let log = File::create(&out).map_err(io)?;
        let log2 = log.try_clone().map_err(io)?;
        Process::new("timeout")
            .args(["-s", "KILL", &timeout_s.max(1).to_string()])
            .arg(&self.cli)
            .args(["--cluster", command, &self.nodes[via].addr])
            .args(args)
            .args(["--cluster-pipeline", &RESHARD_PIPELINE_KEYS.to_string()])
            .arg("--cluster-yes")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn()
            .map_err(|source| Error::Io {
                what: format!("running {} --cluster {command}", self.cli.display()),
                source,
            })
    }

    /// The last `lines` lines of `redis-cli --cluster <command>`'s output.
    pub fn tool_log_tail(&self, command: &str, lines: usize) -> String {
        let text =
            std::fs::read_to_string(self.dir.join(format!("{command}.log"))).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Each slot's owner (an index into [`ClusterNodes::addrs`]), from node 0's `CLUSTER SLOTS`.
    pub fn owners(&self) -> Result<Vec<Option<usize>>> {
        let mut c = self.admin(0)?;
        let reply = c.call(&Command::new("CLUSTER").arg("SLOTS"))?;
        let mut owners = vec![None; SLOTS];
        for (a, b, addr) in slot_ranges(reply)? {
            owners[a..=b].fill(self.nodes.iter().position(|n| n.addr == addr));
        }
        Ok(owners)
    }

    /// The last `lines` lines of the reshard's output.
    pub fn reshard_log_tail(&self, lines: usize) -> String {
        self.tool_log_tail("reshard", lines)
    }
}

/// The ranges of a `CLUSTER SLOTS` reply: first and last slot (within
/// [`SLOTS`]) and the master's `host:port`.
fn slot_ranges(reply: Reply) -> Result<Vec<(usize, usize, String)>> {
    let bad = |why: &str| cluster_error(format!("CLUSTER SLOTS: {why}"));
    let Reply::Array(Some(ranges)) = reply else {
        return Err(bad("not an array"));
    };
    let mut out = Vec::with_capacity(ranges.len());
    for range in ranges {
        let Reply::Array(Some(parts)) = range else {
            return Err(bad("a range is not an array"));
        };
        let (Some(Reply::Integer(a)), Some(Reply::Integer(b)), Some(Reply::Array(Some(m)))) =
            (parts.first(), parts.get(1), parts.get(2))
        else {
            return Err(bad("a range lacks start, end or master"));
        };
        let (Some(Reply::Bulk(Some(host))), Some(Reply::Integer(port))) = (m.first(), m.get(1))
        else {
            return Err(bad("a master lacks host or port"));
        };
        let (a, b) = (*a as usize, (*b as usize).min(SLOTS - 1));
        if a <= b {
            out.push((a, b, format!("{}:{port}", String::from_utf8_lossy(host))));
        }
    }
    Ok(out)
}

fn stop(node: &mut Node) {
    if let Some(mut child) = node.child.take() {
        // SHUTDOWN NOSAVE lets redis-server exit cleanly, and `timeout` with it; SIGKILL to
        // `timeout` alone would leave the server running until its bound.
        if let Ok(mut c) = Client::connect(&node.addr, admin_config()) {
            let _ = c.call(&Command::new("SHUTDOWN").arg("NOSAVE"));
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for ClusterNodes {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            stop(n);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A cluster-aware client: a slot map, one connection per node, `MOVED` and `ASK` followed.
#[derive(Debug)]
pub struct ClusterClient {
    addrs: Vec<String>,
    slots: Vec<u16>,
    conns: HashMap<u16, Client>,
    config: Config,
    /// `MOVED` answers followed.
    pub moved: u64,
    /// `ASK` answers followed.
    pub asked: u64,
    /// Commands sent again after `TRYAGAIN` or `CLUSTERDOWN`.
    pub retried: u64,
    /// Bytes of commands sent and replies received (payloads and RESP framing, estimated from
    /// the encoded commands and the reply values).
    pub bytes: u64,
}

fn reply_bytes(r: &Reply) -> u64 {
    match r {
        Reply::Simple(s) | Reply::Error(s) => s.len() as u64 + 3,
        Reply::Integer(_) => 8,
        Reply::Bulk(b) => b.as_ref().map_or(5, |b| b.len() as u64 + 8),
        Reply::Array(a) => a
            .as_ref()
            .map_or(5, |a| 4 + a.iter().map(reply_bytes).sum::<u64>()),
    }
}

impl ClusterClient {
    /// Connects through the first of `seeds` that answers `CLUSTER SLOTS` and takes its map.
    pub fn connect(seeds: &[String], config: Config) -> Result<Self> {
        let mut me = ClusterClient {
            addrs: seeds.to_vec(),
            slots: vec![0; SLOTS],
            conns: HashMap::new(),
            config,
            moved: 0,
            asked: 0,
            retried: 0,
            bytes: 0,
        };
        let mut last = None;
        for i in 0..seeds.len() {
            match me.load_slots(i as u16) {
                Ok(()) => return Ok(me),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| cluster_error("no seed address given".into())))
    }

    fn load_slots(&mut self, seed: u16) -> Result<()> {
        let reply = self
            .conn(seed)?
            .call(&Command::new("CLUSTER").arg("SLOTS"))?;
        for (a, b, addr) in slot_ranges(reply)? {
            let node = self.node_of(&addr);
            self.slots[a..=b].fill(node);
        }
        Ok(())
    }

    fn node_of(&mut self, addr: &str) -> u16 {
        match self.addrs.iter().position(|a| a == addr) {
            Some(i) => i as u16,
            None => {
                self.addrs.push(addr.to_string());
                (self.addrs.len() - 1) as u16
            }
        }
    }

    fn conn(&mut self, node: u16) -> Result<&mut Client> {
        if !self.conns.contains_key(&node) {
            let c = Client::connect(&self.addrs[node as usize], self.config)?;
            self.conns.insert(node, c);
        }
        Ok(self.conns.get_mut(&node).expect("inserted above"))
    }

    /// Sends `cmd` about `key` to its slot's owner, following redirects; an error reply other
    /// than a redirect is returned as [`RespError::Server`].
    pub fn call(&mut self, key: &[u8], cmd: &Command) -> Result<Reply> {
        let slot = key_slot(key);
        let mut ask: Option<u16> = None;
        let mut redirects = 0;
        let retry_until = Instant::now() + Duration::from_millis(self.config.io_timeout_ms);
        loop {
            let node = ask.unwrap_or(self.slots[slot]);
            let cmds = match ask {
                Some(_) => vec![Command::new("ASKING"), cmd.clone()],
                None => vec![cmd.clone()],
            };
            let mut encoded = Vec::new();
            for c in &cmds {
                c.encode(&mut encoded);
            }
            let replies = match self.conn(node)?.pipeline(&cmds) {
                Ok(r) => r,
                Err(e) => {
                    // A broken connection is reopened by the next command.
                    self.conns.remove(&node);
                    return Err(e.into());
                }
            };
            self.bytes += encoded.len() as u64 + replies.iter().map(reply_bytes).sum::<u64>();
            let reply = replies.into_iter().last().expect("one reply per command");
            let Reply::Error(msg) = &reply else {
                return Ok(reply);
            };
            let mut words = msg.split_whitespace();
            match words.next() {
                Some(kind @ ("MOVED" | "ASK")) => {
                    let (Some(_), Some(addr)) = (words.next(), words.next()) else {
                        return Err(cluster_error(format!("malformed redirect {msg:?}")));
                    };
                    redirects += 1;
                    if redirects > REDIRECTS_MAX {
                        return Err(cluster_error(format!(
                            "key slot {slot}: more than {REDIRECTS_MAX} redirects, last {msg:?}"
                        )));
                    }
                    let to = self.node_of(addr);
                    if kind == "MOVED" {
                        self.moved += 1;
                        self.slots[slot] = to;
                        ask = None;
                    } else {
                        self.asked += 1;
                        ask = Some(to);
                    }
                }
                // A multi-key command during a slot move, or a node whose view of the
                // cluster is briefly "fail" (a slow gossip round on a loaded machine).
                Some("TRYAGAIN" | "CLUSTERDOWN") if Instant::now() < retry_until => {
                    self.retried += 1;
                    ask = None;
                    std::thread::sleep(Duration::from_millis(RETRY_PAUSE_MS));
                }
                _ => return Err(RespError::Server(msg.clone()).into()),
            }
        }
    }

    /// GET.
    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        match self.call(key, &Command::new("GET").arg(key))? {
            Reply::Bulk(v) => Ok(v),
            other => Err(cluster_error(format!("GET answered {other}"))),
        }
    }

    /// SET.
    pub fn set(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        match self.call(key, &Command::new("SET").arg(key).arg(value))? {
            Reply::Simple(s) if s == "OK" => Ok(()),
            other => Err(cluster_error(format!("SET answered {other}"))),
        }
    }
}

impl SubjectClient for ClusterClient {
    fn get(&mut self, key: Key) -> Result<Option<Vec<u8>>> {
        ClusterClient::get(self, &redis_key(key))
    }
    fn set(&mut self, key: Key, value: Vec<u8>) -> Result<()> {
        ClusterClient::set(self, &redis_key(key), &value)
    }
    fn bytes(&self) -> (u64, u64) {
        (self.bytes, 0)
    }
}

/// Redis Cluster as a measured [`Subject`]: every slot moves from node 0 to node 1.
struct Reshard {
    nodes: ClusterNodes,
    config: Config,
    loader: ClusterClient,
    reshard: Option<Child>,
    timeout_s: u64,
}

impl Subject for Reshard {
    type Client = ClusterClient;

    fn load(&mut self, pairs: Vec<(Key, Vec<u8>)>) -> Result<()> {
        // Node 0 owns every slot before the migration: one pipeline.
        let cmds: Vec<Command> = pairs
            .iter()
            .map(|(k, v)| Command::new("SET").arg(redis_key(*k)).arg(v))
            .collect();
        let replies = self.nodes.admin(0)?.pipeline(&cmds)?;
        match replies
            .iter()
            .find(|r| !matches!(r, Reply::Simple(s) if s == "OK"))
        {
            Some(bad) => Err(cluster_error(format!("loading: SET answered {bad}"))),
            None => Ok(()),
        }
    }

    fn client(&mut self) -> Result<ClusterClient> {
        ClusterClient::connect(&self.nodes.addrs(), self.config)
    }

    fn start_migration(&mut self) -> Result<()> {
        self.reshard = Some(self.nodes.start_reshard(0, 1, SLOTS, self.timeout_s)?);
        Ok(())
    }

    fn wait_migration(&mut self, timeout: Duration) -> (Outcome, Option<MigrationStatus>) {
        let Some(child) = self.reshard.as_mut() else {
            return (Outcome::Aborted, None);
        };
        let deadline = Instant::now() + timeout;
        loop {
            match child.try_wait() {
                Ok(Some(status)) => {
                    // Done only if it said so and node 1 now serves every slot.
                    let owned = self.loader.load_slots(1).is_ok()
                        && self.loader.slots.iter().all(|&n| n == 1);
                    if status.success() && owned {
                        return (Outcome::Done, None);
                    }
                    eprintln!(
                        "redis-cli --cluster reshard: {status}, node 1 owns every slot: {owned}; \
                         its output ends:\n{}",
                        self.nodes.reshard_log_tail(20)
                    );
                    return (Outcome::Aborted, None);
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return (Outcome::Timeout, None);
                }
            }
        }
    }

    fn finish(mut self) -> Result<SubjectCounters> {
        if let Some(mut c) = self.reshard.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        Ok(SubjectCounters::default())
    }
}

/// [`crate::measure::measure`]'s load and report over a two-node Redis Cluster started from
/// `redis_bin`, with every key moved by Redis Cluster's own resharding (`redis-cli --cluster
/// reshard`) instead of a protocol of this crate. `cfg.protocol`, budgets, router and server
/// settings do not apply; the server byte counters and router counters are zero (not measured).
pub fn measure_redis_cluster(
    cfg: &MeasureConfig,
    choose: OpChooser,
    redis_bin: &Path,
) -> Result<MeasureReport> {
    crate::measure::validate(cfg)?;
    // Load, warm-up, migration and cool-down, with room: the processes' hard bound.
    let timeout_s = cfg.migration_timeout_ms.div_ceil(1000);
    let lifetime_s = 2 * timeout_s + (cfg.warmup_ms + cfg.cooldown_ms) / 1000 + 300;
    let nodes = ClusterNodes::start(redis_bin, 2, lifetime_s)?;
    let config = Config {
        connect_timeout_ms: 2_000,
        io_timeout_ms: cfg.op_timeout_ms.max(1),
        ..Config::default()
    };
    let loader = ClusterClient::connect(&nodes.addrs(), config)?;
    let subject = Reshard {
        nodes,
        config,
        loader,
        reshard: None,
        timeout_s,
    };
    drive(cfg, choose, subject, "redis-cluster")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_hash_as_redis_does() {
        // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(crc16(b"123456789"), 0x31c3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"123456789"), 12739);
        assert_eq!(
            key_slot(b"{user1000}.following"),
            key_slot(b"{user1000}.followers")
        );
        assert_eq!(key_slot(b"{}x"), crc16(b"{}x") as usize % SLOTS);
        assert_eq!(key_slot(b"a{b"), crc16(b"a{b") as usize % SLOTS);
    }
}
