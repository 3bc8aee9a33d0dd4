//! Running the twin's seeds (`LOCUS_SIM_SEED`, `LOCUS_SIM_SEEDS`,
//! `LOCUS_SIM_KEEP_GOING`; see `sim_cluster.rs`).

use super::{run_seed, Coverage, Scenario, SEEDS_DEFAULT};

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name}={v}: not a number"))
    })
}

/// Runs the seeds (`LOCUS_SIM_SEED`, `LOCUS_SIM_SEEDS`), with or without
/// slot moves; panics with the first failure; returns what they exercised.
pub(crate) fn run_seeds(sc: Scenario) -> Option<Coverage> {
    let seeds: Vec<u64> = match env_u64("LOCUS_SIM_SEED") {
        Some(s) => vec![s],
        None => (0..env_u64("LOCUS_SIM_SEEDS").unwrap_or(SEEDS_DEFAULT)).collect(),
    };
    let mut total = Coverage::default();
    let mut failures = Vec::new();
    for &seed in &seeds {
        match run_seed(seed, sc) {
            Ok(c) => total.add(&c),
            Err(e) => {
                failures.push(seed);
                if failures.len() == 1 {
                    eprintln!("{e}");
                }
                if std::env::var("LOCUS_SIM_KEEP_GOING").is_err() {
                    panic!("{e}");
                }
            }
        }
    }
    assert!(failures.is_empty(), "failing seeds: {failures:?}");
    eprintln!("{} seeds ({sc:?}): {total:?}", seeds.len());
    // Enough seeds for what the test is for to be reached.
    (seeds.len() >= 50).then_some(total)
}
