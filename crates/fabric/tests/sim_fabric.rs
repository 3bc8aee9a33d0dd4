//! The simulated fabric: it conforms (from setup code, and inside a run among
//! other actors), its runs are a function of the seed, it catches a racy
//! protocol and prints the seed, bounds livelocks, and stops promptly when an
//! actor panics.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use locus_fabric::conformance::{self, Cluster};
use locus_fabric::sim::{Actor, Sim, SimConfig, SimFabric, SimFailureKind, SimReport};
use locus_fabric::{Completion, Fabric, MachineId, Port, RegionId, WorkRequest};

struct One(SimFabric);

impl Cluster for One {
    type F = SimFabric;
    fn node(&self, _machine: MachineId) -> &SimFabric {
        &self.0
    }
}

fn sim(config: SimConfig) -> Sim {
    Sim::new(config).expect("valid config")
}

/// The whole suite from setup code (no run active: operations run directly).
/// The two checks that spawn threads work here because nothing is scheduled.
mod conformance_from_setup {
    use super::*;
    fn delayed() -> One {
        One(sim(SimConfig::with_seed(11)).fabric().clone())
    }
    locus_fabric::conformance_suite!(delayed());
}

mod conformance_from_setup_without_delay {
    use super::*;
    fn immediate() -> One {
        let config = SimConfig {
            posted_delay: false,
            ..SimConfig::with_seed(12)
        };
        One(sim(config).fabric().clone())
    }
    locus_fabric::conformance_suite!(immediate());
}

/// Runs `check` as actor 0 of a run, beside two actors that make noise on
/// their own region, so the check's operations interleave with theirs.
/// (`concurrent_cas_races` and `word_atomicity` spawn their own threads, which
/// a run forbids: they only run from setup code above.)
fn check_in_run(seed: u64, check: fn(&One)) {
    let mut s = sim(SimConfig::with_seed(seed));
    let noise = s.fabric().register(3, "noise", 64).unwrap().id;
    let mut actors: Vec<Actor> = vec![Box::new(move |f: &SimFabric| check(&One(f.clone())))];
    for a in 0..2u64 {
        actors.push(Box::new(move |f: &SimFabric| {
            let mut p = f.port(3).unwrap();
            for i in 0..100 {
                p.write_word(3, noise, a * 8, i).unwrap();
                p.relax();
            }
        }));
    }
    let report = s.run(actors).unwrap();
    assert!(report.actor_steps[1] > 0 && report.actor_steps[2] > 0);
}

#[test]
fn conformance_checks_inside_a_run() {
    for seed in [1, 2] {
        check_in_run(seed, conformance::read_write_round_trip);
        check_in_run(seed, conformance::cas_and_fetch_add_semantics);
        check_in_run(seed, conformance::bounds_errors);
        check_in_run(seed, conformance::pipelining);
        check_in_run(seed, conformance::message_delivery);
        check_in_run(seed, conformance::epochs_zero_change_nothing);
        check_in_run(seed, conformance::a_stale_requester_is_refused);
        check_in_run(seed, conformance::a_newer_incarnation_is_admitted);
        check_in_run(seed, conformance::a_recovering_machine_holds_its_memory);
        check_in_run(
            seed,
            conformance::an_op_to_a_peer_marked_down_fails_naming_machine_and_epoch,
        );
        check_in_run(seed, conformance::a_stale_view_of_the_target_is_refused);
        check_in_run(
            seed,
            conformance::a_fenced_machine_serves_nothing_and_issues_nothing,
        );
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Read,
    Cas,
}

/// One operation of an actor: simulated time just after it (a global order), what it saw.
type Log = Vec<(u64, Op, u64)>;

/// Three actors CAS-increment one word 10 times each, logging every operation.
fn cas_counter(seed: u64) -> (SimReport, Vec<Log>) {
    let mut s = sim(SimConfig {
        machines: 3,
        ..SimConfig::with_seed(seed)
    });
    let r = s.fabric().register(0, "counter", 64).unwrap().id;
    let logs: Vec<Mutex<Log>> = (0..3).map(|_| Mutex::new(Vec::new())).collect();
    let actors: Vec<Actor> = logs
        .iter()
        .enumerate()
        .map(|(a, log)| {
            Box::new(move |f: &SimFabric| {
                let mut p = f.port(a as MachineId).unwrap();
                for _ in 0..10 {
                    let mut cur = p.read_word(0, r, 0).unwrap();
                    log.lock().unwrap().push((p.now_ns(), Op::Read, cur));
                    loop {
                        let prev = p.cas(0, r, 0, cur, cur + 1).unwrap();
                        log.lock().unwrap().push((p.now_ns(), Op::Cas, prev));
                        if prev == cur {
                            break;
                        }
                        cur = prev;
                    }
                }
            }) as Actor
        })
        .collect();
    let report = s.run(actors).unwrap();
    let mut p = s.fabric().port(0).unwrap();
    assert_eq!(
        p.read_word(0, r, 0).unwrap(),
        30,
        "seed {seed}: lost a CAS increment"
    );
    let logs = logs.into_iter().map(|l| l.into_inner().unwrap()).collect();
    (report, logs)
}

#[test]
fn same_seed_same_interleaving_other_seeds_differ() {
    let (report, logs) = cas_counter(7);
    let (report2, logs2) = cas_counter(7);
    assert_eq!(report, report2);
    assert_eq!(logs, logs2, "seed 7 ran two different interleavings");
    // Times are a global order: no two operations share one.
    let mut times: Vec<u64> = logs.iter().flatten().map(|e| e.0).collect();
    times.sort_unstable();
    times.dedup();
    assert_eq!(times.len(), logs.iter().map(Vec::len).sum::<usize>());
    assert!(
        (1..=5).any(|seed| cas_counter(seed).1 != logs),
        "seeds 1..=5 all ran seed 7's interleaving"
    );
}

/// Two actors increment a word `rounds` times each; the last to finish checks the total.
fn increments(seed: u64, atomic: bool) -> Result<SimReport, String> {
    let rounds = 5u64;
    let mut s = sim(SimConfig {
        machines: 2,
        ..SimConfig::with_seed(seed)
    });
    let r = s.fabric().register(0, "count", 64).unwrap().id;
    let actors: Vec<Actor> = (0..2)
        .map(|a| {
            Box::new(move |f: &SimFabric| {
                let mut p = f.port(a).unwrap();
                for _ in 0..rounds {
                    if atomic {
                        let mut cur = p.read_word(0, r, 0).unwrap();
                        loop {
                            let prev = p.cas(0, r, 0, cur, cur + 1).unwrap();
                            if prev == cur {
                                break;
                            }
                            cur = prev;
                        }
                    } else {
                        // The bug under test: read, then write, with a step in between.
                        let cur = p.read_word(0, r, 0).unwrap();
                        p.write_word(0, r, 0, cur + 1).unwrap();
                    }
                }
                if p.fetch_add(0, r, 8, 1).unwrap() == 1 {
                    let total = p.read_word(0, r, 0).unwrap();
                    assert_eq!(total, 2 * rounds, "lost update");
                }
            }) as Actor
        })
        .collect();
    s.run(actors).map_err(|failure| failure.to_string())
}

#[test]
fn a_lost_update_is_caught_and_names_its_seed() {
    let failure = (1..=200u64)
        .find_map(|seed| increments(seed, false).err().map(|msg| (seed, msg)))
        .expect("no seed in 1..=200 interleaved the racy increments");
    let (seed, msg) = failure;
    assert!(
        msg.starts_with(&format!("seed {seed}: actor ")),
        "message does not lead with the seed: {msg}"
    );
    assert!(msg.contains("lost update"), "{msg}");
    // The seed replays the failure.
    assert_eq!(increments(seed, false).unwrap_err(), msg);
}

#[test]
fn cas_increments_are_never_lost() {
    for seed in 1..=200u64 {
        if let Err(msg) = increments(seed, true) {
            panic!("{msg}");
        }
    }
}

#[test]
fn a_livelock_ends_at_steps_max() {
    let mut s = sim(SimConfig {
        steps_max: 5_000,
        ..SimConfig::with_seed(42)
    });
    let r = s.fabric().register(0, "flag", 64).unwrap().id;
    let actors: Vec<Actor> = vec![
        Box::new(move |f: &SimFabric| {
            let mut p = f.port(0).unwrap();
            // Waits for a flag that nobody sets.
            while p.read_word(0, r, 0).unwrap() == 0 {
                p.relax();
            }
        }),
        Box::new(move |f: &SimFabric| {
            let mut p = f.port(1).unwrap();
            p.write_word(0, r, 8, 1).unwrap();
        }),
    ];
    let failure = s.run(actors).unwrap_err();
    assert_eq!(failure.steps, 5_001);
    assert!(matches!(
        failure.kind,
        SimFailureKind::Livelock {
            actor: 0,
            steps_max: 5_000
        }
    ));
    let msg = failure.to_string();
    assert!(msg.starts_with("seed 42: livelock"), "{msg}");
    // The fabric is usable again after a failed run.
    let mut p = s.fabric().port(0).unwrap();
    assert_eq!(p.read_word(0, r, 8).unwrap(), 1);
}

/// Counts actors whose closures were dropped (ran to the end, unwound, or never started).
struct Exit<'a>(&'a AtomicUsize);

impl Drop for Exit<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn a_panic_stops_the_run_and_every_actor_exits() {
    let exits = AtomicUsize::new(0);
    let mut s = sim(SimConfig {
        steps_max: u64::MAX,
        ..SimConfig::with_seed(3)
    });
    let r = s.fabric().register(0, "lock", 64).unwrap().id;
    let mut actors: Vec<Actor> = Vec::new();
    let exit = Exit(&exits);
    actors.push(Box::new(move |f: &SimFabric| {
        let _exit = exit;
        let mut p = f.port(0).unwrap();
        // Panic only once both spinners are spinning.
        while p.read_word(0, r, 8).unwrap() < 2 {
            p.relax();
        }
        panic!("boom in actor 0");
    }));
    for a in 1..3u8 {
        let exit = Exit(&exits);
        actors.push(Box::new(move |f: &SimFabric| {
            let _exit = exit;
            let mut p = f.port(a).unwrap();
            p.fetch_add(0, r, 8, 1).unwrap();
            // A guard whose drop issues an operation while unwinding.
            struct Unlock(locus_fabric::sim::SimPort, RegionId);
            impl Drop for Unlock {
                fn drop(&mut self) {
                    self.0.write_word(0, self.1, 16, 0).unwrap();
                }
            }
            let mut guard = Unlock(f.port(a).unwrap(), r);
            loop {
                guard.0.relax();
                let _ = p.try_recv().unwrap();
            }
        }));
    }
    let failure = s.run(actors).unwrap_err();
    assert_eq!(exits.load(Ordering::SeqCst), 3, "an actor did not exit");
    match &failure.kind {
        SimFailureKind::Panicked { actor: 0, message } => assert_eq!(message, "boom in actor 0"),
        other => panic!("unexpected failure {other:?}"),
    }
    assert!(failure.to_string().starts_with("seed 3: actor 0 panicked"));
    assert!(failure.steps < 10_000, "the run went on after the panic");
}

#[test]
fn an_actor_that_panics_first_stops_actors_that_never_started() {
    let exits = AtomicUsize::new(0);
    for seed in 0..20 {
        exits.store(0, Ordering::SeqCst);
        let mut s = sim(SimConfig::with_seed(seed));
        let actors: Vec<Actor> = (0..4)
            .map(|a| {
                let exit = Exit(&exits);
                Box::new(move |f: &SimFabric| {
                    let _exit = exit;
                    assert_ne!(a, 0, "actor 0 fails at once");
                    let mut p = f.port(0).unwrap();
                    loop {
                        p.relax();
                    }
                }) as Actor
            })
            .collect();
        let failure = s.run(actors).unwrap_err();
        assert!(matches!(
            failure.kind,
            SimFailureKind::Panicked { actor: 0, .. }
        ));
        assert_eq!(exits.load(Ordering::SeqCst), 4);
    }
}

#[test]
fn a_thread_outside_the_run_is_refused() {
    let mut s = sim(SimConfig::with_seed(5));
    let r = s.fabric().register(0, "x", 64).unwrap().id;
    let actors: Vec<Actor> = vec![Box::new(move |f: &SimFabric| {
        let f = f.clone();
        let outcome = std::thread::spawn(move || {
            let mut p = f.port(1).unwrap();
            p.read_word(0, r, 0).map(|_| ())
        })
        .join();
        if let Err(e) = outcome {
            std::panic::resume_unwind(e);
        }
    })];
    let msg = s.run(actors).unwrap_err().to_string();
    assert!(msg.contains("not an actor"), "{msg}");
}

#[test]
fn the_clock_advances_one_step_per_scheduling_point() {
    let mut s = sim(SimConfig {
        clock_step_ns: 250,
        ..SimConfig::with_seed(9)
    });
    let actors: Vec<Actor> = (0..2)
        .map(|a| {
            Box::new(move |f: &SimFabric| {
                let mut p = f.port(a).unwrap();
                for _ in 0..10 {
                    let before = p.now_ns();
                    p.relax();
                    assert!(p.now_ns() > before);
                }
            }) as Actor
        })
        .collect();
    let report = s.run(actors).unwrap();
    assert_eq!(report.steps, 20);
    assert_eq!(report.actor_steps, vec![10, 10]);
    assert_eq!(report.now_ns, 20 * 250);
    // Setup code does not advance it; a second run carries on from it.
    let mut p = s.fabric().port(0).unwrap();
    p.relax();
    assert_eq!(s.fabric().now_ns(), 5_000);
    let report = s
        .run(vec![Box::new(|f: &SimFabric| f.port(0).unwrap().relax())])
        .unwrap();
    assert_eq!((report.steps, report.now_ns), (1, 5_250));
}

/// Posted requests to two targets, alternately; returns the completion order.
fn posted_order(seed: u64) -> Vec<Completion> {
    let mut s = sim(SimConfig::with_seed(seed));
    let r1 = s.fabric().register(1, "a", 64).unwrap().id;
    let r2 = s.fabric().register(2, "b", 64).unwrap().id;
    let out = Mutex::new(Vec::new());
    let actors: Vec<Actor> = vec![Box::new(|f: &SimFabric| {
        let mut p = f.port(0).unwrap();
        for i in 0..8u64 {
            let (t, r) = if i % 2 == 0 { (1, r1) } else { (2, r2) };
            p.post(WorkRequest::fetch_add(i, t, r, 0, 1)).unwrap();
        }
        let mut done = Vec::new();
        while done.len() < 8 {
            p.wait(&mut done).unwrap();
        }
        *out.lock().unwrap() = done;
    })];
    s.run(actors).unwrap();
    out.into_inner().unwrap()
}

#[test]
fn posted_requests_reorder_across_targets_only() {
    let mut reordered = false;
    for seed in 0..20 {
        let done = posted_order(seed);
        let ids: Vec<u64> = done.iter().map(|c| c.id).collect();
        for t in [1, 2] {
            let per_target: Vec<u64> = done
                .iter()
                .filter(|c| c.target == t)
                .map(|c| c.id)
                .collect();
            assert!(
                per_target.windows(2).all(|w| w[0] < w[1]),
                "seed {seed}: {ids:?}"
            );
            // Each fetch-add saw the ones before it on its target.
            for (k, c) in done.iter().filter(|c| c.target == t).enumerate() {
                assert_eq!(c.result.as_ref().unwrap().word(), Some(k as u64));
            }
        }
        reordered |= ids.windows(2).any(|w| w[0] > w[1]);
    }
    assert!(reordered, "no seed in 0..20 reordered across targets");
}

#[test]
fn a_posted_write_is_invisible_to_others_until_applied() {
    // Actor 0 posts a write and later polls it; actor 1 reads meanwhile. For
    // some seed, actor 1 reads the old value after the post (legal before the
    // completion); it never reads the old value after the completion.
    let mut seen_old_after_post = false;
    for seed in 0..30 {
        let mut s = sim(SimConfig::with_seed(seed));
        let r = s.fabric().register(0, "w", 64).unwrap().id;
        let marks = Mutex::new((u64::MAX, u64::MAX)); // (posted at, completed at)
        let reads = Mutex::new(Vec::new());
        let marks_ref = &marks;
        let reads_ref = &reads;
        let actors: Vec<Actor> = vec![
            Box::new(move |f: &SimFabric| {
                let mut p = f.port(1).unwrap();
                p.post(WorkRequest::write(1, 0, r, 0, 1u64.to_le_bytes().to_vec()))
                    .unwrap();
                marks_ref.lock().unwrap().0 = p.now_ns();
                let mut done = Vec::new();
                while done.is_empty() {
                    p.poll(&mut done).unwrap();
                }
                marks_ref.lock().unwrap().1 = p.now_ns();
            }),
            Box::new(move |f: &SimFabric| {
                let mut p = f.port(2).unwrap();
                for _ in 0..20 {
                    let v = p.read_word(0, r, 0).unwrap();
                    reads_ref.lock().unwrap().push((p.now_ns(), v));
                }
            }),
        ];
        s.run(actors).unwrap();
        let (posted, completed) = marks.into_inner().unwrap();
        for (t, v) in reads.into_inner().unwrap() {
            assert!(
                !(t > completed && v == 0),
                "seed {seed}: read 0 after the completion"
            );
            seen_old_after_post |= t > posted && t < completed && v == 0;
        }
    }
    assert!(seen_old_after_post, "no seed delayed a posted write");
}
