//! Matrix Market coordinate files (`.mtx`) as edge lists.
//!
//! ```text
//!   %%MatrixMarket matrix coordinate pattern general     <- banner, line 1
//!   % comments                                            <- '%' lines, blanks
//!   5 5 3                                                 <- rows cols entries
//!   1 2                                                   <- row col [value], 1-based
//!   2 3
//!   5 1
//! ```
//!
//! An entry `i j` is the edge `i-1 -> j-1`. `symmetric` files store one triangle: an
//! entry `i j` off the diagonal is both `i-1 -> j-1` and `j-1 -> i-1` (at the same
//! line). `integer` and `real` entries carry a value, an edge weight: the edge lists
//! here carry none (only SSSP reads them, apart), so such a file is refused at its
//! banner unless [`LoadOptions::ignore_weights`] drops them. The vertex count is
//! `max(rows, cols)` (or the one given). `array` (dense), `complex`, `skew-symmetric`
//! and `hermitian` files are refused, as are ids of 0 or past the size line and a
//! count of entries other than the size line's; every error names the file and line.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use super::stream::{is_blank, parse_id, quote, weight_refused, Position, Summary, VisitError};
use super::{LoadOptions, LINE_BYTES_MAX, READ_BYTES};
use crate::error::{io_err, GraphError};
use crate::{Edge, VertexId};

/// The entry kinds accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Pattern,
    Valued,
}

/// Splits a line into its blank-separated tokens.
fn tokens(line: &[u8]) -> Vec<&[u8]> {
    line.split(|&b| is_blank(b))
        .filter(|t| !t.is_empty())
        .collect()
}

/// Visits the edges of a Matrix Market coordinate file read from `reader`; `path`
/// names it in errors. Positions are [`Position::Line`]. `_len` is unused (kept for
/// the shape of the other visitors).
pub fn visit_mtx<E>(
    reader: impl Read,
    path: &Path,
    _len: Option<u64>,
    opts: &LoadOptions,
    mut f: impl FnMut(Edge, Position) -> Result<(), E>,
) -> Result<Summary, VisitError<E>> {
    opts.validate()?;
    let mut reader = BufReader::with_capacity(READ_BYTES, reader);
    let mut buf: Vec<u8> = Vec::new();
    let mut line_no = 0u64;
    let bad = |line: u64, text: &[u8], reason: String| -> VisitError<E> {
        GraphError::MalformedMatrix {
            path: path.to_path_buf(),
            line,
            text: quote(text),
            reason,
        }
        .into()
    };
    // Reads the next line into `buf` (without its line end); false at the end.
    let mut next = |buf: &mut Vec<u8>, line_no: &mut u64| -> Result<bool, VisitError<E>> {
        buf.clear();
        let n = (&mut reader)
            .take(LINE_BYTES_MAX as u64 + 1)
            .read_until(b'\n', buf)
            .map_err(io_err("read", path))?;
        if n == 0 {
            return Ok(false);
        }
        *line_no += 1;
        if buf.last() == Some(&b'\n') {
            buf.pop();
        } else if buf.len() > LINE_BYTES_MAX {
            return Err(GraphError::LineTooLong {
                path: path.to_path_buf(),
                line: *line_no,
                line_bytes_max: LINE_BYTES_MAX,
            }
            .into());
        }
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
        Ok(true)
    };

    // The banner.
    if !next(&mut buf, &mut line_no)? {
        return Err(GraphError::NoEdges {
            path: path.to_path_buf(),
        }
        .into());
    }
    let banner: Vec<String> = tokens(&buf)
        .iter()
        .map(|t| String::from_utf8_lossy(t).to_ascii_lowercase())
        .collect();
    if banner.len() != 5 || banner[0] != "%%matrixmarket" || banner[1] != "matrix" {
        return Err(bad(
            1,
            &buf,
            "the first line is not a '%%MatrixMarket matrix ...' banner".to_string(),
        ));
    }
    if banner[2] != "coordinate" {
        return Err(bad(
            1,
            &buf,
            format!(
                "the '{}' format is not a graph's (a dense 'array' matrix has no edge list); \
                 only 'coordinate' is read",
                banner[2]
            ),
        ));
    }
    let field = match banner[3].as_str() {
        "pattern" => Field::Pattern,
        "integer" | "real" => Field::Valued,
        other => {
            return Err(bad(
                1,
                &buf,
                format!("'{other}' entries are not read; use pattern, integer or real"),
            ))
        }
    };
    if field == Field::Valued && !opts.ignore_weights {
        return Err(bad(
            1,
            &buf,
            format!(
                "a '{}' matrix gives every edge a weight: edge weights are read only by SSSP \
                 (locus analytics run --algo sssp); for anything else drop them on purpose \
                 with --ignore-weights (load option ignore_weights), or write the matrix \
                 as 'pattern'",
                banner[3]
            ),
        ));
    }
    let symmetric = match banner[4].as_str() {
        "general" => false,
        "symmetric" => true,
        other => {
            return Err(bad(
                1,
                &buf,
                format!("'{other}' matrices are not read; use general or symmetric"),
            ))
        }
    };

    // Comments and blanks, then the size line.
    let (rows, cols, entries, size_line) = loop {
        if !next(&mut buf, &mut line_no)? {
            return Err(bad(
                line_no,
                b"",
                "the file ends before its 'rows cols entries' size line".to_string(),
            ));
        }
        let t = tokens(&buf);
        if t.is_empty() || t[0].starts_with(b"%") {
            continue;
        }
        if t.len() != 3 {
            return Err(bad(
                line_no,
                &buf,
                format!(
                    "expected the size line 'rows cols entries', found {} numbers",
                    t.len()
                ),
            ));
        }
        let mut n = [0u64; 3];
        for (k, tok) in t.iter().enumerate() {
            n[k] = match parse_id(tok) {
                Ok(Some(v)) => v,
                _ => {
                    return Err(bad(
                        line_no,
                        &buf,
                        format!("not an unsigned integer: '{}'", quote(tok)),
                    ))
                }
            };
        }
        let limit = u64::from(opts.max_vertex_id) + 1;
        if n[0].max(n[1]) > limit {
            return Err(bad(
                line_no,
                &buf,
                format!(
                    "{} rows and {} columns need more vertices than the {limit} allowed",
                    n[0], n[1]
                ),
            ));
        }
        if symmetric && n[0] != n[1] {
            return Err(bad(
                line_no,
                &buf,
                format!("a symmetric matrix must be square, not {} x {}", n[0], n[1]),
            ));
        }
        break (n[0], n[1], n[2], line_no);
    };

    // Entries.
    let width = match field {
        Field::Pattern => 2,
        Field::Valued => 3,
    };
    let mut seen = 0u64;
    let mut edges = 0u64;
    let mut id_max: Option<VertexId> = None;
    while next(&mut buf, &mut line_no)? {
        let t = tokens(&buf);
        if t.is_empty() || t[0].starts_with(b"%") {
            continue;
        }
        if t.len() != width {
            return Err(bad(
                line_no,
                &buf,
                format!(
                    "expected {} entry ('row col{}'), found {} tokens",
                    if width == 2 { "a pattern" } else { "a valued" },
                    if width == 2 { "" } else { " value" },
                    t.len()
                ),
            ));
        }
        seen += 1;
        if seen > entries {
            return Err(bad(
                line_no,
                &buf,
                format!("more entries than the {entries} of the size line (line {size_line})"),
            ));
        }
        if width == 3 {
            // ignore_weights is set here; a non-number is still an error.
            if let Some(reason) = weight_refused(t[2], opts) {
                return Err(bad(line_no, &buf, reason));
            }
        }
        let mut ids = [0 as VertexId; 2];
        for (k, (role, bound, what)) in [("source", rows, "row"), ("destination", cols, "column")]
            .into_iter()
            .enumerate()
        {
            let one_based = match parse_id(t[k]) {
                Ok(Some(v)) => v,
                Ok(None) | Err(()) => {
                    return Err(bad(
                        line_no,
                        &buf,
                        format!("not an unsigned integer: '{}'", quote(t[k])),
                    ))
                }
            };
            if one_based == 0 {
                return Err(bad(
                    line_no,
                    &buf,
                    format!("{what} 0: Matrix Market ids start at 1"),
                ));
            }
            if one_based > bound {
                return Err(bad(
                    line_no,
                    &buf,
                    format!("{what} {one_based} is past the {bound} {what}s of the size line"),
                ));
            }
            let id = one_based - 1;
            if let Some(reason) = opts.reject(role, id) {
                return Err(bad(line_no, &buf, reason));
            }
            ids[k] = id as VertexId;
        }
        let (s, d) = (ids[0], ids[1]);
        let at = Position::Line(line_no);
        let mut emit = |e: Edge| -> Result<(), VisitError<E>> {
            f(e, at).map_err(|error| VisitError::Rejected {
                path: path.to_path_buf(),
                position: at,
                error,
            })
        };
        emit((s, d))?;
        edges += 1;
        if symmetric && s != d {
            emit((d, s))?;
            edges += 1;
        }
        id_max = id_max.max(Some(s.max(d)));
    }
    if seen != entries {
        return Err(bad(
            line_no,
            &buf,
            format!(
                "the size line (line {size_line}) promises {entries} entries, the file has {seen}"
            ),
        ));
    }
    if id_max.is_none() {
        return Err(GraphError::NoEdges {
            path: path.to_path_buf(),
        }
        .into());
    }
    Ok(Summary {
        edges,
        id_max: id_max.unwrap_or(0),
        vertex_count: opts.vertex_count.unwrap_or(rows.max(cols)),
    })
}
