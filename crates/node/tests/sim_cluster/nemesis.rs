//! The simulated twin's nemesis (one fault on one node per seed) and its
//! simulated membership (each node's member actor); see `sim_cluster.rs`.

use std::sync::atomic::Ordering;

use locus_fabric::sim::{SimFabric, SimRng};
use locus_fabric::{Fabric, Fencing, MachineId, Port};
use locus_node::node::PeerEvent;
use locus_store::Key;
use locus_wal::Crash;

use super::{Coverage, Fault, Shared, CLIENTS_PER_NODE, MACHINES};

/// The nemesis and the simulated membership: one fault on one node.
pub(crate) fn nemesis(f: &SimFabric, s: &Shared, mut rng: SimRng) {
    let victim = rng.below(MACHINES as u64) as MachineId;
    let fault = match rng.below(4) {
        0 => Fault::Crash(Crash::ProcessCrash),
        1 => Fault::Crash(Crash::PowerLoss),
        2 => Fault::Crash(Crash::PowerLossTorn {
            seed: rng.next_u64(),
        }),
        _ => Fault::LeaseLost,
    };
    let other = (victim + 1) % MACHINES as MachineId;
    let mut port = f.port(other).expect("a port");
    let wait = |port: &mut <SimFabric as Fabric>::Port, rng: &mut SimRng, n: u64| {
        for _ in 0..rng.below(n) {
            port.relax();
        }
    };
    wait(&mut port, &mut rng, 300);
    let old_epoch = s.epochs.lock().unwrap()[victim as usize];
    let mut cov = Coverage::default();
    let me = MACHINES * CLIENTS_PER_NODE;
    s.doing(me, format!("{fault:?} of m{victim}"));
    let kill = |s: &Shared, how: Crash| {
        // The process is gone: its replies are lost, its memory dropped, its
        // disk keeps what this crash keeps.
        let slot = &s.slots[victim as usize];
        slot.generation.fetch_add(1, Ordering::AcqRel);
        *slot.node.lock().unwrap() = None;
        s.fabric.crash(victim).expect("crash");
        let mut disk = slot.disk.lock().unwrap();
        *disk = disk.crash(how);
    };
    match fault {
        Fault::Crash(how) => {
            kill(s, how);
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
    // The survivors learn it is down (a lease later, as etcd tells them),
    // each from its own watch (its member actor).
    wait(&mut port, &mut rng, 200);
    let recorded: Vec<Key> = s
        .record
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, to)| *to == victim)
        .map(|(k, _)| *k)
        .collect();
    for m in (0..MACHINES as MachineId).filter(|&m| m != victim) {
        let down = PeerEvent::Down {
            machine: victim,
            epoch: old_epoch,
        };
        s.watch[m as usize]
            .lock()
            .unwrap()
            .push_back((down, recorded.clone()));
    }
    if fault == Fault::LeaseLost {
        // Then it runs a while fenced, and is killed (its supervisor saw
        // the fence) and restarted.
        wait(&mut port, &mut rng, 200);
        kill(s, Crash::ProcessCrash);
    }
    wait(&mut port, &mut rng, 100);
    let epoch = old_epoch + 1;
    s.epochs.lock().unwrap()[victim as usize] = epoch;
    s.doing(me, format!("{fault:?} of m{victim}: restarting it"));
    let node = s
        .start_node(victim, epoch)
        .unwrap_or_else(|e| panic!("seed {}: restart: {e}", s.seed));
    for m in (0..MACHINES as MachineId).filter(|&m| m != victim) {
        node.store()
            .fabric()
            .inner()
            .set_peer_epoch(victim, m, s.epochs.lock().unwrap()[m as usize])
            .expect("peer epoch");
    }
    {
        let slot = &s.slots[victim as usize];
        *slot.node.lock().unwrap() = Some(node);
        slot.generation.fetch_add(1, Ordering::AcqRel);
    }
    cov.restarts += 1;
    for m in (0..MACHINES as MachineId).filter(|&m| m != victim) {
        let up = PeerEvent::Up {
            machine: victim,
            epoch,
        };
        s.watch[m as usize]
            .lock()
            .unwrap()
            .push_back((up, Vec::new()));
    }
    s.doing(me, format!("{fault:?} of m{victim}: done"));
    s.nemesis_done.store(true, Ordering::Release);
    s.coverage.lock().unwrap().add(&cov);
}

/// A node's end of the simulated membership: takes the events its watch
/// delivers, in order, each when this actor's turn comes (so survivors
/// learn of a death at different moments, between other operations), and
/// hands them to [`Node::on_peer_event`] as a server's etcd watch does.
pub(crate) fn member(f: &SimFabric, s: &Shared, m: MachineId) {
    let mut port = f.port(m).expect("a port");
    loop {
        let next = s.watch[m as usize].lock().unwrap().pop_front();
        let Some((event, recorded)) = next else {
            if s.nemesis_done.load(Ordering::Acquire) {
                return;
            }
            port.relax();
            continue;
        };
        if let Some((node, _)) = s.node(m) {
            if let Err(e) = node.on_peer_event(event, &recorded) {
                panic!("seed {}: m{m} on {event:?}: {e}", s.seed);
            }
        }
    }
}
