//! Installs on their own connection (issue 16, requirement 5: Redis at par). A destination
//! whose store is remote (Redis) hands each DATA batch to an [`InstallWorker`]: a thread with an
//! [`Installer`] of its own (for Redis a second connection, one pipeline per batch). The node
//! thread goes on serving queries on the store's own connection. The worker sends the batch's
//! DATA-ACK once the store has applied the batch. A store whose installs are cheap (the built-in
//! [`crate::table::Table`]) has no installer, and its node installs inline as before.
//!
//! # Invariants
//! - **A1** A DATA-ACK leaves only after its batch is applied. The worker sends it after the
//!   installer returned `Ok` for the whole batch, never at hand-off. A source counts a group
//!   copied only when every batch of it is acked (K3). So a group completes only over applied
//!   batches. The same holds for a destination answering "absent" without a pull (the group is
//!   done, or FINISH came).
//! - **A2** Queries never wait behind an install. The node thread only queues the batch and
//!   goes on; the worker's installs use their own connection. A query of a key whose batch is
//!   not applied yet sees the key absent (and pulls it, or is a double read) or a newer write.
//!   Installs are install-if-newer, so their order against the queries' writes does not matter
//!   (K4).
//! - **A3** The node waits for the worker to be idle before it makes a new store (a
//!   MIGRATE-INIT) or starts migrating a shard out. A new store starts by purging its shard,
//!   and a source cleans its shard up at the end. An install from an earlier migration that
//!   lands after either would bring back pairs of a migration that is over.
//! - **A4** A failed install poisons the node. Its ack and every later one are never sent,
//!   and the node goes down on its next step ([`crate::Error::StoreFailed`]), as with a failed
//!   store. Once the node has stopped (gone down, or been dropped), the worker sends no more
//!   acks; at most one already being sent may still leave, and it is true.
//! - **A5** Bounded. A batch sent again while its first copy is queued or being installed
//!   (same sender, same sequence number) is not queued twice; the one ack answers both. So each
//!   source has at most `batches_inflight_max` batches here. The queue
//!   ([`INSTALL_QUEUE_MAX`]) fills only when more migrations come in at once than it holds
//!   windows of; the node then waits for room.
//!
//! # A batch's life
//! ```text
//!   node thread                                     worker thread
//!   DATA --> Server::handle --> Install job --> queue --> installer.install(batch)
//!            (destination       (A5: a resend            | Ok  -> applied; then the ack
//!             checks)            still queued             |        is sent (A1)
//!                                is dropped)              | Err -> failed: no ack, the node
//!                                                                  goes down (A4)
//!   MIGRATE-INIT, start_migration: wait until applied == queued (A3), then go on
//! ```

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use crate::error::{Error, Result};
use crate::group::Geometry;
use crate::transport::SharedTransport;
use crate::wire::{Item, NodeId, Packet, ShardId};

/// DATA batches waiting for the worker at most (A5).
pub const INSTALL_QUEUE_MAX: usize = 256;
/// How long the node waits for the worker to finish its queue (A3) before it gives up and
/// goes down: far above any healthy install (each pipeline is bounded by the store's I/O
/// timeout), so it only fires on a worker that is stuck.
pub const INSTALL_IDLE_WAIT_MAX: Duration = Duration::from_secs(60);

/// Applies DATA batches to the store a node's shards live in, off the node's thread.
pub trait Installer: Send {
    /// Installs every item of a batch of `shard` (shape `geometry`) unless the store already
    /// holds that or a newer version of its key. `Err` says what failed; the store must then
    /// be treated as failed (A4).
    fn install(
        &mut self,
        shard: ShardId,
        geometry: Geometry,
        items: &[Item],
    ) -> std::result::Result<(), String>;
}

/// A DATA batch the server accepted, for the worker to apply and then ack.
#[derive(Clone, Debug)]
pub struct Install {
    /// The shard migrating in.
    pub shard: ShardId,
    /// Its shape.
    pub geometry: Geometry,
    /// The pairs to install if newer.
    pub items: Vec<Item>,
    /// Where the ack goes (the source).
    pub to: NodeId,
    /// The DATA-ACK, sent only once the batch is applied (A1).
    pub ack: Packet,
}

/// What a worker did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InstallCounters {
    /// Batches queued.
    pub queued: u64,
    /// Batches applied (and acked, unless the node had stopped).
    pub applied: u64,
    /// Resent batches not queued again, their first copy still queued or installing (A5).
    pub duplicates: u64,
    /// Acks the transport refused.
    pub unsendable: u64,
}

#[derive(Debug, Default)]
struct Progress {
    counters: InstallCounters,
    /// (source, sequence number) of every batch queued and not yet applied.
    inflight: BTreeSet<(NodeId, u32)>,
    failed: Option<String>,
}

#[derive(Debug, Default)]
struct Shared {
    progress: Mutex<Progress>,
    changed: Condvar,
    stopped: AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The install thread of one node (module doc).
pub struct InstallWorker {
    node: NodeId,
    jobs: Option<Sender<Install>>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl InstallWorker {
    /// Starts the worker of node `node`, applying batches with `installer` and sending their
    /// acks over `transport`.
    pub fn start(
        node: NodeId,
        installer: Box<dyn Installer>,
        transport: SharedTransport,
    ) -> Result<Self> {
        let (tx, rx) = crossbeam_channel::bounded(INSTALL_QUEUE_MAX);
        let shared = Arc::new(Shared::default());
        let name = format!("kv-install-{node}");
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name(name.clone())
            .spawn(move || work(installer, rx, &s, &*transport))
            .map_err(|source| Error::ThreadSpawn { name, source })?;
        Ok(Self {
            node,
            jobs: Some(tx),
            shared,
            thread: Some(thread),
        })
    }

    /// Queues a batch (A5: not again while its first copy is queued or installing). Waits for
    /// room when the queue is full. `Err` once the worker has failed or gone.
    pub fn hand(&mut self, job: Install) -> Result<()> {
        let id = (job.to, job.ack.seq);
        {
            let mut p = self.shared.lock();
            // Unnumbered DATA (sequence number 0) is never resent, so never a duplicate.
            if id.1 != 0 && p.inflight.contains(&id) {
                p.counters.duplicates += 1;
                return Ok(());
            }
            if id.1 != 0 {
                p.inflight.insert(id);
            }
            p.counters.queued += 1;
        }
        let sent = self.jobs.as_ref().map(|tx| tx.send(job));
        match sent {
            Some(Ok(())) => Ok(()),
            _ => Err(self.failed_error("the install worker stopped")),
        }
    }

    /// Waits until every queued batch is applied (A3), at most [`INSTALL_IDLE_WAIT_MAX`].
    pub fn wait_idle(&self) -> Result<()> {
        let deadline = Instant::now() + INSTALL_IDLE_WAIT_MAX;
        let mut p = self.shared.lock();
        loop {
            if let Some(why) = &p.failed {
                return Err(Error::StoreFailed {
                    server: self.node,
                    reason: why.clone(),
                });
            }
            if p.counters.applied == p.counters.queued {
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let waiting = p.counters.queued - p.counters.applied;
                return Err(Error::StoreFailed {
                    server: self.node,
                    reason: format!(
                        "the install worker did not apply its {waiting} queued DATA batches \
                         within {} s",
                        INSTALL_IDLE_WAIT_MAX.as_secs()
                    ),
                });
            }
            p = match self.shared.changed.wait_timeout(p, left) {
                Ok((p, _)) => p,
                Err(e) => e.into_inner().0,
            };
        }
    }

    /// The first failed install, if any (A4).
    pub fn failure(&self) -> Option<String> {
        self.shared.lock().failed.clone()
    }

    /// What the worker did so far.
    pub fn counters(&self) -> InstallCounters {
        self.shared.lock().counters
    }

    /// The node stopped: no more acks (A4), queued batches are dropped.
    pub fn stop(&self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
    }

    fn failed_error(&self, otherwise: &str) -> Error {
        Error::StoreFailed {
            server: self.node,
            reason: self.failure().unwrap_or_else(|| otherwise.to_string()),
        }
    }
}

impl Drop for InstallWorker {
    fn drop(&mut self) {
        self.stop();
        // Closing the queue ends the worker's loop once its current install returns (bounded
        // by the store's I/O timeout).
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn work(
    mut installer: Box<dyn Installer>,
    jobs: Receiver<Install>,
    shared: &Shared,
    transport: &dyn crate::transport::Transport,
) {
    for job in jobs.iter() {
        if shared.stopped.load(Ordering::SeqCst) {
            break;
        }
        let applied = installer.install(job.shard, job.geometry, &job.items);
        let id = (job.to, job.ack.seq);
        let unsendable = match applied {
            // A1: applied, now the ack; A4: not from a node that stopped.
            Ok(()) if !shared.stopped.load(Ordering::SeqCst) => {
                transport.send(job.to, job.ack).is_err()
            }
            Ok(()) => false,
            Err(why) => {
                let mut p = shared.lock();
                p.failed.get_or_insert(why);
                shared.changed.notify_all();
                return;
            }
        };
        let mut p = shared.lock();
        p.counters.applied += 1;
        p.counters.unsendable += unsendable as u64;
        p.inflight.remove(&id);
        shared.changed.notify_all();
    }
}
