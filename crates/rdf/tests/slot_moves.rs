//! A dataset laid out by store slot stays queryable while slots move
//! (issue 59, requirement 6; `src/layout.rs`): loaded on 3 of 4 machines,
//! then a fourth machine takes its share of slots (a server added), then
//! machine 0 gives all of its slots away (a server removed). Every query
//! form (constant starts, index starts forked over the slots' owners,
//! variable predicates, paths, aggregates) answers as a store that never
//! moved, every key stays in its term's slot and so at the term's home,
//! and updates after the moves land at the keys' new homes.

mod common;

use locus_fabric::local::{LocalConfig, LocalFabric};
use locus_rdf::sparql::{Answer, Engine};
use locus_rdf::{Dataset, RdfStore};
use locus_store::{SlotTable, Store, Stores};

const PEOPLE: u32 = 150;
const ORGS: u32 = 9;

/// People who know each other, work for organisations, have ages; two classes.
fn data() -> String {
    let mut nt = String::new();
    let ex = "http://ex/";
    let ty = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type";
    for i in 0..PEOPLE {
        let class = if i % 3 == 0 { "Student" } else { "Person" };
        nt += &format!("<{ex}p{i}> <{ty}> <{ex}{class}> .\n");
        for j in [(i * 7 + 1) % PEOPLE, (i * 13 + 5) % PEOPLE] {
            nt += &format!("<{ex}p{i}> <{ex}knows> <{ex}p{j}> .\n");
        }
        nt += &format!("<{ex}p{i}> <{ex}worksFor> <{ex}org{}> .\n", i % ORGS);
        nt += &format!("<{ex}p{i}> <{ex}age> \"{}\" .\n", 20 + i % 40);
    }
    for o in 0..ORGS {
        nt += &format!("<{ex}org{o}> <{ty}> <{ex}Org> .\n");
    }
    nt
}

const P: &str = "PREFIX ex: <http://ex/> ";

fn queries() -> Vec<String> {
    [
        "SELECT ?x WHERE { ?x a ex:Student }",
        "SELECT ?x ?y WHERE { ?x ex:knows ?y . ?y a ex:Student }",
        "SELECT ?y WHERE { ex:p5 ex:knows ?y }",
        "SELECT ?x WHERE { ?x ex:worksFor ex:org3 }",
        "SELECT ?x ?z WHERE { ?x ex:knows ?y . ?y ex:knows ?z . ?z ex:worksFor ex:org1 }",
        "SELECT DISTINCT ?o WHERE { ?s ex:worksFor ?o }",
        "SELECT ?x ?z WHERE { ex:p0 ex:knows ?x . ?z a ex:Org }",
        "SELECT ?x ?p WHERE { ?x ?p ex:org2 }",
        "SELECT ?c WHERE { ex:p3 a ?c }",
        "SELECT ?y WHERE { ex:p1 ex:knows+ ?y }",
        "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }",
        "SELECT ?a (COUNT(?x) AS ?n) WHERE { ?x ex:age ?a } GROUP BY ?a",
        "ASK { ?x a ex:Org ; ex:knows ?y }",
    ]
    .iter()
    .map(|q| format!("{P}{q}"))
    .collect()
}

/// Every query's answer as sorted text rows.
fn answers(rdf: &RdfStore<LocalFabric>) -> Vec<Vec<String>> {
    let mut e = Engine::new(rdf).unwrap();
    queries()
        .iter()
        .map(|q| {
            let (a, _) = e.answer(q).unwrap_or_else(|err| panic!("{q}: {err}"));
            let mut rows: Vec<String> = match a {
                Answer::Solutions(s) => s.rows.iter().map(|r| format!("{r:?}")).collect(),
                Answer::Boolean(b) => vec![b.to_string()],
                Answer::Graph(g) => g.iter().map(|t| t.to_string()).collect(),
            };
            rows.sort();
            assert!(!rows.is_empty(), "{q} has rows");
            rows
        })
        .collect()
}

/// The data in a store of 4 machines whose slots start on machines 0..3
/// (room for a fourth server, as a cluster made for 3).
fn four_machines_three_serving(d: Dataset) -> RdfStore<LocalFabric> {
    let f = LocalFabric::new(LocalConfig {
        machines: 4,
        latency_ns: 0,
        bandwidth_bytes_per_s: 0,
        pin_memory: false,
        ..LocalConfig::default()
    })
    .unwrap();
    RdfStore::load_into(
        4,
        d,
        |mut c| -> locus_rdf::Result<Stores<LocalFabric>> {
            // Sized for 4 machines, the data sits on 3 (and after a move on 3 again).
            c.buckets_per_machine *= 2;
            c.overflow_buckets_per_machine *= 2;
            c.value_region_bytes *= 2;
            c.read_stall_ms = 60_000;
            let table = SlotTable::uniform_among(c.slots, 4, 3).unwrap();
            let s = Store::create(f, c)?;
            s.homes().set_initial(&table)?;
            Ok(Stores::from(s))
        },
        &(),
    )
    .unwrap()
}

/// Moves slots as `table.balance(members)` says, one at a time.
fn balance(rdf: &RdfStore<LocalFabric>, members: &[u8]) -> usize {
    let table = rdf.store().distinct()[0].homes().table();
    let moves = table.balance(members).unwrap();
    for m in &moves {
        rdf.store()
            .move_slot(m.slot, m.to, &mut |_, _| Ok(()))
            .unwrap_or_else(|e| panic!("moving slot {} to {}: {e}", m.slot, m.to));
    }
    moves.len()
}

/// Every stored key is in its term's slot, and the index part of slot `s`
/// is in slot `s` and lists only terms of slot `s`: so each is at the home
/// of the terms it is about, wherever their slot went.
fn keys_at_their_terms_home(rdf: &RdfStore<LocalFabric>) {
    let l = *rdf.layout();
    let table = rdf.store().distinct()[0].homes().table();
    let mut w = rdf.store().worker(1).unwrap();
    for &k in rdf.keys() {
        let slot = match l.decode(k).0 {
            Ok(id) => l.slot(id),
            Err(s) => {
                for t in w.get(k).unwrap().unwrap_or_default() {
                    assert_eq!(l.slot(t), s, "index part {k} ({:?}) lists {t}", l.decode(k));
                }
                s
            }
        };
        assert_eq!(table.slot_of(k), slot, "key {k} ({:?})", l.decode(k));
        assert_eq!(rdf.store().owner(k), table.owner_of_slot(slot).unwrap());
    }
}

#[test]
fn answers_survive_a_server_added_and_a_server_removed() {
    let d = Dataset::parse(data().as_bytes(), "people.nt", &()).unwrap();
    let reference = answers(&common::stores(&data())[0]);
    assert_eq!(
        reference[0].len() as u32,
        PEOPLE.div_ceil(3),
        "every student"
    );
    assert_eq!(
        reference[1].len() as u32,
        2 * PEOPLE.div_ceil(3),
        "knows a student"
    );
    let rdf = four_machines_three_serving(d);
    let _services = rdf.store().spawn_services().unwrap();
    let counts = |rdf: &RdfStore<LocalFabric>| rdf.store().distinct()[0].homes().table().counts();
    assert_eq!(counts(&rdf)[3], 0, "machine 3 starts with no slot");
    assert_eq!(answers(&rdf), reference, "as loaded");
    keys_at_their_terms_home(&rdf);

    // A server added: machine 3 takes its share.
    assert!(balance(&rdf, &[0, 1, 2, 3]) > 1000);
    assert_eq!(counts(&rdf)[3], 1024);
    assert_eq!(answers(&rdf), reference, "after machine 3 joined");
    keys_at_their_terms_home(&rdf);
    // A query from a constant runs where its slot went.
    let mut e = Engine::new(&rdf).unwrap();
    let on_three = (0..PEOPLE)
        .find(|i| {
            let id = rdf
                .dict()
                .id(&oxrdf::NamedNode::new(format!("http://ex/p{i}"))
                    .unwrap()
                    .into())
                .unwrap();
            rdf.home(id) == 3
        })
        .expect("a person homed on machine 3");
    let (_, trace) = e
        .answer(&format!(
            "{P}SELECT ?y WHERE {{ ex:p{on_three} ex:knows ?y }}"
        ))
        .unwrap();
    assert_eq!(trace.start, Some(3));
    drop(e);

    // A server removed: machine 0 gives all of its slots away.
    assert!(balance(&rdf, &[1, 2, 3]) > 1000);
    assert_eq!(counts(&rdf)[0], 0);
    assert_eq!(answers(&rdf), reference, "after machine 0 left");
    keys_at_their_terms_home(&rdf);
}

#[test]
fn updates_after_slot_moves_land_at_the_new_homes() {
    let d = Dataset::parse(data().as_bytes(), "people.nt", &()).unwrap();
    let mut rdf = four_machines_three_serving(d);
    let _services = rdf.store().spawn_services().unwrap();
    balance(&rdf, &[0, 1, 2, 3]);
    balance(&rdf, &[1, 2, 3]);
    let mut readers = rdf.workers().unwrap();
    let mut writers = rdf.workers().unwrap();
    let text = format!(
        "{P}INSERT DATA {{ ex:new a ex:Student ; ex:knows ex:p4 . ex:p4 ex:knows ex:new }} ; \
         DELETE DATA {{ ex:p0 a ex:Student . ex:p3 ex:worksFor ex:org3 }}"
    );
    let r = rdf
        .update(&text, &mut readers, &mut writers, 1 << 20)
        .unwrap();
    assert_eq!((r.inserted, r.deleted), (3, 2));
    let mut reference = common::stores(&data()).swap_remove(0);
    let mut readers = reference.workers().unwrap();
    let mut writers = reference.workers().unwrap();
    reference
        .update(&text, &mut readers, &mut writers, 1 << 20)
        .unwrap();
    assert_eq!(answers(&rdf), answers(&reference));
    keys_at_their_terms_home(&rdf);
}
