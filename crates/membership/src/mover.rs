//! One slot-move driver at a time (issue 59; docs/design.md "One mover at a
//! time, and the coordinator settles what a dead one left", MV1-MV3):
//! `P/mover` names the driver holding it, under that driver's lease, and a
//! slot table commits only under it ([`Membership::slots_swap`]).

use etcd_client::{Compare, CompareOp, PutOptions, Txn, TxnOp, TxnOpResponse};

use crate::client::Membership;
use crate::error::{MembershipError, Result};
use crate::lease::Lease;

/// `P/mover`, held: dropping it revokes its lease, so the key goes at once
/// (a killed holder's goes when the lease's TTL ends).
#[derive(Debug)]
pub struct MoverLock {
    token: String,
    lease: Lease,
}

impl MoverLock {
    /// What `P/mover` holds while this lock is held: the holder's name and
    /// its lease id (unique, so a later holder's token differs).
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Whether the lock is surely still held ([`Lease::is_live`]).
    pub fn is_live(&self) -> bool {
        self.lease.is_live()
    }

    /// Stops renewing the lease without revoking it, as if the holder had
    /// been killed: the key goes after the TTL (for tests).
    pub fn stop_renewing(&self) {
        self.lease.stop_renewing();
    }
}

impl Membership {
    fn mover_key(&self) -> String {
        self.key("mover")
    }

    /// Takes `P/mover` for `who` (MV1), or fails with [`MembershipError::MoverBusy`]
    /// naming the holder.
    pub fn mover_acquire(&self, who: &str) -> Result<MoverLock> {
        let lease = self.grant(&format!("the slot mover ({who})"))?;
        let token = format!("{who} (lease {:x})", lease.id());
        let key = self.mover_key();
        let txn = Txn::new()
            .when([Compare::version(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                key.clone(),
                token.clone(),
                Some(PutOptions::new().with_lease(lease.id())),
            )])
            .or_else([TxnOp::get(key.clone(), None)]);
        let mut c = self.client.clone();
        let r = self.block("taking the slot mover's lock", c.txn(txn))?;
        if r.succeeded() {
            return Ok(MoverLock { token, lease });
        }
        let holder = r
            .op_responses()
            .into_iter()
            .find_map(|op| match op {
                TxnOpResponse::Get(g) => g
                    .kvs()
                    .first()
                    .map(|kv| String::from_utf8_lossy(kv.value()).into_owned()),
                _ => None,
            })
            .unwrap_or_else(|| "a holder that just left".into());
        Err(MembershipError::MoverBusy { holder })
    }

    /// Who holds `P/mover`, if anyone.
    pub fn mover_holder(&self) -> Result<Option<String>> {
        let mut c = self.client.clone();
        let r = self.block(
            "reading the slot mover's lock",
            c.get(self.mover_key(), None),
        )?;
        Ok(r.kvs()
            .first()
            .map(|kv| String::from_utf8_lossy(kv.value()).into_owned()))
    }

    fn goal_key(&self) -> String {
        self.key("moves/goal")
    }

    /// Puts `goal` (what the driver holding `P/mover` under `token` is
    /// doing, for the coordinator to finish if it dies: MV4) if `token`
    /// still holds the lock; returns whether it did.
    pub fn goal_put(&self, token: &str, goal: &[u8]) -> Result<bool> {
        let txn = Txn::new()
            .when([self.mover_held(token)])
            .and_then([TxnOp::put(self.goal_key(), goal.to_vec(), None)]);
        let mut c = self.client.clone();
        Ok(self
            .block("recording the slot mover's goal", c.txn(txn))?
            .succeeded())
    }

    /// Deletes the goal if `token` still holds the lock; returns whether it did.
    pub fn goal_delete(&self, token: &str) -> Result<bool> {
        let txn = Txn::new()
            .when([self.mover_held(token)])
            .and_then([TxnOp::delete(self.goal_key(), None)]);
        let mut c = self.client.clone();
        Ok(self
            .block("clearing the slot mover's goal", c.txn(txn))?
            .succeeded())
    }

    /// The goal a driver left, if any.
    pub fn goal_load(&self) -> Result<Option<Vec<u8>>> {
        let mut c = self.client.clone();
        let r = self.block(
            "reading the slot mover's goal",
            c.get(self.goal_key(), None),
        )?;
        Ok(r.kvs().first().map(|kv| kv.value().to_vec()))
    }

    /// The comparison that holds while `token` holds `P/mover` (MV2).
    pub(crate) fn mover_held(&self, token: &str) -> Compare {
        Compare::value(
            self.mover_key(),
            CompareOp::Equal,
            token.as_bytes().to_vec(),
        )
    }
}
