//! `locus kv`: the NetMigrate router and KV servers as separate processes on loopback UDP, and
//! the commands that drive them (`get`, `set`, `migrate`, `migration status`, and
//! `migration recover|abort` for a shard whose source died mid-migration).
//!
//! Addressing: node `n` (router 0, servers 1..=64, clients from 100) receives on
//! `127.0.0.1:(P + n)`, where `P` is the router's `--listen` port. Every process computes a
//! peer's address from its id, so no process needs a peer table, and a server replies to a
//! client (whose id is in each query) directly, as in the paper.
//!
//! Data packets are the `locus-kvmigrate` wire format, sealed with a MAC keyed from the cluster
//! secret when [`SECRET_ENV`] is set (every process then drops and counts packets that do not
//! open: forged, replayed, or from an unexpected sender; `migration status` shows the counts). Management requests are datagrams that
//! start with [`ADMIN_MAGIC`] followed by JSON; they cannot be mistaken for wire packets (whose
//! first two bytes are the magic 0x4D4E). With the secret set they are sealed too, under the
//! management key (`locus_kvmigrate::auth::Opener::management`), each sender as its own node id
//! (a command binds a client port for one), and a forged, replayed or misaddressed one is
//! dropped and counted (`admin_auth` in `migration status`) before its JSON is read. The router relays `migrate` to the source server and
//! `migration_status` to every server that said hello; servers answer the requester directly.
//! Anything else that does not decode is dropped and counted, never fatal.
//!
//! The router and server processes ([`nodes`]) run the crate's one node loop,
//! `locus_kvmigrate::node` (the loop `runtime::Cluster`'s threads run too), over a `UdpPeer`
//! socket; this CLI adds only its management datagrams, announcements and `--lifetime-ms` as
//! the loop's hooks. [`client`] holds the commands that talk to a running deployment.

mod client;
mod nodes;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use clap::{Args, Subcommand};
use locus_kvmigrate::auth::{AuthCounters, Opener, Sealer};
use locus_kvmigrate::wire::NodeId;
use locus_kvmigrate::Protocol;
use serde_json::Value;

use client::{get, migrate, orphan, set, status};
use nodes::{router, server};

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
/// The shortest `--ack-timeout-ms`: the first resend's wait (20 ms) and one resend (40 ms).
const ACK_TIMEOUT_MS_MIN: u64 = 60;

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
    /// A source aborts its migration after its destination or the router is silent this long
    /// (60..=3600000; resends, 20 ms doubling to 1 s, at most 8, are fitted
    /// into it). A destination probes a source silent this long, and takes it for dead once
    /// the probe has gone unanswered as long (`kv migration status`: SourceLost).
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
    /// A shard orphaned by a dead source (phase SourceLost): accept the loss of the groups not
    /// copied; the destination owns the shard, and their keys read as absent from then on.
    Recover(OrphanArgs),
    /// A shard orphaned by a dead source that came back with its data: the destination drops
    /// its copy (and writes it took since) and the router sends the shard back to the source.
    Abort(OrphanArgs),
}

#[derive(Args, Debug)]
pub struct OrphanArgs {
    /// The router's address.
    #[arg(long, value_name = "127.0.0.1:PORT")]
    pub router: String,
    /// The orphaned shard.
    #[arg(long)]
    pub shard: u16,
    /// The destination that holds it (`kv migration status` shows it as dst, phase SourceLost).
    #[arg(long)]
    pub server: u16,
    /// Give up after this long.
    #[arg(long, default_value_t = 2000)]
    pub timeout_ms: u64,
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
        Kv::Migration(MigrationArgs { which }) => match which {
            MigrationCmd::Status(s) => status(s),
            MigrationCmd::Recover(o) => orphan(o, true),
            MigrationCmd::Abort(o) => orphan(o, false),
        },
    }
}

/// The environment variable holding the cluster secret; when set, every wire packet carries a
/// MAC keyed from it (`locus_kvmigrate::auth`), and packets without a valid one are dropped and
/// counted. Every process of a deployment, and each `kv get`/`set`, needs the same value.
pub const SECRET_ENV: &str = "LOCUS_SECRET";

/// The datagram key from [`SECRET_ENV`], if it is set and not empty.
fn datagram_key() -> Result<Option<locus_kvmigrate::auth::DatagramKey>, String> {
    match std::env::var(SECRET_ENV) {
        Ok(s) if !s.is_empty() => locus_kvmigrate::auth::DatagramKey::from_secret(s.as_bytes())
            .map(Some)
            .map_err(|e| format!("{SECRET_ENV}: {e}")),
        _ => Ok(None),
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

/// Why a management datagram was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AdminDrop {
    /// Its JSON did not parse (counted as `admin_malformed`).
    Malformed,
    /// It did not open under the management key (counted by the opener: `admin_auth`).
    Unauthenticated,
}

/// One node's management datagrams: [`ADMIN_MAGIC`] + JSON, sealed and checked when the
/// cluster secret is set ([`SECRET_ENV`]; the module doc).
struct Admin {
    book: Book,
    seal: Option<(Sealer, Opener)>,
}

impl Admin {
    /// Management datagrams of node `node` (its socket at `book.addr(node)`).
    fn new(book: Book, node: NodeId) -> Result<Self, String> {
        let seal =
            datagram_key()?.map(|k| (Sealer::new(k.management(), node), Opener::management(&k)));
        Ok(Self { book, seal })
    }

    fn bytes(&mut self, v: &Value) -> Vec<u8> {
        let mut b = ADMIN_MAGIC.to_vec();
        b.extend_from_slice(v.to_string().as_bytes());
        if let Some((sealer, _)) = &mut self.seal {
            sealer.seal(&mut b);
        }
        b
    }

    /// `None` if `d` is not a management datagram at all; the request or answer in it, or why
    /// it was dropped. With the secret, the seal is checked first (sender at its own
    /// address, not replayed), so a forged datagram is never parsed.
    fn parse(&mut self, d: &[u8], from: SocketAddr) -> Option<Result<Value, AdminDrop>> {
        if !d.starts_with(ADMIN_MAGIC) {
            return None;
        }
        let d = match &mut self.seal {
            Some((_, opener)) => {
                let book = self.book;
                match opener.open(d, |sender| book.addr(sender) == Some(from)) {
                    Ok(d) => d,
                    Err(_) => return Some(Err(AdminDrop::Unauthenticated)),
                }
            }
            None => d,
        };
        let rest = d.strip_prefix(ADMIN_MAGIC)?;
        Some(serde_json::from_slice(rest).map_err(|_| AdminDrop::Malformed))
    }

    /// Management datagrams accepted and dropped by the seal check, if it is on.
    fn counters(&self) -> Option<AuthCounters> {
        self.seal.as_ref().map(|(_, o)| o.counters().clone())
    }
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
