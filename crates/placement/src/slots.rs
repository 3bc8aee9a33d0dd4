//! The slot table: which server owns each slot, at which epoch (issue 59
//! requirement 1; the design is `docs/design.md`, "The elastic cluster").
//!
//! `slot(v) = v % slots`; every part of a decomposed vertex has its vertex's
//! slot. The slot count is fixed when a cluster is made; owners change only
//! by moves, each change a new epoch. The table is kept in etcd and served
//! to clients; a reader's copy is a hint, checked by the servers (E1-E6).
//!
//! Wire form (little-endian), as etcd keeps it and the client protocol
//! carries it:
//!
//! ```text
//!  offset  bytes  field
//!  0       4      magic "LSLT"
//!  4       2      version (1)
//!  6       2      machines: owners are below it, 1..=MACHINES_MAX
//!  8       8      epoch
//!  16      4      slots, 1..=SLOTS_MAX
//!  20      slots  owner of each slot, one byte
//! ```

use crate::error::{PlacementError, Result};

/// Slots of a new cluster unless configured.
pub const SLOTS_DEFAULT: u32 = 4096;
/// Most slots a table may have.
pub const SLOTS_MAX: u32 = 1 << 16;
/// Most machines (a machine id is one byte, below 128 as the fabric's).
pub const MACHINES_MAX: u16 = 128;

const MAGIC: &[u8; 4] = b"LSLT";
const VERSION: u16 = 1;
const HEADER_BYTES: usize = 20;

/// A machine's id, as the fabric numbers machines.
pub type Machine = u8;

/// One slot handed from one owner to another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SlotMove {
    /// The slot.
    pub slot: u32,
    /// Its owner now.
    pub from: Machine,
    /// Its owner after the move.
    pub to: Machine,
}

/// The slot table (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotTable {
    epoch: u64,
    machines: u16,
    owners: Vec<Machine>,
}

impl SlotTable {
    /// A table at epoch 1 of `slots` slots over `machines` machines, slot `s`
    /// owned by `s % machines`.
    pub fn uniform(slots: u32, machines: u16) -> Result<SlotTable> {
        SlotTable::uniform_among(slots, machines, machines)
    }

    /// A table at epoch 1 of `slots` slots over the first `servers` of
    /// `machines` machines, slot `s` owned by `s % servers`: a cluster made
    /// with room for `machines - servers` servers added later.
    pub fn uniform_among(slots: u32, machines: u16, servers: u16) -> Result<SlotTable> {
        check_shape(slots, machines)?;
        if servers == 0 || servers > machines {
            return Err(invalid(
                "servers",
                servers.to_string(),
                format!("1..={machines} (the machines the cluster may have)"),
            ));
        }
        Ok(SlotTable {
            epoch: 1,
            machines,
            owners: (0..slots)
                .map(|s| (s % servers as u32) as Machine)
                .collect(),
        })
    }

    /// A table of the given owners at `epoch` (a table read back from a
    /// live copy); every owner must be below `machines`.
    pub fn from_owners(epoch: u64, machines: u16, owners: Vec<Machine>) -> Result<SlotTable> {
        check_shape(owners.len() as u32, machines)?;
        if let Some(i) = owners.iter().position(|&o| u16::from(o) >= machines) {
            return Err(invalid(
                "owner",
                owners[i].to_string(),
                format!("slot {i}'s owner below {machines} machines"),
            ));
        }
        Ok(SlotTable {
            epoch,
            machines,
            owners,
        })
    }

    /// The owner of every slot, in slot order.
    pub fn owners(&self) -> &[Machine] {
        &self.owners
    }

    /// The epoch: every change of an owner makes a new one.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Slots.
    pub fn slots(&self) -> u32 {
        self.owners.len() as u32
    }

    /// The bound on owners' ids (the machines the cluster may have).
    pub fn machines(&self) -> u16 {
        self.machines
    }

    /// `v`'s slot.
    #[inline]
    pub fn slot_of(&self, v: u32) -> u32 {
        v % self.owners.len() as u32
    }

    /// The owner of `v`'s slot: `v`'s home.
    #[inline]
    pub fn owner_of(&self, v: u32) -> Machine {
        self.owners[self.slot_of(v) as usize]
    }

    /// The owner of `slot` (None past the last slot).
    pub fn owner_of_slot(&self, slot: u32) -> Option<Machine> {
        self.owners.get(slot as usize).copied()
    }

    /// How many slots each machine below [`SlotTable::machines`] owns.
    pub fn counts(&self) -> Vec<u32> {
        let mut c = vec![0u32; self.machines as usize];
        for &o in &self.owners {
            c[o as usize] += 1;
        }
        c
    }

    /// The table after `moves`, at the next epoch. Each move must name its
    /// slot's present owner, a slot at most once, and a machine in range.
    pub fn after(&self, moves: &[SlotMove]) -> Result<SlotTable> {
        let mut next = self.clone();
        let mut seen = std::collections::HashSet::new();
        for m in moves {
            let owner = self.owner_of_slot(m.slot).ok_or_else(|| {
                invalid(
                    "move.slot",
                    m.slot.to_string(),
                    format!("below {}", self.slots()),
                )
            })?;
            if owner != m.from {
                return Err(invalid(
                    "move.from",
                    m.from.to_string(),
                    format!("slot {}'s owner, {owner}", m.slot),
                ));
            }
            if u16::from(m.to) >= self.machines {
                return Err(invalid(
                    "move.to",
                    m.to.to_string(),
                    format!("below {}", self.machines),
                ));
            }
            if !seen.insert(m.slot) {
                return Err(invalid(
                    "move.slot",
                    m.slot.to_string(),
                    "named once".into(),
                ));
            }
            next.owners[m.slot as usize] = m.to;
        }
        next.epoch = self.epoch + 1;
        Ok(next)
    }

    /// The fewest slot moves that leave every slot with a machine of
    /// `members` and the members' counts within one of each other: a
    /// machine that leaves gives all its slots, one that holds more than
    /// its share gives the excess, and the shares rounded up go to the
    /// members holding most now. Deterministic; the slots given are each
    /// giver's highest.
    pub fn balance(&self, members: &[Machine]) -> Result<Vec<SlotMove>> {
        let mut members = members.to_vec();
        members.sort_unstable();
        members.dedup();
        if members.is_empty() {
            return Err(invalid(
                "members",
                "[]".into(),
                "at least one machine".into(),
            ));
        }
        if let Some(&m) = members.iter().find(|&&m| u16::from(m) >= self.machines) {
            return Err(invalid(
                "members",
                m.to_string(),
                format!("machines below {}", self.machines),
            ));
        }
        let counts = self.counts();
        let n = members.len() as u32;
        let (base, extra) = (self.slots() / n, self.slots() % n);
        // Members holding most get the rounded-up shares: fewest moves.
        let mut by_count = members.clone();
        by_count.sort_by_key(|&m| (std::cmp::Reverse(counts[m as usize]), m));
        let mut target = vec![0u32; self.machines as usize];
        for (i, &m) in by_count.iter().enumerate() {
            target[m as usize] = base + u32::from((i as u32) < extra);
        }
        // Slots given, highest first per giver, givers in id order.
        let mut given: Vec<(u32, Machine)> = Vec::new();
        let mut keep = target.clone();
        for s in (0..self.slots()).rev() {
            let o = self.owners[s as usize];
            if keep[o as usize] > 0 {
                keep[o as usize] -= 1;
            } else {
                given.push((s, o));
            }
        }
        given.sort_unstable_by_key(|&(s, o)| (o, s));
        let mut moves = Vec::with_capacity(given.len());
        let mut receivers = members.iter().flat_map(|&m| {
            let lack = target[m as usize].saturating_sub(counts[m as usize]);
            std::iter::repeat_n(m, lack as usize)
        });
        for (slot, from) in given {
            let to = receivers
                .next()
                .expect("slots given equal slots lacking: both sum to the excess");
            moves.push(SlotMove { slot, from, to });
        }
        debug_assert!(receivers.next().is_none());
        Ok(moves)
    }

    /// The wire form (see the module doc).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(HEADER_BYTES + self.owners.len());
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&VERSION.to_le_bytes());
        b.extend_from_slice(&self.machines.to_le_bytes());
        b.extend_from_slice(&self.epoch.to_le_bytes());
        b.extend_from_slice(&self.slots().to_le_bytes());
        b.extend_from_slice(&self.owners);
        b
    }

    /// Reads the wire form, checking every field; an error names the byte.
    pub fn decode(b: &[u8]) -> Result<SlotTable> {
        let malformed = |at: usize, what: String| PlacementError::Malformed { at, what };
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
        if version != VERSION {
            return Err(malformed(
                4,
                format!("version {version}, this build reads {VERSION}"),
            ));
        }
        let machines = u16::from_le_bytes([b[6], b[7]]);
        let epoch = u64::from_le_bytes(b[8..16].try_into().expect("8 bytes"));
        let slots = u32::from_le_bytes(b[16..20].try_into().expect("4 bytes"));
        check_shape(slots, machines).map_err(|e| malformed(6, e.to_string()))?;
        let owners = &b[HEADER_BYTES..];
        if owners.len() != slots as usize {
            return Err(malformed(
                HEADER_BYTES,
                format!("{} owner bytes for {slots} slots", owners.len()),
            ));
        }
        if let Some(i) = owners.iter().position(|&o| u16::from(o) >= machines) {
            return Err(malformed(
                HEADER_BYTES + i,
                format!(
                    "slot {i}'s owner {} is not below {machines} machines",
                    owners[i]
                ),
            ));
        }
        Ok(SlotTable {
            epoch,
            machines,
            owners: owners.to_vec(),
        })
    }
}

fn invalid(key: &'static str, value: String, expected: String) -> PlacementError {
    PlacementError::InvalidSetting {
        key,
        value,
        expected,
    }
}

fn check_shape(slots: u32, machines: u16) -> Result<()> {
    if slots == 0 || slots > SLOTS_MAX {
        return Err(invalid(
            "slots",
            slots.to_string(),
            format!("1..={SLOTS_MAX}"),
        ));
    }
    if machines == 0 || machines > MACHINES_MAX {
        return Err(invalid(
            "machines",
            machines.to_string(),
            format!("1..={MACHINES_MAX}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
