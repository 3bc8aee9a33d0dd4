//! R-MAT / Graph500 Kronecker edge generator.
//!
//! Edge `i` is a pure function of `(seed, i)`: it consumes words
//! `i * w .. i * w + w` of a SplitMix64 stream keyed by the seed, where
//! `w = ceil(scale / 2)` and each 64-bit word supplies two 32-bit draws, one per
//! level. SplitMix64 is counter-based (word `k` is `mix(key + (k + 1) * GOLDEN)`), so any
//! edge can be produced without producing the ones before it. That makes the output
//! independent of how edges are split among threads and lets the CSR builder
//! regenerate edges instead of storing them.
//!
//! At each of the `scale` levels, from the most significant bit down, the edge
//! falls into quadrant a (src bit 0, dst bit 0), b (0, 1), c (1, 0) or d (1, 1) with
//! probabilities `a, b, c, 1 - a - b - c`, as in the Graph500 reference generator.
//! No per-level noise is added, so the quadrant frequencies are exactly the
//! configured ones (which the tests check).
//!
//! With `permute`, vertex ids are then relabelled by [`FeistelPermutation`], a keyed
//! bijection on `[0, 2^scale)` that needs no table, so hubs are not all at low ids.
//! Edge order is not shuffled: edge `i` stays edge `i`.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::error::{GraphError, Result};
use crate::{Edge, VertexId};

/// Smallest allowed `RmatConfig::scale`.
pub const SCALE_MIN: u32 = 1;
/// Largest allowed `RmatConfig::scale`; 2^30 vertices keeps every id below `u32::MAX`.
pub const SCALE_MAX: u32 = 30;
/// Edges per chunk handed out by [`Rmat::for_each_chunk`]; fixed so chunk `k` always
/// covers the same edges whatever the thread count.
pub const EDGES_PER_CHUNK: u64 = 1 << 16;

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;
/// Feistel rounds; four rounds of a good round function give a pseudo-random permutation
/// (Luby-Rackoff), which is plenty for spreading hubs over the id space.
const FEISTEL_ROUNDS: usize = 4;
/// Domain-separation constants so the edge stream and the permutation keys differ.
const EDGE_STREAM_TAG: u64 = 0x6564_6765_5f73_7472; // "edge_str"
const PERMUTE_TAG: u64 = 0x7065_726d_7574_6521; // "permute!"

/// SplitMix64's output function (Steele, Lea, Flood 2014); a strong 64-bit mixer.
#[inline]
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Settings of the R-MAT generator.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RmatConfig {
    /// log2 of the vertex count, in `SCALE_MIN..=SCALE_MAX`.
    pub scale: u32,
    /// Edges per vertex; the edge count is `edge_factor * 2^scale`.
    pub edge_factor: u32,
    /// Probability of the top-left quadrant (src bit 0, dst bit 0).
    pub a: f64,
    /// Probability of the top-right quadrant (src bit 0, dst bit 1).
    pub b: f64,
    /// Probability of the bottom-left quadrant (src bit 1, dst bit 0).
    pub c: f64,
    /// Seed of every random choice: the edges and the permutation.
    pub seed: u64,
    /// Relabel vertices by a seeded bijection so that hubs are spread over the ids.
    pub permute: bool,
}

impl Default for RmatConfig {
    /// The Graph500 parameters at scale 16: a = 0.57, b = c = 0.19, 16 edges per vertex.
    fn default() -> Self {
        RmatConfig {
            scale: 16,
            edge_factor: 16,
            a: 0.57,
            b: 0.19,
            c: 0.19,
            seed: 1,
            permute: true,
        }
    }
}

impl RmatConfig {
    /// Probability of the bottom-right quadrant, `1 - a - b - c`.
    pub fn d(&self) -> f64 {
        1.0 - self.a - self.b - self.c
    }

    /// Checks every setting, naming the first one that is out of range.
    pub fn validate(&self) -> Result<()> {
        if !(SCALE_MIN..=SCALE_MAX).contains(&self.scale) {
            return Err(GraphError::InvalidRmatConfig {
                field: "scale",
                reason: format!(
                    "{} is not between {SCALE_MIN} and {SCALE_MAX} (the vertex count is 2^scale)",
                    self.scale
                ),
            });
        }
        if self.edge_factor == 0 {
            return Err(GraphError::InvalidRmatConfig {
                field: "edge_factor",
                reason: "must be at least 1 (it is the number of edges per vertex)".into(),
            });
        }
        for (field, p) in [("a", self.a), ("b", self.b), ("c", self.c)] {
            // `contains` is false for NaN, so NaN is rejected here too.
            if !(0.0..=1.0).contains(&p) {
                return Err(GraphError::InvalidRmatConfig {
                    field,
                    reason: format!("probability {p} is not between 0 and 1"),
                });
            }
        }
        let sum = self.a + self.b + self.c;
        if sum >= 1.0 {
            return Err(GraphError::InvalidRmatConfig {
                field: "a+b+c",
                reason: format!(
                    "a + b + c = {sum} must be below 1 so that d = 1 - a - b - c is positive"
                ),
            });
        }
        Ok(())
    }

    /// `2^scale`.
    pub fn vertex_count(&self) -> u64 {
        1u64 << self.scale
    }

    /// `edge_factor * 2^scale`.
    pub fn edge_count(&self) -> u64 {
        u64::from(self.edge_factor) << self.scale
    }
}

/// A keyed bijection on `[0, 2^bits)` that needs no table.
///
/// A balanced Feistel network on `2 * ceil(bits / 2)` bits with [`FEISTEL_ROUNDS`]
/// rounds, round function `mix64(half ^ key_r)`; for odd `bits` the network's domain is
/// twice too large and values that land outside `[0, 2^bits)` are fed back in
/// (cycle-walking), which keeps it a bijection on the smaller domain. The expected
/// number of walks is below two.
#[derive(Clone, Debug)]
pub struct FeistelPermutation {
    bits: u32,
    half_bits: u32,
    keys: [u64; FEISTEL_ROUNDS],
}

impl FeistelPermutation {
    /// The permutation of `[0, 2^bits)` selected by `seed`; `bits` must be in `1..=32`.
    pub fn new(bits: u32, seed: u64) -> Self {
        assert!(
            (1..=32).contains(&bits),
            "permutation bits {bits} not in 1..=32"
        );
        let mut keys = [0u64; FEISTEL_ROUNDS];
        let base = mix64(seed ^ PERMUTE_TAG);
        for (r, key) in keys.iter_mut().enumerate() {
            *key = mix64(base.wrapping_add((r as u64 + 1).wrapping_mul(GOLDEN)));
        }
        FeistelPermutation {
            bits,
            half_bits: bits.div_ceil(2),
            keys,
        }
    }

    /// Size of the domain, `2^bits`.
    pub fn domain_size(&self) -> u64 {
        1u64 << self.bits
    }

    /// The image of `x`; `x` must be below `domain_size()`.
    #[inline]
    pub fn apply(&self, x: u64) -> u64 {
        debug_assert!(x < self.domain_size());
        let mut y = self.round_trip(x, false);
        while y >= self.domain_size() {
            y = self.round_trip(y, false);
        }
        y
    }

    /// The preimage of `y`: `invert(apply(x)) == x`.
    pub fn invert(&self, y: u64) -> u64 {
        debug_assert!(y < self.domain_size());
        let mut x = self.round_trip(y, true);
        while x >= self.domain_size() {
            x = self.round_trip(x, true);
        }
        x
    }

    #[inline]
    fn round_trip(&self, x: u64, inverse: bool) -> u64 {
        let h = self.half_bits;
        let mask = (1u64 << h) - 1;
        let (mut left, mut right) = (x >> h, x & mask);
        if inverse {
            for key in self.keys.iter().rev() {
                let prev_right = left;
                let prev_left = right ^ (mix64(prev_right ^ key) & mask);
                left = prev_left;
                right = prev_right;
            }
        } else {
            for key in &self.keys {
                let next_right = left ^ (mix64(right ^ key) & mask);
                left = right;
                right = next_right;
            }
        }
        (left << h) | right
    }
}

/// A validated R-MAT generator; see the module docs for the exact scheme.
#[derive(Clone, Debug)]
pub struct Rmat {
    config: RmatConfig,
    stream_key: u64,
    /// Cumulative quadrant thresholds in units of 2^-32: a, a+b, a+b+c.
    thresholds: [u64; 3],
    words_per_edge: u64,
    permutation: Option<FeistelPermutation>,
}

impl Rmat {
    /// Validates `config` and prepares the generator.
    pub fn new(config: RmatConfig) -> Result<Rmat> {
        config.validate()?;
        let scale32 = (1u64 << 32) as f64;
        let to_threshold = |p: f64| (p * scale32).round() as u64;
        Ok(Rmat {
            stream_key: mix64(config.seed ^ EDGE_STREAM_TAG),
            thresholds: [
                to_threshold(config.a),
                to_threshold(config.a + config.b),
                to_threshold(config.a + config.b + config.c),
            ],
            words_per_edge: u64::from(config.scale.div_ceil(2)),
            permutation: config
                .permute
                .then(|| FeistelPermutation::new(config.scale, config.seed)),
            config,
        })
    }

    /// The settings this generator was built from.
    pub fn config(&self) -> &RmatConfig {
        &self.config
    }

    /// `2^scale`.
    pub fn vertex_count(&self) -> u64 {
        self.config.vertex_count()
    }

    /// `edge_factor * 2^scale`.
    pub fn edge_count(&self) -> u64 {
        self.config.edge_count()
    }

    /// Number of chunks of [`EDGES_PER_CHUNK`] edges (the last may be short).
    pub fn chunk_count(&self) -> u64 {
        self.edge_count().div_ceil(EDGES_PER_CHUNK)
    }

    /// Edge `i`, for `i < edge_count()`; a pure function of the seed and `i`.
    #[inline]
    pub fn edge(&self, i: u64) -> Edge {
        debug_assert!(i < self.edge_count(), "edge {i} out of range");
        let scale = self.config.scale;
        let [t_a, t_ab, t_abc] = self.thresholds;
        let mut src = 0u64;
        let mut dst = 0u64;
        // Branch-free quadrant choice (the draws are random, so branches would
        // mispredict half the time): below a -> (0,0), a..a+b -> (0,1),
        // a+b..a+b+c -> (1,0), above -> (1,1). Shifting left puts level 0 at the top bit.
        let mut level = |draw: u64| {
            let ge_a = u64::from(draw >= t_a);
            let ge_ab = u64::from(draw >= t_ab);
            let ge_abc = u64::from(draw >= t_abc);
            src = (src << 1) | ge_ab;
            dst = (dst << 1) | (ge_a ^ ge_ab ^ ge_abc);
        };
        let first_word = i.wrapping_mul(self.words_per_edge);
        let word_at = |k: u64| {
            let counter = first_word.wrapping_add(k + 1);
            mix64(self.stream_key.wrapping_add(counter.wrapping_mul(GOLDEN)))
        };
        // Low half first, then high half, two levels per word.
        for k in 0..u64::from(scale / 2) {
            let word = word_at(k);
            level(word & 0xFFFF_FFFF);
            level(word >> 32);
        }
        if scale % 2 == 1 {
            level(word_at(u64::from(scale / 2)) & 0xFFFF_FFFF);
        }
        if let Some(p) = &self.permutation {
            src = p.apply(src);
            dst = p.apply(dst);
        }
        // scale <= 30, so both ids fit in u32 and stay below u32::MAX.
        (src as VertexId, dst as VertexId)
    }

    /// Replaces the contents of `out` with the edges of chunk `chunk_index`.
    pub fn fill_chunk(&self, chunk_index: u64, out: &mut Vec<Edge>) {
        out.clear();
        let start = chunk_index.saturating_mul(EDGES_PER_CHUNK);
        let end = start.saturating_add(EDGES_PER_CHUNK).min(self.edge_count());
        out.extend((start..end).map(|i| self.edge(i)));
    }

    /// Calls `f(chunk_index, edges)` once per chunk, from up to `threads` scoped threads,
    /// in no particular order. Chunk `k` holds edges `k * EDGES_PER_CHUNK ..` whatever
    /// the thread count. Memory is one chunk buffer per thread.
    pub fn for_each_chunk<F>(&self, threads: usize, f: F)
    where
        F: Fn(u64, &[Edge]) + Sync,
    {
        let chunks = self.chunk_count();
        let threads = crate::clamp_threads(threads).min(chunks.max(1) as usize);
        let next = AtomicU64::new(0);
        let work = || {
            let mut buf = Vec::with_capacity(EDGES_PER_CHUNK as usize);
            loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= chunks {
                    break;
                }
                self.fill_chunk(k, &mut buf);
                f(k, &buf);
            }
        };
        if threads == 1 {
            work();
        } else {
            std::thread::scope(|s| {
                for _ in 0..threads {
                    s.spawn(work);
                }
            });
        }
    }

    /// Calls `f(chunk_index, edges)` for every chunk in increasing order on the calling
    /// thread, while up to `threads` scoped threads generate the next batch of chunks.
    /// Stops at and returns the first error of `f`. Memory is a few chunks per thread.
    pub fn try_for_each_chunk_in_order<E, F>(
        &self,
        threads: usize,
        mut f: F,
    ) -> std::result::Result<(), E>
    where
        F: FnMut(u64, &[Edge]) -> std::result::Result<(), E>,
    {
        // A batch of several chunks per thread amortises the thread spawns.
        const CHUNKS_PER_THREAD: usize = 4;
        let threads = crate::clamp_threads(threads);
        let batch_chunks = threads * CHUNKS_PER_THREAD;
        let mut buffers: Vec<Vec<Edge>> = (0..batch_chunks).map(|_| Vec::new()).collect();
        let chunks = self.chunk_count();
        let mut first = 0u64;
        while first < chunks {
            let in_batch = (chunks - first).min(batch_chunks as u64) as usize;
            let live = &mut buffers[..in_batch];
            if threads == 1 {
                for (j, buf) in live.iter_mut().enumerate() {
                    self.fill_chunk(first + j as u64, buf);
                }
            } else {
                let per_thread = in_batch.div_ceil(threads);
                std::thread::scope(|s| {
                    for (t, group) in live.chunks_mut(per_thread).enumerate() {
                        let base = first + (t * per_thread) as u64;
                        s.spawn(move || {
                            for (j, buf) in group.iter_mut().enumerate() {
                                self.fill_chunk(base + j as u64, buf);
                            }
                        });
                    }
                });
            }
            for (j, buf) in buffers[..in_batch].iter().enumerate() {
                f(first + j as u64, buf)?;
            }
            first += in_batch as u64;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_graph500() {
        let cfg = RmatConfig::default();
        assert!(cfg.validate().is_ok());
        assert!((cfg.d() - 0.05).abs() < 1e-12);
        assert_eq!(cfg.vertex_count(), 1 << 16);
        assert_eq!(cfg.edge_count(), 1 << 20);
    }

    #[test]
    fn validate_names_the_bad_field() {
        let bad = |cfg: RmatConfig| match cfg.validate() {
            Err(GraphError::InvalidRmatConfig { field, .. }) => field,
            other => panic!("expected InvalidRmatConfig, got {other:?}"),
        };
        let base = RmatConfig::default();
        assert_eq!(bad(RmatConfig { scale: 0, ..base }), "scale");
        assert_eq!(bad(RmatConfig { scale: 31, ..base }), "scale");
        assert_eq!(
            bad(RmatConfig {
                edge_factor: 0,
                ..base
            }),
            "edge_factor"
        );
        assert_eq!(bad(RmatConfig { a: -0.1, ..base }), "a");
        assert_eq!(
            bad(RmatConfig {
                b: f64::NAN,
                ..base
            }),
            "b"
        );
        assert_eq!(bad(RmatConfig { c: 1.5, ..base }), "c");
        assert_eq!(
            bad(RmatConfig {
                a: 0.6,
                b: 0.2,
                c: 0.2,
                ..base
            }),
            "a+b+c"
        );
        assert!(RmatConfig { scale: 30, ..base }.validate().is_ok());
        assert!(RmatConfig { scale: 1, ..base }.validate().is_ok());
    }

    #[test]
    fn feistel_inverts() {
        for bits in [1, 2, 5, 8, 13] {
            let p = FeistelPermutation::new(bits, 42);
            for x in 0..p.domain_size() {
                assert_eq!(p.invert(p.apply(x)), x, "bits {bits} x {x}");
            }
        }
    }

    #[test]
    fn edges_stay_in_range() {
        for scale in [1, 2, 3, 7] {
            let rmat = Rmat::new(RmatConfig {
                scale,
                edge_factor: 8,
                ..Default::default()
            })
            .expect("valid config");
            for i in 0..rmat.edge_count() {
                let (s, d) = rmat.edge(i);
                assert!(u64::from(s) < rmat.vertex_count());
                assert!(u64::from(d) < rmat.vertex_count());
            }
        }
    }

    #[test]
    fn chunks_cover_all_edges_once() {
        let rmat = Rmat::new(RmatConfig {
            scale: 13,
            edge_factor: 9,
            ..Default::default()
        })
        .expect("valid config");
        let mut seen = Vec::new();
        rmat.try_for_each_chunk_in_order(3, |k, edges| {
            assert_eq!(k, seen.len() as u64 / EDGES_PER_CHUNK);
            seen.extend_from_slice(edges);
            Ok::<(), ()>(())
        })
        .expect("no error");
        assert_eq!(seen.len() as u64, rmat.edge_count());
        for (i, e) in seen.iter().enumerate() {
            assert_eq!(*e, rmat.edge(i as u64));
        }
    }

    #[test]
    fn in_order_visit_stops_at_first_error() {
        let rmat = Rmat::new(RmatConfig {
            scale: 14,
            edge_factor: 16,
            ..Default::default()
        })
        .expect("valid config");
        let mut calls = 0;
        let r = rmat.try_for_each_chunk_in_order(2, |k, _| {
            calls += 1;
            if k == 1 {
                Err(k)
            } else {
                Ok(())
            }
        });
        assert_eq!(r, Err(1));
        assert_eq!(calls, 2);
    }
}
