//! Results that can be kept: one writer for every JSON and text file an
//! experiment leaves behind, and the facts about the machine it ran on.
//!
//! Every file is written atomically: to a temporary file beside it, flushed
//! to disk, then renamed over the target, so an interrupted run never leaves
//! a half-written result (PNGs follow the same rule in `locus-plot`).

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::{BenchError, Result};

/// Writes `bytes` to `path` atomically (temporary file, sync, rename).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let io = |action, source| BenchError::Io {
        action,
        path: path.to_path_buf(),
        source,
    };
    let name = path
        .file_name()
        .ok_or_else(|| BenchError::setting("output path", path.display(), "must name a file"))?;
    let tmp = path.with_file_name(format!(
        ".{}.{}.partial",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()
    })();
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(io("writing", e));
    }
    Ok(())
}

/// Writes `value` as pretty JSON (with a final newline) to `path`, atomically.
pub fn write_json(path: &Path, value: &impl Serialize) -> Result<()> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    write_atomic(path, text.as_bytes())
}

/// A directory of results: created on first use, every file written
/// atomically, and a list of what was written (for the caller to report).
#[derive(Debug)]
pub struct OutDir {
    dir: PathBuf,
    written: Vec<PathBuf>,
}

impl OutDir {
    /// Creates `dir` (and its parents) if needed.
    pub fn create(dir: &Path) -> Result<OutDir> {
        std::fs::create_dir_all(dir).map_err(|source| BenchError::Io {
            action: "creating",
            path: dir.to_path_buf(),
            source,
        })?;
        Ok(OutDir {
            dir: dir.to_path_buf(),
            written: Vec::new(),
        })
    }

    /// The path of `name` in the directory (for writers of other formats,
    /// such as plots; call [`OutDir::wrote`] after).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Writes `value` as `name` (JSON).
    pub fn json(&mut self, name: &str, value: &impl Serialize) -> Result<PathBuf> {
        let path = self.path(name);
        write_json(&path, value)?;
        self.written.push(path.clone());
        Ok(path)
    }

    /// Records a file written by another writer.
    pub fn wrote(&mut self, path: PathBuf) {
        self.written.push(path);
    }

    /// Every file written so far, in order.
    pub fn written(&self) -> &[PathBuf] {
        &self.written
    }
}

/// Where a result was measured: enough to tell a quiet machine from a busy one.
#[derive(Debug, Clone, Serialize)]
pub struct MachineMeta {
    /// Logical CPUs.
    pub cores: usize,
    /// CPU architecture.
    pub arch: &'static str,
    /// Operating system.
    pub os: &'static str,
    /// `/proc/loadavg` when the run started.
    pub loadavg_before: String,
    /// `/proc/loadavg` when it ended (set by [`MachineMeta::finish`]).
    pub loadavg_after: String,
    /// The command line that produced the result.
    pub command: String,
    /// Seconds since the Unix epoch when the run started.
    pub started_unix_s: u64,
    /// Locus's version.
    pub locus_version: &'static str,
}

impl MachineMeta {
    /// The facts as the run starts.
    pub fn start() -> MachineMeta {
        MachineMeta {
            cores: cores(),
            arch: std::env::consts::ARCH,
            os: std::env::consts::OS,
            loadavg_before: loadavg(),
            loadavg_after: String::new(),
            command: std::env::args().collect::<Vec<_>>().join(" "),
            started_unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            locus_version: env!("CARGO_PKG_VERSION"),
        }
    }

    /// Records the load as the run ends.
    pub fn finish(&mut self) {
        self.loadavg_after = loadavg();
    }
}

/// Median, minimum and maximum of one figure over repeated runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    /// The median (the mean of the middle two for an even count).
    pub median: f64,
    /// The smallest.
    pub min: f64,
    /// The largest.
    pub max: f64,
}

impl Spread {
    /// The spread of `values`; all zero for none. NaNs sort last.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Spread {
        let mut v: Vec<f64> = values.into_iter().collect();
        if v.is_empty() {
            return Spread {
                median: 0.0,
                min: 0.0,
                max: 0.0,
            };
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Spread {
            median,
            min: v[0],
            max: v[n - 1],
        }
    }
}

/// Logical CPUs of this machine.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `/proc/loadavg`, or "unavailable".
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unavailable".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_take_the_middle() {
        let s = Spread::of([3.0, 1.0, 2.0]);
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        assert_eq!(Spread::of([4.0, 1.0, 2.0, 3.0]).median, 2.5);
        assert_eq!(Spread::of([]).median, 0.0);
    }

    #[test]
    fn json_is_written_whole_and_replaces_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut out = OutDir::create(&dir.path().join("a/b")).unwrap();
        let p = out.json("x.json", &serde_json::json!({"k": 1})).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "{\n  \"k\": 1\n}\n");
        out.json("x.json", &serde_json::json!([2])).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "[\n  2\n]\n");
        assert_eq!(out.written().len(), 2);
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path().join("a/b"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("x.json")]);
    }

    #[test]
    fn a_failed_write_names_the_file_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("missing-dir/x.json");
        let e = write_json(&target, &1).unwrap_err().to_string();
        assert!(
            e.contains("writing") && e.contains("missing-dir/x.json"),
            "{e}"
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
