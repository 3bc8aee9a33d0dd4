//! The CSR builder agrees with a naive reference (a sorted multiset or a `BTreeSet` per
//! vertex) on random graphs, for every combination of options and several thread
//! counts, and an R-MAT source gives the same CSR as its materialised edge list.

use std::collections::BTreeSet;

use locus_graph::{Csr, CsrOptions, Edge, GraphError, Rmat, RmatConfig, VertexId};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn random_graph(seed: u64, n: u32, m: usize) -> Vec<Edge> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..m)
        .map(|_| {
            // A small hot set makes duplicates and self loops common.
            if rng.gen_bool(0.3) {
                (rng.gen_range(0..n.min(4)), rng.gen_range(0..n.min(4)))
            } else {
                (rng.gen_range(0..n), rng.gen_range(0..n))
            }
        })
        .collect()
}

fn reference(n: u32, edges: &[Edge], opts: CsrOptions) -> Vec<Vec<VertexId>> {
    let mut lists = vec![Vec::new(); n as usize];
    for &(u, v) in edges {
        if u == v && opts.drop_self_loops {
            continue;
        }
        lists[u as usize].push(v);
        if opts.symmetrize && u != v {
            lists[v as usize].push(u);
        }
    }
    for list in &mut lists {
        if opts.dedup {
            *list = list
                .iter()
                .copied()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
        } else {
            list.sort_unstable();
        }
    }
    lists
}

fn all_options() -> Vec<CsrOptions> {
    let mut out = Vec::new();
    for bits in 0..8 {
        out.push(CsrOptions {
            symmetrize: bits & 1 != 0,
            dedup: bits & 2 != 0,
            drop_self_loops: bits & 4 != 0,
        });
    }
    out
}

fn assert_matches(csr: &Csr, expected: &[Vec<VertexId>], what: &str) {
    assert_eq!(csr.vertex_count(), expected.len() as u64, "{what}");
    let total: usize = expected.iter().map(Vec::len).sum();
    assert_eq!(csr.edge_count(), total as u64, "{what}");
    let max = expected.iter().map(Vec::len).max().unwrap_or(0);
    assert_eq!(csr.max_degree(), max as u64, "{what}");
    for (v, list) in expected.iter().enumerate() {
        assert_eq!(
            csr.neighbors(v as VertexId),
            list.as_slice(),
            "{what}: vertex {v}"
        );
        assert_eq!(
            csr.degree(v as VertexId),
            list.len() as u64,
            "{what}: vertex {v}"
        );
    }
}

#[test]
fn matches_reference_on_random_graphs() {
    let shapes = [(1u32, 10usize), (5, 40), (50, 300), (300, 150_000)];
    for (seed, &(n, m)) in shapes.iter().enumerate() {
        let edges = random_graph(seed as u64, n, m);
        for opts in all_options() {
            let expected = reference(n, &edges, opts);
            for threads in [1, 3] {
                let csr = Csr::build_with_threads(u64::from(n), opts, &edges, threads)
                    .expect("valid graph");
                assert_matches(
                    &csr,
                    &expected,
                    &format!("n={n} m={m} {opts:?} t={threads}"),
                );
            }
        }
    }
}

#[test]
fn isolated_vertices_beyond_the_largest_id() {
    let edges: Vec<Edge> = vec![(0, 1)];
    let csr = Csr::build(10, CsrOptions::default(), &edges).expect("valid");
    assert_eq!(csr.vertex_count(), 10);
    assert_eq!(csr.offsets().len(), 11);
    assert!(csr.neighbors(9).is_empty());
}

#[test]
fn rejects_ids_at_the_vertex_count() {
    let edges: Vec<Edge> = vec![(0, 1), (1, 4)];
    let err = Csr::build(4, CsrOptions::default(), &edges).expect_err("4 is out of range");
    assert!(
        matches!(
            err,
            GraphError::EdgeOutOfRange {
                src: 1,
                dst: 4,
                vertex_count: 4
            }
        ),
        "{err:?}"
    );
}

#[test]
fn rmat_source_equals_its_materialised_edges() {
    let r = Rmat::new(RmatConfig {
        scale: 11,
        edge_factor: 16,
        seed: 8,
        ..RmatConfig::default()
    })
    .expect("valid");
    let edges: Vec<Edge> = (0..r.edge_count()).map(|i| r.edge(i)).collect();
    for opts in all_options() {
        let from_generator = Csr::from_rmat(&r, opts).expect("build");
        let from_list = Csr::build(r.vertex_count(), opts, &edges).expect("build");
        assert_eq!(from_generator, from_list, "{opts:?}");
    }
}
