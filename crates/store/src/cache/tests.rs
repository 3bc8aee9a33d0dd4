//! Unit tests of `cache.rs`.

use super::*;

const MS: u64 = NS_PER_MS;

fn cache(entries_per_shard: u64, shards: usize, lease_ms: u64) -> LocationCache {
    LocationCache::new(CacheConfig {
        bytes_max: entries_per_shard * shards as u64 * ENTRY_BYTES,
        lease_ms,
        shards,
        hot_count: 3,
    })
    .unwrap()
}

#[test]
fn hot_keys_are_listed_once_when_their_count_reaches_the_threshold() {
    let c = cache(16, 2, 1_000);
    c.insert(Key(1), 11, 0);
    c.insert(Key(2), 22, 0);
    for _ in 0..5 {
        c.get(Key(1), 1);
    }
    c.get(Key(2), 1);
    let mut hot = Vec::new();
    c.take_hot(|k| hot.push(k.0));
    assert_eq!(hot, vec![1]);
    hot.clear();
    c.take_hot(|k| hot.push(k.0));
    assert!(hot.is_empty(), "listed once");
    // record counts without serving, and lists a key reaching the threshold.
    for _ in 0..3 {
        c.record(Key(9), 99, 2);
    }
    c.take_hot(|k| hot.push(k.0));
    assert_eq!(hot, vec![9]);
    assert!(counts(&c).contains(&(9, 99, 3)));
}

#[test]
fn hot_keys_of_every_shard_are_taken_though_shards_share_a_mark() {
    // 256 shards: shard i and i + 64 share bit i % 64 of the mark.
    let c = cache(64, 256, 1_000);
    let keys: Vec<u64> = (0..2_000).collect();
    for &k in &keys {
        c.insert(Key(k), k + 1, 0);
    }
    let mut hot = Vec::new();
    c.take_hot(|k| hot.push(k.0));
    assert!(hot.is_empty(), "nothing is hot yet");
    // Every third key turns hot, by lookups, by records and by folds.
    for &k in keys.iter().step_by(3) {
        for _ in 0..3 {
            c.get(Key(k), 1);
        }
    }
    for &k in keys.iter().skip(1).step_by(3) {
        c.fold(Key(k), 3);
    }
    for k in 5_000..5_300u64 {
        for _ in 0..3 {
            c.record(Key(k), k, 2);
        }
    }
    c.take_hot(|k| hot.push(k.0));
    hot.sort_unstable();
    let mut want: Vec<u64> = keys.iter().copied().filter(|k| k % 3 != 2).collect();
    want.extend(5_000..5_300u64);
    want.retain(|&k| c.peek(Key(k)).is_some());
    assert!(want.len() > 1_000, "most keys still cached: {}", want.len());
    assert_eq!(hot, want);
    hot.clear();
    c.take_hot(|k| hot.push(k.0));
    assert!(hot.is_empty(), "each key is handed out once");
}

#[test]
fn hot_keys_listed_while_the_monitor_takes_are_never_lost() {
    // Workers turn keys hot while a monitor thread takes the lists; each key
    // must come out exactly once, in this take or a later one.
    let c = std::sync::Arc::new(cache(4_096, 64, 60_000));
    let per_worker = 20_000u64;
    for k in 0..2 * per_worker {
        c.insert(Key(k), k + 1, 0);
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let monitor = {
        let (c, stop) = (c.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            while !stop.load(Ordering::Acquire) {
                c.take_hot(|k| seen.push(k.0));
                std::thread::yield_now();
            }
            c.take_hot(|k| seen.push(k.0));
            seen
        })
    };
    let workers: Vec<_> = (0..2u64)
        .map(|w| {
            let c = c.clone();
            std::thread::spawn(move || {
                for k in w * per_worker..(w + 1) * per_worker {
                    for _ in 0..3 {
                        c.get(Key(k), 1);
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Release);
    let mut seen = monitor.join().unwrap();
    seen.sort_unstable();
    let dropped = c.stats().hot_dropped;
    assert_eq!(
        seen.len() as u64 + dropped,
        2 * per_worker,
        "every hot key taken or counted as dropped"
    );
    seen.dedup();
    assert_eq!(
        seen.len() as u64 + dropped,
        2 * per_worker,
        "no key taken twice"
    );
}

fn counts(c: &LocationCache) -> Vec<(u64, u64, u32)> {
    let mut v = Vec::new();
    c.access_counts(|k, w, n| v.push((k.0, w, n)));
    v.sort_unstable();
    v
}

#[test]
fn unmix_inverts_mix() {
    for x in [0, 1, 2, u64::MAX, 1 << 63, 0x1234_5678_9abc_def0] {
        assert_eq!(unmix(mix(x)), x);
        assert_eq!(mix(unmix(x)), x);
    }
    let mut x = 7u64;
    for _ in 0..10_000 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        assert_eq!(unmix(mix(x)), x);
    }
}

#[test]
fn hit_and_miss() {
    let c = cache(16, 4, 1000);
    assert_eq!(c.get(Key(5), 0), None);
    c.insert(Key(5), 0xabc, 0);
    assert_eq!(c.get(Key(5), 1), Some(0xabc));
    assert_eq!(c.get(Key(6), 1), None);
    let s = c.stats();
    assert_eq!((s.hits, s.misses, s.inserts), (1, 2, 1));
    assert_eq!(c.len(), 1);
    assert_eq!(c.bytes(), ENTRY_BYTES);
}

#[test]
fn lease_expires_exactly_at_the_boundary() {
    let c = cache(16, 1, 10);
    let t0 = 1_000;
    c.insert(Key(1), 0x10, t0);
    assert_eq!(c.get(Key(1), t0 + 10 * MS - 1), Some(0x10));
    assert_eq!(
        c.get(Key(1), t0 + 10 * MS),
        None,
        "cached_at + lease is expired"
    );
    assert!(c.is_empty(), "an expired entry is dropped");
    assert_eq!(c.stats().expired, 1);
    // A hit does not extend the lease; only an insert restamps.
    c.insert(Key(1), 0x10, t0);
    assert_eq!(c.get(Key(1), t0 + 5 * MS), Some(0x10));
    assert_eq!(c.get(Key(1), t0 + 10 * MS), None);
    c.insert(Key(1), 0x10, t0);
    c.insert(Key(1), 0x10, t0 + 5 * MS);
    assert_eq!(c.get(Key(1), t0 + 10 * MS), Some(0x10));
    // A reader whose clock is behind the stamp sees age 0, not a wrap.
    assert_eq!(c.get(Key(1), 0), Some(0x10));
}

#[test]
fn replace_keeps_count_and_restamps() {
    let c = cache(16, 2, 10);
    c.insert(Key(9), 0x1, 0);
    for _ in 0..3 {
        c.get(Key(9), 0);
    }
    c.insert(Key(9), 0x2, 8 * MS);
    assert_eq!(counts(&c), vec![(9, 0x2, 3)]);
    assert_eq!(c.get(Key(9), 12 * MS), Some(0x2));
    assert_eq!(c.stats().replaces, 1);
    assert_eq!(c.len(), 1);
}

#[test]
fn remove_if_only_drops_the_same_word() {
    let c = cache(16, 2, 10);
    c.insert(Key(3), 0x30, 0);
    assert!(!c.remove_if(Key(3), 0x31), "a newer address is kept");
    assert_eq!(c.get(Key(3), 0), Some(0x30));
    assert!(c.remove_if(Key(3), 0x30));
    assert_eq!(c.get(Key(3), 0), None);
    assert!(!c.remove_if(Key(3), 0x30));
    c.insert(Key(4), 0x40, 0);
    assert!(c.remove(Key(4)));
    assert!(!c.remove(Key(4)));
    assert_eq!(c.stats().removes, 2);
}

#[test]
fn removal_keeps_the_key_array_dense() {
    let c = cache(64, 1, 10);
    for k in 0..50 {
        c.insert(Key(k), k + 1, 0);
    }
    for k in (0..50).step_by(3) {
        assert!(c.remove(Key(k)));
    }
    let s = lock(&c.shards[0]);
    assert_eq!(s.keys.len(), s.map.len());
    for (i, &h) in s.keys.iter().enumerate() {
        assert_eq!(s.map[&h].slot as usize, i);
    }
}

#[test]
fn eviction_prefers_expired_then_cold() {
    // Seven expired entries and one live: the live one survives.
    let c = cache(8, 1, 10);
    for k in 0..7 {
        c.insert(Key(k), k + 1, 0);
    }
    c.insert(Key(7), 8, 15 * MS);
    c.insert(Key(100), 101, 20 * MS);
    assert!(counts(&c).iter().any(|&(k, _, _)| k == 7));
    assert_eq!(c.stats().evictions, 1);
    assert_eq!(c.len(), 8);
    // Two live entries, one hot and one cold: the cold one goes.
    let c = cache(2, 1, 10);
    c.insert(Key(1), 1, 0);
    c.insert(Key(2), 2, 0);
    for _ in 0..5 {
        c.get(Key(1), 0);
    }
    c.insert(Key(3), 3, 0);
    let left: Vec<u64> = counts(&c).iter().map(|&(k, _, _)| k).collect();
    assert_eq!(left, vec![1, 3]);
}

#[test]
fn aging_halves_counts() {
    let c = cache(4, 1, 1000);
    c.insert(Key(1), 1, 0);
    for _ in 0..8 {
        c.get(Key(1), 0);
    }
    // The hand is at key 1's slot and steps on the fourth insertion.
    for k in 2..AGING_INSERTS_PER_STEP {
        c.insert(Key(k), k, 0);
    }
    assert_eq!(counts(&c)[0], (1, 1, 8));
    c.insert(Key(10), 10, 0);
    assert_eq!(counts(&c)[0], (1, 1, 4));
}

#[test]
fn config_validation() {
    let ok = CacheConfig::default();
    ok.validate().unwrap();
    assert_eq!(ok.entries_max(), (128 << 20) / ENTRY_BYTES / 64 * 64);
    let msg = |c: CacheConfig| c.validate().unwrap_err().to_string();
    assert!(msg(CacheConfig { shards: 3, ..ok }).contains("shards"));
    assert!(msg(CacheConfig { shards: 0, ..ok }).contains("shards"));
    assert!(msg(CacheConfig {
        shards: SHARDS_MAX * 2,
        ..ok
    })
    .contains("shards"));
    assert!(msg(CacheConfig {
        bytes_max: ENTRY_BYTES * 64 - 1,
        ..ok
    })
    .contains("bytes_max"));
    CacheConfig {
        bytes_max: ENTRY_BYTES * 64,
        ..ok
    }
    .validate()
    .unwrap();
    assert!(msg(CacheConfig {
        bytes_max: u64::MAX,
        shards: 1,
        ..ok
    })
    .contains("bytes_max"));
    assert!(msg(CacheConfig { lease_ms: 0, ..ok }).contains("lease_ms"));
    assert!(msg(CacheConfig {
        lease_ms: u64::MAX,
        ..ok
    })
    .contains("lease_ms"));
    assert!(LocationCache::new(CacheConfig { shards: 5, ..ok }).is_err());
}

#[test]
fn cache_lease_within_reclaim_lease() {
    let c = CacheConfig::default();
    c.check_against_reclaim(60_000).unwrap();
    c.check_against_reclaim(120_000).unwrap();
    let e = c.check_against_reclaim(59_999).unwrap_err();
    assert!(matches!(e, StoreError::Config(_)));
    assert!(e.to_string().contains("outlive the memory"));
}

#[test]
fn cache_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<LocationCache>();
}

#[test]
fn inserting_many_at_once_is_inserting_them_one_by_one() {
    // Small shards so that evictions and the aging hand take part; keys
    // repeat, so later entries replace earlier ones (order within a key kept).
    let (one, many) = (cache(8, 4, 1_000), cache(8, 4, 1_000));
    let mut x = 11u64;
    let mut entries = Vec::new();
    for i in 0..400u64 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let key = Key(x >> 58); // 64 keys for 32 entries: evictions
        let position = if i % 3 == 0 { u64::MAX } else { i * 16 };
        entries.push((key, i + 1, position, i * MS));
    }
    // A few hits first, so counts differ and the eviction sample ranks them.
    for c in [&one, &many] {
        for k in 0..8 {
            c.insert_at(Key(k), 1000 + k, 8 * k, 0);
            for _ in 0..k {
                c.get(Key(k), MS);
            }
        }
    }
    for &(key, word, position, now) in &entries {
        one.insert_at(key, word, position, now);
    }
    many.insert_many_at(&entries);
    assert_eq!(one.len(), many.len());
    assert_eq!(one.stats(), many.stats());
    assert_eq!(counts(&one), counts(&many));
    for k in 0..64 {
        assert_eq!(
            one.get_stamped(Key(k), 399 * MS),
            many.get_stamped(Key(k), 399 * MS),
            "key {k}"
        );
    }
    assert!(one.stats().evictions > 0, "the test exercises eviction");
}

/// Taking only the keys listed as they reach the count gives exactly what a
/// walk of every entry gives, over random intervals of gets, records, folds,
/// inserts, replicas, removals and the evictions of a small cache, and
/// counts from an earlier interval never show.
#[test]
fn taking_listed_keys_is_taking_every_entry_counted_enough() {
    let walked = cache(6, 2, 50);
    let listed = cache(6, 2, 50);
    let mut rng = 0x1234_5678u64;
    let mut next = |n: u64| {
        rng = rng.wrapping_add(GOLDEN);
        mix(rng) % n
    };
    let mut overflowed = false;
    let mut reported = 0;
    for interval in 0..300u64 {
        let min = if interval < 150 { 2 } else { 3 };
        for op in 0..60u64 {
            let key = Key(next(24));
            let now = (interval * 60 + op) * MS;
            let word = 1 + next(3);
            for c in [&walked, &listed] {
                match (interval + op) % 7 {
                    0 => c.insert(key, word, now),
                    1 | 2 => drop(c.get(key, now)),
                    3 => c.record(key, word, now),
                    4 => c.fold(key, 1 + (op % 3) as u32),
                    5 if op % 5 == 0 => c.insert_replica(key, word, now),
                    5 => drop(c.remove_if(key, word)),
                    _ => drop(c.remove(key)),
                }
            }
        }
        assert_eq!(counts(&walked), counts(&listed), "interval {interval}");
        overflowed |= listed.shards.iter().any(|p| lock(p).crossed_overflow);
        let mut a = Vec::new();
        walked.take_access_counts(|k, w, n| {
            if n >= min {
                a.push((k.0, w, n))
            }
        });
        let mut b = Vec::new();
        listed.take_counts_at_least(min, |k, w, n| b.push((k.0, w, n)));
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b, "interval {interval}");
        reported += a.len();
        assert!(
            counts(&listed).iter().all(|&(_, _, n)| n == 0),
            "a count of the interval taken shows in the next"
        );
    }
    assert!(reported > 300, "the test reports keys ({reported})");
    assert!(overflowed, "the test fills a shard's list past its bound");
}
