//! Which cache a grid partition's vertex window is sized to, and how big
//! this machine's caches are (`/sys`): the automatic partition count of
//! [`crate::grid::Shape`]. GridGraph (3.2) sizes a partition so a chunk of
//! vertex data fits in the cache; Locus uses a core's L2 for passes that
//! read and write the owned side per edge, and a quarter of the last-level
//! cache for PageRank's fold ([`WindowCache`]).

/// Fewest partitions the automatic choice makes (so two threads have columns to share).
pub const PARTITIONS_AUTO_MIN: u32 = 8;
/// Fewest partitions the automatic choice makes for a window sized to the
/// last-level cache ([`WindowCache::Llc`]): two threads still have two
/// columns each.
pub const PARTITIONS_AUTO_MIN_LLC: u32 = 4;
/// Last-level cache size assumed when `/sys` does not say (8 MiB).
pub const LLC_BYTES_FALLBACK: u64 = 8 << 20;

/// Which cache the automatic partition count sizes a partition's window to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WindowCache {
    /// A core's L2 (GridGraph's rule): passes that read and write the owned
    /// side per edge (BFS, WCC, Radii).
    #[default]
    L2,
    /// A quarter of the last-level cache: PageRank, whose fold keeps each
    /// destination's sum in a register over its run of edges in a block, so
    /// narrow partitions only cut those runs short (at R-MAT 22, 16
    /// partitions give about one edge per run), while the contributions it
    /// reads at random stay in the LLC. Measured at R-MAT 22 on this
    /// machine (2 threads, 32 MiB L3, 1 MiB L2): 16 partitions 2.7-2.9 s,
    /// 8 2.3 s, 4 1.9-2.0 s, 2 1.9-2.0 s.
    Llc,
}

impl WindowCache {
    /// Bytes a partition's window may take.
    pub fn window_bytes_max(self) -> u64 {
        match self {
            WindowCache::L2 => l2_bytes(),
            WindowCache::Llc => llc_bytes() / 4,
        }
    }

    pub(crate) fn partitions_min(self) -> u32 {
        match self {
            WindowCache::L2 => PARTITIONS_AUTO_MIN,
            WindowCache::Llc => PARTITIONS_AUTO_MIN_LLC,
        }
    }
}
/// L2 size assumed when `/sys` does not say (1 MiB).
pub const L2_BYTES_FALLBACK: u64 = 1 << 20;
/// Fewest vertices per partition the automatic choice makes.
pub const PARTITION_VERTICES_AUTO_MIN: u64 = 1 << 12;

/// This machine's L2 cache per core, from
/// `/sys/devices/system/cpu/cpu0/cache/index2/size` ("1024K"), or
/// [`L2_BYTES_FALLBACK`] if that is missing or unreadable.
pub fn l2_bytes() -> u64 {
    std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cache/index2/size")
        .ok()
        .and_then(|t| parse_cache_size(t.trim()))
        .unwrap_or(L2_BYTES_FALLBACK)
}

/// This machine's last-level cache, from the highest
/// `/sys/devices/system/cpu/cpu0/cache/index*/size` ("32768K"), or
/// [`LLC_BYTES_FALLBACK`] if none is readable.
pub fn llc_bytes() -> u64 {
    (0..8)
        .rev()
        .find_map(|i| {
            std::fs::read_to_string(format!("/sys/devices/system/cpu/cpu0/cache/index{i}/size"))
                .ok()
                .and_then(|t| parse_cache_size(t.trim()))
        })
        .unwrap_or(LLC_BYTES_FALLBACK)
}

/// "1024K", "2M" or "524288" in bytes.
fn parse_cache_size(t: &str) -> Option<u64> {
    let (num, mul) = match t.as_bytes().last()? {
        b'K' | b'k' => (&t[..t.len() - 1], 1 << 10),
        b'M' | b'm' => (&t[..t.len() - 1], 1 << 20),
        _ => (t, 1),
    };
    num.parse::<u64>().ok().map(|n| n * mul).filter(|&b| b > 0)
}

/// Vertices per partition the automatic choice aims at for owned-side
/// values of `value_bytes`: the largest power of two whose values fit in L2,
/// so a partition's window stays in cache while its blocks stream (GridGraph
/// 3.2: P is chosen so a chunk of vertex data fits in the cache). 2^18 for
/// 4-byte values in a 1 MiB L2, 2^17 for 8-byte ones.
pub fn partition_vertices_auto(value_bytes: u64) -> u64 {
    partition_vertices_auto_in(value_bytes, WindowCache::L2)
}

/// [`partition_vertices_auto`] for a window sized to `cache`.
pub fn partition_vertices_auto_in(value_bytes: u64, cache: WindowCache) -> u64 {
    let fit = (cache.window_bytes_max() / value_bytes.max(1)).max(1);
    let pow = 1u64 << (63 - fit.leading_zeros());
    pow.max(PARTITION_VERTICES_AUTO_MIN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::Shape;

    #[test]
    fn windows_fit_the_cache() {
        assert_eq!(parse_cache_size("1024K"), Some(1 << 20));
        assert_eq!(parse_cache_size("2M"), Some(2 << 20));
        assert_eq!(parse_cache_size("524288"), Some(524_288));
        assert_eq!(parse_cache_size("x"), None);
        assert_eq!(parse_cache_size("0K"), None);
        let l2 = l2_bytes();
        for b in [4u64, 8] {
            let w = partition_vertices_auto(b);
            assert!(w.is_power_of_two());
            assert!(
                w * b <= l2.max(PARTITION_VERTICES_AUTO_MIN * b),
                "{w} x {b} B"
            );
            assert!(w == PARTITION_VERTICES_AUTO_MIN || 2 * w * b > l2);
        }
        assert_eq!(partition_vertices_auto(4), 2 * partition_vertices_auto(8));
        // PageRank's window: a quarter of the LLC, at least 4 partitions.
        let w = partition_vertices_auto_in(4, WindowCache::Llc);
        assert!(
            w.is_power_of_two() && w * 4 <= (llc_bytes() / 4).max(PARTITION_VERTICES_AUTO_MIN * 4)
        );
        for v in [1u64 << 16, 1 << 22, 1 << 26] {
            let s = Shape::new_in(v, None, 4, WindowCache::Llc, u64::MAX).unwrap();
            let l2 = Shape::new_in(v, None, 4, WindowCache::L2, u64::MAX).unwrap();
            assert!(
                s.partitions >= PARTITIONS_AUTO_MIN_LLC.min(v as u32),
                "{s:?}"
            );
            assert!(
                s.partitions <= l2.partitions || llc_bytes() / 4 < l2_bytes(),
                "{s:?} {l2:?}"
            );
        }
    }
}
