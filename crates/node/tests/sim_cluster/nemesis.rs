//! The simulated twin's nemesis (one fault on one node per seed) and its
//! simulated membership (each node's member actor); see `sim_cluster.rs`.

use std::sync::atomic::Ordering;

use locus_fabric::sim::{SimFabric, SimRng};
use locus_fabric::{Fabric, Fencing, MachineId, Port};
use locus_node::member::{self, MembershipStore};
use locus_wal::Crash;

use super::{Coverage, Fault, Shared, CLIENTS_PER_NODE, MACHINES};

/// Set (to anything) to draw `Fault::CrashTwice` too in the replicated
/// scenario.
const CRASH_TWICE_ENV: &str = "LOCUS_SIM_CRASH_TWICE";

/// Kills node `m`: the process is gone, its replies are lost, its memory
/// dropped, its disk keeps what this crash keeps.
pub(crate) fn kill_one(s: &Shared, m: MachineId, how: Crash) {
    let slot = &s.slots[m as usize];
    slot.generation.fetch_add(1, Ordering::AcqRel);
    *slot.node.lock().unwrap() = None;
    s.fabric.crash(m).expect("crash");
    let mut disk = slot.disk.lock().unwrap();
    *disk = disk.crash(how);
}

/// Starts node `m` again: a newer epoch (M1), recovery from its disk (N3);
/// the caller joins it.
pub(crate) fn restart(s: &Shared, m: MachineId) -> std::sync::Arc<locus_node::Node<SimFabric>> {
    let epoch = s
        .membership
        .reserve_epoch(m)
        .unwrap_or_else(|e| panic!("seed {}: epoch: {e}", s.seed));
    s.start_node(m, epoch)
        .unwrap_or_else(|e| panic!("seed {}: restart: {e}", s.seed))
}

/// The nemesis and the simulated membership: one fault on one node.
pub(crate) fn nemesis(f: &SimFabric, s: &Shared, mut rng: SimRng) {
    let mut victim = rng.below(MACHINES as u64) as MachineId;
    // `Fault::CrashTwice` is drawn only when asked for: it fails seeds
    // not yet diagnosed (docs/design.md, "Replication and failover").
    let kinds = match (s.replicated, std::env::var_os(CRASH_TWICE_ENV).is_some()) {
        (false, _) => 4,
        (true, false) => 5,
        (true, true) => 6,
    };
    let fault = match rng.below(kinds) {
        0 => Fault::Crash(Crash::ProcessCrash),
        1 => Fault::Crash(Crash::PowerLoss),
        2 => Fault::Crash(Crash::PowerLossTorn {
            seed: rng.next_u64(),
        }),
        3 => Fault::LeaseLost,
        4 => Fault::BackupRestarting,
        _ => Fault::CrashTwice,
    };
    let other = (victim + 1) % MACHINES as MachineId;
    let mut port = f.port(other).expect("a port");
    super::wait_loaded(s, &mut port);
    let wait = |port: &mut <SimFabric as Fabric>::Port, rng: &mut SimRng, n: u64| {
        for _ in 0..rng.below(n) {
            port.relax();
        }
    };
    wait(&mut port, &mut rng, 300);
    let mut hunted = 0;
    if s.hunt != super::Hunt::No {
        // Strike a handed slot's old or new home, between HAND and the
        // commit, if the mover hands one soon.
        for _ in 0..20_000 {
            if let Some((_, a, b)) = *s.handed.lock().unwrap() {
                victim = if rng.below(2) == 0 { a } else { b };
                hunted = 1;
                break;
            }
            port.relax();
        }
        if victim == other {
            port = f
                .port((victim + 1) % MACHINES as MachineId)
                .expect("a port");
        }
    }
    // A node not started yet (the mover adds it) is waited for.
    while s.node(victim).is_none() {
        port.relax();
    }
    let mut cov = Coverage {
        hunted,
        ..Coverage::default()
    };
    let me = MACHINES * CLIENTS_PER_NODE;
    s.doing(me, format!("{fault:?} of m{victim}"));
    let kill = |s: &Shared, how: Crash| kill_one(s, victim, how);
    // The first backup of a slot the victim owns.
    let backup = {
        let t = s.table.lock().unwrap();
        (0..t.slots())
            .find(|&sl| t.owner_of_slot(sl) == Some(victim))
            .and_then(|sl| t.backups_of_slot(sl).first().copied())
    };
    match fault {
        Fault::Crash(how) => {
            kill(s, how);
            cov.crashes += 1;
        }
        Fault::BackupRestarting => {
            kill(s, Crash::ProcessCrash);
            cov.crashes += 1;
        }
        Fault::CrashTwice => {
            kill(s, Crash::ProcessCrash);
            cov.crashes += 1;
            wait(&mut port, &mut rng, 100);
            s.membership.end_lease(victim);
            s.doing(
                me,
                format!("{fault:?} of m{victim}: back before a failover"),
            );
            let node = restart(s, victim);
            s.join(victim, node)
                .unwrap_or_else(|e| panic!("seed {}: rejoin: {e}", s.seed));
            cov.restarts += 1;
            wait(&mut port, &mut rng, 400);
            s.doing(me, format!("{fault:?} of m{victim}: dies again"));
            kill(s, Crash::ProcessCrash);
            cov.crashes += 1;
        }
        Fault::LeaseLost => {
            // Its lease ended: it learns so on its own clock, and must
            // answer nobody from now on (N1), though it runs on.
            if let Some((node, _)) = s.node(victim) {
                node.fence().expect("fence");
            }
            cov.fenced += 1;
        }
    }
    // Its lease ends (a TTL later): etcd's watchers, the survivors' member
    // actors, each learn it is down when their turn comes.
    wait(&mut port, &mut rng, 200);
    s.membership.end_lease(victim);
    if let (Fault::BackupRestarting, Some(b)) = (fault, backup) {
        // Its backup dies too, and comes back: replayed (by the table
        // before the failover), not joined when the failover commits, so
        // the driver's steps miss it; it joins after, by the newer table.
        wait(&mut port, &mut rng, 100);
        s.doing(me, format!("{fault:?} of m{victim}: m{b} dies too"));
        s.two_down.store(true, Ordering::Release);
        kill_one(s, b, Crash::ProcessCrash);
        s.membership.end_lease(b);
        wait(&mut port, &mut rng, 100);
        let node = restart(s, b);
        wait(&mut port, &mut rng, 100);
        s.doing(
            me,
            format!("{fault:?} of m{victim}: failing it over to m{b}"),
        );
        let (failed, pending) = super::failover::fail_over(s, &mut port, victim);
        cov.add(&failed);
        cov.to_restarting += 1;
        wait(&mut port, &mut rng, 100);
        s.doing(me, format!("{fault:?} of m{victim}: m{b} joins"));
        s.join(b, node)
            .unwrap_or_else(|e| panic!("seed {}: rejoin of m{b}: {e}", s.seed));
        cov.restarts += 1;
        // The failover's steps go on once the new primary is back.
        if let Some(p) = pending {
            wait(&mut port, &mut rng, 100);
            let done = super::failover::finish(s, &mut port, &p)
                .unwrap_or_else(|| panic!("seed {}: m{b} joined but is down", s.seed));
            cov.add(&done);
        }
        wait(&mut port, &mut rng, 150);
    } else if s.replicated {
        // Dead as far as the cluster knows (a fenced one still runs): its
        // slots fail over to their backups, and the clients go on a while
        // without it.
        wait(&mut port, &mut rng, 100);
        s.doing(me, format!("{fault:?} of m{victim}: failing it over"));
        let (failed, pending) = super::failover::fail_over(s, &mut port, victim);
        assert!(pending.is_none(), "seed {}: a new primary is down", s.seed);
        cov.add(&failed);
        wait(&mut port, &mut rng, 150);
    }
    if fault == Fault::LeaseLost {
        // Then it runs a while fenced, and is killed (its supervisor saw
        // the fence) and restarted.
        wait(&mut port, &mut rng, 200);
        kill(s, Crash::ProcessCrash);
    }
    wait(&mut port, &mut rng, 100);
    s.doing(me, format!("{fault:?} of m{victim}: restarting it"));
    // A newer epoch (M1), recovery from its disk (N3), then the server's
    // join: registered, its view of the peers set, the survivors told.
    let node = restart(s, victim);
    s.join(victim, node)
        .unwrap_or_else(|e| panic!("seed {}: rejoin: {e}", s.seed));
    cov.restarts += 1;
    if s.replicated {
        // It is made a backup again of the slots its failover left short;
        // then the primary of some of them dies in turn, and fails over
        // to it: what it learned (a copy and the updates during it) must
        // be every acknowledged write (R1, R3).
        wait(&mut port, &mut rng, 50);
        cov.add(&super::rejoin::rejoin(s, &mut port));
        let next = {
            let t = s.table.lock().unwrap();
            (0..t.slots())
                .find(|&sl| t.is_backup(sl, victim) && t.backups_of_slot(sl)[0] == victim)
                .and_then(|sl| t.owner_of_slot(sl))
        };
        if let Some(y) = next {
            if y == other {
                port = f.port(victim).expect("a port");
            }
            wait(&mut port, &mut rng, 50);
            s.doing(me, format!("{fault:?} of m{victim}: m{y} dies in turn"));
            kill_one(s, y, Crash::ProcessCrash);
            cov.crashes += 1;
            wait(&mut port, &mut rng, 50);
            s.membership.end_lease(y);
            wait(&mut port, &mut rng, 50);
            s.doing(me, format!("{fault:?} of m{victim}: failing m{y} over"));
            let (failed, pending) = super::failover::fail_over(s, &mut port, y);
            assert!(pending.is_none(), "seed {}: a new primary is down", s.seed);
            cov.to_rejoined += 1;
            cov.add(&failed);
            wait(&mut port, &mut rng, 100);
            s.doing(me, format!("{fault:?} of m{victim}: restarting m{y}"));
            let node = restart(s, y);
            s.join(y, node)
                .unwrap_or_else(|e| panic!("seed {}: restart of m{y}: {e}", s.seed));
            cov.restarts += 1;
            cov.add(&super::rejoin::rejoin(s, &mut port));
        }
        // After the failovers the primaries are uneven: they are given back
        // (`cluster rebalance --primaries`) while the clients run.
        wait(&mut port, &mut rng, 50);
        // With a fault in one handover (its old or new primary killed, or
        // its new primary's acks lost before it and the new primary killed
        // after it) in three seeds of four, then again without.
        cov.add(&super::handover::give_back_struck(
            f, s, &mut port, &mut rng,
        ));
        // Then, in odd seeds (it doubles a seed's time), a node leaves (its
        // primaries handed off, its copies made on the others, one rejoin
        // struck in two seeds of three), is stopped, and comes back to
        // take its share again.
        if s.seed % 2 == 1 {
            wait(&mut port, &mut rng, 50);
            cov.add(&super::reshape::leave_and_come_back(
                f, s, &mut port, &mut rng,
            ));
        }
    }
    s.doing(me, format!("{fault:?} of m{victim}: done"));
    s.nemesis_done.store(true, Ordering::Release);
    s.coverage.lock().unwrap().add(&cov);
}

/// A node's end of the simulated membership: takes the events its watch
/// delivers, in order, each when this actor's turn comes (so survivors
/// learn of a death at different moments, between other operations), and
/// hands them to `member::on_event`, as a server's etcd watch thread does.
pub(crate) fn member(f: &SimFabric, s: &Shared, m: MachineId) {
    let mut port = f.port(m).expect("a port");
    loop {
        let slot = &s.slots[m as usize];
        let waiting = slot
            .watch
            .lock()
            .unwrap()
            .is_some_and(|w| s.membership.pending(w));
        if s.replicated && waiting {
            // A slow watcher (etcd delivers to each server in its own
            // time): a failover may run before this node hears of the
            // death, so the failover itself must make it forget (R4).
            // (The event is taken after the wait, by whichever incarnation
            // serves then.)
            for _ in 0..(s.seed * 7 + u64::from(m) * 131) % 150 {
                port.relax();
            }
        }
        let node = slot.node.lock().unwrap().clone();
        let watch = *slot.watch.lock().unwrap();
        let next = match (&node, watch) {
            (Some(_), Some(w)) => s.membership.next(w),
            _ => None,
        };
        let (Some(node), Some(event)) = (node, next) else {
            if s.nemesis_done.load(Ordering::Acquire) {
                return;
            }
            port.relax();
            continue;
        };
        let epoch = node.store().fabric().own_epoch(m).expect("own epoch");
        let generation = slot.generation.load(Ordering::Acquire);
        if let Err(e) = member::on_event(&node, &s.membership, epoch, event) {
            // A node killed meanwhile, or a recovery that needed a second
            // dead node: a server logs it and goes on (the histories show
            // what it cost).
            let killed = slot.generation.load(Ordering::Acquire) != generation;
            if !killed && !s.two_down.load(Ordering::Acquire) {
                panic!("seed {}: m{m} on {event:?}: {e}", s.seed);
            }
            s.coverage.lock().unwrap().recovery_errors += 1;
        }
    }
}
