//! PageRank on the streaming engine, in f64 or f32 (see [`super::Precision`]).

use crate::engine::Engine;
use crate::error::{config_err, Result};
use crate::vertex::{VertexValue, VertexVec};

use super::{Output, Run, ITERATIONS_MAX, PAGERANK_DAMPING};

/// A PageRank value type: f64 (the reference's) or f32.
pub(super) trait Rank: Copy + Send + Sync + Default + VertexValue {
    fn from_f64(x: f64) -> Self;
    fn to_f64(self) -> f64;
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn div(self, o: Self) -> Self;
}

impl Rank for f64 {
    #[inline(always)]
    fn from_f64(x: f64) -> f64 {
        x
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self
    }
    #[inline(always)]
    fn add(self, o: f64) -> f64 {
        self + o
    }
    #[inline(always)]
    fn mul(self, o: f64) -> f64 {
        self * o
    }
    #[inline(always)]
    fn div(self, o: f64) -> f64 {
        self / o
    }
}

impl Rank for f32 {
    #[inline(always)]
    fn from_f64(x: f64) -> f32 {
        x as f32
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    #[inline(always)]
    fn add(self, o: f32) -> f32 {
        self + o
    }
    #[inline(always)]
    fn mul(self, o: f32) -> f32 {
        self * o
    }
    #[inline(always)]
    fn div(self, o: f32) -> f32 {
        self / o
    }
}

/// Three sums folded at once by a vertex pass: the dangling mass, the
/// total of the ranks, and their L1 change from the last iteration, in f64.
#[derive(Clone, Copy, Default)]
struct Sums {
    dangling: f64,
    total: f64,
    change: f64,
}

impl std::ops::Add for Sums {
    type Output = Sums;
    fn add(self, o: Sums) -> Sums {
        Sums {
            dangling: self.dangling + o.dangling,
            total: self.total + o.total,
            change: self.change + o.change,
        }
    }
}

/// PageRank with values of type `T` (issue 12, requirement 2): one column
/// pass per iteration summing each destination's in-edges in a register
/// ([`Engine::fold_edges`]), and one fused vertex pass that turns the sums
/// into ranks, clears them, and computes the next iteration's contributions,
/// dangling mass and the ranks' total together. In f64 every operation and
/// its order are those of the plain form (contributions; edge sums; ranks;
/// total; normalise), so the result is bit-for-bit the same.
///
/// With a `tolerance` it stops, as GAPBS's PageRank does, after the first
/// iteration whose ranks moved by less than it in the L1 norm (the sum of
/// `|new - old|` over the vertices), or after `iterations` at most; the
/// run reports how many it did.
pub(super) fn pagerank<T: Rank>(
    engine: &Engine<'_>,
    out_degree: &[u32],
    iterations: u32,
    tolerance: Option<f64>,
) -> Result<Run> {
    if let Some(t) = tolerance.filter(|t| !(t.is_finite() && *t > 0.0)) {
        return Err(config_err(
            "tolerance",
            format!("{t} is not a positive number"),
        ));
    }
    if iterations == 0 || iterations > ITERATIONS_MAX {
        return Err(config_err(
            "iterations",
            format!("{iterations} is not between 1 and {ITERATIONS_MAX}"),
        ));
    }
    let n = engine.vertex_count() as usize;
    let vf = n as f64;
    let d = PAGERANK_DAMPING;
    let dt = T::from_f64(d);
    let mut rank = VertexVec::filled(T::from_f64(1.0 / vf), n);
    let mut contrib = VertexVec::filled(T::default(), n);
    let mut sum = VertexVec::filled(T::default(), n);
    // Each vertex hands rank/out-degree to its out-neighbours; a vertex
    // without out-edges hands its rank to everyone (the dangling mass).
    let contribute = |x: u32, r: T, c: &mut T| -> f64 {
        let deg = out_degree[x as usize];
        if deg == 0 {
            *c = T::default();
            r.to_f64()
        } else {
            *c = r.div(T::from_f64(f64::from(deg)));
            0.0
        }
    };
    let r = &rank;
    let mut dangling: f64 =
        engine.stream_vertices(&mut contrib, |x, c| contribute(x, r[x as usize], c));
    let mut total = 0.0f64;
    let mut done = 0u32;
    while done < iterations {
        let c = &contrib;
        engine.fold_edges(&mut sum, |s| c[s as usize], T::add)?;
        let base = T::from_f64((1.0 - d) / vf + d * dangling / vf);
        let sums: Sums =
            engine.stream_vertices3(&mut rank, &mut sum, &mut contrib, |x, r, s, c| {
                let old = *r;
                *r = base.add(dt.mul(*s));
                *s = T::default();
                Sums {
                    dangling: contribute(x, *r, c),
                    total: r.to_f64(),
                    change: (r.to_f64() - old.to_f64()).abs(),
                }
            });
        dangling = sums.dangling;
        total = sums.total;
        done += 1;
        if tolerance.is_some_and(|t| sums.change < t) {
            break;
        }
    }
    // Normalised: the scores sum to 1 (they do up to rounding; make it exact-ish).
    let mut out: Vec<f64> = vec![0.0; n];
    let r = &rank;
    engine.stream_vertices(&mut out, |x, o| {
        *o = r[x as usize].to_f64() / total;
        0.0f64
    });
    Ok(Run {
        output: Output::PageRank { rank: out },
        iterations: done,
    })
}
