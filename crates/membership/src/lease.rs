//! A lease kept alive by a task on the membership runtime, and a
//! [`Registration`] (a machine's membership under its lease).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use etcd_client::Client;

use crate::client::Membership;

/// What the keepalive task and the holder share.
#[derive(Debug)]
struct State {
    base: Instant,
    /// Milliseconds after `base` until which the lease is surely alive
    /// (the send time of the last renewal etcd acknowledged, plus its TTL).
    deadline_ms: AtomicU64,
    lost: AtomicBool,
    lost_tx: Sender<String>,
}

impl State {
    fn now_ms(&self) -> u64 {
        self.base.elapsed().as_millis() as u64
    }

    /// See [`Lease::is_live`].
    fn is_live(&self) -> bool {
        !self.lost.load(Ordering::Acquire)
            && self.now_ms() < self.deadline_ms.load(Ordering::Acquire)
    }

    fn lose(&self, who: &str, reason: String) {
        if !self.lost.swap(true, Ordering::AcqRel) {
            tracing::error!(who, %reason, "etcd lease lost: fenced out");
            let _ = self.lost_tx.send(reason);
        }
    }
}

/// A granted lease and the task renewing it every third of its TTL. Dropping
/// it stops renewing and revokes the lease (best effort, at most 1 s), so a
/// cleanly stopping member leaves at once instead of after the TTL.
pub struct Lease {
    id: i64,
    who: String,
    state: Arc<State>,
    lost_rx: Receiver<String>,
    task: tokio::task::JoinHandle<()>,
    rt: Arc<tokio::runtime::Runtime>,
    client: Client,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("id", &self.id)
            .field("who", &self.who)
            .field("live", &self.is_live())
            .finish()
    }
}

impl Lease {
    pub(crate) fn start(m: &Membership, id: i64, who: String, sent: Instant) -> Lease {
        let ttl = Duration::from_secs(m.cfg.lease_ttl_s);
        let (lost_tx, lost_rx) = crossbeam_channel::bounded(1);
        let state = Arc::new(State {
            base: sent,
            deadline_ms: AtomicU64::new(ttl.as_millis() as u64),
            lost: AtomicBool::new(false),
            lost_tx,
        });
        let task = m.rt.spawn(keep_alive(
            m.client.clone(),
            id,
            ttl,
            Arc::clone(&state),
            who.clone(),
        ));
        Lease {
            id,
            who,
            state,
            lost_rx,
            task,
            rt: Arc::clone(&m.rt),
            client: m.client.clone(),
        }
    }

    /// etcd's lease id.
    pub fn id(&self) -> i64 {
        self.id
    }

    /// Whether the lease is surely still held: not reported lost, and the
    /// last acknowledged renewal was sent less than a TTL ago (invariant 3).
    pub fn is_live(&self) -> bool {
        self.state.is_live()
    }

    /// [`Lease::is_live`] as a closure of its own, for a fabric to check per
    /// operation (`TcpFabric::hold_lease`): by its own clock, so a process
    /// resumed after a pause past the TTL is dead at once, before any thread
    /// of it has noticed.
    pub fn liveness(&self) -> impl Fn() -> bool + Send + Sync + 'static {
        let state = Arc::clone(&self.state);
        move || state.is_live()
    }

    /// Receives one message, the reason, when the lease is lost.
    pub fn lost(&self) -> &Receiver<String> {
        &self.lost_rx
    }

    /// Stops renewing without revoking: the lease runs out after its TTL as if
    /// this process had stopped (for tests of failure detection).
    pub fn stop_renewing(&self) {
        self.task.abort();
    }

    /// Who holds it, for messages.
    pub fn who(&self) -> &str {
        &self.who
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.task.abort();
        let mut c = self.client.clone();
        let id = self.id;
        let _ = self.rt.block_on(async move {
            tokio::time::timeout(Duration::from_secs(1), c.lease_revoke(id)).await
        });
    }
}

/// Renews the lease until it is lost; the state's deadline follows each
/// acknowledged renewal.
async fn keep_alive(client: Client, id: i64, ttl: Duration, state: Arc<State>, who: String) {
    let every = (ttl / 3).max(Duration::from_millis(100));
    let mut stream = None;
    loop {
        let now = state.now_ms();
        let deadline = state.deadline_ms.load(Ordering::Acquire);
        if now >= deadline {
            return state.lose(
                &who,
                format!(
                    "no renewal acknowledged for {} ms (the TTL): the process was stopped or \
                     etcd was unreachable",
                    ttl.as_millis()
                ),
            );
        }
        let left = Duration::from_millis(deadline - now);
        if stream.is_none() {
            let mut c = client.clone();
            if let Ok(Ok(s)) = tokio::time::timeout(left, c.lease_keep_alive(id)).await {
                stream = Some(s);
            }
        }
        if let Some((keeper, replies)) = stream.as_mut() {
            let sent = state.now_ms();
            let renewed = tokio::time::timeout(left, async {
                keeper.keep_alive().await?;
                replies.message().await
            })
            .await;
            match renewed {
                Ok(Ok(Some(r))) if r.ttl() > 0 => {
                    let until = sent + (r.ttl() as u64) * 1000;
                    state.deadline_ms.fetch_max(until, Ordering::AcqRel);
                }
                Ok(Ok(Some(_))) => {
                    return state.lose(&who, format!("etcd says lease {id:x} has expired"));
                }
                _ => stream = None,
            }
        }
        let now = state.now_ms();
        let deadline = state.deadline_ms.load(Ordering::Acquire);
        let nap = every.min(Duration::from_millis(deadline.saturating_sub(now)));
        tokio::time::sleep(nap.max(Duration::from_millis(10))).await;
    }
}

/// A machine's membership: its epoch, under a kept-alive lease. Dropping it
/// revokes the lease (the machine leaves).
#[derive(Debug)]
pub struct Registration {
    machine: u8,
    epoch: u64,
    lease: Lease,
}

impl Registration {
    pub(crate) fn new(machine: u8, epoch: u64, lease: Lease) -> Self {
        Registration {
            machine,
            epoch,
            lease,
        }
    }

    /// The machine.
    pub fn machine(&self) -> u8 {
        self.machine
    }

    /// This incarnation's epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The lease.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// See [`Lease::is_live`].
    pub fn is_live(&self) -> bool {
        self.lease.is_live()
    }

    /// See [`Lease::lost`].
    pub fn lost(&self) -> &Receiver<String> {
        self.lease.lost()
    }
}
