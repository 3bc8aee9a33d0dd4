//! What the tests that run real cluster processes share: `locus` itself, a
//! cluster started by `locus cluster up` (stopped on drop), a random graph
//! and its k-hop reference; [`kv`], the `locus kv` router and servers;
//! [`writer`], a writer of unique edges and the check that they read back.

#![allow(dead_code)] // Each test file uses its own share of these.

pub mod kv;
pub mod writer;

use std::collections::HashMap;
use std::process::Command;

use locus_client::{Client, ClientConfig};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

pub const SERVERS: usize = 3;
pub const VERTICES: u32 = 600;

pub fn locus(args: &[&str]) -> std::process::Output {
    locus_with_env(args, &[])
}

/// `locus` with more environment variables (inherited by what it starts).
/// `locus args` that must succeed, its stdout parsed as JSON.
pub fn locus_json(args: &[&str]) -> serde_json::Value {
    let o = locus(args);
    assert!(
        o.status.success(),
        "{args:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&o.stdout)))
}

pub fn locus_with_env(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_locus"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run locus")
}

/// Starts a cluster in `dir`; stops it on drop.
pub struct Cluster {
    pub dir: tempfile::TempDir,
}

impl Cluster {
    /// Three servers and a coordinator (Pragh's 10 s interval).
    pub fn up() -> Cluster {
        Cluster::up_with(&[])
    }

    /// As [`Cluster::up`], with more `cluster up` flags (a `--value-region-mb`
    /// or `--servers` among them replaces the default 32 or 3).
    pub fn up_with(extra: &[&str]) -> Cluster {
        Cluster::up_with_env(extra, &[])
    }

    /// As [`Cluster::up_with`], with environment variables for `cluster up`
    /// and the processes it starts.
    pub fn up_with_env(extra: &[&str], env: &[(&str, &str)]) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap();
        let mut args = vec!["cluster", "up", "--dir", d, "--lifetime-s", "300"];
        if !extra.contains(&"--servers") {
            args.extend(["--servers", "3"]);
        }
        if !extra.contains(&"--value-region-mb") {
            args.extend(["--value-region-mb", "32"]);
        }
        args.extend_from_slice(extra);
        let o = locus_with_env(&args, env);
        assert!(
            o.status.success(),
            "cluster up: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        Cluster { dir }
    }

    pub fn file(&self) -> std::path::PathBuf {
        self.dir.path().join("cluster.toml")
    }

    pub fn client(&self) -> Client {
        Client::from_file(&self.file(), ClientConfig::default()).unwrap()
    }

    /// `cluster up --dir` after `victim` (whose pid was `old_pid`) died:
    /// it must succeed, restart only the victim, under a new pid. Returns
    /// what it printed.
    pub fn restart_victim(&self, victim: u8, old_pid: u32) -> String {
        let o = locus(&["cluster", "up", "--dir", self.dir.path().to_str().unwrap()]);
        let out = String::from_utf8_lossy(&o.stdout).to_string();
        assert!(
            o.status.success(),
            "cluster up (restart): {out}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            out.contains("restarted 1 of"),
            "only the victim restarts: {out}"
        );
        assert_ne!(self.pid(victim), old_pid, "server {victim} has a new pid");
        out
    }

    pub fn pid(&self, id: u8) -> u32 {
        let pids: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(self.dir.path().join("pids.json")).unwrap(),
        )
        .unwrap();
        pids.as_array()
            .unwrap()
            .iter()
            .find(|p| p["id"] == id)
            .unwrap()["pid"]
            .as_u64()
            .unwrap() as u32
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // A failing test keeps its cluster's files (logs, write-ahead logs)
        // and says where: `LOCUS_TEST_KEEP_FAILED`, else a new directory
        // under the temporary directory.
        if std::thread::panicking() {
            let to = std::env::var_os("LOCUS_TEST_KEEP_FAILED")
                .map(std::path::PathBuf::from)
                .unwrap_or_else(|| {
                    let nanos = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_nanos());
                    std::env::temp_dir()
                        .join(format!("locus-test-failed-{}-{nanos}", std::process::id()))
                });
            let copied = std::process::Command::new("cp")
                .arg("-r")
                .arg(self.dir.path())
                .arg(&to)
                .status()
                .is_ok_and(|s| s.success());
            if copied {
                eprintln!(
                    "the failed test's cluster files (logs, WALs) are in {}",
                    to.display()
                );
            }
        }
        let _ = locus(&[
            "cluster",
            "down",
            "--dir",
            self.dir.path().to_str().unwrap(),
        ]);
    }
}

/// A random graph as adjacency lists (some vertices with many neighbours).
pub fn graph(seed: u64) -> Vec<Vec<u32>> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..VERTICES)
        .map(|v| {
            let d = if v % 97 == 0 {
                300
            } else {
                rng.gen_range(1..12)
            };
            let mut l: Vec<u32> = (0..d).map(|_| rng.gen_range(0..VERTICES)).collect();
            l.sort_unstable();
            l.dedup();
            l
        })
        .collect()
}

/// The k-hop reference: frontier semantics of docs/protocol.md.
pub fn khop_ref(g: &[Vec<u32>], v: u32, hops: u8, k: usize) -> (Vec<u32>, u64) {
    let mut frontier = vec![v];
    for _ in 0..hops {
        let mut next = Vec::new();
        for &u in &frontier {
            next.extend(g[u as usize].iter().take(k));
        }
        frontier = next;
    }
    let n = frontier.len() as u64;
    frontier.sort_unstable();
    frontier.dedup();
    (frontier, n)
}

pub fn load(c: &Client, g: &[Vec<u32>]) {
    let mut by_home: HashMap<u8, Vec<(u32, Vec<u32>)>> = HashMap::new();
    for (v, l) in g.iter().enumerate() {
        by_home
            .entry(c.home(v as u32))
            .or_default()
            .push((v as u32, l.clone()));
    }
    for (home, batch) in by_home {
        let n = batch.len() as u32;
        let (vertices, _) = c.load_batch(home, batch, None).unwrap();
        assert_eq!(vertices, n);
    }
}

/// The body of `GET /metrics` at `addr` (bounded in time).
pub fn scrape(addr: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    text
}

/// The value of the sample `name` (with its labels, as rendered) in `text`.
pub fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}
