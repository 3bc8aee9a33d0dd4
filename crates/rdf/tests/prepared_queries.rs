//! A prepared query (one template, its start constant swapped per run, as the
//! SPARQL benchmark runs its classes) finds exactly the rows the engine finds
//! for the same query written out with that constant, on 1 and 8 machines;
//! it logs every key it reads; and a template the planner would not start at
//! its constant is refused.

use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_rdf::lubm::Lubm;
use locus_rdf::sparql::{Engine, Prepared};
use locus_rdf::{Dataset, RdfError, RdfStore};
use oxrdf::{NamedNode, Term};

const UB: &str = "http://swat.cse.lehigh.edu/onto/univ-bench.owl#";

fn store(d: &Dataset, machines: usize) -> RdfStore<LocalFabric> {
    let f = LocalFabric::new(LocalConfig {
        machines,
        latency_ns: 0,
        bandwidth_bytes_per_s: 0,
        pin_memory: false,
        ..LocalConfig::default()
    })
    .unwrap();
    RdfStore::load(f, d.clone(), |_| {}, &()).unwrap()
}

fn iri(s: &str) -> Term {
    Term::NamedNode(NamedNode::new(s).unwrap())
}

/// The template with `<START>` replaced by `start`.
fn text(template: &str, start: &str) -> String {
    format!(
        "PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#> PREFIX ub: <{UB}> {}",
        template.replace("START", start)
    )
}

#[test]
fn swapped_constants_find_the_rows_the_written_out_query_finds() {
    let (bytes, _) = Lubm {
        universities: 1,
        seed: 3,
    }
    .to_vec()
    .unwrap();
    let d = Dataset::parse(bytes.as_slice(), "lubm1.nt", &()).unwrap();
    let templates = [
        // Professors of a department with their attributes (object start).
        "SELECT ?X ?N WHERE { ?X ub:worksFor <START> . ?X rdf:type ub:FullProfessor . ?X ub:name ?N }",
        // A department's research groups.
        "SELECT ?X WHERE { ?X ub:subOrganizationOf <START> . ?X rdf:type ub:ResearchGroup }",
    ];
    let depts: Vec<String> = (0..6)
        .map(|i| format!("http://www.Department{i}.University0.edu"))
        .collect();
    for machines in [1, 8] {
        let rdf = store(&d, machines);
        let mut engine = Engine::new(&rdf).unwrap();
        let mut workers = rdf.workers().unwrap();
        for t in templates {
            let prepared =
                Prepared::new(rdf.catalog(), &text(t, &depts[0]), &iri(&depts[0])).unwrap();
            for dept in &depts {
                let id = rdf.dict().id(&iri(dept)).unwrap();
                let m = prepared.machine(&rdf, id);
                let mut log = Vec::new();
                let out = prepared
                    .run(rdf.catalog(), &mut workers[m], id, Some(&mut log))
                    .unwrap();
                let (want, trace) = engine.query(&text(t, dept)).unwrap();
                assert_eq!(
                    out.rows,
                    want.rows.len(),
                    "{machines} machines, {dept}, {t}"
                );
                assert!(out.rows > 0, "{dept} has rows for {t}");
                assert_eq!(out.reads, trace.reads, "{dept}: the same reads");
                assert_eq!(log.len() as u64, out.reads, "every read is logged");
                // The first key read is the constant's own list, homed with it.
                assert_eq!(rdf.home(id), m);
            }
        }
    }
}

#[test]
fn a_template_that_starts_elsewhere_or_names_a_missing_constant_is_refused() {
    let (bytes, _) = Lubm {
        universities: 1,
        seed: 3,
    }
    .to_vec()
    .unwrap();
    let d = Dataset::parse(bytes.as_slice(), "lubm1.nt", &()).unwrap();
    let rdf = store(&d, 4);
    let dept = "http://www.Department0.University0.edu";
    // The start named is not the query's constant: refused, naming the query.
    let e = Prepared::new(
        rdf.catalog(),
        &text("SELECT ?X WHERE { ?X ub:worksFor <START> }", dept),
        &iri("http://www.University0.edu"),
    )
    .unwrap_err();
    assert!(matches!(e, RdfError::Template(_)), "{e}");
    assert!(e.to_string().contains("start elsewhere"), "{e}");
    let e = Prepared::new(
        rdf.catalog(),
        &text(
            "SELECT ?X WHERE { ?X ub:worksFor <START> }",
            "http://nowhere",
        ),
        &iri("http://nowhere"),
    )
    .unwrap_err();
    assert!(e.to_string().contains("not in the data"), "{e}");
}
