//! Every way an edge-list file can be wrong is rejected with the file, the exact line
//! or byte offset, and the reason, and nothing is returned.

use std::path::Path;

use locus_graph::input::{self, Format};
use locus_graph::{GraphError, LoadOptions};

fn write(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write fixture");
    path
}

/// Loads `text` as a text file; returns (line, quoted text, reason, message).
fn text_error(text: &str, opts: &LoadOptions) -> (u64, String, String, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(dir.path(), "graph.txt", text.as_bytes());
    let err = input::load(&path, Some(Format::Text), opts).expect_err("must be rejected");
    let message = err.to_string();
    assert!(
        message.contains("graph.txt"),
        "message names the file: {message}"
    );
    match err {
        GraphError::MalformedLine {
            line, text, reason, ..
        } => (line, text, reason, message),
        other => panic!("expected MalformedLine, got {other:?}"),
    }
}

fn binary_error(bytes: &[u8], opts: &LoadOptions) -> GraphError {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(dir.path(), "graph.bin", bytes);
    let err = input::load(&path, None, opts).expect_err("must be rejected");
    assert!(err.to_string().contains("graph.bin"), "{err}");
    err
}

fn record(src: u32, dst: u32) -> Vec<u8> {
    [src.to_le_bytes(), dst.to_le_bytes()].concat()
}

#[test]
fn one_id_on_a_line() {
    let (line, text, reason, message) = text_error("# header\n0 1\n\n2\n", &LoadOptions::default());
    assert_eq!(line, 4);
    assert_eq!(text, "2");
    assert_eq!(reason, "expected two vertex ids, found 1");
    assert!(message.contains("graph.txt:4:"), "{message}");
}

#[test]
fn a_weight_column_is_refused_naming_the_line_unless_dropped_on_request() {
    let (line, _, reason, message) = text_error("0 1\n1 2 0.5\n", &LoadOptions::default());
    assert_eq!(line, 2);
    assert!(
        reason.contains("edge weights are read only by SSSP"),
        "{reason}"
    );
    assert!(
        message.contains("graph.txt:2:") && message.contains("--ignore-weights"),
        "{message}"
    );
    let (line, _, reason, _) = text_error("0 1 2\n1 2 0.5 7\n", &LoadOptions::default());
    assert_eq!(line, 1, "the first weight is refused");
    assert!(reason.contains("'2'"), "{reason}");
    let drop = LoadOptions {
        ignore_weights: true,
        ..LoadOptions::default()
    };
    let (line, _, reason, _) = text_error("0 1 2\n1 2 0.5 7\n", &drop);
    assert_eq!(line, 2);
    assert_eq!(
        reason,
        "expected two vertex ids and at most a weight, found 4"
    );
    let (line, _, reason, _) = text_error("0 1 1e-3\n1 2 heavy\n", &drop);
    assert_eq!(
        (line, reason.as_str()),
        (2, "not a weight (a number): 'heavy'")
    );
}

#[test]
fn non_integer_id() {
    let (line, text, reason, _) = text_error("0 1\r\n1 2\r\nx1 3\r\n", &LoadOptions::default());
    assert_eq!(line, 3);
    assert_eq!(text, "x1 3");
    assert_eq!(reason, "not an unsigned integer: 'x1'");
    let (_, _, reason, _) = text_error("1 -3\n", &LoadOptions::default());
    assert_eq!(reason, "not an unsigned integer: '-3'");
    let (_, _, reason, _) = text_error("1,3\n", &LoadOptions::default());
    assert_eq!(reason, "expected two vertex ids, found 1");
}

#[test]
fn text_ids_at_and_past_the_maximum() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ok = write(dir.path(), "ok.txt", b"4294967294 0\n");
    let list = input::load(&ok, None, &LoadOptions::default()).expect("maximum id is allowed");
    assert_eq!(list.vertex_count, 4_294_967_295);

    let (line, _, reason, _) = text_error("1 2\n4294967295 0\n", &LoadOptions::default());
    assert_eq!(line, 2);
    assert_eq!(
        reason,
        "source vertex id 4294967295 exceeds the maximum 4294967294"
    );
    let (_, _, reason, _) = text_error("0 4294967296\n", &LoadOptions::default());
    assert_eq!(
        reason,
        "destination vertex id 4294967296 exceeds the maximum 4294967294"
    );

    let small = LoadOptions {
        max_vertex_id: 9,
        vertex_count: None,
        ..LoadOptions::default()
    };
    let (line, _, reason, _) = text_error("9 9\n10 1\n", &small);
    assert_eq!(line, 2);
    assert_eq!(reason, "source vertex id 10 exceeds the maximum 9");
}

#[test]
fn text_ids_not_below_given_vertex_count() {
    let opts = LoadOptions {
        vertex_count: Some(5),
        ..LoadOptions::default()
    };
    let (line, _, reason, _) = text_error("4 4\n# c\n0 5\n", &opts);
    assert_eq!(line, 3);
    assert_eq!(
        reason,
        "destination vertex id 5 is not below the given vertex count 5"
    );
}

#[test]
fn line_number_counts_across_read_blocks() {
    // Enough lines to span several 4 MiB reads, then a bad one.
    let good_lines = 700_000u64;
    let mut text = String::with_capacity(8 << 20);
    for i in 0..good_lines {
        text.push_str(&format!("{i} {}\n", i + 1));
    }
    text.push_str("12 oops\n");
    assert!(text.len() > 2 * input::READ_BYTES);
    let (line, _, reason, _) = text_error(&text, &LoadOptions::default());
    assert_eq!(line, good_lines + 1);
    assert_eq!(reason, "not an unsigned integer: 'oops'");
}

#[test]
fn empty_and_comment_only_text_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, bytes) in [
        ("empty.txt", &b""[..]),
        (
            "comments.txt",
            &b"# Nodes: 0 Edges: 0\n% matrix market style\n\n   \n"[..],
        ),
    ] {
        let path = write(dir.path(), name, bytes);
        let err = input::load(&path, None, &LoadOptions::default()).expect_err("no edges");
        assert!(matches!(err, GraphError::NoEdges { .. }), "{err:?}");
        let message = err.to_string();
        assert!(
            message.starts_with("no edges in ") && message.contains(name),
            "{message}"
        );
    }
}

#[test]
fn empty_binary_file() {
    let err = binary_error(b"", &LoadOptions::default());
    assert!(matches!(err, GraphError::NoEdges { .. }), "{err:?}");
}

#[test]
fn truncated_binary_record() {
    let mut bytes = record(1, 2);
    bytes.extend(record(3, 4));
    bytes.extend([9, 9, 9]);
    match binary_error(&bytes, &LoadOptions::default()) {
        GraphError::TruncatedRecord {
            offset, file_bytes, ..
        } => {
            assert_eq!(offset, 16);
            assert_eq!(file_bytes, 19);
        }
        other => panic!("expected TruncatedRecord, got {other:?}"),
    }
}

#[test]
fn truncated_binary_from_a_pipe() {
    // No length known up front: the truncation is found at end of input.
    let mut bytes = record(1, 2);
    bytes.extend([1, 2, 3, 4, 5]);
    let err = input::read_binary(
        &bytes[..],
        Path::new("stdin"),
        None,
        &LoadOptions::default(),
    )
    .expect_err("truncated");
    assert!(
        matches!(
            err,
            GraphError::TruncatedRecord {
                offset: 8,
                file_bytes: 13,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn binary_ids_at_and_past_the_maximum() {
    let mut bytes = record(u32::MAX - 1, 0);
    bytes.extend(record(0, u32::MAX - 1));
    let dir = tempfile::tempdir().expect("tempdir");
    let ok = write(dir.path(), "ok.bin", &bytes);
    assert_eq!(
        input::load(&ok, None, &LoadOptions::default())
            .expect("maximum allowed")
            .vertex_count,
        u64::from(u32::MAX)
    );

    bytes.extend(record(7, u32::MAX));
    match binary_error(&bytes, &LoadOptions::default()) {
        GraphError::MalformedRecord { offset, reason, .. } => {
            assert_eq!(offset, 16);
            assert_eq!(
                reason,
                "destination vertex id 4294967295 exceeds the maximum 4294967294"
            );
        }
        other => panic!("expected MalformedRecord, got {other:?}"),
    }
}

#[test]
fn binary_ids_not_below_given_vertex_count() {
    let bytes: Vec<u8> = [record(0, 1), record(2, 3), record(4, 1)].concat();
    let opts = LoadOptions {
        vertex_count: Some(4),
        ..LoadOptions::default()
    };
    match binary_error(&bytes, &opts) {
        GraphError::MalformedRecord { offset, reason, .. } => {
            assert_eq!(offset, 16);
            assert_eq!(
                reason,
                "source vertex id 4 is not below the given vertex count 4"
            );
        }
        other => panic!("expected MalformedRecord, got {other:?}"),
    }
}

#[test]
fn missing_file_names_the_path() {
    let err = input::load(
        "/nonexistent/locus/graph.txt",
        None,
        &LoadOptions::default(),
    )
    .expect_err("missing");
    assert!(
        matches!(err, GraphError::Io { action: "open", .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("/nonexistent/locus/graph.txt"),
        "{err}"
    );
}

/// Loads `text` as a Matrix Market file; returns (line, reason, message).
fn mtx_error(text: &str, opts: &LoadOptions) -> (u64, String, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(dir.path(), "graph.mtx", text.as_bytes());
    let err = input::load(&path, None, opts).expect_err("must be rejected");
    let message = err.to_string();
    assert!(message.contains("graph.mtx:"), "{message}");
    match err {
        GraphError::MalformedMatrix { line, reason, .. } => (line, reason, message),
        other => panic!("expected MalformedMatrix, got {other:?}"),
    }
}

#[test]
fn matrix_market_errors_name_the_line() {
    let d = LoadOptions::default();
    let head = "%%MatrixMarket matrix coordinate pattern general\n";
    let cases: &[(&str, u64, &str)] = &[
        ("0 1\n", 1, "not a '%%MatrixMarket matrix ...' banner"),
        (
            "%%MatrixMarket matrix array real general\n2 2\n",
            1,
            "'array' format",
        ),
        (
            "%%MatrixMarket matrix coordinate complex general\n",
            1,
            "'complex' entries",
        ),
        (
            "%%MatrixMarket matrix coordinate pattern hermitian\n",
            1,
            "'hermitian' matrices",
        ),
        (
            "%%MatrixMarket matrix coordinate pattern symmetric\n3 4 1\n",
            2,
            "must be square",
        ),
        (&format!("{head}% c\n3 3\n"), 3, "size line"),
        (&format!("{head}3 3 x\n"), 2, "not an unsigned integer: 'x'"),
        (
            &format!("{head}3 3 2\n1 2\n0 1\n"),
            4,
            "row 0: Matrix Market ids start at 1",
        ),
        (
            &format!("{head}3 3 2\n1 4\n"),
            3,
            "column 4 is past the 3 columns",
        ),
        (
            &format!("{head}3 3 1\n1 2\n2 3\n"),
            4,
            "more entries than the 1 of the size line (line 2)",
        ),
        (
            &format!("{head}3 3 3\n1 2\n2 3\n"),
            4,
            "promises 3 entries, the file has 2",
        ),
        (
            &format!("{head}3 3 1\n1 2 5\n"),
            3,
            "expected a pattern entry",
        ),
        (
            &format!("{head}3 3 1\n1 -2\n"),
            3,
            "not an unsigned integer: '-2'",
        ),
        (head, 1, "ends before its 'rows cols entries' size line"),
    ];
    for &(text, line, reason) in cases {
        let (l, r, m) = mtx_error(text, &d);
        assert_eq!(l, line, "{text:?}: {m}");
        assert!(r.contains(reason), "{text:?}: {r}");
    }
    let drop = LoadOptions {
        ignore_weights: true,
        ..LoadOptions::default()
    };
    let (l, r, _) = mtx_error(
        "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 2 heavy\n",
        &drop,
    );
    assert_eq!((l, r.as_str()), (3, "not a weight (a number): 'heavy'"));
    let small = LoadOptions {
        vertex_count: Some(2),
        ..LoadOptions::default()
    };
    let (l, r, _) = mtx_error(&format!("{head}3 3 1\n3 1\n"), &small);
    assert_eq!(l, 3);
    assert!(r.contains("not below the given vertex count 2"), "{r}");
}
