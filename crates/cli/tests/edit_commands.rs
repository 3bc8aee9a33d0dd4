//! The commands that change a running cluster's graph, as a user runs them:
//! `locus load --cluster` counts each vertex it changed once however many
//! batches carried it; `locus edge insert|delete` and `locus vertex delete`
//! (one direction or both); a deleted vertex stays deleted across a
//! `kill -9` of its home and the restart (the write-ahead log records the
//! removal); bad input gets a clear error.

mod common;

use std::collections::HashSet;

use common::{locus, Cluster};

fn stdout(o: &std::process::Output) -> String {
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn json(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_str(&stdout(o)).expect("JSON on stdout")
}

#[test]
fn load_counts_vertices_once_and_edits_survive_a_kill_9_of_the_home() {
    let c = Cluster::up_with(&["--no-coordinator"]);
    let file = c.file();
    let f = file.to_str().unwrap();
    let graph = c.dir.path().join("g.txt");
    let g = graph.to_str().unwrap();
    stdout(&locus(&["generate", "--scale", "14", "--out", g]));
    // Every vertex with an edge, in either direction (the load stores both).
    let text = std::fs::read_to_string(&graph).unwrap();
    let mut vertices = HashSet::new();
    let mut edges = 0u64;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let mut it = line.split_whitespace().map(|x| x.parse::<u32>().unwrap());
        let (u, v) = (it.next().unwrap(), it.next().unwrap());
        if u != v {
            vertices.insert(u);
            vertices.insert(v);
        }
        edges += 1;
    }
    let r = json(&locus(&["load", "--cluster", f, g, "--json"]));
    assert!(
        r["batches"].as_u64().unwrap() > 3,
        "the graph spans several batches per server: {r}"
    );
    assert_eq!(
        r["vertices_changed"].as_u64().unwrap(),
        vertices.len() as u64,
        "{edges} edges: {r}"
    );
    // Again: nothing changes.
    let r = json(&locus(&["load", "--cluster", f, g, "--json"]));
    assert_eq!(r["vertices_changed"], 0, "{r}");
    assert_eq!(r["edges_added"], 0, "{r}");

    // Edges, one direction and both.
    let (a, b) = (1_000_000u32, 1_000_001u32);
    let (sa, sb) = (a.to_string(), b.to_string());
    let out = stdout(&locus(&[
        "edge",
        "insert",
        "--cluster",
        f,
        &sa,
        &sb,
        "--both",
    ]));
    assert!(out.contains(&format!("edge {a} -> {b} inserted")), "{out}");
    assert!(out.contains(&format!("edge {b} -> {a} inserted")), "{out}");
    let r = json(&locus(&[
        "edge",
        "insert",
        "--cluster",
        f,
        &sa,
        &sb,
        "--json",
    ]));
    assert_eq!(r["edges"][0]["changed"], false, "{r}");
    let client = c.client();
    assert_eq!(client.neighbors(a, 0).unwrap(), vec![b]);
    assert_eq!(client.neighbors(b, 0).unwrap(), vec![a]);
    let out = stdout(&locus(&["edge", "delete", "--cluster", f, &sb, &sa]));
    assert!(out.contains(&format!("edge {b} -> {a} deleted")), "{out}");
    assert!(client.neighbors(b, 0).unwrap().is_empty());

    // A vertex of the loaded graph, with both directions.
    let v = *vertices.iter().min().unwrap();
    let before = client.neighbors(v, 0).unwrap();
    assert!(!before.is_empty());
    let sv = v.to_string();
    let r = json(&locus(&[
        "vertex",
        "delete",
        "--cluster",
        f,
        &sv,
        "--both",
        "--json",
    ]));
    assert_eq!(r["found"], true, "{r}");
    assert_eq!(r["neighbors"].as_array().unwrap().len(), before.len());
    assert_eq!(r["reverse_edges_deleted"], before.len(), "{r}");
    for &u in &before {
        if u != v {
            assert!(
                !client.neighbors(u, 0).unwrap().contains(&v),
                "{u} -> {v} is left"
            );
        }
    }
    let out = stdout(&locus(&["vertex", "delete", "--cluster", f, &sv]));
    assert!(out.contains("has no entry: nothing deleted"), "{out}");

    // The removal is durable: kill -9 its home, restart, still gone.
    let home = client.home(v);
    drop(client);
    let pid = c.pid(home);
    // SAFETY: kill(2) on a server process of this test's own cluster.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    let t0 = std::time::Instant::now();
    // SAFETY: signal 0 only checks that the process exists.
    while unsafe { libc::kill(pid as i32, 0) } == 0 {
        assert!(t0.elapsed().as_secs() < 30, "pid {pid} did not die");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    c.restart_victim(home, pid);
    let client = c.client();
    let e = client.neighbors(v, 0).unwrap_err();
    assert_eq!(
        e.code(),
        Some(locus_client::proto::ErrorCode::UnknownVertex),
        "{e}"
    );
    assert_eq!(client.neighbors(a, 0).unwrap(), vec![b]);

    // Bad input: a vertex that is not a number, a missing cluster file.
    let o = locus(&["vertex", "delete", "--cluster", f, "seven"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("invalid value 'seven'"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = locus(&[
        "edge",
        "insert",
        "--cluster",
        "/nonexistent/c.toml",
        "1",
        "2",
    ]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("/nonexistent/c.toml"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
