//! The benchmarks that start Locus as processes: `locus bench pragh schemes
//! --fabric tcp`, `locus bench client` and `locus bench durability`, tiny, with real server processes.
//! They check what the commands produce (every row there and well-formed,
//! the files written) and that every process they started is gone after;
//! no timing is checked (timing claims live in the benchmarks' results).

use std::process::Command;
use std::time::{Duration, Instant};

/// Runs `locus ARGS`; fails the test if it fails or takes past `limit`.
fn locus(args: &[&str], limit: Duration) -> serde_json::Value {
    let mut child = Command::new(env!("CARGO_BIN_EXE_locus"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run locus");
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > limit {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!(
                "locus {args:?} took past {limit:?}:\n{}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let o = child.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "locus {args:?}: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("JSON on stdout")
}

fn alive(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}

fn num(v: &serde_json::Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number in {v}"))
}

#[test]
fn schemes_over_tcp_run_beside_the_in_process_fabric_and_leave_no_process() {
    let out = tempfile::tempdir().unwrap();
    let v = locus(
        &[
            "bench",
            "pragh",
            "schemes",
            "--fabric",
            "tcp",
            "--scale",
            "8",
            "--ops",
            "400",
            "--runs",
            "1",
            "--clients",
            "2",
            "--measure-s",
            "0.5",
            "--warm-s-max",
            "3",
            "--schemes",
            "Ideal,Orig,Split+Cache",
            "--json",
            "--out",
            out.path().to_str().unwrap(),
        ],
        Duration::from_secs(600),
    );
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    let names = ["Ideal", "Orig", "Split+Cache"];
    for fabric in ["local", "tcp"] {
        let rows = runs[0][fabric].as_array().unwrap();
        let got: Vec<&str> = rows.iter().map(|r| r["scheme"].as_str().unwrap()).collect();
        assert_eq!(got, names, "{fabric}");
        for r in rows {
            assert!(num(r, "throughput_qps") > 0.0, "{r}");
            assert!(
                num(r, "p50_us") > 0.0 && num(r, "p99_us") >= num(r, "p50_us"),
                "{r}"
            );
            let remote = num(r, "remote_rate");
            assert!((0.0..=1.0).contains(&remote), "{r}");
            assert!(num(r, "vs_orig") > 0.0 && num(r, "vs_ideal") > 0.0, "{r}");
        }
        // One machine: nothing is remote. Eight, hash placement: most is.
        assert_eq!(num(&rows[0], "remote_rate"), 0.0, "{fabric} Ideal");
        assert!(num(&rows[1], "remote_rate") > 0.3, "{fabric} Orig");
        assert_eq!(num(&rows[1], "vs_orig"), 1.0);
        assert_eq!(num(&rows[0], "vs_ideal"), 1.0);
    }
    let tcp = runs[0]["tcp"].as_array().unwrap();
    assert_eq!(num(&tcp[0], "machines"), 1.0);
    assert_eq!(num(&tcp[1], "machines"), 8.0);
    // Split+Cache migrates: a coordinator process beside its eight servers.
    assert_eq!(tcp[2]["coordinator"], true);
    assert_eq!(tcp[2]["pids"].as_array().unwrap().len(), 9);
    assert_eq!(tcp[1]["coordinator"], false);
    let mut pids = Vec::new();
    for r in tcp {
        assert!(
            num(r, "queries") > 0.0 && num(r, "server_p50_us") > 0.0,
            "{r}"
        );
        assert_eq!(
            r["load"]["edges_added"], r["load"]["stored_edges"],
            "the whole graph was loaded over the client: {r}"
        );
        let p = r["pids"].as_array().unwrap();
        assert!(p.len() >= num(r, "machines") as usize, "{r}");
        pids.extend(p.iter().map(|x| x.as_u64().unwrap()));
    }
    let left: Vec<u64> = pids.iter().copied().filter(|&p| alive(p)).collect();
    assert!(left.is_empty(), "processes left running: {left:?}");
    let summary = v["summary"].as_array().unwrap();
    assert_eq!(summary.len(), 3);
    for s in summary {
        for fabric in ["local", "tcp"] {
            let t = &s[fabric]["throughput_qps"];
            assert!(num(t, "min") <= num(t, "median") && num(t, "median") <= num(t, "max"));
        }
    }
    for f in [
        "pragh-schemes-tcp.json",
        "pragh-schemes-tcp.meta.json",
        "pragh-schemes-tcp.png",
    ] {
        assert!(out.path().join(f).is_file(), "{f} not written");
    }
}

#[test]
fn the_client_bench_reports_medians_of_its_runs_and_leaves_no_process() {
    let out = tempfile::tempdir().unwrap();
    let v = locus(
        &[
            "bench",
            "client",
            "--scale",
            "10",
            "--servers",
            "1,3",
            "--setups",
            "orig,migrated",
            "--runs",
            "2",
            "--samples",
            "20",
            "--json",
            "--out",
            out.path().to_str().unwrap(),
        ],
        Duration::from_secs(300),
    );
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 8, "2 runs x 2 setups x 2 cluster sizes");
    for r in runs {
        assert!(num(r, "neighbors_p50_us") > 0.0, "{r}");
        assert!(
            num(r, "khop_p50_us") > 0.0 && num(r, "khop_distinct_mean") > 0.0,
            "{r}"
        );
        assert_eq!(r["load"]["edges_added"], r["load"]["stored_edges"], "{r}");
        assert!(num(&r["load"], "stored_edges_per_s") > 0.0, "{r}");
    }
    for one in runs.iter().filter(|r| r["servers"] == 1) {
        assert_eq!(num(one, "khop_remote_rate"), 0.0, "one server: all local");
    }
    for r in runs {
        let migrated = r["setup"] == "migrated";
        assert_eq!(num(r, "warm_s") > 0.0, migrated, "{r}");
        assert!(migrated || r["migrations"] == 0, "{r}");
    }
    let summary = v["summary"].as_array().unwrap();
    assert_eq!(summary.len(), 4);
    for s in summary {
        let k = &s["khop_rtt_us"];
        assert!(num(k, "min") <= num(k, "median") && num(k, "median") <= num(k, "max"));
        let smallest = s["servers"] == 1;
        assert_eq!(
            num(&s["khop_vs_smallest"], "median") == 1.0,
            smallest,
            "{s}"
        );
    }
    assert!(out.path().join("client.json").is_file());
    let pids: Vec<u64> = runs
        .iter()
        .flat_map(|r| r["pids"].as_array().unwrap().iter())
        .map(|p| p.as_u64().unwrap())
        .collect();
    assert_eq!(
        pids.len(),
        2 * ((1 + 3) + (1 + 3 + 2)),
        "a process per server per run, and the migrated setup's coordinator"
    );
    let left: Vec<u64> = pids.into_iter().filter(|&p| alive(p)).collect();
    assert!(left.is_empty(), "processes left running: {left:?}");
}

#[test]
fn the_durability_bench_measures_every_mode_and_leaves_no_process() {
    let out = tempfile::tempdir().unwrap();
    let v = locus(
        &[
            "bench",
            "durability",
            "--servers",
            "2",
            "--clients",
            "2",
            "--runs",
            "1",
            "--duration-s",
            "1",
            "--json",
            "--out",
            out.path().to_str().unwrap(),
        ],
        Duration::from_secs(300),
    );
    let summary = v["summary"].as_array().unwrap();
    let modes: Vec<&str> = summary
        .iter()
        .map(|s| s["mode"].as_str().unwrap())
        .collect();
    assert_eq!(modes, ["off", "interval 10 ms", "always"]);
    for s in summary {
        assert!(num(&s["updates_per_s"], "median") > 0.0, "{s}");
        assert!(
            num(&s["p99_us"], "median") >= num(&s["p50_us"], "median"),
            "{s}"
        );
    }
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    for r in runs {
        let logged = r["mode"] != "off";
        // Without a log nothing is grouped or synced; with one, every group holds a record.
        assert_eq!(num(r, "records_per_group") >= 1.0, logged, "{r}");
        if r["mode"] == "always" {
            assert!(num(r, "syncs") > 0.0, "{r}");
        }
        for pid in r["pids"].as_array().unwrap() {
            assert!(!alive(pid.as_u64().unwrap()), "server {pid} still running");
        }
    }
    for f in ["durability.json", "durability.meta.json"] {
        assert!(out.path().join(f).exists(), "{f}");
    }
}
