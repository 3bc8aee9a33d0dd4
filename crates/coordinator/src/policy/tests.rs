//! Screening ("Screening" in the module doc) is an optimisation: a
//! coordinator that screens its reports must take every decision one that
//! weighs every busy key takes. Both are fed the same seeded stream of
//! reports, instant reports, tracking counts and migration outcomes, with
//! counts around every threshold, and must answer every event alike.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::*;

const MACHINES: u8 = 5;
const KEYS: u64 = 8;

/// A count near one of the thresholds: the report filter and `count_min`
/// (8), the unseen-rival bound (~32 at 1 s), or well past them.
fn count(rng: &mut Xoshiro256PlusPlus) -> u32 {
    match rng.gen_range(0..4) {
        0 => rng.gen_range(0..12),
        1 => rng.gen_range(12..45),
        2 => rng.gen_range(45..120),
        _ => rng.gen_range(120..400),
    }
}

/// Runs `steps` random events through a screening and a weighing
/// coordinator with `config`; returns the screener's stats.
fn differential(config: PolicyConfig, seed: u64, steps: usize) -> Stats {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut screener = Coordinator::new(config.clone()).unwrap();
    let mut weigher = Coordinator::new(config).unwrap();
    weigher.screen = false;
    // Where each value really is (keys start at home), and what is pending.
    let mut holder: Vec<MachineId> = (0..KEYS).map(|k| (k % MACHINES as u64) as u8).collect();
    let mut moving: Vec<(Key, MachineId)> = Vec::new();
    let mut tracking: Vec<(MachineId, Vec<Key>)> = Vec::new();
    let mut now = 0u64;
    for step in 0..steps {
        now += rng.gen_range(0..400);
        let event = match rng.gen_range(0..10) {
            0..=5 => {
                let machine = rng.gen_range(0..MACHINES);
                let accesses = (0..rng.gen_range(1..5))
                    .map(|_| {
                        let k = rng.gen_range(0..KEYS);
                        // Now and then a report still names the old holder.
                        let h = if rng.gen_bool(0.1) {
                            rng.gen_range(0..MACHINES)
                        } else {
                            holder[k as usize]
                        };
                        Access {
                            key: Key(k),
                            holder: h,
                            count: count(&mut rng),
                        }
                    })
                    .collect();
                Event::Report {
                    machine,
                    interval_ms: rng.gen_range(600..1_400),
                    accesses,
                }
            }
            6 => {
                let k = rng.gen_range(0..KEYS);
                Event::Hot {
                    machine: rng.gen_range(0..MACHINES),
                    elapsed_ms: rng.gen_range(50..1_000),
                    access: Access {
                        key: Key(k),
                        holder: holder[k as usize],
                        count: count(&mut rng),
                    },
                }
            }
            7 if !moving.is_empty() => {
                let (key, to) = moving.remove(rng.gen_range(0..moving.len()));
                let ok = rng.gen_bool(0.8);
                if ok {
                    holder[key.0 as usize] = to;
                }
                Event::Migrated { key, to, ok }
            }
            8 if !tracking.is_empty() => {
                let (machine, keys) = tracking.remove(0);
                let counts = keys.into_iter().map(|k| (k, count(&mut rng))).collect();
                Event::Tracked {
                    machine,
                    interval_ms: 1_000,
                    counts,
                }
            }
            _ => Event::Tick,
        };
        let a = screener.step(now, event.clone());
        let b = weigher.step(now, event.clone());
        assert_eq!(
            a, b,
            "step {step} at {now} ms, {event:?}: screening changed the decision"
        );
        for action in a {
            match action {
                Action::Migrate { key, to, .. } => moving.push((key, to)),
                Action::Track { machine, keys } => tracking.push((machine, keys)),
                _ => {}
            }
        }
    }
    for k in 0..KEYS {
        assert_eq!(screener.holder(Key(k)), weigher.holder(Key(k)));
    }
    screener.stats()
}

#[test]
fn screening_reports_changes_no_decision() {
    let base = PolicyConfig {
        interval_ms: 1_000,
        dwell_ms: 1_000,
        forget_after_ms: 3_000,
        listen_intervals: 0,
        ..PolicyConfig::default()
    };
    let configs = [
        base.clone(),
        PolicyConfig {
            listen_intervals: 1,
            ..base.clone()
        },
        PolicyConfig {
            mode: Mode::Deferred,
            ..base.clone()
        },
        PolicyConfig {
            eager_rate_min_per_s: 100.0,
            ..base.clone()
        },
        PolicyConfig {
            lead_intervals: 1,
            move_cost_accesses: 40.0,
            ..base.clone()
        },
        PolicyConfig {
            report_count_min: 2,
            significance_z: 2.0,
            ..base.clone()
        },
        PolicyConfig {
            replicas: true,
            ..base.clone()
        },
    ];
    let (mut screened, mut approved) = (0, 0);
    for (i, config) in configs.into_iter().enumerate() {
        for seed in 0..20 {
            let stats = differential(config.clone(), i as u64 * 1_000 + seed, 400);
            screened += stats.screened;
            approved += stats.approved;
        }
    }
    // Not vacuous: many keys were screened and many moves approved.
    assert!(screened > 1_000, "screened {screened}");
    assert!(approved > 200, "approved {approved}");
}
