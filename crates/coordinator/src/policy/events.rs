//! What goes into the coordinator ([`Event`]) and what comes out
//! ([`Action`], [`Stats`]); the decisions are in the parent module.

use locus_fabric::MachineId;
use locus_store::Key;

/// How holders' own accesses are learned (Pragh 4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Approve at once; an untracked holder counts as zero accesses.
    Eager,
    /// Track the holder's accesses for one interval, then decide.
    Deferred,
}

/// Accesses by one machine to one key over an interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Access {
    /// The key.
    pub key: Key,
    /// Where the reporting machine found the value.
    pub holder: MachineId,
    /// Accesses counted.
    pub count: u32,
}

/// What the coordinator is told.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A monitor's periodic report: `machine`'s accesses over `interval_ms`.
    Report {
        /// Reporting machine.
        machine: MachineId,
        /// Length of the interval the counts cover.
        interval_ms: u64,
        /// Counted accesses.
        accesses: Vec<Access>,
    },
    /// A monitor's instant report: a key passed the rate threshold after
    /// `elapsed_ms` of the current interval.
    Hot {
        /// Reporting machine.
        machine: MachineId,
        /// Time into the interval when the count was taken.
        elapsed_ms: u64,
        /// The key and its count so far.
        access: Access,
    },
    /// Counts of on-demand tracking (deferred mode) over `interval_ms`.
    Tracked {
        /// The holder that tracked.
        machine: MachineId,
        /// How long it tracked.
        interval_ms: u64,
        /// Accesses per tracked key.
        counts: Vec<(Key, u32)>,
    },
    /// A migration ended: `ok` if the value is now at `to`.
    Migrated {
        /// The key.
        key: Key,
        /// Where it was to go.
        to: MachineId,
        /// Whether it got there.
        ok: bool,
    },
    /// Time passes.
    Tick,
}

/// What the driver must do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Record durably that `key`'s latest target is `target` (before the
    /// migration that follows).
    Persist {
        /// The key.
        key: Key,
        /// Its new target.
        target: MachineId,
    },
    /// Migrate `key`'s value to `to` (the target runs it, Pragh 4.1).
    Migrate {
        /// The key.
        key: Key,
        /// Its current holder.
        from: MachineId,
        /// The applicant.
        to: MachineId,
    },
    /// Start counting `machine`'s accesses to `keys` (deferred mode).
    Track {
        /// The holder.
        machine: MachineId,
        /// Candidate keys it holds.
        keys: Vec<Key>,
    },
    /// Stop tracking on `machine` and report the counts as [`Event::Tracked`].
    Collect {
        /// The holder.
        machine: MachineId,
    },
    /// Make a read-only replica of `key`'s value on `to` (Locus extension).
    Replicate {
        /// The key.
        key: Key,
        /// The reader that gets the replica.
        to: MachineId,
    },
}

/// What the coordinator did, for reports and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Migrations approved.
    pub approved: u64,
    /// Migrations reported finished.
    pub completed: u64,
    /// Migrations reported failed.
    pub failed: u64,
    /// Decisions not to move a key because several machines want it.
    pub contended: u64,
    /// Decisions not to move a key because it moved recently.
    pub dwelling: u64,
    /// Keys not remembered because `keys_max` was reached.
    pub keys_ignored: u64,
    /// Tracking requests sent (deferred).
    pub track_requests: u64,
    /// Replicas approved.
    pub replicas_approved: u64,
    /// Decisions not to move (or replicate) a key because the lead was noise or too small to pay.
    pub insignificant: u64,
    /// Instant reports below `hot_rate_min_per_s`, left for the periodic report.
    pub hot_ignored: u64,
    /// Decisions not to move a key yet: its applicant has been busy for
    /// fewer than `lead_intervals` intervals and is not hot.
    pub brief: u64,
    /// Decisions not to move a key yet: the coordinator has been running
    /// for fewer than `listen_intervals` intervals.
    pub listening: u64,
    /// Busy entries of periodic reports whose key was not weighed: no
    /// machine's rate for it could lead ("Screening" in the module doc).
    pub screened: u64,
}
