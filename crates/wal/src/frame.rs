//! Record framing, shared by log segments and checkpoint files.
//!
//! ```text
//!  byte 0        4        8                        8 + len
//!       +--------+--------+------------------------+
//!       |  len   |  crc   |  payload (len bytes)   |  next frame ...
//!       +--------+--------+------------------------+
//!  len: u32 little-endian, payload bytes, at most RECORD_BYTES_MAX
//!  crc: u32 little-endian, CRC-32C of the 4 bytes of len then the payload
//! ```
//!
//! The CRC covers the length so that a damaged length is caught when the
//! frame it claims is complete. [`parse`] walks a file's bytes and says how
//! it ends:
//! - **clean**: the last frame ends at the end of the bytes;
//! - **torn**: the bytes end inside a frame (header or payload cut short), or
//!   the last frame's CRC fails and nothing follows it, or everything from
//!   some frame on is zero (a file extended but never written). This is what
//!   a crash during a write leaves: the frame was never acknowledged (the
//!   flusher acknowledges only after the whole group is written and synced);
//! - **corrupt**: a frame with bytes after it fails its CRC, or claims more
//!   than `RECORD_BYTES_MAX`. Data that was once durable changed: recovery
//!   must stop and say where.

use crate::crc32c;

/// Bytes of a frame header (length and CRC).
pub const FRAME_HEADER_BYTES: usize = 8;
/// Largest payload of one frame (a LOAD batch's new lists fit well below).
pub const RECORD_BYTES_MAX: usize = 256 << 20;

/// Appends one frame holding `payload` to `out`.
///
/// The caller keeps payloads within [`RECORD_BYTES_MAX`] (asserted: a larger
/// one is a bug of the layer above, which bounds its records).
pub fn encode(payload: &[u8], out: &mut Vec<u8>) {
    assert!(
        payload.len() <= RECORD_BYTES_MAX,
        "record of {} bytes past RECORD_BYTES_MAX",
        payload.len()
    );
    let len = (payload.len() as u32).to_le_bytes();
    let crc = crc32c::extend(crc32c::crc32c(&len), payload);
    out.extend_from_slice(&len);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(payload);
}

/// How a run of frames ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// Every byte belongs to a whole frame.
    Clean,
    /// A crash cut the last frame: the bytes from `offset` on are not a frame.
    Torn {
        /// Where the cut frame starts (truncate here).
        offset: u64,
        /// What was found.
        why: String,
    },
    /// A frame that was complete once is damaged.
    Corrupt {
        /// Where the damaged frame starts.
        offset: u64,
        /// What was found.
        why: String,
    },
}

/// The frames of `bytes` (offset of each frame, its payload) and how they end.
/// Frames after a torn or corrupt one are not returned.
pub fn parse(bytes: &[u8]) -> (Vec<(u64, &[u8])>, End) {
    let mut out = Vec::new();
    let mut o = 0usize;
    while o < bytes.len() {
        let rest = &bytes[o..];
        let zero_tail = || rest.iter().all(|&b| b == 0);
        let off = o as u64;
        if rest.len() < FRAME_HEADER_BYTES {
            let why = format!("a frame header cut after {} bytes", rest.len());
            return (out, End::Torn { offset: off, why });
        }
        let len = u32::from_le_bytes(rest[0..4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(rest[4..8].try_into().expect("4 bytes"));
        if len > RECORD_BYTES_MAX {
            if zero_tail() {
                let why = "zeroes to the end".to_string();
                return (out, End::Torn { offset: off, why });
            }
            let why = format!("a frame claims {len} bytes, past the limit of {RECORD_BYTES_MAX}");
            return (out, End::Corrupt { offset: off, why });
        }
        let end = FRAME_HEADER_BYTES + len;
        if rest.len() < end {
            let why = format!(
                "a frame of {len} bytes cut after {} bytes of payload",
                rest.len() - FRAME_HEADER_BYTES
            );
            return (out, End::Torn { offset: off, why });
        }
        let payload = &rest[FRAME_HEADER_BYTES..end];
        let want = crc32c::extend(crc32c::crc32c(&rest[0..4]), payload);
        if want != crc {
            if rest.len() == end || zero_tail() {
                let why = format!("the last frame ({len} bytes) fails its CRC");
                return (out, End::Torn { offset: off, why });
            }
            let why = format!(
                "a frame of {len} bytes fails its CRC (stored {crc:#010x}, computed {want:#010x}) and {} bytes follow it",
                rest.len() - end
            );
            return (out, End::Corrupt { offset: off, why });
        }
        out.push((off, payload));
        o += end;
    }
    (out, End::Clean)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(payloads: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in payloads {
            encode(p, &mut out);
        }
        out
    }

    #[test]
    fn round_trip_including_empty_and_large() {
        let big = vec![0xA5u8; 100_000];
        let bytes = frames(&[b"", b"one", &big]);
        let (got, end) = parse(&bytes);
        assert_eq!(end, End::Clean);
        let payloads: Vec<&[u8]> = got.iter().map(|&(_, p)| p).collect();
        assert_eq!(payloads, vec![&b""[..], &b"one"[..], &big[..]]);
        assert_eq!(got[1].0, 8);
        assert_eq!(got[2].0, 8 + 8 + 3);
    }

    #[test]
    fn layout_is_little_endian_length_then_crc() {
        let bytes = frames(&[b"abc"]);
        assert_eq!(&bytes[0..4], &[3, 0, 0, 0]);
        let crc = crc32c::crc32c(&[3, 0, 0, 0, b'a', b'b', b'c']);
        assert_eq!(&bytes[4..8], &crc.to_le_bytes());
        assert_eq!(&bytes[8..], b"abc");
    }

    #[test]
    fn every_cut_of_the_last_frame_is_torn_at_its_start() {
        let bytes = frames(&[b"first", b"second record"]);
        let last = 8 + 5;
        for cut in last + 1..bytes.len() {
            let (got, end) = parse(&bytes[..cut]);
            assert_eq!(got.len(), 1, "cut at {cut}");
            assert!(
                matches!(end, End::Torn { offset, .. } if offset == last as u64),
                "cut at {cut}: {end:?}"
            );
        }
        // A cut exactly between frames is clean.
        assert_eq!(parse(&bytes[..last]).1, End::Clean);
    }

    #[test]
    fn a_damaged_last_frame_is_torn() {
        let mut bytes = frames(&[b"first", b"second"]);
        let n = bytes.len();
        bytes[n - 1] ^= 1;
        let (got, end) = parse(&bytes);
        assert_eq!(got.len(), 1);
        assert!(matches!(end, End::Torn { offset: 13, .. }), "{end:?}");
    }

    #[test]
    fn a_zero_tail_is_torn() {
        let mut bytes = frames(&[b"first"]);
        bytes.extend_from_slice(&[0u8; 4096]);
        let (got, end) = parse(&bytes);
        assert_eq!(got.len(), 1);
        assert!(matches!(end, End::Torn { offset: 13, .. }), "{end:?}");
    }

    #[test]
    fn a_damaged_middle_frame_is_corrupt_at_its_offset() {
        let mut bytes = frames(&[b"first", b"second", b"third"]);
        bytes[13 + 8 + 2] ^= 0x40; // inside "second"
        let (got, end) = parse(&bytes);
        assert_eq!(got.len(), 1);
        match end {
            End::Corrupt { offset, why } => {
                assert_eq!(offset, 13);
                assert!(why.contains("CRC"), "{why}");
            }
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn a_huge_length_in_the_middle_is_corrupt() {
        let mut bytes = frames(&[b"first", b"second", b"third"]);
        bytes[13..17].copy_from_slice(&u32::MAX.to_le_bytes());
        let (_, end) = parse(&bytes);
        assert!(matches!(end, End::Corrupt { offset: 13, .. }), "{end:?}");
    }

    #[test]
    fn a_damaged_length_is_caught_by_the_crc() {
        let mut bytes = frames(&[b"first", b"second", b"third"]);
        // "second" claims 5 bytes instead of 6: its CRC fails, bytes follow.
        bytes[13] = 5;
        let (_, end) = parse(&bytes);
        assert!(matches!(end, End::Corrupt { offset: 13, .. }), "{end:?}");
    }
}
