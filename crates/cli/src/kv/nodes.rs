//! The `locus kv router` and `locus kv server` processes. Each runs one node of the crate's
//! node loop (`locus_kvmigrate::node::{RouterNode, ServerNode}`, the loop `runtime::Cluster`
//! runs on threads) over a `UdpPeer` at router port + its id, stepping it until
//! `--lifetime-ms` is over. What is this CLI's own is in the loop's hooks: management
//! datagrams (`LKADM1 ` + JSON) share the node's socket and arrive as foreign datagrams, and a
//! server re-announces itself to the router every [`HELLO_EVERY`].
//!
//! Management requests: `hello` (server -> router), `migrate` (relayed by the router to the
//! source server, which answers the requester), `migration_status` (the router answers with its
//! own counters and relays `status` to every server that said hello; each answers directly).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use locus_kvmigrate::node::{CpuBudget, NodeHooks, RouterNode, ServerNode};
use locus_kvmigrate::transport::{Foreign, UdpPeer};
use locus_kvmigrate::wire::VALUE_BYTES_MAX;
use locus_kvmigrate::{Geometry, Router, RouterConfig, Server, ServerConfig};
use serde_json::{json, Value};

use super::{
    datagram_key, parse_protocol, Admin, AdminDrop, Book, RouterArgs, ServerArgs,
    ACK_TIMEOUT_MS_MIN, RECORDS_MAX, SERVERS_MAX,
};

/// A server announces itself to the router this often, so a restarted router learns it again.
const HELLO_EVERY: Duration = Duration::from_secs(1);

fn expired(start: Instant, lifetime_ms: Option<u64>) -> bool {
    lifetime_ms.is_some_and(|ms| start.elapsed() >= Duration::from_millis(ms))
}

pub(super) fn router(a: RouterArgs) -> Result<(), String> {
    let book = Book::parse("--listen", &a.listen)?;
    let router = Router::new(RouterConfig {
        id: 0,
        instances_max: a.instances_max,
        bf_bytes: a.bf_bytes,
        cbf_bytes: a.cbf_bytes,
        ..RouterConfig::default()
    })
    .map_err(|e| e.to_string())?;
    let mut peer = UdpPeer::bind(book.base, 0).map_err(|e| format!("kv router: {e}"))?;
    if let Some(key) = datagram_key()? {
        peer = peer.with_auth(key, 0);
    }
    let peer = Arc::new(peer);
    let mut node = RouterNode::new(router, peer.clone());
    eprintln!(
        "kv router listening on {} (servers at port + id, bf {} B, cbf {} B)",
        book.router(),
        a.bf_bytes,
        a.cbf_bytes
    );
    let mut admin = RouterAdmin {
        peer,
        seal: Admin::new(book, 0)?,
        book,
        start: Instant::now(),
        servers: BTreeSet::new(),
        admin_malformed: 0,
        relayed: 0,
    };
    while !expired(admin.start, a.lifetime_ms) {
        node.step(&mut admin)
            .map_err(|e| format!("kv router: {e}"))?;
    }
    eprintln!("kv router: lifetime over, exiting");
    Ok(())
}

/// The router's management side.
struct RouterAdmin {
    peer: Arc<UdpPeer>,
    seal: Admin,
    book: Book,
    start: Instant,
    /// Servers that said hello.
    servers: BTreeSet<u16>,
    admin_malformed: u64,
    relayed: u64,
}

impl RouterAdmin {
    fn send(&mut self, v: &Value, to: SocketAddr) {
        // Best effort, like every datagram: the requester times out and says so.
        let _ = self.peer.send_datagram(&self.seal.bytes(v), to);
    }

    /// Relays a request to the server its field `field` names.
    fn relay(&mut self, req: &Value, field: &str, from: SocketAddr) {
        match req[field].as_u64().and_then(|f| u16::try_from(f).ok()) {
            Some(src) if self.servers.contains(&src) => {
                let mut fwd = req.clone();
                fwd["reply_to"] = json!(from.to_string());
                self.relayed += 1;
                if let Some(addr) = self.book.addr(src) {
                    self.send(&fwd, addr);
                }
            }
            _ => {
                let msg = json!({"ok": false, "error": format!(
                    "server {} has not registered with this router (known: {:?})",
                    req[field], self.servers)});
                self.send(&msg, from);
            }
        }
    }

    fn status(&mut self, node: &RouterNode, from: SocketAddr) {
        for id in self.servers.clone() {
            let fwd = json!({"op": "status", "reply_to": from.to_string()});
            if let Some(addr) = self.book.addr(id) {
                self.relayed += 1;
                self.send(&fwd, addr);
            }
        }
        let instances: Vec<Value> = node
            .router()
            .instances()
            .into_iter()
            .map(|(shard, src, dst)| json!({"shard": shard, "source": src, "destination": dst}))
            .collect();
        let msg = json!({
            "router": {
                "listen": self.book.router().to_string(),
                "uptime_ms": self.start.elapsed().as_millis() as u64,
                "stats": node.router().stats(),
                "admin_malformed": self.admin_malformed,
                "unsendable": node.counters().unsendable,
                "relayed": self.relayed,
                "instances": instances,
                "auth": self.peer.auth_counters(),
                "admin_auth": self.seal.counters(),
            },
            "servers": self.servers,
        });
        self.send(&msg, from);
    }
}

impl NodeHooks<RouterNode> for RouterAdmin {
    fn foreign(&mut self, node: &mut RouterNode, d: Foreign) -> Option<Foreign> {
        let req = match self.seal.parse(&d.bytes, d.from) {
            None => return Some(d), // garbage: counted in the router's `malformed`
            Some(Err(drop)) => {
                // Unauthenticated ones are counted by the seal (`admin_auth`).
                if drop == AdminDrop::Malformed {
                    self.admin_malformed += 1;
                }
                return None;
            }
            Some(Ok(req)) => req,
        };
        match req["op"].as_str().unwrap_or("") {
            "hello" => match req["id"].as_u64() {
                Some(id) if (1..=SERVERS_MAX as u64).contains(&id) => {
                    self.servers.insert(id as u16);
                }
                _ => self.admin_malformed += 1,
            },
            "migrate" => self.relay(&req, "from", d.from),
            "recover" | "abort" => self.relay(&req, "server", d.from),
            "migration_status" => self.status(node, d.from),
            _ => self.admin_malformed += 1,
        }
        None
    }
}

/// A preloaded value: the key in decimal, then zeros, `len` bytes.
fn preload_value(key: u64, len: usize) -> Vec<u8> {
    let mut v = format!("v{key}").into_bytes();
    v.resize(len, 0);
    v
}

/// The server's settings from its flags, each checked with the flag named.
fn server_config(a: &ServerArgs) -> Result<ServerConfig, String> {
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
    if !(ACK_TIMEOUT_MS_MIN..=3_600_000).contains(&a.ack_timeout_ms) {
        return Err(format!(
            "--ack-timeout-ms {}: must be in {ACK_TIMEOUT_MS_MIN}..=3600000 (a resend must fit)",
            a.ack_timeout_ms
        ));
    }
    let mut cfg = ServerConfig::new(a.id, 0, geometry);
    cfg.mirror_writes = a.mirror_writes;
    cfg.ack_timeout_us = a.ack_timeout_ms * 1000;
    // The resends fit in the timeout, so the source gives up when the flag says, not after
    // the full schedule of resends (4.26 s by default).
    cfg.retries_max = cfg.retry_policy().fitted_to_patience().retries_max;
    Ok(cfg)
}

pub(super) fn server(a: ServerArgs) -> Result<(), String> {
    let book = Book::parse("--router", &a.router)?;
    let cfg = server_config(&a)?;
    let srv = Server::new(cfg).map_err(|e| e.to_string())?;
    let mut peer = UdpPeer::bind(book.base, a.id).map_err(|e| format!("kv server: {e}"))?;
    if let Some(key) = datagram_key()? {
        peer = peer.with_auth(key, 0);
    }
    let peer = Arc::new(peer);
    let me = peer
        .addr_of(a.id)
        .ok_or_else(|| format!("--id {}: port out of range", a.id))?;
    let budget = CpuBudget {
        query_pct: a.budget_pct,
        ..CpuBudget::default()
    };
    let mut node =
        ServerNode::new(srv, peer.clone(), budget, Instant::now()).map_err(|e| e.to_string())?;
    node.load(
        a.id,
        (0..a.records).map(|k| (k, preload_value(k, a.value_bytes))),
    )
    .map_err(|e| format!("--records {}: preloading failed: {e}", a.records))?;
    let mut admin = ServerAdmin {
        seal: Admin::new(book, a.id)?,
        last_hello: Instant::now(),
        peer,
        book,
        me,
        admin_malformed: 0,
    };
    admin.announce();
    eprintln!(
        "kv server {} listening on {me}, shard {} with {} keys, router {}",
        a.id,
        a.id,
        a.records,
        book.router()
    );
    let start = Instant::now();
    while !expired(start, a.lifetime_ms) {
        node.step(&mut admin)
            .map_err(|e| format!("kv server {}: {e}", a.id))?;
    }
    eprintln!("kv server {}: lifetime over, exiting", a.id);
    Ok(())
}

/// A server's management side.
struct ServerAdmin {
    peer: Arc<UdpPeer>,
    seal: Admin,
    book: Book,
    me: SocketAddr,
    last_hello: Instant,
    admin_malformed: u64,
}

impl ServerAdmin {
    fn announce(&mut self) {
        self.last_hello = Instant::now();
        // Sealed afresh each time: a sealed datagram opens once.
        let hello = self
            .seal
            .bytes(&json!({"op": "hello", "id": self.peer.node()}));
        let _ = self.peer.send_datagram(&hello, self.book.router());
    }
}

impl NodeHooks<ServerNode> for ServerAdmin {
    fn poll(&mut self, _node: &mut ServerNode) {
        if self.last_hello.elapsed() >= HELLO_EVERY {
            self.announce();
        }
    }

    fn foreign(&mut self, node: &mut ServerNode, d: Foreign) -> Option<Foreign> {
        let req = match self.seal.parse(&d.bytes, d.from) {
            None => return Some(d), // garbage: counted in the node's `malformed`
            Some(Err(drop)) => {
                // Unauthenticated ones are counted by the seal (`admin_auth`).
                if drop == AdminDrop::Malformed {
                    self.admin_malformed += 1;
                }
                return None;
            }
            Some(Ok(req)) => req,
        };
        let id = node.id();
        let reply_to = req["reply_to"]
            .as_str()
            .and_then(|s| s.parse::<SocketAddr>().ok())
            .unwrap_or(d.from);
        let answer = match req["op"].as_str().unwrap_or("") {
            "migrate" => match start_migration(node, &req) {
                Ok(attempt) => json!({"ok": true, "server": id, "attempt": attempt}),
                Err(e) => json!({"ok": false, "server": id, "error": e}),
            },
            op @ ("recover" | "abort") => {
                let done = match req["shard"].as_u64().and_then(|v| u16::try_from(v).ok()) {
                    None => Err("request field shard missing or not a u16".to_string()),
                    Some(shard) if op == "recover" => {
                        node.recover_orphan(shard).map_err(|e| e.to_string())
                    }
                    Some(shard) => node.abandon_orphan(shard).map_err(|e| e.to_string()),
                };
                match done {
                    Ok(()) => json!({"ok": true, "server": id}),
                    Err(e) => json!({"ok": false, "server": id, "error": e}),
                }
            }
            "status" => json!({
                "server": id,
                "listen": self.me.to_string(),
                "migrations": node.server().migration_status(),
                "stats": node.server().stats(),
                "malformed": node.counters().malformed,
                "admin_malformed": self.admin_malformed,
                "unsendable": node.counters().unsendable,
                "auth": self.peer.auth_counters(),
                "admin_auth": self.seal.counters(),
            }),
            _ => {
                self.admin_malformed += 1;
                return None;
            }
        };
        let answer = self.seal.bytes(&answer);
        let _ = self.peer.send_datagram(&answer, reply_to);
        None
    }
}

/// Starts the migration `req` asks for; returns its attempt number (`MigrationStatus::attempt`).
fn start_migration(node: &mut ServerNode, req: &Value) -> Result<u64, String> {
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
    node.start_migration(shard, to, protocol)
        .map_err(|e| e.to_string())?;
    node.server()
        .running_attempt(shard)
        .ok_or_else(|| format!("shard {shard}: the migration ended as it started"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(ack_timeout_ms: u64) -> ServerArgs {
        ServerArgs {
            router: "127.0.0.1:7000".into(),
            id: 1,
            records: 0,
            value_bytes: 64,
            buckets_log2: 8,
            group_buckets_log2: 2,
            budget_pct: 100,
            ack_timeout_ms,
            mirror_writes: true,
            lifetime_ms: None,
        }
    }

    #[test]
    fn ack_timeout_is_when_a_silent_peer_is_given_up() {
        for ms in [ACK_TIMEOUT_MS_MIN, 500, 2000, 4000, 10_000] {
            let cfg = server_config(&args(ms)).unwrap();
            assert_eq!(
                cfg.retry_policy().give_up_us(),
                ms * 1000,
                "--ack-timeout-ms {ms}"
            );
            assert!(
                cfg.retries_max >= 1,
                "--ack-timeout-ms {ms}: no resend fits"
            );
        }
        for ms in [0, ACK_TIMEOUT_MS_MIN - 1, 3_600_001] {
            let e = server_config(&args(ms)).unwrap_err();
            assert!(e.contains("--ack-timeout-ms"), "{e}");
        }
    }
}
