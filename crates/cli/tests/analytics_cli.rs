//! `locus analytics` and `locus bench fargraph` as a user meets them: a run
//! prints time, iterations, bytes fetched and a digest that is the same on
//! every backend and over TCP; bad input and missing tables are clear errors.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn locus(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_locus"))
        .args(args)
        .output()
        .expect("run locus")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn karate() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../analytics/tests/data/karate.txt")
        .display()
        .to_string()
}

fn digest(out: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix("digest"))
        .map(|d| d.trim().to_string())
        .unwrap_or_else(|| panic!("no digest in:\n{out}"))
}

#[test]
fn run_prints_the_report_and_the_same_digest_on_every_backend() {
    let dir = tempfile::tempdir().unwrap();
    let g = karate();
    for algo in ["bfs", "wcc", "pagerank", "radii"] {
        let mut digests = Vec::new();
        for backend in ["local", "disk", "far", "paged"] {
            let o = locus(&[
                "analytics",
                "run",
                "--algo",
                algo,
                "--graph",
                &g,
                "--backend",
                backend,
                "--far-ratio",
                "0.8",
                "--threads",
                "2",
                "--disk-dir",
                dir.path().to_str().unwrap(),
            ]);
            let out = text(&o.stdout);
            assert!(o.status.success(), "{algo} {backend}: {}", text(&o.stderr));
            for field in ["time", "iterations", "bytes fetched", "digest"] {
                assert!(
                    out.contains(field),
                    "{algo} {backend}: no {field} in\n{out}"
                );
            }
            digests.push(digest(&out));
        }
        assert!(
            digests.windows(2).all(|w| w[0] == w[1]),
            "{algo}: {digests:?}"
        );
    }
}

#[test]
fn rmat_and_json() {
    let o = locus(&[
        "analytics",
        "run",
        "--algo",
        "bfs",
        "--rmat-scale",
        "10",
        "--backend",
        "paged",
        "--threads",
        "1",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["vertices"], 1024);
    assert!(v["page_faults"].as_u64().unwrap() > 0);
    // Linux's default swap readahead (8 pages) unless told otherwise; the
    // result is the same without it.
    assert_eq!(v["readahead_window"], 8);
    assert!(v["readahead_pages"].as_u64().unwrap() > 0);
    let o = locus(&[
        "analytics",
        "run",
        "--algo",
        "bfs",
        "--rmat-scale",
        "10",
        "--backend",
        "paged",
        "--readahead-pages",
        "0",
        "--threads",
        "1",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let w: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(w["readahead_pages"], 0);
    assert_eq!(w["digest"], v["digest"]);
    assert!(w["page_faults"].as_u64() > v["page_faults"].as_u64());
    assert!(v["vertex_paging"].is_null());
    // The run says which edge layout it used: compact unless told wide,
    // with the same result.
    assert_eq!(v["edge_layout"], "compact");
    let far = |layout: &str| -> serde_json::Value {
        let o = locus(&[
            "analytics",
            "run",
            "--algo",
            "pagerank",
            "--rmat-scale",
            "10",
            "--backend",
            "far",
            "--far-ratio",
            "1",
            "--edge-layout",
            layout,
            "--threads",
            "2",
            "--json",
        ]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let (c, w) = (far("compact"), far("wide"));
    assert_eq!(
        (c["edge_layout"].as_str(), w["edge_layout"].as_str()),
        (Some("compact"), Some("wide"))
    );
    assert_eq!(c["digest"], w["digest"]);
    assert!(
        c["remote_edge_bytes"].as_u64().unwrap() * 3 < w["remote_edge_bytes"].as_u64().unwrap() * 2
    );
    let o = locus(&[
        "analytics",
        "run",
        "--algo",
        "bfs",
        "--rmat-scale",
        "8",
        "--edge-layout",
        "tiny",
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("'tiny' is not one of auto, compact, wide"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn paged_vertices_reports_the_vertex_pager_and_only_paged_takes_it() {
    let run = |backend: &str| {
        locus(&[
            "analytics",
            "run",
            "--algo",
            "pagerank",
            "--iterations",
            "2",
            "--rmat-scale",
            "14",
            "--backend",
            backend,
            "--far-ratio",
            "0.95",
            "--paged-vertices",
            // 8-byte edges: with 4-byte ones R-MAT 14's edges leave the pool
            // room for every vertex page, and nothing would be evicted.
            "--edge-layout",
            "wide",
            "--threads",
            "1",
            "--json",
        ])
    };
    let o = run("paged");
    if !o.status.success() && text(&o.stderr).contains("userfaultfd is not available") {
        assert_eq!(
            std::env::var("LOCUS_SKIP_UFFD").as_deref(),
            Ok("1"),
            "userfaultfd is missing here: {} (LOCUS_SKIP_UFFD=1 skips)",
            text(&o.stderr)
        );
        eprintln!(
            "SKIPPED paged_vertices_reports_the_vertex_pager: {}",
            text(&o.stderr)
        );
        return;
    }
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let p = &v["vertex_paging"];
    // Plumbing and the report only: evictions and fetches are checked in
    // locus-analytics' tests/paged_vertices.rs.
    assert!(p["zero_fills"].as_u64().unwrap() > 0, "{p}");
    assert!(p["deactivations"].as_u64().unwrap() > 0, "{p}");
    let o = run("far");
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("paged_vertices"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn bad_input_and_settings_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.txt");
    std::fs::write(&bad, "0 1\n1 two\n").unwrap();
    let o = locus(&[
        "analytics",
        "run",
        "--algo",
        "bfs",
        "--graph",
        bad.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("bad.txt:2"), "{}", text(&o.stderr));
    let g = karate();
    for (flag, value, says) in [
        ("--algo", "apsp", "not one of"),
        ("--backend", "swap", "not one of"),
        ("--far-ratio", "1.5", "far_ratio"),
        ("--chunk", "12", "chunk_bytes"),
        ("--threads", "0", "threads"),
    ] {
        let mut args = vec!["analytics", "run", "--graph", &g, flag, value];
        for (f, v) in [("--algo", "bfs"), ("--threads", "1")] {
            if f != flag {
                args.extend([f, v]);
            }
        }
        let o = locus(&args);
        assert!(!o.status.success(), "{flag} {value} was accepted");
        assert!(
            text(&o.stderr).contains(says),
            "{flag} {value}: {}",
            text(&o.stderr)
        );
    }
    let missing = dir.path().join("none.json");
    let o = locus(&[
        "analytics",
        "run",
        "--algo",
        "bfs",
        "--graph",
        &g,
        "--threads",
        "auto",
        "--profile-table",
        missing.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("none.json"), "{}", text(&o.stderr));
}

#[test]
fn a_huge_id_is_refused_unless_ids_are_compacted() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("huge.txt");
    std::fs::write(&g, "0 4294967293\n").unwrap();
    let g = g.to_str().unwrap();
    // Without a limit given, the default (half the machine) still refuses:
    // PageRank on 4.3 billion vertices needs over 100 GiB.
    let o = locus(&["analytics", "run", "--algo", "pagerank", "--graph", g]);
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(
        err.contains("huge.txt' line 1 names vertex 4294967293"),
        "{err}"
    );
    assert!(err.contains("--compact-ids"), "{err}");
    let o = locus(&[
        "analytics",
        "run",
        "--algo",
        "bfs",
        "--graph",
        g,
        "--memory-max",
        "1G",
    ]);
    assert!(
        text(&o.stderr).contains("over the limit of 1.0 GiB"),
        "{}",
        text(&o.stderr)
    );
    // Compacted, it is a graph of two vertices, and results keep the input's ids.
    let out = dir.path().join("wcc.txt");
    let o = locus(&[
        "analytics",
        "run",
        "--algo",
        "wcc",
        "--graph",
        g,
        "--compact-ids",
        "--backend",
        "far",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let lines: Vec<String> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(String::from)
        .collect();
    assert_eq!(lines, ["0 0", "4294967293 0"]);
    let o = locus(&[
        "analytics",
        "run",
        "--algo",
        "bfs",
        "--graph",
        g,
        "--compact-ids",
        "--root",
        "4294967293",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let body = std::fs::read_to_string(&out).unwrap();
    // BFS lines carry the parent, in the input's ids too.
    assert!(
        body.ends_with("0 -1 -1\n4294967293 0 4294967293\n"),
        "{body}"
    );
    let o = locus(&[
        "analytics",
        "run",
        "--algo",
        "bfs",
        "--graph",
        g,
        "--compact-ids",
        "--root",
        "7",
    ]);
    assert!(
        text(&o.stderr).contains("--root 7: no edge names vertex 7"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn output_writes_every_vertex_in_text_and_binary() {
    let dir = tempfile::tempdir().unwrap();
    let g = karate();
    for (format, len) in [("text", None), ("binary", Some(24 + 34 * 12))] {
        let out = dir.path().join(format!("pr.{format}"));
        let o = locus(&[
            "analytics",
            "run",
            "--algo",
            "pagerank",
            "--graph",
            &g,
            "--backend",
            "paged",
            "--threads",
            "2",
            "--output",
            out.to_str().unwrap(),
            "--output-format",
            format,
        ]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let bytes = std::fs::read(&out).unwrap();
        match len {
            Some(n) => assert_eq!(bytes.len(), n),
            None => {
                let body = text(&bytes);
                let rows: Vec<(u32, f64)> = body
                    .lines()
                    .filter(|l| !l.starts_with('#'))
                    .map(|l| {
                        let (v, x) = l.split_once(' ').unwrap();
                        (v.parse().unwrap(), x.parse().unwrap())
                    })
                    .collect();
                assert_eq!(rows.len(), 34);
                assert!(rows.iter().enumerate().all(|(i, r)| r.0 == i as u32));
                let sum: f64 = rows.iter().map(|r| r.1).sum();
                assert!((sum - 1.0).abs() < 1e-9, "{sum}");
            }
        }
    }
    let o = locus(&[
        "analytics",
        "run",
        "--algo",
        "bfs",
        "--graph",
        &g,
        "--output",
        "x",
        "--output-format",
        "csv",
    ]);
    assert!(
        text(&o.stderr).contains("'csv' is not text or binary"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn threads_auto_picks_from_a_table() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t.json");
    std::fs::write(
        &table,
        r#"{"machine":"test","rows":[
            {"algo":"bfs","vertices":34,"edges":78,"threads":1,"far_ratio":0.8,"time_s":1.0},
            {"algo":"bfs","vertices":34,"edges":78,"threads":2,"far_ratio":0.8,"time_s":2.0}]}"#,
    )
    .unwrap();
    let g = karate();
    let o = locus(&[
        "analytics",
        "run",
        "--algo",
        "bfs",
        "--graph",
        &g,
        "--threads",
        "auto",
        "--profile-table",
        table.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("1 thread(s)"),
        "{}",
        text(&o.stdout)
    );
}

/// A `locus analytics serve` child, killed when dropped.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn against_a_memory_server_process_over_tcp() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_locus"))
        .args([
            "analytics",
            "serve",
            "--memory",
            "64M",
            "--lifetime-s",
            "120",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _server = Server(child);
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .to_string();
    let g = karate();
    let mut digests = Vec::new();
    for backend in ["far", "paged"] {
        let o = locus(&[
            "analytics",
            "run",
            "--algo",
            "pagerank",
            "--graph",
            &g,
            "--backend",
            backend,
            "--threads",
            "2",
            "--server",
            &addr,
        ]);
        assert!(o.status.success(), "{backend}: {}", text(&o.stderr));
        let out = text(&o.stdout);
        assert!(out.contains("TCP fabric"), "{out}");
        digests.push(digest(&out));
    }
    let o = locus(&[
        "analytics",
        "run",
        "--algo",
        "pagerank",
        "--graph",
        &g,
        "--backend",
        "local",
        "--threads",
        "1",
    ]);
    digests.push(digest(&text(&o.stdout)));
    assert!(digests.windows(2).all(|w| w[0] == w[1]), "{digests:?}");
}

#[test]
fn bench_fargraph_writes_json_and_png() {
    let dir = tempfile::tempdir().unwrap();
    let o = locus(&[
        "bench",
        "fargraph",
        "buffering",
        "--scale",
        "10",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("buffering.json")).unwrap()).unwrap();
    assert_eq!(v["graph"]["vertices"], 1024);
    assert_eq!(v["derived"]["by_algo"].as_array().unwrap().len(), 2);
    // Medians of three interleaved runs, with min and max beside them.
    for run in v["runs"].as_array().unwrap() {
        let times: Vec<f64> = run["times_s"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_f64().unwrap())
            .collect();
        assert_eq!(times.len(), 3);
        let mut sorted = times.clone();
        sorted.sort_by(f64::total_cmp);
        assert_eq!(run["time_s_median"].as_f64().unwrap(), sorted[1]);
        assert_eq!(run["report"]["time_s"].as_f64().unwrap(), sorted[1]);
        assert_eq!(run["time_s_min"].as_f64().unwrap(), sorted[0]);
        assert_eq!(run["time_s_max"].as_f64().unwrap(), sorted[2]);
    }
    let row = &v["derived"]["by_algo"][0];
    assert_eq!(row["with_buffering_range_s"].as_array().unwrap().len(), 2);
    let o = locus(&[
        "bench",
        "fargraph",
        "buffering",
        "--scale",
        "10",
        "--repeat",
        "2",
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("at least three"),
        "{}",
        text(&o.stderr)
    );
    let png = std::fs::read(dir.path().join("buffering.png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");
}

#[test]
fn bench_fargraph_ratio_has_far_and_both_paged_variants() {
    let dir = tempfile::tempdir().unwrap();
    let o = locus(&[
        "bench",
        "fargraph",
        "ratio",
        "--scale",
        "9",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("ratio.json")).unwrap()).unwrap();
    let rows = v["derived"]["by_ratio"].as_array().unwrap();
    assert_eq!(rows.len(), 8);
    for r in rows {
        for key in [
            "far_s",
            "paged_readahead_s",
            "paged_no_readahead_s",
            "paged_vertices_s",
        ] {
            assert!(r[key].as_f64().unwrap() > 0.0, "{key} in {r}");
        }
        assert_eq!(r["paged_readahead_pages"], 8);
        // Readahead turns some demand faults into hits.
        assert!(
            r["paged_readahead_page_faults"].as_u64()
                < r["paged_no_readahead_page_faults"].as_u64(),
            "{r}"
        );
    }
    // Vertex data pages in the smallest budgets.
    let last = &rows[rows.len() - 1];
    assert!(
        last["paged_vertices_vertex_zero_fills"].as_u64().unwrap() > 0,
        "{last}"
    );
    // Four configurations per ratio, all with the same result.
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 32);
    let digest = &runs[0]["report"]["digest"];
    assert!(runs.iter().all(|r| &r["report"]["digest"] == digest));
}

#[test]
fn prepare_once_then_run_from_the_prepared_grid() {
    let dir = tempfile::tempdir().unwrap();
    let prep = dir.path().join("karate-grid");
    let p = prep.to_str().unwrap();
    let o = locus(&["analytics", "prepare", &karate(), "--out", p]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("prepared 34 vertices, 78 edges"), "{out}");
    assert!(out.contains("grid.bin"), "{out}");
    for algo in ["bfs", "wcc", "pagerank", "radii"] {
        let direct = locus(&["analytics", "run", "--algo", algo, "--graph", &karate()]);
        let reused = locus(&["analytics", "run", "--algo", algo, "--prepared", p]);
        assert!(reused.status.success(), "{}", text(&reused.stderr));
        let (d, r) = (text(&direct.stdout), text(&reused.stdout));
        assert_eq!(digest(&d), digest(&r), "{algo}");
        assert!(r.contains("prepared grid read in"), "{r}");
        // Setup and compute are reported apart.
        assert!(r.contains("(setup "), "{r}");
        // Any stripe width (0: none) gives the same result.
        for ids in ["0", "3"] {
            let o = locus(&[
                "analytics",
                "run",
                "--algo",
                algo,
                "--graph",
                &karate(),
                "--stripe-ids",
                ids,
            ]);
            assert_eq!(
                digest(&text(&o.stdout)),
                digest(&d),
                "{algo} --stripe-ids {ids}"
            );
        }
    }
    // Compacted ids are kept: results come back in the input's ids.
    let sparse = dir.path().join("sparse.txt");
    std::fs::write(&sparse, "0 4294967293\n").unwrap();
    let prep2 = dir.path().join("sparse-grid");
    let o = locus(&[
        "analytics",
        "prepare",
        sparse.to_str().unwrap(),
        "--compact-ids",
        "--out",
        prep2.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let res = dir.path().join("wcc.txt");
    let o = locus(&[
        "analytics",
        "run",
        "--algo",
        "wcc",
        "--prepared",
        prep2.to_str().unwrap(),
        "--output",
        res.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let rows: Vec<String> = std::fs::read_to_string(&res)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_string)
        .collect();
    assert_eq!(rows, ["0 0", "4294967293 0"]);
    // A corrupt grid is a clear error naming the file.
    let file = prep.join("grid.bin");
    let mut b = std::fs::read(&file).unwrap();
    let n = b.len();
    b[n - 3] ^= 0xff;
    std::fs::write(&file, &b).unwrap();
    let o = locus(&["analytics", "run", "--algo", "bfs", "--prepared", p]);
    assert!(!o.status.success());
    let e = text(&o.stderr);
    assert!(e.contains("grid.bin") && e.contains("checksum"), "{e}");
    // A missing one too; and --prepared with --graph is refused.
    let o = locus(&[
        "analytics",
        "run",
        "--algo",
        "bfs",
        "--prepared",
        "/nonexistent-dir",
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("/nonexistent-dir/grid.bin"),
        "{}",
        text(&o.stderr)
    );
    let o = locus(&[
        "analytics",
        "run",
        "--algo",
        "bfs",
        "--prepared",
        p,
        "--graph",
        &karate(),
    ]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("--graph"), "{}", text(&o.stderr));
}
