//! The coordinator's election (invariant 6 of the crate doc), on etcd's
//! election API under `P/coordinator`.

use std::time::Duration;

use crossbeam_channel::Receiver;

use crate::client::Membership;
use crate::error::{MembershipError, Result};
use crate::lease::Lease;

/// The current leader, as others see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    /// Its value (the coordinator's control address).
    pub value: String,
    /// Its term: the create revision of its leader key, strictly greater for
    /// every later leader.
    pub term: i64,
}

/// Leadership held by this process, under its own lease. Dropping it revokes
/// the lease, so a standby takes over at once.
#[derive(Debug)]
pub struct Leadership {
    term: i64,
    lease: Lease,
}

impl Leadership {
    /// This leader's term (see [`Leader::term`]).
    pub fn term(&self) -> i64 {
        self.term
    }

    /// Whether leadership is surely still held (see [`Lease::is_live`]).
    pub fn is_live(&self) -> bool {
        self.lease.is_live()
    }

    /// Stops renewing the lease without revoking it, as if this process had
    /// been killed: a standby takes over after the TTL (for tests).
    pub fn stop_renewing(&self) {
        self.lease.stop_renewing();
    }

    /// Receives the reason once the leadership's lease is lost.
    pub fn lost(&self) -> &Receiver<String> {
        self.lease.lost()
    }
}

impl Membership {
    fn election_name(&self) -> String {
        self.key("coordinator")
    }

    /// Campaigns for the coordinator's leadership with `value` (its control
    /// address) and blocks until it leads: at once if nobody does, else when
    /// the leader resigns or its lease ends. `stop` is polled every second
    /// while waiting; when it returns true the campaign is abandoned
    /// (`Ok(None)`).
    pub fn campaign(&self, value: &str, stop: &dyn Fn() -> bool) -> Result<Option<Leadership>> {
        let lease = self.grant("the coordinator")?;
        let name = self.election_name();
        loop {
            if stop() {
                return Ok(None);
            }
            if !lease.is_live() {
                return Err(MembershipError::LeaseLost {
                    who: "a coordinator campaigning".into(),
                    reason: "the campaign's lease ran out".into(),
                });
            }
            let mut c = self.client.clone();
            let (n, v, id) = (name.clone(), value.to_string(), lease.id());
            // A campaign blocks inside etcd until it wins; wake every second to poll `stop`.
            let won = self.rt.block_on(async {
                let mut fut = Box::pin(c.campaign(n, v, id));
                loop {
                    match tokio::time::timeout(Duration::from_secs(1), &mut fut).await {
                        Ok(r) => return Some(r),
                        Err(_) if stop() => return None,
                        Err(_) => {}
                    }
                }
            });
            match won {
                None => return Ok(None),
                Some(Ok(r)) => {
                    let term = r
                        .leader()
                        .map(|k| k.rev())
                        .ok_or_else(|| MembershipError::etcd("campaigning", "no leader key"))?;
                    tracing::info!(term, value, "leading as coordinator");
                    return Ok(Some(Leadership { term, lease }));
                }
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "campaign failed; retrying");
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
    }

    /// The current leader, if any.
    pub fn leader(&self) -> Result<Option<Leader>> {
        let mut c = self.client.clone();
        let name = self.election_name();
        let r = self.rt.block_on(async {
            tokio::time::timeout(crate::client::OP_TIMEOUT, c.leader(name)).await
        });
        match r {
            Err(_) => Err(MembershipError::Timeout {
                action: "reading the coordinator leader".into(),
                ms: crate::client::OP_TIMEOUT.as_millis() as u64,
            }),
            Ok(Ok(resp)) => Ok(resp.kv().map(|kv| Leader {
                value: String::from_utf8_lossy(kv.value()).into_owned(),
                term: kv.create_revision(),
            })),
            Ok(Err(e)) if e.to_string().contains("no leader") => Ok(None),
            Ok(Err(e)) => Err(MembershipError::etcd("reading the coordinator leader", e)),
        }
    }
}
