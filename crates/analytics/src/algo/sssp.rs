//! Single-source shortest paths by delta-stepping (Meyer and Sanders), as
//! GAPBS's `sssp.cc` runs it, on the streaming engine.
//!
//! Vertices are binned by `distance / delta`. The current bin's vertices
//! relax *all* their out-edges (GAPBS does not split light and heavy
//! edges); a vertex whose distance drops joins the bin of its new distance,
//! the current one included, so the current bin is processed until it is
//! empty, then the lowest non-empty bin is next. Weights are non-negative,
//! so a relaxation from bin `b` never lands below bin `b`.
//!
//! On the grid. A bin's round is one column pass with the bin's vertices as
//! the active set (selective scheduling and stripe skipping fetch only
//! their blocks and stripes): the owned side is the destination's distance,
//! and the source's side is read from `done`, the distance at which each
//! vertex last relaxed its edges, which only vertex passes write. A vertex
//! is *pending* while its distance is below its `done`; a round's frontier
//! is the pending vertices of the current bin, whose `done` is set to their
//! distance just before their edges are streamed. Each destination is
//! written by the one thread owning its column and distances only fall to
//! the unique shortest ones, so the result does not depend on the thread
//! count or the backend.
//!
//! Distances are u32 (GAPBS's are 32-bit ints). A relaxation saturates at
//! [`TOO_FAR`] (`u32::MAX - 1`; `u32::MAX` is [`UNREACHED`]), which no
//! shorter path can be, so a vertex whose shortest distance does not fit
//! ends at `TOO_FAR` and the run is an error naming it; a long path that a
//! shorter one beats is no error.

use crate::bitmap::Bitmap;
use crate::engine::Engine;
use crate::error::{config_err, Result};
use crate::grid::Order;
use crate::vertex::VertexVec;

use super::{Output, Run, ITERATIONS_MAX, UNREACHED};

/// GAPBS's default delta (`-d`, 1).
pub const SSSP_DELTA_DEFAULT: u32 = 1;
/// Where a relaxation saturates: a distance this large does not fit.
pub const TOO_FAR: u32 = UNREACHED - 1;

/// The smallest of the values folded (identity `u64::MAX`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Min(u64);

impl Default for Min {
    fn default() -> Min {
        Min(u64::MAX)
    }
}

impl std::ops::Add for Min {
    type Output = Min;
    fn add(self, o: Min) -> Min {
        Min(self.0.min(o.0))
    }
}

/// Delta-stepping from `root` with bins `delta` wide.
pub fn sssp(engine: &Engine<'_>, root: u32, delta: u32) -> Result<Run> {
    if delta == 0 {
        return Err(config_err("delta", "must be at least 1"));
    }
    let n = engine.vertex_count() as usize;
    let delta = u64::from(delta);
    let mut dist = VertexVec::filled(UNREACHED, n);
    let mut done = VertexVec::filled(UNREACHED, n);
    dist[root as usize] = 0;
    let mut bin = 0u64;
    let mut rounds = 0u32;
    loop {
        let (d, b) = (&dist, bin);
        let frontier: Bitmap = engine.vertex_bitmap(|x| {
            let dx = d[x as usize];
            dx < done[x as usize] && u64::from(dx) / delta == b
        });
        if frontier.count() == 0 {
            // The lowest bin with a pending vertex, if any.
            let next = engine.stream_vertices(&mut done, |x, dn| {
                let dx = d[x as usize];
                Min(if dx < *dn {
                    u64::from(dx) / delta
                } else {
                    u64::MAX
                })
            });
            if next.0 == u64::MAX {
                break;
            }
            bin = next.0;
            continue;
        }
        let f = &frontier;
        engine.stream_vertices(&mut done, |x, dn| {
            if f.get(u64::from(x)) {
                *dn = d[x as usize];
            }
            0u64
        });
        let dn = &done;
        engine.stream_weighted_edges(
            Order::Column,
            Some(&frontier),
            &mut dist,
            |s, _, w, dd| {
                let nd = dn[s as usize].saturating_add(w).min(TOO_FAR);
                if nd < *dd {
                    *dd = nd;
                }
            },
        )?;
        rounds += 1;
        if rounds >= ITERATIONS_MAX {
            return Err(config_err(
                "delta",
                format!("{ITERATIONS_MAX} rounds without settling: give a larger --delta"),
            ));
        }
    }
    if let Some(v) = dist.iter().position(|&d| d == TOO_FAR) {
        return Err(config_err(
            "weights",
            format!(
                "the shortest path from {root} to vertex {v} weighs {TOO_FAR} or more, \
                 past the 32-bit distances"
            ),
        ));
    }
    Ok(Run {
        output: Output::Sssp {
            root,
            dist: dist.to_vec(),
        },
        iterations: rounds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::{GraphInput, Grid, GridOptions};
    use crate::store::local::LocalStore;
    use crate::EngineConfig;

    fn run(n: u64, edges: &[(u32, u32)], w: &[u32], root: u32, delta: u32, p: u32) -> Vec<u32> {
        let grid = Grid::build_with(
            GraphInput::Weighted {
                vertex_count: n,
                edges,
                weights: w,
            },
            &GridOptions {
                partitions: Some(p),
                stripe_ids: 2,
                ..GridOptions::default()
            },
        )
        .unwrap();
        assert!(grid.weighted());
        let store = LocalStore::new(&grid, &[Order::Column]).unwrap();
        let cfg = EngineConfig {
            threads: 3,
            buffering: true,
        };
        let engine = Engine::new(&store, cfg).unwrap();
        match sssp(&engine, root, delta).unwrap().output {
            Output::Sssp { dist, .. } => dist,
            o => panic!("{o:?}"),
        }
    }

    #[test]
    fn a_heavy_direct_edge_loses_to_a_light_detour_for_every_delta() {
        // 0 -> 3 weighs 10; 0 -> 1 -> 2 -> 3 weighs 3; 4 is unreachable; 5 via a zero weight.
        let e = [(0, 3), (0, 1), (1, 2), (2, 3), (3, 5), (4, 0)];
        let w = [10, 1, 1, 1, 0, 1];
        for delta in [1, 2, 3, 7, 100] {
            for p in [1, 2, 4] {
                assert_eq!(
                    run(6, &e, &w, 0, delta, p),
                    vec![0, 1, 2, 3, UNREACHED, 3],
                    "delta {delta}, {p} partitions"
                );
            }
        }
    }

    #[test]
    fn matches_dijkstra_on_a_random_graph() {
        let n = 300u32;
        let mut x = 12345u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let edges: Vec<(u32, u32)> = (0..2000)
            .map(|_| ((next() % n as u64) as u32, (next() % n as u64) as u32))
            .collect();
        let w: Vec<u32> = (0..edges.len()).map(|_| (next() % 50) as u32).collect();
        let want = crate::reference::sssp(n as usize, &edges, &w, 7);
        for delta in [1, 4, 25, 1000] {
            assert_eq!(
                run(u64::from(n), &edges, &w, 7, delta, 5),
                want,
                "delta {delta}"
            );
        }
        assert!(want.iter().filter(|&&d| d != UNREACHED).count() > 100);
    }

    #[test]
    fn zero_delta_and_overflow_are_refused() {
        let grid = Grid::build_with(
            GraphInput::Weighted {
                vertex_count: 3,
                edges: &[(0, 1), (1, 2)],
                weights: &[u32::MAX - 1, 5],
            },
            &GridOptions::default(),
        )
        .unwrap();
        let store = LocalStore::new(&grid, &[Order::Column]).unwrap();
        let engine = Engine::new(&store, EngineConfig::default()).unwrap();
        assert!(sssp(&engine, 0, 0)
            .unwrap_err()
            .to_string()
            .contains("delta"));
        let e = sssp(&engine, 0, 1).unwrap_err().to_string();
        assert!(e.contains("32-bit") && e.contains("vertex 1"), "{e}");
        // A path too long to fit is no error when a shorter one wins.
        let grid = Grid::build_with(
            GraphInput::Weighted {
                vertex_count: 3,
                edges: &[(0, 1), (0, 2), (2, 1)],
                weights: &[u32::MAX, 5, 6],
            },
            &GridOptions::default(),
        )
        .unwrap();
        let store = LocalStore::new(&grid, &[Order::Column]).unwrap();
        let engine = Engine::new(&store, EngineConfig::default()).unwrap();
        let out = sssp(&engine, 0, 1).unwrap().output;
        assert_eq!(
            out,
            Output::Sssp {
                root: 0,
                dist: vec![0, 11, 5]
            }
        );
    }
}
