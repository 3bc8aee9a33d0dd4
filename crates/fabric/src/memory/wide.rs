//! A word-atomic copy out of a region at memcpy speed, for long READs.
//!
//! A READ must see every aligned 8-byte word whole (Pragh footnote 2), so
//! the portable copy loads word by word with atomics, which the compiler
//! cannot widen: about 10 GB/s here against 16 GB/s for `memcpy`. The far
//! backend of the analytics moves gigabytes through READs on the computing
//! thread, work a NIC does by DMA, so the slow copy was charged to the
//! algorithm (issue 12). This copy loads 16 aligned bytes at a time with
//! `movdqa`, which is atomic as a whole on every x86-64 processor that
//! enumerates AVX (Intel's and AMD's manuals both guarantee it; GCC's
//! libatomic relies on it for 16-byte atomic loads), so each word inside is
//! too. Without AVX the portable loop is used.
//!
//! Long WRITEs are stored the same way (`movdqa` stores, equally atomic).
//!
//! Inline assembly, not `ptr::copy`: the region's words may be written by
//! other threads meanwhile, which for a non-atomic Rust read would be a data
//! race; the assembly's loads are the hardware's, whose atomicity is what
//! the paragraph above states. On x86 every load has acquire ordering, as
//! the portable loop's `Acquire` asks.

use std::sync::atomic::{AtomicU64, Ordering};

/// Reads and writes shorter than this take the portable loop.
pub const BYTES_MIN: usize = 64;

/// Whether 16-byte aligned loads are atomic on this processor.
#[inline]
pub fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx")
}

/// Where the 16-byte loop applies to `words`: it starts after `head`
/// words (0 or 1, to a 16-byte boundary) and covers `blocks` blocks of
/// 64 bytes; the words before and after it are moved one at a time.
#[inline]
fn spans(words: &[AtomicU64]) -> (usize, usize) {
    let head = ((words.as_ptr() as usize / 8) % 2).min(words.len());
    (head, (words.len() - head) / 8)
}

/// Copies `words` into `buf` (`buf.len() == 8 * words.len()`).
#[inline]
pub fn copy_words(words: &[AtomicU64], buf: &mut [u8]) {
    debug_assert_eq!(buf.len(), words.len() * 8);
    let (head, blocks) = spans(words);
    if blocks > 0 {
        // SAFETY: `src` is 16-byte aligned (`spans`) and `blocks * 64`
        // bytes of it are the shared atomic words `words` borrows, only
        // loaded; `dst` is as many bytes of the exclusive `buf`, only
        // stored. No stack use; xmm0-3 are declared clobbered.
        unsafe {
            std::arch::asm!(
                "2:",
                "movdqa xmm0, [{src}]",
                "movdqa xmm1, [{src} + 16]",
                "movdqa xmm2, [{src} + 32]",
                "movdqa xmm3, [{src} + 48]",
                "movdqu [{dst}], xmm0",
                "movdqu [{dst} + 16], xmm1",
                "movdqu [{dst} + 32], xmm2",
                "movdqu [{dst} + 48], xmm3",
                "add {src}, 64",
                "add {dst}, 64",
                "dec {n}",
                "jnz 2b",
                src = inout(reg) words[head..].as_ptr() => _,
                dst = inout(reg) buf[head * 8..].as_mut_ptr() => _,
                n = inout(reg) blocks => _,
                out("xmm0") _,
                out("xmm1") _,
                out("xmm2") _,
                out("xmm3") _,
                options(nostack),
            );
        }
    }
    for i in (0..head).chain(head + blocks * 8..words.len()) {
        let w = words[i].load(Ordering::Acquire);
        buf[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
    }
}

/// Stores `data` into `words` (`data.len() == 8 * words.len()`).
#[inline]
pub fn store_words(words: &[AtomicU64], data: &[u8]) {
    debug_assert_eq!(data.len(), words.len() * 8);
    let (head, blocks) = spans(words);
    if blocks > 0 {
        // SAFETY: `dst` is 16-byte aligned (`spans`) and `blocks * 64`
        // bytes of it are the shared atomic words `words` borrows, only
        // stored to, 16 bytes at a time; `src` is as many bytes of
        // `data`, only loaded. No stack use; xmm0-3 are declared clobbered.
        unsafe {
            std::arch::asm!(
                "2:",
                "movdqu xmm0, [{src}]",
                "movdqu xmm1, [{src} + 16]",
                "movdqu xmm2, [{src} + 32]",
                "movdqu xmm3, [{src} + 48]",
                "movdqa [{dst}], xmm0",
                "movdqa [{dst} + 16], xmm1",
                "movdqa [{dst} + 32], xmm2",
                "movdqa [{dst} + 48], xmm3",
                "add {src}, 64",
                "add {dst}, 64",
                "dec {n}",
                "jnz 2b",
                src = inout(reg) data[head * 8..].as_ptr() => _,
                dst = inout(reg) words[head..].as_ptr() => _,
                n = inout(reg) blocks => _,
                out("xmm0") _,
                out("xmm1") _,
                out("xmm2") _,
                out("xmm3") _,
                options(nostack),
            );
        }
    }
    for i in (0..head).chain(head + blocks * 8..words.len()) {
        let v = u64::from_le_bytes(data[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        words[i].store(v, Ordering::Release);
    }
}

/// Copies `src` into `dst` (equal lengths, not overlapping), for a READ
/// that lands in the initiator's own region. The loads are `src`'s 16-byte
/// aligned `movdqa`s, as in [`copy_words`]; each 16 bytes are stored as two
/// 8-byte stores (`movq`, `movhps`), each atomic at any 8-byte aligned
/// address, so `dst` need not share `src`'s alignment.
#[inline]
pub fn move_words(src: &[AtomicU64], dst: &[AtomicU64]) {
    debug_assert_eq!(src.len(), dst.len());
    let (head, blocks) = spans(src);
    if blocks > 0 {
        // SAFETY: `src` is 16-byte aligned (`spans`) and `blocks * 64` bytes
        // of it are shared atomic words, only loaded; `dst` is as many bytes
        // of shared atomic words (8-byte aligned), only stored to, 8 bytes
        // at a time. No stack use; xmm0-3 are declared clobbered.
        unsafe {
            std::arch::asm!(
                "2:",
                "movdqa xmm0, [{src}]",
                "movdqa xmm1, [{src} + 16]",
                "movdqa xmm2, [{src} + 32]",
                "movdqa xmm3, [{src} + 48]",
                "movq qword ptr [{dst}], xmm0",
                "movhps qword ptr [{dst} + 8], xmm0",
                "movq qword ptr [{dst} + 16], xmm1",
                "movhps qword ptr [{dst} + 24], xmm1",
                "movq qword ptr [{dst} + 32], xmm2",
                "movhps qword ptr [{dst} + 40], xmm2",
                "movq qword ptr [{dst} + 48], xmm3",
                "movhps qword ptr [{dst} + 56], xmm3",
                "add {src}, 64",
                "add {dst}, 64",
                "dec {n}",
                "jnz 2b",
                src = inout(reg) src[head..].as_ptr() => _,
                dst = inout(reg) dst[head..].as_ptr() => _,
                n = inout(reg) blocks => _,
                out("xmm0") _,
                out("xmm1") _,
                out("xmm2") _,
                out("xmm3") _,
                options(nostack),
            );
        }
    }
    for i in (0..head).chain(head + blocks * 8..src.len()) {
        dst[i].store(src[i].load(Ordering::Acquire), Ordering::Release);
    }
}
