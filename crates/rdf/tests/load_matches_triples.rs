//! Every list the loader stores equals the one a naive model builds from the
//! triples, on 1, 3 and 8 machines, and every key lives on its term's home.

use std::collections::{BTreeMap, BTreeSet};

use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_rdf::layout::{IN, OUT};
use locus_rdf::{Dataset, RdfStore};
use locus_store::home_of;

const DATA: &str = r#"
<http://ex/alice> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://ex/Person> .
<http://ex/bob> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://ex/Person> .
<http://ex/bob> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://ex/Student> .
<http://ex/alice> <http://ex/knows> <http://ex/bob> .
<http://ex/bob> <http://ex/knows> <http://ex/carol> .
<http://ex/carol> <http://ex/knows> <http://ex/alice> .
<http://ex/alice> <http://ex/name> "Alice" .
<http://ex/bob> <http://ex/name> "Bob"@en .
<http://ex/carol> <http://ex/age> "42"^^<http://www.w3.org/2001/XMLSchema#integer> .
_:x <http://ex/knows> <http://ex/alice> .
<http://ex/Person> <http://ex/knows> <http://ex/alice> .
"#;

fn fabric(machines: usize) -> LocalFabric {
    LocalFabric::new(LocalConfig {
        machines,
        latency_ns: 0,
        bandwidth_bytes_per_s: 0,
        pin_memory: false,
        ..LocalConfig::default()
    })
    .unwrap()
}

#[test]
fn stored_lists_equal_the_naive_model() {
    let d = Dataset::parse(DATA.as_bytes(), "data.nt", &()).unwrap();
    assert_eq!(d.triples.len(), 11);
    for machines in [1, 3, 8] {
        let rdf = RdfStore::load(fabric(machines), d.clone(), |_| {}, &()).unwrap();
        let l = *rdf.layout();
        let tp = rdf.type_pt().unwrap();
        // The model: lists keyed by (term or index slot, pt, dir).
        let mut model: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
        for &[s, p, o] in &d.triples {
            model.entry(l.normal(s, p, OUT)).or_default().insert(o);
            model
                .entry(l.index(l.slot(s), p, OUT))
                .or_default()
                .insert(s);
            model
                .entry(l.index(l.slot(o), p, IN))
                .or_default()
                .insert(o);
            if p == tp {
                let c = rdf.dict().type_pt(o).unwrap();
                model
                    .entry(l.index(l.slot(s), c, OUT))
                    .or_default()
                    .insert(s);
            } else {
                model.entry(l.normal(o, p, IN)).or_default().insert(s);
            }
        }
        assert_eq!(rdf.report().keys, model.len() as u64);
        let mut workers = rdf.workers().unwrap();
        for (&key, want) in &model {
            // Read from a machine that is not the home, too: any machine sees every key.
            let home = home_of(key, machines) as usize;
            for m in [home, (home + 1) % machines] {
                let got = workers[m].get(key).unwrap().expect("stored");
                let want: Vec<u32> = want.iter().copied().collect();
                assert_eq!(
                    got,
                    want,
                    "key {key} ({:?}) on {machines} machines",
                    l.decode(key)
                );
            }
        }
        // Keys not in the model are absent (the class's own rdf:type-in list is the type index).
        let person = rdf
            .dict()
            .id(&oxrdf::Term::NamedNode(
                oxrdf::NamedNode::new("http://ex/Person").unwrap(),
            ))
            .unwrap();
        assert_eq!(workers[0].get(l.normal(person, tp, IN)).unwrap(), None);
        assert_eq!(
            rdf.stats().subjects[rdf.dict().type_pt(person).unwrap() as usize],
            2
        );
    }
}
