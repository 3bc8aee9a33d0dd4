//! An RDF dataset on an elastic cluster of real processes (issue 59,
//! requirement 6): LUBM-1 loaded with `locus rdf load --cluster` on three
//! servers answers LUBM Q1-Q7 and the algebra around them with the rows the
//! embedded store gives after `cluster remove-server --id 0` (its slots, index
//! parts included, go to the others) and then after `cluster add-server
//! --wait` (a new server takes a third of the slots): the layout packs by
//! slot, so the catalog names no machine count and every key moved with its
//! slot.
//!
//! The first test also loads a graph into the same cluster: the dataset's
//! keys start past the graph ids (the catalog's base), so each keeps its
//! answers; a graph reaching the base is refused before anything is sent.
//!
//! The second test queries before every change too: a server that read a
//! key while its slot was on a server that then leaves keeps a location-cache
//! entry naming the gone server; a read through it that finds the server
//! gone asks the key's home instead (found by this test, which failed with
//! `PEER_UNAVAILABLE` about one run in three before).

mod common;

use common::{locus, Cluster};

const QUERIES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../rdf/queries/lubm");

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn json(args: &[&str]) -> serde_json::Value {
    let o = locus(args);
    assert!(
        o.status.success(),
        "{args:?}: {}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// The rows of a W3C SPARQL JSON document, each a sorted "var=value" line, sorted.
fn rows(v: &serde_json::Value) -> Vec<String> {
    let mut out: Vec<String> = v["results"]["bindings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            let mut kv: Vec<String> = b
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| format!("{k}={}", v["value"]))
                .collect();
            kv.sort();
            kv.join(" ")
        })
        .collect();
    out.sort();
    out
}

/// Every query's rows on the cluster.
fn answers(cluster: &str, queries: &[String]) -> Vec<Vec<String>> {
    queries
        .iter()
        .map(|q| {
            rows(&json(&[
                "sparql",
                "--cluster",
                cluster,
                "--query",
                q,
                "--json",
            ]))
        })
        .collect()
}

/// LUBM-1 on a new 3-server cluster, its queries, and their rows from the
/// embedded store (the reference: no cluster read before the moves).
fn loaded() -> (Cluster, Vec<String>, Vec<Vec<String>>) {
    let c = Cluster::up();
    let file = c.file();
    let cluster = file.to_str().unwrap();
    let nt = c.dir.path().join("lubm1.nt");
    let nt = nt.to_str().unwrap();
    let o = locus(&[
        "rdf",
        "generate-lubm",
        "--universities",
        "1",
        "--seed",
        "3",
        "--out",
        nt,
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let loaded = json(&["rdf", "load", nt, "--cluster", cluster, "--json"]);
    assert!(loaded["triples"].as_u64().unwrap() > 100_000, "{loaded}");
    let catalog = std::fs::read_to_string(c.dir.path().join("rdf/catalog.json")).unwrap();
    assert!(
        catalog.contains("\"slots\": 4096") && !catalog.contains("machines"),
        "the catalog names the slot count, no machine count"
    );
    let ub = "PREFIX ub: <http://swat.cse.lehigh.edu/onto/univ-bench.owl#> ";
    let mut queries: Vec<String> = (1..=7).map(|n| format!("{QUERIES}/q{n}.rq")).collect();
    queries.extend([
        format!("{ub}SELECT ?d (COUNT(?s) AS ?n) WHERE {{ ?s ub:memberOf ?d }} GROUP BY ?d"),
        format!("{ub}SELECT ?x WHERE {{ ?x ub:subOrganizationOf+ <http://www.University0.edu> }}"),
        format!("{ub}SELECT ?p ?o WHERE {{ <http://www.Department0.University0.edu> ?p ?o }}"),
    ]);
    let want: Vec<Vec<String>> = queries
        .iter()
        .map(|q| {
            rows(&json(&[
                "sparql",
                "--data",
                nt,
                "--machines",
                "3",
                "--query",
                q,
                "--json",
            ]))
        })
        .collect();
    assert!(want.iter().filter(|r| !r.is_empty()).count() >= 8);
    (c, queries, want)
}

/// A graph of 400 vertices as `src dst` lines, and its undirected lists.
fn graph_file(path: &std::path::Path) -> Vec<std::collections::BTreeSet<u32>> {
    let mut lists = vec![std::collections::BTreeSet::new(); 400];
    let mut text = String::new();
    let mut x: u64 = 59;
    for _ in 0..2000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let (a, b) = ((x % 400) as u32, ((x >> 20) % 400) as u32);
        if a != b {
            text.push_str(&format!("{a} {b}\n"));
            lists[a as usize].insert(b);
            lists[b as usize].insert(a);
        }
    }
    std::fs::write(path, text).unwrap();
    lists
}

fn check_graph(c: &Cluster, lists: &[std::collections::BTreeSet<u32>], when: &str) {
    let client = c.client();
    for (v, want) in lists.iter().enumerate() {
        let got: std::collections::BTreeSet<u32> = client
            .neighbors(v as u32, 0)
            .unwrap_or_else(|e| panic!("vertex {v} {when}: {e}"))
            .into_iter()
            .collect();
        assert_eq!(&got, want, "vertex {v}'s list {when}");
    }
}

fn remove_server_0(d: &str) {
    let gone = json(&[
        "cluster",
        "remove-server",
        "--dir",
        d,
        "--id",
        "0",
        "--batch-slots",
        "256",
        "--json",
    ]);
    assert_eq!(gone["stopped"], true, "{gone}");
}

fn add_server(d: &str) -> serde_json::Value {
    json(&[
        "cluster",
        "add-server",
        "--dir",
        d,
        "--wait",
        "--batch-slots",
        "256",
        "--lifetime-s",
        "300",
        "--json",
    ])
}

fn check(cluster: &str, queries: &[String], want: &[Vec<String>], when: &str) {
    let got = answers(cluster, queries);
    for ((q, w), g) in queries.iter().zip(want).zip(&got) {
        assert_eq!(g, w, "{q} {when}");
    }
}

#[test]
fn lubm_answers_the_same_after_a_server_leaves_and_another_joins() {
    let (c, queries, want) = loaded();
    let d = c.dir.path().to_str().unwrap().to_string();
    let file = c.file();
    let cluster = file.to_str().unwrap();

    // A graph beside the dataset; one reaching the dataset's keys is refused.
    let g = c.dir.path().join("g.txt");
    let lists = graph_file(&g);
    json(&["load", "--cluster", cluster, g.to_str().unwrap(), "--json"]);
    let far = c.dir.path().join("far.txt");
    std::fs::write(&far, "1 2\n3 2147483648\n").unwrap();
    let o = locus(&["load", "--cluster", cluster, far.to_str().unwrap()]);
    let e = text(&o.stderr);
    assert!(
        !o.status.success() && e.contains("2147483648") && e.contains("RDF dataset"),
        "{e}"
    );
    check_graph(&c, &lists, "as loaded");
    check(cluster, &queries, &want, "beside the graph");

    remove_server_0(&d);
    check(cluster, &queries, &want, "after server 0 left");
    check_graph(&c, &lists, "after server 0 left");
    // A query from a constant starts on its slot's owner now, never on the
    // server that left.
    let o = locus(&[
        "sparql",
        "--cluster",
        cluster,
        "--query",
        &format!("{QUERIES}/q5.rq"),
        "--explain",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let explain = text(&o.stderr);
    assert!(
        explain.contains("started on server") && !explain.contains("started on server 0 "),
        "{explain}"
    );

    let added = add_server(&d);
    assert_eq!(added["id"], 3, "{added}");
    assert_eq!(added["members"], serde_json::json!([1, 2, 3]), "{added}");
    check(cluster, &queries, &want, "after server 3 joined");
    check_graph(&c, &lists, "after server 3 joined");
}

#[test]

fn queries_before_a_server_leaves_do_not_break_the_queries_after() {
    let (c, queries, want) = loaded();
    let d = c.dir.path().to_str().unwrap().to_string();
    let file = c.file();
    let cluster = file.to_str().unwrap();
    check(cluster, &queries, &want, "as loaded");
    add_server(&d);
    check(cluster, &queries, &want, "after server 3 joined");
    remove_server_0(&d);
    check(cluster, &queries, &want, "after server 0 left");
}
