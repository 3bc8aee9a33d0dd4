//! RDF on a running cluster of `locus server` processes: `locus rdf load
//! --cluster` stores LUBM-1 and its catalog, `locus sparql --cluster`
//! answers LUBM Q1-Q7 with exactly the rows the embedded store gives, the
//! coordinator migrates the values the queries read remotely while answers
//! stay the same, and a second load or a cluster without a catalog is a
//! clear error. A TriG dataset's named graphs answer on a cluster as on
//! the embedded store.

mod common;

use common::{locus, Cluster};

const QUERIES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../rdf/queries/lubm");

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The rows of a W3C SPARQL JSON document, each a sorted "var=value" line, sorted.
fn rows(json: &str) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
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

fn query(args: &[&str]) -> Vec<String> {
    let o = locus(args);
    assert!(o.status.success(), "{args:?}: {}", text(&o.stderr));
    rows(&text(&o.stdout))
}

#[test]
fn lubm_on_a_cluster_answers_as_the_embedded_store_does_while_values_migrate() {
    let c = Cluster::up_with(&["--interval-ms", "1000"]);
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

    // Before any load: no catalog, a clear error naming what to do.
    let o = locus(&[
        "sparql",
        "--cluster",
        cluster,
        "--query",
        "SELECT * WHERE { ?s ?p ?o }",
    ]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("rdf load"), "{}", text(&o.stderr));

    let o = locus(&["rdf", "load", nt, "--cluster", cluster, "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let summary: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    assert!(summary["triples"].as_u64().unwrap() > 100_000, "{summary}");
    assert!(c.dir.path().join("rdf/catalog.json").exists());
    assert!(c.dir.path().join("rdf/dict").exists());

    // A second dataset into the same cluster is refused before anything is sent.
    let o = locus(&["rdf", "load", nt, "--cluster", cluster]);
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("already holds"),
        "{}",
        text(&o.stderr)
    );

    let q = |n: u32| format!("{QUERIES}/q{n}.rq");
    let embedded: Vec<Vec<String>> = (1..=7)
        .map(|n| {
            query(&[
                "sparql",
                "--data",
                nt,
                "--machines",
                "3",
                "--query",
                &q(n),
                "--json",
            ])
        })
        .collect();
    assert!(embedded.iter().filter(|r| !r.is_empty()).count() >= 5);
    for n in 1..=7u32 {
        let got = query(&["sparql", "--cluster", cluster, "--query", &q(n), "--json"]);
        assert_eq!(got, embedded[n as usize - 1], "Q{n} on the cluster");
    }
    // The algebra around exploration reads through the same sources:
    // OPTIONAL and GROUP BY, a property path, a variable predicate.
    let ub = "PREFIX ub: <http://swat.cse.lehigh.edu/onto/univ-bench.owl#> ";
    for text in [
        format!("{ub}SELECT ?d (COUNT(?s) AS ?n) WHERE {{ ?s ub:memberOf ?d OPTIONAL {{ ?s ub:emailAddress ?e }} }} GROUP BY ?d"),
        format!("{ub}SELECT ?x WHERE {{ ?x ub:subOrganizationOf+ <http://www.University0.edu> }}"),
        format!("{ub}SELECT ?p ?o WHERE {{ <http://www.Department0.University0.edu> ?p ?o }}"),
    ] {
        let want = query(&["sparql", "--data", nt, "--machines", "3", "--query", &text, "--json"]);
        assert!(!want.is_empty(), "{text}");
        let got = query(&["sparql", "--cluster", cluster, "--query", &text, "--json"]);
        assert_eq!(got, want, "{text} on the cluster");
    }

    // Light queries, again and again, from their start servers: the
    // coordinator moves the values they read remotely to those servers. (Q4
    // and Q5 read a few dozen keys each, so each key is read hundreds of
    // times per interval: far past the coordinator's significance rule.)
    let light = [q(4), q(5)];
    let mut args = vec!["sparql", "--cluster", cluster, "--json"];
    for _ in 0..40 {
        for l in &light {
            args.push("--query");
            args.push(l);
        }
    }
    let started = std::time::Instant::now();
    let moved = loop {
        let o = locus(&args);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let o = locus(&["cluster", "status", "--cluster", cluster, "--json"]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let s: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
        let moved = s["coordinator"]["migrated"].as_u64().unwrap_or(0);
        if moved > 0 {
            break moved;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "no migration after two minutes of light queries: {s}"
        );
    };
    assert!(moved > 0);
    for n in 1..=7u32 {
        let got = query(&["sparql", "--cluster", cluster, "--query", &q(n), "--json"]);
        assert_eq!(
            got,
            embedded[n as usize - 1],
            "Q{n} after {moved} migrations"
        );
    }
}

/// Named graphs on a cluster: a TriG load, then GRAPH ?g and FROM queries
/// answer with the rows the embedded store gives (and the hand-worked ones).
#[test]
fn named_graphs_on_a_cluster_answer_as_the_embedded_store_does() {
    let c = Cluster::up_with(&["--no-coordinator"]);
    let file = c.file();
    let cluster = file.to_str().unwrap();
    let trig = c.dir.path().join("data.trig");
    std::fs::write(
        &trig,
        "@prefix ex: <http://ex/> .\n\
         ex:a ex:knows ex:b .\n\
         ex:g1 { ex:a ex:knows ex:c . ex:c a ex:Person . }\n\
         ex:g2 { ex:b ex:knows ex:d . ex:a ex:knows ex:b . }\n",
    )
    .unwrap();
    let trig = trig.to_str().unwrap();
    let o = locus(&["rdf", "load", trig, "--cluster", cluster]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let json = std::fs::read_to_string(c.dir.path().join("rdf/catalog.json")).unwrap();
    assert!(json.contains("\"format\": 5"), "{json}");
    let p = "PREFIX ex: <http://ex/> ";
    for (q, want) in [
        (
            "SELECT ?g ?s ?o WHERE { GRAPH ?g { ?s ex:knows ?o } }",
            3usize,
        ),
        ("SELECT ?s ?o WHERE { ?s ex:knows ?o }", 1),
        (
            "SELECT ?z FROM ex:g1 FROM ex:g2 WHERE { ex:a ex:knows ?y . ?y ex:knows ?z }",
            1,
        ),
        ("SELECT ?x WHERE { GRAPH ex:g1 { ?x a ex:Person } }", 1),
    ] {
        let q = format!("{p}{q}");
        let embedded = query(&["sparql", "--data", trig, "--query", &q, "--json"]);
        let got = query(&["sparql", "--cluster", cluster, "--query", &q, "--json"]);
        assert_eq!(got, embedded, "{q}");
        assert_eq!(got.len(), want, "{q}: {got:?}");
    }
}

/// A cluster too small for the data: the load stops on the servers' FULL
/// reply with how far it got, writes no catalog, and queries say to load first.
#[test]
fn a_load_that_does_not_fit_says_how_far_it_got_and_leaves_no_catalog() {
    let c = Cluster::up_with(&["--no-coordinator", "--value-region-mb", "1"]);
    let file = c.file();
    let cluster = file.to_str().unwrap();
    let nt = c.dir.path().join("lubm1.nt");
    let nt = nt.to_str().unwrap();
    let o = locus(&["rdf", "generate-lubm", "--universities", "1", "--out", nt]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = locus(&["rdf", "load", nt, "--cluster", cluster]);
    assert!(!o.status.success());
    let e = text(&o.stderr);
    assert!(
        e.contains("the load stopped after") && e.contains("again"),
        "{e}"
    );
    assert!(!c.dir.path().join("rdf/catalog.json").exists());
    let o = locus(&[
        "sparql",
        "--cluster",
        cluster,
        "--query",
        &format!("{QUERIES}/q4.rq"),
    ]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("rdf load"), "{}", text(&o.stderr));
}
