//! Betweenness centrality by Brandes's algorithm, from a set of sources as
//! GAPBS's `bc.cc` runs it, on the streaming engine.
//!
//! Per source `s`: a forward BFS counts shortest paths (`sigma`), then the
//! dependencies `delta(u) = sum over successors v of sigma(u) / sigma(v) *
//! (1 + delta(v))` are accumulated level by level from the deepest, and
//! every vertex but `s` adds its `delta` to its score. Scores are Brandes's
//! raw sums over the sources (networkx's `normalized=False` on a directed
//! graph; GAPBS divides by the largest score and also adds the source's own
//! dependency, which Brandes excludes). Edges are taken as the grid holds
//! them: a duplicate edge is another path (`--symmetrize` gives the simple
//! undirected graph, both directions).
//!
//! On the grid: a forward level is one column pass over the frontier's
//! blocks (owned: the destination's depth and path count; read: the
//! frontier's path counts, frozen in `sigma_read`). A backward level is one
//! *row* pass whose read side is the level below (owned: each source's sum
//! of `(1 + delta(v)) / sigma(v)` over its successors `v`, read from
//! `coef`), so BC streams both block orders: twice the grid's bytes held,
//! far or local. Every sum has one writer and a fixed edge order, so the
//! scores are the same bits on every backend and thread count.
//!
//! Sources (`--sources`): `all` vertices; `N` sampled as GAPBS's
//! `SourcePicker` does, uniformly among vertices with an out-edge, with
//! repeats, from a seed (`--sources-seed`, GAPBS's 27491095 by default;
//! a SplitMix64 stream here, not GAPBS's `mt19937_64`, so the vertices
//! differ); or a list `V,V,...`.

use crate::bitmap::Bitmap;
use crate::engine::Engine;
use crate::error::{config_err, Result};
use crate::grid::Order;
use crate::vertex::VertexVec;

use super::{Output, Run, UNREACHED};

/// GAPBS's `kRandSeed`, the default seed of the source sample.
pub const BC_SEED_DEFAULT: u64 = 27_491_095;

/// Which sources BC runs from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Sources {
    /// Every vertex.
    All,
    /// This many, sampled (module doc).
    Sample(u32),
    /// These vertices.
    List(Vec<u32>),
    /// One source: `--root`, else the vertex with the most out-edges.
    #[default]
    Root,
}

impl Sources {
    /// Parses `all`, a count, or a comma-separated list of vertices.
    pub fn parse(s: &str) -> Result<Sources> {
        if s.eq_ignore_ascii_case("all") {
            return Ok(Sources::All);
        }
        if !s.contains(',') {
            if let Ok(n) = s.parse::<u32>() {
                if n == 0 {
                    return Err(config_err("sources", "a count of 0 sources"));
                }
                return Ok(Sources::Sample(n));
            }
        }
        let list = s
            .split(',')
            .map(|t| t.trim().parse::<u32>())
            .collect::<std::result::Result<Vec<u32>, _>>()
            .map_err(|_| {
                config_err(
                    "sources",
                    format!("'{s}' is not all, a count, or vertices V,V,..."),
                )
            })?;
        Ok(Sources::List(list))
    }
}

/// `count` sources drawn uniformly among the vertices with an out-edge, with
/// repeats, from `seed` (GAPBS's `SourcePicker` rule). Empty if no vertex
/// has an out-edge.
pub fn sample_sources(out_degree: &[u32], count: u32, seed: u64) -> Vec<u32> {
    let n = out_degree.len() as u64;
    if n == 0 || out_degree.iter().all(|&d| d == 0) {
        return Vec::new();
    }
    let mut state = seed;
    let mut next = || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut out = Vec::with_capacity(count as usize);
    while out.len() < count as usize {
        let v = (next() % n) as u32;
        if out_degree[v as usize] > 0 {
            out.push(v);
        }
    }
    out
}

/// Brandes from each of `sources` (module doc).
pub fn bc(engine: &Engine<'_>, sources: &[u32]) -> Result<Run> {
    let n = engine.vertex_count() as usize;
    if let Some(&s) = sources.iter().find(|&&s| s as usize >= n) {
        return Err(config_err(
            "sources",
            format!("vertex {s} is not below the vertex count {n}"),
        ));
    }
    let mut score = VertexVec::filled(0.0f64, n);
    let mut iterations = 0u32;
    for &s in sources {
        iterations += one_source(engine, s, &mut score)?;
    }
    Ok(Run {
        output: Output::Bc {
            sources: sources.to_vec(),
            score: score.to_vec(),
        },
        iterations,
    })
}

/// Adds source `s`'s dependencies to `score`; returns the edge passes.
fn one_source(engine: &Engine<'_>, s: u32, score: &mut [f64]) -> Result<u32> {
    let n = engine.vertex_count() as usize;
    // (depth, path count), owned by the destination in the forward passes.
    let mut state = VertexVec::filled((UNREACHED, 0.0f64), n);
    let mut sigma_read = VertexVec::filled(0.0f64, n);
    state[s as usize] = (0, 1.0);
    sigma_read[s as usize] = 1.0;
    let mut levels: Vec<Bitmap> = Vec::new();
    let mut frontier = Bitmap::new(n as u64);
    frontier.set(u64::from(s));
    let mut passes = 0u32;
    loop {
        let next = levels.len() as u32 + 1;
        let sr = &sigma_read;
        engine.stream_edges(Order::Column, Some(&frontier), &mut state, |u, _, st| {
            if st.0 == UNREACHED || st.0 == next {
                st.0 = next;
                st.1 += sr[u as usize];
            }
        })?;
        passes += 1;
        let st = &state;
        let reached = engine.vertex_bitmap(|x| st[x as usize].0 == next);
        levels.push(std::mem::replace(&mut frontier, reached));
        if frontier.count() == 0 {
            break;
        }
        let f = &frontier;
        engine.stream_vertices(&mut sigma_read, |x, r| {
            if f.get(u64::from(x)) {
                *r = st[x as usize].1;
            }
            0u64
        });
    }
    // Backward: levels[k] holds the vertices at depth k.
    let mut coef = VertexVec::filled(0.0f64, n);
    let mut acc = VertexVec::filled(0.0f64, n);
    let st = &state;
    let deepest = levels.len() - 1;
    let lvl = &levels[deepest];
    engine.stream_vertices(&mut coef, |x, c| {
        if lvl.get(u64::from(x)) {
            *c = 1.0 / st[x as usize].1;
        }
        0u64
    });
    for depth in (0..deepest).rev() {
        let d = depth as u32;
        let (c, below) = (&coef, &levels[depth + 1]);
        engine.stream_edges(Order::Row, Some(below), &mut acc, |u, v, a| {
            if st[u as usize].0 == d {
                *a += c[v as usize];
            }
        })?;
        passes += 1;
        let here = &levels[depth];
        engine.stream_vertices3(&mut acc, &mut coef, score, |x, a, c, sc| {
            if here.get(u64::from(x)) {
                let sigma = st[x as usize].1;
                let delta = sigma * *a;
                if x != s {
                    *sc += delta;
                }
                *c = (1.0 + delta) / sigma;
                *a = 0.0;
            }
            0u64
        });
    }
    Ok(passes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_parse_and_sample_like_gapbs() {
        assert_eq!(Sources::parse("all").unwrap(), Sources::All);
        assert_eq!(Sources::parse("4").unwrap(), Sources::Sample(4));
        assert_eq!(Sources::parse("4,7").unwrap(), Sources::List(vec![4, 7]));
        assert!(Sources::parse("9,").is_err());
        assert!(Sources::parse("0").is_err());
        let deg = [0, 3, 0, 1, 0];
        let a = sample_sources(&deg, 50, BC_SEED_DEFAULT);
        assert_eq!(a.len(), 50);
        assert!(a.iter().all(|&v| deg[v as usize] > 0));
        assert!(a.contains(&1) && a.contains(&3));
        assert_eq!(a, sample_sources(&deg, 50, BC_SEED_DEFAULT));
        assert_ne!(a, sample_sources(&deg, 50, 1));
        assert!(sample_sources(&[0, 0], 3, 1).is_empty());
    }
}
