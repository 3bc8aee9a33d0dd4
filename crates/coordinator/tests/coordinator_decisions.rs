//! The coordinator's decisions, driven through its state machine (Pragh 4.4).

use locus_coordinator::{
    Access, Action, Coordinator, CoordinatorError, Event, Mode, PolicyConfig, Record,
};
use locus_store::Key;

/// Eager mode with Pragh's one-report rule: the tests of the other rules
/// decide on one report, from a coordinator that has heard every machine
/// already; the lead rule and listening first have their own tests.
fn eager() -> PolicyConfig {
    PolicyConfig {
        interval_ms: 1_000,
        dwell_ms: 1_000,
        forget_after_ms: 3_000,
        lead_intervals: 1,
        listen_intervals: 0,
        ..PolicyConfig::default()
    }
}

/// Eager mode with the default lead of two intervals.
fn lead() -> PolicyConfig {
    PolicyConfig {
        lead_intervals: PolicyConfig::default().lead_intervals,
        ..eager()
    }
}

fn report(machine: u8, accesses: &[(u64, u8, u32)]) -> Event {
    Event::Report {
        machine,
        interval_ms: 1_000,
        accesses: accesses
            .iter()
            .map(|&(k, holder, count)| Access {
                key: Key(k),
                holder,
                count,
            })
            .collect(),
    }
}

/// A holder's tracked counts over one 1 s interval (deferred mode).
fn tracked(machine: u8, counts: &[(u64, u32)]) -> Event {
    Event::Tracked {
        machine,
        interval_ms: 1_000,
        counts: counts.iter().map(|&(k, n)| (Key(k), n)).collect(),
    }
}

fn migrations(actions: &[Action]) -> Vec<(u64, u8, u8)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Migrate { key, from, to } => Some((key.0, *from, *to)),
            _ => None,
        })
        .collect()
}

#[test]
fn eager_approves_at_once_and_persists_before_migrating() {
    let mut c = Coordinator::new(eager()).unwrap();
    let a = c.step(0, report(3, &[(10, 1, 500)]));
    assert_eq!(
        a,
        vec![
            Action::Persist {
                key: Key(10),
                target: 3
            },
            Action::Migrate {
                key: Key(10),
                from: 1,
                to: 3
            }
        ]
    );
    // While it is in flight, more reports do not approve it again.
    assert!(c.step(10, report(3, &[(10, 1, 900)])).is_empty());
    assert_eq!(c.stats().approved, 1);
}

#[test]
fn the_applicant_must_beat_the_holder_by_the_profit_threshold() {
    let mut c = Coordinator::new(eager()).unwrap();
    // Machine 2 holds key 5 (migrated there) and reports 400/s on it.
    assert!(c.step(0, report(2, &[(5, 2, 400)])).is_empty());
    // 590/s is less than 400 * 1.5: stays.
    assert!(migrations(&c.step(1, report(4, &[(5, 2, 590)]))).is_empty());
    // 610/s beats it.
    assert_eq!(
        migrations(&c.step(2, report(4, &[(5, 2, 610)]))),
        vec![(5, 2, 4)]
    );
}

#[test]
fn keys_wanted_by_several_machines_stay_put() {
    let mut c = Coordinator::new(eager()).unwrap();
    let a = c.step(0, report(3, &[(8, 0, 300)]));
    assert_eq!(migrations(&a), vec![(8, 0, 3)], "alone, machine 3 wins");
    let mut c = Coordinator::new(eager()).unwrap();
    c.step(0, report(5, &[(8, 0, 250)])); // approved to 5 ...
    c.step(
        1,
        Event::Migrated {
            key: Key(8),
            to: 5,
            ok: false,
        },
    ); // ... but failed
       // Now 3 and 5 both want it, within 50% of each other: contended.
    let a = c.step(2, report(3, &[(8, 0, 300)]));
    assert!(migrations(&a).is_empty(), "{a:?}");
    assert!(c.stats().contended >= 1);
}

#[test]
fn no_ping_pong_within_the_dwell_time_but_eager_moves_back_after() {
    let mut c = Coordinator::new(eager()).unwrap();
    assert_eq!(
        migrations(&c.step(0, report(3, &[(1, 0, 200)]))),
        vec![(1, 0, 3)]
    );
    c.step(
        100,
        Event::Migrated {
            key: Key(1),
            to: 3,
            ok: true,
        },
    );
    assert_eq!(c.holder(Key(1)), Some(3));
    // The old holder now reads it remotely and reports more accesses than 3,
    // but within the dwell time nothing moves.
    let a = c.step(200, report(0, &[(1, 3, 900)]));
    assert!(migrations(&a).is_empty());
    assert_eq!(c.stats().dwelling, 1);
    // After the dwell time, with 3 reporting its own (migrated-here) rate,
    // the old holder wins by more than 50% and the value moves back.
    let a = c.step(1_200, report(3, &[(1, 3, 100)]));
    assert_eq!(migrations(&a), vec![(1, 3, 0)]);
}

#[test]
fn deferred_tracks_the_holder_for_an_interval_then_decides_with_both_sides() {
    let cfg = PolicyConfig {
        mode: Mode::Deferred,
        ..eager()
    };
    let mut c = Coordinator::new(cfg).unwrap();
    assert_eq!(c.next_due_ms(), None, "nothing is due before an event");
    let a = c.step(0, report(6, &[(40, 2, 300), (41, 2, 300)]));
    assert_eq!(
        a,
        vec![Action::Track {
            machine: 2,
            keys: vec![Key(40), Key(41)]
        }]
    );
    // The tracking window's end is the next deadline: a driver waiting for
    // events must wake then, with a Tick.
    assert_eq!(c.next_due_ms(), Some(1_000));
    // Nothing happens before the interval ends.
    assert!(c.step(500, Event::Tick).is_empty());
    assert_eq!(
        c.step(1_000, Event::Tick),
        vec![Action::Collect { machine: 2 }]
    );
    assert_eq!(c.next_due_ms(), None, "collected: nothing due");
    // Holder 2 used key 40 a lot itself (250/s: 300 < 375, stays) and key 41 little.
    let a = c.step(1_001, tracked(2, &[(40, 250), (41, 10)]));
    assert_eq!(migrations(&a), vec![(41, 2, 6)]);
}

#[test]
fn restart_from_the_durable_record_keeps_the_latest_targets() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("coordinator.redb");
    {
        let record = Record::open(&path).unwrap();
        let mut c = Coordinator::new(eager()).unwrap();
        let actions = c.step(0, report(3, &[(77, 0, 500), (78, 1, 400)]));
        // The driver's duty: persist before migrating.
        let persist: Vec<_> = actions
            .iter()
            .filter_map(|a| match a {
                Action::Persist { key, target } => Some((*key, *target)),
                _ => None,
            })
            .collect();
        assert_eq!(persist.len(), 2);
        record.persist(&persist).unwrap();
        // The coordinator stops here (crash): the migrations run on.
    }
    let record = Record::open(&path).unwrap();
    let mut c = Coordinator::restore(eager(), record.load().unwrap()).unwrap();
    assert_eq!(c.holder(Key(77)), Some(3));
    assert_eq!(c.holder(Key(78)), Some(3));
    // Machine 3 now holds both and uses them; machine 0 asks for 77 at a
    // rate below the threshold: no move back.
    c.step(1, report(3, &[(77, 3, 400)]));
    assert!(migrations(&c.step(2, report(0, &[(77, 3, 500)]))).is_empty());
}

#[test]
fn keys_beyond_the_bound_are_ignored_and_counted() {
    let cfg = PolicyConfig {
        keys_max: 2,
        ..eager()
    };
    let mut c = Coordinator::new(cfg).unwrap();
    let a = c.step(0, report(1, &[(1, 0, 100), (2, 0, 100), (3, 0, 100)]));
    assert_eq!(migrations(&a).len(), 2);
    assert_eq!(c.stats().keys_ignored, 1);
}

#[test]
fn slow_keys_are_not_worth_a_migration() {
    let cfg = PolicyConfig {
        rate_min_per_s: 50.0,
        ..eager()
    };
    let mut c = Coordinator::new(cfg).unwrap();
    assert!(c.step(0, report(1, &[(1, 0, 20)])).is_empty());
}

#[test]
fn bad_settings_are_refused_naming_the_field() {
    let bad = PolicyConfig {
        interval_ms: 0,
        ..eager()
    };
    let e = bad.validate().unwrap_err();
    assert!(
        matches!(
            &e,
            CoordinatorError::InvalidSetting { field: "interval_ms", value, .. } if value == "0"
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("interval_ms = 0"), "{e}");
    let bad = PolicyConfig {
        profit: -1.0,
        ..eager()
    };
    assert!(matches!(
        Coordinator::new(bad),
        Err(CoordinatorError::InvalidSetting {
            field: "profit",
            ..
        })
    ));
    let bad = PolicyConfig {
        forget_after_ms: 10,
        ..eager()
    };
    let e = Coordinator::new(bad).unwrap_err();
    assert!(
        matches!(
            e,
            CoordinatorError::SettingBelow {
                field: "forget_after_ms",
                value: 10,
                min_field: "interval_ms",
                min_value: 1_000,
                ..
            }
        ),
        "{e:?}"
    );
    let bad = PolicyConfig {
        eager_rate_min_per_s: -1.0,
        ..eager()
    };
    assert!(matches!(
        bad.validate(),
        Err(CoordinatorError::InvalidSetting {
            field: "eager_rate_min_per_s",
            ..
        })
    ));
    assert!(Coordinator::restore(
        PolicyConfig {
            keys_max: 0,
            ..eager()
        },
        []
    )
    .is_err());
}

#[test]
fn an_instant_report_is_judged_on_its_rate_so_far() {
    let mut c = Coordinator::new(eager()).unwrap();
    // 100 accesses within 200 ms: 500/s.
    let a = c.step(
        0,
        Event::Hot {
            machine: 4,
            elapsed_ms: 200,
            access: Access {
                key: Key(3),
                holder: 1,
                count: 100,
            },
        },
    );
    assert_eq!(migrations(&a), vec![(3, 1, 4)]);
}

fn replicas(actions: &[Action]) -> Vec<(u64, u8)> {
    let mut r: Vec<(u64, u8)> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Replicate { key, to } => Some((key.0, *to)),
            _ => None,
        })
        .collect();
    r.sort_unstable();
    r
}

fn with_replicas() -> PolicyConfig {
    PolicyConfig {
        replicas: true,
        replica_rate_min_per_s: 50.0,
        ..eager()
    }
}

#[test]
fn without_replicas_a_contended_key_is_read_remotely_by_all_but_its_holder() {
    let mut c = Coordinator::new(eager()).unwrap();
    let mut all = c.step(0, report(3, &[(8, 0, 300)]));
    all.extend(c.step(1, report(5, &[(8, 0, 290)])));
    assert!(replicas(&all).is_empty());
}

#[test]
fn replicas_go_to_every_busy_reader_that_does_not_get_the_value() {
    let mut c = Coordinator::new(with_replicas()).unwrap();
    // Machine 3 alone: the value moves there, no replica for anyone else.
    let a = c.step(0, report(3, &[(8, 0, 300)]));
    assert_eq!(migrations(&a), vec![(8, 0, 3)]);
    assert!(replicas(&a).is_empty());
    c.step(
        1,
        Event::Migrated {
            key: Key(8),
            to: 3,
            ok: true,
        },
    );
    // Machines 5 and 6 read it too, as much as the holder does: no move
    // (the holder's own rate is known), but replicas; machine 7 is below
    // the replica rate and gets nothing; the holder never gets one.
    c.step(2, report(3, &[(8, 3, 300)]));
    let mut a = c.step(3, report(5, &[(8, 3, 280)]));
    a.extend(c.step(4, report(6, &[(8, 3, 250)])));
    a.extend(c.step(5, report(7, &[(8, 3, 40)])));
    assert!(migrations(&a).is_empty(), "{a:?}");
    assert_eq!(replicas(&a), vec![(8, 5), (8, 6)]);
    assert_eq!(c.stats().replicas_approved, 2);
}

#[test]
fn a_contended_key_stays_put_and_is_replicated_to_its_readers() {
    let mut c = Coordinator::new(with_replicas()).unwrap();
    let mut a = c.step(0, report(3, &[(9, 0, 300)]));
    // Still the only reader: approved to move. Suppose it failed.
    assert_eq!(migrations(&a), vec![(9, 0, 3)]);
    c.step(
        1,
        Event::Migrated {
            key: Key(9),
            to: 3,
            ok: false,
        },
    );
    a = c.step(2, report(5, &[(9, 0, 290)]));
    a.extend(c.step(3, report(3, &[(9, 0, 300)])));
    assert!(migrations(&a).is_empty());
    assert_eq!(replicas(&a), vec![(9, 3), (9, 5)]);
}

#[test]
fn a_replica_is_approved_again_only_after_a_newer_report_and_the_dwell() {
    let mut c = Coordinator::new(with_replicas()).unwrap();
    c.step(0, report(2, &[(4, 0, 300)]));
    c.step(
        1,
        Event::Migrated {
            key: Key(4),
            to: 2,
            ok: true,
        },
    );
    c.step(2, report(2, &[(4, 2, 300)]));
    assert_eq!(
        replicas(&c.step(3, report(6, &[(4, 2, 200)]))),
        vec![(4, 6)]
    );
    // Other machines' reports re-examine the key: machine 6's old rate does
    // not ask again (its reads are served by the replica and not reported).
    assert!(replicas(&c.step(1_500, report(2, &[(4, 2, 300)]))).is_empty());
    // A newer report from 6 (the replica was invalidated): again.
    assert_eq!(
        replicas(&c.step(1_600, report(6, &[(4, 2, 200)]))),
        vec![(4, 6)]
    );
    // And once more only after the dwell, however often 6 reports.
    assert!(replicas(&c.step(2_000, report(6, &[(4, 2, 200)]))).is_empty());
    assert_eq!(
        replicas(&c.step(2_700, report(6, &[(4, 2, 200)]))),
        vec![(4, 6)]
    );
}

#[test]
fn replica_settings_are_validated() {
    let bad = PolicyConfig {
        replica_rate_min_per_s: f64::NAN,
        ..with_replicas()
    };
    let e = Coordinator::new(bad).unwrap_err();
    assert!(
        matches!(
            e,
            CoordinatorError::InvalidSetting {
                field: "replica_rate_min_per_s",
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string().contains("replica_rate_min_per_s = NaN"),
        "{e}"
    );
}

#[test]
fn a_lead_within_counting_noise_or_too_few_accesses_moves_nothing() {
    let mut c = Coordinator::new(eager()).unwrap();
    // Five accesses in an interval: below count_min, noise, not even weighed.
    assert!(migrations(&c.step(0, report(3, &[(1, 0, 5)]))).is_empty());
    assert_eq!(c.stats().insignificant, 0);
    // As fast in an instant report (a 40 ms window) is weighed, and too few.
    let hot = Event::Hot {
        machine: 3,
        elapsed_ms: 40,
        access: Access {
            key: Key(1),
            holder: 0,
            count: 5,
        },
    };
    assert!(migrations(&c.step(0, hot)).is_empty());
    assert_eq!(c.stats().insignificant, 1);
    // Machine 2 holds key 2 and reads it 10 times; machine 4, 16 times: past
    // the 50% profit, but 6 more is within 2 standard deviations of noise.
    // Neither report's count could lead against any rival, so neither key
    // is weighed (screened): the holder's own, and machine 4's.
    c.step(0, report(2, &[(2, 2, 10)]));
    assert!(migrations(&c.step(1, report(4, &[(2, 2, 16)]))).is_empty());
    assert_eq!(c.stats().insignificant, 1);
    assert_eq!(c.stats().screened, 2);
    // 60 against 10 is a clear lead.
    assert_eq!(
        migrations(&c.step(2, report(4, &[(2, 2, 60)]))),
        vec![(2, 2, 4)]
    );
}

#[test]
fn a_move_must_pay_for_itself_within_an_interval() {
    let cfg = PolicyConfig {
        move_cost_accesses: 50.0,
        ..eager()
    };
    let mut c = Coordinator::new(cfg).unwrap();
    // 40 accesses in the 1 s interval save fewer than the 50 a move costs.
    assert!(migrations(&c.step(0, report(3, &[(7, 0, 40)]))).is_empty());
    assert_eq!(c.stats().screened, 1);
    assert_eq!(
        migrations(&c.step(1, report(3, &[(7, 0, 80)]))),
        vec![(7, 0, 3)]
    );
}

#[test]
fn an_instant_report_below_the_per_second_threshold_waits_for_the_interval() {
    let mut c = Coordinator::new(eager()).unwrap();
    // 20 accesses in 400 ms is 50/s: below Pragh's 100/s for instant reports.
    let hot = |count, elapsed_ms| Event::Hot {
        machine: 4,
        elapsed_ms,
        access: Access {
            key: Key(9),
            holder: 1,
            count,
        },
    };
    assert!(c.step(0, hot(20, 400)).is_empty());
    assert_eq!(c.stats().hot_ignored, 1);
    // The same key counted at 100 in 500 ms (200/s) moves at once.
    assert_eq!(migrations(&c.step(1, hot(100, 500))), vec![(9, 1, 4)]);
}

#[test]
fn eager_asks_the_holder_first_for_a_key_below_the_eager_rate() {
    let mut c = Coordinator::new(PolicyConfig {
        eager_rate_min_per_s: 100.0,
        ..eager()
    })
    .unwrap();
    // 60/s and 70/s from machine 5 on keys 20 and 21, held at their homes
    // (3 and 4), which have not reported them: below the 100/s eager rate,
    // so the homes are asked to count their own accesses first.
    let a = c.step(0, report(5, &[(20, 3, 60), (21, 4, 70)]));
    assert!(migrations(&a).is_empty(), "{a:?}");
    let mut tracks: Vec<_> = a
        .iter()
        .filter_map(|a| match a {
            Action::Track { machine, keys } => Some((*machine, keys.clone())),
            _ => None,
        })
        .collect();
    tracks.sort();
    assert_eq!(tracks, vec![(3, vec![Key(20)]), (4, vec![Key(21)])]);
    // A hot key (300/s) from the same report's machine moves at once.
    assert_eq!(
        migrations(&c.step(1, report(5, &[(22, 3, 300)]))),
        vec![(22, 3, 5)]
    );
    // After an interval the homes' counts come back: home 3 reads key 20
    // 50 times (60 is not 50% more: it stays), home 4 never reads key 21.
    let mut collects: Vec<_> = c
        .step(1_000, Event::Tick)
        .into_iter()
        .filter_map(|a| match a {
            Action::Collect { machine } => Some(machine),
            _ => None,
        })
        .collect();
    collects.sort();
    assert_eq!(collects, vec![3, 4]);
    let a = c.step(1_001, tracked(3, &[(20, 50)]));
    assert!(migrations(&a).is_empty(), "{a:?}");
    let a = c.step(1_002, tracked(4, &[(21, 0)]));
    assert_eq!(migrations(&a), vec![(21, 4, 5)]);
}

#[test]
fn a_key_that_could_not_move_is_not_tracked() {
    let mut c = Coordinator::new(PolicyConfig {
        eager_rate_min_per_s: 100.0,
        ..eager()
    })
    .unwrap();
    // Six accesses: below count_min whatever the holder reads (and not weighed).
    let a = c.step(0, report(5, &[(30, 3, 6)]));
    assert!(a.is_empty(), "{a:?}");
    // Ten, against a holder whose count is unknown: 10 is within counting noise.
    let a = c.step(1, report(5, &[(31, 3, 10)]));
    assert!(a.is_empty(), "{a:?}");
    assert_eq!(c.stats().screened, 1);
    assert_eq!(c.stats().track_requests, 0);
}

#[test]
fn a_key_one_interval_favoured_waits_for_a_second() {
    assert_eq!(PolicyConfig::default().lead_intervals, 2);
    let mut c = Coordinator::new(lead()).unwrap();
    // 40 accesses in an interval: significant, but below 100/s.
    assert!(migrations(&c.step(1_000, report(3, &[(7, 0, 40)]))).is_empty());
    assert_eq!(c.stats().brief, 1);
    // The next interval's report continues the run: it moves.
    assert_eq!(
        migrations(&c.step(2_000, report(3, &[(7, 0, 40)]))),
        vec![(7, 0, 3)]
    );
}

#[test]
fn a_gap_or_a_quiet_interval_starts_the_lead_again() {
    let mut c = Coordinator::new(lead()).unwrap();
    c.step(1_000, report(3, &[(7, 0, 40)]));
    // Not reported at 2 s (fewer than the monitor reports): a gap.
    assert!(migrations(&c.step(3_000, report(3, &[(7, 0, 40)]))).is_empty());
    // Reported, but below count_min: the run ends.
    c.step(4_000, report(3, &[(7, 0, 3)]));
    assert!(migrations(&c.step(5_000, report(3, &[(7, 0, 40)]))).is_empty());
    assert_eq!(c.stats().brief, 3);
    assert_eq!(
        migrations(&c.step(6_000, report(3, &[(7, 0, 40)]))),
        vec![(7, 0, 3)]
    );
}

#[test]
fn a_key_hot_over_a_whole_interval_moves_at_once() {
    let mut c = Coordinator::new(lead()).unwrap();
    // 150 accesses in a 1 s report: Pragh 6.4's 100/s.
    assert_eq!(
        migrations(&c.step(1_000, report(3, &[(7, 0, 150)]))),
        vec![(7, 0, 3)]
    );
    // An instant report as fast, after 300 ms of its interval, is not a
    // whole interval: it waits for the lead.
    let hot = Event::Hot {
        machine: 4,
        elapsed_ms: 300,
        access: Access {
            key: Key(8),
            holder: 0,
            count: 60,
        },
    };
    assert!(migrations(&c.step(1_300, hot)).is_empty());
    assert_eq!(c.stats().brief, 1);
    // Its periodic report at the interval's end covers the same interval;
    // the next one makes two.
    assert!(migrations(&c.step(2_000, report(4, &[(8, 0, 90)]))).is_empty());
    assert_eq!(c.stats().brief, 2);
    assert_eq!(
        migrations(&c.step(3_000, report(4, &[(8, 0, 90)]))),
        vec![(8, 0, 4)]
    );
}

#[test]
fn a_lead_of_no_intervals_is_refused() {
    let e = Coordinator::new(PolicyConfig {
        lead_intervals: 0,
        ..lead()
    })
    .unwrap_err();
    assert!(e.to_string().contains("lead_intervals"), "{e}");
}

#[test]
fn an_applicant_waiting_out_its_lead_gets_no_replica() {
    let mut c = Coordinator::new(PolicyConfig {
        replicas: true,
        replica_rate_min_per_s: 10.0,
        ..lead()
    })
    .unwrap();
    // Machine 3 reads key 8 at 60/s, machine 5 at 20/s: 3 is the applicant
    // and waits; 5, a busy reader that will not get the value, gets a copy.
    let mut a = c.step(1_000, report(5, &[(8, 0, 20)]));
    a.extend(c.step(1_000, report(3, &[(8, 0, 60)])));
    assert!(migrations(&a).is_empty(), "{a:?}");
    assert_eq!(replicas(&a), vec![(8, 5)]);
    // A second interval: the value moves to 3, still no replica there.
    let a = c.step(2_000, report(3, &[(8, 0, 60)]));
    assert_eq!(migrations(&a), vec![(8, 0, 3)]);
    assert!(replicas(&a).is_empty(), "{a:?}");
}

#[test]
fn a_report_of_exactly_count_min_accesses_is_busy_whatever_its_length() {
    let mut c = Coordinator::new(lead()).unwrap();
    // 8 accesses over 906 ms: 8 / 0.906 * 0.906 rounds a hair below 8.
    let first = Event::Report {
        machine: 3,
        interval_ms: 906,
        accesses: vec![Access {
            key: Key(7),
            holder: 0,
            count: 8,
        }],
    };
    c.step(906, first);
    // The next interval continues the run the first began: the key moves.
    assert_eq!(
        migrations(&c.step(1_906, report(3, &[(7, 0, 40)]))),
        vec![(7, 0, 3)]
    );
}

#[test]
fn a_rival_too_quiet_to_be_reported_is_weighed_at_the_most_it_can_have_counted() {
    assert_eq!(PolicyConfig::default().report_count_min, 8);
    let mut c = Coordinator::new(eager()).unwrap();
    // 24 accesses and no other machine reported: each may have counted up
    // to 7 unseen, and 24 against 7 is within noise (4 sigma of 31).
    assert!(migrations(&c.step(1_000, report(3, &[(7, 0, 24)]))).is_empty());
    assert_eq!(c.stats().screened, 1);
    // 40 against 7 is not.
    assert_eq!(
        migrations(&c.step(1_000, report(3, &[(8, 0, 40)]))),
        vec![(8, 0, 3)]
    );
    // With every count reported, nothing is unseen: 24 against none moves.
    let all = PolicyConfig {
        report_count_min: 1,
        ..eager()
    };
    let mut c = Coordinator::new(all).unwrap();
    assert_eq!(
        migrations(&c.step(1_000, report(3, &[(7, 0, 24)]))),
        vec![(7, 0, 3)]
    );
    let e = Coordinator::new(PolicyConfig {
        report_count_min: 0,
        ..eager()
    })
    .expect_err("refused");
    assert!(
        matches!(
            e,
            CoordinatorError::InvalidSetting {
                field: "report_count_min",
                ..
            }
        ),
        "{e:?}"
    );
}

/// A value its home reads most, moved away on eager mode's guess that the
/// untracked home is idle, comes back and then stays: the home's rate from
/// its remote reads is kept, and once stale the home is tracked before the
/// value leaves again ("Return home" in the policy's doc).
#[test]
fn a_value_back_at_its_home_is_not_guessed_idle_again() {
    let mut c = Coordinator::new(eager()).unwrap();
    let moved = |c: &mut Coordinator, at: u64, to: u8| {
        c.step(
            at,
            Event::Migrated {
                key: Key(1),
                to,
                ok: true,
            },
        );
    };
    // Home 0 holds key 1; machine 3 reads it and the guess moves it there.
    assert_eq!(
        migrations(&c.step(0, report(3, &[(1, 0, 200)]))),
        vec![(1, 0, 3)]
    );
    moved(&mut c, 10, 3);
    // The home reads it remotely far more often: back after the dwell.
    c.step(1_100, report(3, &[(1, 3, 200)]));
    assert_eq!(
        migrations(&c.step(1_200, report(0, &[(1, 3, 900)]))),
        vec![(1, 3, 0)]
    );
    moved(&mut c, 1_210, 0);
    // The home's report whose window began before the value came back
    // counts only its remote reads until then, and names the old holder:
    // neither replaces what is known.
    c.step(2_000, report(0, &[(1, 3, 90)]));
    assert_eq!(c.holder(Key(1)), Some(0));
    // Machine 3 reports as before after the dwell: the home's 900/s is
    // known, 200/s does not beat it, and the value stays.
    let a = c.step(2_300, report(3, &[(1, 0, 200)]));
    assert!(migrations(&a).is_empty(), "{a:?}");
    assert!(
        !a.iter().any(|x| matches!(x, Action::Track { .. })),
        "{a:?}"
    );
    // Once the home's rate is stale, the home is tracked first ...
    let a = c.step(4_300, report(3, &[(1, 0, 200)]));
    assert_eq!(
        a,
        vec![Action::Track {
            machine: 0,
            keys: vec![Key(1)]
        }]
    );
    assert_eq!(
        c.step(5_300, Event::Tick),
        vec![Action::Collect { machine: 0 }]
    );
    // ... and its own count decides: still busy, the value stays.
    let a = c.step(5_301, tracked(0, &[(1, 850)]));
    assert!(migrations(&a).is_empty(), "{a:?}");
    // Had the home stopped reading it, it would go.
    let a = c.step(6_400, report(3, &[(1, 0, 200)]));
    assert!(
        migrations(&a).is_empty(),
        "the home's 850/s is fresh: {a:?}"
    );
    let a = c.step(8_400, report(3, &[(1, 0, 200)]));
    assert!(
        matches!(a.as_slice(), [Action::Track { machine: 0, .. }]),
        "{a:?}"
    );
    c.step(9_400, Event::Tick);
    let a = c.step(9_401, tracked(0, &[(1, 5)]));
    assert_eq!(migrations(&a), vec![(1, 0, 3)]);
}

/// Stop 49's start-up race: the first key to reach the hot count on any
/// machine came before every other machine's first report and was judged
/// against nobody. The coordinator now listens for an interval first.
#[test]
fn a_fresh_coordinator_hears_every_machine_for_an_interval_before_moving_anything() {
    assert_eq!(PolicyConfig::default().listen_intervals, 1);
    let cfg = PolicyConfig {
        listen_intervals: 1,
        ..lead()
    };
    let hot = |machine, key, count| Event::Hot {
        machine,
        elapsed_ms: 956,
        access: Access {
            key: Key(key),
            holder: 2,
            count,
        },
    };
    let mut c = Coordinator::new(cfg.clone()).unwrap();
    // Machine 7 reads key 21 at 105/s over most of the first interval;
    // nobody else has reported anything yet.
    assert!(migrations(&c.step(956, hot(7, 21, 100))).is_empty());
    assert_eq!(c.stats().listening, 1);
    // The first periodic reports: every machine read key 21 about as often.
    for m in 0..8u8 {
        let reads = if m == 7 { 105 } else { 70 };
        assert!(migrations(&c.step(1_000, report(m, &[(21, 2, reads)]))).is_empty());
    }
    // A key only machine 5 reads moves once the coordinator has listened
    // an interval, and the evenly read one stays where it is.
    assert!(migrations(&c.step(1_500, hot(5, 33, 140))).is_empty());
    assert_eq!(
        migrations(&c.step(2_000, report(5, &[(33, 2, 150)]))),
        vec![(33, 2, 5)]
    );
    for m in 0..8u8 {
        let reads = if m == 7 { 105 } else { 70 };
        assert!(migrations(&c.step(2_000, report(m, &[(21, 2, reads)]))).is_empty());
    }
    // Without listening, the first instant report moves key 21 at once.
    let mut hasty = Coordinator::new(PolicyConfig {
        listen_intervals: 0,
        ..cfg
    })
    .unwrap();
    assert_eq!(
        migrations(&hasty.step(956, hot(7, 21, 100))),
        vec![(21, 2, 7)]
    );
}
