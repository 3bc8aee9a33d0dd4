//! The slot table: which server owns each slot, at which epoch (issue 59
//! requirement 1; the design is `docs/design.md`, "The elastic cluster"),
//! and which servers back it up (issue 60 requirement 1).
//!
//! `slot(v) = v % slots`; every part of a decomposed vertex has its vertex's
//! slot. The slot count is fixed when a cluster is made; owners change only
//! by moves and fail-overs, each change a new epoch. The table is kept in
//! etcd and served to clients; a reader's copy is a hint, checked by the
//! servers (E1-E6).
//!
//! Replication: the table asks for R copies of every slot (1..=3), the
//! owner's and R - 1 backups'. A slot's backups are never its owner and
//! never repeat; after a failure a slot may have fewer than R - 1 until it
//! is copied again ([`SlotTable::add_backup`]). Each slot has a primary
//! epoch, 1 at first, one more at each fail-over and, in a replicated table,
//! at each move, so a backup can refuse a deposed primary. With R = 1 a move
//! keeps the primary epoch (there is no backup to fence), so tables of
//! clusters without replication stay in version 1.
//!
//! Wire form (little-endian), as etcd keeps it and the client protocol
//! carries it. Version 1 is written when R = 1 and every primary epoch is 1,
//! version 2 otherwise:
//!
//! ```text
//!  offset    bytes  field
//!  0         4      magic "LSLT"
//!  4         2      version (1 or 2)
//!  6         2      machines: owners and backups are below it, 1..=MACHINES_MAX
//!  8         8      epoch
//!  16        4      slots, 1..=SLOTS_MAX
//!  20        slots  owner of each slot, one byte
//!                   (version 1 ends here; version 2 goes on)
//!  20+slots  1      R, the replication asked for, 1..=REPLICATION_MAX
//!  21+slots         per slot, in slot order:
//!              4      its primary epoch, >= 1
//!              1      n, its backup count, 0..=R-1
//!              n      its backups, one byte each: below machines, not the
//!                     owner, no repeats
//!                   (nothing follows the last slot; ENCODED_BYTES_MAX bytes at most)
//! ```

use crate::error::{PlacementError, Result};
use wire::HEADER_BYTES;

/// Slots of a new cluster unless configured.
pub const SLOTS_DEFAULT: u32 = 4096;
/// Most slots a table may have.
pub const SLOTS_MAX: u32 = 1 << 16;
/// Most machines (a machine id is one byte, below 128 as the fabric's).
pub const MACHINES_MAX: u16 = 128;
/// Most copies of a slot a table may ask for: its owner's and two backups'.
pub const REPLICATION_MAX: u8 = 3;
/// Longest encoding: version 2, every slot with `REPLICATION_MAX - 1` backups.
pub const ENCODED_BYTES_MAX: usize =
    HEADER_BYTES + 1 + SLOTS_MAX as usize * (1 + 4 + 1 + BACKUPS_MAX);

/// Most backups of one slot.
const BACKUPS_MAX: usize = REPLICATION_MAX as usize - 1;

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

/// A slot's primary changed: `from` failed and `to`, its first backup,
/// owns the slot from `primary_epoch` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failover {
    /// The slot.
    pub slot: u32,
    /// The machine that failed, its owner until now.
    pub from: Machine,
    /// Its owner now, its first backup until now.
    pub to: Machine,
    /// The slot's primary epoch from now on.
    pub primary_epoch: u32,
}

/// One slot's backups: `len` of `m`, the rest zero (so `==` compares lists).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Backups {
    len: u8,
    m: [Machine; BACKUPS_MAX],
}

impl Backups {
    fn of(list: &[Machine]) -> Backups {
        assert!(list.len() <= BACKUPS_MAX, "{} backups", list.len());
        let mut b = Backups {
            len: list.len() as u8,
            ..Backups::default()
        };
        b.m[..list.len()].copy_from_slice(list);
        b
    }

    fn as_slice(&self) -> &[Machine] {
        &self.m[..self.len as usize]
    }

    fn without(&self, machine: Machine) -> Backups {
        let mut b = Backups::default();
        for &m in self.as_slice().iter().filter(|&&m| m != machine) {
            b.m[b.len as usize] = m;
            b.len += 1;
        }
        b
    }
}

/// The slot table (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotTable {
    epoch: u64,
    machines: u16,
    owners: Vec<Machine>,
    /// R, 1..=REPLICATION_MAX.
    replication: u8,
    /// Per slot, at most `replication - 1`.
    backups: Vec<Backups>,
    /// Per slot, >= 1.
    primary_epochs: Vec<u32>,
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
        let owners = (0..slots)
            .map(|s| (s % servers as u32) as Machine)
            .collect();
        Ok(SlotTable::unreplicated(1, machines, owners))
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
        Ok(SlotTable::unreplicated(epoch, machines, owners))
    }

    /// A table of the given parts (a table read back from a store): one
    /// owner, backup list and primary epoch per slot, each checked as
    /// [`SlotTable::decode`] checks them.
    pub fn from_parts(
        epoch: u64,
        machines: u16,
        owners: Vec<Machine>,
        replication: u8,
        backups: Vec<Vec<Machine>>,
        primary_epochs: Vec<u32>,
    ) -> Result<SlotTable> {
        let mut t = SlotTable::from_owners(epoch, machines, owners)?;
        check_replication(replication)?;
        let slots = t.owners.len();
        for (key, len) in [
            ("backups", backups.len()),
            ("primary_epochs", primary_epochs.len()),
        ] {
            if len != slots {
                return Err(invalid(
                    key,
                    format!("{len} entries"),
                    format!("one per slot, {slots}"),
                ));
            }
        }
        for (slot, list) in backups.iter().enumerate() {
            t.check_backups(slot as u32, list, replication)?;
        }
        if let Some(slot) = primary_epochs.iter().position(|&e| e == 0) {
            return Err(invalid(
                "primary_epoch",
                "0".into(),
                format!("slot {slot}'s primary epoch at least 1"),
            ));
        }
        t.replication = replication;
        t.backups = backups.iter().map(|l| Backups::of(l)).collect();
        t.primary_epochs = primary_epochs;
        Ok(t)
    }

    /// A table with R = 1 and every primary epoch 1; `owners` checked.
    fn unreplicated(epoch: u64, machines: u16, owners: Vec<Machine>) -> SlotTable {
        let slots = owners.len();
        SlotTable {
            epoch,
            machines,
            owners,
            replication: 1,
            backups: vec![Backups::default(); slots],
            primary_epochs: vec![1; slots],
        }
    }

    /// Checks `list` as `slot`'s backups under replication `r`.
    fn check_backups(&self, slot: u32, list: &[Machine], r: u8) -> Result<()> {
        let owner = self.owners[slot as usize];
        if list.len() > usize::from(r - 1) {
            return Err(invalid(
                "backups",
                format!("{list:?}"),
                format!("at most {} backups of slot {slot} (R = {r})", r - 1),
            ));
        }
        for (i, &b) in list.iter().enumerate() {
            let why = if u16::from(b) >= self.machines {
                format!("below {} machines", self.machines)
            } else if b == owner {
                format!("not slot {slot}'s owner")
            } else if list[..i].contains(&b) {
                format!("named once among slot {slot}'s backups")
            } else {
                continue;
            };
            return Err(invalid("backup", b.to_string(), why));
        }
        Ok(())
    }

    /// Whether every rule of the module doc holds: tables change only by
    /// the checked steps here, so a `false` is a bug (`debug_assert!`s).
    fn rules_hold(&self) -> bool {
        let slots = self.owners.len();
        (1..=REPLICATION_MAX).contains(&self.replication)
            && self.backups.len() == slots
            && self.primary_epochs.len() == slots
            && self.primary_epochs.iter().all(|&e| e >= 1)
            && self.backups.iter().enumerate().all(|(s, b)| {
                self.check_backups(s as u32, b.as_slice(), self.replication)
                    .is_ok()
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

    /// R asked for (1 without replication).
    pub fn replication(&self) -> u8 {
        self.replication
    }

    /// Backups of `slot` (empty past the last slot, or with R = 1).
    pub fn backups_of_slot(&self, slot: u32) -> &[Machine] {
        self.backups
            .get(slot as usize)
            .map_or(&[], |b| b.as_slice())
    }

    /// Backups of `v`'s slot.
    #[inline]
    pub fn backups_of(&self, v: u32) -> &[Machine] {
        self.backups_of_slot(self.slot_of(v))
    }

    /// Whether `machine` backs `slot`.
    pub fn is_backup(&self, slot: u32, machine: Machine) -> bool {
        self.backups_of_slot(slot).contains(&machine)
    }

    /// `slot`'s primary epoch (1 for a slot never failed over or moved; 0
    /// past the last slot).
    pub fn primary_epoch(&self, slot: u32) -> u32 {
        self.primary_epochs.get(slot as usize).copied().unwrap_or(0)
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
    /// slot's present owner, a slot at most once, and a machine in range
    /// that is not one of the slot's backups. Backups stay; in a replicated
    /// table a moved slot's primary epoch grows by one.
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
            if self.is_backup(m.slot, m.to) {
                return Err(invalid(
                    "move.to",
                    m.to.to_string(),
                    format!(
                        "not one of slot {}'s backups {:?} (drop it from them first)",
                        m.slot,
                        self.backups_of_slot(m.slot)
                    ),
                ));
            }
            let s = m.slot as usize;
            // With R = 1 there is no backup to fence: the primary epoch stays
            // 1 and the table stays in wire version 1 (module doc).
            if m.to != m.from && self.replication > 1 {
                next.primary_epochs[s] = next_primary_epoch(self.primary_epochs[s], m.slot)?;
            }
            next.owners[s] = m.to;
        }
        next.epoch = self.epoch + 1;
        debug_assert!(next.rules_hold());
        Ok(next)
    }

    /// This table with replication `r` over `servers` (the live servers, any
    /// order; sorted and deduped here), at the next epoch. Every slot gets
    /// `r - 1` backups among the servers other than its owner, and each
    /// server backs a share within one of every other's when owners' counts
    /// are within one (as [`SlotTable::balance`] leaves them). Slot by slot,
    /// backups are the servers most behind their share, ties to the next
    /// after the owner in server order (wrapping). Plain "the next `r - 1`
    /// after the owner" is not even: with 4 servers, R = 3 and 4098 slots,
    /// the server after both extra slots' owners backs 2 more than another.
    /// Primary epochs stay.
    pub fn with_replication(&self, r: u8, servers: &[Machine]) -> Result<SlotTable> {
        let mut servers = servers.to_vec();
        servers.sort_unstable();
        servers.dedup();
        check_replication(r)?;
        if usize::from(r) > servers.len() {
            return Err(invalid(
                "replication",
                r.to_string(),
                format!("at most the {} live servers {servers:?}", servers.len()),
            ));
        }
        if let Some(&m) = servers.iter().find(|&&m| u16::from(m) >= self.machines) {
            return Err(invalid(
                "servers",
                m.to_string(),
                format!("machines below {}", self.machines),
            ));
        }
        let mut at = vec![usize::MAX; self.machines as usize];
        for (i, &m) in servers.iter().enumerate() {
            at[m as usize] = i;
        }
        let n = servers.len();
        let mut owned = vec![0i64; n];
        for (slot, &owner) in self.owners.iter().enumerate() {
            let Some(&o) = at.get(owner as usize).filter(|&&o| o != usize::MAX) else {
                return Err(invalid(
                    "replication",
                    format!("{r} over servers {servers:?}"),
                    format!("servers that include slot {slot}'s owner, {owner}"),
                ));
            };
            owned[o] += 1;
        }
        // Quotas within one of each other; the larger ones to the servers
        // owning fewest (they may back the most slots).
        let slots = i64::from(self.slots());
        let total = slots * i64::from(r - 1);
        let (base, extra) = (total / n as i64, total % n as i64);
        let mut by_owned: Vec<usize> = (0..n).collect();
        by_owned.sort_by_key(|&i| (owned[i], i));
        let mut quota = vec![base; n];
        for &i in &by_owned[..extra as usize] {
            quota[i] += 1;
        }
        // Slots left (this one included) that each server may back.
        let mut eligible: Vec<i64> = owned.iter().map(|&c| slots - c).collect();
        let mut next = self.clone();
        for (slot, &owner) in self.owners.iter().enumerate() {
            let o = at[owner as usize];
            let mut list = [0 as Machine; BACKUPS_MAX];
            let mut chosen = [usize::MAX; BACKUPS_MAX];
            for k in 0..usize::from(r - 1) {
                // Servers with quota left first; of those, least slack
                // (eligible slots left over quota left) so none is left with
                // more quota than slots it may back; then most quota; then
                // the next after the owner.
                let c = (1..n)
                    .map(|d| (o + d) % n)
                    .filter(|c| !chosen[..k].contains(c))
                    .min_by_key(|&c| (quota[c] <= 0, eligible[c] - quota[c], -quota[c]))
                    .expect("r <= servers: a server is left to choose");
                chosen[k] = c;
                quota[c] -= 1;
                list[k] = servers[c];
            }
            for (i, e) in eligible.iter_mut().enumerate() {
                *e -= i64::from(i != o);
            }
            next.backups[slot] = Backups::of(&list[..usize::from(r - 1)]);
        }
        next.replication = r;
        next.epoch = self.epoch + 1;
        debug_assert!(next.rules_hold());
        Ok(next)
    }

    /// The table after machine `dead` failed, at the next epoch, and the
    /// fail-overs it makes. Each slot `dead` owns that has a backup goes to
    /// its first backup, its primary epoch one more; its other backups go
    /// too, as they may lack a record the new primary has (they come back
    /// after a copy, [`SlotTable::add_backup`]). `dead` leaves every other
    /// slot's backups. A slot `dead` owns without a backup keeps its owner
    /// and waits for it to restart. Fail-overs are in slot order.
    pub fn fail_over(&self, dead: Machine) -> Result<(SlotTable, Vec<Failover>)> {
        self.check_machine("dead", dead)?;
        let mut next = self.clone();
        let mut failovers = Vec::new();
        for (s, &owner) in self.owners.iter().enumerate() {
            let backups = self.backups[s].as_slice();
            if owner != dead {
                next.backups[s] = self.backups[s].without(dead);
            } else if let Some(&to) = backups.first() {
                let slot = s as u32;
                let primary_epoch = next_primary_epoch(self.primary_epochs[s], slot)?;
                next.owners[s] = to;
                next.backups[s] = Backups::default();
                next.primary_epochs[s] = primary_epoch;
                failovers.push(Failover {
                    slot,
                    from: dead,
                    to,
                    primary_epoch,
                });
            }
        }
        next.epoch = self.epoch + 1;
        debug_assert!(next.rules_hold());
        Ok((next, failovers))
    }

    /// The table with `backup` added to `slot`'s backups, at the next epoch:
    /// once `backup` holds a copy. It must be in range, not the owner, not a
    /// backup already, and the slot must have fewer than R - 1 backups.
    pub fn add_backup(&self, slot: u32, backup: Machine) -> Result<SlotTable> {
        self.add_backups(&[slot], backup)
    }

    /// The same table at the next epoch: what a rejoin that did not commit
    /// leaves, so that every learning it began ends (they end with the
    /// table they began at) and its commit can never land.
    pub fn next_epoch(&self) -> SlotTable {
        let mut next = self.clone();
        next.epoch = self.epoch + 1;
        next
    }

    /// The table with `backup` added to the backups of each of `slots`, at
    /// one next epoch (a rejoin's commit; each as [`SlotTable::add_backup`]).
    pub fn add_backups(&self, slots: &[u32], backup: Machine) -> Result<SlotTable> {
        let mut next = self.clone();
        for &slot in slots {
            let Some(b) = self.backups.get(slot as usize) else {
                return Err(invalid(
                    "slot",
                    slot.to_string(),
                    format!("below {}", self.slots()),
                ));
            };
            let mut list = b.as_slice().to_vec();
            list.push(backup);
            self.check_backups(slot, &list, self.replication)?;
            next.backups[slot as usize] = Backups::of(&list);
        }
        next.epoch = self.epoch + 1;
        debug_assert!(next.rules_hold());
        Ok(next)
    }

    /// `slot`'s backups, which must name `backup` (`why` ends the error).
    fn backed_by(&self, slot: u32, backup: Machine, why: &str) -> Result<&Backups> {
        let Some(b) = self.backups.get(slot as usize) else {
            return Err(invalid(
                "slot",
                slot.to_string(),
                format!("below {}", self.slots()),
            ));
        };
        if !b.as_slice().contains(&backup) {
            return Err(invalid(
                "slot",
                slot.to_string(),
                format!("a slot server {backup} backs{why}"),
            ));
        }
        Ok(b)
    }

    /// The table with backup `from` of each of `slots` replaced by `to`, at
    /// one next epoch (a rejoin that evens out the backups).
    pub fn replace_backups(&self, slots: &[u32], from: Machine, to: Machine) -> Result<SlotTable> {
        let mut next = self.clone();
        for &slot in slots {
            let b = self.backed_by(slot, from, "")?;
            let list: Vec<Machine> = b
                .as_slice()
                .iter()
                .map(|&m| if m == from { to } else { m })
                .collect();
            self.check_backups(slot, &list, self.replication)?;
            next.backups[slot as usize] = Backups::of(&list);
        }
        next.epoch = self.epoch + 1;
        debug_assert!(next.rules_hold());
        Ok(next)
    }

    /// The table with each of `slots` handed from its owner to its backup
    /// `to`, at one next epoch (`cluster rebalance --primaries`; design
    /// "Primaries given back"): `to` owns it at primary epoch + 1, and the
    /// old owner is a backup in `to`'s place (it holds every list, H3).
    pub fn hand_primaries(&self, slots: &[u32], to: Machine) -> Result<SlotTable> {
        self.check_machine("to", to)?;
        let mut next = self.clone();
        for &slot in slots {
            let b = self.backed_by(slot, to, " (only a backup takes a primary over)")?;
            let s = slot as usize;
            let from = self.owners[s];
            let list: Vec<Machine> = b
                .as_slice()
                .iter()
                .map(|&m| if m == to { from } else { m })
                .collect();
            next.owners[s] = to;
            next.backups[s] = Backups::of(&list);
            next.primary_epochs[s] = next_primary_epoch(self.primary_epochs[s], slot)?;
        }
        next.epoch = self.epoch + 1;
        debug_assert!(next.rules_hold());
        Ok(next)
    }

    /// The table with `machine` removed from every slot's backups, at the
    /// next epoch: e.g. a backup that stopped answering.
    pub fn without_backup(&self, machine: Machine) -> Result<SlotTable> {
        self.check_machine("machine", machine)?;
        let mut next = self.clone();
        for b in &mut next.backups {
            *b = b.without(machine);
        }
        next.epoch = self.epoch + 1;
        debug_assert!(next.rules_hold());
        Ok(next)
    }

    fn check_machine(&self, key: &'static str, m: Machine) -> Result<()> {
        if u16::from(m) >= self.machines {
            return Err(invalid(
                key,
                m.to_string(),
                format!("below {} machines", self.machines),
            ));
        }
        Ok(())
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
}

fn invalid(key: &'static str, value: String, expected: String) -> PlacementError {
    PlacementError::InvalidSetting {
        key,
        value,
        expected,
    }
}

fn check_replication(r: u8) -> Result<()> {
    if !(1..=REPLICATION_MAX).contains(&r) {
        return Err(invalid(
            "replication",
            r.to_string(),
            format!("1..={REPLICATION_MAX}"),
        ));
    }
    Ok(())
}

/// `slot`'s primary epoch after `e`.
fn next_primary_epoch(e: u32, slot: u32) -> Result<u32> {
    e.checked_add(1).ok_or_else(|| {
        invalid(
            "primary_epoch",
            e.to_string(),
            format!("below {} so slot {slot}'s can grow", u32::MAX),
        )
    })
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

mod wire;

mod plan;
mod reshape;
pub use reshape::{ReshapePlan, ReshapeStep, RESHAPE_ROUNDS};
#[cfg(test)]
mod tests;
