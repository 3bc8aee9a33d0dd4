//! The coordinator's settings ([`PolicyConfig`]) and their checks: the
//! rules they tune are described in the parent module.

use super::Mode;
use crate::error::{CoordinatorError, Result};

/// Policy settings.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyConfig {
    /// Eager or deferred.
    pub mode: Mode,
    /// Profit threshold: the applicant's rate must exceed the holder's by this fraction (Pragh: 0.5).
    pub profit: f64,
    /// Monitoring interval (Pragh: 10 s); also how long deferred tracking lasts.
    pub interval_ms: u64,
    /// A key is not moved again sooner than this after a move.
    pub dwell_ms: u64,
    /// Rates below this (accesses/s) are not worth a migration.
    pub rate_min_per_s: f64,
    /// Keys remembered at most.
    pub keys_max: usize,
    /// A key whose rates are all older than this is forgotten.
    pub forget_after_ms: u64,
    /// Approve read-only replicas of values other machines read (Locus extension).
    pub replicas: bool,
    /// Rates below this (accesses/s) are not worth a replica.
    pub replica_rate_min_per_s: f64,
    /// An instant report acts at once only at this rate or more (Pragh 6.4: 100/s).
    pub hot_rate_min_per_s: f64,
    /// Eager mode approves without the holder's own counts only at this
    /// applicant rate or more (accesses/s). 0 (the default) is Pragh's eager
    /// mode for every key; 100 (Pragh 6.4's hot rate) is eager for hot keys
    /// only, which under uniform starts moves 94% fewer values but under
    /// skewed ones gives up moves worth having (`docs/results.md`, stop 31).
    pub eager_rate_min_per_s: f64,
    /// An applicant (or replica reader) with fewer accesses in its latest report is noise.
    pub count_min: u32,
    /// An applicant's lead must exceed this many standard deviations of
    /// counting noise. 4, not 2: a query's accesses are correlated (a start
    /// vertex's neighbours are read together), so counts are noisier than
    /// Poisson. At 2, uniform starts moved 2.2-2.5% of values (about the
    /// one-sided 2-sigma tail) for no fewer remote reads; at 4, 0.8%, with
    /// skewed starts as fast (`docs/results.md`, quiet reruns).
    pub significance_z: f64,
    /// What a move (or a replica) costs, in accesses it must save within one interval.
    pub move_cost_accesses: f64,
    /// Consecutive intervals an applicant must have counted `count_min`
    /// accesses in before its key moves, unless its rate over a whole
    /// interval reaches `hot_rate_min_per_s`. 1 is Pragh's rule (one report
    /// decides); 2 keeps a key that one interval happened to favour where it
    /// is (see "Lead" in the `policy` module doc).
    pub lead_intervals: u32,
    /// Periodic reports name only the keys a machine counted at least this
    /// many times in its interval (the monitors' filter). A machine that
    /// names no fresh count of a key is weighed as a rival with one fewer,
    /// the most it can have counted unseen (see "Unseen rivals" in the
    /// `policy` module doc). 8, as `count_min`: below that no machine is an
    /// applicant, and under uniform starts reports of 2 or more carried
    /// five times the keys, which the coordinator had to take in.
    pub report_count_min: u32,
    /// Intervals after the coordinator starts (or restarts) in which it
    /// approves no move. Until every machine has had an interval in which
    /// to report, a machine that named no key has not been heard, which is
    /// different from being quiet, so the unseen-rival bound does not hold
    /// yet. Without this wait, the first key to reach the hot count on any
    /// machine was judged against nobody and moved: under uniform starts,
    /// the same four evenly read keys in every run (`docs/results.md`, stop
    /// 49). 1 by default; 0 decides from the first report.
    pub listen_intervals: u32,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            mode: Mode::Eager,
            profit: 0.5,
            interval_ms: 10_000,
            dwell_ms: 10_000,
            rate_min_per_s: 1.0,
            keys_max: 1 << 22,
            forget_after_ms: 30_000,
            replicas: false,
            replica_rate_min_per_s: 1.0,
            hot_rate_min_per_s: 100.0,
            eager_rate_min_per_s: 0.0,
            count_min: 8,
            significance_z: 4.0,
            move_cost_accesses: 8.0,
            lead_intervals: 2,
            report_count_min: 8,
            listen_intervals: 1,
        }
    }
}

impl PolicyConfig {
    /// Rejects settings that cannot work, naming the field
    /// ([`CoordinatorError::InvalidSetting`], [`CoordinatorError::SettingBelow`]).
    pub fn validate(&self) -> Result<()> {
        if !(self.profit >= 0.0 && self.profit.is_finite()) {
            return Err(CoordinatorError::invalid(
                "profit",
                self.profit,
                "a finite fraction >= 0 (Pragh: 0.5)",
            ));
        }
        if self.interval_ms == 0 {
            return Err(CoordinatorError::invalid(
                "interval_ms",
                self.interval_ms,
                "positive (Pragh: 10000)",
            ));
        }
        if !(self.rate_min_per_s >= 0.0 && self.rate_min_per_s.is_finite()) {
            return Err(CoordinatorError::invalid(
                "rate_min_per_s",
                self.rate_min_per_s,
                "finite and >= 0 (accesses per second)",
            ));
        }
        if !(self.replica_rate_min_per_s >= 0.0 && self.replica_rate_min_per_s.is_finite()) {
            return Err(CoordinatorError::invalid(
                "replica_rate_min_per_s",
                self.replica_rate_min_per_s,
                "finite and >= 0 (accesses per second)",
            ));
        }
        for (field, v) in [
            ("hot_rate_min_per_s", self.hot_rate_min_per_s),
            ("eager_rate_min_per_s", self.eager_rate_min_per_s),
            ("significance_z", self.significance_z),
            ("move_cost_accesses", self.move_cost_accesses),
        ] {
            if !(v >= 0.0 && v.is_finite()) {
                return Err(CoordinatorError::invalid(field, v, "finite and >= 0"));
            }
        }
        if self.lead_intervals == 0 {
            return Err(CoordinatorError::invalid(
                "lead_intervals",
                self.lead_intervals,
                "at least 1 (1: Pragh's rule, one report decides)",
            ));
        }
        if self.report_count_min == 0 {
            return Err(CoordinatorError::invalid(
                "report_count_min",
                self.report_count_min,
                "at least 1 (a report of keys counted 0 times would name every key cached)",
            ));
        }
        if self.keys_max == 0 {
            return Err(CoordinatorError::invalid(
                "keys_max",
                self.keys_max,
                "positive (keys the coordinator remembers)",
            ));
        }
        if self.forget_after_ms < self.interval_ms {
            return Err(CoordinatorError::SettingBelow {
                field: "forget_after_ms",
                value: self.forget_after_ms,
                min_field: "interval_ms",
                min_value: self.interval_ms,
                why: "keys would be forgotten between two periodic reports; raise forget_after_ms to at least the interval",
            });
        }
        Ok(())
    }
}
