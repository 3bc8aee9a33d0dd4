//! Datasets (SPARQL 1.1, 13): a default graph and named graphs loaded from
//! TriG and from N-Quads into the real store (embedded, 1 and 3 machines),
//! queried with GRAPH <g>, GRAPH ?g, FROM and FROM NAMED. Every expectation
//! is worked out by hand from `TRIG` below; both loads must give it on
//! every machine count. The default graph must answer as if the named
//! graphs were not there.

mod common;

use std::collections::BTreeMap;

use common::{stores_of, text, want};
use locus_fabric::local::LocalFabric;
use locus_rdf::sparql::protocol::{handle, Limits, Request, StoreService};
use locus_rdf::sparql::Engine;
use locus_rdf::{Catalog, Dataset, RdfError, RdfStore};

const P: &str = "PREFIX ex: <http://ex/> ";

/// Default graph: a knows b, a is a Person. g1 and g2 share `a knows b`.
const TRIG: &str = r#"
@prefix ex: <http://ex/> .
ex:a ex:knows ex:b .
ex:a a ex:Person .
ex:g1 { ex:a ex:knows ex:c . ex:c a ex:Person . ex:c ex:name "C" . ex:a ex:knows ex:b . }
ex:g2 { ex:b ex:knows ex:d . ex:d a ex:Robot . ex:a ex:knows ex:b . ex:c ex:age 3 . }
"#;

/// The same dataset as N-Quads.
const NQUADS: &str = r#"<http://ex/a> <http://ex/knows> <http://ex/b> .
<http://ex/a> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://ex/Person> .
<http://ex/a> <http://ex/knows> <http://ex/c> <http://ex/g1> .
<http://ex/c> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://ex/Person> <http://ex/g1> .
<http://ex/c> <http://ex/name> "C" <http://ex/g1> .
<http://ex/a> <http://ex/knows> <http://ex/b> <http://ex/g1> .
<http://ex/b> <http://ex/knows> <http://ex/d> <http://ex/g2> .
<http://ex/d> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://ex/Robot> <http://ex/g2> .
<http://ex/a> <http://ex/knows> <http://ex/b> <http://ex/g2> .
<http://ex/c> <http://ex/age> "3"^^<http://www.w3.org/2001/XMLSchema#integer> <http://ex/g2> .
"#;

fn datasets() -> Vec<Dataset> {
    vec![
        Dataset::parse_trig(TRIG.as_bytes(), "data.trig", &()).unwrap(),
        Dataset::parse_nquads(NQUADS.as_bytes(), "data.nq", &()).unwrap(),
    ]
}

fn stores() -> Vec<RdfStore<LocalFabric>> {
    datasets().iter().flat_map(stores_of).collect()
}

/// Sorted rows of `q`, the same from both loads on every machine count.
fn rows(q: &str) -> Vec<String> {
    let q = format!("{P}{q}");
    let mut first: Option<Vec<String>> = None;
    for rdf in stores() {
        let mut e = Engine::new(&rdf).unwrap();
        let (a, _) = e.answer(&q).unwrap_or_else(|err| panic!("{q}: {err}"));
        let got = text(a, false);
        match &first {
            None => first = Some(got),
            Some(f) => assert_eq!(f, &got, "loads or machine counts disagree on {q}"),
        }
    }
    first.unwrap()
}

#[test]
fn trig_and_nquads_load_the_same_dataset() {
    let [t, n] = <[Dataset; 2]>::try_from(datasets()).unwrap();
    assert_eq!(t.triples.len(), 10);
    assert_eq!(t.dict.graphs().len(), 2);
    let decode = |d: &Dataset| {
        let mut v: Vec<String> = d
            .triples
            .iter()
            .map(|&[s, p, o]| {
                let (_, pid) = d.dict.pt(p).unwrap();
                let g = d
                    .dict
                    .pt_graph(p)
                    .map(|g| d.dict.term(g).unwrap().to_string());
                format!(
                    "{} {} {} {:?}",
                    d.dict.term(s).unwrap(),
                    d.dict.term(pid).unwrap(),
                    d.dict.term(o).unwrap(),
                    g
                )
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(decode(&t), decode(&n));
}

#[test]
fn the_default_graph_answers_as_without_named_graphs() {
    assert_eq!(
        rows("SELECT ?s ?p ?o WHERE { ?s ?p ?o }"),
        want(&[
            "s=<http://ex/a> p=<http://ex/knows> o=<http://ex/b>",
            "s=<http://ex/a> p=<http://www.w3.org/1999/02/22-rdf-syntax-ns#type> o=<http://ex/Person>",
        ])
    );
    assert_eq!(
        rows("SELECT ?o WHERE { ex:a ex:knows ?o }"),
        want(&["o=<http://ex/b>"])
    );
    assert_eq!(
        rows("SELECT ?x WHERE { ?x a ex:Person }"),
        want(&["x=<http://ex/a>"])
    );
    assert_eq!(rows("SELECT ?x WHERE { ?x ex:name ?n }"), want(&[]));
    assert_eq!(
        rows("SELECT ?z WHERE { ex:a ex:knows+ ?z }"),
        want(&["z=<http://ex/b>"])
    );
    assert_eq!(rows("SELECT ?p ?o WHERE { ex:c ?p ?o }"), want(&[]));
    assert_eq!(rows("ASK { ex:b ex:knows ex:d }"), want(&["false"]));
}

#[test]
fn graph_iri_reads_that_graph_only() {
    assert_eq!(
        rows("SELECT ?s ?o WHERE { GRAPH ex:g1 { ?s ex:knows ?o } }"),
        want(&[
            "s=<http://ex/a> o=<http://ex/b>",
            "s=<http://ex/a> o=<http://ex/c>"
        ])
    );
    assert_eq!(
        rows("SELECT ?x WHERE { GRAPH ex:g1 { ?x a ex:Person } }"),
        want(&["x=<http://ex/c>"])
    );
    assert_eq!(
        rows("SELECT ?x WHERE { GRAPH ex:g2 { ?x a ?c } }"),
        want(&["x=<http://ex/d>"])
    );
    assert_eq!(
        rows("SELECT ?p ?o WHERE { GRAPH ex:g2 { ex:c ?p ?o } }"),
        want(&["p=<http://ex/age> o=\"3\"^^<http://www.w3.org/2001/XMLSchema#integer>"])
    );
    assert_eq!(
        rows("SELECT ?z WHERE { GRAPH ex:g1 { ex:a ex:knows+ ?z } }"),
        want(&["z=<http://ex/b>", "z=<http://ex/c>"])
    );
    // A graph the store lacks, and an IRI that is a term but no graph.
    assert_eq!(
        rows("SELECT * WHERE { GRAPH ex:none { ?s ?p ?o } }"),
        want(&[])
    );
    assert_eq!(
        rows("SELECT * WHERE { GRAPH ex:a { ?s ?p ?o } }"),
        want(&[])
    );
    // The default graph around a GRAPH block: a's friends there, then g2's.
    assert_eq!(
        rows("SELECT ?o ?z WHERE { ex:a ex:knows ?o GRAPH ex:g2 { ?o ex:knows ?z } }"),
        want(&["o=<http://ex/b> z=<http://ex/d>"])
    );
}

#[test]
fn graph_variable_runs_once_per_named_graph() {
    assert_eq!(
        rows("SELECT ?g WHERE { GRAPH ?g { ex:a ex:knows ex:b } }"),
        want(&["g=<http://ex/g1>", "g=<http://ex/g2>"])
    );
    assert_eq!(
        rows("SELECT ?g ?s ?o WHERE { GRAPH ?g { ?s ex:knows ?o } }"),
        want(&[
            "g=<http://ex/g1> s=<http://ex/a> o=<http://ex/b>",
            "g=<http://ex/g1> s=<http://ex/a> o=<http://ex/c>",
            "g=<http://ex/g2> s=<http://ex/a> o=<http://ex/b>",
            "g=<http://ex/g2> s=<http://ex/b> o=<http://ex/d>",
        ])
    );
    assert_eq!(
        rows("SELECT ?g ?x ?c WHERE { GRAPH ?g { ?x a ?c } }"),
        want(&[
            "g=<http://ex/g1> x=<http://ex/c> c=<http://ex/Person>",
            "g=<http://ex/g2> x=<http://ex/d> c=<http://ex/Robot>",
        ])
    );
    // ?g bound before the block: that graph only.
    assert_eq!(
        rows("SELECT ?s WHERE { VALUES ?g { ex:g2 } GRAPH ?g { ?s ex:knows ex:d } }"),
        want(&["s=<http://ex/b>"])
    );
    assert_eq!(
        rows("SELECT (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } }"),
        want(&["n=\"8\"^^<http://www.w3.org/2001/XMLSchema#integer>"])
    );
    assert_eq!(
        rows("SELECT DISTINCT ?g WHERE { GRAPH ?g { } }"),
        want(&["g=<http://ex/g1>", "g=<http://ex/g2>"])
    );
}

#[test]
fn from_merges_graphs_into_the_default_graph() {
    // a knows b is in both graphs: once in the merge.
    assert_eq!(
        rows("SELECT ?s ?o FROM ex:g1 FROM ex:g2 WHERE { ?s ex:knows ?o }"),
        want(&[
            "s=<http://ex/a> o=<http://ex/b>",
            "s=<http://ex/a> o=<http://ex/c>",
            "s=<http://ex/b> o=<http://ex/d>",
        ])
    );
    assert_eq!(
        rows("SELECT (COUNT(*) AS ?n) FROM ex:g1 FROM ex:g2 WHERE { ?s ?p ?o }"),
        want(&["n=\"7\"^^<http://www.w3.org/2001/XMLSchema#integer>"])
    );
    // A join across the graphs of the merge.
    assert_eq!(
        rows("SELECT ?z FROM ex:g1 FROM ex:g2 WHERE { ex:a ex:knows ?y . ?y ex:knows ?z }"),
        want(&["z=<http://ex/d>"])
    );
    assert_eq!(
        rows("SELECT ?x ?c FROM ex:g1 FROM ex:g2 WHERE { ?x a ?c }"),
        want(&[
            "x=<http://ex/c> c=<http://ex/Person>",
            "x=<http://ex/d> c=<http://ex/Robot>"
        ])
    );
    assert_eq!(
        rows("SELECT ?x FROM ex:g1 FROM ex:g2 WHERE { ?x a ex:Robot }"),
        want(&["x=<http://ex/d>"])
    );
    assert_eq!(
        rows("SELECT ?z FROM ex:g1 FROM ex:g2 WHERE { ex:a ex:knows+ ?z }"),
        want(&["z=<http://ex/b>", "z=<http://ex/c>", "z=<http://ex/d>"])
    );
    assert_eq!(
        rows("SELECT ?p FROM ex:g1 FROM ex:g2 WHERE { ex:c ?p ?o }"),
        want(&[
            "p=<http://ex/age>",
            "p=<http://ex/name>",
            "p=<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
        ])
    );
    // One graph: the store's default graph is not part of it.
    assert_eq!(
        rows("SELECT ?x FROM ex:g2 WHERE { ?x a ex:Person }"),
        want(&[])
    );
    // FROM alone leaves no named graphs.
    assert_eq!(
        rows("SELECT * FROM ex:g1 WHERE { GRAPH ?g { ?s ?p ?o } }"),
        want(&[])
    );
    // A graph the store lacks is an empty graph.
    assert_eq!(rows("SELECT * FROM ex:none WHERE { ?s ?p ?o }"), want(&[]));
    assert_eq!(
        rows("ASK FROM ex:g2 { ex:b ex:knows ex:d }"),
        want(&["true"])
    );
    assert_eq!(
        rows("CONSTRUCT { ?s ex:knows ?o } FROM ex:g2 WHERE { ?s ex:knows ?o }"),
        want(&[
            "<http://ex/a> <http://ex/knows> <http://ex/b>",
            "<http://ex/b> <http://ex/knows> <http://ex/d>",
        ])
    );
}

#[test]
fn from_named_chooses_the_named_graphs_and_empties_the_default() {
    // FROM NAMED without FROM: the default graph is empty (13.2).
    assert_eq!(
        rows("SELECT * FROM NAMED ex:g2 WHERE { ?s ?p ?o }"),
        want(&[])
    );
    assert_eq!(
        rows("SELECT ?g ?s ?o FROM NAMED ex:g2 WHERE { GRAPH ?g { ?s ex:knows ?o } }"),
        want(&[
            "g=<http://ex/g2> s=<http://ex/a> o=<http://ex/b>",
            "g=<http://ex/g2> s=<http://ex/b> o=<http://ex/d>",
        ])
    );
    assert_eq!(
        rows("SELECT * FROM NAMED ex:g2 WHERE { GRAPH ex:g1 { ?s ?p ?o } }"),
        want(&[])
    );
    // FROM and FROM NAMED together: g1 is the default graph, g2 the named one.
    assert_eq!(
        rows(
            "SELECT ?o ?g ?z FROM ex:g1 FROM NAMED ex:g2 \
             WHERE { ex:a ex:knows ?o GRAPH ?g { ?o ex:knows ?z } }"
        ),
        want(&["o=<http://ex/b> g=<http://ex/g2> z=<http://ex/d>"])
    );
}

#[test]
fn a_catalog_with_graphs_is_format_5_and_reads_back() {
    for d in datasets() {
        let (c, _) = locus_rdf::catalog::build(d, 64).unwrap();
        let dir = tempfile::tempdir().unwrap();
        c.save(dir.path()).unwrap();
        let json = std::fs::read_to_string(dir.path().join("catalog.json")).unwrap();
        assert!(json.contains("\"format\": 5"), "{json}");
        let back = Catalog::load(dir.path()).unwrap();
        assert_eq!(back.dict(), c.dict());
        assert_eq!(back.stats(), c.stats());
        // A format 4 header over a dictionary with graphs disagrees: refused.
        std::fs::write(
            dir.path().join("catalog.json"),
            json.replace("\"format\": 5", "\"format\": 4"),
        )
        .unwrap();
        let e = Catalog::load(dir.path()).unwrap_err().to_string();
        assert!(e.contains("disagree") && e.contains("catalog.json"), "{e}");
        std::fs::write(
            dir.path().join("catalog.json"),
            json.replace("\"format\": 5", "\"format\": 6"),
        )
        .unwrap();
        let e = Catalog::load(dir.path()).unwrap_err().to_string();
        assert!(e.contains("format 6") && e.contains("3 to 5"), "{e}");
    }
}

fn update(rdf: &mut RdfStore<LocalFabric>, text: &str) -> locus_rdf::Result<(u64, u64)> {
    let mut readers = rdf.workers().unwrap();
    let mut writers = rdf.workers().unwrap();
    let r = rdf.update(text, &mut readers, &mut writers, 1 << 20)?;
    Ok((r.inserted, r.deleted))
}

/// Every quad, as sorted text (the default graph's with graph `-`).
fn quads(rdf: &RdfStore<LocalFabric>) -> Vec<String> {
    let mut e = Engine::new(rdf).unwrap();
    let q = "SELECT ?g ?s ?p ?o WHERE { { ?s ?p ?o } UNION { GRAPH ?g { ?s ?p ?o } } }";
    text(e.answer(q).unwrap().0, false)
}

/// Statistics keyed by the pt's kind, term and graph, zero rows left out.
fn stats(c: &Catalog) -> BTreeMap<String, (u64, u64, u64)> {
    let (d, s) = (c.dict(), c.stats());
    (0..d.pts())
        .filter_map(|pt| {
            let (kind, id) = d.pt(pt).unwrap();
            let k = pt as usize;
            let v = (s.triples[k], s.subjects[k], s.objects[k]);
            let g = d.pt_graph(pt).map(|g| d.term(g).unwrap().to_string());
            (v != (0, 0, 0)).then(|| (format!("{kind:?} {} {g:?}", d.term(id).unwrap()), v))
        })
        .collect()
}

/// Updates of named graphs, checked against a fresh load of the TriG the
/// updates should leave: every quad and every pt's statistics equal.
#[test]
fn updates_of_named_graphs_leave_what_a_fresh_load_of_the_result_holds() {
    let updates = [
        // Into an existing graph, and into a new one (with a class).
        "INSERT DATA { GRAPH ex:g1 { ex:x ex:knows ex:y } }",
        "INSERT DATA { GRAPH ex:g3 { ex:x a ex:Robot . ex:x ex:name \"X\" . ex:y a ex:Person } }",
        "DELETE DATA { GRAPH ex:g1 { ex:a ex:knows ex:c } }",
        // Move g2's knows triples into g1.
        "DELETE { GRAPH ex:g2 { ?s ex:knows ?o } } INSERT { GRAPH ex:g1 { ?s ex:knows ?o } } \
         WHERE { GRAPH ex:g2 { ?s ex:knows ?o } }",
        // The default graph gets a predicate only g1 had.
        "INSERT DATA { ex:a ex:name \"A\" }",
        "CLEAR SILENT GRAPH ex:none",
        "CREATE GRAPH ex:empty",
        // WITH sets the graph of the templates and the WHERE's default graph.
        "WITH ex:g2 DELETE { ?s ex:age ?a } WHERE { ?s ex:age ?a }",
        // USING: the WHERE reads g3 as its default graph.
        "INSERT { ?s ex:seen ex:yes } USING ex:g3 WHERE { ?s a ex:Robot }",
    ];
    let want = r#"
@prefix ex: <http://ex/> .
ex:a ex:knows ex:b .
ex:a a ex:Person .
ex:a ex:name "A" .
ex:x ex:seen ex:yes .
ex:g1 { ex:c a ex:Person . ex:c ex:name "C" . ex:a ex:knows ex:b . ex:x ex:knows ex:y . ex:b ex:knows ex:d . }
ex:g2 { ex:d a ex:Robot . }
ex:g3 { ex:x a ex:Robot . ex:x ex:name "X" . ex:y a ex:Person . }
"#;
    let fresh =
        stores_of(&Dataset::parse_trig(want.as_bytes(), "want.trig", &()).unwrap()).swap_remove(0);
    for mut rdf in stores() {
        for u in updates {
            update(&mut rdf, &format!("{P}{u}")).unwrap_or_else(|e| panic!("{u}: {e}"));
        }
        assert_eq!(quads(&rdf), quads(&fresh));
        assert_eq!(stats(rdf.catalog()), stats(fresh.catalog()));
        let mut e = Engine::new(&rdf).unwrap();
        let mut ask = |q: &str| text(e.answer(&format!("{P}{q}")).unwrap().0, false);
        assert_eq!(
            ask("SELECT ?g ?x WHERE { GRAPH ?g { ?x a ex:Robot } }"),
            want_rows(&[
                "g=<http://ex/g2> x=<http://ex/d>",
                "g=<http://ex/g3> x=<http://ex/x>"
            ])
        );
        drop(e);
        // CLEAR GRAPH empties g3, which is then no graph of the dataset;
        // CLEAR DEFAULT leaves the named graphs; CLEAR NAMED empties them.
        update(&mut rdf, &format!("{P}CLEAR GRAPH ex:g3")).unwrap();
        let mut e = Engine::new(&rdf).unwrap();
        let mut ask = |q: &str| text(e.answer(&format!("{P}{q}")).unwrap().0, false);
        assert_eq!(
            ask("SELECT DISTINCT ?g WHERE { GRAPH ?g { } }"),
            want_rows(&["g=<http://ex/g1>", "g=<http://ex/g2>"])
        );
        drop(e);
        update(&mut rdf, "CLEAR DEFAULT").unwrap();
        assert_eq!(quads(&rdf).len(), 6, "{:?}", quads(&rdf));
        update(&mut rdf, "DROP NAMED").unwrap();
        assert_eq!(quads(&rdf), Vec::<String>::new());
    }
}

#[test]
fn updates_name_what_they_refuse() {
    let mut rdf = stores().remove(0);
    for (u, says) in [
        ("CLEAR GRAPH <http://ex/none>", "no graph <http://ex/none>"),
        ("CREATE GRAPH <http://ex/g1>", "has that graph already"),
        (
            "INSERT { GRAPH ?g { ?s ?p ?o } } WHERE { ?s ?p ?o BIND(<http://ex/g9> AS ?g) }",
            "GRAPH ?g in an update template",
        ),
    ] {
        let e = update(&mut rdf, u).unwrap_err();
        assert!(matches!(e, RdfError::Unsupported(_)), "{u}: {e}");
        assert!(e.to_string().contains(says), "{u}: {e}");
    }
    assert_eq!(quads(&rdf).len(), 10, "nothing changed");
}

/// The SPARQL Protocol's dataset parameters (2.1.4, 2.2.3): they replace
/// the request's FROM / FROM NAMED, or give its USING.
#[test]
fn protocol_parameters_give_the_dataset() {
    let mut rdf = stores().swap_remove(1);
    let mut svc = StoreService::new(&mut rdf).unwrap();
    let limits = Limits::default();
    let enc = |s: &str| {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' => (b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    let mut get = |q: &str, params: &str| {
        let url = format!("/sparql?query={}{params}&format=csv", enc(q));
        let r = handle(
            &Request {
                method: "GET",
                url: &url,
                ..Request::default()
            },
            &limits,
            &mut svc,
        );
        (r.status, r.body_text())
    };
    let g = |n: &str| enc(&format!("http://ex/{n}"));
    let q = "SELECT ?o WHERE { <http://ex/b> <http://ex/knows> ?o }";
    assert_eq!(get(q, ""), (200, "o\r\n".into()), "the default graph");
    let (st, body) = get(q, &format!("&default-graph-uri={}", g("g2")));
    assert_eq!((st, body.as_str()), (200, "o\r\nhttp://ex/d\r\n"));
    // The parameters win over FROM in the query.
    let from = "SELECT ?o FROM <http://ex/g1> WHERE { <http://ex/b> <http://ex/knows> ?o }";
    let (_, body) = get(from, &format!("&default-graph-uri={}", g("g2")));
    assert_eq!(body, "o\r\nhttp://ex/d\r\n");
    let named = "SELECT ?g WHERE { GRAPH ?g { <http://ex/a> <http://ex/knows> <http://ex/b> } }";
    let (_, body) = get(named, &format!("&named-graph-uri={}", g("g1")));
    assert_eq!(body, "g\r\nhttp://ex/g1\r\n");
    // USING by parameter; with USING in the request too, a 400.
    let mut post = |body: &str, params: &str| {
        let url = format!("/sparql?{}", params.trim_start_matches('&'));
        let r = handle(
            &Request {
                method: "POST",
                url: &url,
                content_type: Some("application/sparql-update"),
                body: body.as_bytes(),
                ..Request::default()
            },
            &limits,
            &mut svc,
        );
        (r.status, r.body_text())
    };
    let u = "INSERT { ?s <http://ex/seen> <http://ex/yes> } WHERE { ?s a <http://ex/Robot> }";
    let (st, body) = post(u, &format!("&using-graph-uri={}", g("g2")));
    assert_eq!(st, 200, "{body}");
    let u2 =
        "INSERT { ?s <http://ex/seen> <http://ex/yes> } USING <http://ex/g1> WHERE { ?s ?p ?o }";
    let (st, body) = post(u2, &format!("&using-graph-uri={}", g("g2")));
    assert_eq!(st, 400, "{body}");
    drop(svc);
    let mut e = Engine::new(&rdf).unwrap();
    let seen = text(
        e.answer("SELECT ?s WHERE { ?s <http://ex/seen> ?o }")
            .unwrap()
            .0,
        false,
    );
    assert_eq!(seen, want(&["s=<http://ex/d>"]));
}

fn want_rows(rows: &[&str]) -> Vec<String> {
    want(rows)
}
