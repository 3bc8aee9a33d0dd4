//! Edge-list files: SNAP-style text and GridGraph binary, readers and writers.
//!
//! Text: one edge per line as two unsigned decimal ids separated by spaces or tabs;
//! lines whose first non-blank byte is `#` or `%` are comments; blank lines are
//! skipped; `\r\n` line ends are accepted. Anything else is an error naming the file,
//! the 1-based line, the line's text and the reason.
//!
//! Binary (GridGraph): consecutive 8-byte records, each `src: u32 LE, dst: u32 LE`.
//!
//! ```text
//!   byte  0      4      8      12     16
//!         | src0 | dst0 | src1 | dst1 | ...
//! ```
//!
//! Loading is all or nothing: an error returns no edges. Files are read in
//! [`READ_BYTES`] blocks and parsed by hand over bytes, with no per-line allocation.
//! Writers stream through a buffer into `PATH.partial` and rename it over `PATH` only
//! once everything is written, so a failed write leaves no half-written file behind.

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufWriter, ErrorKind, Read, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{io_err, GraphError, Result};
use crate::progress::{self, Unit};
use crate::rmat::Rmat;
use crate::{Edge, VertexId, VERTEX_ID_MAX};

/// Size of one read from an edge-list file.
pub const READ_BYTES: usize = 4 << 20;
/// Longest text line accepted; a longer one is almost surely a binary file read as text.
pub const LINE_BYTES_MAX: usize = 1 << 20;
/// Bytes of one binary record.
pub const RECORD_BYTES: u64 = 8;
/// Characters of offending text quoted in an error message.
const QUOTE_CHARS_MAX: usize = 60;
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
}

impl Format {
    /// Guesses from the extension: `.bin`, `.u32`, `.gridgraph` (any case) are binary,
    /// anything else is text.
    pub fn detect(path: impl AsRef<Path>) -> Format {
        let ext = path
            .as_ref()
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase());
        match ext.as_deref() {
            Some("bin" | "u32" | "gridgraph") => Format::Binary,
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

    /// Accepts `text`/`txt`/`snap` and `binary`/`bin`/`gridgraph`, any case.
    fn from_str(s: &str) -> Result<Format> {
        match s.to_ascii_lowercase().as_str() {
            "text" | "txt" | "snap" => Ok(Format::Text),
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
}

impl Default for LoadOptions {
    /// Any id up to `VERTEX_ID_MAX`; vertex count from the largest id.
    fn default() -> Self {
        LoadOptions {
            max_vertex_id: VERTEX_ID_MAX,
            vertex_count: None,
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
    fn reject(&self, role: &str, id: u64) -> Option<String> {
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
    }
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

fn open(path: &Path) -> Result<(File, Option<u64>)> {
    let file = File::open(path).map_err(io_err("open", path))?;
    let meta = file.metadata().map_err(io_err("read", path))?;
    // Pipes and devices have no meaningful length.
    Ok((file, meta.is_file().then_some(meta.len())))
}

/// Reads into `buf`, retrying on `Interrupted`; 0 means end of input.
fn read_some(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match reader.read(buf) {
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// Quotes at most `QUOTE_CHARS_MAX` characters of `bytes`, marking a cut with "...".
fn quote(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut chars = text.chars();
    let mut out: String = chars.by_ref().take(QUOTE_CHARS_MAX).collect();
    if chars.next().is_some() {
        out.push_str("...");
    }
    out
}

#[inline]
fn is_blank(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | 0x0b | 0x0c)
}

/// Parses an all-digit token; `Err(())` if a byte is not a digit, `Ok(None)` on u64 overflow.
#[inline]
fn parse_id(token: &[u8]) -> std::result::Result<Option<u64>, ()> {
    let mut value = Some(0u64);
    for &b in token {
        if !b.is_ascii_digit() {
            return Err(());
        }
        value = value
            .and_then(|v| v.checked_mul(10))
            .and_then(|v| v.checked_add(u64::from(b - b'0')));
    }
    Ok(value)
}

/// What one text line holds.
enum Line {
    Skip,
    Edge(VertexId, VertexId),
    Bad(String),
}

fn parse_line(line: &[u8], opts: &LoadOptions) -> Line {
    // Token boundaries of the first two tokens, and how many tokens there are.
    let mut tokens = [(0usize, 0usize); 2];
    let mut count = 0usize;
    let mut i = 0;
    while i < line.len() {
        if is_blank(line[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < line.len() && !is_blank(line[i]) {
            i += 1;
        }
        if count == 0 && matches!(line[start], b'#' | b'%') {
            return Line::Skip;
        }
        if count < 2 {
            tokens[count] = (start, i);
        }
        count += 1;
    }
    if count == 0 {
        return Line::Skip;
    }
    if count != 2 {
        return Line::Bad(format!("expected two vertex ids, found {count}"));
    }
    let mut ids = [0 as VertexId; 2];
    for (k, role) in ["source", "destination"].into_iter().enumerate() {
        let token = &line[tokens[k].0..tokens[k].1];
        let id = match parse_id(token) {
            Err(()) => return Line::Bad(format!("not an unsigned integer: '{}'", quote(token))),
            Ok(None) => {
                return Line::Bad(format!(
                    "{role} vertex id {} exceeds the maximum {}",
                    quote(token),
                    opts.max_vertex_id
                ))
            }
            Ok(Some(id)) => id,
        };
        if let Some(reason) = opts.reject(role, id) {
            return Line::Bad(reason);
        }
        // reject() guarantees id <= max_vertex_id <= u32::MAX.
        ids[k] = id as VertexId;
    }
    Line::Edge(ids[0], ids[1])
}

/// Parses a text edge list from `reader`; `path` names it in errors and `len` (its size
/// in bytes, if known) sizes the progress bar.
pub fn read_text(
    mut reader: impl Read,
    path: &Path,
    len: Option<u64>,
    opts: &LoadOptions,
) -> Result<EdgeList> {
    opts.validate()?;
    let pb = progress::bar(len.unwrap_or(0), Unit::Bytes, "loading text edge list");
    let mut buf = vec![0u8; READ_BYTES];
    let mut carry = 0usize; // bytes of an unfinished line at the front of buf
    let mut line_no = 0u64; // lines finished so far
    let mut edges: Vec<Edge> = Vec::new();
    let mut id_max: Option<VertexId> = None;
    loop {
        let n = read_some(&mut reader, &mut buf[carry..]).map_err(io_err("read", path))?;
        pb.inc(n as u64);
        let filled = carry + n;
        let eof = n == 0;
        // Parse only whole lines, except at the end where an unterminated last line counts.
        let end = if eof {
            filled
        } else {
            buf[..filled]
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |p| p + 1)
        };
        let mut pos = 0;
        while pos < end {
            let nl = buf[pos..end]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(end, |p| pos + p);
            let line = &buf[pos..nl];
            line_no += 1;
            match parse_line(line, opts) {
                Line::Skip => {}
                Line::Edge(s, d) => {
                    id_max = id_max.max(Some(s.max(d)));
                    edges.push((s, d));
                }
                Line::Bad(reason) => {
                    pb.finish_and_clear();
                    let text = line.strip_suffix(b"\r").unwrap_or(line);
                    return Err(GraphError::MalformedLine {
                        path: path.to_path_buf(),
                        line: line_no,
                        text: quote(text),
                        reason,
                    });
                }
            }
            pos = nl + 1;
        }
        if eof {
            break;
        }
        buf.copy_within(end..filled, 0);
        carry = filled - end;
        if carry > LINE_BYTES_MAX {
            pb.finish_and_clear();
            return Err(GraphError::LineTooLong {
                path: path.to_path_buf(),
                line: line_no + 1,
                line_bytes_max: LINE_BYTES_MAX,
            });
        }
    }
    pb.finish_and_clear();
    finish(path, edges, id_max, opts)
}

/// Parses a GridGraph binary edge list from `reader`; `path` names it in errors and
/// `len` (its size in bytes, if known) lets a truncated file fail before it is read.
pub fn read_binary(
    mut reader: impl Read,
    path: &Path,
    len: Option<u64>,
    opts: &LoadOptions,
) -> Result<EdgeList> {
    opts.validate()?;
    let truncated = |offset: u64, file_bytes: u64| GraphError::TruncatedRecord {
        path: path.to_path_buf(),
        offset,
        file_bytes,
    };
    if let Some(len) = len {
        if len % RECORD_BYTES != 0 {
            return Err(truncated(len - len % RECORD_BYTES, len));
        }
    }
    let pb = progress::bar(len.unwrap_or(0), Unit::Bytes, "loading binary edge list");
    // The length is exact for a regular file; a pipe grows the vector as it goes.
    let mut edges: Vec<Edge> =
        Vec::with_capacity(len.map_or(0, |l| l / RECORD_BYTES).try_into().unwrap_or(0));
    let mut buf = vec![0u8; READ_BYTES];
    let mut carry = 0usize; // bytes of an unfinished record at the front of buf
    let mut base = 0u64; // file offset of buf[0]
    let mut id_max: Option<VertexId> = None;
    loop {
        let n = read_some(&mut reader, &mut buf[carry..]).map_err(io_err("read", path))?;
        pb.inc(n as u64);
        if n == 0 {
            pb.finish_and_clear();
            if carry > 0 {
                return Err(truncated(base, base + carry as u64));
            }
            break;
        }
        let filled = carry + n;
        let whole = filled - filled % RECORD_BYTES as usize;
        for (k, rec) in buf[..whole].chunks_exact(RECORD_BYTES as usize).enumerate() {
            let src = u32::from_le_bytes([rec[0], rec[1], rec[2], rec[3]]);
            let dst = u32::from_le_bytes([rec[4], rec[5], rec[6], rec[7]]);
            let reason = opts
                .reject("source", src.into())
                .or_else(|| opts.reject("destination", dst.into()));
            if let Some(reason) = reason {
                pb.finish_and_clear();
                return Err(GraphError::MalformedRecord {
                    path: path.to_path_buf(),
                    offset: base + k as u64 * RECORD_BYTES,
                    reason,
                });
            }
            id_max = id_max.max(Some(src.max(dst)));
            edges.push((src, dst));
        }
        buf.copy_within(whole..filled, 0);
        carry = filled - whole;
        base += whole as u64;
    }
    finish(path, edges, id_max, opts)
}

fn finish(
    path: &Path,
    edges: Vec<Edge>,
    id_max: Option<VertexId>,
    opts: &LoadOptions,
) -> Result<EdgeList> {
    let Some(id_max) = id_max else {
        return Err(GraphError::NoEdges {
            path: path.to_path_buf(),
        });
    };
    Ok(EdgeList {
        vertex_count: opts.vertex_count.unwrap_or(u64::from(id_max) + 1),
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
        if format == Format::Text {
            // SNAP's own header line, so SNAP tools and humans read the counts.
            writer.scratch.extend_from_slice(
                format!("# Nodes: {vertex_count} Edges: {edge_count}\n").as_bytes(),
            );
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
        assert_eq!(bad_line("1 2 3\n").2, "expected two vertex ids, found 3");
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
        assert_eq!(Format::resolve(Some(Format::Text), "g.bin"), Format::Text);
    }

    #[test]
    fn options_are_validated() {
        let opts = LoadOptions {
            max_vertex_id: 9,
            vertex_count: Some(11),
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
