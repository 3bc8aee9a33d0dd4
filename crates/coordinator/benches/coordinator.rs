//! What the coordinator spends on a periodic report (Pragh 4.4) when no key
//! is worth a move, as under `bench pragh uniform`, where the coordinator
//! thread takes CPU from the query workers. Two shapes: eight machines each
//! reporting 50,000 keys with counts of 2-6 (a report filter of 2, as
//! before stop 36), and the shape the default filter of 8 gives at the
//! quick preset's R-MAT 16 (about 1,000 keys a machine an interval out of
//! 65,536, counts of 8-15; many intervals in a row, the map warm).
//! `cargo bench -p locus-coordinator`.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use locus_coordinator::{Access, Coordinator, Event, PolicyConfig};
use locus_store::Key;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const MACHINES: u8 = 8;
const KEYS_PER_REPORT: usize = 50_000;
const KEY_SPACE: u64 = 200_000;

/// One interval's reports, one per machine, seeded: `keys` of `space`
/// keys each, counts in `counts`, over `interval_ms`.
fn reports_shaped(
    seed: u64,
    space: u64,
    keys: usize,
    counts: (u32, u32),
    interval_ms: u64,
) -> Vec<Event> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..MACHINES)
        .map(|m| {
            let mut all: Vec<u64> = (0..space).collect();
            // A random subset of the key space, each with a count in range.
            for i in 0..keys {
                let j = rng.gen_range(i..all.len());
                all.swap(i, j);
            }
            let accesses = all[..keys]
                .iter()
                .map(|&k| Access {
                    key: Key(k << 8),
                    holder: (k % MACHINES as u64) as u8,
                    count: rng.gen_range(counts.0..=counts.1),
                })
                .collect();
            Event::Report {
                machine: m,
                interval_ms,
                accesses,
            }
        })
        .collect()
}

/// One interval's reports with a filter of 2: 50,000 keys a machine, counts 2-6.
fn reports(seed: u64) -> Vec<Event> {
    reports_shaped(seed, KEY_SPACE, KEYS_PER_REPORT, (2, 6), 10_000)
}

fn report_handling(c: &mut Criterion) {
    let first = reports(1);
    let second = reports(2);
    let mut g = c.benchmark_group("coordinator");
    g.sample_size(10);
    g.bench_function("8 reports x 50k keys, fresh coordinator", |b| {
        b.iter_batched(
            || {
                (
                    Coordinator::new(PolicyConfig::default()).unwrap(),
                    first.clone(),
                )
            },
            |(mut coord, events)| {
                for e in events {
                    std::hint::black_box(coord.step(0, e));
                }
                coord
            },
            BatchSize::LargeInput,
        )
    });
    g.bench_function("8 reports x 50k keys, second interval", |b| {
        b.iter_batched(
            || {
                let mut coord = Coordinator::new(PolicyConfig::default()).unwrap();
                for e in first.clone() {
                    coord.step(0, e);
                }
                (coord, second.clone())
            },
            |(mut coord, events)| {
                for e in events {
                    std::hint::black_box(coord.step(10_000, e));
                }
                coord
            },
            BatchSize::LargeInput,
        )
    });
    // The quick preset's shape: 20 intervals of reports into one
    // coordinator (interval 1 s), the first few intervals already heard.
    let intervals: Vec<Vec<Event>> = (0..20)
        .map(|i| reports_shaped(100 + i, 65_536, 1_000, (8, 15), 1_000))
        .collect();
    let config = PolicyConfig {
        interval_ms: 1_000,
        dwell_ms: 1_000,
        forget_after_ms: 3_000,
        ..PolicyConfig::default()
    };
    g.bench_function(
        "20 intervals x 8 reports x 1k keys of 64k, counts 8-15",
        |b| {
            b.iter_batched(
                || {
                    let mut coord = Coordinator::new(config.clone()).unwrap();
                    for (i, round) in intervals.iter().take(5).enumerate() {
                        for e in round.clone() {
                            coord.step(i as u64 * 1_000, e);
                        }
                    }
                    (coord, intervals.clone())
                },
                |(mut coord, rounds)| {
                    for (i, round) in rounds.into_iter().enumerate() {
                        for e in round {
                            std::hint::black_box(coord.step(5_000 + i as u64 * 1_000, e));
                        }
                    }
                    assert_eq!(
                        coord.stats().approved,
                        0,
                        "the bench is of reports that move nothing"
                    );
                    coord
                },
                BatchSize::LargeInput,
            )
        },
    );
    g.finish();
}

criterion_group!(benches, report_handling);
criterion_main!(benches);
