//! `locus analytics run --algo tc` as a user meets it (issue 63): the total
//! in the summary, per-vertex counts in `--output` (text and binary), the
//! same on every backend, directed input counted as its undirected simple
//! graph.

use std::process::{Command, Output};

fn locus(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_locus"))
        .args(args)
        .output()
        .expect("run locus")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn counts_on_every_backend_with_the_total_in_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    // A K4 on 0..3 written partly both ways, duplicated, with a self loop,
    // and a pendant 4: 4 triangles, 3 through each of 0..3.
    let g = dir.path().join("k4.txt");
    std::fs::write(&g, "0 1\n1 0\n0 2\n0 3\n1 2\n1 3\n2 3\n2 3\n3 3\n0 4\n").unwrap();
    let out = dir.path().join("t.txt");
    for backend in ["local", "disk", "far", "paged"] {
        let o = locus(&[
            "analytics",
            "run",
            "--algo",
            "tc",
            "--graph",
            g.to_str().unwrap(),
            "--backend",
            backend,
            "--threads",
            "2",
            "--disk-dir",
            dir.path().to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
        ]);
        let so = text(&o.stdout);
        assert!(o.status.success(), "{backend}: {}", text(&o.stderr));
        assert!(so.contains("result          4 triangles"), "{so}");
        let rows: Vec<String> = std::fs::read_to_string(&out)
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_string)
            .collect();
        assert_eq!(rows, ["0 3", "1 3", "2 3", "3 3", "4 0"], "{backend}");
    }
    let bin = dir.path().join("t.bin");
    let o = locus(&[
        "analytics",
        "run",
        "--algo",
        "tc",
        "--graph",
        g.to_str().unwrap(),
        "--backend",
        "local",
        "--output",
        bin.to_str().unwrap(),
        "--output-format",
        "binary",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let b = std::fs::read(&bin).unwrap();
    assert_eq!((b[10], b[11]), (5, 2), "tc's code and the u64 value kind");
    assert_eq!(b.len(), 24 + 5 * 12);
    assert_eq!(u64::from_le_bytes(b[28..36].try_into().unwrap()), 3);
}

#[test]
fn bc_sources_all_a_list_and_a_sample() {
    let dir = tempfile::tempdir().unwrap();
    // A path 0 -> 1 -> 2 -> 3: from all sources 1 lies on 0->2, 0->3 and
    // 2 on 0->3, 1->3: scores 0 2 2 0; from source 0, 2 and 1, and a
    // source listed twice counts twice.
    let g = dir.path().join("path.txt");
    std::fs::write(&g, "0 1\n1 2\n2 3\n").unwrap();
    let out = dir.path().join("b.txt");
    let run = |extra: &[&str]| {
        let mut a = vec![
            "analytics",
            "run",
            "--algo",
            "bc",
            "--graph",
            g.to_str().unwrap(),
            "--backend",
            "far",
            "--output",
            out.to_str().unwrap(),
        ];
        a.extend_from_slice(extra);
        let o = locus(&a);
        assert!(o.status.success(), "{extra:?}: {}", text(&o.stderr));
        let rows: Vec<String> = std::fs::read_to_string(&out)
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_string)
            .collect();
        (text(&o.stdout), rows)
    };
    let (so, rows) = run(&["--sources", "all"]);
    assert!(so.contains("4 sources"), "{so}");
    assert_eq!(rows, ["0 0.0", "1 2.0", "2 2.0", "3 0.0"]);
    let (_, rows) = run(&["--sources", "0,0"]);
    assert_eq!(rows, ["0 0.0", "1 4.0", "2 2.0", "3 0.0"]);
    let (_, rows) = run(&["--root", "1"]);
    assert_eq!(rows, ["0 0.0", "1 0.0", "2 1.0", "3 0.0"]);
    let (so, _) = run(&["--sources", "3"]);
    assert!(so.contains("3 sources"), "{so}");
    let o = locus(&[
        "analytics",
        "run",
        "--algo",
        "bc",
        "--graph",
        g.to_str().unwrap(),
        "--sources",
        "1,x",
    ]);
    assert!(!o.status.success() && text(&o.stderr).contains("sources"));
}
