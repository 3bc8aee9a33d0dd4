//! The streaming engine (GridGraph 3.3, Fargraph+ 5.3, 6.2): `stream_vertices`
//! and `stream_edges` over a grid whose edge blocks come from an [`EdgeStore`].
//!
//! **Edges.** `stream_edges(order, active, owned, f)` calls `f(src, dst, s)`
//! on every edge whose *read side* vertex is active, where `s` is the
//! *owned side* vertex's element of `owned`. In column order the owned side
//! is the destination: a thread claims a whole column (destination partition
//! j) and streams its blocks `(0, j), (1, j), ...`, so it alone writes those
//! destinations: no atomics, and every destination sees its edges in the same
//! order whatever the thread count or backend, which makes results bit-for-bit
//! repeatable. In row order the owned side is the source and the read side
//! the destination. Selective scheduling: a block whose read-side partition
//! has no active vertex is not fetched at all; in column order over striped
//! blocks ([`crate::grid`]), neither are the byte ranges of source stripes
//! with no active vertex (gaps under [`SKIP_GAP_BYTES_MIN`] excepted), so a
//! sparse BFS level streams only the stripes its frontier touches; within
//! what is fetched, edges from inactive vertices are skipped.
//!
//! **Fetching.** Each thread has its own [`FetchStream`] (one fetch stream per
//! thread, Fargraph+ 6.3). With double buffering on, a thread begins segment
//! k+1 (its chunks' READs go out) before it processes segment k (Fig. 12,
//! Algorithm 1 lines 11-21), claiming its next column early when the current
//! one has no segment left; with it off, it fetches and then processes.
//!
//! **Edge layouts.** A block's edges are wide (8 bytes) or compact (4 bytes,
//! relative to the block's partitions, [`crate::layout`]), either with a
//! weight beside them in a weighted grid; the kernels (`engine/kernel.rs`)
//! are compiled once per layout and get the block's source and destination
//! partition starts with each piece, so callbacks always see absolute ids.
//! Segments cover a block's edges only, never its word padding.
//!
//! **Vertices.** `stream_vertices` visits vertices in fixed chunks on all
//! threads and folds the chunks' results in chunk order, so sums do not
//! depend on the thread count either.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use serde::Serialize;

use crate::bitmap::Bitmap;
use crate::error::{config_err, AnalyticsError, Result};
use crate::grid::{Order, Shape};
use crate::layout::{EdgeLayout, ALIGN_BYTES};
use crate::store::{EdgeStore, FetchStream, Segment, StreamStats};

mod kernel;
use kernel::{EachEdge, Fold, Kernel, Wanted, WeightedEdge};

/// Most engine threads.
pub const THREADS_MAX: usize = 256;
/// Inactive stripes shorter than this are streamed through rather than
/// skipped: 16 KB is about one far READ's fixed cost at the modelled 12.5
/// GB/s (2 us), and a skip splits the fetch in two.
pub const SKIP_GAP_BYTES_MIN: u64 = 16 << 10;
/// Vertices per work item of `stream_vertices` (also the unit of its
/// deterministic reduction).
pub const VERTEX_CHUNK: usize = 1 << 14;

/// Settings of an engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    /// Worker threads, 1..=[`THREADS_MAX`].
    pub threads: usize,
    /// Fetch the next segment while the current one is processed (Fargraph+ 6.2).
    pub buffering: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            threads: 1,
            buffering: true,
        }
    }
}

/// What the engine counted: the offline profile of Fargraph+ 5.1 and 7.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Profile {
    /// Per order held (by `Order::index`), bytes streamed from each block.
    pub block_bytes: [Vec<u64>; 2],
    /// Edges handed to `f` (read side active).
    pub edges_applied: u64,
    /// Vertices visited by `stream_vertices`.
    pub vertex_visits: u64,
    /// Calls of `stream_edges`.
    pub edge_passes: u64,
    /// Calls of `stream_vertices`.
    pub vertex_passes: u64,
}

/// A streaming engine over one edge store.
pub struct Engine<'s> {
    store: &'s dyn EdgeStore,
    shape: Shape,
    config: EngineConfig,
    streams: Vec<Mutex<Box<dyn FetchStream + 's>>>,
    block_bytes: [Vec<AtomicU64>; 2],
    edges_applied: AtomicU64,
    vertex_visits: AtomicU64,
    edge_passes: AtomicU64,
    vertex_passes: AtomicU64,
}

impl<'s> Engine<'s> {
    /// An engine with one fetch stream per thread.
    pub fn new(store: &'s dyn EdgeStore, config: EngineConfig) -> Result<Engine<'s>> {
        if !(1..=THREADS_MAX).contains(&config.threads) {
            return Err(config_err(
                "threads",
                format!("{} is not between 1 and {THREADS_MAX}", config.threads),
            ));
        }
        let shape = store.table().shape();
        let streams = (0..config.threads)
            .map(|_| store.open_stream().map(Mutex::new))
            .collect::<Result<Vec<_>>>()?;
        let counters = || (0..shape.blocks()).map(|_| AtomicU64::new(0)).collect();
        Ok(Engine {
            store,
            shape,
            config,
            streams,
            block_bytes: [counters(), counters()],
            edges_applied: AtomicU64::new(0),
            vertex_visits: AtomicU64::new(0),
            edge_passes: AtomicU64::new(0),
            vertex_passes: AtomicU64::new(0),
        })
    }

    /// The grid's shape.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// Vertices.
    pub fn vertex_count(&self) -> u64 {
        self.shape.vertex_count
    }

    /// Worker threads.
    pub fn threads(&self) -> usize {
        self.config.threads
    }

    /// The store streamed from.
    pub fn store(&self) -> &dyn EdgeStore {
        self.store
    }

    /// The counters so far.
    pub fn profile(&self) -> Profile {
        let load = |v: &Vec<AtomicU64>| v.iter().map(|a| a.load(Ordering::Relaxed)).collect();
        Profile {
            block_bytes: [load(&self.block_bytes[0]), load(&self.block_bytes[1])],
            edges_applied: self.edges_applied.load(Ordering::Relaxed),
            vertex_visits: self.vertex_visits.load(Ordering::Relaxed),
            edge_passes: self.edge_passes.load(Ordering::Relaxed),
            vertex_passes: self.vertex_passes.load(Ordering::Relaxed),
        }
    }

    /// The fetch streams' counters, summed.
    pub fn stream_stats(&self) -> StreamStats {
        self.streams.iter().fold(StreamStats::default(), |acc, s| {
            acc.plus(&s.lock().unwrap_or_else(|e| e.into_inner()).stats())
        })
    }

    /// Calls `f(v, &mut state[v])` for every vertex and returns the sum of the
    /// results, folded in a fixed order.
    pub fn stream_vertices<S, T, F>(&self, state: &mut [S], f: F) -> T
    where
        S: Send,
        T: Send + Default + std::ops::Add<Output = T>,
        F: Fn(u32, &mut S) -> T + Sync,
    {
        assert_eq!(
            state.len() as u64,
            self.vertex_count(),
            "one element per vertex"
        );
        self.count_vertex_pass();
        let items: Vec<&mut [S]> = state.chunks_mut(VERTEX_CHUNK).collect();
        let parts = crate::parallel::map(items, self.config.threads, |k, chunk| {
            let base = (k * VERTEX_CHUNK) as u32;
            let mut acc = T::default();
            for (i, s) in chunk.iter_mut().enumerate() {
                acc = acc + f(base + i as u32, s);
            }
            acc
        });
        parts.into_iter().fold(T::default(), |a, b| a + b)
    }

    /// [`Engine::stream_vertices`] over two arrays at once.
    pub fn stream_vertices2<A, B, T, F>(&self, a: &mut [A], b: &mut [B], f: F) -> T
    where
        A: Send,
        B: Send,
        T: Send + Default + std::ops::Add<Output = T>,
        F: Fn(u32, &mut A, &mut B) -> T + Sync,
    {
        assert_eq!(
            a.len() as u64,
            self.vertex_count(),
            "one element per vertex"
        );
        assert_eq!(
            b.len() as u64,
            self.vertex_count(),
            "one element per vertex"
        );
        self.count_vertex_pass();
        let items: Vec<(&mut [A], &mut [B])> = a
            .chunks_mut(VERTEX_CHUNK)
            .zip(b.chunks_mut(VERTEX_CHUNK))
            .collect();
        let parts = crate::parallel::map(items, self.config.threads, |k, (ca, cb)| {
            let base = (k * VERTEX_CHUNK) as u32;
            let mut acc = T::default();
            for (i, (x, y)) in ca.iter_mut().zip(cb.iter_mut()).enumerate() {
                acc = acc + f(base + i as u32, x, y);
            }
            acc
        });
        parts.into_iter().fold(T::default(), |a, b| a + b)
    }

    /// [`Engine::stream_vertices`] over three arrays at once.
    pub fn stream_vertices3<A, B, C, T, F>(&self, a: &mut [A], b: &mut [B], c: &mut [C], f: F) -> T
    where
        A: Send,
        B: Send,
        C: Send,
        T: Send + Default + std::ops::Add<Output = T>,
        F: Fn(u32, &mut A, &mut B, &mut C) -> T + Sync,
    {
        let v = self.vertex_count();
        assert!(
            a.len() as u64 == v && b.len() as u64 == v && c.len() as u64 == v,
            "one element per vertex"
        );
        self.count_vertex_pass();
        type Three<'x, A, B, C> = ((&'x mut [A], &'x mut [B]), &'x mut [C]);
        let items: Vec<Three<'_, A, B, C>> = a
            .chunks_mut(VERTEX_CHUNK)
            .zip(b.chunks_mut(VERTEX_CHUNK))
            .zip(c.chunks_mut(VERTEX_CHUNK))
            .collect();
        let parts = crate::parallel::map(items, self.config.threads, |k, ((ca, cb), cc)| {
            let base = (k * VERTEX_CHUNK) as u32;
            let mut acc = T::default();
            for (i, ((x, y), z)) in ca
                .iter_mut()
                .zip(cb.iter_mut())
                .zip(cc.iter_mut())
                .enumerate()
            {
                acc = acc + f(base + i as u32, x, y, z);
            }
            acc
        });
        parts.into_iter().fold(T::default(), |a, b| a + b)
    }

    /// A bitmap of the vertices where `f` holds, built on all threads (a vertex pass).
    pub fn vertex_bitmap<F: Fn(u64) -> bool + Sync>(&self, f: F) -> Bitmap {
        self.count_vertex_pass();
        Bitmap::from_fn(self.vertex_count(), self.config.threads, f)
    }

    fn count_vertex_pass(&self) {
        self.vertex_passes.fetch_add(1, Ordering::Relaxed);
        self.vertex_visits
            .fetch_add(self.vertex_count(), Ordering::Relaxed);
    }

    /// Per source stripe, whether it holds an active vertex; None unless
    /// the pass is column order with an active set over striped blocks.
    fn stripe_active(
        &self,
        order: Order,
        active: Option<&Bitmap>,
        read_active: &[bool],
    ) -> Option<Vec<bool>> {
        let table = self.store.table();
        let (a, stripes) = (active?, table.stripes());
        if order != Order::Column || stripes <= 1 {
            return None;
        }
        let ids = table.stripe_ids();
        let mut out = vec![false; read_active.len() * stripes as usize];
        for (i, &any) in read_active.iter().enumerate() {
            if !any {
                continue;
            }
            let r = self.shape.range(i as u32);
            for t in 0..stripes as u64 {
                let lo = (r.start + t * ids).min(r.end);
                let hi = (lo + ids).min(r.end);
                out[i * stripes as usize + t as usize] = lo < hi && a.any_in(lo..hi);
            }
        }
        Some(out)
    }

    /// Streams the edges of `order` (see the module doc): `f(src, dst, s)` for
    /// every edge whose read-side vertex is in `active` (all if `None`), `s`
    /// being the owned-side vertex's element of `owned`. Returns the number of
    /// edges handed to `f`.
    pub fn stream_edges<S, F>(
        &self,
        order: Order,
        active: Option<&Bitmap>,
        owned: &mut [S],
        f: F,
    ) -> Result<u64>
    where
        S: Send,
        F: Fn(u32, u32, &mut S) + Sync,
    {
        self.stream(order, active, owned, &EachEdge(f))
    }

    /// [`Engine::stream_edges`] for a pass whose owned elements stop wanting
    /// edges once updated (BFS: a reached vertex): `f` gets an edge only if
    /// `wants` holds for its owned element, which is tested *before* the
    /// read side's active bit. In column order the owned side is the
    /// destination, whose edges are adjacent, so once a destination is
    /// reached the rest of its run is skipped on an element already in
    /// cache, without the bitmap's test or its unpredictable branch. `f` gets
    /// exactly the edges, in the order, that `stream_edges` would hand a
    /// callback which does nothing when `!wants`; the count returned is of
    /// the edges `f` got.
    pub fn stream_edges_wanted<S, W, F>(
        &self,
        order: Order,
        active: Option<&Bitmap>,
        owned: &mut [S],
        wants: W,
        f: F,
    ) -> Result<u64>
    where
        S: Send,
        W: Fn(&S) -> bool + Sync,
        F: Fn(u32, u32, &mut S) + Sync,
    {
        self.stream(order, active, owned, &Wanted { wants, f })
    }

    /// A column pass over every edge that folds, per destination `d`,
    /// `out[d] = add(out[d], value(src))` in edge order, keeping the running
    /// value in a register over a run of `d`'s adjacent edges (column blocks
    /// are sorted by destination within a stripe) and storing it once at the
    /// run's end. The additions happen in exactly the order, and on exactly
    /// the operands, of the per-edge form, so the results are bit-for-bit
    /// those of `stream_edges` with `|s, _, o| *o = add(*o, value(s))`.
    pub fn fold_edges<T, V, A>(&self, out: &mut [T], value: V, add: A) -> Result<u64>
    where
        T: Copy + Send,
        V: Fn(u32) -> T + Sync,
        A: Fn(T, T) -> T + Sync,
    {
        self.stream(Order::Column, None, out, &Fold { value, add })
    }

    /// [`Engine::stream_edges`] with each edge's weight: `f(src, dst,
    /// weight, s)`. A weighted grid's blocks carry the weights
    /// ([`crate::layout`]); on an unweighted grid every weight is 1.
    pub fn stream_weighted_edges<S, F>(
        &self,
        order: Order,
        active: Option<&Bitmap>,
        owned: &mut [S],
        f: F,
    ) -> Result<u64>
    where
        S: Send,
        F: Fn(u32, u32, u32, &mut S) + Sync,
    {
        self.stream(order, active, owned, &WeightedEdge(f))
    }

    fn stream<S, K>(
        &self,
        order: Order,
        active: Option<&Bitmap>,
        owned: &mut [S],
        kernel: &K,
    ) -> Result<u64>
    where
        S: Send,
        K: Kernel<S>,
    {
        assert_eq!(
            owned.len() as u64,
            self.vertex_count(),
            "one element per vertex"
        );
        if !self.store.table().has(order) {
            return Err(config_err(
                "order",
                format!("the store holds no {} order", order.name()),
            ));
        }
        if let Some(a) = active {
            assert_eq!(a.len(), self.vertex_count(), "one bit per vertex");
        }
        self.edge_passes.fetch_add(1, Ordering::Relaxed);
        let shape = self.shape;
        let p = shape.partitions;
        let read_active: Vec<bool> = (0..p)
            .map(|k| active.is_none_or(|a| a.any_in(shape.range(k))))
            .collect();
        let stripe_active = self.stripe_active(order, active, &read_active);
        let slots: Vec<Mutex<Option<&mut [S]>>> = owned
            .chunks_mut(shape.width as usize)
            .map(|c| Mutex::new(Some(c)))
            .collect();
        debug_assert_eq!(slots.len(), p as usize);
        let next = AtomicUsize::new(0);
        let applied = AtomicU64::new(0);
        let run = |t: usize| -> Result<()> {
            let mut stream = self.streams[t].lock().unwrap_or_else(|e| e.into_inner());
            let job = Job {
                engine: self,
                order,
                active,
                read_active: &read_active,
                stripe_active: stripe_active.as_deref(),
                slots: &slots,
                next: &next,
            };
            let n = job.run(stream.as_mut(), kernel)?;
            applied.fetch_add(n, Ordering::Relaxed);
            Ok(())
        };
        let threads = self.config.threads.min(p as usize);
        let results: Vec<Result<()>> = if threads == 1 {
            vec![run(0)]
        } else {
            std::thread::scope(|s| {
                let handles: Vec<_> = (1..threads).map(|t| s.spawn(move || run(t))).collect();
                let mut out = vec![run(0)];
                for h in handles {
                    out.push(h.join().unwrap_or_else(|_| {
                        Err(AnalyticsError::WorkerPanicked("stream_edges".into()))
                    }));
                }
                out
            })
        };
        results.into_iter().collect::<Result<Vec<()>>>()?;
        let n = applied.load(Ordering::Relaxed);
        self.edges_applied.fetch_add(n, Ordering::Relaxed);
        Ok(n)
    }
}

/// One `stream_edges` call as one thread sees it.
struct Job<'j, 's, S> {
    engine: &'j Engine<'s>,
    order: Order,
    active: Option<&'j Bitmap>,
    read_active: &'j [bool],
    /// Column order with an active set and striped blocks: per source
    /// stripe (`partition * stripes + t`), whether it has an active vertex.
    stripe_active: Option<&'j [bool]>,
    slots: &'j [Mutex<Option<&'j mut [S]>>],
    next: &'j AtomicUsize,
}

impl<'j, S> Job<'j, '_, S> {
    /// Claims owned partitions until none is left and streams their blocks.
    fn run<K: Kernel<S>>(&self, stream: &mut dyn FetchStream, kernel: &K) -> Result<u64> {
        let e = self.engine;
        let depth = if e.config.buffering {
            stream.depth_max().clamp(1, 2)
        } else {
            1
        };
        let parts = e.shape.partitions as usize;
        let mut held: Vec<Option<&'j mut [S]>> = (0..parts).map(|_| None).collect();
        let mut planned: VecDeque<(usize, Segment)> = VecDeque::new();
        let mut begun: VecDeque<(usize, Segment)> = VecDeque::with_capacity(2);
        let mut applied = 0u64;
        loop {
            // Keep `depth` segments in flight, claiming the next partition early.
            while begun.len() < depth {
                if planned.is_empty() && !self.claim(&mut planned, &mut held) {
                    break;
                }
                let (k, seg) = planned.pop_front().expect("claim planned a segment");
                stream.begin(seg)?;
                begun.push_back((k, seg));
            }
            let Some((k, seg)) = begun.pop_front() else {
                break;
            };
            let slice = held[k].as_deref_mut().expect("a claimed partition is held");
            let (i, j) = e.shape.block_at(self.order, seg.position as usize);
            let lo = |p: u32| e.shape.range(p).start as u32;
            let (sl, dl) = (lo(i), lo(j));
            let a = self.active;
            let mut n = 0u64;
            let layout = e.store.table().layout();
            macro_rules! consume {
                ($col:literal, $($l:ident),*) => {
                    match layout {
                        $(EdgeLayout::$l => stream.consume(&mut |b: &[u8]| {
                            n += kernel
                                .apply::<$col, { EdgeLayout::$l.code() }>(b, sl, dl, slice, a);
                        })?,)*
                    }
                };
            }
            match self.order {
                Order::Column => consume!(true, Wide, Compact, WideWeighted, CompactWeighted),
                Order::Row => consume!(false, Wide, Compact, WideWeighted, CompactWeighted),
            }
            applied += n;
            e.block_bytes[self.order.index()][seg.position as usize]
                .fetch_add(seg.len, Ordering::Relaxed);
        }
        Ok(applied)
    }

    /// Claims the next owned partition with work and plans its segments;
    /// false when every partition is taken.
    fn claim(
        &self,
        planned: &mut VecDeque<(usize, Segment)>,
        held: &mut [Option<&'j mut [S]>],
    ) -> bool {
        let e = self.engine;
        let shape = e.shape;
        let table = e.store.table();
        // A multiple of the fabric's word, so of either edge size too.
        let seg_max = e.store.segment_bytes_max().max(ALIGN_BYTES) / ALIGN_BYTES * ALIGN_BYTES;
        loop {
            let k = self.next.fetch_add(1, Ordering::Relaxed);
            if k >= shape.partitions as usize {
                return false;
            }
            for other in 0..shape.partitions {
                if !self.read_active[other as usize] {
                    continue; // selective scheduling: nothing active to read there
                }
                let (i, j) = match self.order {
                    Order::Column => (other, k as u32),
                    Order::Row => (k as u32, other),
                };
                let pos = shape.position(self.order, i, j);
                let len = table.block_edge_bytes(self.order, pos);
                let mut push = |start: u64, end: u64| {
                    let mut off = start;
                    while off < end {
                        let l = seg_max.min(end - off);
                        planned.push_back((
                            k,
                            Segment {
                                order: self.order,
                                position: pos as u32,
                                offset: off,
                                len: l,
                            },
                        ));
                        off += l;
                    }
                };
                match self.stripe_active {
                    None => push(0, len),
                    Some(sa) => {
                        // Runs of stripes with an active source; a gap shorter
                        // than SKIP_GAP_BYTES_MIN is streamed through (its
                        // edges are filtered by the bitmap like any other).
                        let stripes = table.stripes();
                        let mut run: Option<(u64, u64)> = None;
                        for t in 0..stripes {
                            if !sa[i as usize * stripes as usize + t as usize] {
                                continue;
                            }
                            let r = table.stripe_bytes(pos, t);
                            if r.is_empty() {
                                continue;
                            }
                            run = match run {
                                Some((a, b)) if r.start - b < SKIP_GAP_BYTES_MIN => {
                                    Some((a, r.end))
                                }
                                Some((a, b)) => {
                                    push(a, b);
                                    Some((r.start, r.end))
                                }
                                None => Some((r.start, r.end)),
                            };
                        }
                        if let Some((a, b)) = run {
                            push(a, b);
                        }
                    }
                }
            }
            if !planned.is_empty() {
                held[k] = self.slots[k]
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take();
                debug_assert!(held[k].is_some(), "a partition is claimed once");
                return true;
            }
        }
    }
}
