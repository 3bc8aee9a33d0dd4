//! `locus kv` with `LOCUS_SECRET` set: router and servers seal every wire packet with a MAC
//! (`kvmigrate::auth`); a client with the secret is served, one without it or with another is
//! not, and the router's drops show in `kv migration status`. Nothing here depends on speed:
//! every wait is a poll with a generous bound, and every child is killed at the end.

use std::net::UdpSocket;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const SECRET: &str = "a cluster secret of the test, 32+";

fn locus(secret: Option<&str>) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_locus"));
    match secret {
        Some(s) => c.env("LOCUS_SECRET", s),
        None => c.env_remove("LOCUS_SECRET"),
    };
    c
}

fn run(secret: Option<&str>, args: &[&str]) -> Output {
    locus(secret).args(args).output().expect("spawn locus")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn free_base() -> u16 {
    let seed = std::process::id() as u16;
    for i in 0..200u16 {
        let base = 20_000 + (seed.wrapping_mul(17).wrapping_add(i * 157)) % 40_000;
        let free = [0u16, 1, 100, 101]
            .iter()
            .all(|o| UdpSocket::bind(("127.0.0.1", base + o)).is_ok());
        if free {
            return base;
        }
    }
    panic!("no free loopback ports found");
}

#[test]
fn only_clients_with_the_secret_are_served_and_drops_are_counted() {
    let base = free_base();
    let router = format!("127.0.0.1:{base}");
    let r = router.as_str();
    let life = "120000";
    let spawn = |args: &[&str]| {
        locus(Some(SECRET))
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn locus")
    };
    let mut procs = Procs(Vec::new());
    procs.0.push(spawn(&[
        "kv",
        "router",
        "--listen",
        r,
        "--lifetime-ms",
        life,
    ]));
    procs.0.push(spawn(&[
        "kv",
        "server",
        "--router",
        r,
        "--id",
        "1",
        "--records",
        "10",
        "--buckets-log2",
        "6",
        "--lifetime-ms",
        life,
    ]));
    let get = |secret, timeout: &str| {
        run(
            secret,
            &[
                "kv",
                "get",
                "--router",
                r,
                "--shard",
                "1",
                "--timeout-ms",
                timeout,
                "5",
            ],
        )
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = get(Some(SECRET), "1000");
        if out.status.success() {
            assert_eq!(text(&out.stdout).trim(), "v5");
            break;
        }
        assert!(Instant::now() < deadline, "{}", text(&out.stderr));
        std::thread::sleep(Duration::from_millis(100));
    }
    // No secret, and another secret: never answered.
    for secret in [None, Some("another secret, another cluster")] {
        let out = get(secret, "500");
        assert!(!out.status.success());
        assert!(
            text(&out.stderr).contains("no reply"),
            "{}",
            text(&out.stderr)
        );
    }
    let st: Value = loop {
        let out = run(
            Some(SECRET),
            &["kv", "migration", "status", "--router", r, "--json"],
        );
        if let Ok(v) = serde_json::from_slice::<Value>(&out.stdout) {
            if v["servers"].as_array().is_some_and(|s| !s.is_empty()) {
                break v;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no status: {}",
            text(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let a = &st["router"]["auth"];
    let dropped = a["short"].as_u64().unwrap_or(0) + a["bad_mac"].as_u64().unwrap_or(0);
    assert!(dropped >= 2, "{a}");
    assert!(a["accepted"].as_u64().unwrap_or(0) >= 1, "{a}");
    let out = run(Some(SECRET), &["kv", "migration", "status", "--router", r]);
    assert!(
        text(&out.stdout).contains("datagram MACs"),
        "{}",
        text(&out.stdout)
    );
    for c in &mut procs.0 {
        assert!(c.try_wait().expect("try_wait").is_none(), "a process died");
    }
}
