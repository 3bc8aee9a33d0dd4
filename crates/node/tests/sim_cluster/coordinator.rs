//! The simulated twin's coordinator (Pragh 4.4): the real policy and the
//! persist-then-dispatch step over the nodes' monitors, its record in
//! memory, its jobs handed to the nodes' executors; see `sim_cluster.rs`.

use std::sync::atomic::Ordering;
use std::time::Duration;

use locus_coordinator::dispatch::{self, Dispatch, Persist};
use locus_coordinator::monitor::Monitor;
use locus_coordinator::policy::{Action, Coordinator, Event as PolicyEvent};
use locus_fabric::sim::SimFabric;
use locus_fabric::{Fabric, MachineId, Port};

use super::{policy, Shared, MACHINES};

/// The coordinator's record, in memory: persisting is pushing.
struct SimRecord<'a>(&'a Shared);

impl Persist for SimRecord<'_> {
    type Error = String;
    fn persist_approvals(&self, actions: &[Action]) -> Result<(), (String, Vec<PolicyEvent>)> {
        let mut r = self.0.membership.record.lock().unwrap();
        for a in actions {
            if let Action::Persist { key, target } = a {
                r.push((*key, *target));
            }
        }
        Ok(())
    }
}

/// Hands approved migrations to the target's executor; tracks and
/// collects on the holder's tracker, as the in-process driver does.
struct SimJobs<'a> {
    s: &'a Shared,
    now_ms: u64,
    tracking_since: Vec<u64>,
    approved: u64,
}

impl Dispatch<String> for SimJobs<'_> {
    fn dispatch(&mut self, actions: Vec<Action>, next: &mut Vec<PolicyEvent>) {
        for a in actions {
            match a {
                Action::Migrate { key, to, .. } => {
                    self.approved += 1;
                    self.s.jobs[to as usize].lock().unwrap().push_back(key);
                }
                Action::Track { machine, keys } => {
                    if let Some((node, _)) = self.s.node(machine) {
                        if let Some(t) = node.store().tracker(machine) {
                            let _ = t.install(keys);
                            self.tracking_since[machine as usize] = self.now_ms;
                        }
                    }
                }
                Action::Collect { machine } => {
                    if let Some((node, _)) = self.s.node(machine) {
                        if let Some(t) = node.store().tracker(machine) {
                            next.push(PolicyEvent::Tracked {
                                machine,
                                interval_ms: self
                                    .now_ms
                                    .saturating_sub(self.tracking_since[machine as usize]),
                                counts: t.take(),
                            });
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn persist_failed(&mut self, error: String) {
        panic!("the in-memory record cannot fail: {error}");
    }
}

/// The coordinator (Pragh 4.4): the nodes' monitors report their location
/// caches' counts; the policy's approvals are persisted in the record,
/// then handed to the targets' executors (persist-then-dispatch, the loop
/// both real drivers run).
pub(crate) fn coordinator(f: &SimFabric, s: &Shared, clients: usize) {
    let cfg = policy();
    let (interval_ms, count_min) = (cfg.interval_ms, cfg.report_count_min);
    let mut c = Coordinator::new(cfg).expect("policy");
    let mut port = f.port(0).expect("a port");
    let start = Duration::from_nanos(f.now_ns());
    // Every node's store places homes by a new cluster's table.
    let homes = std::sync::Arc::new(locus_store::Homes::new(
        &locus_store::SlotTable::uniform(locus_store::homes::SLOTS_DEFAULT, MACHINES as u16)
            .expect("a valid shape"),
    ));
    let mut monitors: Vec<Monitor> = (0..MACHINES as MachineId)
        .map(|m| {
            Monitor::new_at(
                m,
                std::sync::Arc::clone(&homes),
                interval_ms,
                count_min,
                start,
            )
        })
        .collect();
    let mut jobs = SimJobs {
        s,
        now_ms: 0,
        tracking_since: vec![0; MACHINES],
        approved: 0,
    };
    let record = SimRecord(s);
    let mut events = Vec::new();
    while s.clients_done.load(Ordering::Acquire) < clients {
        for _ in 0..20 {
            port.relax();
        }
        let now = Duration::from_nanos(f.now_ns());
        for m in 0..MACHINES as MachineId {
            if let Some((node, _)) = s.node(m) {
                if let Some(cache) = node.store().cache(m) {
                    monitors[m as usize].poll_at(now, cache, &mut events);
                }
            }
        }
        events.append(&mut s.results.lock().unwrap());
        for ev in events.drain(..) {
            jobs.now_ms = f.now_ns() / 1_000_000;
            let mut clock = || f.now_ns() / 1_000_000;
            let _ = dispatch::step(&mut c, &mut clock, ev, &record, &mut jobs);
        }
    }
    s.coverage.lock().unwrap().approved += jobs.approved;
}
