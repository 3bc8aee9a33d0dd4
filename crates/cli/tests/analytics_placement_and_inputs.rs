//! Issue 63 as a user meets it: every disk or far run says where its
//! placement came from; a saved profile is refused on another graph or on
//! the run's own root; a profiling run is timed; `.mtx`, weighted text,
//! `--symmetrize` and `--directed` are stated in every run's output.

use std::path::{Path, PathBuf};
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

fn data(file: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../analytics/tests/data")
        .join(file)
        .display()
        .to_string()
}

fn json(args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.push("--json");
    let o = locus(&all);
    assert!(o.status.success(), "{args:?}: {}", text(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("json report")
}

fn bfs_far<'a>(graph: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec![
        "analytics",
        "run",
        "--algo",
        "bfs",
        "--graph",
        graph,
        "--backend",
        "far",
        "--far-ratio",
        "0.8",
        "--threads",
        "1",
    ];
    a.extend_from_slice(extra);
    a
}

#[test]
fn placement_source_profile_timing_and_saved_profiles() {
    let dir = tempfile::tempdir().unwrap();
    let karate = data("karate.txt");
    let saved = dir.path().join("bfs-root0.json");
    let saved = saved.to_str().unwrap();

    let v = json(&bfs_far(&karate, &[]));
    assert_eq!(v["placement_source"], "degrees");
    assert!(v["profile_s"].is_null());
    assert!(v["wall_s"].as_f64().unwrap() >= v["time_s"].as_f64().unwrap());
    assert_eq!(v["edges_as"], "directed");

    let v = json(&bfs_far(&karate, &["--profile-run"]));
    assert_eq!(v["placement_source"], "profiling_run");
    let profile_s = v["profile_s"].as_f64().expect("timed");
    assert!(v["wall_s"].as_f64().unwrap() >= profile_s + v["time_s"].as_f64().unwrap());
    let o = locus(&bfs_far(&karate, &["--profile-run"]));
    assert!(text(&o.stdout).contains("placement       profiling run on the Oracle"));

    // Save from root 0, use for root 33: honest, and the report says whence.
    let o = locus(&bfs_far(&karate, &["--root", "0", "--save-profile", saved]));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(Path::new(saved).exists());
    let v = json(&bfs_far(&karate, &["--root", "33", "--profile", saved]));
    assert_eq!(v["placement_source"], "saved_profile");
    assert_eq!(v["profile_origin"]["root"], 0);
    assert_eq!(v["profile_same_root"], false);

    // The same root is the leak: refused unless accepted, then reported.
    let o = locus(&bfs_far(&karate, &["--root", "0", "--profile", saved]));
    assert!(!o.status.success());
    let e = text(&o.stderr);
    assert!(
        e.contains("bfs-root0.json") && e.contains("--profile-same-root-ok"),
        "{e}"
    );
    let v = json(&bfs_far(
        &karate,
        &["--root", "0", "--profile", saved, "--profile-same-root-ok"],
    ));
    assert_eq!(v["profile_same_root"], true);

    // Another graph: refused, naming the file and both graphs.
    let lesmis = data("lesmis.txt");
    let o = locus(&bfs_far(&lesmis, &["--root", "1", "--profile", saved]));
    assert!(!o.status.success());
    let e = text(&o.stderr);
    assert!(
        e.contains("another graph") && e.contains("bfs-root0.json"),
        "{e}"
    );
}

#[test]
fn matrix_market_weights_and_symmetrize_are_stated() {
    let dir = tempfile::tempdir().unwrap();
    let mtx = dir.path().join("path.mtx");
    // A directed path 0 -> 1 -> 2 -> 3 (1-based in the file).
    std::fs::write(
        &mtx,
        "%%MatrixMarket matrix coordinate pattern general\n4 4 3\n1 2\n2 3\n3 4\n",
    )
    .unwrap();
    let mtx = mtx.to_str().unwrap();
    fn run<'a>(mtx: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
        let mut a = vec![
            "analytics",
            "run",
            "--algo",
            "bfs",
            "--graph",
            mtx,
            "--backend",
            "local",
            "--root",
            "3",
        ];
        a.extend_from_slice(extra);
        a
    }
    let v = json(&run(mtx, &[]));
    assert_eq!(v["edges_as"], "directed");
    assert_eq!(v["edges"], 3);
    assert!(
        v["summary"]
            .as_str()
            .unwrap()
            .contains("root 3: 1 vertices reached"),
        "{}",
        v["summary"]
    );
    let v = json(&run(mtx, &["--symmetrize"]));
    assert_eq!(v["edges_as"], "symmetrized");
    assert_eq!(v["edges"], 6);
    assert!(
        v["summary"]
            .as_str()
            .unwrap()
            .contains("root 3: 4 vertices reached"),
        "{}",
        v["summary"]
    );
    let o = locus(&run(mtx, &["--directed"]));
    assert!(
        text(&o.stdout).contains("input           edges directed"),
        "{}",
        text(&o.stdout)
    );
    let o = locus(&run(mtx, &["--directed", "--symmetrize"]));
    assert!(!o.status.success(), "the two flags conflict");

    // A weight column: refused naming the line, or dropped on request and stated.
    let wel = dir.path().join("w.wel");
    std::fs::write(&wel, "0 1 0.5\n1 2 2\n").unwrap();
    let wel = wel.to_str().unwrap();
    let o = locus(&[
        "analytics",
        "run",
        "--algo",
        "wcc",
        "--graph",
        wel,
        "--backend",
        "local",
    ]);
    assert!(!o.status.success());
    let e = text(&o.stderr);
    assert!(
        e.contains("w.wel:1:") && e.contains("--ignore-weights"),
        "{e}"
    );
    let v = json(&[
        "analytics",
        "run",
        "--algo",
        "wcc",
        "--graph",
        wel,
        "--backend",
        "local",
        "--ignore-weights",
    ]);
    assert_eq!(v["weights_dropped"], true);
    assert_eq!(v["edges"], 2);

    // A malformed .mtx names its line.
    let bad = dir.path().join("bad.mtx");
    std::fs::write(
        &bad,
        "%%MatrixMarket matrix coordinate pattern general\n3 3 1\n0 1\n",
    )
    .unwrap();
    let o = locus(&[
        "analytics",
        "run",
        "--algo",
        "bfs",
        "--graph",
        bad.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let e = text(&o.stderr);
    assert!(
        e.contains("bad.mtx:3:") && e.contains("ids start at 1"),
        "{e}"
    );
}

#[test]
fn bench_fargraph_places_by_degrees_unless_asked_to_profile() {
    for (flag, source) in [(None, "degrees"), (Some("--profile-run"), "profiling_run")] {
        let mut a = vec!["bench", "fargraph", "buffering", "--scale", "10", "--json"];
        a.extend(flag);
        let v = json_raw(&a);
        let mut placed = 0;
        for run in v["runs"].as_array().unwrap() {
            let r = &run["report"];
            if r["backend"] == "far" || r["backend"] == "disk" {
                assert_eq!(r["placement_source"], source);
                assert_eq!(r["profile_s"].is_number(), flag.is_some());
                placed += 1;
            }
        }
        assert!(placed > 0, "the experiment has far or disk runs");
    }
}

fn json_raw(args: &[&str]) -> serde_json::Value {
    let o = locus(args);
    assert!(o.status.success(), "{args:?}: {}", text(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("json report")
}
