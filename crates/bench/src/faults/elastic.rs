//! Servers joining and leaving under faults (issue 59 in the fault lab):
//! the `join` and `leave` windows of the nemesis, and [`Members`], the
//! servers in the cluster now, which the clients read from and the mover
//! moves slots among.
//!
//! ```text
//!  leave(id): hold the moves ─▶ rebalance over the others (id drained) ─▶ id out of
//!             the members (reads go elsewhere) ─▶ recall the values Pragh migrated onto
//!             id ─▶ id owns 0 slots? stop it : keep it (the probe fails)
//!  join(id):  list id in the cluster file (or, an id that left, empty its disk) ─▶
//!             start it in node id's namespace ─▶ it answers and links to the coordinator
//!             ─▶ every member's SERVERS names it (J2) ─▶ hold the moves ─▶ rebalance
//!             over the members and id ─▶ id a member
//! ```
//!
//! Probes, from etcd's slot table: a server that left owns 0 slots and its
//! process is gone; one that joined owns some and answers.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use locus_client::proto::{Reply, Request};
use locus_client::Client;
use locus_membership::Membership;
use locus_server::moves::Mover;
use locus_server::supervise::{pid_alive, Role};
use locus_store::SlotTable;

use super::cluster::LabCluster;
use crate::Result;

/// Slots per batch of a join's or leave's rebalance.
pub const BATCH_SLOTS: usize = 64;
/// Attempts at a rebalance (each settles what the last left in flight).
const REBALANCE_TRIES: u32 = 3;
/// How long the members may take to learn a new server's address.
const KNOWN_WAIT: Duration = Duration::from_secs(30);

/// The servers in the cluster now, and the lock of whoever moves slots.
#[derive(Debug)]
pub struct Members {
    ids: Mutex<Vec<u8>>,
    /// Held by whoever moves slots (the mover, a join, a leave): a mover
    /// settles any batch in flight it did not make, so two at once would
    /// roll back each other's batches.
    pub moving: Mutex<()>,
}

impl Members {
    /// The first servers.
    pub fn new(ids: Vec<u8>) -> Members {
        Members {
            ids: Mutex::new(ids),
            moving: Mutex::new(()),
        }
    }

    /// The member ids, ascending.
    pub fn ids(&self) -> Vec<u8> {
        self.ids.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Member `i % members` (the server client i reads from).
    pub fn pick(&self, i: usize) -> u8 {
        let ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        ids[i % ids.len()]
    }

    fn add(&self, id: u8) {
        let mut ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        if !ids.contains(&id) {
            ids.push(id);
            ids.sort_unstable();
        }
    }

    fn remove(&self, id: u8) {
        let mut ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        ids.retain(|&m| m != id);
        assert!(!ids.is_empty(), "the last server never leaves");
    }

    /// Takes the moves lock.
    pub fn hold_moves(&self) -> std::sync::MutexGuard<'_, ()> {
        self.moving.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What a window did: its target, whether its probe held, what it saw.
pub type Outcome = (String, bool, String);

/// Slots server `id` owns in etcd's table (`None`: etcd did not answer).
pub fn slots_of(etcd: &Membership, id: u8) -> Option<usize> {
    let raw = etcd.slots_load().ok()??;
    let t = SlotTable::decode(&raw).ok()?;
    Some(t.owners().iter().filter(|&&o| o == id).count())
}

/// Slots server `id` owns or backs in etcd's table (`None`: etcd did not
/// answer).
pub fn held_by(etcd: &Membership, id: u8) -> Option<usize> {
    let raw = etcd.slots_load().ok()??;
    let t = SlotTable::decode(&raw).ok()?;
    Some(
        (0..t.slots())
            .filter(|&s| t.owner_of_slot(s) == Some(id) || t.is_backup(s, id))
            .count(),
    )
}

/// Whether etcd's table keeps each slot on more than one server.
fn replicated(etcd: &Membership) -> bool {
    etcd.slots_load()
        .ok()
        .flatten()
        .and_then(|raw| SlotTable::decode(&raw).ok())
        .is_some_and(|t| t.replication() > 1)
}

/// Failovers by etcd's table at the end of a replicated run.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct FailedOver {
    /// Changes of one slot's primary each, by failover or handover (a
    /// slot's primary epoch grows by one with each).
    pub slot_failovers: u64,
    /// Slots whose primary changed at least once.
    pub slots: u64,
    /// Slots with fewer backups than R - 1 when the run ended (a
    /// failed-over slot keeps none until the coordinator's rejoin, a
    /// settle period or two after the servers are back).
    pub slots_short_of_backups: u64,
    /// The table's epoch.
    pub table_epoch: u64,
}

/// What failed over, by etcd's table (`None`: etcd did not answer).
pub fn failed_over(etcd: &Membership) -> Option<FailedOver> {
    let raw = etcd.slots_load().ok()??;
    let t = SlotTable::decode(&raw).ok()?;
    let mut f = FailedOver {
        table_epoch: t.epoch(),
        ..FailedOver::default()
    };
    let want = usize::from(t.replication()).saturating_sub(1);
    for s in 0..t.slots() {
        let pe = u64::from(t.primary_epoch(s));
        f.slot_failovers += pe.saturating_sub(1);
        f.slots += u64::from(pe > 1);
        f.slots_short_of_backups += u64::from(t.backups_of_slot(s).len() < want);
    }
    Some(f)
}

/// Rebalances the slots over `members`, retrying a failed attempt (the
/// next settles what it left). Returns slots moved, or the last error.
fn rebalance(
    client: &Client,
    etcd: &Membership,
    members: &[u8],
) -> std::result::Result<u64, String> {
    let replicated = replicated(etcd);
    let mover = if replicated {
        // A rejoin whose learning could not be ended leaves its goal for
        // the coordinator.
        Mover::new(client, etcd).keeping_goal_on_error()
    } else {
        Mover::new(client, etcd)
    };
    let mut last = String::new();
    for t in 0..REBALANCE_TRIES {
        let done = if replicated {
            // Copies and handovers (design "A replicated cluster changes
            // shape"); a try released the lock for a failover to run.
            mover
                .reshape(members, BATCH_SLOTS, &mut |_, _| {})
                .map(|d| d.slots_copied + d.slots_handed)
        } else {
            mover
                .rebalance(members, BATCH_SLOTS, false, &mut |_, _| {})
                .map(|(_, d)| d.slots)
        };
        match done {
            Ok(slots) => return Ok(slots),
            Err(e) => {
                last = e.to_string();
                std::thread::sleep(Duration::from_millis(500 << t));
            }
        }
    }
    Err(last)
}

/// The `give_primaries_back` window (issue 60): the handovers that even
/// the primaries out over the live servers, each tried again while the
/// coordinator's own drivers hold the mover's lock. The probe: nothing
/// left to hand over afterwards.
pub fn give_back(c: &mut LabCluster) -> Result<Outcome> {
    let client = client(c)?;
    let etcd = c.membership().clone();
    let mover = Mover::new(&client, &etcd);
    let t = Instant::now();
    let (mut handed, mut last) = (0u64, None);
    for attempt in 0..REBALANCE_TRIES {
        match mover.primary_plan(BATCH_SLOTS) {
            Ok(plan) if plan.is_empty() => break,
            Ok(plan) => {
                for h in &plan {
                    match mover.hand_over(h) {
                        Ok(r) => handed += r.slots,
                        Err(e) => {
                            last = Some(e.to_string());
                            break;
                        }
                    }
                }
            }
            Err(e) => last = Some(e.to_string()),
        }
        std::thread::sleep(Duration::from_millis(500 << attempt));
    }
    let left: std::result::Result<usize, String> = mover
        .primary_plan(BATCH_SLOTS)
        .map(|p| p.iter().map(|h| h.slots.len()).sum())
        .map_err(|e| e.to_string());
    Ok((
        "primaries".into(),
        left == Ok(0),
        format!(
            "{handed} slots handed to a backup in {} ms; left to hand over: {left:?}; last error: {last:?}",
            t.elapsed().as_millis()
        ),
    ))
}

/// A client that knows every server listed now.
fn client(c: &LabCluster) -> Result<Client> {
    c.client(Duration::from_secs(10))
}

/// The `leave` window: drains member `id`, recalls the values migrated onto
/// it, stops it.
pub fn leave(c: &mut LabCluster, id: u8) -> Result<Outcome> {
    let target = format!("server {id}");
    let members = c.members().clone();
    if !members.ids().contains(&id) || members.ids().len() < 2 {
        return Ok((target, false, "not a member, or the last one".into()));
    }
    let client = client(c)?;
    let etcd = c.membership().clone();
    let _moves = members.hold_moves();
    let others: Vec<u8> = members.ids().into_iter().filter(|&m| m != id).collect();
    let t = Instant::now();
    let moved = rebalance(&client, &etcd, &others);
    if replicated(&etcd) {
        return leave_replicated(c, id, &client, &etcd, &others, moved, t);
    }
    let left = slots_of(&etcd, id);
    if left != Some(0) {
        // Never stop a server that still owns slots: its keys would be
        // unreachable until it came back.
        return Ok((
            target,
            false,
            format!("drain failed ({moved:?}); server {id} still owns {left:?} slots"),
        ));
    }
    members.remove(id);
    let recalled = Mover::new(&client, &etcd).recall(id);
    let drained_ms = t.elapsed().as_millis();
    let pid = c.stop_server(id);
    let gone = pid.is_some_and(|p| !pid_alive(p));
    Ok((
        target,
        gone && left == Some(0),
        format!(
            "{} slots moved off in {drained_ms} ms, owns {left:?} after; values recalled {recalled:?}; pid {pid:?} gone: {gone}",
            moved.unwrap_or(0)
        ),
    ))
}

/// The rest of a leave of a replicated cluster: under the mover's lock, a
/// last reshaping (the coordinator may have made `id` a backup again
/// since), then `id` out of the members, its Pragh values recalled and
/// the server stopped, so that no rejoin makes it a backup in between.
fn leave_replicated(
    c: &mut LabCluster,
    id: u8,
    client: &Client,
    etcd: &Membership,
    others: &[u8],
    moved: std::result::Result<u64, String>,
    t: Instant,
) -> Result<Outcome> {
    let target = format!("server {id}");
    let members = c.members().clone();
    let mover = Mover::new(client, etcd).keeping_goal_on_error();
    let last = mover.holding(|| {
        let again = mover.reshape(others, BATCH_SLOTS, &mut |_, _| {})?;
        let left = held_by(etcd, id);
        if left != Some(0) {
            return Ok((left, again, None));
        }
        members.remove(id);
        let recalled = mover.recall(id).map_err(|e| e.to_string());
        let drained_ms = t.elapsed().as_millis();
        let pid = c.stop_server(id);
        Ok((left, again, Some((recalled, drained_ms, pid))))
    });
    let (left, again, stopped) = match last {
        Ok(l) => l,
        Err(e) => {
            return Ok((
                target,
                false,
                format!("drain failed ({moved:?}; then {e}): server {id} stays"),
            ))
        }
    };
    let Some((recalled, drained_ms, pid)) = stopped else {
        // Never stop a server that still holds a copy: with its slots'
        // last copy it would be unreachable until it came back.
        return Ok((
            target,
            false,
            format!("drain failed ({moved:?}); server {id} still holds {left:?} slots"),
        ));
    };
    let gone = pid.is_some_and(|p| !pid_alive(p));
    Ok((
        target,
        gone,
        format!(
            "{} slots copied or handed off in {drained_ms} ms ({} more at the last look), holds {left:?} after; values recalled {recalled:?}; pid {pid:?} gone: {gone}",
            moved.unwrap_or(0),
            again.slots_copied + again.slots_handed
        ),
    ))
}

/// The `join` window: starts server `id` (listed now, or an id that left,
/// on an empty disk) and rebalances the slots onto it.
pub fn join(c: &mut LabCluster, id: u8) -> Result<Outcome> {
    let target = format!("server {id}");
    let members = c.members().clone();
    if members.ids().contains(&id) || id as usize >= c.room() {
        return Ok((target, false, "a member already, or past the room".into()));
    }
    let again = c.listed(id);
    if again {
        c.wipe_disk(id)?;
    } else {
        c.list_server(id)?;
    }
    let t = Instant::now();
    c.spawn_server(id)?;
    if let Err(e) = c.wait_joined(id) {
        c.stop_server(id);
        return Ok((target, false, format!("did not come up: {e}")));
    }
    let client = client(c)?;
    if let Err(e) = wait_known(&client, &members.ids(), id) {
        c.stop_server(id);
        return Ok((target, false, e));
    }
    let up_ms = t.elapsed().as_millis();
    let etcd = c.membership().clone();
    let _moves = members.hold_moves();
    let mut all = members.ids();
    all.push(id);
    let moved = rebalance(&client, &etcd, &all);
    let owns = slots_of(&etcd, id);
    let answers = client.ping(id).is_ok();
    let ok = owns.is_some_and(|n| n > 0) && answers;
    if ok {
        members.add(id);
    } else if owns == Some(0) {
        // Nothing of the cluster's is on it: it goes again.
        c.stop_server(id);
    } else {
        // It owns slots: it stays, a member (the run fails on the probe).
        members.add(id);
    }
    Ok((
        target,
        ok,
        format!(
            "{} (pid {:?}) up in {up_ms} ms; {} slots moved onto it ({}); owns {owns:?}; answers: {answers}",
            if again { "rejoined on an empty disk" } else { "new id" },
            c.pid(&Role::Server(id)),
            moved.as_ref().map_or(0, |n| *n),
            moved.as_ref().err().map_or("ok", |e| e.as_str()),
        ),
    ))
}

/// Waits until every member's SERVERS names server `id` (J2: slots may
/// move to it only once every member can reach it). As
/// `locus cluster add-server`'s `wait_known` (crates/cli/src/cluster_add.rs).
fn wait_known(client: &Client, members: &[u8], id: u8) -> std::result::Result<(), String> {
    let t0 = Instant::now();
    for &peer in members.iter().filter(|&&p| p != id) {
        loop {
            let known = matches!(
                client.call(peer, &Request::Servers, None),
                Ok(Reply::Servers(list)) if list.iter().any(|(s, _)| *s == id)
            );
            if known {
                break;
            }
            if t0.elapsed() >= KNOWN_WAIT {
                return Err(format!(
                    "server {peer} has not learned server {id}'s address from etcd after {} s",
                    KNOWN_WAIT.as_secs()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    Ok(())
}
