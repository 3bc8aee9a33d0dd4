//! The fencing checks of the suite: the rules of `fencing.rs`, the same on
//! every fabric (on TCP, checked at HELLO and per request; in process, at
//! every operation). Each check uses machines 0, 1 and 2 only so that it also
//! holds where machines 1 and 2 share a TCP node (one table, one incarnation).

use super::{drain, port, region_on, Cluster};
use crate::{
    Fabric, FabricError, Fencing, MachineId, Output, PeerEpoch, Port, RegionId, Result, WorkRequest,
};

/// Machine 0 at epoch 3 and machine 1 at epoch 4, each knowing the other.
fn matching_epochs<C: Cluster>(c: &C)
where
    C::F: Fencing,
{
    c.node(0).set_own_epoch(0, 3).unwrap();
    c.node(1).set_own_epoch(1, 4).unwrap();
    c.node(0).set_peer_epoch(0, 1, 4).unwrap();
    c.node(1).set_peer_epoch(1, 0, 3).unwrap();
}

/// The reason of a `PeerUnavailable` naming `machine`; panics on anything else.
fn refusal<T: std::fmt::Debug>(r: Result<T>, machine: MachineId, what: &str) -> String {
    match r {
        Err(FabricError::PeerUnavailable { machine: m, reason }) if m == machine => reason,
        other => panic!("{what}: expected PeerUnavailable naming machine {machine}, got {other:?}"),
    }
}

/// Every kind of operation of `p` on region `r` of `to` (each verb, executed
/// and posted, and a message) fails with `PeerUnavailable` naming `to`, for a
/// reason that contains each of `words`.
fn refused_every_way<P: Port>(p: &mut P, to: MachineId, r: RegionId, words: &[&str]) {
    let mut reasons = vec![
        refusal(p.read_word(to, r, 0), to, "READ"),
        refusal(p.write_word(to, r, 0, 99), to, "WRITE"),
        refusal(p.cas(to, r, 0, 0, 99), to, "CAS"),
        refusal(p.fetch_add(to, r, 8, 1), to, "fetch-add"),
        refusal(
            p.execute(WorkRequest::read(0, to, r, 0, 8)),
            to,
            "executed READ",
        ),
        refusal(p.send(to, b"fenced?"), to, "SEND"),
    ];
    p.post(WorkRequest::write(7, to, r, 0, vec![9; 8])).unwrap();
    let done = drain(p, 1);
    assert_eq!(done[0].id, 7);
    reasons.push(refusal(done[0].result.clone(), to, "posted WRITE"));
    for why in reasons {
        for w in words {
            assert!(why.contains(w), "the reason does not say {w:?}: {why}");
        }
    }
}

/// Operations and a message of `p` to `to` are served.
fn served<P: Port>(p: &mut P, to: MachineId, r: RegionId, word: u64) {
    p.write_word(to, r, 0, word).unwrap();
    assert_eq!(p.read_word(to, r, 0).unwrap(), word);
    p.post(WorkRequest::read(1, to, r, 0, 8)).unwrap();
    let done = drain(p, 1);
    assert_eq!(
        done[0].result,
        Ok(Output::Data(word.to_le_bytes().to_vec()))
    );
    p.check_peer(to).unwrap();
}

/// With every epoch 0 (no membership) nothing is refused; matching epochs
/// set on both sides change nothing either, and read back as set.
pub fn epochs_zero_change_nothing<C: Cluster>(c: &C)
where
    C::F: Fencing,
{
    for m in 0..3 {
        let f = c.node(m);
        assert_eq!(f.own_epoch(m).unwrap(), 0);
        assert!(!f.is_fenced(m).unwrap());
        for peer in 0..3 {
            assert_eq!(f.peer_epoch(m, peer).unwrap(), PeerEpoch::default());
        }
    }
    let r0 = region_on(c, 0, "fence-zero", 64);
    let r1 = region_on(c, 1, "fence-zero", 64);
    let (mut p0, mut p1) = (port(c, 0), port(c, 1));
    served(&mut p0, 1, r1, 5);
    served(&mut p1, 0, r0, 6);
    served(&mut p0, 0, r0, 7);
    p0.send(1, b"zero").unwrap();
    let m = p1
        .recv_timeout(std::time::Duration::from_secs(10))
        .unwrap()
        .expect("the message");
    assert_eq!((m.from, &m.payload[..]), (0, &b"zero"[..]));
    matching_epochs(c);
    assert_eq!(c.node(0).own_epoch(0).unwrap(), 3);
    assert_eq!(
        c.node(1).peer_epoch(1, 0).unwrap(),
        PeerEpoch {
            epoch: 3,
            down: false
        }
    );
    served(&mut p0, 1, r1, 8);
    served(&mut p1, 0, r0, 9);
    p1.send(0, b"epochs").unwrap();
    let m = p0
        .recv_timeout(std::time::Duration::from_secs(10))
        .unwrap()
        .expect("the message");
    assert_eq!((m.from, &m.payload[..]), (1, &b"epochs"[..]));
}

/// A requester older than the epoch its target knows for it (an
/// incarnation that was replaced) is refused at the target, naming both
/// epochs, and changes nothing there; at the epoch the target knows to be
/// down, too. Other machines are still served.
pub fn a_stale_requester_is_refused<C: Cluster>(c: &C)
where
    C::F: Fencing,
{
    matching_epochs(c);
    let r1 = region_on(c, 1, "fence-stale", 64);
    let mut p1 = port(c, 1);
    p1.write_word(1, r1, 0, 7).unwrap();
    // Machine 0 restarted elsewhere at epoch 5: this machine 0, at 3, is its old incarnation.
    c.node(1).set_peer_epoch(1, 0, 5).unwrap();
    let mut p0 = port(c, 0);
    refused_every_way(&mut p0, 1, r1, &["machine 0 at epoch 3", "epoch 5"]);
    assert_eq!(p1.read_word(1, r1, 0).unwrap(), 7, "a refused WRITE wrote");
    assert_eq!(
        p1.read_word(1, r1, 8).unwrap(),
        0,
        "a refused fetch-add added"
    );
    assert_eq!(p1.try_recv().unwrap(), None, "a refused message arrived");
    c.node(1).mark_down(1, 0, 3).unwrap();
    refused_every_way(&mut p0, 1, r1, &["machine 0 at epoch 3", "down"]);
    let mut p2 = port(c, 2);
    served(&mut p2, 1, r1, 11);
}

/// A newer incarnation of a requester is admitted, before its target has
/// heard of it (over the one marked down) and after; before, it reads and
/// sends but changes nothing there (rule 3: no WRITE, CAS or fetch-add).
pub fn a_newer_incarnation_is_admitted<C: Cluster>(c: &C)
where
    C::F: Fencing,
{
    matching_epochs(c);
    let r1 = region_on(c, 1, "fence-newer", 64);
    let mut p1 = port(c, 1);
    p1.write_word(1, r1, 0, 11).unwrap();
    c.node(1).mark_down(1, 0, 3).unwrap();
    let mut p0 = port(c, 0);
    refusal(p0.read_word(1, r1, 0), 1, "the incarnation marked down");
    c.node(0).set_own_epoch(0, 6).unwrap();
    assert_eq!(p0.read_word(1, r1, 0).unwrap(), 11);
    p0.post(WorkRequest::read(1, 1, r1, 0, 8)).unwrap();
    assert_eq!(
        drain(&mut p0, 1)[0].result,
        Ok(Output::Data(11u64.to_le_bytes().to_vec()))
    );
    p0.check_peer(1).unwrap();
    let newer = ["machine 0 at epoch 6", "newer", "epoch 3"];
    let mut reasons = vec![
        refusal(p0.write_word(1, r1, 0, 99), 1, "WRITE"),
        refusal(p0.cas(1, r1, 0, 11, 99), 1, "CAS"),
        refusal(p0.fetch_add(1, r1, 8, 1), 1, "fetch-add"),
    ];
    p0.post(WorkRequest::write(7, 1, r1, 0, vec![9; 8]))
        .unwrap();
    reasons.push(refusal(
        drain(&mut p0, 1)[0].result.clone(),
        1,
        "posted WRITE",
    ));
    for why in reasons {
        for w in newer {
            assert!(why.contains(w), "the reason does not say {w:?}: {why}");
        }
    }
    assert_eq!(p1.read_word(1, r1, 0).unwrap(), 11, "a refused write wrote");
    assert_eq!(
        p1.read_word(1, r1, 8).unwrap(),
        0,
        "a refused fetch-add added"
    );
    c.node(1).set_peer_epoch(1, 0, 6).unwrap();
    served(&mut p0, 1, r1, 13);
    let mut fresh = port(c, 0);
    served(&mut fresh, 1, r1, 14);
}

/// A recovering machine (from [`Fencing::hold_peers`] to
/// [`Fencing::serve_peers`]) serves no peer's READ, WRITE, CAS or fetch-add
/// of its memory, even one that expects no epoch (rule 4), and changes
/// nothing; messages reach it and its own operations go on; once it serves
/// peers again, everything is served.
pub fn a_recovering_machine_holds_its_memory<C: Cluster>(c: &C)
where
    C::F: Fencing,
{
    matching_epochs(c);
    let r1 = region_on(c, 1, "fence-recovering", 64);
    let mut p1 = port(c, 1);
    p1.write_word(1, r1, 0, 21).unwrap();
    c.node(1).hold_peers(1).unwrap();
    let mut p0 = port(c, 0);
    c.node(0).set_peer_epoch(0, 1, 0).unwrap();
    let mut reasons = vec![
        refusal(p0.read_word(1, r1, 0), 1, "READ"),
        refusal(p0.write_word(1, r1, 0, 99), 1, "WRITE"),
        refusal(p0.cas(1, r1, 0, 21, 99), 1, "CAS"),
        refusal(p0.fetch_add(1, r1, 8, 1), 1, "fetch-add"),
    ];
    p0.post(WorkRequest::read(3, 1, r1, 0, 8)).unwrap();
    reasons.push(refusal(
        drain(&mut p0, 1)[0].result.clone(),
        1,
        "posted READ",
    ));
    for why in reasons {
        assert!(
            why.contains("recovering") && why.contains("epoch 4"),
            "the reason does not say recovering at epoch 4: {why}"
        );
    }
    assert_eq!(p1.read_word(1, r1, 0).unwrap(), 21, "a refused write wrote");
    assert_eq!(
        p1.read_word(1, r1, 8).unwrap(),
        0,
        "a refused fetch-add added"
    );
    p0.send(1, b"hello").unwrap();
    let m = p1
        .recv_timeout(std::time::Duration::from_secs(10))
        .unwrap()
        .expect("a message reaches a recovering machine");
    assert_eq!((m.from, &m.payload[..]), (0, &b"hello"[..]));
    c.node(1).serve_peers(1).unwrap();
    served(&mut p0, 1, r1, 22);
}

/// Operations (and messages) to a machine marked down fail at once with
/// `PeerUnavailable` naming it and its epoch; other machines are served;
/// once it rejoins at a newer epoch it is served again.
pub fn an_op_to_a_peer_marked_down_fails_naming_machine_and_epoch<C: Cluster>(c: &C)
where
    C::F: Fencing,
{
    matching_epochs(c);
    let r1 = region_on(c, 1, "fence-down", 64);
    let r2 = region_on(c, 2, "fence-down", 64);
    let mut p0 = port(c, 0);
    served(&mut p0, 1, r1, 1);
    c.node(0).mark_down(0, 1, 4).unwrap();
    assert_eq!(
        c.node(0).peer_epoch(0, 1).unwrap(),
        PeerEpoch {
            epoch: 4,
            down: true
        }
    );
    let why = refusal(p0.check_peer(1), 1, "check_peer");
    assert!(
        why.contains("machine 1 is down") && why.contains("epoch 4"),
        "{why}"
    );
    refused_every_way(&mut p0, 1, r1, &["machine 1 is down", "epoch 4"]);
    served(&mut p0, 2, r2, 2);
    c.node(1).set_own_epoch(1, 5).unwrap();
    c.node(0).set_peer_epoch(0, 1, 5).unwrap();
    served(&mut p0, 1, r1, 3);
}

/// A requester whose view of its target is stale (it expects another
/// incarnation) is refused, naming both epochs, until its view is current.
pub fn a_stale_view_of_the_target_is_refused<C: Cluster>(c: &C)
where
    C::F: Fencing,
{
    matching_epochs(c);
    let r1 = region_on(c, 1, "fence-view", 64);
    c.node(0).set_peer_epoch(0, 1, 2).unwrap();
    let mut p0 = port(c, 0);
    refused_every_way(&mut p0, 1, r1, &["expects", "at epoch 2", "at epoch 4"]);
    c.node(0).set_peer_epoch(0, 1, 4).unwrap();
    served(&mut p0, 1, r1, 4);
}

/// A fenced machine serves no peer's operation or message, issues none
/// (not even to its own memory, nor takes messages), through ports opened
/// before and after; setting its epoch does not unfence it; the others go on.
pub fn a_fenced_machine_serves_nothing_and_issues_nothing<C: Cluster>(c: &C)
where
    C::F: Fencing,
{
    matching_epochs(c);
    let r0 = region_on(c, 0, "fenced", 64);
    let r1 = region_on(c, 1, "fenced", 64);
    let r2 = region_on(c, 2, "fenced", 64);
    let (mut p0, mut p1) = (port(c, 0), port(c, 1));
    served(&mut p1, 0, r0, 1);
    c.node(0).fence(0).unwrap();
    assert!(c.node(0).is_fenced(0).unwrap());
    assert!(!c.node(1).is_fenced(1).unwrap());
    refused_every_way(&mut p1, 0, r0, &["fenced", "epoch 3"]);
    refused_every_way(&mut p0, 1, r1, &["fenced", "epoch 3"]);
    refused_every_way(&mut p0, 0, r0, &["fenced"]);
    refusal(p0.try_recv(), 0, "try_recv on the fenced machine");
    let mut later = port(c, 0);
    refused_every_way(&mut later, 1, r1, &["fenced"]);
    c.node(0).set_own_epoch(0, 9).unwrap();
    assert!(c.node(0).is_fenced(0).unwrap(), "a new epoch unfenced it");
    refusal(p1.read_word(0, r0, 0), 0, "after a new epoch");
    served(&mut p1, 2, r2, 2);
    p1.send(2, b"alive").unwrap();
    let m = port(c, 2)
        .recv_timeout(std::time::Duration::from_secs(10))
        .unwrap()
        .expect("the message");
    assert_eq!((m.from, &m.payload[..]), (1, &b"alive"[..]));
}

/// Fencing names hosted machines only: one outside the cluster is
/// `NoSuchMachine`, one of another process (or node view) `NotHosted`.
pub fn fencing_names_hosted_machines_only<C: Cluster>(c: &C)
where
    C::F: Fencing,
{
    let n = c.machines() as MachineId;
    let f = c.node(0);
    assert!(matches!(
        f.own_epoch(n),
        Err(FabricError::NoSuchMachine { machine, .. }) if machine == n
    ));
    assert!(matches!(f.fence(n), Err(FabricError::NoSuchMachine { .. })));
    assert!(matches!(
        f.peer_epoch(0, n),
        Err(FabricError::NoSuchMachine { .. })
    ));
    assert!(matches!(
        f.set_peer_epoch(0, n, 1),
        Err(FabricError::NoSuchMachine { .. })
    ));
    for at in 0..n {
        for me in 0..n {
            let f = c.node(at);
            if f.hosts(me) {
                assert!(f.own_epoch(me).is_ok());
            } else {
                assert_eq!(f.own_epoch(me), Err(FabricError::NotHosted { machine: me }));
                assert_eq!(f.fence(me), Err(FabricError::NotHosted { machine: me }));
                assert!(!c.node(me).is_fenced(me).unwrap(), "fenced from elsewhere");
            }
        }
    }
}
