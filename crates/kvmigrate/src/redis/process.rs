//! A private `redis-server` process on loopback: started on a free port with persistence off,
//! ready once it answers PING, killed when dropped (or on purpose, to fail a destination).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::resp::{Client, Config};

/// Bound on waiting for a started server to answer PING.
pub const STARTUP_MS_MAX: u64 = 20_000;
/// Ports tried (a probed free port may be taken before the server binds it).
pub const STARTUP_ATTEMPTS_MAX: u32 = 5;

/// A `redis-server` child process; killed and reaped on drop.
#[derive(Debug)]
pub struct RedisProcess {
    child: Option<Child>,
    addr: String,
    bin: PathBuf,
}

fn free_port() -> Result<u16> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|source| Error::Io {
            what: "choosing a port for redis-server: cannot bind an ephemeral port on 127.0.0.1"
                .into(),
            source,
        })
}

impl RedisProcess {
    /// Starts `redis_bin` (for example `redis-server` from PATH) on `127.0.0.1` with
    /// `--save "" --appendonly no` and waits until it answers PING.
    pub fn start(redis_bin: &Path) -> Result<Self> {
        let not_runnable = |why: String| Error::RedisNotRunnable {
            bin: redis_bin.to_path_buf(),
            why,
        };
        match Process::new(redis_bin).arg("--version").output() {
            Ok(out) if out.status.success() => {}
            Ok(out) => return Err(not_runnable(format!("`--version` exited {}", out.status))),
            Err(e) => return Err(not_runnable(e.to_string())),
        }
        let mut last = String::new();
        for _ in 0..STARTUP_ATTEMPTS_MAX {
            let port = free_port()?;
            let child = Process::new(redis_bin)
                .args(["--port", &port.to_string()])
                .args(["--bind", "127.0.0.1"])
                .args(["--save", ""])
                .args(["--appendonly", "no"])
                .args(["--dir", &std::env::temp_dir().to_string_lossy()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| not_runnable(e.to_string()))?;
            let mut p = RedisProcess {
                child: Some(child),
                addr: format!("127.0.0.1:{port}"),
                bin: redis_bin.to_path_buf(),
            };
            match p.wait_ready() {
                Ok(()) => return Ok(p),
                Err(e) => last = e,
            }
            // `p` drops here: the failed server is killed.
        }
        Err(Error::RedisStartFailed {
            bin: redis_bin.to_path_buf(),
            attempts: STARTUP_ATTEMPTS_MAX,
            last,
        })
    }

    fn wait_ready(&mut self) -> std::result::Result<(), String> {
        let deadline = Instant::now() + Duration::from_millis(STARTUP_MS_MAX);
        let config = Config {
            connect_timeout_ms: 200,
            io_timeout_ms: 1_000,
            ..Config::default()
        };
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(format!("redis-server on {} exited: {status}", self.addr));
                }
            }
            if let Ok(mut c) = Client::connect(&self.addr, config) {
                if c.ping().is_ok() {
                    return Ok(());
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(format!(
            "redis-server on {} did not answer PING within {STARTUP_MS_MAX} ms",
            self.addr
        ))
    }

    /// `host:port` to connect to.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The binary this server runs.
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// Kills the server now (SIGKILL) and reaps it; connections to it fail from here on.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for RedisProcess {
    fn drop(&mut self) {
        self.kill();
    }
}
