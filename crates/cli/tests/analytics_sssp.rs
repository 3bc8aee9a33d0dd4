//! `locus analytics run --algo sssp` as a user meets it (issue 63): weighted
//! text (`.wel`), weighted Matrix Market and unweighted input, the weights'
//! source stated in the output, `--delta`, distances in `--output`, and bad
//! weights refused with the file and line.

use std::path::PathBuf;
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

fn sssp(graph: &str, extra: &[&str]) -> Output {
    let mut a = vec![
        "analytics",
        "run",
        "--algo",
        "sssp",
        "--graph",
        graph,
        "--threads",
        "2",
    ];
    a.extend_from_slice(extra);
    locus(&a)
}

fn rows(path: &std::path::Path) -> Vec<(u32, i64)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let t: Vec<&str> = l.split_whitespace().collect();
            (t[0].parse().unwrap(), t[1].parse().unwrap())
        })
        .collect()
}

#[test]
fn weighted_files_give_weighted_distances_on_every_backend() {
    let dir = tempfile::tempdir().unwrap();
    // 0 -> 1 -> 2 -> 3 weighs 3, 0 -> 3 weighs 10; 4 is not reached.
    let wel = dir.path().join("g.wel");
    std::fs::write(
        &wel,
        "# src dst weight\n0 1 1\n1 2 1\n2 3 1\n0 3 10\n4 0 2\n",
    )
    .unwrap();
    let mtx = dir.path().join("g.mtx");
    std::fs::write(
        &mtx,
        "%%MatrixMarket matrix coordinate integer general\n5 5 5\n1 2 1\n2 3 1\n3 4 1\n1 4 10\n5 1 2\n",
    )
    .unwrap();
    let out = dir.path().join("d.txt");
    for graph in [&wel, &mtx] {
        for backend in ["local", "disk", "far", "paged"] {
            for delta in ["1", "4"] {
                let o = sssp(
                    graph.to_str().unwrap(),
                    &[
                        "--backend",
                        backend,
                        "--root",
                        "0",
                        "--delta",
                        delta,
                        "--disk-dir",
                        dir.path().to_str().unwrap(),
                        "--output",
                        out.to_str().unwrap(),
                    ],
                );
                let so = text(&o.stdout);
                assert!(o.status.success(), "{backend}: {}", text(&o.stderr));
                assert!(so.contains("weights         from the input"), "{so}");
                assert!(so.contains("weighted edges"), "{so}");
                assert_eq!(
                    rows(&out),
                    vec![(0, 0), (1, 1), (2, 2), (3, 3), (4, -1)],
                    "{} on {backend}, delta {delta}",
                    graph.display()
                );
            }
        }
    }
    // Dropped weights: every edge weighs 1, and the run says so.
    let o = sssp(
        wel.to_str().unwrap(),
        &[
            "--root",
            "0",
            "--ignore-weights",
            "--output",
            out.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("dropped (--ignore-weights): every edge weighs 1"));
    assert_eq!(rows(&out)[3], (3, 1));
}

#[test]
fn unweighted_input_weighs_one_and_bad_weights_name_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let karate =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../analytics/tests/data/karate.txt");
    let o = sssp(
        karate.to_str().unwrap(),
        &["--backend", "far", "--root", "0"],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("none in the input: every edge weighs 1"),
        "{}",
        text(&o.stdout)
    );
    let bad = dir.path().join("bad.wel");
    std::fs::write(&bad, "0 1 3\n1 2 2.5\n").unwrap();
    let o = sssp(bad.to_str().unwrap(), &[]);
    assert!(!o.status.success());
    let e = text(&o.stderr);
    assert!(
        e.contains("bad.wel") && e.contains("line 2") && e.contains("2.5"),
        "{e}"
    );
    let o = sssp(karate.to_str().unwrap(), &["--delta", "0"]);
    assert!(!o.status.success() && text(&o.stderr).contains("delta"));
}
