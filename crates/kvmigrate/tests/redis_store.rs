//! `RedisShard` against the built-in `Table` (the reference): the same random sequence of puts,
//! installs-if-newer (single and batched), reads, group scans and clears gives the same answers
//! from a real `redis-server`. A new store starts empty even over leftovers, and a killed Redis
//! makes the store report a failure instead of answering.

mod redis_common;

use locus_kvmigrate::redis::{agent_resp_config, redis_stores};
use locus_kvmigrate::table::{ShardStore, Table};
use locus_kvmigrate::wire::Item;
use locus_kvmigrate::Geometry;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use redis_common::start_redis;

fn sorted(mut v: Vec<Item>) -> Vec<Item> {
    v.sort_by_key(|i| i.key);
    v
}

#[test]
fn redis_shard_matches_the_in_memory_table() {
    let redis = start_redis();
    let geometry = Geometry::new(6, 2).unwrap();
    let mut make = redis_stores(redis.addr(), agent_resp_config()).unwrap();
    let mut r = make(3, geometry);
    let mut t = Table::new(geometry);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    let mut version = 0u64;
    for step in 0..3_000 {
        let key = rng.gen_range(0..200u64);
        let value = if rng.gen_bool(0.8) {
            Some((0..rng.gen_range(0..40)).map(|_| rng.gen()).collect())
        } else {
            None
        };
        match rng.gen_range(0..100) {
            0..=29 => {
                version += 1;
                let item = Item {
                    key,
                    version: version.max(t.version(key) + 1),
                    value,
                };
                r.put(item.clone());
                t.put(item);
            }
            30..=49 => {
                // Older, equal and newer versions, high bits included.
                let v = rng.gen_range(0..version + 3) | (rng.gen_range(0..3u64) << 48);
                let item = Item {
                    key,
                    version: v,
                    value,
                };
                assert_eq!(
                    r.install_if_newer(item.clone()),
                    t.install_if_newer(item),
                    "step {step}"
                );
            }
            50..=54 => {
                let items: Vec<Item> = (0..rng.gen_range(1..20))
                    .map(|_| Item {
                        key: rng.gen_range(0..200),
                        version: rng.gen_range(0..version + 3),
                        value: Some(vec![1, 2, 3]),
                    })
                    .collect();
                r.install_batch(items.clone());
                ShardStore::install_batch(&mut t, items);
            }
            55..=64 => {
                // A client write: the version read folded into the write script.
                version += 1;
                let candidate = if rng.gen_bool(0.5) { version } else { 1 };
                assert_eq!(
                    r.put_next(key, candidate, value.clone()),
                    t.put_next(key, candidate, value),
                    "step {step}"
                );
            }
            65..=79 => {
                assert_eq!(r.get(key), t.get(key), "step {step}");
                assert_eq!(r.version(key), t.version(key));
            }
            80..=97 => {
                let g = rng.gen_range(0..geometry.groups());
                assert_eq!(
                    sorted(r.scan_group(g)),
                    sorted(t.scan_group(g)),
                    "step {step}"
                );
            }
            _ => {
                r.clear();
                t.clear();
            }
        }
        assert_eq!(r.live(), t.live(), "step {step}");
    }
    assert!(r.health().is_ok());

    // A new store of the same shard starts empty, whatever was left (other shapes included).
    let mut other_shape = make(3, Geometry::new(4, 1).unwrap());
    other_shape.put(Item {
        key: 9,
        version: 1,
        value: Some(vec![9]),
    });
    let fresh = make(3, geometry);
    assert_eq!(fresh.live(), 0);
    assert_eq!(fresh.get(9), None);
    assert!((0..geometry.groups()).all(|g| fresh.scan_group(g).is_empty()));
}

#[test]
fn a_killed_redis_fails_the_store_loudly() {
    let mut redis = start_redis();
    let geometry = Geometry::new(4, 1).unwrap();
    let mut make = redis_stores(redis.addr(), agent_resp_config()).unwrap();
    let mut s = make(1, geometry);
    s.put(Item {
        key: 1,
        version: 1,
        value: Some(vec![1]),
    });
    assert!(s.health().is_ok());
    redis.kill();
    assert_eq!(s.get(1), None, "a placeholder, flagged below");
    let err = s.health().unwrap_err();
    assert!(err.contains(redis.addr()), "{err}");
    // Every later call is a placeholder too, and the first error is kept.
    assert_eq!(s.version(1), 0);
    assert_eq!(s.health().unwrap_err(), err);
}

/// `put_next` carries from the low into the high 32 bits as Lua sees them, and keeps a larger
/// candidate.
#[test]
fn put_next_carries_across_the_32_bit_halves() {
    let redis = start_redis();
    let geometry = Geometry::new(6, 2).unwrap();
    let mut make = redis_stores(redis.addr(), agent_resp_config()).unwrap();
    let mut r = make(1, geometry);
    let mut t = Table::new(geometry);
    for (key, (stored, candidate)) in [
        (0xffff_ffffu64, 5u64),
        ((3 << 48) | 0x1_ffff_ffff, 7),
        (10, (2 << 48) | 1),
        (u64::MAX >> 1, 1),
    ]
    .into_iter()
    .enumerate()
    {
        let key = key as u64 + 10;
        let item = Item {
            key,
            version: stored,
            value: Some(vec![1]),
        };
        r.put(item.clone());
        t.put(item);
        let want = candidate.max(stored + 1);
        assert_eq!(t.put_next(key, candidate, Some(vec![2])), want);
        assert_eq!(
            r.put_next(key, candidate, Some(vec![2])),
            want,
            "{stored:#x}"
        );
        assert_eq!(r.get(key), t.get(key));
    }
    assert_eq!(
        r.put_next(5, 9, None),
        9,
        "an absent key takes the candidate"
    );
    assert_eq!(r.live(), 4, "four values and a tombstone");
}
