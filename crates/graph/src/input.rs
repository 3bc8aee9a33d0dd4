//! Edge-list files: SNAP-style text, Matrix Market and GridGraph binary, readers and
//! writers; any of them may be gzip-compressed.
//!
//! Text: one edge per line as two unsigned decimal ids separated by spaces or tabs;
//! lines whose first non-blank byte is `#` or `%` are comments; blank lines are
//! skipped; `\r\n` line ends are accepted. A third column is an edge weight (`.wel`,
//! weighted SNAP): the edge lists here carry none (only SSSP uses weights; the analytics
//! crate's `weighted` reads them from the lines these parsers keep), so a weight is
//! refused, naming the line, unless [`LoadOptions::ignore_weights`] asks to drop them. Anything else is an
//! error naming the file, the 1-based line, the line's text and the reason.
//!
//! Matrix Market (`.mtx`, [`mtx`]): the `coordinate` format with `pattern`, `integer`
//! or `real` entries, `general` or `symmetric`; ids are 1-based; a symmetric entry
//! `i j` is the edges `i -> j` and `j -> i`.
//!
//! Compression: a file starting with gzip's magic bytes (`1f 8b`) is decompressed as
//! it is read, whatever its name; `g.txt.gz` has the format of `g.txt`.
//!
//! Binary (GridGraph): consecutive 8-byte records, each `src: u32 LE, dst: u32 LE`.
//!
//! ```text
//!   byte  0      4      8      12     16
//!         | src0 | dst0 | src1 | dst1 | ...
//! ```
//!
//! [`visit`] streams a file's edges to a callback with each edge's [`Position`] (line
//! or record offset), in constant memory; [`load`] is a visit that collects them.
//! Loading is all or nothing: an error returns no edges. Files are read in
//! [`READ_BYTES`] blocks and parsed by hand over bytes, with no per-line allocation.
//! Writers stream through a buffer into `PATH.partial` and rename it over `PATH` only
//! once everything is written, so a failed write leaves no half-written file behind.

use std::convert::Infallible;
use std::ffi::OsString;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{io_err, GraphError, Result};
use crate::progress::{self, Unit};
use crate::rmat::Rmat;
use crate::{Edge, VertexId, VERTEX_ID_MAX};

pub mod mtx;
mod stream;

pub use mtx::visit_mtx;
pub use stream::{visit, visit_binary, visit_text, Position, Summary, VisitError};

/// Size of one read from an edge-list file.
pub const READ_BYTES: usize = 4 << 20;
/// Longest text line accepted; a longer one is almost surely a binary file read as text.
pub const LINE_BYTES_MAX: usize = 1 << 20;
/// Bytes of one binary record.
pub const RECORD_BYTES: u64 = 8;
/// Buffer size of the writers.
const WRITE_BYTES: usize = 1 << 20;

/// A loaded graph: its edges and the number of vertices they live on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EdgeList {
    /// Vertices are `0..vertex_count`: the given count, or the largest id plus one.
    pub vertex_count: u64,
    /// Edges in file order.
    pub edges: Vec<Edge>,
}

impl EdgeList {
    /// Number of edges.
    pub fn edge_count(&self) -> u64 {
        self.edges.len() as u64
    }
}

/// On-disk layout of an edge list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// SNAP-style `src dst` lines with `#`/`%` comments.
    Text,
    /// GridGraph: little-endian `u32` pairs, 8 bytes per edge.
    Binary,
    /// Matrix Market coordinate format (`.mtx`), 1-based ids.
    MatrixMarket,
}

impl Format {
    /// Guesses from the extension, after dropping a `.gz`: `.bin`, `.u32`, `.gridgraph`
    /// (any case) are binary, `.mtx` is Matrix Market, anything else (`.txt`, `.wel`,
    /// none) is text.
    pub fn detect(path: impl AsRef<Path>) -> Format {
        let path = path.as_ref();
        let lower = |e: &std::ffi::OsStr| e.to_string_lossy().to_ascii_lowercase();
        let mut ext = path.extension().map(lower);
        if ext.as_deref() == Some("gz") {
            ext = path
                .file_stem()
                .and_then(|s| Path::new(s).extension())
                .map(lower);
        }
        match ext.as_deref() {
            Some("bin" | "u32" | "gridgraph") => Format::Binary,
            Some("mtx") => Format::MatrixMarket,
            _ => Format::Text,
        }
    }

    /// `choice` if given, else [`Format::detect`].
    pub fn resolve(choice: Option<Format>, path: impl AsRef<Path>) -> Format {
        choice.unwrap_or_else(|| Format::detect(path))
    }
}

impl FromStr for Format {
    type Err = GraphError;

    /// Accepts `text`/`txt`/`snap`/`wel`, `binary`/`bin`/`gridgraph` and
    /// `mtx`/`matrixmarket`, any case.
    fn from_str(s: &str) -> Result<Format> {
        match s.to_ascii_lowercase().as_str() {
            "text" | "txt" | "snap" | "wel" => Ok(Format::Text),
            "mtx" | "matrixmarket" | "matrix-market" => Ok(Format::MatrixMarket),
            "binary" | "bin" | "gridgraph" => Ok(Format::Binary),
            _ => Err(GraphError::UnknownFormat { name: s.to_owned() }),
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Format::Text => "text",
            Format::Binary => "binary",
            Format::MatrixMarket => "mtx",
        })
    }
}

/// Limits applied while loading.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LoadOptions {
    /// Largest acceptable vertex id; at most `VERTEX_ID_MAX` (`u32::MAX` is reserved).
    pub max_vertex_id: VertexId,
    /// If given, every id must be below it and it becomes the list's vertex count.
    pub vertex_count: Option<u64>,
    /// Drop edge weights (a text file's third column, a `real` or `integer` Matrix
    /// Market file's values) instead of refusing the file: the edge lists here
    /// carry no weights (SSSP reads them apart), and dropping them must be asked for.
    pub ignore_weights: bool,
}

impl Default for LoadOptions {
    /// Any id up to `VERTEX_ID_MAX`; vertex count from the largest id.
    fn default() -> Self {
        LoadOptions {
            max_vertex_id: VERTEX_ID_MAX,
            vertex_count: None,
            ignore_weights: false,
        }
    }
}

impl LoadOptions {
    /// Checks that the settings are consistent.
    pub fn validate(&self) -> Result<()> {
        if self.max_vertex_id > VERTEX_ID_MAX {
            return Err(GraphError::InvalidLoadOptions {
                field: "max_vertex_id",
                reason: format!(
                    "{} exceeds {VERTEX_ID_MAX}; u32::MAX is reserved",
                    self.max_vertex_id
                ),
            });
        }
        if let Some(count) = self.vertex_count {
            let limit = u64::from(self.max_vertex_id) + 1;
            if count > limit {
                return Err(GraphError::InvalidLoadOptions {
                    field: "vertex_count",
                    reason: format!(
                        "{count} exceeds max_vertex_id + 1 = {limit}; raise max_vertex_id or \
                         lower the vertex count"
                    ),
                });
            }
        }
        Ok(())
    }

    /// Why `id` is unacceptable, if it is; `role` is "source" or "destination".
    pub(crate) fn reject(&self, role: &str, id: u64) -> Option<String> {
        if id > u64::from(self.max_vertex_id) {
            return Some(format!(
                "{role} vertex id {id} exceeds the maximum {}",
                self.max_vertex_id
            ));
        }
        match self.vertex_count {
            Some(count) if id >= count => Some(format!(
                "{role} vertex id {id} is not below the given vertex count {count}"
            )),
            _ => None,
        }
    }
}

/// Loads `path` in `format`, or the format [`Format::detect`] picks when `None`.
pub fn load(
    path: impl AsRef<Path>,
    format: Option<Format>,
    opts: &LoadOptions,
) -> Result<EdgeList> {
    let path = path.as_ref();
    match Format::resolve(format, path) {
        Format::Text => load_text(path, opts),
        Format::Binary => load_binary(path, opts),
        Format::MatrixMarket => load_mtx(path, opts),
    }
}

/// Loads a Matrix Market coordinate file (see [`mtx`]).
pub fn load_mtx(path: impl AsRef<Path>, opts: &LoadOptions) -> Result<EdgeList> {
    let path = path.as_ref();
    let (file, len) = open(path)?;
    let mut edges: Vec<Edge> = Vec::new();
    let summary = visit_mtx(file, path, len, opts, |edge, _| {
        edges.push(edge);
        Ok::<(), Infallible>(())
    })?;
    Ok(EdgeList {
        vertex_count: summary.vertex_count,
        edges,
    })
}

/// Loads a SNAP-style text edge list.
pub fn load_text(path: impl AsRef<Path>, opts: &LoadOptions) -> Result<EdgeList> {
    let path = path.as_ref();
    let (file, len) = open(path)?;
    read_text(file, path, len, opts)
}

/// Loads a GridGraph binary edge list.
pub fn load_binary(path: impl AsRef<Path>, opts: &LoadOptions) -> Result<EdgeList> {
    let path = path.as_ref();
    let (file, len) = open(path)?;
    read_binary(file, path, len, opts)
}

/// Gzip's first two bytes.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Opens `path` for reading, decompressing it if it starts with gzip's magic bytes;
/// the length is the file's (None for pipes and devices, and for compressed files,
/// whose decompressed length is not known before reading).
fn open(path: &Path) -> Result<(Box<dyn Read>, Option<u64>)> {
    use std::io::BufRead;
    let file = File::open(path).map_err(io_err("open", path))?;
    let meta = file.metadata().map_err(io_err("read", path))?;
    let mut reader = std::io::BufReader::with_capacity(1 << 16, file);
    let head = reader.fill_buf().map_err(io_err("read", path))?;
    if head.starts_with(&GZIP_MAGIC) {
        // Multi-member: `cat a.gz b.gz` and bgzip files are one stream.
        return Ok((Box::new(flate2::read::MultiGzDecoder::new(reader)), None));
    }
    // Pipes and devices have no meaningful length.
    Ok((Box::new(reader), meta.is_file().then_some(meta.len())))
}

/// Parses a text edge list from `reader`; `path` names it in errors and `len` (its size
/// in bytes, if known) sizes the progress bar.
pub fn read_text(
    reader: impl Read,
    path: &Path,
    len: Option<u64>,
    opts: &LoadOptions,
) -> Result<EdgeList> {
    let mut edges: Vec<Edge> = Vec::new();
    let summary = visit_text(reader, path, len, opts, |edge, _| {
        edges.push(edge);
        Ok::<(), Infallible>(())
    })?;
    Ok(EdgeList {
        vertex_count: summary.vertex_count,
        edges,
    })
}

/// Parses a GridGraph binary edge list from `reader`; `path` names it in errors and
/// `len` (its size in bytes, if known) lets a truncated file fail before it is read.
pub fn read_binary(
    reader: impl Read,
    path: &Path,
    len: Option<u64>,
    opts: &LoadOptions,
) -> Result<EdgeList> {
    // The length is exact for a regular file; a pipe grows the vector as it goes.
    let mut edges: Vec<Edge> =
        Vec::with_capacity(len.map_or(0, |l| l / RECORD_BYTES).try_into().unwrap_or(0));
    let summary = visit_binary(reader, path, len, opts, |edge, _| {
        edges.push(edge);
        Ok::<(), Infallible>(())
    })?;
    Ok(EdgeList {
        vertex_count: summary.vertex_count,
        edges,
    })
}

/// Streams edges to `PATH.partial` and renames it to `PATH` on success.
struct EdgeWriter<'p> {
    format: Format,
    path: &'p Path,
    partial: PathBuf,
    out: Option<BufWriter<File>>,
    scratch: Vec<u8>,
    written: u64,
}

impl<'p> EdgeWriter<'p> {
    /// Creates the partial file and, for text, writes the `# Nodes: N Edges: M` header.
    fn create(path: &'p Path, format: Format, vertex_count: u64, edge_count: u64) -> Result<Self> {
        let mut name = OsString::from(path.as_os_str());
        name.push(".partial");
        let partial = PathBuf::from(name);
        let file = File::create(&partial).map_err(io_err("create", &partial))?;
        let mut writer = EdgeWriter {
            format,
            path,
            partial,
            out: Some(BufWriter::with_capacity(WRITE_BYTES, file)),
            scratch: Vec::with_capacity(WRITE_BYTES),
            written: 0,
        };
        match format {
            // SNAP's own header line, so SNAP tools and humans read the counts.
            Format::Text => writer.scratch.extend_from_slice(
                format!("# Nodes: {vertex_count} Edges: {edge_count}\n").as_bytes(),
            ),
            Format::MatrixMarket => writer.scratch.extend_from_slice(
                format!(
                    "%%MatrixMarket matrix coordinate pattern general\n\
                     {vertex_count} {vertex_count} {edge_count}\n"
                )
                .as_bytes(),
            ),
            Format::Binary => {}
        }
        Ok(writer)
    }

    fn write_edges(&mut self, edges: &[Edge]) -> Result<()> {
        for &(src, dst) in edges {
            match self.format {
                Format::Text => {
                    push_decimal(&mut self.scratch, src);
                    self.scratch.push(b'\t');
                    push_decimal(&mut self.scratch, dst);
                    self.scratch.push(b'\n');
                }
                Format::Binary => {
                    self.scratch.extend_from_slice(&src.to_le_bytes());
                    self.scratch.extend_from_slice(&dst.to_le_bytes());
                }
                Format::MatrixMarket => {
                    // 1-based; VERTEX_ID_MAX + 1 still fits a u64's decimal.
                    self.scratch.extend_from_slice(
                        format!("{} {}\n", u64::from(src) + 1, u64::from(dst) + 1).as_bytes(),
                    );
                }
            }
            if self.scratch.len() >= WRITE_BYTES - 32 {
                self.drain()?;
            }
        }
        self.written += edges.len() as u64;
        Ok(())
    }

    fn drain(&mut self) -> Result<()> {
        if let Some(out) = self.out.as_mut() {
            out.write_all(&self.scratch)
                .map_err(io_err("write", &self.partial))?;
        }
        self.scratch.clear();
        Ok(())
    }

    fn finish(mut self) -> Result<u64> {
        self.drain()?;
        if let Some(out) = self.out.take() {
            let file = out
                .into_inner()
                .map_err(|e| io_err("write", &self.partial)(e.into_error()))?;
            file.sync_all().map_err(io_err("write", &self.partial))?;
        }
        std::fs::rename(&self.partial, self.path).map_err(io_err("rename", &self.partial))?;
        Ok(self.written)
    }
}

impl Drop for EdgeWriter<'_> {
    fn drop(&mut self) {
        // Still open means finish() did not complete: remove the partial file. The
        // original error is what the caller needs; a failed removal adds nothing.
        if self.out.take().is_some() {
            let _ = std::fs::remove_file(&self.partial);
        }
    }
}

fn push_decimal(out: &mut Vec<u8>, mut v: u32) {
    let mut digits = [0u8; 10];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// Writes `edges` to `path` in `format`; returns the number of edges written.
pub fn write(path: impl AsRef<Path>, format: Format, edges: &[Edge]) -> Result<u64> {
    let path = path.as_ref();
    let vertex_count = edges
        .iter()
        .map(|&(s, d)| u64::from(s.max(d)) + 1)
        .max()
        .unwrap_or(0);
    let mut writer = EdgeWriter::create(path, format, vertex_count, edges.len() as u64)?;
    writer.write_edges(edges)?;
    writer.finish()
}

/// Writes a text edge list with a `# Nodes: N Edges: M` header (N = largest id + 1).
pub fn write_text(path: impl AsRef<Path>, edges: &[Edge]) -> Result<u64> {
    write(path, Format::Text, edges)
}

/// Writes a GridGraph binary edge list.
pub fn write_binary(path: impl AsRef<Path>, edges: &[Edge]) -> Result<u64> {
    write(path, Format::Binary, edges)
}

/// Streams an R-MAT graph to `path` in edge order without holding its edge list:
/// `threads` threads generate a few chunks ahead of the writer. Returns the edge count.
pub fn write_rmat(
    path: impl AsRef<Path>,
    format: Format,
    rmat: &Rmat,
    threads: usize,
) -> Result<u64> {
    let path = path.as_ref();
    let mut writer = EdgeWriter::create(path, format, rmat.vertex_count(), rmat.edge_count())?;
    let pb = progress::bar(rmat.edge_count(), Unit::Edges, "writing R-MAT edges");
    let result = rmat.try_for_each_chunk_in_order(threads, |_, edges| {
        pb.inc(edges.len() as u64);
        writer.write_edges(edges)
    });
    pb.finish_and_clear();
    result?;
    writer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str, opts: &LoadOptions) -> Result<EdgeList> {
        read_text(s.as_bytes(), Path::new("mem.txt"), None, opts)
    }

    fn bad_line(s: &str) -> (u64, String, String) {
        match text(s, &LoadOptions::default()) {
            Err(GraphError::MalformedLine {
                line, text, reason, ..
            }) => (line, text, reason),
            other => panic!("expected MalformedLine for {s:?}, got {other:?}"),
        }
    }

    #[test]
    fn comments_blanks_tabs_and_crlf() {
        let list = text(
            "# c\n% c\n\n  \t\n1 2\r\n3\t4\n  # indented comment\n5 6",
            &LoadOptions::default(),
        )
        .expect("valid");
        assert_eq!(list.edges, vec![(1, 2), (3, 4), (5, 6)]);
        assert_eq!(list.vertex_count, 7);
    }

    #[test]
    fn reasons_are_specific() {
        assert_eq!(bad_line("1 2\n7\n").0, 2);
        assert_eq!(bad_line("7\n").2, "expected two vertex ids, found 1");
        assert_eq!(
            bad_line("1 2 3 4\n").2,
            "expected two vertex ids and at most a weight, found 4"
        );
        assert!(bad_line("1 2 3\n")
            .2
            .contains("edge weights are read only by SSSP"));
        assert_eq!(bad_line("1 2 x\n").2, "not a weight (a number): 'x'");
        assert_eq!(bad_line("x1 2\n").2, "not an unsigned integer: 'x1'");
        assert_eq!(bad_line("1 -2\n").2, "not an unsigned integer: '-2'");
        assert_eq!(
            bad_line("4294967296 0\n").2,
            "source vertex id 4294967296 exceeds the maximum 4294967294"
        );
        assert_eq!(
            bad_line("0 99999999999999999999999\n").2,
            "destination vertex id 99999999999999999999999 exceeds the maximum 4294967294"
        );
    }

    #[test]
    fn quoted_text_is_truncated() {
        let long = format!("1 2 {}\n", "9".repeat(500));
        let (_, text, _) = bad_line(&long);
        assert!(text.len() < 100 && text.ends_with("..."), "{text}");
    }

    #[test]
    fn overlong_line_is_rejected() {
        let data = vec![b'1'; LINE_BYTES_MAX + READ_BYTES];
        match read_text(&data[..], Path::new("x"), None, &LoadOptions::default()) {
            Err(GraphError::LineTooLong { line: 1, .. }) => {}
            other => panic!("expected LineTooLong, got {other:?}"),
        }
    }

    #[test]
    fn format_names_and_extensions() {
        assert_eq!("BIN".parse::<Format>().expect("known"), Format::Binary);
        assert_eq!("snap".parse::<Format>().expect("known"), Format::Text);
        assert!("csv".parse::<Format>().is_err());
        assert_eq!(Format::detect("g.gridgraph"), Format::Binary);
        assert_eq!(Format::detect("g.U32"), Format::Binary);
        assert_eq!(Format::detect("g.txt"), Format::Text);
        assert_eq!(Format::detect("graph"), Format::Text);
        assert_eq!(Format::detect("g.MTX"), Format::MatrixMarket);
        assert_eq!(Format::detect("g.mtx.gz"), Format::MatrixMarket);
        assert_eq!(Format::detect("g.bin.gz"), Format::Binary);
        assert_eq!(Format::detect("g.wel"), Format::Text);
        assert_eq!(Format::detect("g.gz"), Format::Text);
        assert_eq!(
            "mtx".parse::<Format>().expect("known"),
            Format::MatrixMarket
        );
        assert_eq!(Format::resolve(Some(Format::Text), "g.bin"), Format::Text);
    }

    #[test]
    fn options_are_validated() {
        let opts = LoadOptions {
            max_vertex_id: 9,
            vertex_count: Some(11),
            ..LoadOptions::default()
        };
        assert!(matches!(
            text("1 2\n", &opts),
            Err(GraphError::InvalidLoadOptions {
                field: "vertex_count",
                ..
            })
        ));
    }

    #[test]
    fn decimal_formatting() {
        for v in [0u32, 7, 10, 99, 12345, u32::MAX] {
            let mut out = Vec::new();
            push_decimal(&mut out, v);
            assert_eq!(out, v.to_string().as_bytes());
        }
    }
}
