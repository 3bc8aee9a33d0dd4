//! The one supervisor of Locus's processes (`locus server`, `locus
//! coordinator`), used by `locus cluster up|down` and by the benchmarks that
//! run clusters of processes: free ports for a cluster file, starting a
//! process with its log, waiting until the servers answer (and have linked
//! to the coordinator), naming a process that exited with the end of its
//! log, and ending processes.
//!
//! Two ties between the supervisor and its processes ([`Tie`]):
//! - **Owned** (the benchmarks): children in this process's group, so a
//!   Ctrl-C reaches them; killed and reaped when the [`Supervisor`] is
//!   dropped, on an error or while a panic unwinds.
//! - **Detached** (`cluster up`): each in its own session, outliving this
//!   command; [`terminate`] ends them later by pid.
//!
//! Every process is started with `--lifetime-s` when one is given, so none
//! outlives a supervisor that was itself killed.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use locus_client::Client;

use crate::{Result, ServerError};

/// Lines of a process's log quoted in an error.
pub const LOG_TAIL_LINES: usize = 20;
/// How often a wait looks again.
const POLL: Duration = Duration::from_millis(50);

/// Which process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// `locus server --id N`.
    Server(u8),
    /// `locus coordinator`, named (`coordinator`, or `coordinator-1` for a
    /// standby): the name is its log's.
    Coordinator(String),
}

impl Role {
    /// The log's file name.
    pub fn log_name(&self) -> String {
        match self {
            Role::Server(id) => format!("server-{id}.log"),
            Role::Coordinator(name) => format!("{name}.log"),
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Role::Server(id) => write!(f, "server {id}"),
            Role::Coordinator(name) => f.write_str(name),
        }
    }
}

/// How processes are tied to their supervisor (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tie {
    /// Children, killed and reaped with the supervisor.
    Owned,
    /// Detached, outliving it.
    Detached,
}

/// A process the supervisor started.
#[derive(Debug)]
pub struct Proc {
    /// Which.
    pub role: Role,
    /// Its process id.
    pub pid: u32,
    /// Its log (standard output and error).
    pub log: PathBuf,
    child: Option<Child>,
}

/// Starts and watches the processes of one cluster file.
#[derive(Debug)]
pub struct Supervisor {
    exe: PathBuf,
    config: PathBuf,
    logs: PathBuf,
    tie: Tie,
    procs: Vec<Proc>,
}

impl Supervisor {
    /// A supervisor starting `exe`'s commands with the cluster file
    /// `config`, their logs in `logs`.
    pub fn new(exe: &Path, config: &Path, logs: &Path, tie: Tie) -> Supervisor {
        Supervisor {
            exe: exe.to_path_buf(),
            config: config.to_path_buf(),
            logs: logs.to_path_buf(),
            tie,
            procs: Vec::new(),
        }
    }

    /// Starts `role` with `extra` arguments, exiting by itself after
    /// `lifetime_s`; its output is appended to its log (a restarted
    /// process's log keeps what its predecessor said). Returns its pid.
    pub fn spawn(&mut self, role: Role, extra: &[String], lifetime_s: Option<u64>) -> Result<u32> {
        self.spawn_with(role, extra, lifetime_s, |exe| Command::new(exe))
    }

    /// As [`spawn`](Self::spawn), the command made by `command` from the
    /// executable (the fault lab's `ip netns exec NS EXE`, which execs `EXE`:
    /// the pid is the process's own).
    pub fn spawn_with(
        &mut self,
        role: Role,
        extra: &[String],
        lifetime_s: Option<u64>,
        command: impl FnOnce(&Path) -> Command,
    ) -> Result<u32> {
        let log = self.logs.join(role.log_name());
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|e| ServerError::io(format!("cannot open the log {}", log.display()), e))?;
        let err = out
            .try_clone()
            .map_err(|e| ServerError::io(format!("cannot open the log {}", log.display()), e))?;
        let mut cmd = command(&self.exe);
        match &role {
            Role::Server(id) => cmd.args(["server", "--id", &id.to_string()]),
            Role::Coordinator(_) => cmd.arg("coordinator"),
        };
        cmd.arg("--config").arg(&self.config).args(extra);
        if let Some(l) = lifetime_s {
            cmd.args(["--lifetime-s", &l.to_string()]);
        }
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        if std::env::var_os("RUST_LOG").is_none() {
            // Detached processes are the ones a person reads the logs of.
            cmd.env(
                "RUST_LOG",
                if self.tie == Tie::Detached {
                    "info"
                } else {
                    "warn"
                },
            );
        }
        if self.tie == Tie::Detached {
            detach(&mut cmd);
        }
        // An executable just written (by a build, or a test in another
        // thread) is "text file busy" while a child forked elsewhere in this
        // process still holds its write descriptor, until that child execs:
        // a few short retries ride that out.
        let mut busy = 0;
        let child = loop {
            match cmd.spawn() {
                Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && busy < 50 => {
                    busy += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                r => {
                    break r.map_err(|e| {
                        ServerError::io(
                            format!("cannot start {} for {role}", self.exe.display()),
                            e,
                        )
                    })?
                }
            }
        };
        let pid = child.id();
        self.procs.push(Proc {
            role,
            pid,
            log,
            // A detached process is reaped by init once this one exits.
            child: Some(child),
        });
        Ok(pid)
    }

    /// The processes started, in order.
    pub fn procs(&self) -> &[Proc] {
        &self.procs
    }

    /// Their process ids.
    pub fn pids(&self) -> Vec<u32> {
        self.procs.iter().map(|p| p.pid).collect()
    }

    /// Fails if a process exited, naming it with the end of its log.
    pub fn check(&mut self) -> Result<()> {
        for i in 0..self.procs.len() {
            let exited = match self.procs[i].child.as_mut().map(|c| c.try_wait()) {
                Some(Ok(None)) => None,
                Some(Ok(Some(s))) => Some(format!("exited ({s})")),
                Some(Err(e)) => Some(format!("cannot be waited for: {e}")),
                None if pid_alive(self.procs[i].pid) => None,
                None => Some("exited".to_string()),
            };
            if let Some(what) = exited {
                return Err(self.failed(&self.procs[i].role.clone(), &what));
            }
        }
        Ok(())
    }

    /// Waits until every server of `ids` answers PING, within `timeout`;
    /// fails at once if a process exits.
    pub fn wait_servers(&mut self, client: &Client, ids: &[u8], timeout: Duration) -> Result<()> {
        let t0 = Instant::now();
        for &id in ids {
            loop {
                self.check()?;
                match client.ping(id) {
                    Ok(()) => break,
                    Err(e) if t0.elapsed() < timeout => {
                        tracing::debug!("waiting for server {id}: {e}");
                        std::thread::sleep(POLL);
                    }
                    Err(e) => {
                        return Err(self.failed(
                            &Role::Server(id),
                            &format!("did not answer within {} s: {e}", timeout.as_secs()),
                        ))
                    }
                }
            }
        }
        Ok(())
    }

    /// Waits until every server of `ids` says in its STATS that its control
    /// link to the coordinator is up, within `timeout`.
    pub fn wait_linked(&mut self, client: &Client, ids: &[u8], timeout: Duration) -> Result<()> {
        let t0 = Instant::now();
        for &id in ids {
            loop {
                self.check()?;
                let linked = client
                    .stats(id)
                    .is_ok_and(|st| st["coordinator"]["linked"].as_bool() == Some(true));
                if linked {
                    break;
                }
                if t0.elapsed() >= timeout {
                    return Err(self.failed(
                        &Role::Coordinator("coordinator".into()),
                        &format!("has no link from server {id} after {} s", timeout.as_secs()),
                    ));
                }
                std::thread::sleep(POLL);
            }
        }
        Ok(())
    }

    /// An error about `role`, quoting the end of its log.
    pub fn failed(&self, role: &Role, what: &str) -> ServerError {
        let log = self.logs.join(role.log_name());
        ServerError::Process {
            role: role.to_string(),
            reason: format!(
                "{what}\n--- last lines of {} ---\n{}",
                log.display(),
                log_tail(&log, LOG_TAIL_LINES)
            ),
        }
    }

    /// Kills (SIGKILL) and reaps the owned process `pid` and forgets it, so
    /// [`check`](Self::check) does not count it as exited and its role can
    /// be started again. False if no owned process has that pid.
    pub fn kill(&mut self, pid: u32) -> bool {
        let Some(i) = self.procs.iter().position(|p| p.pid == pid) else {
            return false;
        };
        let mut p = self.procs.remove(i);
        if let Some(c) = p.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
        true
    }

    /// Kills and reaps every owned process (also done on drop); leaves
    /// detached ones running.
    pub fn kill_all(&mut self) {
        if self.tie == Tie::Detached {
            return;
        }
        for p in &mut self.procs {
            if let Some(c) = p.child.as_mut() {
                let _ = c.kill();
            }
        }
        for p in &mut self.procs {
            if let Some(c) = p.child.as_mut() {
                let _ = c.wait();
            }
        }
        self.procs.clear();
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// The last `lines` lines of a log file (empty if it cannot be read).
pub fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Whether a process with id `pid` still exists (a zombie counts as gone).
pub fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Starts the child in its own session, so it outlives this process and a
/// Ctrl-C in this terminal does not reach it.
pub fn detach(cmd: &mut Command) {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: setsid is async-signal-safe and touches no Rust state.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
    }
}

/// Ends `pids`: SIGTERM, then SIGKILL for any still `alive` after `grace`.
/// Returns how many had to be killed.
pub fn terminate(pids: &[u32], grace: Duration, alive: impl Fn(u32) -> bool) -> usize {
    for &pid in pids {
        // SAFETY: kill(2) on a pid the caller checked is one of its processes.
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    }
    let t0 = Instant::now();
    while t0.elapsed() < grace && pids.iter().any(|&p| alive(p)) {
        std::thread::sleep(POLL);
    }
    let mut killed = 0;
    for &pid in pids {
        if alive(pid) {
            // SAFETY: as above.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            killed += 1;
        }
    }
    killed
}

/// Free loopback ports for one cluster file. Each stays bound until every
/// port is chosen, so the operating system cannot hand out the same port
/// twice (a released port may be given again at once); they are released
/// when this is dropped, just before the processes bind them.
///
/// Ports are taken below the kernel's ephemeral range (where outgoing
/// connections get their local ports), from a random start: between the
/// release and a process's bind, an outgoing connection could otherwise be
/// given the chosen port and the process would fail with "address already
/// in use". If none is free there, the kernel picks one.
#[derive(Default)]
pub struct FreePorts(Vec<TcpListener>);

/// Ports tried below the ephemeral range before the kernel is asked.
const PORT_TRIES: u32 = 64;

impl FreePorts {
    /// A free loopback port, distinct from those this has handed out.
    pub fn take(&mut self) -> Result<SocketAddr> {
        let (lo, hi) = below_ephemeral();
        let span = u64::from(hi - lo);
        let start = random_u64() % span;
        for i in 0..u64::from(PORT_TRIES) {
            let port = lo + ((start + i * 7919) % span) as u16;
            if self
                .0
                .iter()
                .any(|l| l.local_addr().is_ok_and(|a| a.port() == port))
            {
                continue;
            }
            if let Ok(l) = TcpListener::bind(("127.0.0.1", port)) {
                return self.keep(l);
            }
        }
        let l = TcpListener::bind("127.0.0.1:0")
            .map_err(|e| ServerError::io("cannot listen on 127.0.0.1:0", e))?;
        self.keep(l)
    }

    fn keep(&mut self, l: TcpListener) -> Result<SocketAddr> {
        let addr = l
            .local_addr()
            .map_err(|e| ServerError::io("cannot read a listener's address", e))?;
        self.0.push(l);
        Ok(addr)
    }
}

/// The ports `[lo, hi)` below the kernel's ephemeral range (Linux's
/// `ip_local_port_range`, 32768 by default): up to 12,768 of them, above 1024.
fn below_ephemeral() -> (u16, u16) {
    let first = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let hi = first.max(2048);
    (hi.saturating_sub(12_768).max(1024), hi)
}

/// A random number from the standard library's per-process hash keys.
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

#[cfg(test)]
mod tests;
