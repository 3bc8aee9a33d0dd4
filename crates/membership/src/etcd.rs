//! A private etcd on loopback: its command line ([`EtcdSpec`]), a health
//! check ([`wait_healthy`]) and, for tests, an owned process killed on drop
//! ([`Etcd`]).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{MembershipError, Result};

/// Where one single-member etcd keeps its data and listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdSpec {
    /// Its data directory (created by etcd; an existing one is reused, which
    /// is how a restarted etcd keeps the membership, epochs and record).
    pub data_dir: PathBuf,
    /// The client URL's address (what Locus connects to).
    pub client: SocketAddr,
    /// The peer URL's address (unused by a single member, but etcd needs one).
    pub peer: SocketAddr,
}

impl EtcdSpec {
    /// The client endpoint, `http://ADDR`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.client)
    }

    /// The `etcd` command line (the binary is `etcd` on `PATH`, Debian's
    /// `etcd-server`). Its output is not redirected here.
    pub fn command(&self) -> Command {
        let client = format!("http://{}", self.client);
        let peer = format!("http://{}", self.peer);
        let mut c = Command::new("etcd");
        c.arg("--name")
            .arg("locus")
            .arg("--data-dir")
            .arg(&self.data_dir)
            .arg("--listen-client-urls")
            .arg(&client)
            .arg("--advertise-client-urls")
            .arg(&client)
            .arg("--listen-peer-urls")
            .arg(&peer)
            .arg("--initial-advertise-peer-urls")
            .arg(&peer)
            .arg("--initial-cluster")
            .arg(format!("locus={peer}"))
            .arg("--initial-cluster-state")
            .arg("new")
            .arg("--logger")
            .arg("zap")
            .arg("--log-outputs")
            .arg("stderr");
        c
    }
}

/// `n` distinct free ports on 127.0.0.1 (all bound at once, then released).
pub fn free_loopback_ports(n: usize) -> Result<Vec<u16>> {
    let listeners = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(|e| MembershipError::Process(format!("no free port on 127.0.0.1: {e}")))?;
    listeners
        .iter()
        .map(|l| {
            l.local_addr()
                .map(|a| a.port())
                .map_err(|e| MembershipError::Process(format!("a listener has no address: {e}")))
        })
        .collect()
}

/// One `GET /health` against the etcd at `client`: whether it says healthy.
fn healthy(client: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&client, Duration::from_millis(500)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = s.set_write_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /health HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut body = String::new();
    let _ = s.read_to_string(&mut body);
    body.contains("\"health\":\"true\"")
}

/// Waits until the etcd at `client` reports healthy, at most `timeout`.
pub fn wait_healthy(client: SocketAddr, timeout: Duration) -> Result<()> {
    let t0 = Instant::now();
    loop {
        if healthy(client) {
            return Ok(());
        }
        if t0.elapsed() > timeout {
            return Err(MembershipError::Process(format!(
                "etcd at {client} is not healthy after {} ms",
                timeout.as_millis()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// An etcd process owned by this one (tests): killed and reaped on drop.
#[derive(Debug)]
pub struct Etcd {
    spec: EtcdSpec,
    child: Option<Child>,
    _dir: Option<tempfile_dir::TempDir>,
}

/// A temporary directory removed on drop (kept minimal: no extra dependency).
mod tempfile_dir {
    use std::path::{Path, PathBuf};

    #[derive(Debug)]
    pub struct TempDir(PathBuf);

    impl TempDir {
        pub fn new() -> std::io::Result<TempDir> {
            use std::sync::atomic::{AtomicU64, Ordering};
            static SEQ: AtomicU64 = AtomicU64::new(0);
            let p = std::env::temp_dir().join(format!(
                "locus-etcd-{}-{}",
                std::process::id(),
                SEQ.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&p)?;
            Ok(TempDir(p))
        }
        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

impl Etcd {
    /// Starts etcd in a fresh temporary directory on free loopback ports and
    /// waits (at most 30 s) until it is healthy. Its log is
    /// `<dir>/etcd.log`.
    pub fn start_temp() -> Result<Etcd> {
        let dir = tempfile_dir::TempDir::new()
            .map_err(|e| MembershipError::Process(format!("cannot make a temp dir: {e}")))?;
        let mut e = Etcd::start_in(dir.path())?;
        e._dir = Some(dir);
        Ok(e)
    }

    /// Starts etcd with its data in `dir/etcd` on free loopback ports,
    /// logging to `dir/etcd.log`, and waits (at most 30 s) until it is healthy.
    /// A port taken between choosing and binding is retried with new ports.
    pub fn start_in(dir: &Path) -> Result<Etcd> {
        let mut last = None;
        for _ in 0..3 {
            let ports = free_loopback_ports(2)?;
            let spec = EtcdSpec {
                data_dir: dir.join("etcd"),
                client: SocketAddr::from(([127, 0, 0, 1], ports[0])),
                peer: SocketAddr::from(([127, 0, 0, 1], ports[1])),
            };
            match Etcd::spawn(spec, &dir.join("etcd.log")) {
                Ok(e) => return Ok(e),
                Err(err) => last = Some(err),
            }
        }
        Err(last.expect("three attempts"))
    }

    /// Starts etcd as `spec` says, its output appended to `log`, and waits
    /// (at most 30 s) until it is healthy.
    pub fn spawn(spec: EtcdSpec, log: &Path) -> Result<Etcd> {
        let command = spec.command();
        Etcd::spawn_command(spec, command, log)
    }

    /// As [`spawn`](Self::spawn), running `command` (`spec`'s command line
    /// run some other way: the fault lab's `ip netns exec NS etcd ...`).
    pub fn spawn_command(spec: EtcdSpec, mut command: Command, log: &Path) -> Result<Etcd> {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| MembershipError::Process(format!("cannot open {}: {e}", log.display())))?;
        let err = out
            .try_clone()
            .map_err(|e| MembershipError::Process(format!("{}: {e}", log.display())))?;
        let child = command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| {
                MembershipError::Process(format!(
                    "cannot start etcd ({e}): install Debian's etcd-server (scripts/setup does)"
                ))
            })?;
        let mut etcd = Etcd {
            spec,
            child: Some(child),
            _dir: None,
        };
        let t0 = Instant::now();
        loop {
            if healthy(etcd.spec.client) {
                return Ok(etcd);
            }
            if let Some(c) = etcd.child.as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    etcd.child = None;
                    return Err(MembershipError::Process(format!(
                        "etcd exited with {status} before it was healthy; see {}",
                        log.display()
                    )));
                }
            }
            if t0.elapsed() > Duration::from_secs(30) {
                return Err(MembershipError::Process(format!(
                    "etcd at {} is not healthy after 30 s; see {}",
                    etcd.spec.client,
                    log.display()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Its client endpoint, `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        self.spec.endpoint()
    }

    /// Where it runs.
    pub fn spec(&self) -> &EtcdSpec {
        &self.spec
    }

    /// Its process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills it (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.kill();
    }
}
