//! Writing an edge list and loading it back gives the same edges, in both formats,
//! including for the streaming R-MAT writer.

use locus_graph::input::{self, Format};
use locus_graph::{Edge, LoadOptions, Rmat, RmatConfig, VERTEX_ID_MAX};

fn sample_edges() -> Vec<Edge> {
    vec![
        (0, 1),
        (1, 0),
        (5, 5),
        (VERTEX_ID_MAX, 3),
        (2, 7),
        (2, 7),
        (0, 0),
    ]
}

#[test]
fn text_round_trip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("g.txt");
    let edges = sample_edges();
    assert_eq!(
        input::write_text(&path, &edges).expect("write"),
        edges.len() as u64
    );
    let contents = std::fs::read_to_string(&path).expect("read back");
    assert!(
        contents.starts_with(&format!(
            "# Nodes: {} Edges: 7\n",
            u64::from(VERTEX_ID_MAX) + 1
        )),
        "{contents}"
    );
    let list = input::load(&path, None, &LoadOptions::default()).expect("load");
    assert_eq!(list.edges, edges);
    assert_eq!(list.vertex_count, u64::from(VERTEX_ID_MAX) + 1);
}

#[test]
fn binary_round_trip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("g.bin");
    let edges = sample_edges();
    input::write_binary(&path, &edges).expect("write");
    assert_eq!(
        std::fs::metadata(&path).expect("meta").len(),
        8 * edges.len() as u64
    );
    let bytes = std::fs::read(&path).expect("read back");
    assert_eq!(
        &bytes[..8],
        &[0, 0, 0, 0, 1, 0, 0, 0],
        "little-endian src then dst"
    );
    let list = input::load(&path, None, &LoadOptions::default()).expect("load");
    assert_eq!(list.edges, edges);
}

#[test]
fn explicit_format_overrides_extension() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("g.bin");
    input::write_text(&path, &[(1, 2)]).expect("write");
    let list = input::load(&path, Some(Format::Text), &LoadOptions::default()).expect("load");
    assert_eq!(list.edges, vec![(1, 2)]);
}

#[test]
fn given_vertex_count_is_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("g.txt");
    input::write_text(&path, &[(1, 2)]).expect("write");
    let opts = LoadOptions {
        vertex_count: Some(10),
        ..LoadOptions::default()
    };
    assert_eq!(
        input::load(&path, None, &opts).expect("load").vertex_count,
        10
    );
}

#[test]
fn streamed_rmat_matches_generator_in_both_formats() {
    let rmat = Rmat::new(RmatConfig {
        scale: 12,
        edge_factor: 20, // > one chunk, last chunk short
        seed: 7,
        ..RmatConfig::default()
    })
    .expect("valid");
    let expected: Vec<Edge> = (0..rmat.edge_count()).map(|i| rmat.edge(i)).collect();
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, format) in [("r.bin", Format::Binary), ("r.txt", Format::Text)] {
        let path = dir.path().join(name);
        let written = input::write_rmat(&path, format, &rmat, 3).expect("write");
        assert_eq!(written, rmat.edge_count());
        let list = input::load(&path, None, &LoadOptions::default()).expect("load");
        assert_eq!(list.edges, expected, "{name}");
    }
    let text = std::fs::read_to_string(dir.path().join("r.txt")).expect("read");
    assert!(text.starts_with("# Nodes: 4096 Edges: 81920\n"));
}

#[test]
fn failed_write_leaves_no_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("missing-dir").join("g.txt");
    let err = input::write_text(&path, &[(1, 2)]).expect_err("directory does not exist");
    assert!(err.to_string().contains("missing-dir"), "{err}");
    assert!(!path.exists());
}

#[test]
fn successful_write_leaves_no_partial_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    input::write_binary(dir.path().join("g.bin"), &[(1, 2)]).expect("write");
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("g.bin")]);
}
