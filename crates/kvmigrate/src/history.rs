//! What the clients of a measured run saw, and whether it was linearizable per key (NetMigrate
//! 4.3, 7: a migration must never expose a stale value). [`crate::measure`] and the Redis Cluster
//! driver record every query of a sampled key set as a compact [`Event`]; [`check`] runs the
//! register checker of [`crate::check`] on each key.
//!
//! # Long histories
//! A hot Zipfian key gets tens of thousands of operations in a run, far past
//! [`crate::check::OPS_PER_KEY_MAX`]. A key's history is therefore cut at quiescent instants
//! (every operation invoked before has responded): no order can move an operation across such
//! an instant, so the history is linearizable iff each segment is, starting from one of the
//! values the previous segment can end with ([`crate::check::final_values`]). Checking a
//! window alone would not be sound (its starting value is unknown); carrying the set of
//! possible values is. A write whose outcome is unknown (it failed or timed out) may take
//! effect at any later instant, so from the first one on a key is not cut again; if that rest
//! is longer than the checker's limit the key counts as unchecked (never as a pass).
//!
//! # Bounded memory
//! An event is 40 bytes: values are identified by their writer and counter (every write of a
//! run writes a value no other write wrote), not kept. Only keys of the sample are recorded, and
//! at most `ops_max` events: past that, recording stops at one clock instant `cutoff` for every
//! client at once. The checked history is then the prefix before it: operations invoked before
//! `cutoff` (all recorded), a write still open at `cutoff` counts as unknown-outcome and a read
//! still open is left out, which keeps the prefix a true history of the run.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use serde::Serialize;

use crate::check::{final_values, linearizable_from, Op, OpKind, NO_VALID_ORDER};
use crate::runtime::HistoryClock;
use crate::wire::Key;

/// Which keys a run records and how many events at most.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistoryConfig {
    /// Keys in the sample (a seeded hash picks them); `u64::MAX` or at least the key count:
    /// every key.
    pub sample_keys: u64,
    /// Events recorded at most (40 bytes each); recording stops for every client at once past it.
    pub ops_max: usize,
}

impl Default for HistoryConfig {
    /// Every key, at most 4M events (160 MB).
    fn default() -> Self {
        Self {
            sample_keys: u64::MAX,
            ops_max: 4 << 20,
        }
    }
}

/// Marks an absent value or an unknown response.
const NONE: u64 = u64::MAX;

/// One completed (or given up) query on a sampled key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// The key.
    pub key: Key,
    /// Invocation instant ([`HistoryClock`]).
    pub invoke: u64,
    /// Response instant; `u64::MAX` if a write's outcome is unknown.
    pub response: u64,
    /// The value written or read ([`value_id`]); `u64::MAX`: absent.
    pub value: u64,
    /// A write (otherwise a read).
    pub write: bool,
}

impl Event {
    /// A read that returned `value` (as stored bytes).
    pub fn read(key: Key, invoke: u64, response: u64, value: Option<&[u8]>) -> Self {
        Self {
            key,
            invoke,
            response,
            value: value.map_or(NONE, value_id),
            write: false,
        }
    }

    /// A write of `value`, acknowledged at `response` or with an unknown outcome (`None`).
    pub fn write(key: Key, invoke: u64, response: Option<u64>, value: &[u8]) -> Self {
        Self {
            key,
            invoke,
            response: response.unwrap_or(NONE),
            value: value_id(value),
            write: true,
        }
    }
}

/// A value of `len` bytes that no other write of the run writes: writer `writer + 1` in the
/// first 2 bytes, the writer's `counter` in the next 8 (little-endian), zeros after.
pub fn value_of(writer: u16, counter: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    v[..2].copy_from_slice(&(writer.wrapping_add(1)).to_le_bytes());
    v[2..10].copy_from_slice(&counter.to_le_bytes());
    v
}

/// The identity of a [`value_of`] value: its writer field and counter (48 bits). A value too
/// short to carry them maps to `u64::MAX - 1` (never a [`value_of`] value), so a read of such
/// garbage is a violation, not a match.
pub fn value_id(v: &[u8]) -> u64 {
    if v.len() < 10 {
        return NONE - 1;
    }
    let writer = u16::from_le_bytes([v[0], v[1]]) as u64;
    let mut c = [0u8; 8];
    c.copy_from_slice(&v[2..10]);
    (writer << 48) | (u64::from_le_bytes(c) & ((1 << 48) - 1))
}

/// Shared by a run's clients: which keys to record and the recording cutoff.
#[derive(Debug)]
pub struct Recorder {
    keys: u64,
    sample_keys: u64,
    seed: u64,
    ops_max: usize,
    recorded: AtomicUsize,
    cutoff: AtomicU64,
    stopped_ms: AtomicU64,
    t0: Instant,
}

fn mix(mut x: u64) -> u64 {
    // splitmix64's finalizer.
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl Recorder {
    /// A recorder for keys `0..keys`, sampling with `seed`; `t0` is the run's start.
    pub fn new(cfg: &HistoryConfig, keys: u64, seed: u64, t0: Instant) -> Self {
        Self {
            keys,
            sample_keys: cfg.sample_keys.min(keys),
            seed,
            ops_max: cfg.ops_max,
            recorded: AtomicUsize::new(0),
            cutoff: AtomicU64::new(NONE),
            stopped_ms: AtomicU64::new(NONE),
            t0,
        }
    }

    /// Whether `key` is in the sample.
    pub fn sampled(&self, key: Key) -> bool {
        self.sample_keys >= self.keys || mix(key ^ self.seed) % self.keys < self.sample_keys
    }

    /// Appends `e` to a client's own log if its key is sampled and it was invoked before the
    /// cutoff; sets the cutoff once `ops_max` events are recorded.
    pub fn record(&self, log: &mut Vec<Event>, e: Event, clock: &HistoryClock) {
        if !self.sampled(e.key) || e.invoke >= self.cutoff.load(Ordering::SeqCst) {
            return;
        }
        log.push(e);
        if self.recorded.fetch_add(1, Ordering::Relaxed) + 1 >= self.ops_max
            && self.cutoff.load(Ordering::SeqCst) == NONE
        {
            // Every op invoked before this instant completes later and still sees NONE or
            // this cutoff, above its invocation: all of them are recorded.
            self.cutoff.fetch_min(clock.tick(), Ordering::SeqCst);
            let ms = self.t0.elapsed().as_millis() as u64;
            let _ = self
                .stopped_ms
                .compare_exchange(NONE, ms, Ordering::SeqCst, Ordering::SeqCst);
        }
    }
}

/// What the check of a run's histories found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HistoryReport {
    /// Keys in the sample (all keys unless a sample was asked for).
    pub keys_sampled: u64,
    /// Sampled keys with at least one recorded operation.
    pub keys_seen: u64,
    /// Keys whose whole recorded history passed or failed the check.
    pub keys_checked: u64,
    /// Operations in the checked keys' histories.
    pub ops_checked: u64,
    /// Keys whose history is not linearizable (must be 0).
    pub violations: u64,
    /// Keys the checker could not decide (a segment past its limits): neither pass nor violation.
    pub keys_unchecked: u64,
    /// Milliseconds into the run at which recording stopped (`ops_max` reached), if it did.
    pub recording_stopped_ms: Option<u64>,
    /// The first violating key and its segment, for the log.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_violation: Option<String>,
}

/// Lines of a violating segment kept in the report.
const VIOLATION_LINES_MAX: usize = 24;

fn to_op(e: &Event) -> Op {
    let v = (e.value != NONE).then(|| e.value.to_le_bytes().to_vec());
    Op {
        client: 0,
        key: e.key,
        kind: if e.write {
            OpKind::Write(v)
        } else {
            OpKind::Read(v)
        },
        invoke: e.invoke,
        response: (e.response != NONE).then_some(e.response),
    }
}

enum Verdict {
    Pass,
    Violation(String),
    Undecided,
}

fn describe(key: Key, why: &str, seg: &[Op]) -> String {
    let mut s = format!("key {key}: {why}; segment of {} ops:", seg.len());
    for o in seg.iter().take(VIOLATION_LINES_MAX) {
        s.push_str(&format!(
            "\n  {:?} [{}, {}]",
            o.kind,
            o.invoke,
            o.response.map_or("?".into(), |r| r.to_string())
        ));
    }
    s
}

/// Checks one key's events (sorted by invocation) from `initial`.
fn check_key(key: Key, events: &[Event], initial: u64) -> Verdict {
    let mut initials = vec![Some(initial.to_le_bytes().to_vec())];
    let mut seg: Vec<Op> = Vec::new();
    let (mut max_response, mut open_unknown) = (0u64, false);
    for e in events {
        if !seg.is_empty() && !open_unknown && max_response < e.invoke {
            match final_values(&seg, &initials) {
                Ok(f) => initials = f,
                Err(NO_VALID_ORDER) => {
                    return Verdict::Violation(describe(key, NO_VALID_ORDER, &seg));
                }
                Err(_) => return Verdict::Undecided,
            }
            seg.clear();
        }
        if e.response == NONE {
            open_unknown = true;
        } else {
            max_response = max_response.max(e.response);
        }
        seg.push(to_op(e));
    }
    match linearizable_from(&seg, &initials) {
        Ok(()) => Verdict::Pass,
        Err(NO_VALID_ORDER) => Verdict::Violation(describe(key, NO_VALID_ORDER, &seg)),
        Err(_) => Verdict::Undecided,
    }
}

/// Checks every key of the clients' logs, each starting from value `initial` (a [`value_id`]);
/// applies the recorder's cutoff first.
pub fn check(logs: Vec<Vec<Event>>, recorder: &Recorder, initial: u64) -> HistoryReport {
    let cutoff = recorder.cutoff.load(Ordering::SeqCst);
    let mut events: Vec<Event> = logs
        .into_iter()
        .flatten()
        .filter(|e| e.invoke < cutoff)
        .filter_map(|mut e| {
            if e.response != NONE && e.response > cutoff {
                if !e.write {
                    return None;
                }
                e.response = NONE;
            }
            Some(e)
        })
        .collect();
    events.sort_unstable_by_key(|e| (e.key, e.invoke));
    let keys_sampled = if recorder.sample_keys >= recorder.keys {
        recorder.keys
    } else {
        (0..recorder.keys).filter(|&k| recorder.sampled(k)).count() as u64
    };
    let stopped = recorder.stopped_ms.load(Ordering::SeqCst);
    let mut report = HistoryReport {
        keys_sampled,
        recording_stopped_ms: (stopped != NONE).then_some(stopped),
        ..HistoryReport::default()
    };
    for chunk in events.chunk_by(|a, b| a.key == b.key) {
        report.keys_seen += 1;
        match check_key(chunk[0].key, chunk, initial) {
            Verdict::Pass => {
                report.keys_checked += 1;
                report.ops_checked += chunk.len() as u64;
            }
            Verdict::Violation(why) => {
                report.keys_checked += 1;
                report.ops_checked += chunk.len() as u64;
                report.violations += 1;
                report.first_violation.get_or_insert(why);
            }
            Verdict::Undecided => report.keys_unchecked += 1,
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    const INIT: u64 = 7;

    fn w(key: Key, v: u64, invoke: u64, response: u64) -> Event {
        Event {
            key,
            invoke,
            response,
            value: v,
            write: true,
        }
    }
    fn r(key: Key, v: u64, invoke: u64, response: u64) -> Event {
        Event {
            key,
            invoke,
            response,
            value: v,
            write: false,
        }
    }
    fn recorder(ops_max: usize) -> Recorder {
        let cfg = HistoryConfig {
            sample_keys: u64::MAX,
            ops_max,
        };
        Recorder::new(&cfg, 100, 1, Instant::now())
    }

    /// A sequential history of 10,000 ops on one key (5x the checker's per-key limit) passes
    /// when every read sees the last write, and is a violation when one read is stale.
    #[test]
    fn long_histories_are_checked_segment_by_segment() {
        let mut ok = Vec::new();
        let mut last = INIT;
        for i in 0..5_000u64 {
            let t = i * 4 + 1;
            ok.push(w(3, 100 + i, t, t + 1));
            last = 100 + i;
            ok.push(r(3, last, t + 2, t + 3));
        }
        let rep = check(vec![ok.clone()], &recorder(usize::MAX), INIT);
        assert_eq!((rep.keys_checked, rep.violations), (1, 0), "{rep:?}");
        assert_eq!(rep.ops_checked, 10_000);
        let mut stale = ok;
        stale[9_001].value = 100 + 4_000; // a read in the last part sees an old write
        let rep = check(vec![stale], &recorder(usize::MAX), INIT);
        assert_eq!(rep.violations, 1, "{rep:?}");
        assert!(rep.first_violation.unwrap().contains("key 3"));
        let _ = last;
    }

    /// Concurrent writes leave either value possible at the cut; the next segment may start
    /// from either, but not from a value no order produces.
    #[test]
    fn a_cut_carries_every_possible_value() {
        let base = vec![w(1, 10, 1, 4), w(1, 11, 2, 3)];
        for (seen, bad) in [(10, false), (11, false), (INIT, true)] {
            let mut h = base.clone();
            h.push(r(1, seen, 5, 6));
            let rep = check(vec![h], &recorder(usize::MAX), INIT);
            assert_eq!(rep.violations, bad as u64, "read {seen}: {rep:?}");
        }
    }

    /// Reads of the initial value pass; an unknown write may or may not take effect, but once
    /// seen it cannot be undone; histories split over clients are merged.
    #[test]
    fn unknown_writes_and_several_clients() {
        let a = vec![w(2, 20, 1, NONE)];
        let b = vec![r(2, INIT, 2, 3), r(2, 20, 4, 5), r(2, 20, 6, 7)];
        let rep = check(vec![a.clone(), b], &recorder(usize::MAX), INIT);
        assert_eq!(rep.violations, 0, "{rep:?}");
        let b = vec![r(2, 20, 4, 5), r(2, INIT, 6, 7)];
        assert_eq!(check(vec![a, b], &recorder(usize::MAX), INIT).violations, 1);
        let rep = check(vec![vec![r(5, NONE, 1, 2)]], &recorder(usize::MAX), INIT);
        assert_eq!(rep.violations, 1, "a preloaded key read as absent");
    }

    /// Past `ops_max`, recording stops at one instant; a read open at the cutoff is dropped and
    /// a write open at it becomes unknown, so the prefix is still checkable.
    #[test]
    fn the_cutoff_bounds_memory_and_keeps_a_true_prefix() {
        let clock = HistoryClock::default();
        let rec = recorder(3);
        let mut log = Vec::new();
        for _ in 0..10 {
            let i = clock.tick();
            let r_ = clock.tick();
            rec.record(&mut log, w(4, 50 + i, i, r_), &clock);
        }
        assert_eq!(log.len(), 3, "recording stopped after ops_max events");
        let cutoff = rec.cutoff.load(Ordering::SeqCst);
        // A write invoked before the cutoff answered after it, then a read that saw it.
        let late = vec![w(9, 90, cutoff - 1, cutoff + 5)];
        let rep = check(vec![log, late], &rec, INIT);
        assert_eq!(rep.violations, 0, "{rep:?}");
        assert!(rep.recording_stopped_ms.is_some());
        assert_eq!(rep.keys_seen, 2);
    }

    #[test]
    fn a_sample_is_about_its_size_and_values_round_trip() {
        let cfg = HistoryConfig {
            sample_keys: 1_000,
            ops_max: 10,
        };
        let rec = Recorder::new(&cfg, 100_000, 3, Instant::now());
        let n = (0..100_000).filter(|&k| rec.sampled(k)).count();
        assert!((800..1_200).contains(&n), "{n} sampled");
        let v = value_of(3, 99, 64);
        assert_eq!(value_id(&v), (4 << 48) | 99);
        assert_ne!(value_id(&v), value_id(&value_of(3, 100, 64)));
        assert_eq!(value_id(&[1, 2]), NONE - 1);
    }
}
