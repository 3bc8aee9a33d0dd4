//! The LUBM generator: deterministic for a seed, UBA's counts, valid N-Triples.

use locus_rdf::lubm::Lubm;
use locus_rdf::Dataset;

#[test]
fn same_seed_same_bytes_other_seed_other_bytes() {
    let a = Lubm {
        universities: 1,
        seed: 7,
    }
    .to_vec()
    .unwrap();
    let b = Lubm {
        universities: 1,
        seed: 7,
    }
    .to_vec()
    .unwrap();
    let c = Lubm {
        universities: 1,
        seed: 8,
    }
    .to_vec()
    .unwrap();
    assert_eq!(a, b);
    assert_ne!(a.0, c.0);
    // University 0 of LUBM-2 is University 0 of LUBM-1: one stream per university.
    let two = Lubm {
        universities: 2,
        seed: 7,
    }
    .to_vec()
    .unwrap();
    assert!(two.0.starts_with(&a.0));
}

#[test]
fn counts_are_within_uba_ranges() {
    for seed in 0..4 {
        let (bytes, c) = Lubm {
            universities: 2,
            seed,
        }
        .to_vec()
        .unwrap();
        let d = c.departments;
        assert!((30..=50).contains(&d), "{d} departments");
        for (r, (lo, hi)) in [(7, 10), (10, 14), (8, 11), (5, 7)].into_iter().enumerate() {
            assert!((lo * d..=hi * d).contains(&c.faculty[r]), "rank {r}: {c:?}");
        }
        let faculty: u64 = c.faculty.iter().sum();
        assert!(
            (8 * faculty..=14 * faculty).contains(&c.undergraduates),
            "{c:?}"
        );
        assert!((3 * faculty..=4 * faculty).contains(&c.graduates), "{c:?}");
        assert!((faculty..=2 * faculty).contains(&c.courses[0]), "{c:?}");
        assert!((faculty..=2 * faculty).contains(&c.courses[1]), "{c:?}");
        assert!((10 * d..=20 * d).contains(&c.research_groups), "{c:?}");
        assert!(
            c.teaching_assistants >= c.graduates / 5 - d
                && c.teaching_assistants <= c.graduates / 4
        );
        assert!(
            c.research_assistants >= c.graduates / 4 - d
                && c.research_assistants <= c.graduates / 3
        );
        let pubs_min = 15 * c.faculty[0] + 10 * c.faculty[1] + 5 * c.faculty[2];
        let pubs_max = 20 * c.faculty[0] + 18 * c.faculty[1] + 10 * c.faculty[2] + 5 * c.faculty[3];
        assert!((pubs_min..=pubs_max).contains(&c.publications), "{c:?}");
        // LUBM-1 is about 100,000 triples in UBA.
        assert!(
            (150_000..=330_000).contains(&c.triples),
            "{} triples",
            c.triples
        );
        let parsed = Dataset::parse(&bytes[..], "lubm.nt", &()).unwrap();
        assert_eq!(
            parsed.triples.len() as u64,
            c.triples,
            "no duplicates, all valid"
        );
        let text = String::from_utf8(bytes).unwrap();
        assert_eq!(
            text.matches("#headOf>").count() as u64,
            d,
            "one chair per department"
        );
    }
}

#[test]
fn settings_out_of_range_are_errors() {
    let e = Lubm {
        universities: 0,
        seed: 1,
    }
    .to_vec()
    .unwrap_err()
    .to_string();
    assert!(e.contains("universities = 0"), "{e}");
}
