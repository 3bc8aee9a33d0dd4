//! The coordinator's record of migration targets in etcd (invariant 5 of the
//! crate doc): `P/record/<key, 20 digits>` = target machine.

use etcd_client::{GetOptions, Txn, TxnOp};

use crate::client::{parse_u64, Membership};
use crate::error::{MembershipError, Result};
use crate::TXN_OPS_MAX;

/// Entries read per range request (bounded so a large record never exceeds
/// gRPC's message limit).
const PAGE: i64 = 10_000;

impl Membership {
    fn record_prefix(&self) -> String {
        self.key("record/")
    }

    /// Durably records each (key, latest target): returns after etcd
    /// committed all of them, in transactions of at most [`TXN_OPS_MAX`].
    pub fn record_persist(&self, entries: &[(u64, u8)]) -> Result<()> {
        let prefix = self.record_prefix();
        for chunk in entries.chunks(TXN_OPS_MAX) {
            let ops: Vec<TxnOp> = chunk
                .iter()
                .map(|&(k, t)| TxnOp::put(format!("{prefix}{k:020}"), t.to_string(), None))
                .collect();
            let mut c = self.client.clone();
            self.block(
                &format!("persisting {} approvals", chunk.len()),
                c.txn(Txn::new().and_then(ops)),
            )?;
        }
        Ok(())
    }

    /// Every recorded (key, latest target), by key.
    pub fn record_load(&self) -> Result<Vec<(u64, u8)>> {
        let prefix = self.record_prefix();
        let end = format!("{}0", &prefix[..prefix.len() - 1]); // '/' + 1 = '0'
        let mut out = Vec::new();
        let mut from = prefix.clone();
        let mut rev = 0;
        loop {
            let mut opts = GetOptions::new().with_range(end.clone()).with_limit(PAGE);
            if rev > 0 {
                opts = opts.with_revision(rev);
            }
            let mut c = self.client.clone();
            let r = self.block(
                "loading the migration record",
                c.get(from.clone(), Some(opts)),
            )?;
            if rev == 0 {
                rev = r.header().map_or(0, |h| h.revision());
            }
            for kv in r.kvs() {
                let k = String::from_utf8_lossy(kv.key()).into_owned();
                let key = k
                    .strip_prefix(&prefix)
                    .and_then(|s| s.parse::<u64>().ok())
                    .ok_or_else(|| MembershipError::Corrupt {
                        key: k.clone(),
                        value: String::from_utf8_lossy(kv.value()).into_owned(),
                        expected: "a record key ending in a store key",
                    })?;
                let target = parse_u64(&k, kv.value(), "a machine id")?;
                let target = u8::try_from(target).map_err(|_| MembershipError::Corrupt {
                    key: k.clone(),
                    value: target.to_string(),
                    expected: "a machine id (0..=255)",
                })?;
                out.push((key, target));
            }
            match r.kvs().last() {
                Some(last) if r.more() => {
                    let mut next = last.key().to_vec();
                    next.push(0);
                    from = String::from_utf8_lossy(&next).into_owned();
                }
                _ => return Ok(out),
            }
        }
    }

    /// The keys whose latest recorded target is `machine`.
    pub fn record_keys_targeting(&self, machine: u8) -> Result<Vec<u64>> {
        Ok(self
            .record_load()?
            .into_iter()
            .filter(|&(_, t)| t == machine)
            .map(|(k, _)| k)
            .collect())
    }
}
