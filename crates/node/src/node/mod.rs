//! [`Node`]: one machine of the store, assembled once (issue 58 req. 1; the
//! states and invariants N1-N4 are in `docs/design.md`, "The node, and its
//! simulated twin").
//!
//! ```text
//!  NodeParts ──Node::create──▶ Created ──(caller: peers' regions visible,
//!  (fabric, me,   (this machine's       services running)──recover(w)──▶ Node (serving)
//!   config, log)   regions)                                    (log replayed, D4)
//! ```
//!
//! A `Node` exists only once its log is replayed (N3 by construction).
//! It does no I/O of its own beyond the fabric and its log's storage, and
//! starts no thread: the caller drives it. `locus server` runs it behind
//! TCP connections and threads (`locus-server`); the simulated cluster
//! (`tests/sim_cluster.rs`) runs it under the simulation's actors, with its
//! log on a simulated disk.
//!
//! - [`Node::handle`] answers one client request (`handle.rs`), on a
//!   [`Session`] (a connection's worker), transport-free.
//! - `durable.rs`: the log's meaning, checkpoints, replay (D1-D4).
//! - `recovery.rs`: Pragh 5 at a survivor ([`Node::peer_failed`],
//!   [`Node::peer_rejoined`]) and the value-region scan.

mod backup;
mod durable;
mod handle;
mod handover;
mod learn;
pub mod moves;
pub mod recovery;
mod replicate;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use locus_fabric::counting::{Counters, Counting};
use locus_fabric::{Fabric, Fencing, MachineId};
use locus_store::{Store, StoreConfig, Worker};

use crate::config::NodeConfig;
use crate::Result;

pub use handle::{code_of, Session, FRONTIER_MAX};

/// What runs a node's code: OS threads, or the simulation's actors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunsOn {
    /// OS threads (a server, an embedded cluster): lock waits block, the
    /// log has its own flusher thread.
    Threads,
    /// The simulated fabric's actors, one at a time under a seed: a lock
    /// held elsewhere is waited for through the worker's `relax` (a blocked
    /// actor would hold the baton, and the holder never run), and the log
    /// flushes in the calling actor (`locus_wal::Flusher::Caller`), so
    /// what a crash keeps is decided by the seed.
    Simulation,
}

/// Where a node's log lives.
#[derive(Clone)]
pub struct LogParts {
    /// The storage its files go through (files, or a simulated disk).
    pub storage: Arc<dyn locus_wal::Storage>,
    /// Its directory.
    pub dir: PathBuf,
    /// What runs the node.
    pub runs_on: RunsOn,
}

/// A membership event about a peer, as a server's membership watch (etcd)
/// or the simulated cluster's membership hands it to the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerEvent {
    /// `machine`'s incarnation at `epoch` ended (its lease expired).
    Down {
        /// The peer.
        machine: MachineId,
        /// The epoch that ended.
        epoch: u64,
    },
    /// `machine` registered at `epoch` (recovered from its own log).
    Up {
        /// The peer.
        machine: MachineId,
        /// Its new epoch.
        epoch: u64,
    },
}

impl std::fmt::Debug for LogParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogParts")
            .field("dir", &self.dir)
            .field("runs_on", &self.runs_on)
            .finish_non_exhaustive()
    }
}

/// What a node is made of.
#[derive(Debug)]
pub struct NodeParts<F> {
    /// The fabric, hosting (at least) this machine.
    pub fabric: F,
    /// This machine.
    pub me: MachineId,
    /// Its settings (`[durability]` set: updates are logged in `log`).
    pub config: NodeConfig,
    /// Where the log lives (needed with `[durability]`).
    pub log: Option<LogParts>,
    /// How error replies name this node (`server 2 (127.0.0.1:7402)`).
    pub label: String,
    /// Counters to count the fabric's operations into (`None`: its own).
    /// An embedded cluster's nodes share one table.
    pub counters: Option<Arc<Counters>>,
}

/// Protocol rules a node breaks on purpose, so that a test can show it
/// catches the break (never set outside tests and the fault lab).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Faults {
    /// Acknowledge updates without the backups' records (breaks R1).
    pub skip_backups: bool,
    /// A backup takes records whatever their primary epoch (breaks R2).
    pub accept_stale_primary: bool,
    /// A newer table that makes this node a slot's primary is installed
    /// without promoting its backup lists first (breaks R3).
    pub adopt_without_promote: bool,
    /// A primary sends its updates to the backups the table names but not
    /// to a learner (breaks R1 once a rejoin commits).
    pub skip_learner: bool,
    /// A learner lets a copy overwrite a live record taken since it began
    /// learning (breaks R1 once a rejoin commits).
    pub copy_overwrites: bool,
    /// A handover does not send the backups the lists of vertices whose
    /// last update is in doubt (breaks H2).
    pub skip_resend_in_doubt: bool,
    /// An old primary installs the table that hands its slots to their
    /// backup without marking their keys `MOVED` (breaks H4).
    pub skip_handover_markers: bool,
}

/// A node whose regions exist and whose log is not replayed yet.
pub struct Created<F: Fabric> {
    store: Store<Counting<F>>,
    parts: NodeParts<()>,
}

impl<F: Fabric> Created<F> {
    /// The store (wait for the peers' regions, start its services).
    pub fn store(&self) -> &Store<Counting<F>> {
        &self.store
    }

    /// Replays the log (with `[durability]`) through `w`, a worker of this
    /// machine, and returns the node, ready to serve (D4, N3).
    pub fn recover(self, w: &mut Worker<Counting<F>>) -> Result<Node<F>> {
        let p = self.parts;
        let durable = match (&p.config.durability, &p.log) {
            (Some(d), Some(log)) => Some(durable::Durability::open(d, log, p.me, w)?),
            (Some(_), None) => {
                return Err(crate::NodeError::Recovery(format!(
                    "{}: [durability] is set but no log storage was given",
                    p.label
                )))
            }
            (None, _) => None,
        };
        // With a log, a node can back other servers' slots (issue 60): its
        // backup log sits beside the main one, replayed here too.
        let backup = match (&p.config.durability, &p.log) {
            (Some(d), Some(log)) => {
                let cfg = locus_wal::WalConfig {
                    storage: log.storage.clone(),
                    dir: log.dir.join("backup"),
                    sync: d.sync_mode()?,
                    identity: String::new(),
                    segment_bytes_max: d.segment_mb << 20,
                };
                let flusher = match log.runs_on {
                    RunsOn::Threads => locus_wal::Flusher::Thread,
                    RunsOn::Simulation => locus_wal::Flusher::Caller,
                };
                let b = Arc::new(backup::Backup::open(
                    p.me,
                    Arc::clone(w.homes()),
                    cfg,
                    flusher,
                )?);
                self.store
                    .set_node_handler(p.me, Arc::clone(&b) as Arc<dyn locus_store::NodeHandler>)?;
                Some(b)
            }
            _ => None,
        };
        let node = Node {
            me: p.me,
            machines: self.store.machines(),
            label: p.label,
            config: p.config,
            store: self.store,
            recovery: Default::default(),
            migrations_in: AtomicU64::new(0),
            migrated_bytes: AtomicU64::new(0),
            moving: durable
                .as_ref()
                .map(|d| {
                    moves::InFlight::resumed(&d.resumed.lock().unwrap_or_else(|p| p.into_inner()))
                })
                .unwrap_or_default(),
            durable,
            backup,
            faults: Faults::default(),
            promoting: Default::default(),
            learners: Default::default(),
            handing: Default::default(),
            in_doubt: Default::default(),
        };
        // A failover committed before this node promoted the slots it
        // backed: they are served from its backup log now, before anyone
        // is answered (issue 60, R2).
        if node.backup.is_some() {
            let table = node.store.homes().current();
            node.promote(w, &table)?;
        }
        Ok(node)
    }
}

/// One machine of the store, serving (see the module doc).
pub struct Node<F: Fabric> {
    me: MachineId,
    machines: usize,
    label: String,
    config: NodeConfig,
    store: Store<Counting<F>>,
    durable: Option<durable::Durability>,
    /// This node's side of replication: the slots it backs (with a log).
    backup: Option<Arc<backup::Backup>>,
    /// Rules broken on purpose, for the tests that must catch them.
    faults: Faults,
    /// Closed while a PROMOTE puts lists in (`replicate.rs`).
    promoting: replicate::Gate,
    /// Slots whose updates also go to a rejoining server (`learn.rs`).
    learners: learn::Learners,
    /// Slots guarded here for a handover to their backup (`handover.rs`).
    handing: handover::Handing,
    /// Vertices whose last update here is in doubt (`handover.rs`).
    in_doubt: handover::InDoubt,
    recovery: recovery::RecoveryState,
    migrations_in: AtomicU64,
    migrated_bytes: AtomicU64,
    moving: moves::InFlight,
}

impl<F: Fabric> Node<F> {
    /// Creates this machine's regions (nothing is served yet), with the
    /// store settings of `[store]`.
    pub fn create(parts: NodeParts<F>) -> Result<Created<F>> {
        parts.config.store.validate()?;
        let store_config = parts.config.store.store_config();
        Self::create_with(parts, store_config)
    }

    /// [`Node::create`] with store settings already sized (an embedded
    /// cluster sizes its regions for the graph it loads).
    pub fn create_with(parts: NodeParts<F>, store_config: StoreConfig) -> Result<Created<F>> {
        store_config.validate()?;
        parts.config.validate_around(&store_config)?;
        let NodeParts {
            fabric,
            me,
            config,
            log,
            label,
            counters,
        } = parts;
        if !fabric.hosts(me) {
            return Err(crate::NodeError::setting(
                "node.me",
                me.to_string(),
                "the fabric must host this machine",
            ));
        }
        let fabric = match counters {
            Some(c) => Counting::with_counters(fabric, c),
            None => Counting::new(fabric),
        };
        let store = Store::create(fabric, store_config)?;
        Ok(Created {
            store,
            parts: NodeParts {
                fabric: (),
                me,
                config,
                log,
                label,
                counters: None,
            },
        })
    }

    /// Breaks protocol rules on purpose (tests only; see [`Faults`]).
    pub fn set_faults(&mut self, faults: Faults) {
        self.faults = faults;
        if let Some(b) = &self.backup {
            b.accept_stale
                .store(faults.accept_stale_primary, Ordering::Relaxed);
            b.copy_overwrites
                .store(faults.copy_overwrites, Ordering::Relaxed);
        }
    }

    /// A fault for tests (message loss): the next `n` requests this node
    /// stores as a backup are answered with an error, as if the answer
    /// were lost on the way; the primary's update is then in doubt while
    /// this backup holds it. No effect without a backup log.
    pub fn lose_backup_acks(&self, n: u64) {
        if let Some(b) = &self.backup {
            b.lose_acks.store(n, Ordering::Relaxed);
        }
    }

    /// Changes the store settings that live only in memory (see
    /// [`Store::reconfigure`]: no other handle on the store may exist).
    pub fn reconfigure(&mut self, store_config: StoreConfig) -> Result<()> {
        Ok(self.store.reconfigure(store_config)?)
    }

    /// This machine.
    pub fn me(&self) -> MachineId {
        self.me
    }

    /// Machines in the cluster.
    pub fn machines(&self) -> usize {
        self.machines
    }

    /// The store (over the fabric with exact counters).
    pub fn store(&self) -> &Store<Counting<F>> {
        &self.store
    }

    /// The settings.
    pub fn config(&self) -> &NodeConfig {
        &self.config
    }

    /// How error replies name this node.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Names this node differently from now on (a server learns its client
    /// address only after recovery).
    pub fn set_label(&mut self, label: String) {
        self.label = label;
    }

    /// Counts values migrated here by a migration executor.
    pub fn add_migrations_in(&self, parts: u64, bytes: u64) {
        self.migrations_in.fetch_add(parts, Ordering::Relaxed);
        self.migrated_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// A new session: a client connection's state (its worker, made on first use).
    pub fn session(&self) -> Session<F> {
        Session::new()
    }

    /// Writes a checkpoint (with `[durability]`, when something was logged
    /// since the last one) through `w`; the vertices written, if any (D3).
    pub fn checkpoint(&self, w: &mut Worker<Counting<F>>) -> Result<Option<u64>> {
        if let Some(b) = &self.backup {
            b.checkpoint()?;
        }
        match &self.durable {
            Some(d) => d.checkpoint(w),
            None => Ok(None),
        }
    }

    /// How often the checkpointer should run (with `[durability]`).
    pub fn checkpoint_interval(&self) -> Option<std::time::Duration> {
        self.durable.as_ref().map(|d| d.interval)
    }

    /// Values migrated here by MIGRATE requests, and their bytes.
    pub fn migrations_in(&self) -> (u64, u64) {
        (
            self.migrations_in.load(Ordering::Relaxed),
            self.migrated_bytes.load(Ordering::Relaxed),
        )
    }

    /// The log's counters and recovery, for STATS (None without `[durability]`).
    pub fn durability_json(&self) -> Option<serde_json::Value> {
        self.durable.as_ref().map(|d| d.stats_json())
    }

    /// Pragh 5 recovery's counters and last reports, for STATS.
    pub fn recovery_json(&self) -> serde_json::Value {
        self.recovery.stats_json()
    }
}

impl<F: Fabric + Fencing> Node<F> {
    /// Why this node answers nobody, if its incarnation ended (N1: its
    /// lease was lost, or a newer incarnation registered).
    pub fn fenced(&self) -> Option<String> {
        match self.store.fabric().is_fenced(self.me) {
            Ok(false) => None,
            Ok(true) => Some(format!(
                "fenced out: this incarnation (epoch {}) ended; it answers nothing",
                self.store.fabric().own_epoch(self.me).unwrap_or(0)
            )),
            Err(e) => Some(format!("fencing state unreadable: {e}")),
        }
    }

    /// Ends this incarnation (its lease was lost): from now on it answers
    /// no client and serves no peer (N1).
    pub fn fence(&self) -> Result<()> {
        Ok(self.store.fabric().fence(self.me)?)
    }

    /// A membership event about a peer, in the watch's order: the fabric's
    /// view of the peer first (ops to a dead incarnation fail at once; a
    /// rejoined one is admitted), then Pragh 5 (`recovery.rs`): on `Down`,
    /// [`Node::peer_failed`] with `recorded` (the keys the coordinator's
    /// record names with that peer as latest target); on `Up`,
    /// [`Node::peer_rejoined`].
    pub fn on_peer_event(&self, event: PeerEvent, recorded: &[locus_store::Key]) -> Result<()> {
        let f = self.store.fabric();
        match event {
            PeerEvent::Down { machine, epoch } => {
                f.mark_down(self.me, machine, epoch)?;
                self.peer_failed(machine, epoch, recorded).map(|_| ())
            }
            PeerEvent::Up { machine, epoch } => {
                f.set_peer_epoch(self.me, machine, epoch)?;
                self.peer_rejoined(machine, epoch).map(|_| ())
            }
        }
    }
}
