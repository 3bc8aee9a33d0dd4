//! The rows of interleaved rounds: the order each round runs its schemes in,
//! and each scheme's median row over the rounds.

use super::{PlacementAfter, Row};

/// Each field of the runs' [`PlacementAfter`] its own median ([`mid`]), if
/// every run has one.
fn median_placement(runs: &[&Row]) -> Option<PlacementAfter> {
    let all: Vec<PlacementAfter> = runs.iter().filter_map(|r| r.placement_after).collect();
    if all.is_empty() || all.len() != runs.len() {
        return None;
    }
    let f = |get: fn(&PlacementAfter) -> f64| mid(&mut all.iter().map(get).collect::<Vec<_>>());
    let u = |get: fn(&PlacementAfter) -> u64| mid_u(&mut all.iter().map(get).collect::<Vec<_>>());
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

/// The order in which round `round` (from 0) runs `n` schemes.
///
/// `balanced`: a Williams design (a Latin square balanced for the scheme run
/// just before): row `k` of the base order 0, 1, n-1, 2, n-2, ... shifted by
/// `k`, and for odd `n` the same rows reversed after them, so over a cycle
/// of `n` rounds (`2n` for odd `n`) every scheme takes every place equally
/// often and follows every other scheme equally often. Why: in turns
/// (`--slices`) the scheme loaded and warmed first in a round measured
/// 0.6-0.8 points slower (docs/results.md, stops 52-53); with the order only
/// reversed every other round, Split ran first in half the rounds and Orig in
/// the other half, so the median of Split / Orig over an even number of
/// rounds always fell on a round biased one way. With three schemes in a
/// balanced cycle, a third of the rounds put neither first.
///
/// Not balanced: as given in even rounds, reversed in odd ones (with shared
/// loads a round then starts on the graph the last one ended on). For two
/// schemes both orders are the same.
pub(super) fn round_order(n: usize, round: usize, balanced: bool) -> Vec<usize> {
    if !balanced || n < 3 {
        let mut order: Vec<usize> = (0..n).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        return order;
    }
    let cycle = if n.is_multiple_of(2) { n } else { 2 * n };
    let k = round % cycle;
    let mut order: Vec<usize> = (0..n)
        .map(|j| {
            let base = if j % 2 == 1 {
                j.div_ceil(2)
            } else {
                (n - j / 2) % n
            };
            (base + k) % n
        })
        .collect();
    if k >= n {
        order.reverse();
    }
    order
}

/// The median of `v`: its middle value, and for an even count the mean of
/// the two middle ones. Why not the lower middle (a value some run measured,
/// this module's rule until stop 54): for six rounds it is the third lowest,
/// below the centre by half the gap to the fourth, so an A/A control (Orig
/// against a second Orig cluster, balanced order) printed below 1 in all four
/// runs of stop 54 (0.9965-0.9983) while its rounds averaged 0.9994.
fn mid(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// [`mid`] of counts, the mean of the two middle ones rounded down.
fn mid_u(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        v[n / 2 - 1] / 2 + v[n / 2] / 2 + (v[n / 2 - 1] % 2 + v[n / 2] % 2) / 2
    }
}

/// The median row of each scheme over interleaved rounds: `rounds[r][i]` is
/// the `i`-th row of round `r` (the same scheme in every round, ratios
/// filled within the round). Each field is its own median ([`mid`]: for an
/// even count the mean of the two middle values), with min-max for the
/// headline fields; the update latencies (for the CDF plot) are those of the
/// run whose throughput is the lower middle one.
pub fn median_rows(rounds: &[Vec<Row>]) -> Vec<Row> {
    let Some(first) = rounds.first() else {
        return Vec::new();
    };
    (0..first.len())
        .map(|i| {
            let runs: Vec<&Row> = rounds.iter().map(|round| &round[i]).collect();
            let spread = |get: fn(&Row) -> f64| -> (f64, [f64; 2]) {
                let mut v: Vec<f64> = runs.iter().map(|r| get(r)).collect();
                let m = mid(&mut v);
                (m, [v[0], v[v.len() - 1]])
            };
            let median = |get: fn(&Row) -> f64| spread(get).0;
            let median_u =
                |get: fn(&Row) -> u64| mid_u(&mut runs.iter().map(|r| get(r)).collect::<Vec<_>>());
            let (tp, tp_range) = spread(|r| r.throughput_qps);
            let mut by_tp = runs.clone();
            by_tp.sort_by(|a, b| a.throughput_qps.total_cmp(&b.throughput_qps));
            let mut row = by_tp[(by_tp.len() - 1) / 2].clone();
            row.runs = runs.len();
            row.throughput_qps = tp;
            row.throughput_qps_range = tp_range;
            (row.vs_orig, row.vs_orig_range) = spread(|r| r.vs_orig);
            (row.vs_ideal, row.vs_ideal_range) = spread(|r| r.vs_ideal);
            (row.remote_rate, row.remote_rate_range) = spread(|r| r.remote_rate);
            (row.remote_gets, row.remote_gets_range) = spread(|r| r.remote_gets);
            (row.migrated_fraction, row.migrated_fraction_range) = spread(|r| r.migrated_fraction);
            row.gets_per_query = median(|r| r.gets_per_query);
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

#[cfg(test)]
mod tests {
    use super::{mid, mid_u, round_order};

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_its_middle_pair() {
        assert_eq!(mid(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(mid(&mut [0.99, 1.01, 0.98, 1.02, 1.0, 1.0]), 1.0);
        assert_eq!(mid(&mut [4.0, 1.0]), 2.5);
        assert_eq!(mid(&mut [7.0]), 7.0);
        assert_eq!(mid_u(&mut [5, 1, 9]), 5);
        assert_eq!(mid_u(&mut [3, 4]), 3);
        assert_eq!(mid_u(&mut [3, 5, 1, 7]), 4);
        assert_eq!(mid_u(&mut [u64::MAX, u64::MAX]), u64::MAX);
    }

    /// Six rounds of an A/A pair whose ratios sit symmetrically about 1: the
    /// median is 1, where the lower middle would be the third lowest.
    #[test]
    fn symmetric_rounds_about_one_give_a_median_of_one() {
        let mut v = [0.992, 1.008, 0.996, 1.004, 0.999, 1.001];
        assert!((mid(&mut v) - 1.0).abs() < 1e-12);
    }

    /// Over a whole cycle every scheme takes every place, and follows every
    /// other scheme, equally often; each round is a permutation.
    #[test]
    fn a_balanced_cycle_gives_every_place_and_every_predecessor_alike() {
        for n in 3usize..=9 {
            let cycle = if n.is_multiple_of(2) { n } else { 2 * n };
            let mut place = vec![vec![0usize; n]; n];
            let mut after = vec![vec![0usize; n]; n];
            for round in 0..cycle {
                let order = round_order(n, round, true);
                let mut seen = order.clone();
                seen.sort_unstable();
                assert_eq!(seen, (0..n).collect::<Vec<_>>(), "n {n} round {round}");
                for (at, &s) in order.iter().enumerate() {
                    place[s][at] += 1;
                }
                for w in order.windows(2) {
                    after[w[1]][w[0]] += 1;
                }
            }
            let per_place = cycle / n;
            assert!(
                place.iter().flatten().all(|&c| c == per_place),
                "n {n}: {place:?}"
            );
            let per_pair = cycle / n; // (n-1) pairs a round, n-1 predecessors
            for (s, row) in after.iter().enumerate() {
                for (q, &c) in row.iter().enumerate() {
                    let want = if s == q { 0 } else { per_pair };
                    assert_eq!(c, want, "n {n}: {s} after {q}: {after:?}");
                }
            }
        }
    }

    /// The case the design is for: three schemes, the first of a round
    /// penalised. With the order only reversed, the middle pair of B / A over
    /// six rounds is a round that put B first and one that put A first, so
    /// the median depends on the penalty; balanced, both are rounds that put
    /// neither first.
    #[test]
    fn a_first_place_penalty_does_not_decide_the_median_of_a_balanced_design() {
        let ratio = |balanced: bool| -> f64 {
            let mut v: Vec<f64> = (0..6)
                .map(|round| {
                    let order = round_order(3, round, balanced);
                    let speed = |s: usize| if order[0] == s { 0.99 } else { 1.0 };
                    speed(2) / speed(0)
                })
                .collect();
            mid(&mut v)
        };
        assert!((ratio(false) - 1.0).abs() > 1e-6);
        assert_eq!(ratio(true), 1.0);
    }

    #[test]
    fn two_schemes_alternate_either_way_and_unbalanced_rounds_reverse() {
        for balanced in [false, true] {
            assert_eq!(round_order(2, 0, balanced), vec![0, 1]);
            assert_eq!(round_order(2, 1, balanced), vec![1, 0]);
            assert_eq!(round_order(1, 1, balanced), vec![0]);
        }
        assert_eq!(round_order(4, 1, false), vec![3, 2, 1, 0]);
        assert_eq!(round_order(4, 2, false), vec![0, 1, 2, 3]);
    }
}
