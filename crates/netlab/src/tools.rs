//! The programs the lab runs (`ip`, `iptables`), found once, and running
//! them with a time limit.

use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::error::{NetlabError, Result};

/// The longest any one `ip` or `iptables` call may take. They take
/// milliseconds; a call past this is stuck (a held lock, a wedged kernel
/// call), and waiting longer would only hang the test that made the lab.
pub(crate) const COMMAND_TIMEOUT_MS: u64 = 20_000;

/// How long `iptables` waits for the xtables lock. The legacy backend takes
/// one lock for every namespace on the machine, so parallel tests contend.
const XTABLES_WAIT_S: &str = "10";

/// Directories searched after PATH: root's tools live in sbin, which a
/// PATH made for another user may lack.
const FALLBACK_DIRS: [&str; 4] = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"];

/// Where a program is: the first executable file of that name in `path_var`'s
/// directories, then in [`FALLBACK_DIRS`].
pub(crate) fn find_tool(name: &str, path_var: Option<&OsStr>) -> Option<PathBuf> {
    let dirs: Vec<PathBuf> = path_var
        .map(|p| std::env::split_paths(p).collect())
        .unwrap_or_default();
    dirs.into_iter()
        .chain(FALLBACK_DIRS.iter().map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Fails unless this process runs as root.
pub(crate) fn check_root() -> Result<()> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if euid == 0 {
        Ok(())
    } else {
        Err(NetlabError::NotRoot { euid })
    }
}

/// Which iptables a lab uses inside its namespaces. Debian's `iptables` is
/// the nf_tables backend; a kernel without nf_tables still has the legacy one.
#[derive(Clone, Debug)]
pub(crate) struct Iptables {
    pub(crate) path: PathBuf,
}

/// The programs a lab runs, found before anything is created.
#[derive(Clone, Debug)]
pub(crate) struct Tools {
    pub(crate) ip: PathBuf,
    /// `iptables` as found on PATH: the first choice inside namespaces.
    iptables: PathBuf,
    /// `iptables-legacy`, where installed: the second choice.
    iptables_legacy: Option<PathBuf>,
}

impl Tools {
    /// Finds `ip` and `iptables`, or says which package is missing.
    pub(crate) fn find() -> Result<Tools> {
        let path_var = std::env::var_os("PATH");
        let need = |tool: &'static str, package: &'static str| {
            find_tool(tool, path_var.as_deref()).ok_or(NetlabError::ToolMissing { tool, package })
        };
        Ok(Tools {
            ip: need("ip", "iproute2")?,
            iptables: need("iptables", "iptables")?,
            iptables_legacy: find_tool("iptables-legacy", path_var.as_deref()),
        })
    }

    /// `ip ARGS`.
    pub(crate) fn ip<I, S>(&self, args: I) -> Result<String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut command = Command::new(&self.ip);
        command.args(args);
        run(command)
    }

    /// `ip -n NS ARGS`: `ip` acting on namespace `ns`.
    pub(crate) fn ip_in(&self, ns: &str, args: &[&str]) -> Result<()> {
        let mut command = Command::new(&self.ip);
        command.args(["-n", ns]).args(args);
        run(command).map(drop)
    }

    /// A command that runs `program` inside namespace `ns`.
    pub(crate) fn in_namespace(&self, ns: &str, program: impl AsRef<OsStr>) -> Command {
        let mut command = Command::new(&self.ip);
        command.args(["netns", "exec", ns]).arg(program);
        command
    }

    /// `iptables -w N ARGS` inside namespace `ns`.
    pub(crate) fn iptables(&self, iptables: &Iptables, ns: &str, args: &[&str]) -> Result<()> {
        let mut command = self.in_namespace(ns, &iptables.path);
        command.args(["-w", XTABLES_WAIT_S]).args(args);
        run(command).map(drop)
    }

    /// Picks the iptables that works inside namespace `ns` by running
    /// `iptables ARGS` there (a command the lab needs anyway, so the probe
    /// leaves nothing behind): `iptables` first, then `iptables-legacy`.
    pub(crate) fn probe_iptables(&self, ns: &str, args: &[&str]) -> Result<Iptables> {
        let first = Iptables {
            path: self.iptables.clone(),
        };
        let nft = match self.iptables(&first, ns, args) {
            Ok(()) => return Ok(first),
            Err(e) => e.to_string(),
        };
        let legacy = match &self.iptables_legacy {
            None => "not installed".to_string(),
            Some(path) => {
                let second = Iptables { path: path.clone() };
                match self.iptables(&second, ns, args) {
                    Ok(()) => return Ok(second),
                    Err(e) => e.to_string(),
                }
            }
        };
        Err(NetlabError::NoIptables {
            namespace: ns.to_string(),
            nft,
            legacy,
        })
    }
}

/// The command line, for messages.
pub(crate) fn describe(command: &Command) -> String {
    let mut line = command.get_program().to_string_lossy().into_owned();
    for arg in command.get_args() {
        line.push(' ');
        line.push_str(&arg.to_string_lossy());
    }
    line
}

/// Runs `command` to its end within [`COMMAND_TIMEOUT_MS`] and returns its
/// stdout; a failure carries its stderr.
pub(crate) fn run(mut command: Command) -> Result<String> {
    let line = describe(&command);
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let spawn_error = |source| NetlabError::Spawn {
        command: line.clone(),
        source,
    };
    let mut child = command.spawn().map_err(spawn_error)?;
    // Both pipes are drained while the child runs, so a long output (a
    // machine's route table) cannot fill a pipe and stall it.
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let deadline = Instant::now() + Duration::from_millis(COMMAND_TIMEOUT_MS);
    let mut pause_us = 200;
    let status = loop {
        match child.try_wait().map_err(spawn_error)? {
            Some(status) => break status,
            None if Instant::now() >= deadline => {
                // Kill and reap; the pipes close, so the drains end.
                let _ = child.kill();
                let _ = child.wait();
                let _ = stdout.join();
                let _ = stderr.join();
                return Err(NetlabError::CommandTimeout {
                    command: line,
                    timeout_ms: COMMAND_TIMEOUT_MS,
                });
            }
            None => {
                thread::sleep(Duration::from_micros(pause_us));
                pause_us = (pause_us * 2).min(10_000);
            }
        }
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    if status.success() {
        Ok(stdout)
    } else {
        Err(NetlabError::Command {
            command: line,
            status: status.to_string(),
            stderr: stderr.trim().to_string(),
        })
    }
}

/// Reads a child's pipe to its end on a thread of its own.
fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            // A read error keeps what was read; the exit status decides.
            let _ = pipe.read_to_end(&mut bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_tool_is_not_found_and_its_message_names_the_package_and_the_fix() {
        assert_eq!(
            find_tool(
                "locus-netlab-no-such-tool",
                Some(OsStr::new("/nonexistent"))
            ),
            None
        );
        let message = NetlabError::ToolMissing {
            tool: "iptables",
            package: "iptables",
        }
        .to_string();
        assert!(message.contains("scripts/setup"), "{message}");
        assert!(message.contains("apt-get install -y iptables"), "{message}");
    }

    #[test]
    fn a_tool_is_found_on_path_before_the_fallback_directories() {
        let sh = find_tool("sh", Some(OsStr::new("/bin:/usr/bin"))).expect("sh");
        assert_eq!(sh, PathBuf::from("/bin/sh"));
        // Not on PATH at all: the fallback directories still find it.
        assert!(find_tool("sh", None).is_some());
    }

    #[test]
    fn a_failing_command_reports_its_line_and_stderr() {
        let mut command = Command::new("sh");
        command.args(["-c", "echo oops >&2; exit 3"]);
        match run(command) {
            Err(NetlabError::Command {
                command, stderr, ..
            }) => {
                assert_eq!(command, "sh -c echo oops >&2; exit 3");
                assert_eq!(stderr, "oops");
            }
            other => panic!("expected a command failure, got {other:?}"),
        }
        let mut command = Command::new("sh");
        command.args(["-c", "echo fine"]);
        assert_eq!(run(command).expect("sh runs"), "fine\n");
    }
}
