//! The commands that talk to a running `locus kv` deployment through its router: `get` and
//! `set` (wire queries from a client socket at router port + a free client id), `migrate` and
//! `migration status` (management datagrams from an ephemeral socket).

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use locus_kvmigrate::auth::{Opener, Sealer};
use locus_kvmigrate::client::{Outcome, ReplyMerger};
use locus_kvmigrate::wire::{Body, NodeId, Packet, Status, DATAGRAM_BYTES_MAX, VALUE_BYTES_MAX};
use serde_json::{json, Value};

use super::{
    datagram_key, parse_protocol, Admin, Book, GetArgs, MigrateArgs, OrphanArgs, SetArgs,
    StatusArgs, CLIENT_IDS_TRIED, CLIENT_ID_MIN, SERVERS_MAX,
};

fn recv_timeout(
    sock: &UdpSocket,
    buf: &mut [u8],
    wait: Duration,
) -> Result<Option<(usize, SocketAddr)>, String> {
    locus_kvmigrate::transport::recv_within(sock, buf, wait).map_err(|e| format!("recv: {e}"))
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
fn query(router: &str, shard: u16, body: Body, timeout_ms: u64) -> Result<Outcome, String> {
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
    let key = datagram_key()?;
    if let Some(k) = &key {
        Sealer::new(k.clone(), id).seal(&mut buf);
    }
    // Replies come from servers (or the router, for a shard it cannot place).
    let mut opener = key.map(|k| Opener::new(k, 0));
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
        let Some((n, from)) = recv_timeout(&sock, &mut rbuf, left)? else {
            continue;
        };
        let bytes = match opener.as_mut() {
            Some(o) => match o.open(&rbuf[..n], |sender| book.addr(sender) == Some(from)) {
                Ok(b) => b,
                Err(_) => continue,
            },
            None => &rbuf[..n],
        };
        let Ok(r) = Packet::decode(bytes) else {
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

pub(super) fn get(a: GetArgs) -> Result<(), String> {
    let o = query(&a.router, a.shard, Body::Get { key: a.key }, a.timeout_ms)?;
    match o.status {
        Status::Ok => {
            println!("{}", printable(&o.value));
            Ok(())
        }
        Status::NotFound => Err(format!("key {} not found in shard {}", a.key, a.shard)),
        Status::Lost => Err(printable(&o.value)),
        _ => Err(format!("server refused GET {} in shard {}", a.key, a.shard)),
    }
}

pub(super) fn set(a: SetArgs) -> Result<(), String> {
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

/// `kv migration recover` (`recover`) or `abort`: the operator's decision on a shard whose
/// source died mid-migration (design: "NetMigrate: a dead source").
pub(super) fn orphan(a: OrphanArgs, recover: bool) -> Result<(), String> {
    let book = Book::parse("--router", &a.router)?;
    for (flag, v) in [("--shard", a.shard), ("--server", a.server)] {
        if v == 0 || v > SERVERS_MAX {
            return Err(format!(
                "{flag} {v}: must be a server id in 1..={SERVERS_MAX}"
            ));
        }
    }
    let op = if recover { "recover" } else { "abort" };
    let req = json!({"op": op, "shard": a.shard, "server": a.server});
    let got = admin(&book, &req, |g| !g.is_empty(), a.timeout_ms)?;
    let Some(r) = got.first() else {
        return Err(format!(
            "no answer within {} ms from the router at {} or server {}",
            a.timeout_ms,
            book.router(),
            a.server
        ));
    };
    if r["ok"] != json!(true) {
        return Err(format!(
            "{op} refused: {}",
            r["error"].as_str().unwrap_or("no reason given")
        ));
    }
    if recover {
        println!(
            "shard {} is owned by server {}; keys of the groups not copied read as absent",
            a.shard, a.server
        );
    } else {
        println!(
            "server {} dropped shard {}; the router sends it back to its source",
            a.server, a.shard
        );
    }
    Ok(())
}

/// Sends an admin request to the router and collects answers until `want` arrived or the timeout.
/// The request goes from a client port, so that its seal names a node whose address the
/// router can check (module doc of `kv`).
fn admin(
    router: &Book,
    req: &Value,
    want: impl Fn(&[Value]) -> bool,
    timeout_ms: u64,
) -> Result<Vec<Value>, String> {
    let (sock, id) = client_socket(router)?;
    let mut seal = Admin::new(*router, id)?;
    sock.send_to(&seal.bytes(req), router.router())
        .map_err(|e| format!("send to router {}: {e}", router.router()))?;
    let deadline = Instant::now() + Duration::from_millis(timeout_ms);
    let mut got = Vec::new();
    let mut buf = vec![0u8; DATAGRAM_BYTES_MAX];
    while !want(&got) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        if let Some((n, from)) = recv_timeout(&sock, &mut buf, left)? {
            if let Some(Ok(v)) = seal.parse(&buf[..n], from) {
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

pub(super) fn migrate(a: MigrateArgs) -> Result<(), String> {
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
    // The source numbers its migrations; --wait follows this one, not an earlier attempt of
    // the same shard still listed among the finished ones.
    let attempt = r["attempt"].as_u64();
    println!(
        "migration of shard {} from server {} to server {} ({}) started",
        a.shard, a.from, a.to, a.protocol
    );
    if !a.wait {
        return Ok(());
    }
    let deadline = Instant::now() + Duration::from_millis(a.timeout_ms);
    loop {
        // A router that does not answer (restarting, say) is waited for until the deadline.
        let left_ms = deadline
            .saturating_duration_since(Instant::now())
            .as_millis() as u64;
        let st = match collect_status(&book, left_ms.clamp(1, 1000)) {
            Ok(st) => st,
            Err(e) => {
                eprintln!("  {e}; asking again");
                json!({"migrations": []})
            }
        };
        let mine = st["migrations"]
            .as_array()
            .and_then(|m| attempt_of(m, a.shard, a.from, attempt));
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
        // A dead source answers no status: its destination says what became of the shard.
        let orphan = st["migrations"].as_array().and_then(|ms| {
            ms.iter()
                .find(|m| {
                    m["shard"] == json!(a.shard)
                        && m["source"] == json!(a.from)
                        && m["destination"] == json!(a.to)
                        && m["phase"] == json!("SourceLost")
                })
                .cloned()
        });
        if let Some(m) = orphan {
            return Err(format!(
                "the source stopped answering: {}",
                m["last_error"].as_str().unwrap_or("no reason given")
            ));
        }
        if Instant::now() >= deadline {
            return Err(format!("migration not finished after {} ms", a.timeout_ms));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The status of the migration `kv migrate` started: its attempt number, or (from a server
/// that does not number them) the running migration of the shard, listed first.
fn attempt_of(
    migrations: &[Value],
    shard: u16,
    source: u16,
    attempt: Option<u64>,
) -> Option<Value> {
    migrations
        .iter()
        .find(|m| {
            m["shard"] == json!(shard)
                && m["source"] == json!(source)
                && attempt.is_none_or(|n| m["attempt"] == json!(n))
        })
        .cloned()
}

pub(super) fn status(a: StatusArgs) -> Result<(), String> {
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
    // Datagram MACs (LOCUS_SECRET): what the router and each server dropped, of wire packets
    // and of management datagrams.
    let nodes = std::iter::once(("router".to_string(), r)).chain(
        st["servers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| (format!("server {}", v["server"]), v)),
    );
    for (who, n) in nodes {
        for (what, a) in [
            ("datagram MACs", &n["auth"]),
            ("management MACs", &n["admin_auth"]),
        ] {
            if a.is_object() {
                println!(
                    "{who}: {what}: {} accepted; dropped {} bad MAC, {} replayed, {} wrong sender, {} short",
                    a["accepted"], a["bad_mac"], a["replayed"], a["wrong_sender"], a["short"]
                );
            }
        }
    }
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
