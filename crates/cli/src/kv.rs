//! `locus kv`: the NetMigrate router and KV servers as separate processes on loopback UDP, and
//! the commands that drive them (`get`, `set`, `migrate`, `migration status`).
//!
//! Addressing: node `n` (router 0, servers 1..=64, clients from 100) receives on
//! `127.0.0.1:(P + n)`, where `P` is the router's `--listen` port. Every process computes a
//! peer's address from its id, so no process needs a peer table, and a server replies to a
//! client (whose id is in each query) directly, as in the paper.
//!
//! Data packets are the `locus-kvmigrate` wire format. Management requests are datagrams that
//! start with [`ADMIN_MAGIC`] followed by JSON; they cannot be mistaken for wire packets (whose
//! first two bytes are the magic 0x4D4E). The router relays `migrate` to the source server and
//! `migration_status` to every server that said hello; servers answer the requester directly.
//! Anything else that does not decode is dropped and counted, never fatal.
//!
//! The crate's `runtime::Cluster` starts the router and all servers in one process, and its
//! `Udp` transport binds every node's socket in that process, so these per-process drivers
//! run the crate's I/O-free `Router` and `Server` state machines themselves (the same loop as
//! `runtime`: inbox first within the CPU budget, migration work in between).

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use locus_kvmigrate::client::ReplyMerger;
use locus_kvmigrate::router::RouterConfig;
use locus_kvmigrate::runtime::{BudgetMeter, CpuBudget};
use locus_kvmigrate::wire::{Body, NodeId, Packet, Status, DATAGRAM_BYTES_MAX, VALUE_BYTES_MAX};
use locus_kvmigrate::{Geometry, Protocol, Router, Server, ServerConfig};
use serde_json::{json, Value};

/// Prefix of management datagrams.
pub const ADMIN_MAGIC: &[u8] = b"LKADM1 ";
/// Server ids are 1..=SERVERS_MAX (a shard's id is its first server's id).
const SERVERS_MAX: u16 = 64;
/// Client node ids are tried from here up.
const CLIENT_ID_MIN: u16 = 100;
/// Client ids tried before giving up (concurrent clients each need a free port).
const CLIENT_IDS_TRIED: u16 = 1000;
/// Records a server may preload.
const RECORDS_MAX: u64 = 1 << 26;
/// Router loop wake-up when idle (to notice `--lifetime-ms`).
const IDLE_WAIT: Duration = Duration::from_millis(50);

#[derive(Args, Debug)]
pub struct KvArgs {
    #[command(subcommand)]
    pub which: Kv,
}

#[derive(Subcommand, Debug)]
pub enum Kv {
    /// Run the router (the switch's role): forwards queries by its BF/CBF migration index.
    Router(RouterArgs),
    /// Run a KV server with its migration agent; it owns shard ID.
    Server(ServerArgs),
    /// Read a key through the router.
    Get(GetArgs),
    /// Write a key through the router.
    Set(SetArgs),
    /// Start migrating a shard between two running servers (the request goes through the router).
    Migrate(MigrateArgs),
    /// Migration status.
    Migration(MigrationArgs),
}

#[derive(Args, Debug)]
pub struct RouterArgs {
    /// Loopback address to listen on; server N listens on port + N, clients above port + 100.
    #[arg(long, value_name = "127.0.0.1:PORT")]
    pub listen: String,
    /// Bloom filter bytes per migration instance (paper default 512 KB).
    #[arg(long, default_value_t = 512 << 10)]
    pub bf_bytes: usize,
    /// Counting Bloom filter bytes per migration instance (paper default 1024 KB).
    #[arg(long, default_value_t = 1024 << 10)]
    pub cbf_bytes: usize,
    /// Concurrent migrations (1..=64).
    #[arg(long, default_value_t = 8)]
    pub instances_max: usize,
    /// Exit after this long (a bound for scripts and tests); default: run until killed.
    #[arg(long, hide = true)]
    pub lifetime_ms: Option<u64>,
}

#[derive(Args, Debug)]
pub struct ServerArgs {
    /// The router's address (as given to `kv router --listen`).
    #[arg(long, value_name = "127.0.0.1:PORT")]
    pub router: String,
    /// Server id, 1..=64; the server listens on router port + ID and owns shard ID.
    #[arg(long)]
    pub id: u16,
    /// Keys 0..RECORDS preloaded into the shard, each with a VALUE_BYTES value.
    #[arg(long, default_value_t = 0)]
    pub records: u64,
    /// Preloaded value size.
    #[arg(long, default_value_t = 64)]
    pub value_bytes: usize,
    /// log2 of the shard's hash buckets.
    #[arg(long, default_value_t = 16)]
    pub buckets_log2: u8,
    /// log2 of the buckets per migration group.
    #[arg(long, default_value_t = 4)]
    pub group_buckets_log2: u8,
    /// Share of each millisecond this server may spend serving queries (NetMigrate 4.4), 1..=100.
    #[arg(long, default_value_t = 100)]
    pub budget_pct: u8,
    /// A source aborts its migration after its destination or the router is silent this long.
    #[arg(long, default_value_t = 2000)]
    pub ack_timeout_ms: u64,
    /// Mirror destination writes to the source before acking (safe abort; the paper does not).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub mirror_writes: bool,
    /// Exit after this long; default: run until killed.
    #[arg(long, hide = true)]
    pub lifetime_ms: Option<u64>,
}

#[derive(Args, Debug)]
pub struct GetArgs {
    /// The router's address.
    #[arg(long, value_name = "127.0.0.1:PORT")]
    pub router: String,
    /// The shard (its home server's id).
    #[arg(long)]
    pub shard: u16,
    /// The key.
    pub key: u64,
    /// Give up after this long.
    #[arg(long, default_value_t = 2000)]
    pub timeout_ms: u64,
}

#[derive(Args, Debug)]
pub struct SetArgs {
    /// The router's address.
    #[arg(long, value_name = "127.0.0.1:PORT")]
    pub router: String,
    /// The shard (its home server's id).
    #[arg(long)]
    pub shard: u16,
    /// The key.
    pub key: u64,
    /// The value (UTF-8, at most 1024 bytes).
    pub value: String,
    /// Give up after this long.
    #[arg(long, default_value_t = 2000)]
    pub timeout_ms: u64,
}

#[derive(Args, Debug)]
pub struct MigrateArgs {
    /// The router's address.
    #[arg(long, value_name = "127.0.0.1:PORT")]
    pub router: String,
    /// The shard to move.
    #[arg(long)]
    pub shard: u16,
    /// The server that holds it now.
    #[arg(long)]
    pub from: u16,
    /// The server to move it to.
    #[arg(long)]
    pub to: u16,
    /// netmigrate, stop-and-copy, source, rocksteady or fulva.
    #[arg(long, default_value = "netmigrate")]
    pub protocol: String,
    /// Wait until the migration is done or aborted, printing progress on stderr.
    #[arg(long)]
    pub wait: bool,
    /// Give up (on the request, or on --wait) after this long.
    #[arg(long, default_value_t = 60_000)]
    pub timeout_ms: u64,
}

#[derive(Args, Debug)]
pub struct MigrationArgs {
    #[command(subcommand)]
    pub which: MigrationCmd,
}

#[derive(Subcommand, Debug)]
pub enum MigrationCmd {
    /// Every migration's progress: groups done/total, rate, errors, phase.
    Status(StatusArgs),
}

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The router's address.
    #[arg(long, value_name = "127.0.0.1:PORT")]
    pub router: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// How long to wait for the servers' answers.
    #[arg(long, default_value_t = 1000)]
    pub timeout_ms: u64,
}

pub fn run(a: KvArgs) -> Result<(), String> {
    match a.which {
        Kv::Router(r) => router(r),
        Kv::Server(s) => server(s),
        Kv::Get(g) => get(g),
        Kv::Set(s) => set(s),
        Kv::Migrate(m) => migrate(m),
        Kv::Migration(MigrationArgs {
            which: MigrationCmd::Status(s),
        }) => status(s),
    }
}

/// The loopback address book: node `n` at `base + n`.
#[derive(Clone, Copy, Debug)]
struct Book {
    base: u16,
}

impl Book {
    fn parse(flag: &str, s: &str) -> Result<Self, String> {
        let addr: SocketAddr = s
            .parse()
            .map_err(|e| format!("{flag} {s}: not an address like 127.0.0.1:7000 ({e})"))?;
        if addr.ip() != IpAddr::V4(Ipv4Addr::LOCALHOST) {
            return Err(format!(
                "{flag} {s}: only 127.0.0.1 is supported (the protocol has no authentication)"
            ));
        }
        let top = CLIENT_ID_MIN + CLIENT_IDS_TRIED;
        if addr.port() == 0 || addr.port() as u32 + top as u32 > u16::MAX as u32 {
            return Err(format!(
                "{flag} {s}: the port must be in 1..={} (nodes use port + id, up to + {top})",
                u16::MAX - top
            ));
        }
        Ok(Self { base: addr.port() })
    }

    fn addr(&self, node: NodeId) -> Option<SocketAddr> {
        let port = self.base.checked_add(node)?;
        Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port))
    }

    fn router(&self) -> SocketAddr {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), self.base)
    }
}

fn bind(addr: SocketAddr, what: &str) -> Result<UdpSocket, String> {
    UdpSocket::bind(addr).map_err(|e| format!("{what}: cannot bind {addr}: {e}"))
}

/// Sends encoded packets to their nodes; returns how many could not be sent.
fn send_packets(
    sock: &UdpSocket,
    book: &Book,
    out: Vec<(NodeId, Packet)>,
    buf: &mut Vec<u8>,
) -> u64 {
    let mut failed = 0;
    for (to, p) in out {
        let sent = match (book.addr(to), p.encode(buf)) {
            (Some(addr), Ok(())) => sock.send_to(buf, addr).is_ok(),
            _ => false,
        };
        if !sent {
            failed += 1;
        }
    }
    failed
}

fn admin_bytes(v: &Value) -> Vec<u8> {
    let mut b = ADMIN_MAGIC.to_vec();
    b.extend_from_slice(v.to_string().as_bytes());
    b
}

fn parse_admin(d: &[u8]) -> Option<Result<Value, ()>> {
    let rest = d.strip_prefix(ADMIN_MAGIC)?;
    Some(serde_json::from_slice(rest).map_err(|_| ()))
}

fn recv_timeout(
    sock: &UdpSocket,
    buf: &mut [u8],
    wait: Duration,
) -> Result<Option<(usize, SocketAddr)>, String> {
    // A zero read timeout means "block forever" to the OS.
    sock.set_read_timeout(Some(wait.max(Duration::from_micros(50))))
        .map_err(|e| format!("set_read_timeout: {e}"))?;
    match sock.recv_from(buf) {
        Ok(x) => Ok(Some(x)),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            Ok(None)
        }
        // Loopback reports an earlier datagram to a closed port as ECONNREFUSED on Linux.
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => Ok(None),
        Err(e) => Err(format!("recv: {e}")),
    }
}

fn expired(start: Instant, lifetime_ms: Option<u64>) -> bool {
    lifetime_ms.is_some_and(|ms| start.elapsed() >= Duration::from_millis(ms))
}

fn router(a: RouterArgs) -> Result<(), String> {
    let book = Book::parse("--listen", &a.listen)?;
    let mut router = Router::new(RouterConfig {
        id: 0,
        instances_max: a.instances_max,
        bf_bytes: a.bf_bytes,
        cbf_bytes: a.cbf_bytes,
        ..RouterConfig::default()
    })
    .map_err(|e| e.to_string())?;
    let sock = bind(book.router(), "kv router")?;
    eprintln!(
        "kv router listening on {} (servers at port + id, bf {} B, cbf {} B)",
        book.router(),
        a.bf_bytes,
        a.cbf_bytes
    );
    let start = Instant::now();
    let mut servers: BTreeSet<u16> = BTreeSet::new();
    let (mut admin_malformed, mut unsendable, mut relayed) = (0u64, 0u64, 0u64);
    let mut buf = vec![0u8; DATAGRAM_BYTES_MAX];
    let mut out = Vec::new();
    while !expired(start, a.lifetime_ms) {
        let Some((n, from)) = recv_timeout(&sock, &mut buf, IDLE_WAIT)? else {
            continue;
        };
        let d = &buf[..n];
        match parse_admin(d) {
            None => {
                // A wire packet; garbage is counted in the router's `malformed`.
                let pkts = router.on_datagram(d);
                unsendable += send_packets(&sock, &book, pkts, &mut out);
            }
            Some(Err(())) => admin_malformed += 1,
            Some(Ok(req)) => {
                let op = req["op"].as_str().unwrap_or("");
                match op {
                    "hello" => match req["id"].as_u64() {
                        Some(id) if (1..=SERVERS_MAX as u64).contains(&id) => {
                            servers.insert(id as u16);
                        }
                        _ => admin_malformed += 1,
                    },
                    "migrate" => match req["from"].as_u64().and_then(|f| u16::try_from(f).ok()) {
                        Some(src) if servers.contains(&src) => {
                            let mut fwd = req.clone();
                            fwd["reply_to"] = json!(from.to_string());
                            relayed += 1;
                            if let Some(addr) = book.addr(src) {
                                let _ = sock.send_to(&admin_bytes(&fwd), addr);
                            }
                        }
                        _ => {
                            let msg = json!({"ok": false, "error": format!(
                                "server {} has not registered with this router (known: {:?})",
                                req["from"], servers)});
                            let _ = sock.send_to(&admin_bytes(&msg), from);
                        }
                    },
                    "migration_status" => {
                        for &id in &servers {
                            let fwd = json!({"op": "status", "reply_to": from.to_string()});
                            if let Some(addr) = book.addr(id) {
                                relayed += 1;
                                let _ = sock.send_to(&admin_bytes(&fwd), addr);
                            }
                        }
                        let instances: Vec<Value> = router
                            .instances()
                            .into_iter()
                            .map(|(shard, src, dst)| json!({"shard": shard, "source": src, "destination": dst}))
                            .collect();
                        let msg = json!({
                            "router": {
                                "listen": book.router().to_string(),
                                "uptime_ms": start.elapsed().as_millis() as u64,
                                "stats": router.stats(),
                                "admin_malformed": admin_malformed,
                                "unsendable": unsendable,
                                "relayed": relayed,
                                "instances": instances,
                            },
                            "servers": servers,
                        });
                        let _ = sock.send_to(&admin_bytes(&msg), from);
                    }
                    _ => admin_malformed += 1,
                }
            }
        }
    }
    eprintln!("kv router: lifetime over, exiting");
    Ok(())
}

/// A preloaded value: the key in decimal, then zeros, `len` bytes.
fn preload_value(key: u64, len: usize) -> Vec<u8> {
    let mut v = format!("v{key}").into_bytes();
    v.resize(len, 0);
    v
}

fn server(a: ServerArgs) -> Result<(), String> {
    let book = Book::parse("--router", &a.router)?;
    if a.id == 0 || a.id > SERVERS_MAX {
        return Err(format!("--id {}: must be in 1..={SERVERS_MAX}", a.id));
    }
    if a.records > RECORDS_MAX {
        return Err(format!("--records {}: at most {RECORDS_MAX}", a.records));
    }
    if a.value_bytes == 0 || a.value_bytes > VALUE_BYTES_MAX {
        return Err(format!(
            "--value-bytes {}: must be in 1..={VALUE_BYTES_MAX}",
            a.value_bytes
        ));
    }
    if a.budget_pct == 0 || a.budget_pct > 100 {
        return Err(format!("--budget-pct {}: must be in 1..=100", a.budget_pct));
    }
    let geometry = Geometry::new(a.buckets_log2, a.group_buckets_log2)
        .map_err(|e| format!("--buckets-log2/--group-buckets-log2: {e}"))?;
    if a.ack_timeout_ms == 0 || a.ack_timeout_ms > 3_600_000 {
        return Err(format!(
            "--ack-timeout-ms {}: must be in 1..=3600000",
            a.ack_timeout_ms
        ));
    }
    let mut cfg = ServerConfig::new(a.id, 0, geometry);
    cfg.mirror_writes = a.mirror_writes;
    cfg.ack_timeout_us = a.ack_timeout_ms * 1000;
    let mut srv = Server::new(cfg).map_err(|e| e.to_string())?;
    for k in 0..a.records {
        srv.load(a.id, k, preload_value(k, a.value_bytes))
            .map_err(|e| e.to_string())?;
    }
    let me = book
        .addr(a.id)
        .ok_or_else(|| format!("--id {}: port out of range", a.id))?;
    let sock = bind(me, "kv server")?;
    let hello = admin_bytes(&json!({"op": "hello", "id": a.id}));
    let _ = sock.send_to(&hello, book.router());
    eprintln!(
        "kv server {} listening on {me}, shard {} with {} keys, router {}",
        a.id,
        a.id,
        a.records,
        book.router()
    );
    let epoch = Instant::now();
    let now_us = || epoch.elapsed().as_micros() as u64;
    let budget = CpuBudget {
        query_pct: a.budget_pct,
        ..CpuBudget::default()
    };
    let mut meter = BudgetMeter::new(budget, now_us());
    let (mut malformed, mut unsendable, mut admin_malformed) = (0u64, 0u64, 0u64);
    let mut last_hello = epoch;
    let mut buf = vec![0u8; DATAGRAM_BYTES_MAX];
    let mut out = Vec::new();
    while !expired(epoch, a.lifetime_ms) {
        // Re-announce now and then, so a restarted router learns this server again.
        if last_hello.elapsed() >= Duration::from_secs(1) {
            last_hello = Instant::now();
            let _ = sock.send_to(&hello, book.router());
        }
        if meter.may_serve(now_us()) {
            let wait = if srv.has_background_work() {
                Duration::ZERO
            } else {
                Duration::from_millis(1)
            };
            if let Some((n, from)) = recv_timeout(&sock, &mut buf, wait)? {
                let d = &buf[..n];
                match parse_admin(d) {
                    None => match Packet::decode(d) {
                        Ok(p) => {
                            let t = Instant::now();
                            let pkts = srv.handle(now_us(), p);
                            meter.charge(t.elapsed().as_nanos() as u64);
                            unsendable += send_packets(&sock, &book, pkts, &mut out);
                        }
                        Err(_) => malformed += 1,
                    },
                    Some(Err(())) => admin_malformed += 1,
                    Some(Ok(req)) => {
                        let reply_to = req["reply_to"]
                            .as_str()
                            .and_then(|s| s.parse::<SocketAddr>().ok())
                            .unwrap_or(from);
                        let answer = match req["op"].as_str().unwrap_or("") {
                            "migrate" => {
                                let r = start_migration(&mut srv, now_us(), &req);
                                match r {
                                    Ok(pkts) => {
                                        unsendable += send_packets(&sock, &book, pkts, &mut out);
                                        json!({"ok": true, "server": a.id})
                                    }
                                    Err(e) => json!({"ok": false, "server": a.id, "error": e}),
                                }
                            }
                            "status" => json!({
                                "server": a.id,
                                "listen": me.to_string(),
                                "migrations": srv.migration_status(),
                                "stats": srv.stats(),
                                "malformed": malformed,
                                "admin_malformed": admin_malformed,
                                "unsendable": unsendable,
                            }),
                            _ => {
                                admin_malformed += 1;
                                continue;
                            }
                        };
                        let _ = sock.send_to(&admin_bytes(&answer), reply_to);
                    }
                }
            }
        } else if !srv.has_background_work() {
            // Budget spent and nothing to migrate: idle out the interval.
            let left = meter.interval_left_us(now_us());
            std::thread::sleep(Duration::from_micros(left.min(budget.interval_us)));
        }
        let pkts = srv.tick(now_us());
        unsendable += send_packets(&sock, &book, pkts, &mut out);
    }
    eprintln!("kv server {}: lifetime over, exiting", a.id);
    Ok(())
}

fn parse_protocol(s: &str) -> Result<Protocol, String> {
    Protocol::ALL
        .into_iter()
        .find(|p| p.name() == s)
        .ok_or_else(|| {
            let names: Vec<&str> = Protocol::ALL.iter().map(|p| p.name()).collect();
            format!("--protocol {s}: expected one of {}", names.join(", "))
        })
}

fn start_migration(
    srv: &mut Server,
    now_us: u64,
    req: &Value,
) -> Result<Vec<(NodeId, Packet)>, String> {
    let field = |k: &str| {
        req[k]
            .as_u64()
            .and_then(|v| u16::try_from(v).ok())
            .ok_or_else(|| format!("request field {k} missing or not a u16"))
    };
    let (shard, to) = (field("shard")?, field("to")?);
    let protocol = parse_protocol(req["protocol"].as_str().unwrap_or(""))?;
    if to == 0 || to > SERVERS_MAX {
        return Err(format!(
            "destination {to} is not a server id (1..={SERVERS_MAX})"
        ));
    }
    srv.start_migration(now_us, shard, to, protocol)
        .map_err(|e| e.to_string())
}

/// A client socket at the first free client id.
fn client_socket(book: &Book) -> Result<(UdpSocket, NodeId), String> {
    for id in CLIENT_ID_MIN..CLIENT_ID_MIN + CLIENT_IDS_TRIED {
        if let Some(addr) = book.addr(id) {
            if let Ok(s) = UdpSocket::bind(addr) {
                return Ok((s, id));
            }
        }
    }
    Err(format!(
        "no free client port in {}..{} (router port + {CLIENT_ID_MIN}..)",
        book.base as u32 + CLIENT_ID_MIN as u32,
        book.base as u32 + (CLIENT_ID_MIN + CLIENT_IDS_TRIED) as u32
    ))
}

/// Sends one query through the router and waits for its reply or replies.
fn query(
    router: &str,
    shard: u16,
    body: Body,
    timeout_ms: u64,
) -> Result<locus_kvmigrate::client::Outcome, String> {
    let book = Book::parse("--router", router)?;
    if shard == 0 || shard > SERVERS_MAX {
        return Err(format!("--shard {shard}: must be in 1..={SERVERS_MAX}"));
    }
    let (sock, id) = client_socket(&book)?;
    let seq = std::process::id();
    let p = Packet {
        from: id,
        shard,
        seq,
        flags: 0,
        body,
    };
    let mut buf = Vec::new();
    p.encode(&mut buf).map_err(|e| e.to_string())?;
    sock.send_to(&buf, book.router())
        .map_err(|e| format!("send to router {}: {e}", book.router()))?;
    let deadline = Instant::now() + Duration::from_millis(timeout_ms);
    let mut merger = ReplyMerger::default();
    let mut rbuf = vec![0u8; DATAGRAM_BYTES_MAX];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "no reply within {timeout_ms} ms (is the router at {} and server {shard} running?)",
                book.router()
            ));
        }
        let Some((n, _)) = recv_timeout(&sock, &mut rbuf, left)? else {
            continue;
        };
        let Ok(r) = Packet::decode(&rbuf[..n]) else {
            continue;
        };
        if r.seq != seq {
            continue;
        }
        if let Some(out) = merger.feed(&r) {
            return Ok(out);
        }
    }
}

fn printable(v: &[u8]) -> String {
    let end = v.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    String::from_utf8_lossy(&v[..end]).into_owned()
}

fn get(a: GetArgs) -> Result<(), String> {
    let o = query(&a.router, a.shard, Body::Get { key: a.key }, a.timeout_ms)?;
    match o.status {
        Status::Ok => {
            println!("{}", printable(&o.value));
            Ok(())
        }
        Status::NotFound => Err(format!("key {} not found in shard {}", a.key, a.shard)),
        _ => Err(format!("server refused GET {} in shard {}", a.key, a.shard)),
    }
}

fn set(a: SetArgs) -> Result<(), String> {
    let value = a.value.into_bytes();
    if value.len() > VALUE_BYTES_MAX {
        return Err(format!(
            "value is {} bytes, at most {VALUE_BYTES_MAX}",
            value.len()
        ));
    }
    let o = query(
        &a.router,
        a.shard,
        Body::Set { key: a.key, value },
        a.timeout_ms,
    )?;
    match o.status {
        Status::Ok => {
            println!("OK");
            Ok(())
        }
        _ => Err(format!("server refused SET {} in shard {}", a.key, a.shard)),
    }
}

/// Sends an admin request to the router and collects answers until `want` arrived or the timeout.
fn admin(
    router: &Book,
    req: &Value,
    want: impl Fn(&[Value]) -> bool,
    timeout_ms: u64,
) -> Result<Vec<Value>, String> {
    let sock = bind(
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
        "admin client",
    )?;
    sock.send_to(&admin_bytes(req), router.router())
        .map_err(|e| format!("send to router {}: {e}", router.router()))?;
    let deadline = Instant::now() + Duration::from_millis(timeout_ms);
    let mut got = Vec::new();
    let mut buf = vec![0u8; DATAGRAM_BYTES_MAX];
    while !want(&got) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        if let Some((n, _)) = recv_timeout(&sock, &mut buf, left)? {
            if let Some(Ok(v)) = parse_admin(&buf[..n]) {
                got.push(v);
            }
        }
    }
    Ok(got)
}

/// Router answer plus one answer per server it knows.
fn collect_status(book: &Book, timeout_ms: u64) -> Result<Value, String> {
    let got = admin(
        book,
        &json!({"op": "migration_status"}),
        |g| {
            g.iter()
                .find(|v| v.get("router").is_some())
                .is_some_and(|r| {
                    let want = r["servers"].as_array().map_or(0, |a| a.len());
                    g.iter().filter(|v| v.get("server").is_some()).count() >= want
                })
        },
        timeout_ms,
    )?;
    let Some(router) = got.iter().find(|v| v.get("router").is_some()).cloned() else {
        return Err(format!(
            "the router at {} did not answer within {timeout_ms} ms",
            book.router()
        ));
    };
    let mut servers: Vec<Value> = got
        .into_iter()
        .filter(|v| v.get("server").is_some())
        .collect();
    servers.sort_by_key(|v| v["server"].as_u64());
    let known = router["servers"].as_array().map_or(0, |a| a.len());
    let missing = known.saturating_sub(servers.len());
    let migrations: Vec<Value> = servers
        .iter()
        .flat_map(|s| s["migrations"].as_array().cloned().unwrap_or_default())
        .collect();
    Ok(json!({
        "router": router["router"],
        "servers": servers,
        "servers_not_answering": missing,
        "migrations": migrations,
    }))
}

fn migrate(a: MigrateArgs) -> Result<(), String> {
    let book = Book::parse("--router", &a.router)?;
    parse_protocol(&a.protocol)?;
    for (flag, v) in [("--shard", a.shard), ("--from", a.from), ("--to", a.to)] {
        if v == 0 || v > SERVERS_MAX {
            return Err(format!(
                "{flag} {v}: must be a server id in 1..={SERVERS_MAX}"
            ));
        }
    }
    if a.from == a.to {
        return Err(format!(
            "--from and --to are both {}: pick another destination",
            a.to
        ));
    }
    let req = json!({"op": "migrate", "shard": a.shard, "from": a.from, "to": a.to, "protocol": a.protocol});
    let got = admin(&book, &req, |g| !g.is_empty(), a.timeout_ms.min(5000))?;
    let Some(r) = got.first() else {
        return Err(format!(
            "no answer within {} ms from the router at {} or server {}",
            a.timeout_ms.min(5000),
            book.router(),
            a.from
        ));
    };
    if r["ok"] != json!(true) {
        return Err(format!(
            "migration refused: {}",
            r["error"].as_str().unwrap_or("no reason given")
        ));
    }
    println!(
        "migration of shard {} from server {} to server {} ({}) started",
        a.shard, a.from, a.to, a.protocol
    );
    if !a.wait {
        return Ok(());
    }
    let deadline = Instant::now() + Duration::from_millis(a.timeout_ms);
    loop {
        let st = collect_status(&book, 1000)?;
        let mine = st["migrations"].as_array().and_then(|m| {
            m.iter()
                .rev()
                .find(|x| x["shard"] == json!(a.shard) && x["source"] == json!(a.from))
                .cloned()
        });
        if let Some(m) = mine {
            eprintln!(
                "  {} groups {}/{} errors {}",
                m["phase"].as_str().unwrap_or("?"),
                m["groups_done"],
                m["groups_total"],
                m["errors"]
            );
            match m["phase"].as_str() {
                Some("Done") => {
                    println!(
                        "done in {} ms",
                        m["elapsed_us"].as_u64().unwrap_or(0) / 1000
                    );
                    return Ok(());
                }
                Some("Aborted") => {
                    return Err(format!(
                        "migration aborted: {}",
                        m["last_error"].as_str().unwrap_or("no reason given")
                    ))
                }
                _ => {}
            }
        }
        if Instant::now() >= deadline {
            return Err(format!("migration not finished after {} ms", a.timeout_ms));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn status(a: StatusArgs) -> Result<(), String> {
    let book = Book::parse("--router", &a.router)?;
    let st = collect_status(&book, a.timeout_ms)?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&st).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    let r = &st["router"];
    println!(
        "router {}: {} queries, {} double reads, {} malformed datagrams dropped ({} malformed admin), servers {}",
        r["listen"].as_str().unwrap_or("?"),
        r["stats"]["queries"],
        r["stats"]["double_reads"],
        r["stats"]["malformed"],
        r["admin_malformed"],
        st["servers"]
            .as_array()
            .map(|s| s.iter().map(|v| v["server"].to_string()).collect::<Vec<_>>().join(","))
            .unwrap_or_default()
    );
    if st["servers_not_answering"].as_u64().unwrap_or(0) > 0 {
        println!("{} server(s) did not answer", st["servers_not_answering"]);
    }
    let migrations = st["migrations"].as_array().cloned().unwrap_or_default();
    if migrations.is_empty() {
        println!("no migrations");
        return Ok(());
    }
    println!(
        "{:>5} {:>4} {:>4} {:<13} {:<12} {:>15} {:>10} {:>10} {:>6}  last error",
        "shard", "src", "dst", "protocol", "phase", "groups", "groups/s", "elapsed ms", "errors"
    );
    for m in migrations {
        println!(
            "{:>5} {:>4} {:>4} {:<13} {:<12} {:>15} {:>10.0} {:>10} {:>6}  {}",
            m["shard"].to_string(),
            m["source"].to_string(),
            m["destination"].to_string(),
            m["protocol"].as_str().unwrap_or("?"),
            m["phase"].as_str().unwrap_or("?"),
            format!("{}/{}", m["groups_done"], m["groups_total"]),
            m["groups_per_s"].as_f64().unwrap_or(0.0),
            m["elapsed_us"].as_u64().unwrap_or(0) / 1000,
            m["errors"].to_string(),
            m["last_error"].as_str().unwrap_or("-")
        );
    }
    Ok(())
}
