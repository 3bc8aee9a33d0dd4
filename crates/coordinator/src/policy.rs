//! The coordinator's decisions as a pure state machine (Pragh 3, 4.4).
//!
//! Events go in ([`Event`]: the monitors' periodic and instant reports, the
//! answers of on-demand tracking, migrations finishing, time passing);
//! actions come out ([`Action`]) for a driver to carry out. Nothing here
//! reads a clock or touches the network, so every decision is testable.
//!
//! **Threshold policy.** For each reported key the coordinator keeps the
//! latest access rate of every machine (accesses per second over that
//! machine's last report) and where the value is held. The applicant is the
//! machine with the highest rate other than the holder. A move is approved
//! when the applicant's rate exceeds the holder's by the profit threshold
//! (`rate_applicant > rate_holder * (1 + profit)`, Pragh's 50% by default).
//!
//! **Eager and deferred** (Pragh 4.4). A machine's own accesses to a value it
//! holds are seen only for values migrated to it (its location cache counts
//! them); a home's accesses to its own values are not tracked. *Eager* mode
//! takes an untracked holder's rate as zero and approves at once; after the
//! move the old holder's accesses are remote, its cache counts them, and the
//! value comes back if they dominate. *Deferred* mode first asks the holder to
//! track the candidate keys ([`Action::Track`]) for one interval, then
//! collects the counts ([`Action::Collect`]) and decides with both sides.
//!
//! Past the paper, eager mode can be eager for hot keys only: with
//! `eager_rate_min_per_s` set (say to Pragh 6.4's 100 accesses per second),
//! an applicant below it is decided as in deferred mode, after one interval
//! of the holder's own counts. Guessing an untracked holder's rate as zero
//! is what moves values under uniform starts: there a value one remote
//! machine reads is read about as often by its home, whose reads the zero
//! leaves out (at R-MAT 16 about 500 such moves, 0.8% of the values, none
//! of them approved once the home is tracked). The default is 0, Pragh's
//! eager mode, because under skewed starts the same rule also gives up
//! moves worth having: keys the home reads too, but less than the applicant,
//! by less than the profit threshold (`docs/results.md`, stop 31).
//!
//! **Significance** (past the paper: Pragh's rule moves a value on any
//! profit, which under uniform access moves values on noise and runs below
//! hash placement). A move is approved only if it is worth it, three ways:
//! the applicant counted at least `count_min` accesses in its latest report;
//! its lead over the holder and over the next machine is larger than
//! counting noise (`lead > significance_z * sqrt(sum)`, both counts taken
//! over the applicant's window, as for Poisson counts); and the accesses it
//! gains within one interval pay for the move
//! (`(rate - holder_rate) * interval_s >= move_cost_accesses`). A replica
//! must likewise have `count_min` accesses and pay for its copy within an
//! interval. An instant report acts at once only when its rate so far
//! reaches `hot_rate_min_per_s` (Pragh 6.4: 100 accesses per second),
//! whatever the interval; a slower key waits for the periodic report.
//!
//! **Lead** (past the paper, the hysteresis of issue 13). One interval's
//! counts can single out a machine by chance: under uniform starts a value
//! some queries of one machine happened to reach reads as that machine's,
//! and the next interval favours another. A key therefore moves only when
//! its applicant counted at least `count_min` accesses in each of
//! `lead_intervals` consecutive reports (2 by default; reports that follow
//! each other within half an interval form a run), unless its rate over a
//! whole interval reaches `hot_rate_min_per_s`: a key that hot moves at
//! once, as in Pragh. Deferred mode's tracking interval usually gives the
//! applicant its second report, so only eager mode waits longer.
//!
//! **Unseen rivals** (past the paper). Monitors report only the keys a
//! machine counted `report_count_min` times or more, so a rival below that
//! is not seen. The significance test weighs the applicant against the
//! busiest rival it knows of and, when that is less, against an unseen one
//! with `report_count_min - 1` accesses over an interval: the most a machine
//! that reported nothing can have counted. Without it, raising the filter
//! from 2 to 8 (which cuts what the coordinator takes in under uniform
//! starts five-fold) would have read a key's quieter readers as idle and
//! moved keys one machine reads only a little more than the others.
//!
//! **Listening first** (past the paper). The unseen-rival bound assumes
//! that every machine has had an interval in which to report. For the
//! first `listen_intervals` intervals after the coordinator starts (or
//! restarts), a machine that named no key has not been heard, which is
//! different from being quiet, so no move is approved yet; a key is decided
//! once a later report names it. Without this, the first key to reach the
//! hot count anywhere was judged against nobody and moved: under uniform
//! starts that was the same four keys every run, each read evenly by all
//! eight machines (`docs/results.md`, stop 49).
//!
//! **Screening** (an implementation matter; decisions are unchanged). Under
//! uniform starts every machine reports about a thousand keys an interval
//! at the quick preset, none worth a move, and weighing each one looked its
//! state up a second time. Recording a rate now also says whether any fresh
//! non-holder rate of the key could pass the significance test against
//! the quietest rival the test ever uses (an unseen one) and an idle
//! holder; a key with none is not weighed (counted in [`Stats::screened`]).
//! The skipped decisions are those that would have ended in no action, so
//! only the counters of reasons (`contended`, `dwelling`, `insignificant`)
//! differ. With replicas on every busy key is still weighed.
//!
//! **Return home** (past the paper). Eager mode's zero for an untracked
//! holder is a guess about a value's home, the one machine whose own reads
//! are not counted. It is right for a value only others read; for a value
//! its home reads most, it moves the value away on a lesser reader's report,
//! the home's remote reads bring it back after `dwell_ms`, and the next
//! report moves it away again, every other interval, for good (at R-MAT 20
//! the costliest misplaced values of a measured window were of this kind:
//! `docs/results.md`, stop 41). So the guess is made once per key: a key
//! that has moved keeps its new holder's rate from before the move (its
//! demand as a remote reader, until it goes stale), and once that is stale
//! an untracked holder is tracked for an interval, as in deferred mode,
//! before the value leaves again. A report
//! whose window began before the key's last move is of the old placement:
//! it neither names the holder nor replaces the new holder's known demand
//! with its partial count (the home's reads stop being counted when the
//! value arrives).
//!
//! **No ping-pong.** A key whose two busiest non-holder machines are within
//! the profit threshold of each other is contended and stays put (moving it
//! would only make another machine remote); a key moved less than
//! `dwell_ms` ago is not moved again; a key with a migration in flight is
//! left alone until it finishes.
//!
//! **Replicas** (a Locus extension; off by default, as in Pragh). A value
//! read by several machines stays remote for all but its holder. With
//! `replicas` on, every machine other than the holder (and other than a
//! migration's target, or an applicant waiting out its lead) whose rate
//! reaches `replica_rate_min_per_s` is approved a read-only replica
//! ([`Action::Replicate`]; the store keeps it correct, see
//! `locus_store::replica`). Reads served by a replica are local
//! and not reported, so a machine that reports a key again has lost its
//! replica (an update invalidated it) or never had one; a machine is approved
//! a replica of a key at most once per `dwell_ms`, which bounds the churn of
//! keys that are updated often. Replicas are soft state: nothing is persisted.
//!
//! **Durability.** Every approval is preceded by [`Action::Persist`] of the
//! key's latest target: the driver must make it durable before it starts the
//! migration that follows it in the same batch. [`Coordinator::restore`]
//! rebuilds the holders from that record after a restart.
//!
//! **Bounds.** At most `keys_max` keys are remembered; keys not reported for
//! `forget_after_ms` are dropped first, and beyond the bound new keys are
//! ignored (counted in [`Stats::keys_ignored`]).

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use locus_fabric::MachineId;
use locus_store::table::mix;
use locus_store::Key;

use crate::error::Result;

mod config;
mod events;
pub use config::PolicyConfig;
pub use events::{Access, Action, Event, Mode, Stats};
#[cfg(test)]
mod tests;

/// Whether `count`, an access count rebuilt from a rate (count / secs *
/// secs), is below `min`: rounding may leave a count of exactly `min` a
/// hair under it.
fn below(count: f64, min: u32) -> bool {
    count + 1e-6 < min as f64
}

/// The busiest a machine that reported nothing can have been, per second:
/// `report_count_min - 1` accesses over an interval ("Unseen rivals").
fn unseen_rate(cfg: &PolicyConfig) -> f64 {
    cfg.report_count_min.saturating_sub(1) as f64 * 1000.0 / cfg.interval_ms as f64
}

/// Whether `r` could win its key a move against the quietest rival
/// [`Coordinator::decide_move`] ever weighs (an unseen one) and an idle
/// holder: the rate floor, `count_min`, a lead beyond noise and a gain that
/// pays for the move. Each test only gets harder with a busier rival or
/// holder, so a key none of whose rates passes would not move.
fn could_lead(cfg: &PolicyConfig, r: &Rate) -> bool {
    let count = r.per_s * r.secs;
    let rival = unseen_rate(cfg) * r.secs;
    r.per_s >= cfg.rate_min_per_s
        && !below(count, cfg.count_min)
        && count - rival > cfg.significance_z * (count + rival).sqrt()
        && r.per_s * cfg.interval_ms as f64 / 1000.0 >= cfg.move_cost_accesses
}

/// A machine's latest rate for a key.
#[derive(Debug, Clone, Copy)]
struct Rate {
    /// Accesses per second.
    per_s: f64,
    /// When it was reported (coordinator time, ms).
    at_ms: u64,
    /// Seconds it was counted over.
    secs: f64,
    /// Start of the run of consecutive reports, ending with this one, in
    /// which the machine counted at least `count_min` accesses (`None`: this
    /// report counted fewer). See "Lead" in the module doc.
    busy_since_ms: Option<u64>,
}

/// Per machine, its latest [`Rate`], in machine order: a vector, not a
/// map, since a key has a few readers and a coordinator tracks millions of
/// keys (a one-entry `BTreeMap` allocates a node of eleven slots). The
/// first two live in the key's state itself: a report's handling reads
/// every named key's rates, and a separate allocation was a cache miss per
/// key (a third of recording's samples in a profile of
/// `benches/coordinator.rs`; with screening, the bench's handling -10%).
#[derive(Debug, Clone, Default)]
struct Rates(smallvec::SmallVec<[(MachineId, Rate); 2]>);

impl Rates {
    fn insert(&mut self, m: MachineId, r: Rate) {
        match self.0.binary_search_by_key(&m, |e| e.0) {
            Ok(i) => self.0[i].1 = r,
            Err(i) => self.0.insert(i, (m, r)),
        }
    }

    fn get(&self, m: MachineId) -> Option<Rate> {
        self.0.iter().find(|e| e.0 == m).map(|e| e.1)
    }

    fn keep_only(&mut self, m: MachineId) {
        self.0.retain(|e| e.0 == m);
    }

    fn iter(&self) -> impl Iterator<Item = (MachineId, Rate)> + '_ {
        self.0.iter().copied()
    }
}

/// Hashes a key word with the store's mixer: keys are already spread by
/// their vertex ids, and SipHash's keyed rounds cost more than the rest of
/// a report's handling (`benches/coordinator.rs`).
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.0 = mix(x);
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = mix(self.0 ^ b as u64);
        }
    }
}

type KeyMap<V> = HashMap<Key, V, BuildHasherDefault<KeyHasher>>;

#[derive(Debug, Clone, Default)]
struct KeyState {
    holder: MachineId,
    /// Per machine, its latest rate for this key.
    rates: Rates,
    in_flight: bool,
    moved_at_ms: Option<u64>,
    /// The key has moved (or was restored from the durable record): its
    /// holder got the value because it read it, so an untracked holder is
    /// not guessed idle (see "Return home" in the module doc).
    moved: bool,
    /// Deferred: the holder is tracking this key until this time.
    tracking_until_ms: Option<u64>,
    /// When each machine was last approved a replica of this key.
    replicated_at_ms: BTreeMap<MachineId, u64>,
}

/// The coordinator state machine.
#[derive(Debug)]
pub struct Coordinator {
    config: PolicyConfig,
    now_ms: u64,
    /// When the first event came: the start of `listen_intervals`.
    started_ms: Option<u64>,
    keys: KeyMap<KeyState>,
    /// Deferred: per holder, when its tracking interval ends.
    tracking: BTreeMap<MachineId, u64>,
    /// Deferred: keys to ask each holder to track at the next opportunity.
    to_track: BTreeMap<MachineId, Vec<Key>>,
    stats: Stats,
    /// Whether periodic reports are screened ("Screening"); off only in
    /// the test that checks screening changes no decision.
    screen: bool,
}

impl Coordinator {
    /// A coordinator with nothing known.
    pub fn new(config: PolicyConfig) -> Result<Self> {
        config.validate()?;
        Ok(Coordinator {
            config,
            now_ms: 0,
            started_ms: None,
            keys: KeyMap::default(),
            tracking: BTreeMap::new(),
            to_track: BTreeMap::new(),
            stats: Stats::default(),
            screen: true,
        })
    }

    /// A coordinator restarted from its durable record: each key's latest
    /// approved target is taken as its holder (a migration that was in flight
    /// when the old coordinator stopped either finished, and the record is
    /// right, or failed, and the next report corrects the holder).
    pub fn restore(
        config: PolicyConfig,
        record: impl IntoIterator<Item = (Key, MachineId)>,
    ) -> Result<Self> {
        let mut c = Coordinator::new(config)?;
        for (key, target) in record {
            c.keys.insert(
                key,
                KeyState {
                    holder: target,
                    moved: true,
                    ..KeyState::default()
                },
            );
        }
        Ok(c)
    }

    /// Settings.
    pub fn config(&self) -> &PolicyConfig {
        &self.config
    }

    /// Counts of decisions so far.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// When the coordinator next has work that no event brings: the end of
    /// the earliest on-demand tracking window (deferred mode), at which an
    /// [`Event::Tick`] makes it collect the counts. `None`: nothing is due
    /// before the next event, so whoever runs it may wait for one.
    pub fn next_due_ms(&self) -> Option<u64> {
        self.tracking.values().copied().min()
    }

    /// Where the coordinator believes `key`'s value is, if it knows the key.
    pub fn holder(&self, key: Key) -> Option<MachineId> {
        self.keys.get(&key).map(|k| k.holder)
    }

    /// Handles one event at time `now_ms` (monotonic, from the driver) and
    /// returns the actions it calls for, in the order they must run.
    pub fn step(&mut self, now_ms: u64, event: Event) -> Vec<Action> {
        self.now_ms = self.now_ms.max(now_ms);
        self.started_ms.get_or_insert(self.now_ms);
        let mut out = Vec::new();
        match event {
            Event::Report {
                machine,
                interval_ms,
                accesses,
            } => {
                let secs = interval_ms.max(1) as f64 / 1000.0;
                let mut touched = Vec::new();
                let mut screened = Vec::new();
                for a in accesses {
                    // Every count is kept (it is a rival's rate), but only a
                    // key this machine read `count_min` times can have become
                    // worth moving or copying here: the rest are not weighed
                    // again until a busier report names them. Of those, a
                    // key no machine leads beyond noise is not weighed at
                    // all ("Screening").
                    let noted = self.note(machine, a.key, a.holder, a.count as f64 / secs, secs);
                    let Some(could_move) = noted else { continue };
                    if a.count >= self.config.count_min {
                        if could_move || self.config.replicas || !self.screen {
                            touched.push(a.key);
                        } else {
                            screened.push(a.key);
                        }
                    } else if could_move && screened.contains(&a.key) {
                        // A report that names a key twice: the later entry
                        // may name another holder and make it movable
                        // (monitors never do this; the scan is that rare).
                        touched.push(a.key);
                    }
                }
                touched.sort_unstable();
                touched.dedup();
                self.stats.screened += screened.len() as u64;
                for key in touched {
                    self.consider(key, &mut out);
                }
            }
            Event::Hot {
                machine,
                elapsed_ms,
                access,
            } => {
                let secs = elapsed_ms.max(1) as f64 / 1000.0;
                let rate = access.count as f64 / secs;
                if rate < self.config.hot_rate_min_per_s {
                    self.stats.hot_ignored += 1;
                } else if self
                    .note(machine, access.key, access.holder, rate, secs)
                    .is_some()
                {
                    self.consider(access.key, &mut out);
                }
            }
            Event::Tracked {
                machine,
                interval_ms,
                counts,
            } => {
                let secs = interval_ms.max(1) as f64 / 1000.0;
                for (key, count) in counts {
                    let now = self.now_ms;
                    if let Some(k) = self.keys.get_mut(&key) {
                        k.tracking_until_ms = None;
                        if k.holder == machine {
                            let rate = Rate {
                                per_s: count as f64 / secs,
                                at_ms: now,
                                secs,
                                busy_since_ms: None,
                            };
                            k.rates.insert(machine, rate);
                        }
                    }
                    self.consider(key, &mut out);
                }
            }
            Event::Migrated { key, to, ok } => {
                let now = self.now_ms;
                if let Some(k) = self.keys.get_mut(&key) {
                    k.in_flight = false;
                    if ok {
                        k.holder = to;
                        k.moved_at_ms = Some(now);
                        k.moved = true;
                        // The other machines' rates were of remote reads and
                        // are reported afresh; the new holder's, its demand,
                        // stays until it goes stale (a home never reports its
                        // own reads: this is all that is known of them).
                        k.rates.keep_only(to);
                    }
                }
                if ok {
                    self.stats.completed += 1;
                } else {
                    self.stats.failed += 1;
                }
            }
            Event::Tick => {}
        }
        self.deferred_housekeeping(&mut out);
        out
    }

    /// Records a rate. `None` if the key is not remembered; otherwise
    /// whether a move of the key could be approved now or after its lead,
    /// as far as its own state tells: it is not moving or being tracked, and
    /// some fresh rate other than the holder's could lead ([`could_lead`]).
    /// `false` is a promise that [`Coordinator::decide_move`] would approve,
    /// track and delay nothing ("Screening" in the module doc).
    fn note(
        &mut self,
        machine: MachineId,
        key: Key,
        holder: MachineId,
        rate: f64,
        secs: f64,
    ) -> Option<bool> {
        let now = self.now_ms;
        if self.keys.len() >= self.config.keys_max && !self.keys.contains_key(&key) {
            self.forget_stale();
            if self.keys.len() >= self.config.keys_max {
                self.stats.keys_ignored += 1;
                return None;
            }
        }
        let cfg = &self.config;
        let k = self.keys.entry(key).or_insert_with(|| KeyState {
            holder,
            ..KeyState::default()
        });
        // A window that began before the key's last move describes the old
        // placement: its holder is stale, and the new holder's count is
        // partial (its reads since the value arrived are local and, at a
        // home, not counted), so the demand known at the move stays.
        let window_start = now.saturating_sub((secs * 1000.0) as u64);
        let spans_move = k.moved_at_ms.is_some_and(|t| t > window_start);
        if !k.in_flight && !spans_move {
            // A reporter saw the value at `holder` during its interval.
            k.holder = holder;
        }
        let keeps_demand = spans_move && machine == k.holder && k.rates.get(machine).is_some();
        if !keeps_demand {
            // A busy report continues the machine's run if the last one was
            // busy too and ended near where this one's window began.
            let busy = !below(rate * secs, cfg.count_min);
            let busy_since_ms = match k.rates.get(machine) {
                _ if !busy => None,
                Some(Rate {
                    busy_since_ms: Some(since),
                    at_ms,
                    ..
                }) if at_ms + cfg.interval_ms / 2 >= window_start => Some(since),
                _ => Some(window_start),
            };
            let r = Rate {
                per_s: rate,
                at_ms: now,
                secs,
                busy_since_ms,
            };
            k.rates.insert(machine, r);
        }
        let fresh = now.saturating_sub(cfg.forget_after_ms);
        Some(
            !k.in_flight
                && k.tracking_until_ms.is_none()
                && k.rates
                    .iter()
                    .any(|(m, r)| m != k.holder && r.at_ms >= fresh && could_lead(cfg, &r)),
        )
    }

    fn forget_stale(&mut self) {
        let horizon = self.now_ms.saturating_sub(self.config.forget_after_ms);
        self.keys.retain(|_, k| {
            k.in_flight
                || k.tracking_until_ms.is_some()
                || k.rates.iter().any(|(_, r)| r.at_ms >= horizon)
        });
    }

    /// Applies the threshold policy to one key, then the replica rule.
    fn consider(&mut self, key: Key, out: &mut Vec<Action>) {
        let target = match self.keys.get(&key) {
            Some(k) if !k.in_flight && k.tracking_until_ms.is_none() => self.decide_move(key, out),
            _ => return,
        };
        if self.config.replicas {
            self.approve_replicas(key, target, out);
        }
    }

    /// Replica rule: every fresh reader other than the holder and `target`
    /// with a rate worth it, at most once per `dwell_ms` per machine.
    fn approve_replicas(&mut self, key: Key, target: Option<MachineId>, out: &mut Vec<Action>) {
        let now = self.now_ms;
        let cfg = &self.config;
        let Some(k) = self.keys.get_mut(&key) else {
            return;
        };
        if k.tracking_until_ms.is_some() {
            return; // deferred: decide the move first
        }
        let fresh = now.saturating_sub(cfg.forget_after_ms);
        let interval_s = cfg.interval_ms as f64 / 1000.0;
        for (
            m,
            Rate {
                per_s: rate,
                at_ms: at,
                secs,
                ..
            },
        ) in k.rates.iter()
        {
            if m == k.holder || Some(m) == target || at < fresh {
                continue;
            }
            if rate < cfg.replica_rate_min_per_s || rate < cfg.rate_min_per_s {
                continue;
            }
            // A copy must be read often enough to pay for itself.
            if below(rate * secs, cfg.count_min) || rate * interval_s < cfg.move_cost_accesses {
                self.stats.insignificant += 1;
                continue;
            }
            // Only a report newer than the last approval asks again (reads
            // served by a replica are not reported), and at most once per dwell.
            if k.replicated_at_ms
                .get(&m)
                .is_some_and(|&t| at <= t || now < t + cfg.dwell_ms)
            {
                continue;
            }
            k.replicated_at_ms.insert(m, now);
            self.stats.replicas_approved += 1;
            out.push(Action::Replicate { key, to: m });
        }
    }

    /// The threshold policy proper: returns the approved target, or the
    /// applicant waiting out its lead (neither gets a replica), if any.
    fn decide_move(&mut self, key: Key, out: &mut Vec<Action>) -> Option<MachineId> {
        let now = self.now_ms;
        let cfg = &self.config;
        let k = self.keys.get_mut(&key)?;
        let fresh = now.saturating_sub(cfg.forget_after_ms);
        let mut best: Option<(MachineId, Rate)> = None;
        let mut second = 0.0f64;
        for (m, r) in k.rates.iter() {
            if m == k.holder || r.at_ms < fresh {
                continue;
            }
            match best {
                Some((_, b)) if r.per_s <= b.per_s => second = second.max(r.per_s),
                _ => {
                    if let Some((_, b)) = best {
                        second = second.max(b.per_s);
                    }
                    best = Some((m, r));
                }
            }
        }
        let (applicant, applicant_rate) = best?;
        let (rate, secs) = (applicant_rate.per_s, applicant_rate.secs);
        if rate < cfg.rate_min_per_s {
            return None;
        }
        if second * (1.0 + cfg.profit) >= rate {
            self.stats.contended += 1;
            return None;
        }
        if let Some(at) = k.moved_at_ms {
            if now < at + cfg.dwell_ms {
                self.stats.dwelling += 1;
                return None;
            }
        }
        let holder_rate = k
            .rates
            .get(k.holder)
            .filter(|r| r.at_ms >= fresh)
            .map(|r| r.per_s);
        // Judged first against what is known (an untracked holder as zero),
        // so that a key no holder rate could make worth moving is not tracked.
        let known = holder_rate.unwrap_or(0.0);
        if rate <= known * (1.0 + cfg.profit) {
            return None;
        }
        // Significance: enough accesses, a lead beyond counting noise over
        // both the holder and the next machine, and a gain that pays for the move.
        let count = rate * secs;
        let rival = second.max(known).max(unseen_rate(cfg)) * secs;
        let noise = cfg.significance_z * (count + rival).sqrt();
        let gain = (rate - known) * cfg.interval_ms as f64 / 1000.0;
        if below(count, cfg.count_min) || count - rival <= noise || gain < cfg.move_cost_accesses {
            self.stats.insignificant += 1;
            return None;
        }
        // Lead: a key hot over a whole report moves now; a slower one only
        // once its applicant has been busy for `lead_intervals` running.
        let whole = secs * 1000.0 >= cfg.interval_ms as f64 * 0.9;
        let led_ms = applicant_rate
            .busy_since_ms
            .map_or(0, |t| now.saturating_sub(t));
        let lead_ms = cfg.interval_ms as f64 * cfg.lead_intervals as f64 * 0.9;
        if cfg.lead_intervals > 1
            && !(whole && rate >= cfg.hot_rate_min_per_s)
            && (led_ms as f64) < lead_ms
        {
            self.stats.brief += 1;
            // It gets no replica meanwhile: a copy would hide the reads
            // that are to earn it the value.
            return Some(applicant);
        }
        let eager = cfg.mode == Mode::Eager && rate >= cfg.eager_rate_min_per_s && !k.moved;
        if holder_rate.is_none() && !eager {
            // Deferred, or eager for a key below the eager rate: the holder
            // counts its own accesses for an interval first.
            k.tracking_until_ms = Some(u64::MAX);
            self.to_track.entry(k.holder).or_default().push(key);
            return None;
        }
        let started = self.started_ms.unwrap_or(now);
        if now < started + cfg.interval_ms * cfg.listen_intervals as u64 {
            // Not every machine has been heard yet ("Listening first").
            self.stats.listening += 1;
            return Some(applicant);
        }
        k.in_flight = true;
        let from = k.holder;
        self.stats.approved += 1;
        out.push(Action::Persist {
            key,
            target: applicant,
        });
        out.push(Action::Migrate {
            key,
            from,
            to: applicant,
        });
        Some(applicant)
    }

    /// Deferred mode: starts tracking rounds and collects finished ones.
    fn deferred_housekeeping(&mut self, out: &mut Vec<Action>) {
        let now = self.now_ms;
        let due: Vec<MachineId> = self
            .tracking
            .iter()
            .filter(|(_, &until)| until <= now)
            .map(|(&m, _)| m)
            .collect();
        for m in due {
            self.tracking.remove(&m);
            out.push(Action::Collect { machine: m });
        }
        let ready: Vec<MachineId> = self
            .to_track
            .keys()
            .copied()
            .filter(|m| !self.tracking.contains_key(m))
            .collect();
        for m in ready {
            let keys = self.to_track.remove(&m).unwrap_or_default();
            let until = now + self.config.interval_ms;
            for key in &keys {
                if let Some(k) = self.keys.get_mut(key) {
                    k.tracking_until_ms = Some(until);
                }
            }
            self.tracking.insert(m, until);
            self.stats.track_requests += 1;
            out.push(Action::Track { machine: m, keys });
        }
    }
}
