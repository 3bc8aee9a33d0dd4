//! Reads a backup may answer (`--read stale-ok`; issue 60, requirement 4;
//! docs/design.md "Replication and failover"). A backup's copy of a list
//! may lag its primary's by the updates in flight, and while a failover
//! has not finished it may be all that answers; the reply says where it
//! was read.

use crate::proto::{Reply, Request};
use crate::{Client, ClientError, Result};

/// Where a stale-ok read was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadFrom {
    /// Read at the slot's primary, as [`Client::neighbors`] reads
    /// (linearizable), through server N.
    Primary(u8),
    /// Server N's backup copy of the slot: it may lag the primary.
    Backup(u8),
}

impl std::fmt::Display for ReadFrom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadFrom::Primary(id) => write!(f, "the primary (through server {id})"),
            ReadFrom::Backup(id) => write!(f, "server {id}'s backup copy (may be stale)"),
        }
    }
}

impl Client {
    /// Up to `k` of `v`'s neighbours (0: all), read by a backup of its slot
    /// if one answers, else at its primary as [`Client::neighbors`] reads
    /// them; with where they were read. A backup that cannot be reached is
    /// passed over; any other error (an unknown vertex among them) is the
    /// answer.
    pub fn neighbors_stale_ok(&self, v: u32, k: u32) -> Result<(Vec<u32>, ReadFrom)> {
        let t = self.slot_table()?;
        for &b in t.backups_of_slot(t.slot_of(v)) {
            let req = Request::StaleNeighbors { vertex: v, k };
            match self.call(b, &req, None) {
                Ok(Reply::StaleNeighbors { from_backup, ids }) => {
                    let from = if from_backup {
                        ReadFrom::Backup(b)
                    } else {
                        ReadFrom::Primary(b)
                    };
                    return Ok((ids, from));
                }
                Ok(r) => return Err(self.unexpected(b, r)),
                Err(ClientError::Unavailable { .. } | ClientError::Deadline { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
        let ids = self.neighbors(v, k)?;
        Ok((ids, ReadFrom::Primary(self.home(v))))
    }
}
