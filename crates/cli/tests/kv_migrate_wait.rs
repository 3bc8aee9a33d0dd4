//! `locus kv migrate --wait` against a scripted router (a test socket that answers the
//! management datagrams as the router and server 1 would): it follows the attempt it started,
//! not an earlier one of the same shard still listed, and it outlives a router that stops
//! answering for a while. Nothing here depends on speed: the scripted router answers by
//! counting requests, and every child is killed at the end.

use std::io::Read;
use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const ADMIN_MAGIC: &[u8] = b"LKADM1 ";

/// A router port free now, with room above it for the node ports (`kv` addressing).
fn free_router() -> UdpSocket {
    let seed = std::process::id() as u16;
    for i in 0..200u16 {
        let base = 20_000 + (seed.wrapping_mul(13).wrapping_add(i * 173)) % 40_000;
        if let Ok(s) = UdpSocket::bind(("127.0.0.1", base)) {
            return s;
        }
    }
    panic!("no free loopback port found");
}

fn send(sock: &UdpSocket, v: &Value, to: SocketAddr) {
    let mut b = ADMIN_MAGIC.to_vec();
    b.extend_from_slice(v.to_string().as_bytes());
    sock.send_to(&b, to).expect("send");
}

fn migration(attempt: u64, phase: &str, error: Option<&str>) -> Value {
    json!({"attempt": attempt, "shard": 1, "source": 1, "destination": 2,
           "protocol": "netmigrate", "phase": phase, "groups_done": 0, "groups_total": 4,
           "elapsed_us": 1000, "groups_per_s": 0.0, "idle_us": 0, "errors": 0,
           "last_error": error, "late_writes": 0, "dirty_rounds": 0, "pause_us": 0})
}

struct Wait {
    child: Child,
}

impl Drop for Wait {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `kv migrate --wait` against a scripted router: `migrations(n)` is what server 1 lists
/// at the `n`th status request (`None`: nobody answers it). Returns (success, stdout, stderr).
fn migrate_wait(
    attempt: u64,
    migrations: impl Fn(u32) -> Option<Vec<Value>>,
) -> (bool, String, String) {
    let sock = free_router();
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let router = sock.local_addr().expect("addr").to_string();
    let child = Command::new(env!("CARGO_BIN_EXE_locus"))
        .args([
            "kv", "migrate", "--router", &router, "--shard", "1", "--from", "1",
        ])
        .args(["--to", "2", "--wait", "--timeout-ms", "60000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn locus");
    let mut w = Wait { child };
    let mut statuses = 0u32;
    let mut buf = vec![0u8; 65536];
    let deadline = Instant::now() + Duration::from_secs(120);
    let ok = loop {
        if let Some(st) = w.child.try_wait().expect("try_wait") {
            break st.success();
        }
        assert!(Instant::now() < deadline, "kv migrate --wait never exited");
        let Ok((n, from)) = sock.recv_from(&mut buf) else {
            continue;
        };
        let Some(req) = buf[..n].strip_prefix(ADMIN_MAGIC) else {
            continue;
        };
        let req: Value = serde_json::from_slice(req).expect("admin JSON");
        match req["op"].as_str() {
            Some("migrate") => send(
                &sock,
                &json!({"ok": true, "server": 1, "attempt": attempt}),
                from,
            ),
            Some("migration_status") => {
                statuses += 1;
                if let Some(list) = migrations(statuses) {
                    let r = json!({"router": {"listen": router}, "servers": [1]});
                    send(&sock, &r, from);
                    send(&sock, &json!({"server": 1, "migrations": list}), from);
                }
            }
            other => panic!("unexpected request {other:?}"),
        }
    };
    let (mut out, mut err) = (String::new(), String::new());
    if let Some(o) = w.child.stdout.as_mut() {
        o.read_to_string(&mut out).expect("stdout");
    }
    if let Some(e) = w.child.stderr.as_mut() {
        e.read_to_string(&mut err).expect("stderr");
    }
    (ok, out, err)
}

#[test]
fn wait_reports_the_attempt_it_started_not_an_earlier_one() {
    // Server 1 lists running migrations first, then finished ones, newest last: the earlier
    // attempt 1 aborted stays listed while attempt 2 runs, and after attempt 2 finishes.
    let (ok, out, err) = migrate_wait(2, |n| {
        let old = migration(1, "Aborted", Some("an earlier attempt's error"));
        Some(match n {
            1 | 2 => vec![migration(2, "Copying", None), old],
            _ => vec![old, migration(2, "Done", None)],
        })
    });
    assert!(ok, "stdout: {out}\nstderr: {err}");
    assert!(out.contains("done in"), "{out}");
    assert!(!err.contains("earlier attempt"), "{err}");
}

#[test]
fn wait_outlives_a_router_that_stops_answering() {
    // The first three status requests go unanswered (a router restarting), then it is done.
    let (ok, out, err) = migrate_wait(1, |n| (n > 3).then(|| vec![migration(1, "Done", None)]));
    assert!(ok, "stdout: {out}\nstderr: {err}");
    assert!(out.contains("done in"), "{out}");
    assert!(err.contains("asking again"), "{err}");
}

#[test]
fn wait_reports_a_dead_source_from_its_destination() {
    // The source stops answering (its attempt vanishes from the lists); the destination lists
    // the shard as orphaned (attempt 0, phase SourceLost): --wait says so and how to decide.
    let why = "source server 1 did not answer PROBE; orphaned here: run `locus kv migration \
               recover` (the data is gone) or `abort`";
    let (ok, out, err) = migrate_wait(1, |n| {
        Some(match n {
            1 => vec![migration(1, "Copying", None)],
            _ => vec![migration(0, "SourceLost", Some(why))],
        })
    });
    assert!(!ok, "stdout: {out}\nstderr: {err}");
    assert!(err.contains("source stopped answering"), "{err}");
    assert!(err.contains("kv migration recover"), "{err}");
}

#[test]
fn readme_names_netmigrates_venue_as_usenix_fast24() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"))
        .expect("README.md");
    assert!(
        !readme.contains("CoNEXT"),
        "NetMigrate appeared at USENIX FAST'24, not CoNEXT'24"
    );
    assert!(readme.contains("NetMigrate (USENIX FAST'24)"));
}
