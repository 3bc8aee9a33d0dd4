//! The `locus` command as a user meets it: help, the demo, generate/load/query,
//! and clear errors for bad input.

use std::path::Path;
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
fn help_lists_every_subcommand() {
    let o = locus(&["--help"]);
    assert!(o.status.success());
    let out = text(&o.stdout);
    for cmd in ["demo", "generate", "load", "query", "bench", "serve"] {
        assert!(out.contains(cmd), "--help does not mention {cmd}:\n{out}");
    }
    let o = locus(&["demo", "--help"]);
    assert!(text(&o.stdout).contains("--machines"));
}

#[test]
fn demo_reports_ideal_and_hash_partitioned() {
    let o = locus(&[
        "demo",
        "--scale",
        "10",
        "--queries",
        "300",
        "--k",
        "20",
        "--threads",
        "2",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let rows = rows.as_array().expect("array");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["scheme"], "Ideal");
    assert_eq!(rows[0]["remote_rate"], 0.0);
    assert_eq!(rows[1]["machines"], 8);
    let remote = rows[1]["remote_rate"].as_f64().unwrap();
    assert!(remote > 0.3 && remote < 1.0, "remote rate {remote}");
    // Both schemes ran the same queries over the same graph: same results.
    assert_eq!(rows[0]["results"], rows[1]["results"]);
    assert_eq!(rows[0]["queries"], 300);
}

#[test]
fn generate_then_load_then_query() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("g.bin");
    let f = file.to_str().unwrap();
    let o = locus(&["generate", "--scale", "9", "--out", f]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 16 * 512 * 8);
    let o = locus(&["load", f, "--machines", "4", "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["input_edges"], 16 * 512);
    assert_eq!(s["machines"].as_array().unwrap().len(), 4);
    let o = locus(&[
        "query", "--graph", f, "--vertex", "3", "--hops", "2", "--k", "5",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("2-hop from vertex 3"));
}

#[test]
fn load_counts_a_small_text_graph_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tri.txt");
    std::fs::write(&file, "# a triangle and a tail\n0 1\n1 2\n2 0\n2 3\n").unwrap();
    let o = locus(&["load", file.to_str().unwrap(), "--json", "--machines", "2"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["input_edges"], 4);
    assert_eq!(s["vertices_with_edges"], 4);
    assert_eq!(s["stored_edges"], 8, "undirected: both directions");
    assert_eq!(s["max_degree"], 3);
}

fn fails_with(args: &[&str], needle: &str) {
    let o = locus(args);
    assert_eq!(o.status.code(), Some(2), "expected failure for {args:?}");
    let err = text(&o.stderr);
    assert!(
        err.contains(needle),
        "stderr of {args:?} lacks {needle:?}:\n{err}"
    );
}

#[test]
fn malformed_input_names_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.txt");
    std::fs::write(&file, "0 1\n1 2\n3 x\n").unwrap();
    fails_with(&["load", file.to_str().unwrap()], "bad.txt:3:");
    let empty = dir.path().join("empty.txt");
    std::fs::write(&empty, "# nothing\n").unwrap();
    fails_with(&["load", empty.to_str().unwrap()], "no edges");
    let trunc = dir.path().join("t.bin");
    std::fs::write(&trunc, [0u8; 12]).unwrap();
    fails_with(&["load", trunc.to_str().unwrap()], "8");
    fails_with(
        &["load", Path::new("/nonexistent/x.txt").to_str().unwrap()],
        "/nonexistent/x.txt",
    );
}

#[test]
fn bad_settings_are_clear_errors() {
    fails_with(&["demo", "--machines", "0"], "cluster.machines");
    fails_with(&["demo", "--machines", "129"], "cluster.machines");
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.toml");
    std::fs::write(&cfg, "[cluster]\nmachnes = 4\n").unwrap();
    fails_with(&["demo", "--config", cfg.to_str().unwrap()], "machnes");
    fails_with(
        &["query", "--scale", "8", "--vertex", "100000"],
        "not in the graph",
    );
    fails_with(
        &["bench", "foundation", "--preset", "huge"],
        "quick or full",
    );
}

#[test]
fn pragh_bench_runs_shard_against_orig_and_writes_json_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let o = locus(&[
        "bench",
        "pragh",
        "schemes",
        "--scale",
        "8",
        "--schemes",
        "Orig,Shard",
        "--out",
        out,
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let rows: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("pragh-schemes.json")).unwrap(),
    )
    .unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for r in rows {
        for field in [
            "scheme",
            "throughput_qps",
            "p50_us",
            "p99_us",
            "p999_us",
            "remote_rate",
            "migrated_fraction",
            "bytes_moved",
            "vs_orig",
            "vs_ideal",
        ] {
            assert!(r.get(field).is_some(), "row lacks {field}: {r}");
        }
        let rate = r["remote_rate"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&rate));
    }
    assert_eq!(rows[0]["scheme"], "Orig");
    assert_eq!(rows[1]["scheme"], "Shard");
    assert!(
        rows[1]["bytes_moved"].as_u64().unwrap() > 0,
        "Shard moved nothing"
    );
    assert!(dir.path().join("pragh-schemes-throughput.png").exists());
    assert!(dir.path().join("pragh-schemes.meta.json").exists());
    fails_with(
        &["bench", "pragh", "schemes", "--schemes", "Foo"],
        "Split+Cache",
    );
    fails_with(
        &["bench", "pragh", "schemes", "--preset", "huge"],
        "quick or full",
    );
}
