//! Edge weights for the kernels that use them (issue 63: SSSP on weighted
//! graphs).
//!
//! The edges themselves are read by `locus_graph::input`, the store's
//! loader (its errors name the file and line; gzip, Matrix Market and
//! symmetric expansion are its), with its `ignore_weights` set so that a
//! third column is accepted; each edge's line is kept. A second pass then
//! reads the third token of those lines: a SNAP text or `.wel` line's
//! weight, or an `integer` or `real` Matrix Market entry's value (both
//! edges of a symmetric entry take its value). A weight is a non-negative
//! integer up to `u32::MAX`, as GAPBS's integer weights are (a `real`
//! value must be a whole number, `3` or `3.0`); anything else is an error
//! naming the file, the line and the token. A file with no weight on any
//! line (two-column text, a `pattern` matrix, GridGraph binary) has no
//! weights: [`WeightedList::weights`] is `None`, and a run that needs
//! weights gives every edge weight 1 and says so. A file that weights some
//! lines and not others is refused at the first line without one.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use locus_graph::input::Position;
use locus_graph::{Edge, Format, LoadOptions};

use crate::error::{io_err, AnalyticsError, Result};

/// Gzip's first two bytes.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// An edge list with a weight per edge, if the file gave weights.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WeightedList {
    /// Vertices `0..vertex_count`.
    pub vertex_count: u64,
    /// Edges in file order (symmetric Matrix Market entries expanded).
    pub edges: Vec<Edge>,
    /// `weights[k]` is `edges[k]`'s weight (None: the file has none).
    pub weights: Option<Vec<u32>>,
}

/// Where the edges' weights came from, as a run reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WeightSource {
    /// The run uses no weights (every kernel but SSSP).
    #[default]
    Unused,
    /// The input's weights, kept in the grid's blocks.
    Input,
    /// The input has none: every edge weighs 1.
    UnitNoneInInput,
    /// The input's weights were dropped (`--ignore-weights`): every edge weighs 1.
    UnitDropped,
    /// A generated R-MAT graph: GAPBS's uniform weights in `1..=255`.
    Generated,
}

impl WeightSource {
    /// How a report line says it.
    pub fn describe(self) -> &'static str {
        match self {
            WeightSource::Unused => "not used",
            WeightSource::Input => "from the input, stored with the edges",
            WeightSource::UnitNoneInInput => "none in the input: every edge weighs 1",
            WeightSource::UnitDropped => "dropped (--ignore-weights): every edge weighs 1",
            WeightSource::Generated => {
                "generated uniform in 1..=255 (GAPBS's), stored with the edges"
            }
        }
    }
}

/// Loads `path` with its weights (module doc). `opts.ignore_weights` is
/// the caller's to set; it is forced on for the edge pass only.
pub fn load(path: &Path, format: Option<Format>, opts: &LoadOptions) -> Result<WeightedList> {
    let edge_opts = LoadOptions {
        ignore_weights: true,
        ..*opts
    };
    let mut edges = Vec::new();
    let mut lines: Vec<u64> = Vec::new();
    let summary = locus_graph::input::visit(path, format, &edge_opts, |e, pos| {
        edges.push(e);
        if let Position::Line(n) = pos {
            lines.push(n);
        }
        Ok::<(), std::convert::Infallible>(())
    })
    .map_err(locus_graph::GraphError::from)?;
    let vertex_count = summary.vertex_count;
    if lines.len() != edges.len() {
        // Binary: records carry no weight.
        return Ok(WeightedList {
            vertex_count,
            edges,
            weights: None,
        });
    }
    let weights = read_weights(path, &lines)?;
    Ok(WeightedList {
        vertex_count,
        edges,
        weights,
    })
}

fn open(path: &Path) -> Result<Box<dyn BufRead>> {
    let file = File::open(path).map_err(io_err("open", path))?;
    let mut reader = BufReader::with_capacity(1 << 16, file);
    let head = reader.fill_buf().map_err(io_err("read", path))?;
    if head.starts_with(&GZIP_MAGIC) {
        let gz = flate2::read::MultiGzDecoder::new(reader);
        return Ok(Box::new(BufReader::with_capacity(1 << 16, gz)));
    }
    Ok(Box::new(reader))
}

/// The third token of each of `lines` (1-based, increasing, a line repeated
/// for a symmetric entry's two edges), or None if no line has one.
fn read_weights(path: &Path, lines: &[u64]) -> Result<Option<Vec<u32>>> {
    let mut reader = open(path)?;
    let mut out: Vec<u32> = Vec::with_capacity(lines.len());
    let mut any = false;
    let mut missing: Option<u64> = None;
    let mut buf = Vec::new();
    let mut line_no = 0u64;
    let mut k = 0usize;
    while k < lines.len() {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(io_err("read", path))?;
        if n == 0 {
            return Err(bad(
                path,
                line_no,
                "the file ended before its edges did (changed while read?)",
            ));
        }
        line_no += 1;
        if line_no != lines[k] {
            continue;
        }
        let text = String::from_utf8_lossy(&buf);
        let w = match text.split_ascii_whitespace().nth(2) {
            Some(tok) => {
                any = true;
                Some(parse_weight(tok).map_err(|reason| bad(path, line_no, &reason))?)
            }
            None => {
                missing.get_or_insert(line_no);
                None
            }
        };
        while k < lines.len() && lines[k] == line_no {
            out.push(w.unwrap_or(1));
            k += 1;
        }
    }
    match (any, missing) {
        (false, _) => Ok(None),
        (true, None) => Ok(Some(out)),
        (true, Some(line)) => Err(bad(
            path,
            line,
            "no weight on this edge, while other lines have one: weight every edge or none",
        )),
    }
}

/// A weight token: a non-negative integer up to `u32::MAX`, written as an
/// integer or as a whole real (`3.0`, `3e0`).
pub fn parse_weight(tok: &str) -> std::result::Result<u32, String> {
    if let Ok(w) = tok.parse::<u32>() {
        return Ok(w);
    }
    match tok.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 && x.fract() == 0.0 && x <= f64::from(u32::MAX) => {
            Ok(x as u32)
        }
        _ => Err(format!(
            "weight '{tok}' is not a whole number in 0..={} (weights are GAPBS's \
             non-negative integers)",
            u32::MAX
        )),
    }
}

fn bad(path: &Path, line: u64, reason: &str) -> AnalyticsError {
    AnalyticsError::Input {
        path: path.to_path_buf(),
        line,
        reason: reason.to_string(),
    }
}

/// Reads all of `r` (tests).
#[cfg(test)]
fn read_all(mut r: impl std::io::Read) -> String {
    let mut s = String::new();
    r.read_to_string(&mut s).unwrap();
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(dir: &tempfile::TempDir, name: &str, text: &str) -> std::path::PathBuf {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        assert_eq!(read_all(File::open(&p).unwrap()), text);
        p
    }

    #[test]
    fn wel_and_snap_weights_are_read_per_line() {
        let d = tempfile::tempdir().unwrap();
        let p = file(&d, "g.wel", "# c\n0 1 5\n\n1 2 7\n% x\n2 0 0\n");
        let l = load(&p, None, &LoadOptions::default()).unwrap();
        assert_eq!(l.edges, vec![(0, 1), (1, 2), (2, 0)]);
        assert_eq!(l.weights, Some(vec![5, 7, 0]));
        let p = file(&d, "g.txt", "0 1\n1 2\n");
        assert_eq!(
            load(&p, None, &LoadOptions::default()).unwrap().weights,
            None
        );
    }

    #[test]
    fn gzip_files_are_read_through() {
        use std::io::Write;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("g.wel.gz");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(b"0 1 3\n1 2 4\n").unwrap();
        std::fs::write(&p, gz.finish().unwrap()).unwrap();
        let l = load(&p, None, &LoadOptions::default()).unwrap();
        assert_eq!(
            (l.edges, l.weights),
            (vec![(0, 1), (1, 2)], Some(vec![3, 4]))
        );
    }

    #[test]
    fn mtx_values_weigh_both_edges_of_a_symmetric_entry() {
        let d = tempfile::tempdir().unwrap();
        let p = file(
            &d,
            "g.mtx",
            "%%MatrixMarket matrix coordinate real symmetric\n% c\n3 3 2\n2 1 4.0\n3 3 9\n",
        );
        let l = load(&p, None, &LoadOptions::default()).unwrap();
        assert_eq!(l.edges, vec![(1, 0), (0, 1), (2, 2)]);
        assert_eq!(l.weights, Some(vec![4, 4, 9]));
    }

    #[test]
    fn bad_weights_name_the_file_and_line() {
        let d = tempfile::tempdir().unwrap();
        for (text, want) in [
            ("0 1 2\n1 2 -3\n", "line 2"),
            ("0 1 2\n1 2 1.5\n", "line 2"),
            ("0 1 2\n1 2 4294967296\n", "line 2"),
            ("0 1 2\n\n1 2\n", "line 3"),
        ] {
            let p = file(&d, "bad.wel", text);
            let e = load(&p, None, &LoadOptions::default())
                .unwrap_err()
                .to_string();
            assert!(e.contains("bad.wel") && e.contains(want), "{text:?}: {e}");
        }
        assert_eq!(parse_weight("3e0"), Ok(3));
        assert!(parse_weight("x").is_err());
    }
}
