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
        ("--algo", "sssp", "not one of"),
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
    let png = std::fs::read(dir.path().join("buffering.png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");
}
