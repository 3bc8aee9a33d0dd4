//! The R-MAT generator is deterministic, thread-count independent, Graph500-shaped
//! (skewed degrees, quadrant frequencies a/b/c/d), and its relabelling is a bijection.

use std::sync::Mutex;

use locus_graph::rmat::EDGES_PER_CHUNK;
use locus_graph::{Csr, CsrOptions, Edge, FeistelPermutation, Rmat, RmatConfig};

fn rmat(scale: u32, edge_factor: u32, seed: u64, permute: bool) -> Rmat {
    Rmat::new(RmatConfig {
        scale,
        edge_factor,
        seed,
        permute,
        ..RmatConfig::default()
    })
    .expect("valid config")
}

fn all_edges(r: &Rmat) -> Vec<Edge> {
    (0..r.edge_count()).map(|i| r.edge(i)).collect()
}

fn edges_via_chunks(r: &Rmat, threads: usize) -> Vec<Edge> {
    let chunks: Mutex<Vec<(u64, Vec<Edge>)>> = Mutex::new(Vec::new());
    r.for_each_chunk(threads, |k, edges| {
        chunks.lock().expect("no panics").push((k, edges.to_vec()));
    });
    let mut chunks = chunks.into_inner().expect("no panics");
    chunks.sort_by_key(|(k, _)| *k);
    for (j, (k, edges)) in chunks.iter().enumerate() {
        assert_eq!(*k, j as u64, "every chunk exactly once");
        assert!(edges.len() as u64 <= EDGES_PER_CHUNK);
    }
    chunks.into_iter().flat_map(|(_, e)| e).collect()
}

#[test]
fn counts_follow_scale_and_edge_factor() {
    let r = rmat(10, 3, 1, true);
    assert_eq!(r.vertex_count(), 1024);
    assert_eq!(r.edge_count(), 3072);
    let big = RmatConfig {
        scale: 30,
        edge_factor: u32::MAX,
        ..RmatConfig::default()
    };
    assert_eq!(
        big.edge_count(),
        u64::from(u32::MAX) << 30,
        "edge count is u64"
    );
}

#[test]
fn same_seed_same_edges_other_seed_other_edges() {
    let a = all_edges(&rmat(11, 8, 99, true));
    let b = all_edges(&rmat(11, 8, 99, true));
    let c = all_edges(&rmat(11, 8, 100, true));
    assert_eq!(a, b);
    let same = a.iter().zip(&c).filter(|(x, y)| x == y).count();
    assert!(
        same < a.len() / 10,
        "{same} of {} edges equal across seeds",
        a.len()
    );
}

#[test]
fn thread_count_does_not_change_edges() {
    let r = rmat(13, 20, 5, true); // 163840 edges: 3 chunks, the last one short
    let reference = all_edges(&r);
    for threads in [1, 2, 3, 8] {
        assert_eq!(
            edges_via_chunks(&r, threads),
            reference,
            "threads = {threads}"
        );
    }
}

#[test]
fn csr_is_identical_for_any_thread_count() {
    let r = rmat(12, 16, 3, true);
    let one =
        Csr::build_with_threads(r.vertex_count(), CsrOptions::default(), &r, 1).expect("build");
    let four =
        Csr::build_with_threads(r.vertex_count(), CsrOptions::default(), &r, 4).expect("build");
    assert_eq!(one, four);
}

#[test]
fn degrees_are_skewed_at_scale_14() {
    let r = rmat(14, 16, 1, true);
    let csr = Csr::from_rmat(&r, CsrOptions::default()).expect("build");
    let mean = csr.edge_count() as f64 / csr.vertex_count() as f64;
    let max = csr.max_degree() as f64;
    assert!(max > 30.0 * mean, "max degree {max} vs mean {mean}");
    let isolated = (0..csr.vertex_count() as u32)
        .filter(|&v| csr.degree(v) == 0)
        .count();
    assert!(isolated > 0, "R-MAT leaves some vertices isolated");
}

#[test]
fn quadrant_frequencies_match_a_b_c_d() {
    let cfg = RmatConfig {
        scale: 10,
        edge_factor: 16,
        a: 0.45,
        b: 0.22,
        c: 0.15,
        seed: 11,
        permute: false,
    };
    let r = Rmat::new(cfg).expect("valid");
    // Tally the quadrant chosen at every level of every edge: 163840 samples.
    let mut counts = [0u64; 4];
    for (s, d) in all_edges(&r) {
        for level in 0..cfg.scale {
            let q = (((s >> level) & 1) << 1) | ((d >> level) & 1);
            counts[q as usize] += 1;
        }
    }
    let total: u64 = counts.iter().sum();
    let want = [cfg.a, cfg.b, cfg.c, cfg.d()];
    for (q, (&n, p)) in counts.iter().zip(want).enumerate() {
        let freq = n as f64 / total as f64;
        // Binomial standard deviation is about 0.0012 here; allow several.
        assert!((freq - p).abs() < 0.006, "quadrant {q}: {freq} vs {p}");
    }
}

#[test]
fn permutation_only_relabels() {
    let plain = rmat(9, 4, 21, false);
    let permuted = rmat(9, 4, 21, true);
    let p = FeistelPermutation::new(9, 21);
    for i in 0..plain.edge_count() {
        let (s, d) = plain.edge(i);
        let expected = (p.apply(s.into()) as u32, p.apply(d.into()) as u32);
        assert_eq!(permuted.edge(i), expected);
    }
}

#[test]
fn permutation_is_a_bijection() {
    for bits in 1..=14 {
        for seed in [0, 1, 0xDEAD_BEEF] {
            let p = FeistelPermutation::new(bits, seed);
            let n = p.domain_size();
            let mut seen = vec![false; n as usize];
            for x in 0..n {
                let y = p.apply(x);
                assert!(y < n, "bits {bits}: {x} -> {y} out of range");
                assert!(!seen[y as usize], "bits {bits} seed {seed}: {y} hit twice");
                seen[y as usize] = true;
            }
        }
    }
}

#[test]
fn permutation_depends_on_the_seed() {
    let p = FeistelPermutation::new(12, 1);
    let q = FeistelPermutation::new(12, 2);
    let fixed_points = (0..4096).filter(|&x| p.apply(x) == q.apply(x)).count();
    assert!(fixed_points < 50, "{fixed_points}");
}
