//! `locus kv migration recover|abort`, the operator's decision on a shard whose source died
//! mid-migration (design: "NetMigrate: a dead source"), as a user meets them against running
//! processes: the request reaches the named server through the router, and a server with no
//! orphaned shard refuses it saying so; bad flags are refused with the flag named. (The orphan
//! itself, and both commands' effects, are checked in `kvmigrate/tests/source_dies.rs`.)
//! Nothing here depends on speed: every wait is a poll with a generous bound, and every child
//! is killed at the end.

use std::net::UdpSocket;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn locus() -> Command {
    Command::new(env!("CARGO_BIN_EXE_locus"))
}

fn run(args: &[&str]) -> Output {
    locus().args(args).output().expect("spawn locus")
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

/// A base port whose router, server 1, server 2 and first client ports are free now.
fn free_base() -> u16 {
    let seed = std::process::id() as u16;
    for i in 0..200u16 {
        let base = 20_000 + (seed.wrapping_mul(11).wrapping_add(i * 149)) % 40_000;
        let free = [0u16, 1, 2, 100]
            .iter()
            .all(|o| UdpSocket::bind(("127.0.0.1", base + o)).is_ok());
        if free {
            return base;
        }
    }
    panic!("no free loopback ports found");
}

fn spawn(args: &[&str]) -> Child {
    locus()
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn locus")
}

#[test]
fn recover_and_abort_reach_the_server_and_refuse_without_an_orphan() {
    let base = free_base();
    let router = format!("127.0.0.1:{base}");
    let r = router.as_str();
    let life = "120000";
    let mut procs = Procs(Vec::new());
    procs.0.push(spawn(&[
        "kv",
        "router",
        "--listen",
        r,
        "--lifetime-ms",
        life,
    ]));
    for id in ["1", "2"] {
        procs.0.push(spawn(&[
            "kv",
            "server",
            "--router",
            r,
            "--id",
            id,
            "--records",
            "10",
            "--buckets-log2",
            "6",
            "--lifetime-ms",
            life,
        ]));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    for cmd in ["recover", "abort"] {
        // Until server 2 has said hello, the router answers that it does not know it.
        let err = loop {
            let out = run(&[
                "kv",
                "migration",
                cmd,
                "--router",
                r,
                "--shard",
                "1",
                "--server",
                "2",
            ]);
            assert!(!out.status.success(), "{cmd} without an orphan succeeded");
            let err = text(&out.stderr);
            if err.contains("no orphaned shard") {
                break err;
            }
            assert!(Instant::now() < deadline, "{cmd}: {err}");
            std::thread::sleep(Duration::from_millis(100));
        };
        assert!(err.contains(&format!("{cmd} refused")), "{err}");
        assert!(err.contains("server 2"), "{err}");
    }
    for c in &mut procs.0 {
        assert!(c.try_wait().expect("try_wait").is_none(), "a process died");
    }
    drop(procs);
}

#[test]
fn bad_flags_name_the_flag() {
    for (args, want) in [
        (&["--shard", "0", "--server", "2"][..], "--shard 0"),
        (&["--shard", "1", "--server", "65"][..], "--server 65"),
    ] {
        let mut all = vec!["kv", "migration", "recover", "--router", "127.0.0.1:7000"];
        all.extend_from_slice(args);
        let out = run(&all);
        assert!(!out.status.success());
        assert!(text(&out.stderr).contains(want), "{}", text(&out.stderr));
    }
}
