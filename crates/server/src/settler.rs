//! The leading coordinator settles slot moves that no driver holds (issue
//! 59; docs/design.md "One mover at a time, and the coordinator settles
//! what a dead one left", MV3): at its takeover and every
//! [`SETTLE_EVERY`], if nobody holds `P/mover` and a server lists slots in
//! flight, it takes the lock and runs [`Mover::settle`] (a handed batch
//! rolls forward, any other rolls back), so a batch a killed driver left
//! does not stay guarded until an operator runs the next command; then it
//! finishes the goal the dead driver left in etcd, if any (MV4), trying
//! again at each look until it is done.
//!
//! With replication (issue 60) it also fails over the slots of a server
//! whose lease ended (`moves/failover.rs`), looking every
//! [`FAILOVER_EVERY`] so that a dead primary's slots answer again about
//! one look after its lease ends; and, at each look for batches, when no
//! server is dead, makes live servers backups of slots short of backups
//! (`moves/rejoin.rs`), one primary and learner at a time.

use std::time::{Duration, Instant};

use locus_client::{Client, ClientConfig};
use locus_fabric::auth::Secret;
use locus_membership::Membership;

use crate::config::ClusterFile;
use crate::moves::{Goal, Mover};

/// How often the leader looks for batches left in flight.
pub const SETTLE_EVERY: Duration = Duration::from_secs(2);
/// How often the leader looks for dead servers to fail over.
pub const FAILOVER_EVERY: Duration = Duration::from_millis(250);

/// What one look did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Look {
    /// A driver holds the lock: its batches are its own.
    Driven(String),
    /// Nothing in flight.
    Idle,
    /// Batches settled, and slots a dead driver's goal moved.
    Settled(u64, u64),
    /// A dead server's slots failed over.
    FailedOver(u8, crate::moves::FailedOver),
    /// A live server made a backup of a primary's slots short of one.
    Rejoined(crate::moves::Shortfall, crate::moves::Rejoined),
}

/// Runs until `stop`: looks at once (a takeover settles what the old
/// leader or a driver left), then every [`SETTLE_EVERY`] while `leading`.
pub(crate) fn settle_loop(
    file: &ClusterFile,
    secret: &Secret,
    term: i64,
    stop: &dyn Fn() -> bool,
    leading: &dyn Fn() -> bool,
) {
    let Some(etcd) = &file.etcd else { return };
    let servers = file.servers.iter().map(|s| s.client).collect();
    let config = ClientConfig {
        secret: Some(secret.clone()),
        deadline: Duration::from_secs(30),
        connect_timeout: Duration::from_secs(2),
        ..ClientConfig::default()
    };
    let client = match Client::new(servers, config) {
        Ok(c) => c,
        Err(e) => return tracing::error!("the move settler has no client: {e}"),
    };
    let mut membership: Option<Membership> = None;
    let mut next = Instant::now();
    let mut next_failover = Instant::now();
    while !stop() {
        let now = Instant::now();
        if now < next && (file.replication.factor <= 1 || now < next_failover) {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        next_failover = now + FAILOVER_EVERY;
        let settle = now >= next;
        if settle {
            next = now + SETTLE_EVERY;
        }
        if !leading() {
            continue;
        }
        if membership.is_none() {
            match Membership::connect(&etcd.config()) {
                Ok(m) => membership = Some(m),
                Err(e) => {
                    tracing::warn!("the move settler cannot reach etcd: {e}");
                    continue;
                }
            }
        }
        let m = membership.as_ref().expect("connected above");
        if file.replication.factor > 1 {
            match look_for_dead(&client, m, term) {
                Ok(Look::FailedOver(dead, r)) => tracing::info!(
                    dead,
                    slots = r.slots,
                    vertices = r.vertices,
                    table_epoch = r.table_epoch,
                    term,
                    "failed a dead server's slots over to their backups"
                ),
                Ok(_) => {}
                Err(e) => tracing::warn!("failing over a dead server: {e}"),
            }
        }
        if !settle {
            continue;
        }
        if file.replication.factor > 1 {
            if let Err(e) = look_for_short(&client, m, term) {
                tracing::warn!("making a server a backup again: {e}");
            }
        }
        match look(&client, m, term) {
            Ok(Look::Settled(n, slots)) => tracing::info!(
                batches = n,
                slots,
                term,
                "settled slot moves no driver held, and finished their goal"
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!("settling slot moves no driver held: {e}"),
        }
    }
}

/// The leading coordinator's mover, or the look's answer if a driver holds
/// the lock (its batches and failovers are its own).
fn coordinator_mover<'a>(
    client: &'a Client,
    m: &'a Membership,
    term: i64,
) -> crate::Result<std::result::Result<Mover<'a>, Look>> {
    if let Some(holder) = m
        .mover_holder()
        .map_err(|e| crate::ServerError::Move(e.to_string()))?
    {
        return Ok(Err(Look::Driven(holder)));
    }
    Ok(Ok(Mover::new(client, m)
        .named(format!("the coordinator (term {term})"))
        .keeping_goal_on_error()))
}

/// One look for a dead server to fail over (with replication): the first
/// the table still gives slots with backups, or backups.
pub(crate) fn look_for_dead(client: &Client, m: &Membership, term: i64) -> crate::Result<Look> {
    let mover = match coordinator_mover(client, m, term)? {
        Ok(mover) => mover,
        Err(driven) => return Ok(driven),
    };
    match mover.dead_holders()?.first() {
        Some(&dead) => Ok(Look::FailedOver(dead, mover.fail_over(dead)?)),
        None => Ok(Look::Idle),
    }
}

/// One look for slots short of a backup, once no server is to fail over:
/// each rejoin planned is made in turn, until one fails.
pub(crate) fn look_for_short(client: &Client, m: &Membership, term: i64) -> crate::Result<Look> {
    let mover = match coordinator_mover(client, m, term)? {
        Ok(mover) => mover,
        Err(driven) => return Ok(driven),
    };
    // A goal left in etcd (a dead driver's, or a failover waiting for a
    // new primary) is finished first: a rejoin's own goal would replace it.
    let pending = m
        .goal_load()
        .map_err(|e| crate::ServerError::Move(e.to_string()))?
        .is_some();
    if pending || !mover.dead_holders()?.is_empty() {
        return Ok(Look::Idle);
    }
    let mut last = Look::Idle;
    for f in mover.short_of_backups()? {
        let r = mover.rejoin(&f)?;
        tracing::info!(
            primary = f.primary,
            learner = f.learner,
            slots = r.slots,
            vertices = r.vertices,
            table_epoch = r.table_epoch,
            term,
            "made a live server a backup of slots short of one"
        );
        last = Look::Rejoined(f, r);
    }
    Ok(last)
}

/// One look (see the module doc).
pub(crate) fn look(client: &Client, m: &Membership, term: i64) -> crate::Result<Look> {
    let busy = |e: &dyn std::fmt::Display| e.to_string().contains("another slot mover is running");
    let mover = match coordinator_mover(client, m, term)? {
        Ok(mover) => mover,
        Err(driven) => return Ok(driven),
    };
    let in_flight = mover
        .in_flight()
        .into_iter()
        .any(|(_, f)| f.is_some_and(|f| !f.is_empty()));
    let goal = m
        .goal_load()
        .map_err(|e| crate::ServerError::Move(e.to_string()))?
        .map(|g| Goal::decode(&g).map_err(crate::ServerError::Move))
        .transpose()?;
    if !in_flight && goal.is_none() {
        return Ok(Look::Idle);
    }
    let r = (|| -> crate::Result<(u64, u64)> {
        // Moves and rebalances settle first themselves.
        let n = if goal.is_none() { mover.settle()? } else { 0 };
        let slots = match &goal {
            None => 0,
            Some(Goal::Move {
                slots,
                to,
                batch_slots,
            }) => {
                mover
                    .move_slots(slots, *to, *batch_slots, &mut |_, _| {})?
                    .slots
            }
            Some(Goal::Rebalance {
                members,
                batch_slots,
            }) => {
                mover
                    .rebalance(members, *batch_slots, false, &mut |_, _| {})?
                    .1
                    .slots
            }
            Some(Goal::FailOver { dead, to }) => mover.fail_over_to(*dead, to)?.slots,
            Some(Goal::Rejoin {
                primary,
                learner,
                replaces,
                slots,
            }) => {
                mover.abandon_rejoin(&crate::moves::Shortfall {
                    primary: *primary,
                    learner: *learner,
                    replaces: *replaces,
                    slots: slots.clone(),
                })?;
                0
            }
            Some(Goal::HandOver { from, to, slots }) => {
                mover
                    .resume_handover(&crate::moves::Handover {
                        from: *from,
                        to: *to,
                        slots: slots.clone(),
                    })?
                    .slots
            }
        };
        Ok((n, slots))
    })();
    match r {
        Ok((n, slots)) => Ok(Look::Settled(n, slots)),
        // A driver started between the two looks: its batches are its own.
        Err(e) if busy(&e) => Ok(Look::Driven(e.to_string())),
        Err(e) => Err(e),
    }
}
