//! The rows of interleaved rounds: the order each round runs its schemes in,
//! and each scheme's median row over the rounds.

use super::{PlacementAfter, Row};

/// Each field of the runs' [`PlacementAfter`] its own median (the lower
/// middle value), if every run has one.
fn median_placement(runs: &[&Row]) -> Option<PlacementAfter> {
    let all: Vec<PlacementAfter> = runs.iter().filter_map(|r| r.placement_after).collect();
    if all.is_empty() || all.len() != runs.len() {
        return None;
    }
    let f = |get: fn(&PlacementAfter) -> f64| -> f64 {
        let mut v: Vec<f64> = all.iter().map(get).collect();
        v.sort_by(f64::total_cmp);
        v[(v.len() - 1) / 2]
    };
    let u = |get: fn(&PlacementAfter) -> u64| -> u64 {
        let mut v: Vec<u64> = all.iter().map(get).collect();
        v.sort_unstable();
        v[(v.len() - 1) / 2]
    };
    Some(PlacementAfter {
        remote_gets: f(|a| a.remote_gets),
        unavoidable_gets: f(|a| a.unavoidable_gets),
        misplaced_home_gets: f(|a| a.misplaced_home_gets),
        misplaced_away_gets: f(|a| a.misplaced_away_gets),
        misplaced_home_values: u(|a| a.misplaced_home_values),
        misplaced_away_values: u(|a| a.misplaced_away_values),
        within_profit_gets: f(|a| a.within_profit_gets),
        within_profit_values: u(|a| a.within_profit_values),
        contended_gets: f(|a| a.contended_gets),
        contended_values: u(|a| a.contended_values),
    })
}

/// The order in which round `round` (from 0) runs `n` schemes: as given in
/// even rounds, reversed in odd ones.
pub(super) fn round_order(n: usize, round: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    if round % 2 == 1 {
        order.reverse();
    }
    order
}

/// The median row of each scheme over interleaved rounds: `rounds[r][i]` is
/// the `i`-th row of round `r` (the same scheme in every round, ratios
/// filled within the round). Each field is its own median (the lower middle
/// value for an even count, so always a value some run measured); the
/// update latencies (for the CDF plot) are those of the run with the median
/// throughput.
pub fn median_rows(rounds: &[Vec<Row>]) -> Vec<Row> {
    let Some(first) = rounds.first() else {
        return Vec::new();
    };
    (0..first.len())
        .map(|i| {
            let runs: Vec<&Row> = rounds.iter().map(|round| &round[i]).collect();
            let spread = |get: fn(&Row) -> f64| -> (f64, [f64; 2]) {
                let mut v: Vec<f64> = runs.iter().map(|r| get(r)).collect();
                v.sort_by(f64::total_cmp);
                (v[(v.len() - 1) / 2], [v[0], v[v.len() - 1]])
            };
            let median = |get: fn(&Row) -> f64| spread(get).0;
            let median_u = |get: fn(&Row) -> u64| -> u64 {
                let mut v: Vec<u64> = runs.iter().map(|r| get(r)).collect();
                v.sort_unstable();
                v[(v.len() - 1) / 2]
            };
            let (tp, tp_range) = spread(|r| r.throughput_qps);
            let mut row = (*runs
                .iter()
                .find(|r| r.throughput_qps == tp)
                .expect("the median is one of the values"))
            .clone();
            row.runs = runs.len();
            row.throughput_qps = tp;
            row.throughput_qps_range = tp_range;
            (row.vs_orig, row.vs_orig_range) = spread(|r| r.vs_orig);
            (row.vs_ideal, row.vs_ideal_range) = spread(|r| r.vs_ideal);
            (row.remote_rate, row.remote_rate_range) = spread(|r| r.remote_rate);
            (row.remote_gets, row.remote_gets_range) = spread(|r| r.remote_gets);
            (row.migrated_fraction, row.migrated_fraction_range) = spread(|r| r.migrated_fraction);
            row.p50_us = median(|r| r.p50_us);
            row.p99_us = median(|r| r.p99_us);
            row.p999_us = median(|r| r.p999_us);
            row.update_p50_us = median(|r| r.update_p50_us);
            row.update_p99_us = median(|r| r.update_p99_us);
            row.update_p999_us = median(|r| r.update_p999_us);
            row.forwarded_share = median(|r| r.forwarded_share);
            row.warm_s = median(|r| r.warm_s);
            row.replica_share = median(|r| r.replica_share);
            row.measure_machine_share = median(|r| r.measure_machine_share);
            row.measure_background_share = median(|r| r.measure_background_share);
            row.measure_host_probe_ns = median(|r| r.measure_host_probe_ns);
            row.measure_host_handoff_ns = median(|r| r.measure_host_handoff_ns);
            row.measure_steal_share = median(|r| r.measure_steal_share);
            row.measure_parts = median_u(|r| r.measure_parts as u64) as usize;
            row.placement_after = median_placement(&runs);
            row.measure_worker_preempted = median_u(|r| r.measure_worker_preempted);
            row.values_moved = median_u(|r| r.values_moved);
            row.bytes_moved = median_u(|r| r.bytes_moved);
            row.queries = median_u(|r| r.queries);
            row.updates = median_u(|r| r.updates);
            row.migrations_approved = median_u(|r| r.migrations_approved);
            row.contended_decisions = median_u(|r| r.contended_decisions);
            row.replica_bytes = median_u(|r| r.replica_bytes);
            row.replica_bytes_machine_max = median_u(|r| r.replica_bytes_machine_max);
            row
        })
        .collect()
}
