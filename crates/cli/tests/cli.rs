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
fn demo_reports_ideal_hash_partitioned_and_migrated() {
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
        "--settle-s",
        "2",
        "--interval-ms",
        "500",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let rows = report["rows"].as_array().expect("rows");
    let names: Vec<&str> = rows.iter().map(|r| r["scheme"].as_str().unwrap()).collect();
    assert_eq!(names, ["Ideal", "Hash-8", "Split+Cache", "Replica"]);
    assert_eq!(rows[0]["remote_rate"], 0.0);
    assert_eq!(rows[1]["machines"], 8);
    let remote = rows[1]["remote_rate"].as_f64().unwrap();
    assert!(remote > 0.3 && remote < 1.0, "remote rate {remote}");
    // Every scheme ran the same queries over the same graph: the same results,
    // however many values moved meanwhile.
    for r in rows {
        assert_eq!(r["results"], rows[0]["results"], "{}", r["scheme"]);
        assert_eq!(r["queries"], 300);
    }
    let recoveries = report["recoveries"].as_array().expect("recoveries");
    assert_eq!(recoveries.len(), 2);
    for r in recoveries {
        assert!(!r["seconds"].as_array().unwrap().is_empty(), "{r}");
    }
    // Only the baselines.
    let o = locus(&[
        "demo",
        "--scale",
        "9",
        "--queries",
        "100",
        "--k",
        "10",
        "--schemes",
        "none",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(report["rows"].as_array().unwrap().len(), 2);
    // A scheme that does not migrate is refused, naming it.
    let o = locus(&["demo", "--scale", "9", "--schemes", "Orig"]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("Orig"), "{}", text(&o.stderr));
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
    let o = locus(&[
        "query", "--graph", f, "--vertex", "3", "--hops", "2", "--k", "5", "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let q: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let vertices: Vec<u64> = q["distinct"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(vertices.len() as u64, q["distinct_count"].as_u64().unwrap());
    assert!(vertices.windows(2).all(|w| w[0] < w[1]), "sorted, distinct");
    assert!(q["distinct_count"].as_u64().unwrap() <= q["with_repeats"].as_u64().unwrap());
    assert!(
        q["with_repeats"].as_u64().unwrap() <= 25,
        "at most 5 x 5 paths"
    );
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
    assert_eq!(s["largest_id"], 3);
}

#[test]
fn a_weighted_graph_is_refused_naming_the_line_unless_its_weights_are_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("w.txt");
    std::fs::write(&file, "0 1 2.5\n1 2 0.5\n").unwrap();
    fails_with(
        &["load", file.to_str().unwrap()],
        "w.txt:1: a weight column",
    );
    let o = locus(&[
        "load",
        file.to_str().unwrap(),
        "--ignore-weights",
        "--json",
        "--machines",
        "2",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["input_edges"], 2);
}

#[test]
fn ids_anywhere_in_the_u32_range_load_in_memory_proportional_to_the_edges() {
    // Keys are hashed: an id near the top of the range must not make the
    // loader allocate by the largest id (this once asked for 34 GB).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sparse.txt");
    std::fs::write(
        &file,
        "0 4294967294
4000000000 7
",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let o = locus(&["load", f, "--json", "--machines", "2"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["vertices_with_edges"], 4);
    assert_eq!(s["largest_id"], 4_294_967_294u64);
    let o = locus(&[
        "query",
        "--graph",
        f,
        "--vertex",
        "4294967294",
        "--hops",
        "1",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let q: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(q["distinct"], serde_json::json!([0]));
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
        "--runs",
        "3",
        "--ops",
        "5000",
        "--out",
        out,
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // Three interleaved rounds of both schemes, and rows that are their medians.
    let runs: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("pragh-schemes.runs.json")).unwrap(),
    )
    .unwrap();
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 3);
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
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r["runs"], 3);
        let mut seen: Vec<f64> = runs
            .iter()
            .map(|round| round[i]["throughput_qps"].as_f64().unwrap())
            .collect();
        seen.sort_by(f64::total_cmp);
        assert_eq!(r["throughput_qps"].as_f64().unwrap(), seen[1], "{r}");
        let range = r["throughput_qps_range"].as_array().unwrap();
        assert_eq!(range[0].as_f64().unwrap(), seen[0]);
        assert_eq!(range[1].as_f64().unwrap(), seen[2]);
        // Each round's Orig is 1.00x of itself.
        assert_eq!(runs[0][0]["vs_orig"].as_f64().unwrap(), 1.0);
    }
    assert!(
        rows[1]["bytes_moved"].as_u64().unwrap() > 0,
        "Shard moved nothing"
    );
    assert!(dir.path().join("pragh-schemes-throughput.png").exists());
    assert!(dir.path().join("pragh-schemes.meta.json").exists());
    // Every run timed the host's core-to-core handoff, drawn against its throughput.
    for round in runs {
        for r in round.as_array().unwrap() {
            assert!(r["measure_host_handoff_ns"].as_f64().unwrap() > 0.0, "{r}");
        }
    }
    assert!(dir.path().join("pragh-schemes-host.png").exists());
    fails_with(
        &["bench", "pragh", "schemes", "--schemes", "Foo"],
        "Split+Cache",
    );
    fails_with(
        &["bench", "pragh", "schemes", "--preset", "huge"],
        "possible values: quick, full, paper",
    );
}

#[test]
fn pragh_shared_loads_run_each_scheme_on_a_fresh_copy_of_one_load() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let o = locus(&[
        "bench",
        "pragh",
        "schemes",
        "--scale",
        "8",
        "--schemes",
        "Ideal,Orig,Split+Cache,Replica",
        "--runs",
        "3",
        "--ops",
        "3000",
        "--warm-s-max",
        "3",
        "--loads",
        "shared",
        "--out",
        out,
    ]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    // Round 1 loads Ideal's machine and the cluster; round 2 runs in reverse
    // and starts on the cluster round 1 ended on; round 3 on Ideal's.
    assert_eq!(err.matches("loading the graph into").count(), 4, "{err}");
    let runs: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("pragh-schemes.runs.json")).unwrap(),
    )
    .unwrap();
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 3);
    for round in runs {
        let names: Vec<&str> = round
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["scheme"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["Ideal", "Orig", "Split+Cache", "Replica"]);
        // Replica ran on the store Split+Cache (or, in reverse, Orig) had
        // before it: had a child's replicas reached the parent, the next
        // child's reconfigure would have refused to drop them.
        let replica = &round[3];
        assert!(replica["replica_bytes"].as_u64().unwrap() > 0, "{replica}");
        // Split+Cache's final placement explains its remote GETs by cause;
        // replicas' reads are not in it, so Replica has none.
        let after = &round[2]["placement_after"];
        let part = |k: &str| after[k].as_f64().unwrap();
        let parts =
            part("unavoidable_gets") + part("misplaced_home_gets") + part("misplaced_away_gets");
        assert!((part("remote_gets") - parts).abs() < 1e-9, "{after}");
        assert!(replica["placement_after"].is_null(), "{replica}");
        for r in &round.as_array().unwrap()[2..] {
            assert!(r["values_moved"].as_u64().unwrap() > 0, "{r}");
            assert!(
                !r["warm_rounds_approved"].as_array().unwrap().is_empty(),
                "{r}"
            );
        }
    }
    // A row's update latencies come back from its child: the CDF is drawn.
    assert!(dir.path().join("pragh-schemes-update-cdf.png").exists());
    fails_with(
        &["bench", "pragh", "schemes", "--settle-share", "1.5"],
        "--settle-share = 1.5: must be in [0, 1)",
    );
    fails_with(
        &["bench", "pragh", "schemes", "--scopes", "1024"],
        "--scopes is for the `scope` and `uniform` experiments only",
    );
    fails_with(
        &[
            "bench",
            "pragh",
            "scope",
            "--scale",
            "12",
            "--scopes",
            "1024,8192",
        ],
        "--scopes = 8192: every scope must be in 1..=4096 (2^12 vertices)",
    );
}

#[test]
fn pragh_uniform_runs_over_the_scopes_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let o = locus(&[
        "bench",
        "pragh",
        "uniform",
        "--scale",
        "8",
        "--scopes",
        "16",
        "--schemes",
        "Orig,Split",
        "--runs",
        "1",
        "--ops",
        "1000",
        "--warm-s-max",
        "2",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("uniform over a scope of 16:"), "{err}");
    let rows: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("pragh-uniform.json")).unwrap(),
    )
    .unwrap();
    let got: Vec<(&str, u64)> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["scheme"].as_str().unwrap(), r["scope"].as_u64().unwrap()))
        .collect();
    assert_eq!(got, [("Orig", 16), ("Split", 16)]);
}

/// `Orig-again`, named, adds a second Orig cluster after Orig: a row of
/// its own with its ratio to the same round's Orig (the A/A control); not
/// named, it does not run.
#[test]
fn pragh_runs_the_orig_again_control_only_when_named() {
    let dir = tempfile::tempdir().unwrap();
    let o = locus(&[
        "bench",
        "pragh",
        "uniform",
        "--scale",
        "8",
        "--schemes",
        "orig-again,Split,Orig",
        "--runs",
        "1",
        "--ops",
        "500",
        "--warm-s-max",
        "1",
        "--measure-s",
        "0.3",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let rows: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("pragh-uniform.json")).unwrap(),
    )
    .unwrap();
    let rows = rows.as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["scheme"].as_str().unwrap()).collect();
    assert_eq!(names, ["Orig", "Orig-again", "Split"]);
    let again = rows[1]["vs_orig"].as_f64().unwrap();
    assert!(again > 0.0 && again.is_finite(), "{}", rows[1]);
    assert!(rows[1]["values_moved"].as_u64() == Some(0), "{}", rows[1]);
    fails_with(
        &["bench", "pragh", "uniform", "--schemes", "Orig,Orig-twice"],
        "must be one of Ideal, Orig, Shard, Split, Cache, Split+Cache, Replica, Orig-again",
    );
}

/// The quick preset's default: the schemes of a round are warmed up one
/// after another, then measured in turns of parts, each scheme's window
/// at least --measure-s of its parts together; rounds still alternate.
#[test]
fn pragh_schemes_take_turns_measuring_in_parts_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let o = locus(&[
        "bench",
        "pragh",
        "uniform",
        "--scale",
        "8",
        "--schemes",
        "Orig,Split",
        "--runs",
        "2",
        "--ops",
        "500",
        "--warm-s-max",
        "1",
        "--measure-s",
        "0.5",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains(": warming up ...") || l.starts_with("measuring "))
        .collect();
    let turns = "measuring 2 scheme(s) in turns: 8 parts each, 0.50 s of each scheme at least";
    assert_eq!(
        lines,
        [
            "Orig (run 1/2): warming up ...",
            "Split (run 1/2): warming up ...",
            turns,
            "Split (run 2/2): warming up ...",
            "Orig (run 2/2): warming up ...",
            turns,
        ],
        "{err}"
    );
    let runs: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("pragh-uniform.runs.json")).unwrap(),
    )
    .unwrap();
    for r in runs
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g.as_array().unwrap())
    {
        // Parts sized to fill the window: as long as asked, up to rounding.
        let secs = r["queries"].as_f64().unwrap() / r["throughput_qps"].as_f64().unwrap();
        assert!(secs >= 0.4, "a window of {secs} s: {r}");
        assert!(r["measure_parts"].as_u64().unwrap() >= 8, "{r}");
    }
    fails_with(
        &[
            "bench", "pragh", "uniform", "--slices", "4", "--loads", "shared",
        ],
        "--slices = 4: needs --loads each",
    );
    fails_with(
        &["bench", "pragh", "uniform", "--slices", "0"],
        "--slices = 0: must be 1..=1000",
    );
}

#[test]
fn pragh_rounds_alternate_the_order_and_measure_as_long_as_asked() {
    let dir = tempfile::tempdir().unwrap();
    let o = locus(&[
        "bench",
        "pragh",
        "uniform",
        "--scale",
        "8",
        "--schemes",
        "Orig,Split",
        "--runs",
        "2",
        "--ops",
        "500",
        "--warm-s-max",
        "1",
        "--measure-s",
        "0.5",
        "--slices",
        "1",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    // Separate loads (the quick preset's default) alternate the order too:
    // Orig, Split in round 1, then Split, Orig.
    let started: Vec<&str> = err
        .lines()
        .filter(|l| l.contains(" (run ") && l.ends_with("..."))
        .collect();
    assert_eq!(
        started,
        [
            "Orig (run 1/2) ...",
            "Split (run 1/2) ...",
            "Split (run 2/2) ...",
            "Orig (run 2/2) ..."
        ],
        "{err}"
    );
    // --measure-s holds on the in-process fabric: 500 operations at scale 8
    // take a few milliseconds, and the window is repeated to half a second
    // (sized from the pass before it, and sized again when it comes out
    // short, a few times at most: allow half for a machine under load).
    let runs: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("pragh-uniform.runs.json")).unwrap(),
    )
    .unwrap();
    for r in runs
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g.as_array().unwrap())
    {
        let secs = r["queries"].as_f64().unwrap() / r["throughput_qps"].as_f64().unwrap();
        assert!(secs >= 0.25, "a window of {secs} s: {r}");
    }
    fails_with(
        &["bench", "pragh", "uniform", "--measure-s=-1"],
        "--measure-s = -1: must be in [0, 3600]",
    );
}

#[test]
fn pragh_scope_runs_the_scopes_asked_for_on_one_shared_load() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let o = locus(&[
        "bench",
        "pragh",
        "scope",
        "--scale",
        "8",
        "--scopes",
        "16,256",
        "--schemes",
        "Orig,Split+Cache,Replica",
        "--runs",
        "1",
        "--ops",
        "2000",
        "--warm-s-max",
        "2",
        "--loads",
        "shared",
        "--out",
        out,
    ]);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    // Both schemes run on 8 machines: one load serves every scope.
    assert_eq!(err.matches("loading the graph into").count(), 1, "{err}");
    let rows: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("pragh-scope.json")).unwrap(),
    )
    .unwrap();
    let got: Vec<(String, u64)> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["scheme"].as_str().unwrap().to_string(),
                r["scope"].as_u64().unwrap(),
            )
        })
        .collect();
    let mut want = Vec::new();
    for scope in [16, 256] {
        for s in ["Orig", "Split+Cache", "Replica"] {
            want.push((s.to_string(), scope));
        }
    }
    assert_eq!(got, want);
    // Fig. 11's line charts (a Replica row per scope is not the
    // replica-budget experiment's curve).
    let pngs = [
        "pragh-scope-throughput.png",
        "pragh-scope-speedup.png",
        "pragh-scope-remote.png",
        "pragh-scope-remote-gets.png",
    ];
    for png in pngs {
        assert!(dir.path().join(png).exists(), "{png}: {err}");
        std::fs::remove_file(dir.path().join(png)).unwrap();
    }
    assert!(!dir.path().join("pragh-scope.png").exists());
    // Redrawn from the JSON alone.
    let o = locus(&["bench", "pragh", "scope", "--plot-only", "--out", out]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    for png in pngs {
        assert!(dir.path().join(png).exists(), "{png} redrawn");
    }
    std::fs::write(dir.path().join("pragh-schemes.json"), "[{\"scheme\": 3}]").unwrap();
    fails_with(
        &["bench", "pragh", "schemes", "--plot-only", "--out", out],
        "pragh-schemes.json: not the rows of `bench pragh schemes`",
    );
}

#[test]
fn pragh_replica_budget_keeps_every_machine_within_its_budget() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let o = locus(&[
        "bench",
        "pragh",
        "replica-budget",
        "--scale",
        "9",
        "--runs",
        "1",
        "--ops",
        "4000",
        "--warm-s-max",
        "4",
        "--out",
        out,
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let rows: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("pragh-replica-budget.json")).unwrap(),
    )
    .unwrap();
    let rows = rows.as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["scheme"].as_str().unwrap()).collect();
    assert_eq!(names[..2], ["Ideal", "Orig"]);
    let replica: Vec<&serde_json::Value> =
        rows.iter().filter(|r| r["scheme"] == "Replica").collect();
    assert_eq!(replica.len(), 7, "{names:?}");
    let mut last_budget = 0;
    for r in &replica {
        let budget = r["replica_budget_bytes"].as_u64().unwrap();
        assert!(budget >= last_budget, "budgets grow: {r}");
        last_budget = budget;
        let held = r["replica_bytes_machine_max"].as_u64().unwrap();
        assert!(
            held <= budget,
            "a machine holds {held} replica bytes over its budget {budget}"
        );
        let share = r["replica_share"].as_f64().unwrap();
        let graph = r["graph_value_bytes"].as_u64().unwrap();
        assert!(graph > 0);
        let total = r["replica_bytes"].as_u64().unwrap();
        assert!((share - total as f64 / graph as f64).abs() < 1e-9, "{r}");
    }
    assert_eq!(replica[0]["replica_budget_bytes"], 0);
    assert_eq!(replica[0]["replica_bytes"], 0);
    assert!(last_budget > 0);
    assert!(dir.path().join("pragh-replica-budget.png").exists());
}

#[test]
fn load_rmat_builds_the_store_range_by_range_and_reports_its_memory() {
    let o = locus(&[
        "bench",
        "load-rmat",
        "--scale",
        "12",
        "--range-mb",
        "0.1",
        "--machines",
        "4",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let load = &j["load"];
    assert_eq!(load["vertices"], 4096);
    assert_eq!(load["generated_edges"], 4096 * 16);
    assert!(load["ranges"].as_u64().unwrap() > 1, "{j}");
    let stored = load["stored_edges"].as_u64().unwrap();
    assert!(
        stored > 0 && stored <= 4096 * 16,
        "directed, deduplicated: {j}"
    );
    assert!(load["value_bytes_per_edge"].as_f64().unwrap() >= 4.0);
    assert!(j["peak_rss_bytes"].as_u64().unwrap() > 0);
    fails_with(
        &["bench", "load-rmat", "--scale", "12", "--machines", "0"],
        "cluster.machines",
    );
    fails_with(
        &["bench", "load-rmat", "--scale", "12", "--range-mb", "0"],
        "--range-mb 0 must be a positive number",
    );
}
