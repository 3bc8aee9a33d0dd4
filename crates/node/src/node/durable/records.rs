//! The log's records and their replay (`super`'s module doc has the
//! formats; design D4, M3, V2, V5): what each record says, and the lists
//! and moves in flight a log leaves.

use std::collections::{HashMap, HashSet};

use locus_fabric::MachineId;
use locus_wal::Entry;

pub(super) const KIND_LISTS: u8 = 1;
const KIND_REMOVED: u8 = 2;
const KIND_SLOT_IN: u8 = 3;
const KIND_SLOT_OUT: u8 = 4;
const KIND_HANDED: u8 = 5;
const KIND_SERVE: u8 = 6;
/// Slots one SLOT_IN or SLOT_OUT record may name (a table has at most 2^16).
const RECORD_SLOTS_MAX: usize = 1 << 16;

/// Appends `v`'s list as `vertex | n | ids`.
pub(super) fn encode_list(v: u32, ids: &[u32], out: &mut Vec<u8>) {
    out.extend_from_slice(&v.to_le_bytes());
    out.extend_from_slice(&(ids.len() as u32).to_le_bytes());
    for id in ids {
        out.extend_from_slice(&id.to_le_bytes());
    }
}

/// Bytes of a record holding these lists.
pub(crate) fn record_bytes<'a>(lists: impl Iterator<Item = &'a [u32]>) -> usize {
    5 + lists.map(|l| 8 + 4 * l.len()).sum::<usize>()
}

/// A record holding `lists`.
pub(crate) fn encode_record<'a>(lists: impl ExactSizeIterator<Item = (u32, &'a [u32])>) -> Vec<u8> {
    let mut out = vec![KIND_LISTS];
    out.extend_from_slice(&(lists.len() as u32).to_le_bytes());
    for (v, ids) in lists {
        encode_list(v, ids, &mut out);
    }
    out
}

/// A record of vertices removed.
pub(crate) fn encode_removed(vertices: &[u32]) -> Vec<u8> {
    encode_u32s(KIND_REMOVED, vertices)
}

/// `kind | count u32 | count x u32`.
fn encode_u32s(kind: u8, xs: &[u32]) -> Vec<u8> {
    let mut out = vec![kind];
    out.extend_from_slice(&(xs.len() as u32).to_le_bytes());
    for x in xs {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

/// A vertex and its list, and the bytes after them.
type ListAndRest<'a> = ((u32, Vec<u32>), &'a [u8]);

/// Reads one `vertex | n | ids` at the front of `b`; returns it and the rest.
fn decode_list(b: &[u8]) -> std::result::Result<ListAndRest<'_>, String> {
    if b.len() < 8 {
        return Err(format!("a list cut short ({} bytes)", b.len()));
    }
    let v = u32::from_le_bytes(b[0..4].try_into().expect("4 bytes"));
    let n = u32::from_le_bytes(b[4..8].try_into().expect("4 bytes")) as usize;
    let end = n
        .checked_mul(4)
        .and_then(|x| x.checked_add(8))
        .filter(|&e| e <= b.len())
        .ok_or_else(|| format!("vertex {v} claims {n} ids, past the record"))?;
    let ids = b[8..end]
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect();
    Ok(((v, ids), &b[end..]))
}

/// What a record says of each vertex, in order: its new list, or `None`
/// for a vertex removed.
pub(crate) type Logged = Vec<(u32, Option<Vec<u32>>)>;

/// A SLOT_IN record: the batch's slots and every list of them.
pub(crate) fn encode_slot_in<'a>(
    slots: &[u32],
    lists: impl ExactSizeIterator<Item = (u32, &'a [u32])>,
) -> Vec<u8> {
    let mut out = encode_u32s(KIND_SLOT_IN, slots);
    out.extend_from_slice(&encode_record(lists)[1..]);
    out
}

/// A SLOT_OUT record.
pub(crate) fn encode_slot_out(slots: &[u32]) -> Vec<u8> {
    encode_u32s(KIND_SLOT_OUT, slots)
}

/// A HANDED record: `slots` are `to`'s from here on (design V1).
pub(crate) fn encode_handed(slots: &[u32], to: MachineId) -> Vec<u8> {
    let mut out = encode_u32s(KIND_HANDED, slots);
    out.push(to);
    out
}

/// A SERVE record: `slots`, taken from `from`, are served here (design V2).
pub(crate) fn encode_serve(slots: &[u32], from: MachineId) -> Vec<u8> {
    let mut out = encode_u32s(KIND_SERVE, slots);
    out.push(from);
    out
}

/// What one record says.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Rec {
    /// Lists and removals of vertices, in order.
    Vertices(Logged),
    /// A move's batch arrived: these slots hold exactly these lists.
    SlotIn(Vec<u32>, Logged),
    /// A move's batch left: these slots hold nothing here.
    SlotOut(Vec<u32>),
    /// A move handed these slots to this server: it owns them from here.
    Handed(Vec<u32>, MachineId),
    /// These slots, taken from this server, are served here ahead of the table.
    Serve(Vec<u32>, MachineId),
}

/// Reads `slots u32 | slots x u32` at the front of `b`.
fn decode_slots(b: &[u8]) -> std::result::Result<(Vec<u32>, &[u8]), String> {
    if b.len() < 4 {
        return Err("a slot list cut short".into());
    }
    let n = u32::from_le_bytes(b[0..4].try_into().expect("4 bytes")) as usize;
    if n > RECORD_SLOTS_MAX || b.len() < 4 + 4 * n {
        return Err(format!(
            "a record claims {n} slots, past its end or the limit"
        ));
    }
    let slots = b[4..4 + 4 * n]
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect();
    Ok((slots, &b[4 + 4 * n..]))
}

/// Any record.
pub(crate) fn decode_any(b: &[u8]) -> std::result::Result<Rec, String> {
    match b.first() {
        Some(&KIND_SLOT_IN) => {
            let (slots, rest) = decode_slots(&b[1..])?;
            let mut lists = vec![KIND_LISTS];
            lists.extend_from_slice(rest);
            Ok(Rec::SlotIn(slots, decode_record(&lists)?))
        }
        Some(&KIND_SLOT_OUT) => match decode_slots(&b[1..])? {
            (slots, []) => Ok(Rec::SlotOut(slots)),
            (_, rest) => Err(format!(
                "{} bytes after a SLOT_OUT record's slots",
                rest.len()
            )),
        },
        Some(&k @ (KIND_HANDED | KIND_SERVE)) => match decode_slots(&b[1..])? {
            (slots, &[peer]) if k == KIND_HANDED => Ok(Rec::Handed(slots, peer)),
            (slots, &[peer]) => Ok(Rec::Serve(slots, peer)),
            (_, rest) => Err(format!(
                "{} bytes after a HANDED or SERVE record's slots, not 1",
                rest.len()
            )),
        },
        _ => decode_record(b).map(Rec::Vertices),
    }
}

/// The lists a log gives, record by record (D4, M3, V2, V5).
pub(super) struct Replay<'a> {
    pub(super) lists: HashMap<u32, Vec<u32>>,
    pub(super) slot_of: &'a dyn Fn(u32) -> u32,
    /// Slots a SLOT_IN, SLOT_OUT or HANDED record named.
    pub(super) moved: HashSet<u32>,
    /// Slots a HANDED record gave away, not taken back since: to whom (V5).
    pub(super) handed: HashMap<u32, MachineId>,
    /// The vertices of handed slots and their list lengths when handed:
    /// their keys become markers naming the new owner (V5).
    pub(super) handed_vertices: HashMap<u32, usize>,
    /// Slots taken over by SLOT_IN and not left since: from whom, and
    /// whether a SERVE record followed (V2).
    pub(super) arrived: HashMap<u32, Arrived>,
    /// Vertices a record after the checkpoint wrote (their last update
    /// may be in doubt: logged, but not known to the backups).
    pub(super) logged: HashSet<u32>,
}

/// A slot a SLOT_IN record brought, as the log leaves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arrived {
    /// Copies only: the old home decides (it handed the slot or not).
    Taken,
    /// Served here ahead of the table since a SERVE record; from this server.
    Served(MachineId),
}

impl<'a> Replay<'a> {
    pub(super) fn new(slot_of: &'a dyn Fn(u32) -> u32) -> Replay<'a> {
        Replay {
            lists: HashMap::new(),
            slot_of,
            moved: HashSet::new(),
            handed: HashMap::new(),
            handed_vertices: HashMap::new(),
            arrived: HashMap::new(),
            logged: HashSet::new(),
        }
    }
}

impl Replay<'_> {
    /// Takes one entry of the checkpoint or the log.
    pub(super) fn entry(&mut self, e: Entry<'_>) -> std::result::Result<(), String> {
        let rec = match e {
            Entry::Checkpoint(b) => match decode_list(b)? {
                ((v, ids), []) => Rec::Vertices(vec![(v, Some(ids))]),
                (_, rest) => return Err(format!("{} bytes after the list", rest.len())),
            },
            Entry::Record(b) => {
                let rec = decode_any(b)?;
                if let Rec::Vertices(l) = &rec {
                    self.logged.extend(l.iter().map(|(v, _)| *v));
                }
                rec
            }
        };
        self.take(rec);
        Ok(())
    }

    fn take(&mut self, rec: Rec) {
        match rec {
            Rec::Vertices(l) => self.vertices(l),
            Rec::SlotIn(slots, l) => {
                self.forget(&slots);
                self.moved.extend(&slots);
                for &s in &slots {
                    self.arrived.insert(s, Arrived::Taken);
                }
                self.vertices(l);
            }
            Rec::SlotOut(slots) => {
                self.forget(&slots);
                self.moved.extend(&slots);
            }
            Rec::Handed(slots, to) => {
                let set: HashSet<u32> = slots.iter().copied().collect();
                let slot_of = self.slot_of;
                let handed: Vec<(u32, usize)> = self
                    .lists
                    .iter()
                    .filter(|(v, _)| set.contains(&slot_of(**v)))
                    .map(|(v, l)| (*v, l.len()))
                    .collect();
                // (forget drops what was said of the slots, earlier
                // handed vertices included: these are the slots' now.)
                self.forget(&slots);
                self.handed_vertices.extend(handed);
                self.moved.extend(&slots);
                for s in slots {
                    self.handed.insert(s, to);
                }
            }
            Rec::Serve(slots, from) => {
                for s in slots {
                    if let Some(a) = self.arrived.get_mut(&s) {
                        *a = Arrived::Served(from);
                    }
                }
            }
        }
    }

    fn vertices(&mut self, l: Logged) {
        for (v, ids) in l {
            match ids {
                Some(ids) => self.lists.insert(v, ids),
                None => self.lists.remove(&v),
            };
        }
    }

    /// Forgets everything said of `slots` before (a later SLOT_IN,
    /// SLOT_OUT or HANDED supersedes it, M3).
    fn forget(&mut self, slots: &[u32]) {
        let set: HashSet<u32> = slots.iter().copied().collect();
        let slot_of = self.slot_of;
        self.lists.retain(|v, _| !set.contains(&slot_of(*v)));
        self.handed_vertices
            .retain(|v, _| !set.contains(&slot_of(*v)));
        for s in slots {
            self.handed.remove(s);
            self.arrived.remove(s);
        }
    }
}

/// Every list (or removal) of a record of vertices, in order.
pub(crate) fn decode_record(b: &[u8]) -> std::result::Result<Logged, String> {
    if b.len() < 5 || (b[0] != KIND_LISTS && b[0] != KIND_REMOVED) {
        return Err("not a record of adjacency lists or removals".into());
    }
    let count = u32::from_le_bytes(b[1..5].try_into().expect("4 bytes"));
    let mut rest = &b[5..];
    let mut out = Vec::new();
    if b[0] == KIND_REMOVED {
        if rest.len() != count as usize * 4 {
            return Err(format!(
                "a removal record of {count} vertices holds {} bytes, not {}",
                rest.len(),
                count as usize * 4
            ));
        }
        return Ok(rest
            .chunks_exact(4)
            .map(|c| (u32::from_le_bytes(c.try_into().expect("4 bytes")), None))
            .collect());
    }
    for _ in 0..count {
        let ((v, ids), r) = decode_list(rest)?;
        out.push((v, Some(ids)));
        rest = r;
    }
    if !rest.is_empty() {
        return Err(format!("{} bytes after the last list", rest.len()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let lists: Vec<(u32, Vec<u32>)> =
            vec![(7, vec![]), (9, vec![1, 2, u32::MAX]), (0, vec![5])];
        let rec = encode_record(lists.iter().map(|(v, l)| (*v, l.as_slice())));
        assert_eq!(
            rec.len(),
            record_bytes(lists.iter().map(|(_, l)| l.as_slice()))
        );
        assert_eq!(&rec[..5], &[1, 3, 0, 0, 0]);
        let logged: Logged = lists.into_iter().map(|(v, l)| (v, Some(l))).collect();
        assert_eq!(decode_record(&rec).unwrap(), logged);
        let rec = encode_removed(&[4, u32::MAX]);
        assert_eq!(
            decode_record(&rec).unwrap(),
            vec![(4, None), (u32::MAX, None)]
        );
    }

    #[test]
    fn bad_records_are_refused_not_panicked_on() {
        let rec = encode_record([(9u32, &[1u32, 2][..])].into_iter());
        for cut in 0..rec.len() {
            assert!(decode_record(&rec[..cut]).is_err(), "cut {cut}");
        }
        let mut huge = rec.clone();
        huge[9..13].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_record(&huge).is_err());
        let mut extra = rec;
        extra.push(0);
        assert!(decode_record(&extra).is_err());
        let rec = encode_removed(&[1, 2]);
        for cut in 0..rec.len() {
            assert!(decode_record(&rec[..cut]).is_err(), "removal cut {cut}");
        }
        let mut extra = rec;
        extra.push(0);
        assert!(decode_record(&extra).is_err());
    }
}
