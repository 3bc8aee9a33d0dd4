//! Persist, then dispatch (Pragh 4.4, 5): the one loop body of both
//! drivers of the coordinator's policy, the in-process [`crate::Driver`]
//! and the coordinator process of `locus-server`.
//!
//! ```text
//!  event ─▶ Coordinator::step ─▶ actions ─▶ persist every approval ─▶ dispatch the actions
//!             ▲                                 │ failed: nothing is dispatched;     │
//!             └──── events to take next ◀───────┘ the approvals are undone     ◀─────┘
//!                   (undo, and what dispatch could not do: a migration to an
//!                    unreachable target ends as not moved, a collect reports)
//! ```
//!
//! Invariant (persist-then-act): no migration is handed to an executor
//! before the record holding its target is durable, so a restarted
//! coordinator knows every target a value may have been moved to.
//! [`Dispatch::may_approve`] lets a driver stop when it may no longer
//! approve (a coordinator fenced out of its election), after the step and
//! before anything it decided is persisted or dispatched.

use crate::policy::{Action, Coordinator, Event};

/// What persists approvals (`Record`, or the process's etcd or redb record).
pub trait Persist {
    /// What a failed persist says.
    type Error;
    /// Persists every `Action::Persist` of `actions` in one transaction; on
    /// failure, the error and the events that undo the batch's approvals.
    fn persist_approvals(&self, actions: &[Action]) -> Result<(), (Self::Error, Vec<Event>)>;
}

impl Persist for crate::Record {
    type Error = crate::CoordinatorError;
    fn persist_approvals(
        &self,
        actions: &[Action],
    ) -> Result<(), (crate::CoordinatorError, Vec<Event>)> {
        crate::Record::persist_approvals(self, actions)
    }
}

/// Where a driver carries out persisted actions (`E`: its record's error).
pub trait Dispatch<E> {
    /// Carries out `actions` (every approval of them persisted), appending
    /// to `next` the events the coordinator must take next (a migration
    /// that could not be handed over ends as not moved; a collect done at
    /// once reports its counts).
    fn dispatch(&mut self, actions: Vec<Action>, next: &mut Vec<Event>);

    /// Whether the coordinator may still approve (false: stop now).
    fn may_approve(&self) -> bool {
        true
    }

    /// A batch of approvals could not be persisted (they are undone).
    fn persist_failed(&mut self, error: E);
}

/// Why [`step`] stopped before taking every event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// [`Dispatch::may_approve`] said no.
    Fenced,
}

/// Takes `event` and every event it leads to (undo, dispatch results)
/// through the coordinator at `now_ms`, persisting each step's approvals
/// before dispatching its actions.
pub fn step<P: Persist>(
    c: &mut Coordinator,
    now_ms: &mut dyn FnMut() -> u64,
    event: Event,
    record: &P,
    dispatch: &mut dyn Dispatch<P::Error>,
) -> Result<(), Stopped> {
    let mut pending = vec![event];
    while let Some(event) = pending.pop() {
        let actions = c.step(now_ms(), event);
        if !dispatch.may_approve() {
            return Err(Stopped::Fenced);
        }
        if let Err((e, undo)) = record.persist_approvals(&actions) {
            // Not durable: approve nothing; the keys come back in later reports.
            dispatch.persist_failed(e);
            pending.extend(undo);
            continue;
        }
        dispatch.dispatch(actions, &mut pending);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;
    use crate::policy::{Access, PolicyConfig};
    use locus_store::Key;

    /// A record that logs what it persisted, failing while `fail` is set.
    #[derive(Default)]
    struct Log {
        fail: bool,
        persisted: RefCell<Vec<(Key, u8)>>,
        seen_by_dispatch: RefCell<Vec<usize>>,
    }

    impl Persist for Log {
        type Error = String;
        fn persist_approvals(&self, actions: &[Action]) -> Result<(), (String, Vec<Event>)> {
            let approved: Vec<(Key, u8)> = actions
                .iter()
                .filter_map(|a| match a {
                    Action::Persist { key, target } => Some((*key, *target)),
                    _ => None,
                })
                .collect();
            if self.fail && !approved.is_empty() {
                let undo = approved
                    .into_iter()
                    .map(|(key, to)| Event::Migrated { key, to, ok: false })
                    .collect();
                return Err(("disk full".into(), undo));
            }
            self.persisted.borrow_mut().extend(approved);
            Ok(())
        }
    }

    /// A dispatcher that records how much was persisted when each
    /// migration reached it, and reports each as not moved (no executor).
    struct Jobs<'a> {
        log: &'a Log,
        migrations: Vec<(Key, u8)>,
        failures: Vec<String>,
        fenced: bool,
    }

    impl<'a> Jobs<'a> {
        fn new(log: &'a Log, fenced: bool) -> Self {
            Jobs {
                log,
                migrations: Vec::new(),
                failures: Vec::new(),
                fenced,
            }
        }
    }

    impl Dispatch<String> for Jobs<'_> {
        fn dispatch(&mut self, actions: Vec<Action>, _next: &mut Vec<Event>) {
            for a in actions {
                if let Action::Migrate { key, to, .. } = a {
                    self.log
                        .seen_by_dispatch
                        .borrow_mut()
                        .push(self.log.persisted.borrow().len());
                    self.migrations.push((key, to));
                }
            }
        }
        fn may_approve(&self) -> bool {
            !self.fenced
        }
        fn persist_failed(&mut self, error: String) {
            self.failures.push(error);
        }
    }

    /// A coordinator that moves key 7 to machine 1 on its first report.
    fn coordinator() -> (Coordinator, Event) {
        // Eager, one report decides (as `tests/coordinator_decisions.rs`).
        let c = Coordinator::new(PolicyConfig {
            interval_ms: 1_000,
            dwell_ms: 1_000,
            forget_after_ms: 3_000,
            lead_intervals: 1,
            listen_intervals: 0,
            ..PolicyConfig::default()
        })
        .unwrap();
        let report = Event::Report {
            machine: 1,
            interval_ms: 1_000,
            accesses: vec![Access {
                key: Key(7),
                holder: 0,
                count: 500,
            }],
        };
        (c, report)
    }

    #[test]
    fn approvals_are_persisted_before_they_are_dispatched() {
        let (mut c, report) = coordinator();
        let log = Log::default();
        let mut jobs = Jobs::new(&log, false);
        step(&mut c, &mut || 0, report, &log, &mut jobs).unwrap();
        assert_eq!(jobs.migrations, vec![(Key(7), 1)]);
        assert_eq!(*log.persisted.borrow(), vec![(Key(7), 1)]);
        assert_eq!(
            *log.seen_by_dispatch.borrow(),
            vec![1],
            "the migration reached dispatch with its target already persisted"
        );
    }

    #[test]
    fn an_approval_that_cannot_be_persisted_is_never_dispatched() {
        let (mut c, report) = coordinator();
        let log = Log {
            fail: true,
            ..Log::default()
        };
        let mut jobs = Jobs::new(&log, false);
        step(&mut c, &mut || 0, report, &log, &mut jobs).unwrap();
        assert!(jobs.migrations.is_empty(), "{:?}", jobs.migrations);
        assert_eq!(jobs.failures, vec!["disk full".to_string()]);
        let st = c.stats();
        assert_eq!(
            (st.approved, st.failed),
            (1, 1),
            "the approval was undone: {st:?}"
        );
    }

    #[test]
    fn a_fenced_driver_persists_and_dispatches_nothing() {
        let (mut c, report) = coordinator();
        let log = Log::default();
        let mut jobs = Jobs::new(&log, true);
        assert_eq!(
            step(&mut c, &mut || 0, report, &log, &mut jobs),
            Err(Stopped::Fenced)
        );
        assert!(jobs.migrations.is_empty() && log.persisted.borrow().is_empty());
    }
}
