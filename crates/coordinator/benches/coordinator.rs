//! What the coordinator spends on a periodic report (Pragh 4.4): eight
//! machines each report 50,000 keys with the small counts uniform starts
//! give (mostly 2-6 accesses an interval, no key worth a move), as at
//! `bench pragh uniform`, where the coordinator thread takes CPU from the
//! query workers. `cargo bench -p locus-coordinator`.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use locus_coordinator::{Access, Coordinator, Event, PolicyConfig};
use locus_store::Key;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const MACHINES: u8 = 8;
const KEYS_PER_REPORT: usize = 50_000;
const KEY_SPACE: u64 = 200_000;

/// One interval's reports, one per machine, seeded.
fn reports(seed: u64) -> Vec<Event> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..MACHINES)
        .map(|m| {
            let mut keys: Vec<u64> = (0..KEY_SPACE).collect();
            // A random subset of the key space, each with a small count.
            for i in 0..KEYS_PER_REPORT {
                let j = rng.gen_range(i..keys.len());
                keys.swap(i, j);
            }
            let accesses = keys[..KEYS_PER_REPORT]
                .iter()
                .map(|&k| Access {
                    key: Key(k << 8),
                    holder: (k % MACHINES as u64) as u8,
                    count: 2 + rng.gen_range(0..5),
                })
                .collect();
            Event::Report {
                machine: m,
                interval_ms: 10_000,
                accesses,
            }
        })
        .collect()
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
    g.finish();
}

criterion_group!(benches, report_handling);
criterion_main!(benches);
