//! The migration agents in front of stock `redis-server`s (no patched Redis): each server of a
//! [`crate::runtime::Cluster`] keeps its shards in its own Redis through [`RedisShard`], a
//! [`ShardStore`] that speaks ordinary RESP2 commands (GET, SMEMBERS, EVALSHA of small Lua
//! scripts, DEL, pipelining). The router, the agents' state machine and the wire protocol are the
//! ones the built-in server uses, so every protocol (NetMigrate, source-based, stop-and-copy,
//! Rocksteady, Fulva) runs over Redis unchanged.
//!
//! # Layout in Redis, per shard `s`
//! ```text
//!   kv:s:<key>     string   16 lowercase hex digits of the version | tag | value bytes
//!                           tag 'v' = a value, 'd' = a tombstone (or, at version 0, the
//!                           destination's "absent at the source" marker after a pull)
//!   grp:s:<group>  set      decimal keys that ever had an entry in this migration group
//!   live:s         integer  keys with a value (tombstones excluded)
//! ```
//! Groups are the built-in server's: `Geometry::group_of(key)`, adjacent hash buckets.
//!
//! # Why per-group sets (and not SCAN)
//! Every write adds its key to its group's set in the same Lua script that writes the value, so a
//! group's membership is exact at every instant: a write that lands after a group was scanned is
//! the agents' late write (NetMigrate 4.3) or dirty key (source-based), never a key the scan
//! missed. Enumerating a group costs O(keys in the group) (one SMEMBERS inside one script), where
//! `SCAN ... MATCH` walks the whole keyspace for every group (O(groups x keys)) and may return
//! keys twice. The price is one set member per key and one SADD per write (idempotent).
//!
//! # Versions without patching Redis
//! The version travels with the value (the first 16 bytes). Only the agent in front of a Redis
//! writes to it and it is single-threaded, so a client write is one script that reads the stored
//! version and writes at max(the server's next version, stored + 1) (`ShardStore::put_next`). Migrated, late, dirty, pulled and mirrored pairs go
//! through the same script with "install only if newer" on: the comparison runs inside Redis, so
//! a copy never overwrites a newer write (NetMigrate 4.2, 7). The hex halves are compared as two
//! 32-bit numbers (exact in Lua's doubles; no locale-dependent string comparison).
//!
//! # Failures
//! A Redis that stops answering makes its [`RedisShard`] fail: every later answer is a
//! placeholder and [`ShardStore::health`] reports the first error, so the node loop
//! ([`crate::node`]) drops what that step produced and the node goes down. A dead destination is then exactly the built-in
//! case: the source's ack timeout aborts the migration and, with `mirror_writes`, the source
//! already holds every acknowledged write.

pub mod cluster;
pub mod process;

use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::group::Geometry;
use crate::install::Installer;
use crate::measure::{measure_on, MeasureConfig, MeasureReport, OpChooser};
use crate::resp::{Client, Command, Config, Reply, RespError};
use crate::runtime::Cluster;
use crate::server::StoreFactory;
use crate::table::ShardStore;
use crate::transport::InProcess;
use crate::wire::{Item, Key, NodeId, ShardId};

pub use cluster::measure_redis_cluster;
pub use process::RedisProcess;

/// Bytes before the value: 16 hex digits of version and the tag.
const HEADER_BYTES: usize = 17;
const TAG_VALUE: u8 = b'v';
const TAG_TOMBSTONE: u8 = b'd';

/// Writes one entry and adds its key to its group set. ARGV[3] is the mode: "0" writes as
/// given; "1" only if the entry is newer than the stored one; "2" (a client write) at version
/// max(the entry's, stored + 1), the version read folded into the write (one round trip).
/// Keeps the live counter. Returns 1 if it wrote (modes 0 and 1) or the version written as
/// 16 hex digits (mode 2).
const PUT_SCRIPT: &str = r"
local old = redis.call('GET', KEYS[1])
local entry = ARGV[1]
if old and ARGV[3] == '1' then
  local oh = tonumber(string.sub(old, 1, 8), 16)
  local nh = tonumber(string.sub(entry, 1, 8), 16)
  local ol = tonumber(string.sub(old, 9, 16), 16)
  local nl = tonumber(string.sub(entry, 9, 16), 16)
  if oh > nh or (oh == nh and ol >= nl) then return 0 end
end
if ARGV[3] == '2' then
  local nh = tonumber(string.sub(entry, 1, 8), 16)
  local nl = tonumber(string.sub(entry, 9, 16), 16)
  if old then
    local oh = tonumber(string.sub(old, 1, 8), 16)
    local ol = tonumber(string.sub(old, 9, 16), 16) + 1
    if ol == 4294967296 then
      ol = 0
      oh = oh + 1
    end
    if oh > nh or (oh == nh and ol > nl) then
      nh = oh
      nl = ol
    end
  end
  entry = string.format('%08x%08x', nh, nl) .. string.sub(entry, 17)
end
local was = 0
if old and string.sub(old, 17, 17) == 'v' then was = 1 end
local now = 0
if string.sub(entry, 17, 17) == 'v' then now = 1 end
redis.call('SET', KEYS[1], entry)
redis.call('SADD', KEYS[2], ARGV[2])
if now ~= was then redis.call('INCRBY', KEYS[3], now - was) end
if ARGV[3] == '2' then return string.sub(entry, 1, 16) end
return 1
";

/// Every entry of one group: a flat array key, entry, key, entry, ...
const SCAN_SCRIPT: &str = r"
local ks = redis.call('SMEMBERS', KEYS[1])
local out = {}
for _, k in ipairs(ks) do
  local v = redis.call('GET', ARGV[1] .. k)
  if v then
    out[#out + 1] = k
    out[#out + 1] = v
  end
end
return out
";

/// Deletes one group's entries and its set; returns how many keys it held.
const CLEAR_SCRIPT: &str = r"
local ks = redis.call('SMEMBERS', KEYS[1])
for _, k in ipairs(ks) do redis.call('DEL', ARGV[1] .. k) end
redis.call('DEL', KEYS[1])
return #ks
";

/// Groups deleted per pipeline by [`ShardStore::clear`] (bounds the commands held in memory).
pub const CLEAR_GROUPS_PER_PIPELINE: u32 = 1024;
/// `SCAN ... COUNT` hint of a purge.
pub const PURGE_SCAN_COUNT: u64 = 1000;
/// SCAN calls of one purge at most (each returns at least one key or advances the cursor;
/// this bounds a purge of a keyspace of about this many times `PURGE_SCAN_COUNT` keys).
pub const PURGE_SCANS_MAX: u64 = 1 << 24;

/// Encodes an entry as stored in Redis (see the module doc).
pub fn encode_entry(item: &Item) -> Vec<u8> {
    let value = item.value.as_deref().unwrap_or(&[]);
    let mut out = Vec::with_capacity(HEADER_BYTES + value.len());
    out.extend_from_slice(format!("{:016x}", item.version).as_bytes());
    out.push(if item.value.is_some() {
        TAG_VALUE
    } else {
        TAG_TOMBSTONE
    });
    out.extend_from_slice(value);
    out
}

/// Decodes a stored entry of `key`; `None` if the bytes are not an entry.
pub fn decode_entry(key: Key, bytes: &[u8]) -> Option<Item> {
    if bytes.len() < HEADER_BYTES {
        return None;
    }
    let hex = std::str::from_utf8(&bytes[..16]).ok()?;
    let version = u64::from_str_radix(hex, 16).ok()?;
    let value = match bytes[16] {
        TAG_VALUE => Some(bytes[HEADER_BYTES..].to_vec()),
        TAG_TOMBSTONE if bytes.len() == HEADER_BYTES => None,
        _ => return None,
    };
    Some(Item {
        key,
        version,
        value,
    })
}

/// One Redis connection with its script hashes and its first failure, shared by every shard a
/// server keeps in that Redis (the server is one thread, so the lock is never contended).
#[derive(Debug)]
struct Conn {
    client: Client,
    /// The settings it was opened with (an installer opens its own connection with them).
    config: Config,
    put_sha: String,
    scan_sha: String,
    clear_sha: String,
    failed: Option<String>,
}

impl Conn {
    fn open(addr: &str, config: Config) -> Result<Self> {
        let mut client = Client::connect(addr, config)?;
        let mut load = |script: &str| -> Result<String> {
            match client.call(&Command::new("SCRIPT").arg("LOAD").arg(script))? {
                Reply::Bulk(Some(sha)) => Ok(String::from_utf8_lossy(&sha).into_owned()),
                other => Err(Error::RedisScriptLoad {
                    addr: addr.to_string(),
                    reply: other.to_string(),
                }),
            }
        };
        let (put_sha, scan_sha, clear_sha) =
            (load(PUT_SCRIPT)?, load(SCAN_SCRIPT)?, load(CLEAR_SCRIPT)?);
        Ok(Self {
            client,
            config,
            put_sha,
            scan_sha,
            clear_sha,
            failed: None,
        })
    }

    /// Runs `cmds` pipelined; `None` (and the connection failed) on any error, error replies
    /// included: the scripts never raise one on their own data.
    fn run(&mut self, cmds: &[Command]) -> Option<Vec<Reply>> {
        if self.failed.is_some() {
            return None;
        }
        let r = self.client.pipeline(cmds).and_then(|replies| {
            match replies.iter().find(|r| matches!(r, Reply::Error(_))) {
                Some(Reply::Error(msg)) => Err(RespError::Server(msg.clone())),
                _ => Ok(replies),
            }
        });
        match r {
            Ok(replies) if replies.len() == cmds.len() => Some(replies),
            Ok(replies) => {
                self.fail(format!(
                    "{} replies to {} commands",
                    replies.len(),
                    cmds.len()
                ));
                None
            }
            Err(e) => {
                self.fail(e.to_string());
                None
            }
        }
    }

    fn fail(&mut self, why: String) {
        if self.failed.is_none() {
            self.failed = Some(format!("redis at {}: {why}", self.client.addr()));
        }
    }
}

/// The write script's call for `item` of `shard` (`mode` as in [`PUT_SCRIPT`]).
fn put_command(sha: &str, shard: ShardId, geometry: Geometry, item: &Item, mode: &str) -> Command {
    Command::new("EVALSHA")
        .arg(sha)
        .arg("3")
        .arg(format!("kv:{shard}:{}", item.key))
        .arg(format!("grp:{shard}:{}", geometry.group_of(item.key)))
        .arg(format!("live:{shard}"))
        .arg(encode_entry(item))
        .arg(item.key.to_string())
        .arg(mode)
}

/// Installs DATA batches into a server's Redis on a connection of its own (`crate::install`):
/// one pipeline of install-if-newer scripts per batch, so the queries on the store's connection
/// never wait for a whole batch's round trip.
#[derive(Debug)]
pub struct RedisInstaller {
    conn: Conn,
}

impl Installer for RedisInstaller {
    fn install(
        &mut self,
        shard: ShardId,
        geometry: Geometry,
        items: &[Item],
    ) -> std::result::Result<(), String> {
        if items.is_empty() {
            return Ok(());
        }
        let sha = self.conn.put_sha.clone();
        let cmds: Vec<Command> = items
            .iter()
            .map(|i| put_command(&sha, shard, geometry, i, "1"))
            .collect();
        match self.conn.run(&cmds) {
            Some(_) => Ok(()),
            None => Err(self.conn.failed.clone().unwrap_or_else(|| {
                format!("redis at {}: install failed", self.conn.client.addr())
            })),
        }
    }
}

/// A shard kept in a stock `redis-server` (layout and reasoning in the module doc).
#[derive(Debug)]
pub struct RedisShard {
    conn: Arc<Mutex<Conn>>,
    shard: ShardId,
    geometry: Geometry,
}

impl RedisShard {
    /// Opens shard `shard` of shape `geometry` in the Redis at `addr` on a connection of its own
    /// (for inspection; servers share one connection through [`redis_stores`]).
    pub fn open(addr: &str, config: Config, shard: ShardId, geometry: Geometry) -> Result<Self> {
        Ok(Self {
            conn: Arc::new(Mutex::new(Conn::open(addr, config)?)),
            shard,
            geometry,
        })
    }

    fn kv(&self, key: Key) -> Vec<u8> {
        format!("kv:{}:{key}", self.shard).into_bytes()
    }

    fn kv_prefix(&self) -> String {
        format!("kv:{}:", self.shard)
    }

    fn grp(&self, group: u32) -> Vec<u8> {
        format!("grp:{}:{group}", self.shard).into_bytes()
    }

    fn live_key(&self) -> Vec<u8> {
        format!("live:{}", self.shard).into_bytes()
    }

    fn with<T>(&self, f: impl FnOnce(&mut Conn) -> T) -> T {
        match self.conn.lock() {
            Ok(mut c) => f(&mut c),
            Err(p) => f(&mut p.into_inner()),
        }
    }

    fn put_cmd(&self, sha: &str, item: &Item, only_if_newer: bool) -> Command {
        self.put_cmd_mode(sha, item, if only_if_newer { "1" } else { "0" })
    }

    fn put_cmd_mode(&self, sha: &str, item: &Item, mode: &str) -> Command {
        put_command(sha, self.shard, self.geometry, item, mode)
    }

    fn write(&mut self, items: &[Item], only_if_newer: bool) -> Vec<bool> {
        if items.is_empty() {
            return Vec::new();
        }
        self.with(|c| {
            let sha = c.put_sha.clone();
            let cmds: Vec<Command> = items
                .iter()
                .map(|i| self.put_cmd(&sha, i, only_if_newer))
                .collect();
            match c.run(&cmds) {
                Some(replies) => replies
                    .iter()
                    .map(|r| matches!(r, Reply::Integer(1)))
                    .collect(),
                None => vec![false; items.len()],
            }
        })
    }

    fn decode_or_fail(&self, c: &mut Conn, key: Key, bytes: &[u8]) -> Option<Item> {
        let item = decode_entry(key, bytes);
        if item.is_none() {
            c.fail(format!(
                "shard {} key {key}: stored bytes are not an entry (written by something else?)",
                self.shard
            ));
        }
        item
    }
}

impl RedisShard {
    /// Deletes everything of this shard in its Redis, whatever shape it was stored with (a
    /// leftover of an aborted incoming migration must not meet the next one: it may hold a write
    /// that was never acknowledged). Walks the keyspace with `SCAN MATCH`, once per new store.
    fn purge(&mut self) {
        let patterns = [
            format!("kv:{}:*", self.shard),
            format!("grp:{}:*", self.shard),
        ];
        self.with(|c| {
            for pattern in &patterns {
                let mut cursor = b"0".to_vec();
                for _ in 0..PURGE_SCANS_MAX {
                    let cmd = Command::new("SCAN")
                        .arg(&cursor)
                        .arg("MATCH")
                        .arg(pattern)
                        .arg("COUNT")
                        .arg(PURGE_SCAN_COUNT.to_string());
                    let replies = c.run(std::slice::from_ref(&cmd));
                    let keys = match replies.as_deref() {
                        Some([Reply::Array(Some(parts))]) => match parts.as_slice() {
                            [Reply::Bulk(Some(next)), Reply::Array(Some(keys))] => {
                                cursor = next.clone();
                                keys.clone()
                            }
                            other => {
                                c.fail(format!("SCAN answered {other:?}"));
                                return;
                            }
                        },
                        None => return,
                        Some(other) => {
                            c.fail(format!("SCAN answered {other:?}"));
                            return;
                        }
                    };
                    let names: Vec<&[u8]> = keys
                        .iter()
                        .filter_map(|k| match k {
                            Reply::Bulk(Some(k)) => Some(k.as_slice()),
                            _ => None,
                        })
                        .collect();
                    if !names.is_empty() {
                        let del = names.iter().fold(Command::new("DEL"), |d, k| d.arg(k));
                        if c.run(&[del]).is_none() {
                            return;
                        }
                    }
                    if cursor == b"0" {
                        break;
                    }
                }
                if cursor != b"0" {
                    c.fail(format!(
                        "purge of {pattern} took over {PURGE_SCANS_MAX} SCANs"
                    ));
                    return;
                }
            }
            c.run(&[Command::new("DEL").arg(self.live_key())]);
        });
    }
}

impl ShardStore for RedisShard {
    /// An install is a pipeline of scripts over RESP: it runs on a second connection to the
    /// same Redis, so the queries on this one never wait behind it.
    fn installer(&self) -> Result<Option<Box<dyn Installer>>> {
        let (addr, config) = self.with(|c| (c.client.addr().to_string(), c.config));
        Ok(Some(Box::new(RedisInstaller {
            conn: Conn::open(&addr, config)?,
        })))
    }

    fn geometry(&self) -> Geometry {
        self.geometry
    }

    fn live(&self) -> usize {
        let cmd = Command::new("GET").arg(self.live_key());
        self.with(|c| match c.run(std::slice::from_ref(&cmd)).as_deref() {
            Some([Reply::Bulk(Some(n))]) => std::str::from_utf8(n)
                .ok()
                .and_then(|n| n.parse::<i64>().ok())
                .map_or(0, |n| n.max(0) as usize),
            _ => 0,
        })
    }

    fn get(&self, key: Key) -> Option<Item> {
        let cmd = Command::new("GET").arg(self.kv(key));
        self.with(|c| match c.run(std::slice::from_ref(&cmd)).as_deref() {
            Some([Reply::Bulk(Some(bytes))]) => self.decode_or_fail(c, key, bytes),
            Some([Reply::Bulk(None)]) | None => None,
            Some(other) => {
                c.fail(format!("GET answered {other:?}"));
                None
            }
        })
    }

    fn version(&self, key: Key) -> u64 {
        self.get(key).map_or(0, |i| i.version)
    }

    fn put(&mut self, item: Item) {
        self.write(std::slice::from_ref(&item), false);
    }

    fn put_next(&mut self, key: Key, candidate: u64, value: Option<Vec<u8>>) -> u64 {
        let item = Item {
            key,
            version: candidate,
            value,
        };
        self.with(|c| {
            let cmd = self.put_cmd_mode(&c.put_sha.clone(), &item, "2");
            match c.run(std::slice::from_ref(&cmd)).as_deref() {
                Some([Reply::Bulk(Some(hex))]) => {
                    match std::str::from_utf8(hex)
                        .ok()
                        .and_then(|h| u64::from_str_radix(h, 16).ok())
                    {
                        Some(v) => v,
                        None => {
                            c.fail(format!("the write script answered {hex:?}"));
                            candidate
                        }
                    }
                }
                // A failed store: the node goes down on this step (see `health`).
                None => candidate,
                Some(other) => {
                    c.fail(format!("the write script answered {other:?}"));
                    candidate
                }
            }
        })
    }

    fn install_if_newer(&mut self, item: Item) -> bool {
        self.write(std::slice::from_ref(&item), true)
            .first()
            .copied()
            .unwrap_or(false)
    }

    fn install_batch(&mut self, items: Vec<Item>) {
        self.write(&items, true);
    }

    fn scan_group(&self, group: u32) -> Vec<Item> {
        self.with(|c| {
            let cmd = Command::new("EVALSHA")
                .arg(&c.scan_sha)
                .arg("1")
                .arg(self.grp(group))
                .arg(self.kv_prefix());
            let replies = c.run(std::slice::from_ref(&cmd));
            let flat = match replies.as_deref() {
                Some([Reply::Array(Some(flat))]) => flat,
                Some([Reply::Array(None)]) => return Vec::new(),
                None => return Vec::new(),
                Some(other) => {
                    c.fail(format!("group {group}: scan script answered {other:?}"));
                    return Vec::new();
                }
            };
            let mut items = Vec::with_capacity(flat.len() / 2);
            for pair in flat.chunks(2) {
                let [Reply::Bulk(Some(k)), Reply::Bulk(Some(v))] = pair else {
                    c.fail(format!("group {group}: scan script answered {pair:?}"));
                    return Vec::new();
                };
                let Some(key) = std::str::from_utf8(k).ok().and_then(|k| k.parse().ok()) else {
                    c.fail(format!("group {group}: set member {k:?} is not a key"));
                    return Vec::new();
                };
                let Some(item) = self.decode_or_fail(c, key, v) else {
                    return Vec::new();
                };
                // Absent-markers (version 0) are not entries to migrate.
                if item.version != 0 {
                    items.push(item);
                }
            }
            items
        })
    }

    fn clear(&mut self) {
        self.with(|c| {
            let groups = self.geometry.groups();
            let mut first = 0;
            while first < groups {
                let end = first.saturating_add(CLEAR_GROUPS_PER_PIPELINE).min(groups);
                let cmds: Vec<Command> = (first..end)
                    .map(|g| {
                        Command::new("EVALSHA")
                            .arg(&c.clear_sha)
                            .arg("1")
                            .arg(self.grp(g))
                            .arg(self.kv_prefix())
                    })
                    .collect();
                if c.run(&cmds).is_none() {
                    return;
                }
                first = end;
            }
            c.run(&[Command::new("DEL").arg(self.live_key())]);
        });
    }

    fn health(&self) -> std::result::Result<(), String> {
        self.with(|c| c.failed.clone().map_or(Ok(()), Err))
    }
}

/// The store factory for a server keeping its shards in the Redis at `addr`: one connection
/// (scripts loaded once) shared by every shard it holds, for queries and scans; its node opens
/// one more for installs ([`RedisInstaller`]). Each store starts empty, as the
/// built-in server's tables do (anything of that shard already in the Redis is purged).
pub fn redis_stores(addr: &str, config: Config) -> Result<StoreFactory<RedisShard>> {
    let conn = Arc::new(Mutex::new(Conn::open(addr, config)?));
    Ok(Box::new(move |shard, geometry| {
        let mut store = RedisShard {
            conn: conn.clone(),
            shard,
            geometry,
        };
        store.purge();
        store
    }))
}

/// RESP settings of the agents: short I/O bounds, so a dead Redis fails its agent in well under
/// the source's ack timeout.
pub fn agent_resp_config() -> Config {
    Config {
        connect_timeout_ms: 1_000,
        io_timeout_ms: 2_000,
        ..Config::default()
    }
}

/// Starts a [`Cluster`] whose server `i` (1-based) keeps its shards in the Redis at `addrs[i-1]`.
pub fn start_redis_cluster(
    cfg: crate::runtime::ClusterConfig,
    addrs: &[String],
) -> Result<Cluster> {
    if addrs.len() != cfg.servers as usize {
        return Err(Error::RedisAddressCount {
            addrs: addrs.len(),
            servers: cfg.servers,
        });
    }
    let transport = Arc::new(InProcess::new(cfg.nodes()));
    let addrs = addrs.to_vec();
    Cluster::start_with_stores(cfg, transport, move |id: NodeId| {
        let addr = addrs
            .get(id as usize - 1)
            .ok_or(Error::RedisAddressMissing { server: id })?;
        redis_stores(addr, agent_resp_config())
    })
}

/// [`crate::measure::measure`] with both servers' shards in private `redis-server`s started from
/// `redis_bin` (killed afterwards): the same load, migration and report, over stock Redis.
pub fn measure_redis(
    cfg: &MeasureConfig,
    choose: OpChooser,
    redis_bin: &Path,
) -> Result<MeasureReport> {
    let source = RedisProcess::start(redis_bin)?;
    let destination = RedisProcess::start(redis_bin)?;
    let addrs = [source.addr().to_string(), destination.addr().to_string()];
    measure_on(cfg, choose, |cc| start_redis_cluster(cc, &addrs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_reject_garbage() {
        for item in [
            Item {
                key: 7,
                version: u64::MAX,
                value: Some(b"\r\n\x00v".to_vec()),
            },
            Item {
                key: 7,
                version: 0,
                value: None,
            },
            Item {
                key: 7,
                version: (3 << 48) | 5,
                value: Some(Vec::new()),
            },
        ] {
            assert_eq!(decode_entry(7, &encode_entry(&item)), Some(item));
        }
        assert_eq!(decode_entry(1, b"short"), None);
        assert_eq!(decode_entry(1, b"000000000000000zv"), None);
        assert_eq!(decode_entry(1, b"0000000000000001x"), None);
        assert_eq!(decode_entry(1, b"0000000000000001dtrailing"), None);
    }
}
