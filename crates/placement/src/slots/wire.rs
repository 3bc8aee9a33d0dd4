//! The slot table's wire form, versions 1 and 2 (the diagram is the
//! `slots` module doc). Decoding checks every field and names the byte at
//! fault; a count is checked against the bytes left before it is trusted.

use super::{check_replication, check_shape, Backups, SlotTable, BACKUPS_MAX};
use crate::error::{PlacementError, Result};

const MAGIC: &[u8; 4] = b"LSLT";
/// Owners only: R = 1 and every primary epoch 1.
const VERSION_OWNERS: u16 = 1;
/// Owners, R, and per slot a primary epoch and backups.
const VERSION_REPLICATED: u16 = 2;
pub(super) const HEADER_BYTES: usize = 20;
/// A slot's primary epoch and backup count, before its backups.
const SLOT_ENTRY_BYTES_MIN: usize = 4 + 1;

fn malformed(at: usize, what: String) -> PlacementError {
    PlacementError::Malformed { at, what }
}

impl SlotTable {
    /// The wire form (see the module doc): version 1 when it can say all,
    /// version 2 otherwise.
    pub fn encode(&self) -> Vec<u8> {
        let v1 = self.replication == 1 && self.primary_epochs.iter().all(|&e| e == 1);
        let version = if v1 {
            VERSION_OWNERS
        } else {
            VERSION_REPLICATED
        };
        let mut b = Vec::with_capacity(HEADER_BYTES + self.owners.len());
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&version.to_le_bytes());
        b.extend_from_slice(&self.machines.to_le_bytes());
        b.extend_from_slice(&self.epoch.to_le_bytes());
        b.extend_from_slice(&self.slots().to_le_bytes());
        b.extend_from_slice(&self.owners);
        if v1 {
            return b;
        }
        b.push(self.replication);
        for (e, backups) in self.primary_epochs.iter().zip(&self.backups) {
            b.extend_from_slice(&e.to_le_bytes());
            b.push(backups.len);
            b.extend_from_slice(backups.as_slice());
        }
        b
    }

    /// Reads the wire form (either version), checking every field; an error
    /// names the byte.
    pub fn decode(b: &[u8]) -> Result<SlotTable> {
        if b.len() < HEADER_BYTES {
            return Err(malformed(
                b.len(),
                format!(
                    "{} bytes, shorter than the {HEADER_BYTES}-byte header",
                    b.len()
                ),
            ));
        }
        if &b[0..4] != MAGIC {
            return Err(malformed(0, format!("magic {:?}, not \"LSLT\"", &b[0..4])));
        }
        let version = u16::from_le_bytes([b[4], b[5]]);
        if version != VERSION_OWNERS && version != VERSION_REPLICATED {
            return Err(malformed(
                4,
                format!(
                    "version {version}, this build reads {VERSION_OWNERS} and {VERSION_REPLICATED}"
                ),
            ));
        }
        let machines = u16::from_le_bytes([b[6], b[7]]);
        let epoch = u64::from_le_bytes(b[8..16].try_into().expect("8 bytes"));
        let slots = u32::from_le_bytes(b[16..20].try_into().expect("4 bytes"));
        check_shape(slots, machines).map_err(|e| malformed(6, e.to_string()))?;
        let slots = slots as usize;
        let rest = &b[HEADER_BYTES..];
        let owners_fit = if version == VERSION_OWNERS {
            rest.len() == slots
        } else {
            rest.len() >= slots
        };
        if !owners_fit {
            return Err(malformed(
                HEADER_BYTES,
                format!("{} owner bytes for {slots} slots", rest.len()),
            ));
        }
        let owners = &rest[..slots];
        if let Some(i) = owners.iter().position(|&o| u16::from(o) >= machines) {
            return Err(malformed(
                HEADER_BYTES + i,
                format!(
                    "slot {i}'s owner {} is not below {machines} machines",
                    owners[i]
                ),
            ));
        }
        let mut t = SlotTable::unreplicated(epoch, machines, owners.to_vec());
        if version == VERSION_REPLICATED {
            t.decode_replication(b, HEADER_BYTES + slots)?;
        }
        debug_assert!(t.rules_hold());
        Ok(t)
    }

    /// Reads version 2's R and slot entries from `b[at..]` into `self`
    /// (owners read and checked).
    fn decode_replication(&mut self, b: &[u8], mut at: usize) -> Result<()> {
        let r = *b.get(at).ok_or_else(|| {
            malformed(
                at,
                "no replication byte after the owners (version 2)".into(),
            )
        })?;
        check_replication(r).map_err(|e| malformed(at, e.to_string()))?;
        at += 1;
        for slot in 0..self.owners.len() {
            if b.len() - at < SLOT_ENTRY_BYTES_MIN {
                return Err(malformed(
                    b.len(),
                    format!(
                        "slot {slot}'s entry at byte {at}: {} bytes left, {SLOT_ENTRY_BYTES_MIN} needed",
                        b.len() - at
                    ),
                ));
            }
            let e = u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
            if e == 0 {
                return Err(malformed(
                    at,
                    format!("slot {slot}'s primary epoch is 0, not at least 1"),
                ));
            }
            let n = usize::from(b[at + 4]);
            if n > usize::from(r - 1) {
                return Err(malformed(
                    at + 4,
                    format!("slot {slot} has {n} backups, more than R - 1 = {}", r - 1),
                ));
            }
            at += SLOT_ENTRY_BYTES_MIN;
            if b.len() - at < n {
                return Err(malformed(
                    b.len(),
                    format!(
                        "slot {slot}'s {n} backups at byte {at}: {} bytes left",
                        b.len() - at
                    ),
                ));
            }
            let list = &b[at..at + n];
            debug_assert!(list.len() <= BACKUPS_MAX);
            for (i, &m) in list.iter().enumerate() {
                let why = if u16::from(m) >= self.machines {
                    format!("is not below {} machines", self.machines)
                } else if m == self.owners[slot] {
                    "is its owner".into()
                } else if list[..i].contains(&m) {
                    "is named twice".into()
                } else {
                    continue;
                };
                return Err(malformed(at + i, format!("slot {slot}'s backup {m} {why}")));
            }
            self.primary_epochs[slot] = e;
            self.backups[slot] = Backups::of(list);
            at += n;
        }
        if at != b.len() {
            return Err(malformed(
                at,
                format!("{} bytes past the last slot", b.len() - at),
            ));
        }
        self.replication = r;
        Ok(())
    }
}
