//! SPARQL by graph exploration on a small graph: joins, both kinds of start
//! (constant and index, forked), FILTER, DISTINCT, LIMIT/OFFSET, constants
//! absent from the data, and unsupported features (GRAPH) named. Each answer is the
//! same on 1, 3 and 8 machines.

use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_rdf::sparql::{results, Engine};
use locus_rdf::{Dataset, RdfError, RdfStore};

const DATA: &str = r#"
<http://ex/alice> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://ex/Person> .
<http://ex/bob> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://ex/Person> .
<http://ex/carol> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://ex/Person> .
<http://ex/bob> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://ex/Student> .
<http://ex/alice> <http://ex/knows> <http://ex/bob> .
<http://ex/bob> <http://ex/knows> <http://ex/carol> .
<http://ex/carol> <http://ex/knows> <http://ex/alice> .
<http://ex/alice> <http://ex/knows> <http://ex/carol> .
<http://ex/dave> <http://ex/knows> <http://ex/dave> .
<http://ex/alice> <http://ex/age> "30"^^<http://www.w3.org/2001/XMLSchema#integer> .
<http://ex/bob> <http://ex/age> "25"^^<http://www.w3.org/2001/XMLSchema#integer> .
<http://ex/carol> <http://ex/age> "41"^^<http://www.w3.org/2001/XMLSchema#integer> .
<http://ex/alice> <http://ex/name> "Alice" .
<http://ex/bob> <http://ex/name> "Bob"@en .
"#;

const P: &str = "PREFIX ex: <http://ex/> ";

fn stores() -> Vec<RdfStore<LocalFabric>> {
    let d = Dataset::parse(DATA.as_bytes(), "data.nt", &()).unwrap();
    [1, 3, 8]
        .into_iter()
        .map(|machines| {
            let f = LocalFabric::new(LocalConfig {
                machines,
                latency_ns: 0,
                bandwidth_bytes_per_s: 0,
                pin_memory: false,
                ..LocalConfig::default()
            })
            .unwrap();
            RdfStore::load(f, d.clone(), |_| {}, &()).unwrap()
        })
        .collect()
}

/// The rows as sorted strings, checked equal on every machine count.
fn answer(q: &str) -> Vec<String> {
    let mut first: Option<Vec<String>> = None;
    for rdf in stores() {
        let mut e = Engine::new(&rdf).unwrap();
        let (s, _) = e.query(&format!("{P}{q}")).unwrap();
        let mut rows: Vec<String> = s
            .rows
            .iter()
            .map(|r| {
                r.iter()
                    .map(|t| t.as_ref().map_or("-".into(), |t| t.to_string()))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        rows.sort();
        match &first {
            None => first = Some(rows),
            Some(f) => assert_eq!(f, &rows, "{q}"),
        }
    }
    first.unwrap()
}

#[test]
fn joins_from_constants_and_indexes() {
    // From a constant: alice's friends who are persons.
    assert_eq!(
        answer("SELECT ?y WHERE { ex:alice ex:knows ?y . ?y a ex:Person }"),
        ["<http://ex/bob>", "<http://ex/carol>"]
    );
    // From the type index (forked over machines), then a join.
    assert_eq!(
        answer("SELECT ?x ?y WHERE { ?x a ex:Student . ?x ex:knows ?y }"),
        ["<http://ex/bob> <http://ex/carol>"]
    );
    // From the predicate index: the triangle's three rotations, and dave's self loop.
    assert_eq!(
        answer("SELECT ?a ?b ?c WHERE { ?a ex:knows ?b . ?b ex:knows ?c . ?c ex:knows ?a }").len(),
        4
    );
    // ?x p ?x.
    assert_eq!(
        answer("SELECT ?x WHERE { ?x ex:knows ?x }"),
        ["<http://ex/dave>"]
    );
    // A variable class.
    assert_eq!(
        answer("SELECT ?c WHERE { ex:bob a ?c }"),
        ["<http://ex/Person>", "<http://ex/Student>"]
    );
    assert_eq!(
        answer("SELECT ?x WHERE { ?x a ?c . ?c a ex:Person }").len(),
        0
    );
    // Both ends constant.
    assert_eq!(answer("SELECT * WHERE { ex:alice ex:knows ex:bob }"), [""]);
    assert_eq!(
        answer("SELECT * WHERE { ex:bob ex:knows ex:alice }").len(),
        0
    );
}

#[test]
fn filters_distinct_slices_and_absent_constants() {
    assert_eq!(
        answer("SELECT ?x WHERE { ?x ex:age ?a FILTER(?a > 26 && ?a < 40) }"),
        ["<http://ex/alice>"]
    );
    assert_eq!(
        answer("SELECT ?x WHERE { ?x ex:knows ?y . ?y ex:age ?a FILTER(?a >= 41 || ?y = ex:bob) }"),
        ["<http://ex/alice>", "<http://ex/alice>", "<http://ex/bob>"]
    );
    assert_eq!(
        answer("SELECT DISTINCT ?x WHERE { ?x ex:knows ?y . ?y ex:age ?a FILTER(?a >= 41 || ?y = ex:bob) }"),
        ["<http://ex/alice>", "<http://ex/bob>"]
    );
    assert_eq!(
        answer("SELECT ?n WHERE { ?x ex:name ?n FILTER(?n = \"Alice\") }"),
        ["\"Alice\""]
    );
    assert_eq!(
        answer("SELECT ?x WHERE { ?x ex:knows ?y } LIMIT 2").len(),
        2
    );
    assert_eq!(
        answer("SELECT ?x WHERE { ?x ex:knows ?y } LIMIT 10 OFFSET 3").len(),
        2
    );
    assert_eq!(
        answer("SELECT ?x ?z WHERE { ?x ex:name ?n }")
            .iter()
            .filter(|r| r.ends_with(" -"))
            .count(),
        2
    );
    assert!(answer("SELECT ?x WHERE { ?x ex:knows ex:nobody }").is_empty());
    assert!(answer("SELECT ?x WHERE { ?x ex:nopredicate ?y }").is_empty());
    assert!(answer("SELECT ?x WHERE { ?x a ex:NoClass }").is_empty());
}

#[test]
fn w3c_json_and_unsupported_features() {
    let rdf = stores().remove(1);
    let mut e = Engine::new(&rdf).unwrap();
    let (s, trace) = e
        .query(&format!("{P}SELECT ?n WHERE {{ ex:bob ex:name ?n }}"))
        .unwrap();
    assert_eq!(
        trace.start,
        Some(
            rdf.home(
                rdf.dict()
                    .id(&oxrdf::NamedNode::new("http://ex/bob").unwrap().into())
                    .unwrap()
            )
        )
    );
    let j = results::to_json(&s);
    assert_eq!(
        j,
        serde_json::json!({"head": {"vars": ["n"]}, "results": {"bindings": [
            {"n": {"type": "literal", "value": "Bob", "xml:lang": "en"}}]}})
    );
    assert!(results::to_table(&s).ends_with("(1 row)\n"));
    // No named graphs in this store: GRAPH ?g matches nothing.
    let (g, _) = e
        .query("SELECT ?s WHERE { GRAPH ?g { ?s ?p ?o } }")
        .unwrap();
    assert!(g.rows.is_empty());
    let e2 = e
        .query("SELECT ?s WHERE { SERVICE <http://ex/s> { ?s ?p ?o } }")
        .unwrap_err();
    assert!(matches!(e2, RdfError::Unsupported(_)), "{e2}");
    assert!(e2.to_string().contains("SERVICE"), "{e2}");
    let e3 = e
        .query("SELECT ?s WHERE { ?s <http://ex/knows> ?o ")
        .unwrap_err();
    assert!(matches!(e3, RdfError::QuerySyntax(_)), "{e3}");
    e.rows_max = 2;
    let e4 = e
        .query("SELECT * WHERE { ?a <http://ex/knows> ?b . ?b <http://ex/knows> ?c }")
        .unwrap_err();
    assert!(
        e4.to_string().contains("more than 2 intermediate rows"),
        "{e4}"
    );
}

#[test]
fn an_empty_store_answers_with_no_rows() {
    // No predicate has statistics: the planner must not index them.
    let mut d = Dataset::new();
    d.finish();
    let f = LocalFabric::new(LocalConfig {
        machines: 2,
        latency_ns: 0,
        bandwidth_bytes_per_s: 0,
        pin_memory: false,
        ..LocalConfig::default()
    })
    .unwrap();
    let rdf = RdfStore::load(f, d, |_| {}, &()).unwrap();
    let mut e = Engine::new(&rdf).unwrap();
    for q in [
        "SELECT * WHERE { ?s <http://ex/p> ?o }",
        "SELECT * WHERE { <http://ex/a> <http://ex/p> ?o OPTIONAL { ?o ?p ?z } }",
    ] {
        let (s, _) = e.query(q).unwrap();
        assert!(s.rows.is_empty(), "{q}");
    }
}
