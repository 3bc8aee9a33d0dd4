//! GROUP BY with every aggregate (and DISTINCT forms), HAVING, ORDER BY and
//! LIMIT/OFFSET over the evaluator's solutions, on the real store.

mod common;
use common::{ask, rows, want};

const DATA: &str = r#"
@prefix ex: <http://ex/> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
ex:o1 ex:shop ex:north ; ex:amount 10 ; ex:item "pen" .
ex:o2 ex:shop ex:north ; ex:amount 2.5 ; ex:item "ink" .
ex:o3 ex:shop ex:north ; ex:amount 10 ; ex:item "pen" .
ex:o4 ex:shop ex:south ; ex:amount 7 ; ex:item "cap" .
ex:o5 ex:shop ex:west ; ex:amount "n/a" .
"#;

const P: &str = "PREFIX ex: <http://ex/> ";
const INT: &str = "^^<http://www.w3.org/2001/XMLSchema#integer>";
const DEC: &str = "^^<http://www.w3.org/2001/XMLSchema#decimal>";

#[test]
fn count_sum_avg_by_group() {
    let q = format!(
        "{P}SELECT ?s (COUNT(*) AS ?n) (SUM(?a) AS ?sum) (AVG(?a) AS ?avg) WHERE {{ ?o ex:shop ?s ; ex:amount ?a }} GROUP BY ?s"
    );
    assert_eq!(
        rows(DATA, &q),
        want(&[
            // 10 + 2.5 + 10: an integer and a decimal sum to a decimal.
            &format!("s=<http://ex/north> n=\"3\"{INT} sum=\"22.5\"{DEC} avg=\"7.5\"{DEC}"),
            &format!("s=<http://ex/south> n=\"1\"{INT} sum=\"7\"{INT} avg=\"7\"{DEC}"),
            // "n/a" is not a number: SUM and AVG are errors, left unbound.
            &format!("s=<http://ex/west> n=\"1\"{INT}"),
        ])
    );
}

#[test]
fn distinct_forms_min_max_sample_group_concat() {
    let q = format!(
        "{P}SELECT (COUNT(DISTINCT ?i) AS ?n) (COUNT(?i) AS ?all) (SUM(DISTINCT ?a) AS ?s) WHERE {{ ?o ex:shop ex:north ; ex:item ?i ; ex:amount ?a }}"
    );
    assert_eq!(
        rows(DATA, &q),
        want(&[&format!("n=\"2\"{INT} all=\"3\"{INT} s=\"12.5\"{DEC}")])
    );
    let q = format!(
        "{P}SELECT (MIN(?a) AS ?lo) (MAX(?a) AS ?hi) WHERE {{ ?o ex:amount ?a FILTER(isNumeric(?a)) }}"
    );
    assert_eq!(
        rows(DATA, &q),
        want(&[&format!("lo=\"2.5\"{DEC} hi=\"10\"{INT}")])
    );
    let q = format!(
        "{P}SELECT (GROUP_CONCAT(DISTINCT ?i; SEPARATOR=\",\") AS ?g) WHERE {{ {{ SELECT ?i WHERE {{ ?o ex:item ?i }} ORDER BY ?i }} }}"
    );
    assert_eq!(rows(DATA, &q), want(&["g=\"cap,ink,pen\""]));
    let q = format!("{P}SELECT (SAMPLE(?i) AS ?x) WHERE {{ ?o ex:shop ex:south ; ex:item ?i }}");
    assert_eq!(rows(DATA, &q), want(&["x=\"cap\""]));
}

#[test]
fn empty_input_is_one_group() {
    let q = format!("{P}SELECT (COUNT(*) AS ?n) WHERE {{ ?o ex:shop ex:nowhere }}");
    assert_eq!(rows(DATA, &q), want(&[&format!("n=\"0\"{INT}")]));
    // With GROUP BY too, its key unbound (the W3C test agg-empty-group).
    let q = format!(
        "{P}SELECT ?s (COUNT(*) AS ?n) (MAX(?o) AS ?m) WHERE {{ ?o ex:shop ex:nowhere }} GROUP BY ?s"
    );
    assert_eq!(rows(DATA, &q), want(&[&format!("n=\"0\"{INT}")]));
}

#[test]
fn having_and_order_by_with_slices() {
    let q = format!("{P}SELECT ?s WHERE {{ ?o ex:shop ?s }} GROUP BY ?s HAVING (COUNT(?o) > 1)");
    assert_eq!(rows(DATA, &q), want(&["s=<http://ex/north>"]));
    let q = format!(
        "{P}SELECT ?o ?a WHERE {{ ?o ex:amount ?a FILTER(isNumeric(?a)) }} ORDER BY DESC(?a) ?o LIMIT 2 OFFSET 1"
    );
    assert_eq!(
        ask(DATA, &q, true),
        vec![
            format!("o=<http://ex/o3> a=\"10\"{INT}"),
            format!("o=<http://ex/o4> a=\"7\"{INT}"),
        ]
    );
    // ORDER BY mixes kinds in SPARQL's order: IRIs before literals; among
    // literals of no common order, Locus puts plain strings first.
    let q = format!("{P}SELECT ?v WHERE {{ ex:o1 ?p ?v }} ORDER BY ?v");
    assert_eq!(
        ask(DATA, &q, true),
        vec![
            "v=<http://ex/north>".to_string(),
            "v=\"pen\"".to_string(),
            format!("v=\"10\"{INT}"),
        ]
    );
}
