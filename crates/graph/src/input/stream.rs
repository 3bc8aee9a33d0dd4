//! The streaming readers under [`load`](super::load): each edge goes to a callback with
//! its [`Position`] as soon as it is parsed, so a caller can consume a file of any size
//! in constant memory and name the line (or record) of an edge it refuses.
//!
//! Validation is the one `load` applies (options, ids, tokens, line length, record
//! length, at least one edge), with the same errors. The callback sees edges in file
//! order; the first `Err` it returns stops the visit and comes back as
//! [`VisitError::Rejected`] with the edge's position. Edges before a malformed line have
//! already been handed over by the time the error is found: a caller that must be all
//! or nothing visits twice (validate, then use), as the bulk loader does.

use std::convert::Infallible;
use std::fmt;
use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};

use super::{open, Format, LoadOptions, LINE_BYTES_MAX, READ_BYTES, RECORD_BYTES};
use crate::error::{io_err, GraphError};
use crate::progress::{self, Unit};
use crate::{Edge, VertexId};

/// Characters of offending text quoted in an error message.
const QUOTE_CHARS_MAX: usize = 60;

/// Where an edge is in its file.
///
/// Positions of one file are of one kind and increase in file order, so the range
/// `first..=last` of a group of edges says which part of the file they came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Position {
    /// 1-based line of a text edge list.
    Line(u64),
    /// Byte offset of the edge's 8-byte record in a binary edge list.
    Offset(u64),
}

impl Position {
    /// The line number or byte offset.
    pub fn get(self) -> u64 {
        match self {
            Position::Line(n) | Position::Offset(n) => n,
        }
    }
}

impl fmt::Display for Position {
    /// `line 12` or `byte offset 96`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Position::Line(n) => write!(f, "line {n}"),
            Position::Offset(o) => write!(f, "byte offset {o}"),
        }
    }
}

/// What a completed visit saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Summary {
    /// Edges handed to the callback.
    pub edges: u64,
    /// The largest vertex id of any edge.
    pub id_max: VertexId,
    /// The vertex count a load would give: `LoadOptions::vertex_count`, else `id_max + 1`.
    pub vertex_count: u64,
}

/// Why a visit stopped early.
///
/// Separate from [`GraphError`] because it carries the caller's own error type `E`
/// back unchanged, together with where the refused edge was.
#[derive(Debug)]
#[non_exhaustive]
pub enum VisitError<E> {
    /// The file could not be read or is malformed: the error [`load`](super::load)
    /// gives, naming the file and the line or byte offset.
    Input(GraphError),
    /// The callback returned `error` for the edge at `position`; the visit stopped there.
    Rejected {
        /// The file being read.
        path: PathBuf,
        /// Where the refused edge is.
        position: Position,
        /// What the callback returned.
        error: E,
    },
}

impl<E> From<GraphError> for VisitError<E> {
    fn from(e: GraphError) -> Self {
        VisitError::Input(e)
    }
}

impl From<VisitError<Infallible>> for GraphError {
    /// A visit whose callback cannot fail can only stop on its input.
    fn from(e: VisitError<Infallible>) -> Self {
        match e {
            VisitError::Input(e) => e,
            VisitError::Rejected { error, .. } => match error {},
        }
    }
}

impl<E: fmt::Display> fmt::Display for VisitError<E> {
    /// The input error as is; a rejection as `PATH:LINE: error` (text) or
    /// `PATH: record at byte offset N: error` (binary), the shapes of [`GraphError`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VisitError::Input(e) => e.fmt(f),
            VisitError::Rejected {
                path,
                position: Position::Line(line),
                error,
            } => write!(f, "{}:{line}: {error}", path.display()),
            VisitError::Rejected {
                path,
                position: Position::Offset(offset),
                error,
            } => write!(
                f,
                "{}: record at byte offset {offset}: {error}",
                path.display()
            ),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for VisitError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            VisitError::Input(e) => e.source(),
            VisitError::Rejected { error, .. } => Some(error),
        }
    }
}

/// Visits the edges of `path` in `format`, or the format [`Format::detect`] picks when
/// `None`: calls `f(edge, position)` for each edge in file order.
///
/// ```no_run
/// use locus_graph::input::{self, Position};
/// use locus_graph::LoadOptions;
///
/// // Refuse self loops, naming the line.
/// let summary = input::visit("g.txt", None, &LoadOptions::default(), |(s, d), _: Position| {
///     if s == d { Err(format!("self loop at vertex {s}")) } else { Ok(()) }
/// });
/// match summary {
///     Ok(s) => println!("{} edges, largest id {}", s.edges, s.id_max),
///     Err(e) => eprintln!("{e}"), // e.g. "g.txt:7: self loop at vertex 3"
/// }
/// ```
pub fn visit<E>(
    path: impl AsRef<Path>,
    format: Option<Format>,
    opts: &LoadOptions,
    f: impl FnMut(Edge, Position) -> Result<(), E>,
) -> Result<Summary, VisitError<E>> {
    let path = path.as_ref();
    let (file, len) = open(path)?;
    match Format::resolve(format, path) {
        Format::Text => visit_text(file, path, len, opts, f),
        Format::Binary => visit_binary(file, path, len, opts, f),
        Format::MatrixMarket => super::mtx::visit_mtx(file, path, len, opts, f),
    }
}

/// Reads into `buf`, retrying on `Interrupted`; 0 means end of input.
pub(super) fn read_some(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match reader.read(buf) {
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// Quotes at most `QUOTE_CHARS_MAX` characters of `bytes`, marking a cut with "...".
pub(super) fn quote(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut chars = text.chars();
    let mut out: String = chars.by_ref().take(QUOTE_CHARS_MAX).collect();
    if chars.next().is_some() {
        out.push_str("...");
    }
    out
}

#[inline]
pub(super) fn is_blank(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | 0x0b | 0x0c)
}

/// Parses an all-digit token; `Err(())` if a byte is not a digit, `Ok(None)` on u64 overflow.
#[inline]
pub(super) fn parse_id(token: &[u8]) -> Result<Option<u64>, ()> {
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

/// Why an edge's weight token `w` is refused, if it is: not a number, or a number
/// while weights are not dropped on request.
pub(super) fn weight_refused(w: &[u8], opts: &LoadOptions) -> Option<String> {
    let number = std::str::from_utf8(w)
        .ok()
        .and_then(|t| t.parse::<f64>().ok())
        .is_some_and(f64::is_finite);
    if !number {
        return Some(format!("not a weight (a number): '{}'", quote(w)));
    }
    (!opts.ignore_weights).then(|| {
        format!(
            "a weight column ('{}'): edge weights are read only by SSSP (locus \
             analytics run --algo sssp); for anything else remove the column, or drop \
             the weights on purpose with --ignore-weights (load option ignore_weights)",
            quote(w)
        )
    })
}

/// What one text line holds.
enum Line {
    Skip,
    Edge(VertexId, VertexId),
    Bad(String),
}

fn parse_line(line: &[u8], opts: &LoadOptions) -> Line {
    // Token boundaries of the first three tokens, and how many tokens there are.
    let mut tokens = [(0usize, 0usize); 3];
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
        if count < 3 {
            tokens[count] = (start, i);
        }
        count += 1;
    }
    if count == 0 {
        return Line::Skip;
    }
    if count < 2 {
        return Line::Bad(format!("expected two vertex ids, found {count}"));
    }
    if count > 3 {
        return Line::Bad(format!(
            "expected two vertex ids and at most a weight, found {count}"
        ));
    }
    if count == 3 {
        let w = &line[tokens[2].0..tokens[2].1];
        if let Some(reason) = weight_refused(w, opts) {
            return Line::Bad(reason);
        }
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

/// Visits a text edge list read from `reader`; `path` names it in errors and `len` (its
/// size in bytes, if known) sizes the progress bar. Positions are [`Position::Line`].
pub fn visit_text<E>(
    mut reader: impl Read,
    path: &Path,
    len: Option<u64>,
    opts: &LoadOptions,
    mut f: impl FnMut(Edge, Position) -> Result<(), E>,
) -> Result<Summary, VisitError<E>> {
    opts.validate()?;
    let pb = progress::bar(len.unwrap_or(0), Unit::Bytes, "loading text edge list");
    let mut buf = vec![0u8; READ_BYTES];
    let mut carry = 0usize; // bytes of an unfinished line at the front of buf
    let mut line_no = 0u64; // lines finished so far
    let mut edges = 0u64;
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
                    if let Err(error) = f((s, d), Position::Line(line_no)) {
                        pb.finish_and_clear();
                        return Err(VisitError::Rejected {
                            path: path.to_path_buf(),
                            position: Position::Line(line_no),
                            error,
                        });
                    }
                    id_max = id_max.max(Some(s.max(d)));
                    edges += 1;
                }
                Line::Bad(reason) => {
                    pb.finish_and_clear();
                    let text = line.strip_suffix(b"\r").unwrap_or(line);
                    return Err(GraphError::MalformedLine {
                        path: path.to_path_buf(),
                        line: line_no,
                        text: quote(text),
                        reason,
                    }
                    .into());
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
            }
            .into());
        }
    }
    pb.finish_and_clear();
    summary(path, edges, id_max, opts)
}

/// Visits a GridGraph binary edge list read from `reader`; `path` names it in errors
/// and `len` (its size in bytes, if known) lets a truncated file fail before any edge
/// is visited. Positions are [`Position::Offset`].
pub fn visit_binary<E>(
    mut reader: impl Read,
    path: &Path,
    len: Option<u64>,
    opts: &LoadOptions,
    mut f: impl FnMut(Edge, Position) -> Result<(), E>,
) -> Result<Summary, VisitError<E>> {
    opts.validate()?;
    let truncated = |offset: u64, file_bytes: u64| GraphError::TruncatedRecord {
        path: path.to_path_buf(),
        offset,
        file_bytes,
    };
    if let Some(len) = len {
        if len % RECORD_BYTES != 0 {
            return Err(truncated(len - len % RECORD_BYTES, len).into());
        }
    }
    let pb = progress::bar(len.unwrap_or(0), Unit::Bytes, "loading binary edge list");
    let mut buf = vec![0u8; READ_BYTES];
    let mut carry = 0usize; // bytes of an unfinished record at the front of buf
    let mut base = 0u64; // file offset of buf[0]
    let mut edges = 0u64;
    let mut id_max: Option<VertexId> = None;
    loop {
        let n = read_some(&mut reader, &mut buf[carry..]).map_err(io_err("read", path))?;
        pb.inc(n as u64);
        if n == 0 {
            pb.finish_and_clear();
            if carry > 0 {
                return Err(truncated(base, base + carry as u64).into());
            }
            break;
        }
        let filled = carry + n;
        let whole = filled - filled % RECORD_BYTES as usize;
        for (k, rec) in buf[..whole].chunks_exact(RECORD_BYTES as usize).enumerate() {
            let offset = base + k as u64 * RECORD_BYTES;
            let src = u32::from_le_bytes([rec[0], rec[1], rec[2], rec[3]]);
            let dst = u32::from_le_bytes([rec[4], rec[5], rec[6], rec[7]]);
            let reason = opts
                .reject("source", src.into())
                .or_else(|| opts.reject("destination", dst.into()));
            if let Some(reason) = reason {
                pb.finish_and_clear();
                return Err(GraphError::MalformedRecord {
                    path: path.to_path_buf(),
                    offset,
                    reason,
                }
                .into());
            }
            if let Err(error) = f((src, dst), Position::Offset(offset)) {
                pb.finish_and_clear();
                return Err(VisitError::Rejected {
                    path: path.to_path_buf(),
                    position: Position::Offset(offset),
                    error,
                });
            }
            id_max = id_max.max(Some(src.max(dst)));
            edges += 1;
        }
        buf.copy_within(whole..filled, 0);
        carry = filled - whole;
        base += whole as u64;
    }
    summary(path, edges, id_max, opts)
}

/// The summary of a finished visit; a file without edges is [`GraphError::NoEdges`].
fn summary<E>(
    path: &Path,
    edges: u64,
    id_max: Option<VertexId>,
    opts: &LoadOptions,
) -> Result<Summary, VisitError<E>> {
    let Some(id_max) = id_max else {
        return Err(GraphError::NoEdges {
            path: path.to_path_buf(),
        }
        .into());
    };
    Ok(Summary {
        edges,
        id_max,
        vertex_count: opts.vertex_count.unwrap_or(u64::from(id_max) + 1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(src: u32, dst: u32) -> Vec<u8> {
        [src.to_le_bytes(), dst.to_le_bytes()].concat()
    }

    /// Visits `text`, collecting every edge with its position.
    fn text_edges(text: &str) -> (Vec<(Edge, Position)>, Summary) {
        let mut seen = Vec::new();
        let summary = visit_text(
            text.as_bytes(),
            Path::new("mem.txt"),
            None,
            &LoadOptions::default(),
            |e, p| {
                seen.push((e, p));
                Ok::<(), Infallible>(())
            },
        )
        .expect("valid");
        (seen, summary)
    }

    #[test]
    fn text_positions_are_lines_counting_comments_and_blanks() {
        let (seen, summary) = text_edges("# header\n1 2\n\n% c\r\n3 4\r\n  \n5 9");
        assert_eq!(
            seen,
            vec![
                ((1, 2), Position::Line(2)),
                ((3, 4), Position::Line(5)),
                ((5, 9), Position::Line(7)),
            ]
        );
        assert_eq!(
            summary,
            Summary {
                edges: 3,
                id_max: 9,
                vertex_count: 10
            }
        );
    }

    #[test]
    fn binary_positions_are_record_offsets() {
        let bytes = [record(1, 2), record(3, 4), record(7, 0)].concat();
        let mut seen = Vec::new();
        let opts = LoadOptions {
            vertex_count: Some(100),
            ..LoadOptions::default()
        };
        let summary = visit_binary(&bytes[..], Path::new("mem.bin"), None, &opts, |e, p| {
            seen.push((e, p));
            Ok::<(), Infallible>(())
        })
        .expect("valid");
        assert_eq!(
            seen,
            vec![
                ((1, 2), Position::Offset(0)),
                ((3, 4), Position::Offset(8)),
                ((7, 0), Position::Offset(16)),
            ]
        );
        assert_eq!((summary.edges, summary.id_max), (3, 7));
        assert_eq!(summary.vertex_count, 100, "the given count wins");
    }

    #[test]
    fn a_callback_error_stops_the_text_visit_at_its_line() {
        let mut calls = 0;
        let err = visit_text(
            &b"0 1\n# c\n2 2\n3 4\n"[..],
            Path::new("g.txt"),
            None,
            &LoadOptions::default(),
            |(s, d), _| {
                calls += 1;
                if s == d {
                    Err(format!("self loop at vertex {s}"))
                } else {
                    Ok(())
                }
            },
        )
        .expect_err("refused");
        assert_eq!(calls, 2, "no edge is visited after the refusal");
        assert_eq!(err.to_string(), "g.txt:3: self loop at vertex 2");
        match err {
            VisitError::Rejected {
                path,
                position,
                error,
            } => {
                assert_eq!(path, Path::new("g.txt"));
                assert_eq!(position, Position::Line(3));
                assert_eq!(error, "self loop at vertex 2");
            }
            other => panic!("expected Rejected, got {other:?}"),
        }
    }

    #[test]
    fn a_callback_error_stops_the_binary_visit_at_its_offset() {
        let bytes = [record(1, 2), record(3, 4), record(5, 6)].concat();
        let mut calls = 0;
        let err = visit_binary(
            &bytes[..],
            Path::new("g.bin"),
            Some(bytes.len() as u64),
            &LoadOptions::default(),
            |(s, _), _| {
                calls += 1;
                if s == 3 {
                    Err(std::io::Error::other("no room"))
                } else {
                    Ok(())
                }
            },
        )
        .expect_err("refused");
        assert_eq!(calls, 2);
        assert_eq!(err.to_string(), "g.bin: record at byte offset 8: no room");
        assert!(
            std::error::Error::source(&err).is_some(),
            "the callback's error is the source"
        );
        assert!(matches!(
            err,
            VisitError::Rejected {
                position: Position::Offset(8),
                ..
            }
        ));
    }

    #[test]
    fn a_malformed_line_ends_the_visit_with_the_load_error() {
        let mut seen = Vec::new();
        let err = visit_text(
            &b"0 1\n1 2\nx 3\n4 5\n"[..],
            Path::new("g.txt"),
            None,
            &LoadOptions::default(),
            |e, _| {
                seen.push(e);
                Ok::<(), Infallible>(())
            },
        )
        .expect_err("malformed");
        assert_eq!(seen, vec![(0, 1), (1, 2)], "edges before the bad line");
        match err {
            VisitError::Input(GraphError::MalformedLine {
                line, text, reason, ..
            }) => {
                assert_eq!((line, text.as_str()), (3, "x 3"));
                assert_eq!(reason, "not an unsigned integer: 'x'");
            }
            other => panic!("expected MalformedLine, got {other:?}"),
        }
    }

    #[test]
    fn ids_past_the_options_are_input_errors_not_callback_calls() {
        let opts = LoadOptions {
            max_vertex_id: 9,
            vertex_count: None,
            ..LoadOptions::default()
        };
        let bytes = [record(1, 2), record(3, 10)].concat();
        let mut calls = 0;
        let err = visit_binary(&bytes[..], Path::new("g.bin"), None, &opts, |_, _| {
            calls += 1;
            Ok::<(), Infallible>(())
        })
        .expect_err("id 10 > 9");
        assert_eq!(calls, 1);
        assert!(
            matches!(
                &err,
                VisitError::Input(GraphError::MalformedRecord { offset: 8, reason, .. })
                    if reason == "destination vertex id 10 exceeds the maximum 9"
            ),
            "{err:?}"
        );
    }

    #[test]
    fn a_truncated_file_of_known_length_is_refused_before_any_edge() {
        let mut bytes = record(1, 2);
        bytes.push(0);
        let mut calls = 0;
        let err = visit_binary(
            &bytes[..],
            Path::new("g.bin"),
            Some(bytes.len() as u64),
            &LoadOptions::default(),
            |_, _| {
                calls += 1;
                Ok::<(), Infallible>(())
            },
        )
        .expect_err("truncated");
        assert_eq!(calls, 0);
        assert!(matches!(
            GraphError::from(err),
            GraphError::TruncatedRecord {
                offset: 8,
                file_bytes: 9,
                ..
            }
        ));
    }

    #[test]
    fn a_long_line_and_no_edges_are_input_errors() {
        let data = vec![b'1'; LINE_BYTES_MAX + READ_BYTES];
        let err = visit_text(
            &data[..],
            Path::new("x"),
            None,
            &LoadOptions::default(),
            |_, _| Ok::<(), Infallible>(()),
        )
        .expect_err("long line");
        assert!(matches!(
            GraphError::from(err),
            GraphError::LineTooLong { line: 1, .. }
        ));
        let err = visit_text(
            &b"# only a comment\n"[..],
            Path::new("x"),
            None,
            &LoadOptions::default(),
            |_, _| Ok::<(), Infallible>(()),
        )
        .expect_err("no edges");
        assert!(matches!(GraphError::from(err), GraphError::NoEdges { .. }));
    }

    #[test]
    fn rejection_lines_count_across_read_blocks() {
        // More than two READ_BYTES blocks of lines; refuse one near the end.
        let lines = 700_000u64;
        let mut text = String::with_capacity(8 << 20);
        for i in 0..lines {
            text.push_str(&format!("{i} {}\n", i + 1));
        }
        assert!(text.len() > 2 * READ_BYTES);
        let target = lines - 3;
        let err = visit_text(
            text.as_bytes(),
            Path::new("big.txt"),
            None,
            &LoadOptions::default(),
            |(s, _), _| {
                if u64::from(s) == target - 1 {
                    Err("refused")
                } else {
                    Ok(())
                }
            },
        )
        .expect_err("refused");
        assert!(
            matches!(err, VisitError::Rejected { position: Position::Line(l), .. } if l == target)
        );
    }

    #[test]
    fn visit_opens_the_file_and_detects_the_format() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bin = dir.path().join("g.bin");
        std::fs::write(&bin, [record(4, 5), record(6, 7)].concat()).expect("write");
        let mut seen = Vec::new();
        let summary = visit(&bin, None, &LoadOptions::default(), |e, p| {
            seen.push((e, p));
            Ok::<(), Infallible>(())
        })
        .expect("valid");
        assert_eq!(summary.edges, 2);
        assert_eq!(seen[1], ((6, 7), Position::Offset(8)));
        let err = visit(
            dir.path().join("missing.txt"),
            None,
            &LoadOptions::default(),
            |_, _| Ok::<(), Infallible>(()),
        )
        .expect_err("missing");
        assert!(matches!(
            GraphError::from(err),
            GraphError::Io { action: "open", .. }
        ));
    }

    #[test]
    fn positions_display_and_order() {
        assert_eq!(Position::Line(12).to_string(), "line 12");
        assert_eq!(Position::Offset(96).to_string(), "byte offset 96");
        assert!(Position::Line(2) < Position::Line(10));
        assert_eq!(Position::Offset(96).get(), 96);
    }
}
