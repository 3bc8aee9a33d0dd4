//! The 64-bit address word stored beside each key, and the value header (Pragh 4.1).
//!
//! ```text
//!  address word, local type (the value is in the key's home machine):
//!   63 62                            34 33                              0
//!  +--+-------------------------------+---------------------------------+
//!  | 0|  size: 29 bits, 8-byte units  |  offset: 34 bits, 8-byte units  |
//!  +--+-------------------------------+---------------------------------+
//!
//!  address word, remote type (the value was migrated to machine `mid`):
//!   63 62     56 55                  34 33                              0
//!  +--+---------+---------------------+---------------------------------+
//!  | 1| mid: 7  | size: 22 bits       |  offset: 34 bits                 |
//!  +--+---------+---------------------+---------------------------------+
//! ```
//! Sizes count the whole value (header included) and, like offsets, are in
//! 8-byte units. So a local value can reach 4 GiB, a migratable (remote) value
//! 32 MiB, a value region 128 GiB, and a cluster 128 machines. The all-zero
//! word is a local address of size 0, which no value has: it means "no value
//! published yet".
//!
//! ```text
//!  value header, the first word of every stored value:
//!   63                               32 31                              0
//!  +-----------------------------------+---------------------------------+
//!  |  payload length in bytes (32)     |  size: 8-byte units (32)        |
//!  +-----------------------------------+---------------------------------+
//! ```
//! A value is valid for an address only while its header's size equals the
//! address's size. Migration and out-of-place updates zero the old header
//! (passive invalidation), so a reader holding a stale address sees size 0,
//! drops the address and looks it up again.

use crate::{Result, StoreError};
use locus_fabric::MachineId;

/// Bits of the offset field (both types).
pub const OFFSET_BITS: u32 = 34;
/// Bits of the size field of a local address.
pub const LOCAL_SIZE_BITS: u32 = 29;
/// Bits of the size field of a remote address.
pub const REMOTE_SIZE_BITS: u32 = 22;
/// Bits of the machine field of a remote address.
pub const MACHINE_BITS: u32 = 7;

/// Largest offset, in units.
pub const OFFSET_UNITS_MAX: u64 = (1 << OFFSET_BITS) - 1;
/// Largest local value, in units (just under 4 GiB).
pub const LOCAL_SIZE_UNITS_MAX: u64 = (1 << LOCAL_SIZE_BITS) - 1;
/// Largest remote (migrated) value, in units (just under 32 MiB).
pub const REMOTE_SIZE_UNITS_MAX: u64 = (1 << REMOTE_SIZE_BITS) - 1;
/// Largest machine id a remote address can name.
pub const MACHINE_ID_MAX: u64 = (1 << MACHINE_BITS) - 1;

const TYPE_BIT: u64 = 1 << 63;
const OFFSET_MASK: u64 = OFFSET_UNITS_MAX;

/// A decoded address word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Addr {
    /// The value lives in the key's home machine.
    Local {
        /// Value size in 8-byte units (header included).
        size_units: u64,
        /// Offset in the home's value region, in units.
        offset_units: u64,
    },
    /// The value lives in machine `machine` (it was migrated there).
    Remote {
        /// The machine holding the value.
        machine: MachineId,
        /// Value size in units.
        size_units: u64,
        /// Offset in that machine's value region, in units.
        offset_units: u64,
    },
}

impl Addr {
    /// A local address, checked against the field limits.
    pub fn local(size_units: u64, offset_units: u64) -> Result<Addr> {
        check("local value size", size_units, LOCAL_SIZE_UNITS_MAX)?;
        check("value offset", offset_units, OFFSET_UNITS_MAX)?;
        if size_units == 0 {
            return Err(StoreError::Limit(
                "a value has at least its header word".into(),
            ));
        }
        Ok(Addr::Local {
            size_units,
            offset_units,
        })
    }

    /// A remote address, checked against the field limits.
    pub fn remote(machine: MachineId, size_units: u64, offset_units: u64) -> Result<Addr> {
        check("machine id", machine as u64, MACHINE_ID_MAX)?;
        check("migratable value size", size_units, REMOTE_SIZE_UNITS_MAX)?;
        check("value offset", offset_units, OFFSET_UNITS_MAX)?;
        if size_units == 0 {
            return Err(StoreError::Limit(
                "a value has at least its header word".into(),
            ));
        }
        Ok(Addr::Remote {
            machine,
            size_units,
            offset_units,
        })
    }

    /// Encodes to the 64-bit word.
    pub fn encode(self) -> u64 {
        match self {
            Addr::Local {
                size_units,
                offset_units,
            } => {
                debug_assert!(
                    size_units <= LOCAL_SIZE_UNITS_MAX && offset_units <= OFFSET_UNITS_MAX
                );
                (size_units << OFFSET_BITS) | offset_units
            }
            Addr::Remote {
                machine,
                size_units,
                offset_units,
            } => {
                debug_assert!(
                    size_units <= REMOTE_SIZE_UNITS_MAX && offset_units <= OFFSET_UNITS_MAX
                );
                TYPE_BIT
                    | ((machine as u64) << (OFFSET_BITS + REMOTE_SIZE_BITS))
                    | (size_units << OFFSET_BITS)
                    | offset_units
            }
        }
    }

    /// Decodes a word; `None` for the null word (no value).
    pub fn decode(word: u64) -> Option<Addr> {
        let offset_units = word & OFFSET_MASK;
        if word & TYPE_BIT == 0 {
            let size_units = (word >> OFFSET_BITS) & LOCAL_SIZE_UNITS_MAX;
            (size_units != 0).then_some(Addr::Local {
                size_units,
                offset_units,
            })
        } else {
            let size_units = (word >> OFFSET_BITS) & REMOTE_SIZE_UNITS_MAX;
            let machine =
                ((word >> (OFFSET_BITS + REMOTE_SIZE_BITS)) & MACHINE_ID_MAX) as MachineId;
            (size_units != 0).then_some(Addr::Remote {
                machine,
                size_units,
                offset_units,
            })
        }
    }

    /// Size in units.
    pub fn size_units(self) -> u64 {
        match self {
            Addr::Local { size_units, .. } | Addr::Remote { size_units, .. } => size_units,
        }
    }

    /// Offset in units.
    pub fn offset_units(self) -> u64 {
        match self {
            Addr::Local { offset_units, .. } | Addr::Remote { offset_units, .. } => offset_units,
        }
    }

    /// The machine holding the value, given the key's home.
    pub fn holder(self, home: MachineId) -> MachineId {
        match self {
            Addr::Local { .. } => home,
            Addr::Remote { machine, .. } => machine,
        }
    }

    /// The address of the same value as stored in a key whose home is `home`:
    /// local type if the value is at `home`, remote type otherwise. Errors if
    /// a value held away from home is too large to be named remotely.
    pub fn at(
        home: MachineId,
        holder: MachineId,
        size_units: u64,
        offset_units: u64,
    ) -> Result<Addr> {
        if holder == home {
            Addr::local(size_units, offset_units)
        } else {
            Addr::remote(holder, size_units, offset_units)
        }
    }
}

/// The address word of a value that was lost with machine `machine` (it died
/// holding the only copy, and the key's home has no durable copy to reload):
/// remote type, that machine, size 0, every offset bit set. No real address
/// has size 0, so [`Addr::decode`] gives `None` and [`lost_on`] recognises it;
/// readers report [`StoreError::ValueLost`] instead of "absent" (`recover.rs`).
pub fn lost_word(machine: MachineId) -> u64 {
    debug_assert!(machine as u64 <= MACHINE_ID_MAX);
    TYPE_BIT | ((machine as u64) << (OFFSET_BITS + REMOTE_SIZE_BITS)) | OFFSET_MASK
}

/// The machine a value was lost with, if `word` is a [`lost_word`].
pub fn lost_on(word: u64) -> Option<MachineId> {
    let machine = ((word >> (OFFSET_BITS + REMOTE_SIZE_BITS)) & MACHINE_ID_MAX) as MachineId;
    (word == lost_word(machine)).then_some(machine)
}

/// The address word a key's old home keeps once a slot move handed the key
/// to machine `to` (issue 59, `crate::handoff`): remote type, `to`, size 0,
/// every offset bit but the lowest set. Like a [`lost_word`], no reader can
/// follow it ([`Addr::decode`] gives `None`); [`moved_to`] recognises it.
pub fn moved_word(to: MachineId) -> u64 {
    debug_assert!(to as u64 <= MACHINE_ID_MAX);
    TYPE_BIT | ((to as u64) << (OFFSET_BITS + REMOTE_SIZE_BITS)) | (OFFSET_MASK - 1)
}

/// The machine a key was handed to, if `word` is a [`moved_word`].
pub fn moved_to(word: u64) -> Option<MachineId> {
    let machine = ((word >> (OFFSET_BITS + REMOTE_SIZE_BITS)) & MACHINE_ID_MAX) as MachineId;
    (word == moved_word(machine)).then_some(machine)
}

/// The address word a key's new home keeps while the key is still its old
/// home `from`'s (`crate::handoff`, between taking its copy and the CAS on
/// the old home's word): remote type, `from`, size 0, offset all ones but
/// the lowest two bits.
pub fn pending_word(from: MachineId) -> u64 {
    debug_assert!(from as u64 <= MACHINE_ID_MAX);
    TYPE_BIT | ((from as u64) << (OFFSET_BITS + REMOTE_SIZE_BITS)) | (OFFSET_MASK - 3)
}

/// The old home that still owns the key, if `word` is a [`pending_word`].
pub fn pending_from(word: u64) -> Option<MachineId> {
    let machine = ((word >> (OFFSET_BITS + REMOTE_SIZE_BITS)) & MACHINE_ID_MAX) as MachineId;
    (word == pending_word(machine)).then_some(machine)
}

fn check(what: &str, value: u64, max: u64) -> Result<()> {
    if value > max {
        Err(StoreError::Limit(format!(
            "{what} {value} exceeds the address word's limit of {max}"
        )))
    } else {
        Ok(())
    }
}

/// The first word of every stored value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Whole value size in units (0: invalidated).
    pub size_units: u32,
    /// Payload bytes that follow the header.
    pub payload_bytes: u32,
}

impl Header {
    /// Header for a payload of `payload_bytes`.
    pub fn for_payload(payload_bytes: usize) -> Result<Header> {
        let size_units = units_for_payload(payload_bytes);
        if size_units > LOCAL_SIZE_UNITS_MAX || payload_bytes > u32::MAX as usize {
            return Err(StoreError::ValueTooLarge {
                bytes: payload_bytes as u64 + 8,
                limit: LOCAL_SIZE_UNITS_MAX * 8,
            });
        }
        Ok(Header {
            size_units: size_units as u32,
            payload_bytes: payload_bytes as u32,
        })
    }
    /// Encodes to the header word.
    pub fn encode(self) -> u64 {
        ((self.payload_bytes as u64) << 32) | self.size_units as u64
    }
    /// Decodes the header word.
    pub fn decode(word: u64) -> Header {
        Header {
            size_units: word as u32,
            payload_bytes: (word >> 32) as u32,
        }
    }
    /// Whether this header belongs to a live value of the address's size.
    pub fn matches(self, addr: Addr) -> bool {
        self.size_units as u64 == addr.size_units()
            && (self.payload_bytes as u64) + 8 <= addr.size_units() * 8
    }
}

/// Units a value with this payload occupies (header word plus payload rounded up to words).
pub fn units_for_payload(payload_bytes: usize) -> u64 {
    1 + (payload_bytes as u64).div_ceil(8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_round_trip_at_limits() {
        for (size, off) in [
            (1, 0),
            (LOCAL_SIZE_UNITS_MAX, OFFSET_UNITS_MAX),
            (17, 12345),
        ] {
            let a = Addr::local(size, off).unwrap();
            let w = a.encode();
            assert_eq!(w >> 63, 0, "local addresses have type bit 0");
            assert_eq!(Addr::decode(w), Some(a));
        }
        // 4 GiB local value, 128 GiB region (8-byte units).
        assert_eq!((LOCAL_SIZE_UNITS_MAX + 1) * 8, 4 << 30);
        assert_eq!((OFFSET_UNITS_MAX + 1) * 8, 128 << 30);
    }

    #[test]
    fn remote_round_trip_at_limits() {
        for (m, size, off) in [
            (0, 1, 0),
            (127, REMOTE_SIZE_UNITS_MAX, OFFSET_UNITS_MAX),
            (5, 9, 77),
        ] {
            let a = Addr::remote(m, size, off).unwrap();
            let w = a.encode();
            assert_eq!(w >> 63, 1, "remote addresses have type bit 1");
            assert_eq!(Addr::decode(w), Some(a));
            assert_eq!(a.holder(3), m);
        }
        // 128 machines, 32 MiB migratable value.
        assert_eq!(MACHINE_ID_MAX + 1, 128);
        assert_eq!((REMOTE_SIZE_UNITS_MAX + 1) * 8, 32 << 20);
    }

    #[test]
    fn over_limit_is_an_error() {
        assert!(Addr::local(LOCAL_SIZE_UNITS_MAX + 1, 0).is_err());
        assert!(Addr::local(1, OFFSET_UNITS_MAX + 1).is_err());
        assert!(Addr::local(0, 5).is_err());
        assert!(Addr::remote(128, 1, 0).is_err());
        assert!(Addr::remote(1, REMOTE_SIZE_UNITS_MAX + 1, 0).is_err());
        assert!(Addr::remote(1, 1, OFFSET_UNITS_MAX + 1).is_err());
        let e = Addr::remote(1, REMOTE_SIZE_UNITS_MAX + 1, 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("migratable value size"), "{e}");
        // A value too big to be named remotely cannot be addressed away from home.
        assert!(Addr::at(0, 1, REMOTE_SIZE_UNITS_MAX + 1, 0).is_err());
        assert!(Addr::at(1, 1, REMOTE_SIZE_UNITS_MAX + 1, 0).is_ok());
    }

    #[test]
    fn fields_do_not_bleed() {
        let a = Addr::remote(127, 1, 0).unwrap().encode();
        let b = Addr::remote(0, 1, 0).unwrap().encode();
        assert_eq!(a ^ b, 127 << 56, "the machine field is bits 56..63 only");
        let c = Addr::remote(0, REMOTE_SIZE_UNITS_MAX, 0).unwrap().encode();
        assert_eq!(
            c & (127 << 56),
            0,
            "a full size field does not reach the machine field"
        );
        let d = Addr::local(LOCAL_SIZE_UNITS_MAX, 0).unwrap().encode();
        assert_eq!(
            d & TYPE_BIT,
            0,
            "a full local size does not reach the type bit"
        );
        let all = Addr::remote(127, REMOTE_SIZE_UNITS_MAX, OFFSET_UNITS_MAX).unwrap();
        assert_eq!(Addr::decode(all.encode()), Some(all));
        assert_eq!(Addr::decode(0), None, "the zero word is the null address");
        for m in [0, 1, 127] {
            let w = lost_word(m);
            assert_eq!(Addr::decode(w), None, "a lost word names no block");
            assert_eq!(lost_on(w), Some(m));
        }
        assert_eq!(lost_on(0), None);
        assert_eq!(lost_on(all.encode()), None);
    }

    #[test]
    fn moved_and_pending_words_are_their_own_and_name_no_block() {
        let all = Addr::remote(127, REMOTE_SIZE_UNITS_MAX, OFFSET_UNITS_MAX).unwrap();
        for m in [0, 1, 127] {
            let (moved, pending, lost) = (moved_word(m), pending_word(m), lost_word(m));
            assert_eq!(Addr::decode(moved), None);
            assert_eq!(Addr::decode(pending), None);
            assert_eq!((moved_to(moved), pending_from(pending)), (Some(m), Some(m)));
            // No form is mistaken for another.
            assert_eq!((moved_to(pending), moved_to(lost)), (None, None));
            assert_eq!((pending_from(moved), pending_from(lost)), (None, None));
            assert_eq!((lost_on(moved), lost_on(pending)), (None, None));
        }
        for w in [0, all.encode(), Addr::local(3, 9).unwrap().encode()] {
            assert_eq!((moved_to(w), pending_from(w)), (None, None));
        }
    }

    #[test]
    fn header_round_trip_and_match() {
        let h = Header::for_payload(13).unwrap();
        assert_eq!(h.size_units, 3);
        assert_eq!(Header::decode(h.encode()), h);
        let a = Addr::local(3, 10).unwrap();
        assert!(h.matches(a));
        assert!(!Header::decode(0).matches(a), "a zeroed header is invalid");
        assert!(!h.matches(Addr::local(4, 10).unwrap()));
        assert!(Header::for_payload((LOCAL_SIZE_UNITS_MAX as usize) * 8).is_err());
    }
}
