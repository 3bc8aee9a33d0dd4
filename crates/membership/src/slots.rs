//! The cluster's slot table in etcd (issue 59): `P/slots` holds its wire
//! form (`locus_placement::slots`; this crate keeps the bytes and leaves
//! their meaning to its callers). The first server to start puts the table
//! its cluster file makes, if none is there; every later one reads what is
//! there, so a table changed by moves outlives the file.

use etcd_client::{Compare, CompareOp, Txn, TxnOp, TxnOpResponse};

use crate::client::Membership;
use crate::error::{MembershipError, Result};

impl Membership {
    fn slots_key(&self) -> String {
        self.key("slots")
    }

    /// The table kept in etcd (None: no table yet).
    pub fn slots_load(&self) -> Result<Option<Vec<u8>>> {
        let mut c = self.client.clone();
        let r = self.block("reading the slot table", c.get(self.slots_key(), None))?;
        Ok(r.kvs().first().map(|kv| kv.value().to_vec()))
    }

    /// Puts `initial` as the table if etcd holds none, in one transaction;
    /// returns the table etcd holds afterwards (`initial`, or the one another
    /// server put first).
    pub fn slots_create(&self, initial: &[u8]) -> Result<Vec<u8>> {
        let key = self.slots_key();
        let txn = Txn::new()
            .when([Compare::version(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key.clone(), initial.to_vec(), None)])
            .or_else([TxnOp::get(key.clone(), None)]);
        let mut c = self.client.clone();
        let r = self.block("creating the slot table", c.txn(txn))?;
        if r.succeeded() {
            return Ok(initial.to_vec());
        }
        r.op_responses()
            .into_iter()
            .find_map(|op| match op {
                TxnOpResponse::Get(g) => g.kvs().first().map(|kv| kv.value().to_vec()),
                _ => None,
            })
            .ok_or_else(|| {
                MembershipError::etcd(
                    "creating the slot table",
                    "etcd said a table exists but returned none",
                )
            })
    }

    /// Replaces the table by `new` if etcd still holds `expected`, each
    /// `(machine, epoch)` of `fences` is still that machine's last epoch
    /// (no new incarnation of it started), and `mover` (a
    /// [`crate::MoverLock`]'s token) still holds `P/mover` (MV2: a slot
    /// move's commit point, docs/design.md "Moves across servers");
    /// returns whether it did.
    pub fn slots_swap(
        &self,
        expected: &[u8],
        new: &[u8],
        fences: &[(u8, u64)],
        mover: Option<&str>,
    ) -> Result<bool> {
        let key = self.slots_key();
        let mut when = vec![Compare::value(
            key.clone(),
            CompareOp::Equal,
            expected.to_vec(),
        )];
        if let Some(token) = mover {
            when.push(self.mover_held(token));
        }
        for &(m, epoch) in fences {
            when.push(Compare::value(
                self.key(&format!("epochs/{m:03}")),
                CompareOp::Equal,
                epoch.to_string(),
            ));
        }
        let txn = Txn::new()
            .when(when)
            .and_then([TxnOp::put(key, new.to_vec(), None)]);
        let mut c = self.client.clone();
        let r = self.block("committing the slot table", c.txn(txn))?;
        Ok(r.succeeded())
    }

    /// Overwrites the table without a guard: tests that play the part of a
    /// coordinator changing it (moves will change it in a transaction
    /// guarded by the leader's term).
    pub fn slots_replace_for_tests(&self, table: &[u8]) -> Result<()> {
        let mut c = self.client.clone();
        self.block(
            "replacing the slot table",
            c.put(self.slots_key(), table.to_vec(), None),
        )?;
        Ok(())
    }
}
