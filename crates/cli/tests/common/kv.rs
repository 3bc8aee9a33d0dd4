//! What the tests of `locus kv` processes share: `locus` with or without the cluster secret,
//! a free base port, the router and servers as children killed on drop, `kv migration status`
//! as JSON, and a bounded poll. Nothing here depends on speed: every wait is a poll with a
//! generous bound.

use std::net::UdpSocket;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long a poll waits before the test fails (a loaded machine is slow, never wrong).
pub const PATIENCE: Duration = Duration::from_secs(60);
/// `--lifetime-ms` of every child: a bound should a test's drop never run.
pub const LIFETIME_MS: &str = "120000";

/// `locus` with `LOCUS_SECRET` set to `secret`, or unset.
pub fn command(secret: Option<&str>) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_locus"));
    match secret {
        Some(s) => c.env("LOCUS_SECRET", s),
        None => c.env_remove("LOCUS_SECRET"),
    };
    c
}

/// Runs `locus ARGS` without a secret.
pub fn run(args: &[&str]) -> Output {
    run_with(None, args)
}

/// Runs `locus ARGS` with `secret`.
pub fn run_with(secret: Option<&str>, args: &[&str]) -> Output {
    command(secret).args(args).output().expect("spawn locus")
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A base port whose router (+0), servers 1 and 2 and first client ports (+100, +101) are
/// free now.
pub fn free_base() -> u16 {
    let seed = std::process::id() as u16;
    for i in 0..200u16 {
        let base = 20_000 + (seed.wrapping_mul(7).wrapping_add(i * 131)) % 40_000;
        let free = [0u16, 1, 2, 100, 101]
            .iter()
            .all(|o| UdpSocket::bind(("127.0.0.1", base + o)).is_ok());
        if free {
            return base;
        }
    }
    panic!("no free loopback ports found");
}

/// `locus kv` processes of one deployment (all with one secret, or none), killed and reaped
/// when the test ends, however it ends.
pub struct Procs {
    secret: Option<String>,
    children: Vec<Child>,
}

impl Procs {
    pub fn new(secret: Option<&str>) -> Self {
        Self {
            secret: secret.map(str::to_string),
            children: Vec::new(),
        }
    }

    /// Starts `locus ARGS --lifetime-ms LIFETIME_MS`, its output discarded.
    pub fn spawn(&mut self, args: &[&str]) {
        let child = command(self.secret.as_deref())
            .args(args)
            .args(["--lifetime-ms", LIFETIME_MS])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn locus");
        self.children.push(child);
    }

    /// `kv router --listen ROUTER`.
    pub fn router(&mut self, router: &str) {
        self.spawn(&["kv", "router", "--listen", router]);
    }

    /// `kv server --router ROUTER --id ID` and `more` flags.
    pub fn server(&mut self, router: &str, id: &str, more: &[&str]) {
        let mut args = vec!["kv", "server", "--router", router, "--id", id];
        args.extend_from_slice(more);
        self.spawn(&args);
    }

    /// Fails the test if a child has exited.
    pub fn assert_alive(&mut self) {
        for c in &mut self.children {
            assert!(c.try_wait().expect("try_wait").is_none(), "a process died");
        }
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `kv migration status --json` through `router`, if it answered.
pub fn status_json(secret: Option<&str>, router: &str) -> Option<Value> {
    let out = run_with(
        secret,
        &["kv", "migration", "status", "--router", router, "--json"],
    );
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).ok())
        .flatten()
}

/// Polls `f` for up to [`PATIENCE`].
pub fn eventually<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
