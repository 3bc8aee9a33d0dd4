//! Tests of registered memory (`memory.rs`).

use super::*;

#[test]
fn long_reads_copy_exactly_the_words_asked_at_any_alignment() {
    let r = Region::new("r", 8 * 600).unwrap();
    for (i, w) in r.words().iter().enumerate() {
        w.store(
            0x0101_0101_0101_0101u64.wrapping_mul(i as u64 + 1),
            Ordering::Relaxed,
        );
    }
    for first in 0..3 {
        for words in [31, 32, 33, 40, 47, 64, 65, 79, 500, 597] {
            let mut buf = vec![0xeeu8; words * 8];
            r.read_words(first, &mut buf);
            let mut want = Vec::new();
            for w in &r.words()[first..first + words] {
                want.extend_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
            }
            assert_eq!(buf, want, "first {first}, {words} words");
        }
    }
}

#[test]
fn long_writes_store_exactly_the_words_given_at_any_alignment() {
    for first in 0..3 {
        for words in [7, 8, 9, 16, 31, 40, 47, 64, 65, 500, 597] {
            let r = Region::new("r", 8 * 600).unwrap();
            let data: Vec<u8> = (0..words * 8).map(|i| (i * 7 + first) as u8).collect();
            r.write_words(first, &data);
            for (i, w) in r.words().iter().enumerate() {
                let got = w.load(Ordering::Relaxed);
                if (first..first + words).contains(&i) {
                    let k = (i - first) * 8;
                    let want = u64::from_le_bytes(data[k..k + 8].try_into().unwrap());
                    assert_eq!(got, want, "first {first}, {words} words, word {i}");
                } else {
                    assert_eq!(got, 0, "first {first}, {words} words: word {i} written");
                }
            }
        }
    }
}

#[test]
fn copies_between_regions_move_exactly_the_words_asked_at_any_alignment() {
    let src = Region::new("src", 8 * 600).unwrap();
    for (i, w) in src.words().iter().enumerate() {
        w.store(
            0x0101_0101_0101_0101u64.wrapping_mul(i as u64 + 3),
            Ordering::Relaxed,
        );
    }
    for first in 0..3 {
        for dst_first in 0..3 {
            for words in [1, 7, 8, 9, 16, 31, 40, 47, 64, 65, 500, 597] {
                let dst = Region::new("dst", 8 * 600).unwrap();
                src.copy_words_to(first, &dst, dst_first, words);
                for (i, w) in dst.words().iter().enumerate() {
                    let got = w.load(Ordering::Relaxed);
                    let want = if (dst_first..dst_first + words).contains(&i) {
                        src.words()[first + i - dst_first].load(Ordering::Relaxed)
                    } else {
                        0
                    };
                    assert_eq!(
                        got, want,
                        "from word {first} to word {dst_first}, {words} words: word {i}"
                    );
                }
            }
        }
    }
}

#[test]
fn copies_between_regions_never_tear_a_word() {
    // The source's words keep their halves equal; a torn load or store breaks that.
    let src = Arc::new(Region::new("src", 8 * 1024).unwrap());
    let dst = Region::new("dst", 8 * 1024).unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (src, stop) = (src.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut k = 1u64;
            while !stop.load(Ordering::Relaxed) {
                for w in src.words() {
                    w.store(k << 32 | k, Ordering::Release);
                }
                k = (k + 1) & 0xffff_ffff;
            }
        })
    };
    for round in 0..2000 {
        let (first, dst_first) = (round % 2, (round / 2) % 2);
        src.copy_words_to(first, &dst, dst_first, 1022);
        for w in &dst.words()[dst_first..dst_first + 1022] {
            let w = w.load(Ordering::Acquire);
            assert_eq!(w >> 32, w & 0xffff_ffff, "torn word {w:#x}");
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
}

#[test]
fn long_writes_are_never_seen_torn() {
    // Each long write keeps every word's halves equal; a torn store breaks that.
    let r = Arc::new(Region::new("r", 8 * 1024).unwrap());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (r, stop) = (r.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut k = 1u64;
            let mut data = vec![0u8; 8 * 1023];
            while !stop.load(Ordering::Relaxed) {
                for c in data.chunks_exact_mut(8) {
                    c.copy_from_slice(&(k << 32 | k).to_le_bytes());
                }
                r.write_words(1, &data);
                k = (k + 1) & 0xffff_ffff;
            }
        })
    };
    for _ in 0..200 {
        for w in &r.words()[1..] {
            let w = w.load(Ordering::Acquire);
            assert_eq!(w >> 32, w & 0xffff_ffff, "torn word {w:#x}");
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
}

#[test]
fn long_reads_never_see_a_torn_word_while_it_is_written() {
    // Each writer store keeps a word's halves equal; a torn read breaks that.
    let r = Arc::new(Region::new("r", 8 * 1024).unwrap());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (r, stop) = (r.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut k = 1u64;
            while !stop.load(Ordering::Relaxed) {
                for w in r.words() {
                    w.store(k << 32 | k, Ordering::Release);
                }
                k = (k + 1) & 0xffff_ffff;
            }
        })
    };
    let mut buf = vec![0u8; 8 * 1023];
    for _ in 0..2000 {
        r.read_words(1, &mut buf);
        for c in buf.chunks_exact(8) {
            let w = u64::from_le_bytes(c.try_into().unwrap());
            assert_eq!(w >> 32, w & 0xffff_ffff, "torn word {w:#x}");
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
}

/// The store sizes value regions with room for migrations it may never
/// make; a region larger than all of this machine's memory must map
/// (lazily) unless strict overcommit accounting is on.
#[test]
fn a_region_larger_than_memory_maps_lazily() {
    let strict =
        std::fs::read_to_string("/proc/sys/vm/overcommit_memory").is_ok_and(|m| m.trim() == "2");
    let len = 1u64 << 36; // 64 GiB
    match Region::new("huge", len) {
        Ok(r) => {
            assert!(!strict, "strict overcommit should refuse 64 GiB");
            let last = r.len_words - 1;
            r.words()[last].store(7, Ordering::Relaxed);
            assert_eq!(r.words()[last].load(Ordering::Relaxed), 7);
            assert_eq!(r.words()[0].load(Ordering::Relaxed), 0);
        }
        Err(e) => {
            assert!(strict, "64 GiB refused without strict overcommit: {e}");
            assert!(matches!(e, FabricError::NoMemory { len: l, .. } if l == len));
        }
    }
}

#[test]
fn region_limits() {
    assert!(matches!(
        Region::new("big", REGION_BYTES_MAX + 8),
        Err(FabricError::RegionTooLarge { .. })
    ));
    assert!(matches!(
        Region::new("odd", 12),
        Err(FabricError::Misaligned { .. })
    ));
    let r = Region::new("r", 64).unwrap();
    assert!(r.check(0, RegionId(0), 56, 8).is_ok());
    assert!(r.check(0, RegionId(0), 56, 16).is_err());
    assert!(r.check(0, RegionId(0), u64::MAX - 7, 8).is_err());
}

#[test]
fn pinning_keeps_every_word() {
    let r = Region::new("r", 3 * 4096 + 64).unwrap();
    for (i, w) in r.words().iter().enumerate() {
        w.store(i as u64 * 7 + 1, Ordering::Relaxed);
    }
    r.pin();
    for (i, w) in r.words().iter().enumerate() {
        assert_eq!(w.load(Ordering::Relaxed), i as u64 * 7 + 1);
    }
    let m = MachineMemory::new(0, 4, true);
    let info = m.register("pinned", 8192).unwrap();
    assert_eq!(info.len_bytes, 8192);
}

#[test]
fn words_round_trip_little_endian() {
    let r = Region::new("r", 32).unwrap();
    let data: Vec<u8> = (0..16).collect();
    r.write_words(1, &data);
    let mut out = vec![0u8; 16];
    r.read_words(1, &mut out);
    assert_eq!(out, data);
    assert_eq!(
        r.words()[1].load(Ordering::Relaxed),
        u64::from_le_bytes(data[..8].try_into().unwrap())
    );
}
