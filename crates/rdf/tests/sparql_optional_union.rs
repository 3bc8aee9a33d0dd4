//! OPTIONAL, UNION, MINUS, FILTER (NOT) EXISTS, BIND, VALUES and subqueries
//! around exploration, on the real store; answers derived by hand.

mod common;
use common::{rows, want};

const DATA: &str = r#"
@prefix ex: <http://ex/> .
ex:alice a ex:Person ; ex:name "Alice" ; ex:knows ex:bob , ex:carol ; ex:age 30 .
ex:bob a ex:Person ; ex:name "Bob" ; ex:knows ex:carol ; ex:email "bob@ex" .
ex:carol a ex:Person ; ex:name "Carol" ; ex:age 41 .
ex:dave a ex:Robot ; ex:name "Dave" .
"#;

const P: &str = "PREFIX ex: <http://ex/> ";

#[test]
fn optional_keeps_rows_without_a_match() {
    let q = format!(
        "{P}SELECT ?n ?e WHERE {{ ?p a ex:Person ; ex:name ?n OPTIONAL {{ ?p ex:email ?e }} }}"
    );
    assert_eq!(
        rows(DATA, &q),
        want(&["n=\"Alice\"", "n=\"Bob\" e=\"bob@ex\"", "n=\"Carol\""])
    );
}

#[test]
fn optional_filter_applies_to_the_optional_part_only() {
    // The filter inside OPTIONAL drops the match, not the row (LeftJoin's expression).
    let q = format!(
        "{P}SELECT ?n ?a WHERE {{ ?p a ex:Person ; ex:name ?n OPTIONAL {{ ?p ex:age ?a FILTER(?a > 35) }} }}"
    );
    assert_eq!(
        rows(DATA, &q),
        want(&[
            "n=\"Alice\"",
            "n=\"Bob\"",
            "n=\"Carol\" a=\"41\"^^<http://www.w3.org/2001/XMLSchema#integer>"
        ])
    );
    // Nested OPTIONALs, and a FILTER on an optional variable (!BOUND).
    let q = format!(
        "{P}SELECT ?n WHERE {{ ?p ex:name ?n OPTIONAL {{ ?p ex:knows ?f OPTIONAL {{ ?f ex:email ?e }} }} FILTER(!BOUND(?f)) }}"
    );
    assert_eq!(rows(DATA, &q), want(&["n=\"Carol\"", "n=\"Dave\""]));
}

#[test]
fn union_concatenates_both_sides() {
    let q = format!(
        "{P}SELECT ?x ?v WHERE {{ {{ ?x ex:email ?v }} UNION {{ ?x ex:age ?v FILTER(?v < 35) }} }}"
    );
    assert_eq!(
        rows(DATA, &q),
        want(&[
            "x=<http://ex/alice> v=\"30\"^^<http://www.w3.org/2001/XMLSchema#integer>",
            "x=<http://ex/bob> v=\"bob@ex\""
        ])
    );
}

#[test]
fn minus_removes_compatible_rows_sharing_a_variable() {
    let q = format!("{P}SELECT ?p WHERE {{ ?p a ex:Person MINUS {{ ?p ex:age ?a }} }}");
    assert_eq!(rows(DATA, &q), want(&["p=<http://ex/bob>"]));
    // Disjoint domains: MINUS removes nothing (unlike NOT EXISTS).
    let q = format!("{P}SELECT ?p WHERE {{ ?p a ex:Person MINUS {{ ?x ex:age ?a }} }}");
    assert_eq!(rows(DATA, &q).len(), 3);
    let q = format!("{P}SELECT ?p WHERE {{ ?p a ex:Person FILTER NOT EXISTS {{ ?x ex:age ?a }} }}");
    assert!(rows(DATA, &q).is_empty());
}

#[test]
fn exists_sees_the_row() {
    let q =
        format!("{P}SELECT ?p WHERE {{ ?p a ex:Person FILTER EXISTS {{ ?p ex:knows ex:carol }} }}");
    assert_eq!(
        rows(DATA, &q),
        want(&["p=<http://ex/alice>", "p=<http://ex/bob>"])
    );
    let q =
        format!("{P}SELECT ?p WHERE {{ ?p ex:name ?n FILTER NOT EXISTS {{ ?p ex:knows ?f }} }}");
    assert_eq!(
        rows(DATA, &q),
        want(&["p=<http://ex/carol>", "p=<http://ex/dave>"])
    );
    // A filter inside EXISTS reads the outer row's variable.
    let q = format!(
        "{P}SELECT ?p WHERE {{ ?p ex:age ?a FILTER EXISTS {{ ?q ex:age ?b FILTER(?b > ?a) }} }}"
    );
    assert_eq!(rows(DATA, &q), want(&["p=<http://ex/alice>"]));
}

#[test]
fn bind_values_and_subqueries() {
    let q =
        format!("{P}SELECT ?n ?next WHERE {{ ?p ex:age ?a ; ex:name ?n BIND(?a + 1 AS ?next) }}");
    assert_eq!(
        rows(DATA, &q),
        want(&[
            "n=\"Alice\" next=\"31\"^^<http://www.w3.org/2001/XMLSchema#integer>",
            "n=\"Carol\" next=\"42\"^^<http://www.w3.org/2001/XMLSchema#integer>"
        ])
    );
    let q =
        format!("{P}SELECT ?p ?n WHERE {{ VALUES ?p {{ ex:bob ex:dave ex:zed }} ?p ex:name ?n }}");
    assert_eq!(
        rows(DATA, &q),
        want(&[
            "p=<http://ex/bob> n=\"Bob\"",
            "p=<http://ex/dave> n=\"Dave\""
        ])
    );
    // A subquery's unprojected ?n is its own; the outer ?n binds separately.
    let q = format!(
        "{P}SELECT ?p ?n WHERE {{ {{ SELECT ?p WHERE {{ ?p ex:knows ?n }} }} ?p ex:name ?n }}"
    );
    assert_eq!(
        rows(DATA, &q),
        want(&[
            "p=<http://ex/alice> n=\"Alice\"",
            "p=<http://ex/alice> n=\"Alice\"",
            "p=<http://ex/bob> n=\"Bob\""
        ])
    );
    let q = format!("{P}SELECT ?p WHERE {{ {{ SELECT DISTINCT ?p WHERE {{ ?p ex:knows ?n }} }} }}");
    assert_eq!(
        rows(DATA, &q),
        want(&["p=<http://ex/alice>", "p=<http://ex/bob>"])
    );
}
