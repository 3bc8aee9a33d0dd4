//! A mover's journal (issue 59, `locus cluster moves`): the command that
//! moves slots writes its progress to a small JSON file beside the cluster
//! file after each batch (atomically: a temporary file, then a rename),
//! and looks, between batches, for a file asking it to cancel. `cluster
//! moves` reads the one and `cluster moves --cancel` writes the other.
//!
//! ```json
//! {"pid": 4242, "command": "rebalance", "state": "running",
//!  "started_unix_s": 1765051000.1, "updated_unix_s": 1765051003.7,
//!  "slots_done": 320, "slots_total": 1024, "batches": 20,
//!  "vertices": 266, "bytes": 35120, "moved_back": 0, "error": null}
//! ```
//! `state`: `running`, `done`, `failed` (a batch could not be made; it was
//! rolled back, the ones before it stay moved) or `cancelled` (the batches
//! made were moved back to where they were).

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// The journal's file name, beside the cluster file.
pub const JOURNAL_FILE: &str = "move.json";
/// The file that asks the running mover to cancel.
pub const CANCEL_FILE: &str = "move.cancel";

/// What the journal says.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// The moving process.
    pub pid: u32,
    /// Which command (`move`, `rebalance`, `add-server`, `remove-server`).
    pub command: String,
    /// `running`, `done`, `failed` or `cancelled`.
    pub state: String,
    /// When it started and last wrote (seconds since the Unix epoch).
    pub started_unix_s: f64,
    /// When it last wrote.
    pub updated_unix_s: f64,
    /// Slots moved (committed) so far.
    pub slots_done: u64,
    /// Slots the move makes in all.
    pub slots_total: u64,
    /// Batches committed.
    pub batches: u64,
    /// Vertices and bytes copied.
    pub vertices: u64,
    /// Bytes copied.
    pub bytes: u64,
    /// Slots moved back after a cancel.
    pub moved_back: u64,
    /// Why it failed.
    pub error: Option<String>,
}

impl Progress {
    /// Slots per second so far.
    pub fn rate(&self) -> f64 {
        let secs = self.updated_unix_s - self.started_unix_s;
        if secs > 0.0 {
            self.slots_done as f64 / secs
        } else {
            0.0
        }
    }

    /// Seconds left at the rate so far (`None` before the first batch).
    pub fn eta_s(&self) -> Option<f64> {
        let r = self.rate();
        (r > 0.0).then(|| (self.slots_total.saturating_sub(self.slots_done)) as f64 / r)
    }
}

/// Where a mover writes its progress and finds a cancel request.
#[derive(Debug, Clone)]
pub struct Journal {
    dir: PathBuf,
    command: String,
}

pub(crate) fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl Journal {
    /// A journal in `dir` (the cluster file's directory) for `command`.
    /// A cancel request left by an earlier run is removed.
    pub fn new(dir: &Path, command: &str) -> Journal {
        let _ = std::fs::remove_file(dir.join(CANCEL_FILE));
        Journal {
            dir: dir.to_path_buf(),
            command: command.to_string(),
        }
    }

    /// The progress of the last mover in `dir`, if any wrote one.
    pub fn read(dir: &Path) -> Option<Progress> {
        serde_json::from_slice(&std::fs::read(dir.join(JOURNAL_FILE)).ok()?).ok()
    }

    /// Asks the mover running in `dir` to stop and move back what it moved.
    pub fn request_cancel(dir: &Path) -> std::io::Result<()> {
        std::fs::write(dir.join(CANCEL_FILE), b"cancel\n")
    }

    /// Whether a cancel was asked for.
    pub(crate) fn cancelled(&self) -> bool {
        self.dir.join(CANCEL_FILE).exists()
    }

    /// A new progress record of this mover.
    pub(crate) fn start(&self, slots_total: u64) -> Progress {
        let now = now_s();
        Progress {
            pid: std::process::id(),
            command: self.command.clone(),
            state: "running".into(),
            started_unix_s: now,
            updated_unix_s: now,
            slots_total,
            ..Progress::default()
        }
    }

    /// Writes `p` (best effort: a journal that cannot be written costs
    /// `cluster moves` its progress line, never the move).
    pub(crate) fn write(&self, p: &mut Progress) {
        p.updated_unix_s = now_s();
        let path = self.dir.join(JOURNAL_FILE);
        let tmp = self.dir.join(format!("{JOURNAL_FILE}.tmp"));
        let ok = serde_json::to_vec_pretty(p)
            .ok()
            .and_then(|b| std::fs::write(&tmp, b).ok())
            .and_then(|()| std::fs::rename(&tmp, &path).ok());
        if ok.is_none() {
            tracing::warn!(path = %path.display(), "cannot write the move's journal");
        }
        if p.state != "running" {
            let _ = std::fs::remove_file(self.dir.join(CANCEL_FILE));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_is_written_read_and_cancelled_by_file() {
        let d = tempfile::tempdir().unwrap();
        assert!(Journal::read(d.path()).is_none());
        let j = Journal::new(d.path(), "rebalance");
        let mut p = j.start(100);
        p.slots_done = 25;
        p.started_unix_s -= 5.0;
        j.write(&mut p);
        let back = Journal::read(d.path()).unwrap();
        assert_eq!(back.slots_done, 25);
        assert_eq!(back.state, "running");
        assert!((back.rate() - 5.0).abs() < 0.5, "{}", back.rate());
        assert!((back.eta_s().unwrap() - 15.0).abs() < 2.0);
        assert!(!j.cancelled());
        Journal::request_cancel(d.path()).unwrap();
        assert!(j.cancelled());
        p.state = "cancelled".into();
        j.write(&mut p);
        assert!(!j.cancelled(), "a finished mover removes the request");
        // A new mover does not inherit an old request.
        Journal::request_cancel(d.path()).unwrap();
        assert!(!Journal::new(d.path(), "move").cancelled());
    }
}
