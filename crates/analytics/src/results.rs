//! Per-vertex results a user can keep (issue 12, requirement 5): BFS depth,
//! SSSP distance, WCC label, PageRank score, Radii estimate or TC count of
//! every vertex, written as
//! text or binary, with the input's ids when they were compacted
//! ([`crate::input::IdMap`]).
//!
//! Text: `#` comment lines, then one `vertex value` line per vertex in
//! increasing id order (BFS: `vertex depth parent`, the parent in the
//! input's ids, `-1` for both when not reached). PageRank scores are printed in Rust's shortest
//! form that reads back to the same f64; a vertex BFS or Radii did not
//! reach has the value `-1`.
//!
//! Binary, all little-endian, 24-byte header then fixed-size records:
//!
//! ```text
//!  offset  0: magic "LOCUSRES" (8 bytes)
//!          8: version u16 = 1
//!         10: algorithm u8 (0 bfs, 1 wcc, 2 pagerank, 3 radii, 4 sssp, 5 tc, 6 bc)
//!         11: value kind u8 (0: u32, 1: f64, 2: u64, 3: u32 pair)
//!         12: reserved u32 = 0
//!         16: record count u64
//!         24: records: | vertex u32 | value u32, f64, u64 or two u32 |  (8 or 12 bytes, packed)
//!
//! BFS writes kind 3, `| vertex | depth | parent |`.
//! ```
//!
//! Unreached vertices are `u32::MAX` in binary. Numpy reads the records as
//! `np.fromfile(f, dtype=[("v", "<u4"), ("x", "<f8")], offset=24)` (f64) or
//! `("x", "<u4")` (u32). Files are written to `PATH.partial` and renamed
//! over `PATH` when complete, so a failed write leaves no half file.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use crate::algo::{Algo, Output, UNREACHED};
use crate::error::{config_err, io_err, AnalyticsError, Result};
use crate::input::IdMap;

/// The binary file's first 8 bytes.
pub const MAGIC: &[u8; 8] = b"LOCUSRES";
/// The binary layout's version.
pub const VERSION: u16 = 1;
/// Bytes of the binary header.
pub const HEADER_BYTES: usize = 24;

/// How results are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultFormat {
    /// `vertex value` lines.
    Text,
    /// The 24-byte header and packed records above.
    Binary,
}

impl ResultFormat {
    /// Parses `text` or `binary`.
    pub fn parse(s: &str) -> Result<ResultFormat> {
        match s.to_ascii_lowercase().as_str() {
            "text" | "txt" => Ok(ResultFormat::Text),
            "binary" | "bin" => Ok(ResultFormat::Binary),
            _ => Err(config_err(
                "output_format",
                format!("'{s}' is not text or binary"),
            )),
        }
    }
}

/// Results read back: the algorithm and `(vertex, value)` rows in file order.
#[derive(Clone, Debug, PartialEq)]
pub enum Values {
    /// BFS depths, WCC labels, Radii estimates ([`UNREACHED`] if not reached).
    U32(Vec<(u32, u32)>),
    /// PageRank scores.
    F64(Vec<(u32, f64)>),
    /// TC counts.
    U64(Vec<(u32, u64)>),
    /// BFS: depth and parent ([`UNREACHED`] for both if not reached).
    U32Pair(Vec<(u32, u32, u32)>),
}

fn algo_code(a: Algo) -> u8 {
    match a {
        Algo::Bfs => 0,
        Algo::Wcc => 1,
        Algo::PageRank => 2,
        Algo::Radii => 3,
        Algo::Sssp => 4,
        Algo::Tc => 5,
        Algo::Bc => 6,
    }
}

fn output_algo(out: &Output) -> Algo {
    match out {
        Output::Bfs { .. } => Algo::Bfs,
        Output::Wcc { .. } => Algo::Wcc,
        Output::PageRank { .. } => Algo::PageRank,
        Output::Radii { .. } => Algo::Radii,
        Output::Sssp { .. } => Algo::Sssp,
        Output::Tc { .. } => Algo::Tc,
        Output::Bc { .. } => Algo::Bc,
    }
}

/// What is written per vertex: depth, label (mapped back), score, radius.
fn values(out: &Output, ids: Option<&IdMap>) -> Values {
    let id = |v: usize| ids.map_or(v as u32, |m| m.original(v as u32));
    let u32s = |xs: &[u32], map_value: bool| {
        Values::U32(
            xs.iter()
                .enumerate()
                .map(|(v, &x)| {
                    let x = if map_value && x != UNREACHED {
                        ids.map_or(x, |m| m.original(x))
                    } else {
                        x
                    };
                    (id(v), x)
                })
                .collect(),
        )
    };
    match out {
        Output::Bfs { depth, parent, .. } => Values::U32Pair(
            depth
                .iter()
                .zip(parent)
                .enumerate()
                .map(|(v, (&d, &p))| {
                    let p = if p == UNREACHED { p } else { id(p as usize) };
                    (id(v), d, p)
                })
                .collect(),
        ),
        Output::Wcc { label } => u32s(label, true),
        Output::Radii { radius, .. } => u32s(radius, false),
        Output::Sssp { dist, .. } => u32s(dist, false),
        Output::Bc { score, .. } => {
            Values::F64(score.iter().enumerate().map(|(v, &r)| (id(v), r)).collect())
        }
        Output::Tc { count, .. } => {
            Values::U64(count.iter().enumerate().map(|(v, &c)| (id(v), c)).collect())
        }
        Output::PageRank { rank } => {
            Values::F64(rank.iter().enumerate().map(|(v, &r)| (id(v), r)).collect())
        }
    }
}

/// Writes `out` to `path` in `format` (vertex ids through `ids` if given).
/// Returns the number of vertices written.
pub fn write(path: &Path, format: ResultFormat, out: &Output, ids: Option<&IdMap>) -> Result<u64> {
    let algo = output_algo(out);
    let vals = values(out, ids);
    let partial = partial_path(path);
    let file = File::create(&partial).map_err(io_err("create", &partial))?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    let n = match &vals {
        Values::U32(v) => v.len(),
        Values::F64(v) => v.len(),
        Values::U64(v) => v.len(),
        Values::U32Pair(v) => v.len(),
    } as u64;
    let res: std::io::Result<()> = (|| {
        match format {
            ResultFormat::Text => {
                let what = match algo {
                    Algo::Bfs => "BFS depth parent (-1 -1: not reached)",
                    Algo::Wcc => "WCC label (smallest vertex id of the component)",
                    Algo::PageRank => "PageRank score",
                    Algo::Radii => "Radii estimate (-1: no sample reaches it)",
                    Algo::Sssp => "SSSP distance (-1: not reached)",
                    Algo::Tc => "TC triangles through it (undirected simple graph)",
                    Algo::Bc => "BC score (Brandes's sum over the sources)",
                };
                writeln!(w, "# locus analytics {}: vertex {what}", algo.name())?;
                if ids.is_some() {
                    writeln!(w, "# vertex ids as in the input (compacted for the run)")?;
                }
                match &vals {
                    Values::U32(rows) => {
                        for &(v, x) in rows {
                            if x == UNREACHED && algo != Algo::Wcc {
                                writeln!(w, "{v} -1")?;
                            } else {
                                writeln!(w, "{v} {x}")?;
                            }
                        }
                    }
                    Values::F64(rows) => {
                        for &(v, x) in rows {
                            writeln!(w, "{v} {x:?}")?;
                        }
                    }
                    Values::U64(rows) => {
                        for &(v, x) in rows {
                            writeln!(w, "{v} {x}")?;
                        }
                    }
                    Values::U32Pair(rows) => {
                        for &(v, d, p) in rows {
                            if d == UNREACHED {
                                writeln!(w, "{v} -1 -1")?;
                            } else {
                                writeln!(w, "{v} {d} {p}")?;
                            }
                        }
                    }
                }
            }
            ResultFormat::Binary => {
                w.write_all(MAGIC)?;
                w.write_all(&VERSION.to_le_bytes())?;
                let kind = match vals {
                    Values::U32(_) => 0u8,
                    Values::F64(_) => 1,
                    Values::U64(_) => 2,
                    Values::U32Pair(_) => 3,
                };
                w.write_all(&[algo_code(algo), kind])?;
                w.write_all(&0u32.to_le_bytes())?;
                w.write_all(&n.to_le_bytes())?;
                match &vals {
                    Values::U32(rows) => {
                        for &(v, x) in rows {
                            w.write_all(&v.to_le_bytes())?;
                            w.write_all(&x.to_le_bytes())?;
                        }
                    }
                    Values::F64(rows) => {
                        for &(v, x) in rows {
                            w.write_all(&v.to_le_bytes())?;
                            w.write_all(&x.to_le_bytes())?;
                        }
                    }
                    Values::U64(rows) => {
                        for &(v, x) in rows {
                            w.write_all(&v.to_le_bytes())?;
                            w.write_all(&x.to_le_bytes())?;
                        }
                    }
                    Values::U32Pair(rows) => {
                        for &(v, d, p) in rows {
                            w.write_all(&v.to_le_bytes())?;
                            w.write_all(&d.to_le_bytes())?;
                            w.write_all(&p.to_le_bytes())?;
                        }
                    }
                }
            }
        }
        w.flush()?;
        w.get_ref().sync_all()
    })();
    if let Err(e) = res {
        let _ = std::fs::remove_file(&partial);
        return Err(io_err("write", &partial)(e));
    }
    drop(w);
    std::fs::rename(&partial, path).map_err(io_err("rename into", path))?;
    Ok(n)
}

fn partial_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".partial");
    PathBuf::from(s)
}

fn bad(path: &Path, reason: String) -> AnalyticsError {
    config_err("results", format!("'{}': {reason}", path.display()))
}

/// Reads a results file of either format back (binary if it starts with
/// [`MAGIC`]). `algo` is needed for text, whose values' type it decides.
/// Errors name the file and the line or byte offset.
pub fn read(path: &Path, algo: Algo) -> Result<Values> {
    let mut f = File::open(path).map_err(io_err("open", path))?;
    let mut head = [0u8; HEADER_BYTES];
    let mut got = 0;
    while got < HEADER_BYTES {
        let k = f.read(&mut head[got..]).map_err(io_err("read", path))?;
        if k == 0 {
            break;
        }
        got += k;
    }
    if got == HEADER_BYTES && &head[..8] == MAGIC {
        read_binary(path, &head, f, algo)
    } else {
        let f = File::open(path).map_err(io_err("open", path))?;
        read_text(path, f, algo)
    }
}

fn read_binary(path: &Path, head: &[u8; HEADER_BYTES], mut f: File, algo: Algo) -> Result<Values> {
    let version = u16::from_le_bytes([head[8], head[9]]);
    if version != VERSION {
        return Err(bad(
            path,
            format!("binary version {version}, expected {VERSION}"),
        ));
    }
    if head[10] != algo_code(algo) {
        return Err(bad(
            path,
            format!("algorithm code {} is not {}'s", head[10], algo.name()),
        ));
    }
    let kind = head[11];
    if kind > 3 {
        return Err(bad(path, format!("value kind {kind} at byte offset 11")));
    }
    let n = u64::from_le_bytes(head[16..24].try_into().expect("8 bytes"));
    let rec = if kind == 0 { 8 } else { 12 };
    let mut body = Vec::new();
    f.read_to_end(&mut body).map_err(io_err("read", path))?;
    if body.len() as u64 != n.saturating_mul(rec) {
        return Err(bad(
            path,
            format!(
                "{} record bytes after the header, expected {n} records of {rec}",
                body.len()
            ),
        ));
    }
    let u = |b: &[u8]| u32::from_le_bytes(b[..4].try_into().expect("4 bytes"));
    Ok(if kind == 3 {
        Values::U32Pair(
            body.chunks_exact(12)
                .map(|r| (u(r), u(&r[4..]), u(&r[8..])))
                .collect(),
        )
    } else if kind == 2 {
        Values::U64(
            body.chunks_exact(12)
                .map(|r| {
                    (
                        u(r),
                        u64::from_le_bytes(r[4..].try_into().expect("8 bytes")),
                    )
                })
                .collect(),
        )
    } else if kind == 1 {
        Values::F64(
            body.chunks_exact(12)
                .map(|r| {
                    (
                        u(r),
                        f64::from_le_bytes(r[4..].try_into().expect("8 bytes")),
                    )
                })
                .collect(),
        )
    } else {
        Values::U32(body.chunks_exact(8).map(|r| (u(r), u(&r[4..]))).collect())
    })
}

fn read_text(path: &Path, f: File, algo: Algo) -> Result<Values> {
    let mut u = Vec::new();
    let mut x = Vec::new();
    let mut c = Vec::new();
    let mut b = Vec::new();
    for (k, line) in BufReader::new(f).lines().enumerate() {
        let line = line.map_err(io_err("read", path))?;
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let at = |why: &str| bad(path, format!("line {}: {why}: '{t}'", k + 1));
        let mut it = t.split_whitespace();
        let u32_or_minus_one = |x: &str| -> Result<u32> {
            if x == "-1" {
                Ok(UNREACHED)
            } else {
                x.parse().map_err(|_| at("value is not a u32 or -1"))
            }
        };
        if algo == Algo::Bfs {
            let (Some(v), Some(d), Some(p), None) = (it.next(), it.next(), it.next(), it.next())
            else {
                return Err(at("expected 'vertex depth parent'"));
            };
            let v: u32 = v.parse().map_err(|_| at("vertex is not a u32"))?;
            b.push((v, u32_or_minus_one(d)?, u32_or_minus_one(p)?));
            continue;
        }
        let (Some(v), Some(val), None) = (it.next(), it.next(), it.next()) else {
            return Err(at("expected 'vertex value'"));
        };
        let v: u32 = v.parse().map_err(|_| at("vertex is not a u32"))?;
        if matches!(algo, Algo::PageRank | Algo::Bc) {
            x.push((v, val.parse().map_err(|_| at("value is not a number"))?));
        } else if algo == Algo::Tc {
            c.push((v, val.parse().map_err(|_| at("value is not a u64"))?));
        } else if val == "-1" {
            u.push((v, UNREACHED));
        } else {
            u.push((v, val.parse().map_err(|_| at("value is not a u32 or -1"))?));
        }
    }
    Ok(if matches!(algo, Algo::PageRank | Algo::Bc) {
        Values::F64(x)
    } else if algo == Algo::Tc {
        Values::U64(c)
    } else if algo == Algo::Bfs {
        Values::U32Pair(b)
    } else {
        Values::U32(u)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_formats_round_trip_with_mapped_ids() {
        let dir = tempfile::tempdir().unwrap();
        let ids = IdMap::compact(&mut [(5, 9), (9, 4_000_000_000)]);
        let outs = [
            Output::Bfs {
                root: 0,
                depth: vec![0, 1, UNREACHED],
                parent: vec![0, 0, UNREACHED],
            },
            Output::Wcc {
                label: vec![0, 0, 0],
            },
            Output::PageRank {
                rank: vec![0.1, 0.2 + 1e-17, 0.7],
            },
            Output::Radii {
                samples: vec![0],
                radius: vec![0, 1, UNREACHED],
            },
            Output::Sssp {
                root: 0,
                dist: vec![0, UNREACHED - 1, UNREACHED],
            },
            Output::Tc {
                count: vec![1, 1 << 40, 1],
                total: 1,
            },
        ];
        for out in &outs {
            let want = values(out, Some(&ids));
            for fmt in [ResultFormat::Text, ResultFormat::Binary] {
                let p = dir.path().join("r");
                assert_eq!(write(&p, fmt, out, Some(&ids)).unwrap(), 3);
                assert!(!partial_path(&p).exists());
                assert_eq!(read(&p, output_algo(out)).unwrap(), want, "{fmt:?}");
            }
        }
        // Labels are original ids too.
        assert_eq!(
            values(&outs[1], Some(&ids)),
            Values::U32(vec![(5, 5), (9, 5), (4_000_000_000, 5)])
        );
    }

    #[test]
    fn bad_files_name_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.txt");
        std::fs::write(&p, "# c\n0 1\n1 x\n").unwrap();
        let e = read(&p, Algo::Wcc).unwrap_err().to_string();
        assert!(e.contains("line 3"), "{e}");
        std::fs::write(&p, "# c\n0 0 0\n1 1\n").unwrap();
        let e = read(&p, Algo::Bfs).unwrap_err().to_string();
        assert!(e.contains("line 3") && e.contains("depth parent"), "{e}");
        let b = dir.path().join("r.bin");
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0]);
        bytes.extend_from_slice(&5u64.to_le_bytes());
        std::fs::write(&b, &bytes).unwrap();
        let e = read(&b, Algo::Bfs).unwrap_err().to_string();
        assert!(e.contains("expected 5 records"), "{e}");
    }
}
