//! Matrix Market files and gzip-compressed files load through the same parsers as
//! plain ones (issue 63, requirement 3): the store's loader and analytics alike.

use std::io::Write;
use std::path::{Path, PathBuf};

use locus_graph::input::{self, Format, Position};
use locus_graph::{GraphError, LoadOptions};

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write fixture");
    path
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(bytes).expect("compress");
    enc.finish().expect("compress")
}

const GENERAL: &str = "%%MatrixMarket matrix coordinate pattern general\n\
                       % a comment\n\
                       \n\
                       5 5 3\n\
                       1 2\n\
                       2 3\r\n\
                       5 1\n";

#[test]
fn a_general_pattern_matrix_is_its_edges_with_ids_from_zero() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(dir.path(), "g.mtx", GENERAL.as_bytes());
    let list = input::load(&path, None, &LoadOptions::default()).expect("valid");
    assert_eq!(list.edges, vec![(0, 1), (1, 2), (4, 0)]);
    assert_eq!(list.vertex_count, 5);
    // Positions are the entries' lines.
    let mut at = Vec::new();
    input::visit(&path, None, &LoadOptions::default(), |_, p| {
        at.push(p);
        Ok::<(), std::convert::Infallible>(())
    })
    .expect("valid");
    assert_eq!(
        at,
        vec![Position::Line(5), Position::Line(6), Position::Line(7)]
    );
}

#[test]
fn the_size_line_sets_the_vertex_count_and_symmetric_entries_go_both_ways() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = "%%MatrixMarket matrix coordinate pattern symmetric\n9 9 3\n2 1\n3 3\n4 2\n";
    let path = write(dir.path(), "s.mtx", text.as_bytes());
    let list = input::load(&path, None, &LoadOptions::default()).expect("valid");
    assert_eq!(list.edges, vec![(1, 0), (0, 1), (2, 2), (3, 1), (1, 3)]);
    assert_eq!(
        list.vertex_count, 9,
        "the size line's, not the largest id + 1"
    );
}

#[test]
fn valued_matrices_are_refused_at_the_banner_unless_weights_are_dropped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = "%%MatrixMarket matrix coordinate real general\n3 3 2\n1 2 0.5\n3 1 -2e3\n";
    let path = write(dir.path(), "w.mtx", text.as_bytes());
    let err = input::load(&path, None, &LoadOptions::default()).expect_err("weights");
    let msg = err.to_string();
    assert!(
        msg.contains("w.mtx:1:") && msg.contains("weights are read only by SSSP"),
        "{msg}"
    );
    let drop = LoadOptions {
        ignore_weights: true,
        ..LoadOptions::default()
    };
    let list = input::load(&path, None, &drop).expect("weights dropped");
    assert_eq!(list.edges, vec![(0, 1), (2, 0)]);
    let int = write(
        dir.path(),
        "i.mtx",
        b"%%MatrixMarket matrix coordinate integer symmetric\n2 2 1\n2 1 7\n",
    );
    assert_eq!(
        input::load(&int, None, &drop).expect("valid").edges,
        vec![(1, 0), (0, 1)]
    );
}

#[test]
fn a_weighted_text_file_loads_only_with_its_weights_dropped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(dir.path(), "g.wel", b"0 1 0.25\n1 2 3\n2 0 1e-2\n");
    let err = input::load(&path, None, &LoadOptions::default()).expect_err("weights");
    assert!(err.to_string().contains("g.wel:1:"), "{err}");
    let drop = LoadOptions {
        ignore_weights: true,
        ..LoadOptions::default()
    };
    let list = input::load(&path, None, &drop).expect("dropped");
    assert_eq!(list.edges, vec![(0, 1), (1, 2), (2, 0)]);
}

#[test]
fn gzip_files_load_in_every_format_by_magic_bytes_and_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let edges = vec![(0, 1), (1, 2), (7, 3)];
    for format in [Format::Text, Format::Binary, Format::MatrixMarket] {
        let plain = dir.path().join(format!("g-{format}"));
        input::write(&plain, format, &edges).expect("write");
        let bytes = std::fs::read(&plain).expect("read");
        let ext = match format {
            Format::Text => "txt",
            Format::Binary => "bin",
            Format::MatrixMarket => "mtx",
        };
        // By name: the format of the name without .gz.
        let named = write(dir.path(), &format!("g.{ext}.gz"), &gzip(&bytes));
        let list = input::load(&named, None, &LoadOptions::default()).expect("by name");
        assert_eq!(list.edges, edges, "{format}");
        // By magic bytes: a compressed file under a plain name.
        let hidden = write(dir.path(), &format!("h.{ext}"), &gzip(&bytes));
        let list = input::load(&hidden, None, &LoadOptions::default()).expect("by magic");
        assert_eq!(list.edges, edges, "{format}");
        assert_eq!(list.vertex_count, 8);
    }
}

#[test]
fn errors_in_a_compressed_file_name_the_file_and_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(dir.path(), "bad.txt.gz", &gzip(b"0 1\n1 x\n"));
    match input::load(&path, None, &LoadOptions::default()) {
        Err(GraphError::MalformedLine {
            line: 2, path: p, ..
        }) => assert_eq!(p, path),
        other => panic!("expected MalformedLine at line 2, got {other:?}"),
    }
    // A corrupt stream is a read error naming the file.
    let mut bytes = gzip(b"0 1\n1 2\n");
    let n = bytes.len();
    bytes.truncate(n - 6);
    let path = write(dir.path(), "cut.txt.gz", &bytes);
    let err = input::load(&path, None, &LoadOptions::default()).expect_err("truncated");
    assert!(
        matches!(&err, GraphError::Io { action: "read", .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("cut.txt.gz"), "{err}");
}
