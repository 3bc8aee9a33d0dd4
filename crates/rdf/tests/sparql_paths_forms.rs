//! Variable predicates and property paths over Wukong's keys, and the query
//! forms ASK, CONSTRUCT and DESCRIBE, on the real store; answers by hand.

mod common;
use common::{ask, rows, want};

const DATA: &str = r#"
@prefix ex: <http://ex/> .
ex:a ex:next ex:b . ex:b ex:next ex:c . ex:c ex:next ex:a . ex:c ex:next ex:d .
ex:a ex:label "A" . ex:d ex:label "D" .
ex:a a ex:Node . ex:x ex:part [ ex:label "inner" ] .
"#;

const P: &str = "PREFIX ex: <http://ex/> ";

#[test]
fn variable_predicates_read_every_predicate_from_a_known_end() {
    let q = format!("{P}SELECT ?p ?o WHERE {{ ex:a ?p ?o }}");
    assert_eq!(
        rows(DATA, &q),
        want(&[
            "p=<http://ex/label> o=\"A\"",
            "p=<http://ex/next> o=<http://ex/b>",
            "p=<http://www.w3.org/1999/02/22-rdf-syntax-ns#type> o=<http://ex/Node>",
        ])
    );
    let q = format!("{P}SELECT ?s ?p WHERE {{ ?s ?p ex:a }}");
    assert_eq!(
        rows(DATA, &q),
        want(&["s=<http://ex/c> p=<http://ex/next>"])
    );
    let q = format!("{P}SELECT (COUNT(*) AS ?n) WHERE {{ ?s ?p ?o }}");
    assert_eq!(
        rows(DATA, &q),
        want(&["n=\"9\"^^<http://www.w3.org/2001/XMLSchema#integer>"])
    );
    // A variable predicate joined with exploration in one group.
    let q = format!("{P}SELECT ?s WHERE {{ ?s ex:label \"D\" . ?x ?p ?s }}");
    assert_eq!(rows(DATA, &q), want(&["s=<http://ex/d>"]));
}

#[test]
fn paths() {
    let reach = |path: &str| rows(DATA, &format!("{P}SELECT ?o WHERE {{ ex:a {path} ?o }}"));
    let iri = |n: &[&str]| -> Vec<String> {
        want(
            &n.iter()
                .map(|x| format!("o=<http://ex/{x}>"))
                .collect::<Vec<_>>()
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        )
    };
    assert_eq!(reach("ex:next+"), iri(&["a", "b", "c", "d"]));
    assert_eq!(reach("ex:next*"), iri(&["a", "b", "c", "d"]));
    assert_eq!(reach("ex:next?"), iri(&["a", "b"]));
    assert_eq!(reach("ex:next/ex:next"), iri(&["c"]));
    assert_eq!(reach("^ex:next"), iri(&["c"]));
    assert_eq!(
        reach("ex:next/ex:next/(ex:next|ex:label)"),
        iri(&["a", "d"])
    );
    assert_eq!(reach("!(ex:next|ex:label)"), iri(&["Node"]));
    // Zero-length paths from a constant absent from the data still match it.
    let q = format!("{P}SELECT ?o WHERE {{ ex:zed ex:next* ?o }}");
    assert_eq!(rows(DATA, &q), want(&["o=<http://ex/zed>"]));
    // Both ends unbound.
    let q = format!("{P}SELECT ?s WHERE {{ ?s ex:next/ex:label \"D\" }}");
    assert_eq!(rows(DATA, &q), want(&["s=<http://ex/c>"]));
    // A sequence inside an alternative stays a path (a bare one becomes a
    // BGP), read backwards from the object.
    let q = format!("{P}SELECT ?s WHERE {{ ?s (ex:next/ex:label)|ex:label \"D\" }}");
    assert_eq!(
        rows(DATA, &q),
        want(&["s=<http://ex/c>", "s=<http://ex/d>"])
    );
    let q = format!("{P}SELECT ?s WHERE {{ ?s ex:next+ ?s }}");
    assert_eq!(
        rows(DATA, &q),
        want(&["s=<http://ex/a>", "s=<http://ex/b>", "s=<http://ex/c>"])
    );
}

#[test]
fn ask_construct_describe() {
    assert_eq!(
        ask(DATA, &format!("{P}ASK {{ ex:a ex:next+ ex:d }}"), false),
        vec!["true"]
    );
    assert_eq!(
        ask(DATA, &format!("{P}ASK {{ ex:d ex:next ?x }}"), false),
        vec!["false"]
    );
    let q =
        format!("{P}CONSTRUCT {{ ?y ex:prev ?x }} WHERE {{ ?x ex:next ?y FILTER(?y != ex:a) }}");
    assert_eq!(
        rows(DATA, &q),
        want(&[
            "<http://ex/b> <http://ex/prev> <http://ex/a>",
            "<http://ex/c> <http://ex/prev> <http://ex/b>",
            "<http://ex/d> <http://ex/prev> <http://ex/c>",
        ])
    );
    let q = format!("{P}DESCRIBE ex:d");
    assert_eq!(
        rows(DATA, &q),
        want(&["<http://ex/d> <http://ex/label> \"D\""])
    );
    // The description follows blank nodes.
    let q = format!("{P}DESCRIBE ?x WHERE {{ ?x ex:part ?b }}");
    let g = rows(DATA, &q);
    assert_eq!(g.len(), 2, "{g:?}");
    assert!(
        g.iter().any(|t| t.ends_with("<http://ex/label> \"inner\"")),
        "{g:?}"
    );
}
