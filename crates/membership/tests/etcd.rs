//! The membership facade against a real etcd started by each test (killed
//! when the test ends, pass or fail). Every wait is bounded.

use std::time::{Duration, Instant};

use locus_membership::{Etcd, EtcdConfig, MemberEvent, Membership};

fn connect(etcd: &Etcd, ttl: u64) -> Membership {
    Membership::connect(&EtcdConfig {
        endpoints: vec![etcd.endpoint()],
        prefix: "/test".into(),
        lease_ttl_s: ttl,
    })
    .unwrap()
}

/// The next event within `bound`, or a panic naming what was awaited.
fn next_event(w: &locus_membership::Watch, bound: Duration, what: &str) -> MemberEvent {
    w.events()
        .recv_timeout(bound)
        .unwrap_or_else(|_| panic!("no membership event within {bound:?}: waited for {what}"))
}

#[test]
fn registration_is_listed_and_epochs_increase_across_re_registration() {
    let etcd = Etcd::start_temp().unwrap();
    let m = connect(&etcd, 3);
    assert_eq!(m.last_epoch(1).unwrap(), 0);
    assert_eq!(m.last_registered(1).unwrap(), 0);
    let r1 = m.register(1, "fabric=127.0.0.1:1").unwrap();
    assert_eq!(r1.epoch(), 1);
    let r0 = m.register(0, "fabric=127.0.0.1:0").unwrap();
    assert_eq!(r0.epoch(), 1, "epochs are per machine");
    let (members, _) = m.members().unwrap();
    let got: Vec<_> = members.iter().map(|x| (x.machine, x.epoch)).collect();
    assert_eq!(got, vec![(0, 1), (1, 1)]);
    assert_eq!(members[1].info, "fabric=127.0.0.1:1");
    drop(r1); // revokes: machine 1 leaves at once
    let (members, _) = m.members().unwrap();
    assert_eq!(members.len(), 1);
    // A restart, from another connection (another process would do the same).
    let m2 = connect(&etcd, 3);
    let r1 = m2.register(1, "again").unwrap();
    assert_eq!(r1.epoch(), 2);
    let r1b = m2.register(1, "and again").unwrap();
    assert_eq!(r1b.epoch(), 3);
    assert_eq!(m.last_epoch(1).unwrap(), 3);
    // An epoch taken before recovery, superseded before it registered: fenced.
    let e = m.reserve_epoch(1).unwrap();
    assert_eq!(e, 4);
    assert_eq!(m.last_registered(1).unwrap(), 3, "epoch 4 is only taken");
    let later = m2.register(1, "a faster incarnation").unwrap();
    assert_eq!(later.epoch(), 5);
    assert_eq!(m.last_registered(1).unwrap(), 5);
    let err = m.register_at(1, e, "too late").unwrap_err().to_string();
    assert!(err.contains("epoch 4 was superseded by epoch 5"), "{err}");
    let (members, _) = m.members().unwrap();
    assert_eq!(
        members.iter().find(|x| x.machine == 1).unwrap().epoch,
        5,
        "the newest incarnation owns the member key"
    );
}

#[test]
fn a_kept_alive_lease_outlives_its_ttl_and_an_abandoned_one_expires_within_a_bound() {
    let etcd = Etcd::start_temp().unwrap();
    let m = connect(&etcd, 1);
    let observer = connect(&etcd, 1);
    let kept = m.register(2, "kept").unwrap();
    let abandoned = m.register(3, "abandoned").unwrap();
    let (members, watch) = observer.watch().unwrap();
    assert_eq!(members.len(), 2);
    abandoned.lease().stop_renewing();
    let t0 = Instant::now();
    // etcd expires a lease within about its TTL (1 s); allow a loaded machine 10 s.
    let ev = next_event(&watch, Duration::from_secs(10), "machine 3's expiry");
    assert_eq!(
        ev,
        MemberEvent::PeerDown {
            machine: 3,
            epoch: 1
        }
    );
    let detected = t0.elapsed();
    assert!(
        detected >= Duration::from_millis(500),
        "expired after only {detected:?}"
    );
    assert!(!abandoned.is_live(), "the holder knows too (invariant 3)");
    // The kept one has now lived well past its TTL.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(kept.is_live());
    let (members, _) = observer.members().unwrap();
    assert_eq!(
        members.iter().map(|x| x.machine).collect::<Vec<_>>(),
        vec![2]
    );
    assert!(
        watch.events().try_recv().is_err(),
        "no event for the kept member"
    );
}

#[test]
fn a_revoked_lease_is_reported_lost_to_its_holder() {
    let etcd = Etcd::start_temp().unwrap();
    let m = connect(&etcd, 2);
    let r = m.register(4, "").unwrap();
    // Someone else ends the lease (as etcd does on expiry).
    let other = connect(&etcd, 2);
    other.revoke_lease_for_tests(r.lease().id()).unwrap();
    let reason = r
        .lost()
        .recv_timeout(Duration::from_secs(10))
        .expect("the keepalive reports the loss within 10 s");
    assert!(reason.contains("expired"), "{reason}");
    assert!(!r.is_live());
}

#[test]
fn a_re_registration_seen_without_an_expiry_yields_down_of_the_old_epoch_first() {
    let etcd = Etcd::start_temp().unwrap();
    let m = connect(&etcd, 3);
    let observer = connect(&etcd, 3);
    let (members, watch) = observer.watch().unwrap();
    assert!(members.is_empty());
    let old = m.register(5, "old").unwrap();
    assert_eq!(
        next_event(&watch, Duration::from_secs(10), "PeerUp 5"),
        MemberEvent::PeerUp {
            machine: 5,
            epoch: 1
        }
    );
    let new = m.register(5, "new").unwrap(); // the old one never expired
    assert_eq!(
        next_event(&watch, Duration::from_secs(10), "PeerDown 5@1"),
        MemberEvent::PeerDown {
            machine: 5,
            epoch: 1
        }
    );
    assert_eq!(
        next_event(&watch, Duration::from_secs(10), "PeerUp 5@2"),
        MemberEvent::PeerUp {
            machine: 5,
            epoch: 2
        }
    );
    // The old lease ending later does not remove the new incarnation.
    drop(old);
    std::thread::sleep(Duration::from_millis(500));
    assert!(watch.events().try_recv().is_err());
    assert_eq!(observer.members().unwrap().0[0].epoch, 2);
    drop(new);
    assert_eq!(
        next_event(&watch, Duration::from_secs(10), "PeerDown 5@2"),
        MemberEvent::PeerDown {
            machine: 5,
            epoch: 2
        }
    );
}

#[test]
fn the_standby_leads_when_the_leader_stops_renewing() {
    let etcd = Etcd::start_temp().unwrap();
    let a = connect(&etcd, 1);
    let b = connect(&etcd, 1);
    assert_eq!(a.leader().unwrap(), None);
    let lead = a.campaign("127.0.0.1:1111", &|| false).unwrap().unwrap();
    let first = a.leader().unwrap().unwrap();
    assert_eq!(first.value, "127.0.0.1:1111");
    assert_eq!(first.term, lead.term());
    let standby = std::thread::spawn(move || {
        let l = b.campaign("127.0.0.1:2222", &|| false).unwrap().unwrap();
        (l, Instant::now(), b)
    });
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        !standby.is_finished(),
        "the standby leads while the leader lives"
    );
    assert_eq!(a.leader().unwrap().unwrap().value, "127.0.0.1:1111");
    let killed = Instant::now();
    lead.stop_renewing(); // as kill -9 would
    let t0 = Instant::now();
    while !standby.is_finished() {
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "no takeover within 15 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (second, at, _b) = standby.join().unwrap();
    println!("takeover after {:?}", at - killed);
    let now = a.leader().unwrap().unwrap();
    assert_eq!(now.value, "127.0.0.1:2222");
    assert!(second.term() > first.term, "the term advanced");
    assert_eq!(now.term, second.term());
}

#[test]
fn a_campaign_can_be_abandoned() {
    let etcd = Etcd::start_temp().unwrap();
    let a = connect(&etcd, 2);
    let _lead = a.campaign("x", &|| false).unwrap().unwrap();
    let t0 = Instant::now();
    let stop = move || t0.elapsed() > Duration::from_millis(1200);
    assert!(a.campaign("y", &stop).unwrap().is_none());
}

#[test]
fn the_record_round_trips_in_batches_larger_than_one_transaction() {
    let etcd = Etcd::start_temp().unwrap();
    let m = connect(&etcd, 3);
    assert!(m.record_load().unwrap().is_empty());
    let batch: Vec<(u64, u8)> = (0..300u64).map(|k| (k * 7919, (k % 3) as u8)).collect();
    m.record_persist(&batch).unwrap();
    m.record_persist(&[(7919, 2), (u64::MAX, 1)]).unwrap();
    let mut want = batch.clone();
    want[1].1 = 2;
    want.push((u64::MAX, 1));
    want.sort();
    // From another connection, as a standby would.
    let other = connect(&etcd, 3);
    assert_eq!(other.record_load().unwrap(), want);
    let to2: Vec<u64> = want.iter().filter(|e| e.1 == 2).map(|e| e.0).collect();
    assert_eq!(other.record_keys_targeting(2).unwrap(), to2);
    assert!(to2.contains(&7919));
}

#[test]
fn bad_settings_and_a_dead_endpoint_are_named() {
    let cfg = EtcdConfig {
        endpoints: vec!["http://127.0.0.1:1".into()],
        prefix: "/locus".into(),
        lease_ttl_s: 3,
    };
    let e = Membership::connect(&EtcdConfig {
        lease_ttl_s: 0,
        ..cfg.clone()
    })
    .unwrap_err();
    assert!(e.to_string().contains("lease_ttl_s"), "{e}");
    let e = Membership::connect(&EtcdConfig {
        prefix: "locus/".into(),
        ..cfg.clone()
    })
    .unwrap_err();
    assert!(e.to_string().contains("prefix"), "{e}");
    let e = Membership::connect(&cfg).unwrap_err();
    assert!(e.to_string().contains("127.0.0.1:1"), "{e}");
}
