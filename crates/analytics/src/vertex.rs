//! Per-vertex arrays that may live in paged memory (issue 12, requirement 4:
//! "vertex data that pages too").
//!
//! The algorithms keep their vertex data (levels, labels, ranks, masks,
//! bitmaps) in [`VertexVec`]s. A `VertexVec` is an ordinary slice to the
//! code that uses it: indexing is a plain load or store, with no check and
//! no lock. Where its memory comes from is decided when it is allocated:
//! while a [`scope`] holds a [`VertexMemory`] on the allocating thread (the
//! paged backend's vertex pager, `store::vpage`), the array is placed in that
//! memory, whose pages the kernel faults to the pager through userfaultfd;
//! otherwise it is a `Vec`. `algo::run` opens the scope for the store it
//! runs on, so the algorithm code is the same for every backend.
//!
//! Unsafe code (allowed in this module and `store::uffd` only): a paged
//! array is a raw pointer into the pager's mapping, valid while the array
//! holds its `Arc` of the pager, and its element types ([`VertexValue`])
//! are plain data without destructors, for which every written value is
//! valid and copying bytes is copying values.

use std::cell::RefCell;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;

use serde::Serialize;

/// Memory that vertex arrays can be placed in.
pub trait VertexMemory: Send + Sync {
    /// `bytes` (> 0) of memory aligned to a page, reading as zero until
    /// written. Panics, naming the sizes, when the memory is exhausted: it
    /// is sized from the algorithm's vertex bytes, so that is a bug.
    fn alloc(&self, bytes: usize) -> NonNull<u8>;
    /// Returns memory `alloc` gave out (same `bytes`); its pages are dropped.
    fn free(&self, ptr: NonNull<u8>, bytes: usize);
    /// What paging the memory did so far.
    fn stats(&self) -> VertexPagingStats;
}

/// What the vertex pager did (all zero when vertex data is local).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct VertexPagingStats {
    /// Faults on pages with a far copy: one charged READ each.
    pub faults: u64,
    /// Pages read ahead after such a fault: one charged READ each.
    pub readahead_pages: u64,
    /// First touches of pages never written back: zero-filled, no READ.
    pub zero_fills: u64,
    /// Touches of pages unmapped but still held locally (the second chance):
    /// mapped again, no READ.
    pub minor_faults: u64,
    /// First writes to clean pages (write-protect faults that mark them dirty).
    pub write_faults: u64,
    /// Pages unmapped to test whether they are still used.
    pub deactivations: u64,
    /// Dirty pages written back when evicted: one charged WRITE each.
    pub writebacks: u64,
    /// Bytes read from far memory (faults and readahead).
    pub bytes_fetched: u64,
    /// Bytes written to far memory.
    pub bytes_written: u64,
    /// Most pages of vertex data the pager held at once (mapped or kept).
    pub resident_pages_peak: u64,
    /// Most bytes of vertex arrays allocated at once (whole pages): at least
    /// the algorithm's vertex bytes when every array it keeps pages.
    pub array_bytes_peak: u64,
}

mod sealed {
    pub trait Sealed {}
}

/// Element types a [`VertexVec`] may hold: plain data, no destructor.
pub trait VertexValue: sealed::Sealed + Send + Sync + 'static {}

macro_rules! plain {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl VertexValue for $t {}
    )*};
}
plain!(u8, u32, u64, f32, f64, (u32, u32), (u32, f64), AtomicU32);

thread_local! {
    static CURRENT: RefCell<Option<Arc<dyn VertexMemory>>> = const { RefCell::new(None) };
}

/// While the returned guard lives, [`VertexVec`]s allocated on this thread
/// go to `mem` (local `Vec`s if `None`). Scopes nest; the guard restores
/// the previous one.
pub fn scope(mem: Option<Arc<dyn VertexMemory>>) -> Scope {
    let previous = CURRENT.with(|c| c.replace(mem));
    Scope { previous }
}

/// Restores the previous vertex memory when dropped.
pub struct Scope {
    previous: Option<Arc<dyn VertexMemory>>,
}

impl Drop for Scope {
    fn drop(&mut self) {
        let p = self.previous.take();
        CURRENT.with(|c| *c.borrow_mut() = p);
    }
}

fn current() -> Option<Arc<dyn VertexMemory>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// A fixed-length array of per-vertex values, in local or paged memory.
pub struct VertexVec<T: VertexValue> {
    ptr: NonNull<T>,
    len: usize,
    backing: Backing<T>,
}

enum Backing<T> {
    Local(#[allow(dead_code)] Vec<T>),
    Paged(Arc<dyn VertexMemory>),
}

// A VertexVec owns its elements like a Vec does.
unsafe impl<T: VertexValue> Send for VertexVec<T> {}
unsafe impl<T: VertexValue> Sync for VertexVec<T> {}

impl<T: VertexValue> VertexVec<T> {
    /// `len` values made by `f(i)`, in the current scope's memory.
    pub fn from_fn(len: usize, mut f: impl FnMut(usize) -> T) -> VertexVec<T> {
        let bytes = len * std::mem::size_of::<T>();
        match current() {
            Some(mem) if bytes > 0 => {
                let raw = mem.alloc(bytes);
                let ptr = raw.cast::<T>();
                for i in 0..len {
                    // In bounds of an allocation of `len` values, page aligned.
                    unsafe { ptr.as_ptr().add(i).write(f(i)) };
                }
                VertexVec {
                    ptr,
                    len,
                    backing: Backing::Paged(mem),
                }
            }
            _ => {
                let mut v: Vec<T> = (0..len).map(f).collect();
                VertexVec {
                    ptr: NonNull::new(v.as_mut_ptr()).expect("a Vec's pointer is never null"),
                    len,
                    backing: Backing::Local(v),
                }
            }
        }
    }

    /// Whether the array is in paged memory.
    pub fn is_paged(&self) -> bool {
        matches!(self.backing, Backing::Paged(_))
    }
}

impl<T: VertexValue + Copy> VertexVec<T> {
    /// `len` copies of `x`, in the current scope's memory.
    pub fn filled(x: T, len: usize) -> VertexVec<T> {
        VertexVec::from_fn(len, |_| x)
    }

    /// A copy of `s`, in the current scope's memory.
    pub fn from_slice(s: &[T]) -> VertexVec<T> {
        VertexVec::from_fn(s.len(), |i| s[i])
    }
}

impl<T: VertexValue> Deref for VertexVec<T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        // `ptr` points at `len` initialised values owned by `backing`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: VertexValue> DerefMut for VertexVec<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: VertexValue> Drop for VertexVec<T> {
    fn drop(&mut self) {
        if let Backing::Paged(mem) = &self.backing {
            // Elements need no drop (VertexValue); give the pages back.
            mem.free(self.ptr.cast(), self.len * std::mem::size_of::<T>());
        }
    }
}

impl<T: VertexValue + Copy> Clone for VertexVec<T> {
    /// A copy in the current scope's memory (of the cloning thread).
    fn clone(&self) -> Self {
        VertexVec::from_slice(self)
    }
}

impl<T: VertexValue + PartialEq> PartialEq for VertexVec<T> {
    fn eq(&self, o: &Self) -> bool {
        **self == **o
    }
}

impl<T: VertexValue + Eq> Eq for VertexVec<T> {}

impl<T: VertexValue + fmt::Debug> fmt::Debug for VertexVec<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_a_scope_arrays_are_local_vecs() {
        let mut v = VertexVec::filled(7u32, 10);
        assert!(!v.is_paged());
        v[3] = 1;
        assert_eq!(v.iter().sum::<u32>(), 64);
        let c = v.clone();
        assert_eq!(c, v);
        let e: VertexVec<u64> = VertexVec::filled(0, 0);
        assert!(e.is_empty());
    }
}
