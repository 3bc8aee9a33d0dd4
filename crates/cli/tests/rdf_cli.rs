//! `locus rdf` and `locus sparql` as a user meets them: generate LUBM, load
//! it, answer a LUBM query as a table and as W3C JSON, and clear errors for a
//! bad line, a bad query and an unsupported feature.

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

const Q5: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../rdf/queries/lubm/q5.rq");

#[test]
fn generate_load_and_query_lubm() {
    let dir = tempfile::tempdir().unwrap();
    let nt = dir.path().join("lubm1.nt");
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
    let first = std::fs::read(nt).unwrap();
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
    assert!(o.status.success());
    assert_eq!(std::fs::read(nt).unwrap(), first, "same seed, same file");

    let dict = dir.path().join("lubm1.dict");
    let o = locus(&[
        "rdf",
        "load",
        nt,
        "--machines",
        "3",
        "--json",
        "--save-dict",
        dict.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["triples"].as_u64().unwrap() > 100_000, "{v}");
    assert_eq!(v["machines"].as_array().unwrap().len(), 3);
    assert!(dict.exists());

    let o = locus(&["sparql", "--data", nt, "--query", Q5, "--machines", "3"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("ResearchGroup0>") && out.contains(" rows)"),
        "{out}"
    );

    let q = "SELECT ?n WHERE { <http://www.University0.edu> <http://swat.cse.lehigh.edu/onto/univ-bench.owl#name> ?n }";
    let o = locus(&["sparql", "--data", nt, "--query", q, "--json", "--explain"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["head"]["vars"][0], "n");
    assert_eq!(
        v["results"]["bindings"][0]["n"],
        serde_json::json!({"type": "literal", "value": "University0"})
    );
    assert!(text(&o.stderr).contains("home of the start constant"));

    let o = locus(&[
        "sparql",
        "--data",
        nt,
        "--query",
        "SELECT ?s WHERE { SERVICE <http://ex/s> { ?s ?p ?o } }",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("unsupported SPARQL feature: SERVICE"));
    // ASK prints true or false; CONSTRUCT prints N-Triples.
    let u = "<http://www.University0.edu>";
    let name = "<http://swat.cse.lehigh.edu/onto/univ-bench.owl#name>";
    let o = locus(&[
        "sparql",
        "--data",
        nt,
        "--query",
        &format!("ASK {{ {u} {name} ?n }}"),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "true\n");
    let q = format!("CONSTRUCT {{ {u} <http://ex/named> ?n }} WHERE {{ {u} {name} ?n }}");
    let o = locus(&["sparql", "--data", nt, "--query", &q]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stdout),
        format!("{u} <http://ex/named> \"University0\" .\n")
    );
    let o = locus(&["sparql", "--data", nt, "--query", "SELECT WHERE {"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("SPARQL syntax"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn a_bad_line_is_named_and_nothing_is_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let nt = dir.path().join("bad.nt");
    std::fs::write(
        &nt,
        "<http://ex/a> <http://ex/p> <http://ex/b> .\n# fine\n<http://ex/a> <http://ex/p> \"open .\n",
    )
    .unwrap();
    let o = locus(&["rdf", "load", nt.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(err.contains("bad.nt:3:"), "{err}");
    // N-Quads and TriG name their bad line too.
    let nq = dir.path().join("bad.nq");
    std::fs::write(
        &nq,
        "<http://ex/a> <http://ex/p> <http://ex/b> <http://ex/g> .\n<http://ex/a> <http://ex/p> <http://ex/b> \"g\" .\n",
    )
    .unwrap();
    let o = locus(&["rdf", "load", nq.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("bad.nq:2:"), "{}", text(&o.stderr));
    let trig = dir.path().join("bad.trig");
    std::fs::write(
        &trig,
        "<http://ex/g> {\n <http://ex/a> <http://ex/p> nope:b .\n}\n",
    )
    .unwrap();
    let o = locus(&["rdf", "load", trig.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("bad.trig:2:"),
        "{}",
        text(&o.stderr)
    );
    let o = locus(&["rdf", "load", "/nonexistent/x.nt"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("/nonexistent/x.nt"));
    let o = locus(&["rdf", "generate-lubm", "--universities", "0", "--out", "-"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("universities = 0"));
}

/// `locus bench sparql` end to end on LUBM-1 with two runs of two schemes:
/// the JSON has every run and a summary whose medians lie within the runs,
/// Orig's queries are mostly remote and Ideal's all local, the plots exist;
/// and a bad flag is named.
#[test]
fn bench_sparql_writes_runs_medians_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let o = locus(&[
        "bench",
        "sparql",
        "--universities",
        "1",
        "--runs",
        "2",
        "--queries",
        "300",
        "--schemes",
        "Ideal,Orig,Split+Cache",
        "--warm-s-max",
        "3",
        "--threads",
        "2",
        "--out",
        out,
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stdout = text(&o.stdout);
    assert!(stdout.contains("Split+Cache"), "{stdout}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("sparql-mix.json")).unwrap())
            .unwrap();
    let rows = json["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 6, "two runs of three schemes");
    // Interleaved: every scheme once, then again.
    let order: Vec<&str> = rows.iter().map(|r| r["scheme"].as_str().unwrap()).collect();
    assert_eq!(
        order,
        [
            "Ideal",
            "Orig",
            "Split+Cache",
            "Ideal",
            "Orig",
            "Split+Cache"
        ]
    );
    for s in json["summary"].as_array().unwrap() {
        let t = &s["throughput_qps"];
        let (lo, mid, hi) = (
            t["min"].as_f64().unwrap(),
            t["median"].as_f64().unwrap(),
            t["max"].as_f64().unwrap(),
        );
        assert!(lo > 0.0 && lo <= mid && mid <= hi, "{s}");
        let remote = s["remote_rate"]["median"].as_f64().unwrap();
        let remote_gets = s["remote_gets"]["median"].as_f64().unwrap();
        match s["scheme"].as_str().unwrap() {
            "Ideal" => assert_eq!(
                (remote, remote_gets),
                (0.0, 0.0),
                "one machine: nothing remote"
            ),
            // Hash placement over 8 machines: most reads are another machine's.
            "Orig" => assert!(remote > 0.5 && remote_gets > 0.5, "{s}"),
            _ => {}
        }
    }
    for r in rows {
        assert!(r["rows_per_query"].as_f64().unwrap() > 0.0, "{r}");
        assert_eq!(r["class_p50_us"].as_array().unwrap().len(), 6);
    }
    for f in [
        "sparql-mix.meta.json",
        "sparql-mix-throughput.png",
        "sparql-mix-remote.png",
    ] {
        assert!(dir.path().join(f).exists(), "{f}");
    }
    let o = locus(&["bench", "sparql", "--runs", "0"]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("--runs"), "{}", text(&o.stderr));
    let o = locus(&["bench", "sparql", "--schemes", "Wukong"]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("--schemes"), "{}", text(&o.stderr));
}
