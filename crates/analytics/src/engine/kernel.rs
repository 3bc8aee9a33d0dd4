//! The per-edge kernels of [`super::Engine`]'s passes, each compiled once per
//! edge layout and side owned.

use crate::bitmap::Bitmap;
use crate::layout::EdgeLayout;

/// What a pass does with the edges of a piece of a segment.
pub(super) trait Kernel<S>: Sync {
    /// Applies the pass to the edges in `bytes` (whole edges of a block
    /// whose source partition starts at `sl` and destination partition at
    /// `dl`), whose owned side is in `owned` (starting at vertex `dl` if
    /// `COLUMN`, else `sl`); `COLUMN` selects which side is owned, `L` the
    /// edge layout's code ([`EdgeLayout::code`]). Returns the edges applied.
    fn apply<const COLUMN: bool, const L: u8>(
        &self,
        bytes: &[u8],
        sl: u32,
        dl: u32,
        owned: &mut [S],
        active: Option<&Bitmap>,
    ) -> u64;
}

/// `f(src, dst, owned element)` on every edge with an active read side.
pub(super) struct EachEdge<F>(pub(super) F);

impl<S, F: Fn(u32, u32, &mut S) + Sync> Kernel<S> for EachEdge<F> {
    #[inline(always)]
    fn apply<const COLUMN: bool, const L: u8>(
        &self,
        bytes: &[u8],
        sl: u32,
        dl: u32,
        owned: &mut [S],
        active: Option<&Bitmap>,
    ) -> u64 {
        let layout = EdgeLayout::from_code(L);
        let eb = layout.edge_bytes() as usize;
        debug_assert_eq!(bytes.len() % eb, 0, "pieces hold whole edges");
        let base = if COLUMN { dl } else { sl };
        let f = &self.0;
        let mut n = 0u64;
        for e in bytes.chunks_exact(eb) {
            let (s, d) = layout.decode(e, sl, dl);
            let (read, mine) = if COLUMN { (s, d) } else { (d, s) };
            if let Some(a) = active {
                if !a.get(u64::from(read)) {
                    continue;
                }
            }
            f(s, d, &mut owned[(mine - base) as usize]);
            n += 1;
        }
        n
    }
}

/// [`Engine::stream_edges_wanted`]: the owned element's test first.
pub(super) struct Wanted<W, F> {
    pub(super) wants: W,
    pub(super) f: F,
}

impl<S, W, F> Kernel<S> for Wanted<W, F>
where
    W: Fn(&S) -> bool + Sync,
    F: Fn(u32, u32, &mut S) + Sync,
{
    #[inline(always)]
    fn apply<const COLUMN: bool, const L: u8>(
        &self,
        bytes: &[u8],
        sl: u32,
        dl: u32,
        owned: &mut [S],
        active: Option<&Bitmap>,
    ) -> u64 {
        let layout = EdgeLayout::from_code(L);
        let eb = layout.edge_bytes() as usize;
        debug_assert_eq!(bytes.len() % eb, 0, "pieces hold whole edges");
        let base = if COLUMN { dl } else { sl };
        let mut n = 0u64;
        for e in bytes.chunks_exact(eb) {
            let (s, d) = layout.decode(e, sl, dl);
            let (read, mine) = if COLUMN { (s, d) } else { (d, s) };
            let o = &mut owned[(mine - base) as usize];
            if !(self.wants)(o) {
                continue;
            }
            if let Some(a) = active {
                if !a.get(u64::from(read)) {
                    continue;
                }
            }
            (self.f)(s, d, o);
            n += 1;
        }
        n
    }
}

/// [`Engine::fold_edges`]: a register-held sum per destination run.
pub(super) struct Fold<V, A> {
    pub(super) value: V,
    pub(super) add: A,
}

impl<T, V, A> Kernel<T> for Fold<V, A>
where
    T: Copy,
    V: Fn(u32) -> T + Sync,
    A: Fn(T, T) -> T + Sync,
{
    #[inline(always)]
    fn apply<const COLUMN: bool, const L: u8>(
        &self,
        bytes: &[u8],
        sl: u32,
        dl: u32,
        owned: &mut [T],
        active: Option<&Bitmap>,
    ) -> u64 {
        debug_assert!(COLUMN && active.is_none(), "a fold is a full column pass");
        let layout = EdgeLayout::from_code(L);
        let eb = layout.edge_bytes() as usize;
        debug_assert_eq!(bytes.len() % eb, 0, "pieces hold whole edges");
        let base = dl;
        let edges = bytes.len() / eb;
        let mut it = bytes.chunks_exact(eb);
        let Some(first) = it.next() else {
            return 0;
        };
        let (s, d) = layout.decode(first, sl, dl);
        let mut cur = d;
        let mut acc = (self.add)(owned[(d - base) as usize], (self.value)(s));
        for e in it {
            let (s, d) = layout.decode(e, sl, dl);
            if d != cur {
                owned[(cur - base) as usize] = acc;
                cur = d;
                acc = owned[(d - base) as usize];
            }
            acc = (self.add)(acc, (self.value)(s));
        }
        owned[(cur - base) as usize] = acc;
        edges as u64
    }
}

/// [`super::Engine::stream_weighted_edges`]: `f(src, dst, weight, owned
/// element)` on every edge with an active read side.
pub(super) struct WeightedEdge<F>(pub(super) F);

impl<S, F: Fn(u32, u32, u32, &mut S) + Sync> Kernel<S> for WeightedEdge<F> {
    #[inline(always)]
    fn apply<const COLUMN: bool, const L: u8>(
        &self,
        bytes: &[u8],
        sl: u32,
        dl: u32,
        owned: &mut [S],
        active: Option<&Bitmap>,
    ) -> u64 {
        let layout = EdgeLayout::from_code(L);
        let eb = layout.edge_bytes() as usize;
        debug_assert_eq!(bytes.len() % eb, 0, "pieces hold whole edges");
        let base = if COLUMN { dl } else { sl };
        let f = &self.0;
        let mut n = 0u64;
        for e in bytes.chunks_exact(eb) {
            let (s, d) = layout.decode(e, sl, dl);
            let (read, mine) = if COLUMN { (s, d) } else { (d, s) };
            if let Some(a) = active {
                if !a.get(u64::from(read)) {
                    continue;
                }
            }
            f(s, d, layout.weight(e), &mut owned[(mine - base) as usize]);
            n += 1;
        }
        n
    }
}
