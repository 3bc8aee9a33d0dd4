//! Large zeroed arrays for the builders, backed by transparent huge pages
//! where the kernel offers them.
//!
//! Building the lists of a large graph scatters every edge to a random slot
//! of arrays of gigabytes (degrees, cursors, targets). With 4 KB pages nearly
//! every access also misses the TLB; with 2 MB pages the page walks mostly
//! stay cached. Linux here runs THP in `madvise` mode, so the arrays ask for
//! huge pages (`MADV_HUGEPAGE`) over their reserved capacity before the
//! first write, and every page faulted in afterwards can be a huge one. The allocator maps large sizes fresh, so the
//! reserved capacity is untouched until it is filled. Advice is only advice: where it is refused, or on
//! other systems, the arrays are ordinary.

use std::sync::atomic::{AtomicU32, AtomicU64};

/// Below this many bytes an array is left alone (it fits the TLB's reach).
const HUGE_BYTES_MIN: usize = 32 << 20;
/// Huge page size the advice aligns to.
const HUGE_PAGE: usize = 2 << 20;

/// Asks for huge pages over the whole 2 MB pages inside `bytes`.
#[allow(unsafe_code)] // one FFI call: madvise(2) on memory this vector owns
fn advise<T>(bytes: &mut [T]) {
    let len = std::mem::size_of_val(bytes);
    if len < HUGE_BYTES_MIN {
        return;
    }
    let start = bytes.as_mut_ptr() as usize;
    let first = start.next_multiple_of(HUGE_PAGE);
    let end = (start + len) / HUGE_PAGE * HUGE_PAGE;
    if end > first {
        // SAFETY: the range lies inside an allocation we own; MADV_HUGEPAGE
        // changes no contents, only how later faults are served.
        unsafe {
            libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE);
        }
    }
}

/// A vector of `n` values made by `zero`, its pages advised before the
/// first write (the capacity is reserved untouched, advised, then filled).
fn filled<T>(n: usize, zero: impl Fn() -> T) -> Vec<T> {
    let mut v = Vec::with_capacity(n);
    advise(v.spare_capacity_mut());
    v.extend((0..n).map(|_| zero()));
    v
}

/// `n` zeroed atomic `u32`s, huge-page backed if large.
pub(crate) fn atomic_u32(n: usize) -> Vec<AtomicU32> {
    filled(n, || AtomicU32::new(0))
}

/// `n` zeroed atomic `u64`s, huge-page backed if large.
pub(crate) fn atomic_u64(n: usize) -> Vec<AtomicU64> {
    filled(n, || AtomicU64::new(0))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;

    #[test]
    fn arrays_are_zeroed_and_usable_large_and_small() {
        for n in [0, 1, 1000, (HUGE_BYTES_MIN / 4) + 12345] {
            let a = atomic_u32(n);
            let b = atomic_u64(n);
            assert_eq!((a.len(), b.len()), (n, n));
            assert!(a.iter().all(|x| x.load(Ordering::Relaxed) == 0));
            assert!(b.iter().all(|x| x.load(Ordering::Relaxed) == 0));
            if n > 0 {
                a[n - 1].fetch_add(7, Ordering::Relaxed);
                b[n / 2].fetch_add(9, Ordering::Relaxed);
                assert_eq!(a[n - 1].load(Ordering::Relaxed), 7);
                assert_eq!(b[n / 2].load(Ordering::Relaxed), 9);
            }
        }
    }
}
