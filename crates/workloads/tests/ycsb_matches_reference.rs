//! The YCSB generators return, draw for draw, what YCSB's Java arithmetic
//! returns, and have the distribution properties YCSB's users rely on.
//!
//! `tests/data/ycsb_reference.txt` was produced by `tests/data/YcsbReference.java`
//! (a Java re-derivation on a real `java.util.Random`, `Math.pow` and Java
//! `long` arithmetic; its header says how to regenerate it). Each case
//! replays one `Random(seed)` through [`JavaRandom`] and compares every sample.

use std::collections::HashMap;

use locus_workloads::ycsb::{
    fnvhash64, FastUniform, JavaRandom, Op, RequestDistribution, ScrambledZipfian, UniformLong,
    UniformSource, Workload, Zipfian, SCRAMBLED_ZETAN,
};

const REFERENCE: &str = include_str!("data/ycsb_reference.txt");

/// The reference lines whose first word is `kind`, split into words.
fn cases(kind: &str) -> Vec<Vec<&'static str>> {
    let found: Vec<Vec<&str>> = REFERENCE
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|w| w.first() == Some(&kind))
        .collect();
    assert!(!found.is_empty(), "no `{kind}` cases in the reference file");
    found
}

fn num<T: std::str::FromStr>(s: &str) -> T
where
    T::Err: std::fmt::Debug,
{
    s.parse()
        .unwrap_or_else(|e| panic!("bad number {s:?}: {e:?}"))
}

#[test]
fn java_random_matches_the_jvm() {
    for case in cases("random") {
        let seed: i64 = num(case[1]);
        let groups: Vec<&[&str]> = case[2..].split(|w| *w == "|").collect();
        assert_eq!(groups.len(), 3);
        let mut r = JavaRandom::new(seed);
        for bits in groups[0] {
            let want = f64::from_bits(u64::from_str_radix(bits, 16).unwrap());
            assert_eq!(r.next_double().to_bits(), want.to_bits(), "seed {seed}");
        }
        for v in groups[1] {
            assert_eq!(r.next_long(), num::<i64>(v), "seed {seed}");
        }
        for v in groups[2] {
            assert_eq!(r.next_int(), num::<i32>(v), "seed {seed}");
        }
    }
}

#[test]
fn fnvhash64_matches_the_jvm() {
    let case = &cases("fnv")[0];
    assert!(case.len() > 200);
    for pair in &case[1..] {
        let (input, output) = pair.split_once(':').unwrap();
        let input = num::<i64>(input) as u64;
        assert_eq!(
            fnvhash64(input) as i64,
            num::<i64>(output),
            "fnvhash64({input})"
        );
    }
}

#[test]
fn zipfian_matches_the_jvm() {
    for case in cases("zipfian") {
        let (min, max, theta, seed): (u64, u64, f64, i64) =
            (num(case[1]), num(case[2]), num(case[3]), num(case[4]));
        let mut z = Zipfian::new(min, max, theta).unwrap();
        let mut r = JavaRandom::new(seed);
        for (i, want) in case[5..].iter().enumerate() {
            assert_eq!(
                z.next(&mut r),
                num::<u64>(want),
                "zipfian {min}..={max} theta {theta} seed {seed}, sample {i}"
            );
        }
    }
}

#[test]
fn zipfian_with_changing_item_count_matches_the_jvm() {
    let case = &cases("zipfian_counts")[0];
    let (min, max, theta, seed): (u64, u64, f64, i64) =
        (num(case[1]), num(case[2]), num(case[3]), num(case[4]));
    let mut z = Zipfian::new(min, max, theta).unwrap();
    let mut r = JavaRandom::new(seed);
    for (i, pair) in case[5..].iter().enumerate() {
        let (count, want) = pair.split_once(':').unwrap();
        assert_eq!(
            z.next_with_count(num(count), &mut r),
            num::<u64>(want),
            "sample {i} with item count {count}"
        );
    }
}

#[test]
fn scrambled_zipfian_matches_the_jvm() {
    for case in cases("scrambled") {
        let (min, max, seed): (u64, u64, i64) = (num(case[1]), num(case[2]), num(case[3]));
        let mut g = if min == 0 {
            ScrambledZipfian::new(max + 1).unwrap()
        } else {
            ScrambledZipfian::with_range(min, max).unwrap()
        };
        let mut r = JavaRandom::new(seed);
        for (i, want) in case[4..].iter().enumerate() {
            let got = g.next(&mut r);
            assert_eq!(
                got,
                num::<u64>(want),
                "scrambled {min}..={max} seed {seed}, sample {i}"
            );
            assert!((min..=max).contains(&got));
        }
    }
}

#[test]
fn uniform_long_matches_the_jvm() {
    for case in cases("uniform") {
        let (lb, ub, seed): (u64, u64, i64) = (num(case[1]), num(case[2]), num(case[3]));
        let mut g = UniformLong::new(lb, ub).unwrap();
        let mut r = JavaRandom::new(seed);
        for (i, want) in case[4..].iter().enumerate() {
            assert_eq!(
                g.next(&mut r),
                num::<u64>(want),
                "uniform {lb}..={ub}, sample {i}"
            );
        }
    }
}

#[test]
fn core_workload_operations_match_the_jvm() {
    let mut names = Vec::new();
    for case in cases("ops") {
        let (name, read, update, dist, records, seed) = (
            case[1],
            num::<f64>(case[2]),
            num::<f64>(case[3]),
            case[4],
            num::<u64>(case[5]),
            num::<i64>(case[6]),
        );
        names.push(name);
        let mix = match name {
            "a" => Workload::a(),
            "b" => Workload::b(),
            "c" => Workload::c(),
            _ => Workload::with_write_ratio(update).unwrap(),
        };
        assert_eq!(
            (mix.read_proportion, mix.update_proportion),
            (read, update),
            "workload {name}"
        );
        let mix = mix.distribution(match dist {
            "zipfian" => RequestDistribution::Zipfian,
            "uniform" => RequestDistribution::Uniform,
            other => panic!("unknown distribution {other}"),
        });
        let mut g = mix.generator(records).unwrap();
        let mut r = JavaRandom::new(seed);
        for (i, want) in case[7..].iter().enumerate() {
            let (kind, item) = want.split_at(1);
            let want = match kind {
                "R" => Op::Read(num(item)),
                "U" => Op::Update(num(item)),
                other => panic!("unknown op {other}"),
            };
            assert_eq!(
                g.next(&mut r),
                want,
                "workload {name} {dist} over {records} records, seed {seed}, op {i}"
            );
        }
    }
    for w in ["a", "b", "c", "w10", "w20", "w30"] {
        assert!(names.contains(&w), "reference lacks workload {w}");
    }
}

// ---------------------------------------------------------------------------
// Distribution properties (any uniform source; here the fast one).
// ---------------------------------------------------------------------------

/// Counts of each item over `n` draws.
fn histogram(n: usize, mut draw: impl FnMut() -> u64) -> HashMap<u64, u64> {
    let mut counts = HashMap::new();
    for _ in 0..n {
        *counts.entry(draw()).or_insert(0) += 1;
    }
    counts
}

#[test]
fn zipfian_is_skewed_as_zipf_predicts() {
    let items = 1000u64;
    let mut z = Zipfian::new(0, items - 1, 0.99).unwrap();
    let mut u = FastUniform::new(1);
    let n = 400_000;
    let counts = histogram(n, || z.next(&mut u));
    let zetan: f64 = (1..=items).map(|i| 1.0 / (i as f64).powf(0.99)).sum();
    // Items 0 and 1 are exact in Gray's method: P = 1/zeta, 2^-theta/zeta.
    for (item, p) in [(0u64, 1.0 / zetan), (1, 0.5f64.powf(0.99) / zetan)] {
        let got = counts[&item] as f64 / n as f64;
        assert!((got - p).abs() < 0.1 * p, "P({item}) = {got}, want {p}");
    }
    // The 10 hottest items carry far more than 10 / 1000 of the draws.
    let top10: u64 = (0..10).map(|i| counts.get(&i).copied().unwrap_or(0)).sum();
    assert!(top10 as f64 / n as f64 > 0.3, "top 10 share {top10}");
    assert!(counts.keys().all(|&k| k <= items));
}

#[test]
fn scrambled_zipfian_spreads_hot_items_and_keeps_skew() {
    let items = 100_000u64;
    let mut g = ScrambledZipfian::new(items).unwrap();
    let mut u = FastUniform::new(2);
    let n = 300_000;
    let counts = histogram(n, || g.next(&mut u));
    assert!(counts.keys().all(|&k| k < items));
    let mut by_count: Vec<(u64, u64)> = counts.iter().map(|(&k, &c)| (c, k)).collect();
    by_count.sort_unstable_by(|a, b| b.cmp(a));
    // Skew: the hottest item alone takes about 1 / ZETAN of the draws (the
    // Zipfian's item 0), far above uniform's 1 / items.
    let hottest = by_count[0].0 as f64 / n as f64;
    assert!((0.03..0.045).contains(&hottest), "hottest share {hottest}");
    // The hottest is where YCSB puts it: fnvhash64(0) mod items.
    assert_eq!(by_count[0].1, fnvhash64(0) % items);
    // Spread: the 100 hottest items fall in many of the 10 tenths of the range.
    let tenths: std::collections::HashSet<u64> = by_count[..100]
        .iter()
        .map(|&(_, k)| k * 10 / items)
        .collect();
    assert!(tenths.len() >= 8, "hot items clustered in {tenths:?}");
    // And the 100 hottest carry what the Zipfian's 100 hottest carry,
    // zeta(100) / ZETAN (about 0.2; the underlying range is 10^10 items),
    // not 100 / items.
    let top100: u64 = by_count[..100].iter().map(|&(c, _)| c).sum();
    let want = (1..=100).map(|i| 1.0 / (i as f64).powf(0.99)).sum::<f64>() / SCRAMBLED_ZETAN;
    let got = top100 as f64 / n as f64;
    assert!(
        got > 0.9 * want && got < 1.2 * want,
        "top 100 share {got}, want {want}"
    );
}

#[test]
fn operation_mix_follows_the_write_ratio() {
    for (w, ratio) in [
        (Workload::a(), 0.5),
        (Workload::b(), 0.05),
        (Workload::c(), 0.0),
        (Workload::with_write_ratio(0.1).unwrap(), 0.1),
        (Workload::with_write_ratio(0.2).unwrap(), 0.2),
        (Workload::with_write_ratio(0.3).unwrap(), 0.3),
    ] {
        let mut g = w.generator(10_000).unwrap();
        let mut u = FastUniform::new(3);
        let n = 100_000;
        let updates = (0..n)
            .filter(|_| {
                let op = g.next(&mut u);
                assert!(op.item() < 10_000);
                matches!(op, Op::Update(_))
            })
            .count();
        let got = updates as f64 / n as f64;
        assert!((got - ratio).abs() < 0.01, "write ratio {ratio}: got {got}");
    }
}

#[test]
fn uniform_requests_cover_the_records_evenly() {
    let mut g = Workload::b()
        .distribution(RequestDistribution::Uniform)
        .generator(100)
        .unwrap();
    let mut u = FastUniform::new(4);
    let counts = histogram(200_000, || g.next(&mut u).item());
    assert_eq!(counts.len(), 100);
    assert!(
        counts.values().all(|&c| (1600..2400).contains(&c)),
        "{counts:?}"
    );
}

#[test]
fn fast_uniform_is_seeded_and_in_range() {
    let (mut a, mut b) = (FastUniform::new(9), FastUniform::new(9));
    for _ in 0..10_000 {
        let x = a.next_f64();
        assert!((0.0..1.0).contains(&x));
        assert_eq!(x.to_bits(), b.next_f64().to_bits());
    }
    assert_ne!(
        FastUniform::new(1).next_i64(),
        FastUniform::new(2).next_i64()
    );
}
