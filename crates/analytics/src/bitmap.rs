//! A fixed-size bitmap of vertices: the active set of selective scheduling.
//! Its words are vertex data ([`VertexVec`]): they page with the paged
//! backend's `paged_vertices`.

use std::ops::Range;

use crate::vertex::VertexVec;

/// One bit per vertex, `0..len`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bitmap {
    words: VertexVec<u64>,
    len: u64,
}

/// Vertices per parallel work item when a bitmap is built (whole words).
const BUILD_WORDS_PER_ITEM: usize = 1 << 12;

impl Bitmap {
    /// All bits clear.
    pub fn new(len: u64) -> Bitmap {
        Bitmap {
            words: VertexVec::filled(0, len.div_ceil(64) as usize),
            len,
        }
    }

    /// Bit `v` set iff `f(v)`, computed on up to `threads` threads.
    pub fn from_fn<F: Fn(u64) -> bool + Sync>(len: u64, threads: usize, f: F) -> Bitmap {
        let mut b = Bitmap::new(len);
        let items: Vec<(usize, &mut [u64])> = b
            .words
            .chunks_mut(BUILD_WORDS_PER_ITEM)
            .enumerate()
            .collect();
        let fill = |(k, words): (usize, &mut [u64])| {
            for (w, word) in words.iter_mut().enumerate() {
                let base = ((k * BUILD_WORDS_PER_ITEM + w) * 64) as u64;
                let mut bits = 0u64;
                for bit in 0..64u64.min(len.saturating_sub(base)) {
                    bits |= u64::from(f(base + bit)) << bit;
                }
                *word = bits;
            }
        };
        crate::parallel::for_each(items, threads, fill);
        b
    }

    /// Number of bits.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the bitmap has no bits at all.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sets bit `v`.
    #[inline]
    pub fn set(&mut self, v: u64) {
        debug_assert!(v < self.len);
        self.words[(v / 64) as usize] |= 1 << (v % 64);
    }

    /// Whether bit `v` is set.
    #[inline(always)]
    pub fn get(&self, v: u64) -> bool {
        (self.words[(v / 64) as usize] >> (v % 64)) & 1 == 1
    }

    /// Number of set bits.
    pub fn count(&self) -> u64 {
        self.words.iter().map(|w| u64::from(w.count_ones())).sum()
    }

    /// Whether any bit in `range` is set.
    pub fn any_in(&self, range: Range<u64>) -> bool {
        if range.start >= range.end {
            return false;
        }
        let (first, last) = (range.start / 64, (range.end - 1) / 64);
        (first..=last).any(|w| {
            let mut word = self.words[w as usize];
            if w == first {
                word &= u64::MAX << (range.start % 64);
            }
            if w == last {
                let end_bit = (range.end - 1) % 64;
                word &= u64::MAX >> (63 - end_bit);
            }
            word != 0
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_in_matches_bits() {
        let b = Bitmap::from_fn(300, 2, |v| v == 70 || v == 255);
        assert_eq!(b.count(), 2);
        assert!(b.get(70) && b.get(255) && !b.get(71));
        for lo in 0..300u64 {
            for hi in [lo, lo + 1, lo + 63, lo + 64, lo + 65, 300] {
                let hi = hi.min(300);
                let want = (lo..hi).any(|v| v == 70 || v == 255);
                assert_eq!(b.any_in(lo..hi), want, "{lo}..{hi}");
            }
        }
    }
}
