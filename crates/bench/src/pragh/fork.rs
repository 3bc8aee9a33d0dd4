//! One loaded graph, several schemes: each scheme runs in a child process
//! forked from the one that loaded the graph, so it starts from the loaded
//! store exactly (copy-on-write pages) and whatever it migrates, caches,
//! replicates or inserts vanishes with the child. At R-MAT 26 a load takes
//! about six minutes; without this every scheme of every round paid one.
//!
//! The cost is counted against the schemes, not hidden: a page the child
//! first writes (an address word, an updated value) is copied then, a fault
//! a freshly loaded process would not take. Every scheme, Ideal included,
//! runs in a child, so they all pay it.
//!
//! Forking is safe only while the process has one thread (the child gets a
//! copy of the forking thread alone, and a lock another thread held would
//! stay held in it forever); [`in_child`] checks `/proc/self/task` and
//! refuses otherwise.

use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::path::PathBuf;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::{BenchError, Result};

/// Threads of this process now.
fn threads() -> Result<usize> {
    let dir = PathBuf::from("/proc/self/task");
    std::fs::read_dir(&dir)
        .map(|d| d.count())
        .map_err(|source| BenchError::Io {
            action: "listing",
            path: dir,
            source,
        })
}

fn child_error(what: &str, reason: impl Into<String>) -> BenchError {
    BenchError::Child {
        program: PathBuf::from(format!("forked run of {what}")),
        reason: reason.into(),
    }
}

/// Runs `f` in a child process forked from this one and returns its result,
/// sent back as JSON through a pipe. `what` names the run in errors. The
/// child never returns: it exits right after sending (its copy of the store
/// is not dropped, the kernel frees it). A child killed by a signal (the
/// OOM killer's SIGKILL) or that panics is an error naming the signal or
/// the panic.
pub fn in_child<T, F>(what: &str, f: F) -> Result<T>
where
    T: Serialize + DeserializeOwned,
    F: FnOnce() -> Result<T>,
{
    // Threads that just finished (a loader's pool) may take a moment to go.
    let mut n = threads()?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while n != 1 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
        n = threads()?;
    }
    if n != 1 {
        return Err(child_error(
            what,
            format!("cannot fork with {n} threads running (a lock one of them holds would stay held in the child)"),
        ));
    }
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is a valid two-element array for pipe(2) to fill.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(child_error(
            what,
            format!("pipe: {}", std::io::Error::last_os_error()),
        ));
    }
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: the process has one thread (checked above), so the child's copy
    // of memory holds no lock another thread owns.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        let e = std::io::Error::last_os_error();
        // SAFETY: both descriptors came from pipe(2) above and are closed once.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        return Err(child_error(what, format!("fork: {e}")));
    }
    if pid == 0 {
        // The child: run, send, exit without unwinding into the parent's code.
        // SAFETY: the read end is ours to close; the write end becomes a File
        // that owns it.
        unsafe { libc::close(fds[0]) };
        let mut out = unsafe { std::fs::File::from_raw_fd(fds[1]) };
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let sent: std::result::Result<T, String> = match outcome {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(e.to_string()),
            Err(p) => Err(format!(
                "panicked: {}",
                p.downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| p.downcast_ref::<&str>().copied())
                    .unwrap_or("(no message)")
            )),
        };
        let code = match serde_json::to_vec(&sent) {
            Ok(bytes) => i32::from(out.write_all(&bytes).is_err()),
            Err(_) => 2,
        };
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
        // SAFETY: _exit ends the child at once; nothing of it is needed after.
        unsafe { libc::_exit(code) };
    }
    // The parent: read until the child closes its end, then reap it.
    // SAFETY: the write end is the child's; the read end becomes a File.
    unsafe { libc::close(fds[1]) };
    let mut input = unsafe { std::fs::File::from_raw_fd(fds[0]) };
    let mut bytes = Vec::new();
    let read = input.read_to_end(&mut bytes);
    let mut status = 0i32;
    // SAFETY: `pid` is our child; `status` is a valid out-parameter.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(child_error(what, format!("waitpid: {e}")));
        }
    }
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        let hint = if sig == libc::SIGKILL {
            " (SIGKILL: the kernel's OOM killer, or kill -9)"
        } else {
            ""
        };
        return Err(child_error(what, format!("killed by signal {sig}{hint}")));
    }
    read.map_err(|e| child_error(what, format!("reading its result: {e}")))?;
    let sent: std::result::Result<T, String> = serde_json::from_slice(&bytes).map_err(|e| {
        child_error(
            what,
            format!(
                "exited with status {} and sent no readable result ({e})",
                libc::WEXITSTATUS(status)
            ),
        )
    })?;
    sent.map_err(|reason| child_error(what, reason))
}
