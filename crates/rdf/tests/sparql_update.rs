//! SPARQL 1.1 Update on an embedded store, checked against a model: after
//! each sequence of updates, the store answers `SELECT * { ?s ?p ?o }` and
//! holds statistics exactly as a fresh load of the expected triples does
//! (so the index vertices and the planner's counts are current), on 1 and 3
//! machines. Also: a new predicate and a new class keep every key where it
//! was, LOAD of a file, CLEAR, updates through the protocol.

mod common;

use std::collections::BTreeMap;

use locus_fabric::local::LocalFabric;
use locus_rdf::dict::PtKind;
use locus_rdf::sparql::protocol::{handle, Limits, Request, StoreService};
use locus_rdf::sparql::{Answer, Engine, Source};
use locus_rdf::{Catalog, RdfError, RdfStore};

const DATA: &str = r#"
@prefix ex: <http://example.org/> .
@prefix rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#> .
ex:alice ex:knows ex:bob ; rdf:type ex:Person ; ex:name "Alice" .
ex:bob ex:knows ex:carol ; rdf:type ex:Person .
"#;

/// Every triple, as sorted N-Triples lines.
fn all(rdf: &RdfStore<LocalFabric>) -> Vec<String> {
    let mut e = Engine::new(rdf).unwrap();
    let (a, _) = e.answer("SELECT ?s ?p ?o WHERE { ?s ?p ?o }").unwrap();
    let Answer::Solutions(s) = a else {
        panic!("a SELECT")
    };
    let mut out: Vec<String> = s
        .rows
        .iter()
        .map(|r| {
            let t: Vec<String> = r.iter().map(|t| t.as_ref().unwrap().to_string()).collect();
            format!("{} {} {} .", t[0], t[1], t[2])
        })
        .collect();
    out.sort();
    out
}

/// Statistics keyed by the pt's kind and term, zero rows left out.
fn stats(c: &Catalog) -> BTreeMap<(bool, String), (u64, u64, u64)> {
    let s = c.stats();
    (0..c.dict().pts())
        .filter_map(|pt| {
            let (kind, id) = c.dict().pt(pt).unwrap();
            let k = pt as usize;
            let v = (s.triples[k], s.subjects[k], s.objects[k]);
            (v != (0, 0, 0)).then(|| {
                let term = c.dict().term(id).unwrap().to_string();
                ((kind == PtKind::Type, term), v)
            })
        })
        .collect()
}

fn update(rdf: &mut RdfStore<LocalFabric>, text: &str) -> locus_rdf::Result<(u64, u64)> {
    let mut readers = rdf.workers().unwrap();
    let mut writers = rdf.workers().unwrap();
    let r = rdf.update(text, &mut readers, &mut writers, 1 << 20)?;
    Ok((r.inserted, r.deleted))
}

/// Runs `updates` on `DATA` and checks the store against a fresh load of `want`.
fn check(updates: &[&str], want_ntriples: &str) {
    for mut rdf in common::stores(DATA) {
        for u in updates {
            update(&mut rdf, u).unwrap_or_else(|e| panic!("{u}: {e}"));
        }
        let fresh = common::stores(want_ntriples).swap_remove(0);
        let triples = all(&fresh);
        assert_eq!(all(&rdf), triples, "triples after {updates:?}");
        // Exploration binary-searches the lists it reads: they come sorted
        // although an update appends.
        let mut workers = rdf.workers().unwrap();
        let machines = workers.len();
        for &key in rdf.keys() {
            let mut list = Vec::new();
            let w = &mut workers[locus_store::home_of(key, machines) as usize];
            Source::list(w, key, &mut list).unwrap();
            assert!(list.is_sorted(), "key {key}: {list:?} after {updates:?}");
        }
        // Each triple found from its subject, from its object, and both bound
        // (lists an update appended to are read sorted).
        let mut e = Engine::new(&rdf).unwrap();
        for t in &triples {
            let t = t.trim_end_matches(" .");
            let (s, rest) = t.split_once(' ').unwrap();
            let (p, o) = rest.split_once(' ').unwrap();
            for q in [
                format!("ASK {{ {s} {p} {o} }}"),
                format!("ASK {{ {s} {p} ?o FILTER(?o = {o}) }}"),
                format!("ASK {{ ?s {p} {o} FILTER(?s = {s}) }}"),
            ] {
                let (a, _) = e.answer(&q).unwrap();
                assert_eq!(a, Answer::Boolean(true), "{q} after {updates:?}");
            }
        }
        assert_eq!(
            stats(rdf.catalog()),
            stats(fresh.catalog()),
            "statistics after {updates:?}"
        );
    }
}

const EX: &str = "@prefix ex: <http://example.org/> .\n@prefix rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#> .\n";

#[test]
fn insert_data_with_new_terms_predicates_and_classes() {
    check(
        &["PREFIX ex: <http://example.org/>
           INSERT DATA { ex:carol ex:knows ex:dave . ex:dave a ex:Robot ; ex:age 7 .
                         ex:alice ex:knows ex:bob }"],
        &format!(
            "{EX}ex:alice ex:knows ex:bob ; rdf:type ex:Person ; ex:name \"Alice\" .
             ex:bob ex:knows ex:carol ; rdf:type ex:Person .
             ex:carol ex:knows ex:dave . ex:dave rdf:type ex:Robot ; ex:age 7 ."
        ),
    );
}

#[test]
fn appended_lists_read_sorted() {
    // The same three terms appended in two orders: one of the lists is out
    // of id order in the store, whatever ids the terms have.
    check(
        &[
            "PREFIX ex: <http://example.org/> INSERT DATA { ex:carol ex:likes ex:alice }",
            "PREFIX ex: <http://example.org/> INSERT DATA { ex:carol ex:likes ex:bob }",
            "PREFIX ex: <http://example.org/> INSERT DATA { ex:carol ex:likes ex:carol }",
            "PREFIX ex: <http://example.org/> INSERT DATA { ex:bob ex:likes ex:carol }",
            "PREFIX ex: <http://example.org/> INSERT DATA { ex:bob ex:likes ex:bob }",
            "PREFIX ex: <http://example.org/> INSERT DATA { ex:bob ex:likes ex:alice }",
        ],
        &format!(
            "{EX}ex:alice ex:knows ex:bob ; rdf:type ex:Person ; ex:name \"Alice\" .
             ex:bob ex:knows ex:carol ; rdf:type ex:Person .
             ex:carol ex:likes ex:alice, ex:bob, ex:carol . ex:bob ex:likes ex:alice, ex:bob, ex:carol ."
        ),
    );
}

#[test]
fn delete_data_drops_index_entries_and_counts() {
    check(
        &["PREFIX ex: <http://example.org/>
           DELETE DATA { ex:bob ex:knows ex:carol . ex:bob a ex:Person . ex:nobody ex:knows ex:bob }"],
        &format!(
            "{EX}ex:alice ex:knows ex:bob ; rdf:type ex:Person ; ex:name \"Alice\" ."
        ),
    );
    // The last instance of a class and the last triple of a predicate.
    check(
        &["PREFIX ex: <http://example.org/>
           DELETE DATA { ex:alice a ex:Person . ex:bob a ex:Person . ex:alice ex:name \"Alice\" }"],
        &format!("{EX}ex:alice ex:knows ex:bob . ex:bob ex:knows ex:carol ."),
    );
}

#[test]
fn delete_insert_where_renames_a_predicate() {
    check(
        &["PREFIX ex: <http://example.org/>
           DELETE { ?a ex:knows ?b } INSERT { ?b ex:knownBy ?a } WHERE { ?a ex:knows ?b }"],
        &format!(
            "{EX}ex:alice rdf:type ex:Person ; ex:name \"Alice\" . ex:bob rdf:type ex:Person .
             ex:bob ex:knownBy ex:alice . ex:carol ex:knownBy ex:bob ."
        ),
    );
    // Deletions go first: a triple both deleted and inserted stays.
    check(
        &["PREFIX ex: <http://example.org/>
           DELETE { ?a ex:knows ?b } INSERT { ?a ex:knows ?b . ex:alice ex:knows ex:carol }
           WHERE { ?a ex:knows ?b }"],
        &format!(
            "{EX}ex:alice ex:knows ex:bob, ex:carol ; rdf:type ex:Person ; ex:name \"Alice\" .
             ex:bob ex:knows ex:carol ; rdf:type ex:Person ."
        ),
    );
    // DELETE WHERE, and INSERT ... WHERE reading what it will not see itself.
    check(
        &[
            "PREFIX ex: <http://example.org/> DELETE WHERE { ?x a ex:Person }",
            "PREFIX ex: <http://example.org/> INSERT { ?x ex:reaches ?z } WHERE { ?x ex:knows/ex:knows ?z }",
        ],
        &format!(
            "{EX}ex:alice ex:knows ex:bob ; ex:name \"Alice\" . ex:bob ex:knows ex:carol .
             ex:alice ex:reaches ex:carol ."
        ),
    );
}

#[test]
fn clear_then_load_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let nt = dir.path().join("more.nt");
    std::fs::write(
        &nt,
        "<http://example.org/x> <http://example.org/knows> <http://example.org/y> .\n",
    )
    .unwrap();
    let load = format!("LOAD <file://{}>", nt.display());
    check(
        &["CLEAR DEFAULT", &load],
        "<http://example.org/x> <http://example.org/knows> <http://example.org/y> .",
    );
    for mut rdf in common::stores(DATA) {
        let e = update(&mut rdf, "LOAD <http://example.org/data.nt>").unwrap_err();
        assert!(matches!(e, RdfError::Unsupported(_)), "{e}");
        assert_eq!(
            update(&mut rdf, "LOAD SILENT <file:///nonexistent.nt>").unwrap(),
            (0, 0)
        );
        let e = update(&mut rdf, "LOAD <file:///nonexistent.nt>").unwrap_err();
        assert!(e.to_string().contains("nonexistent.nt"), "{e}");
    }
}

#[test]
fn a_variable_graph_in_a_template_is_refused_by_name() {
    // Named graphs in updates: sparql_named_graphs.rs.
    for mut rdf in common::stores(DATA) {
        let e = update(
            &mut rdf,
            "INSERT { GRAPH ?g { ?s ?p ?o } } WHERE { ?s ?p ?o BIND(<http://example.org/g> AS ?g) }",
        )
        .unwrap_err();
        assert!(
            matches!(e, RdfError::Unsupported(_)) && e.to_string().contains("GRAPH ?g"),
            "{e}"
        );
        assert!(matches!(
            update(&mut rdf, "INSERT DATA { <http://a> ").unwrap_err(),
            RdfError::QuerySyntax(_)
        ));
    }
}

#[test]
fn new_predicates_move_no_key_until_the_reserved_room_is_used() {
    let mut rdf = common::stores(DATA).swap_remove(1);
    let layout = *rdf.layout();
    let cap = layout.pts_capacity();
    let before = rdf.dict().pts() as u64;
    let mut n = 0;
    while before + n < cap {
        update(
            &mut rdf,
            &format!("INSERT DATA {{ <http://example.org/alice> <http://example.org/p{n}> {n} }}"),
        )
        .unwrap();
        n += 1;
    }
    let l = rdf.layout();
    assert_eq!(l.pts_capacity(), cap);
    assert_eq!(l.normal(0, 0, 0), layout.normal(0, 0, 0), "no key moved");
    let e = update(
        &mut rdf,
        "INSERT DATA { <http://example.org/alice> <http://example.org/one-too-many> 1 }",
    )
    .unwrap_err();
    assert!(e.to_string().contains("reserved"), "{e}");
}

#[test]
fn updates_through_the_protocol() {
    let mut rdf = common::stores(DATA).swap_remove(1);
    let mut svc = StoreService::new(&mut rdf).unwrap();
    let limits = Limits::default();
    let post = |body: &'static [u8], ct: &'static str| Request {
        method: "POST",
        url: "/sparql",
        content_type: Some(ct),
        body,
        ..Request::default()
    };
    let r = handle(
        &post(
            b"INSERT DATA { <http://example.org/carol> <http://example.org/knows> <http://example.org/alice> }",
            "application/sparql-update",
        ),
        &limits,
        &mut svc,
    );
    assert_eq!(r.status, 200, "{}", r.body_text());
    assert!(
        r.body_text().contains("1 triple inserted"),
        "{}",
        r.body_text()
    );
    let r = handle(
        &post(
            b"update=DELETE+DATA+%7B+%3Chttp%3A%2F%2Fexample.org%2Falice%3E+%3Chttp%3A%2F%2Fexample.org%2Fknows%3E+%3Chttp%3A%2F%2Fexample.org%2Fbob%3E+%7D",
            "application/x-www-form-urlencoded",
        ),
        &limits,
        &mut svc,
    );
    assert_eq!(r.status, 200, "{}", r.body_text());
    assert!(r.body_text().contains("1 deleted"), "{}", r.body_text());
    let r = handle(
        &Request {
            accept: Some("text/csv"),
            ..post(
                b"SELECT ?o WHERE { ?s <http://example.org/knows> ?o } ORDER BY ?o",
                "application/sparql-query",
            )
        },
        &limits,
        &mut svc,
    );
    assert_eq!(
        r.body_text(),
        "o\r\nhttp://example.org/alice\r\nhttp://example.org/carol\r\n"
    );
    let r = handle(
        &post(b"INSERT DATA { <http://a> ", "application/sparql-update"),
        &limits,
        &mut svc,
    );
    assert_eq!(r.status, 400);
    // The time limit bounds an update's WHERE part; nothing is written then.
    let zero = Limits {
        timeout_ms: 0,
        ..Limits::default()
    };
    let r = handle(
        &post(
            b"DELETE { ?s ?p ?o } WHERE { ?s ?p ?o }",
            "application/sparql-update",
        ),
        &zero,
        &mut svc,
    );
    assert_eq!(r.status, 503, "{}", r.body_text());
    let r = handle(
        &post(b"ASK { ?s ?p ?o }", "application/sparql-query"),
        &limits,
        &mut svc,
    );
    assert!(r.body_text().contains("true"));
}

#[test]
fn the_endpoint_loads_files_under_its_load_dir_only() {
    let dir = tempfile::tempdir().unwrap();
    let allowed = dir.path().join("ok");
    std::fs::create_dir(&allowed).unwrap();
    let nt = |p: &std::path::Path| {
        std::fs::write(
            p,
            "<http://example.org/x> <http://example.org/knows> <http://example.org/y> .\n",
        )
        .unwrap();
    };
    nt(&allowed.join("in.nt"));
    nt(&dir.path().join("out.nt"));
    let mut rdf = common::stores(DATA).swap_remove(0);
    let mut svc = StoreService::new(&mut rdf).unwrap();
    let load = |svc: &mut StoreService<'_, LocalFabric>, path: String| {
        let body = format!("LOAD <file://{path}>");
        let req = Request {
            method: "POST",
            url: "/sparql",
            content_type: Some("application/sparql-update"),
            body: body.as_bytes(),
            ..Request::default()
        };
        handle(&req, &Limits::default(), svc)
    };
    let inside = allowed.join("in.nt").display().to_string();
    let r = load(&mut svc, inside.clone());
    assert_eq!(r.status, 403, "no --load-dir: {}", r.body_text());
    svc.load_dir = Some(allowed.clone());
    let r = load(&mut svc, inside);
    assert_eq!(r.status, 200, "{}", r.body_text());
    for outside in [
        dir.path().join("out.nt").display().to_string(),
        format!("{}/../out.nt", allowed.display()),
        "/etc/passwd".to_string(),
    ] {
        let r = load(&mut svc, outside.clone());
        assert_eq!(r.status, 403, "{outside}: {}", r.body_text());
    }
}
