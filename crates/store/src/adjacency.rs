//! How an adjacency list (or one part of it) is laid out in a value's payload.
//!
//! ```text
//!  payload (after the value header)
//!  +-------------+-------------+-----------+-----------+-----
//!  | count (u32) | flags (u32) | id 0 (u32)| id 1 (u32)| ...   little-endian
//!  +-------------+-------------+-----------+-----------+-----
//!  flags bit 0 (MORE): part i+1 of this vertex exists
//! ```
//! Vertex decomposition: a vertex with more than `part_neighbors_max`
//! neighbours is stored as keys (v, 0), (v, 1), ... each holding up to that
//! many. Part i+1 is published before part i's MORE flag is set, so a reader
//! following MORE flags never finds a missing part.

/// Flag: another part follows.
pub const MORE: u32 = 1;
/// Bytes before the ids.
pub const PREFIX_BYTES: usize = 8;

/// Encodes a part into `out` (cleared first).
pub fn encode(ids: &[u32], flags: u32, out: &mut Vec<u8>) {
    out.clear();
    out.reserve(PREFIX_BYTES + ids.len() * 4);
    out.extend_from_slice(&(ids.len() as u32).to_le_bytes());
    out.extend_from_slice(&flags.to_le_bytes());
    for id in ids {
        out.extend_from_slice(&id.to_le_bytes());
    }
}

/// A decoded view of a part's payload.
#[derive(Debug, Clone, Copy)]
pub struct PartView<'a> {
    /// Flag bits.
    pub flags: u32,
    ids: &'a [u8],
}

impl<'a> PartView<'a> {
    /// Parses a payload; `None` if it is malformed (a bug or a torn read of invalid memory).
    pub fn parse(payload: &'a [u8]) -> Option<PartView<'a>> {
        if payload.len() < PREFIX_BYTES {
            return None;
        }
        let count = u32::from_le_bytes(payload[0..4].try_into().ok()?) as usize;
        let flags = u32::from_le_bytes(payload[4..8].try_into().ok()?);
        let ids = payload.get(PREFIX_BYTES..PREFIX_BYTES + count.checked_mul(4)?)?;
        Some(PartView { flags, ids })
    }
    /// Number of ids.
    pub fn len(&self) -> usize {
        self.ids.len() / 4
    }
    /// Whether there are no ids.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
    /// Whether another part follows.
    pub fn more(&self) -> bool {
        self.flags & MORE != 0
    }
    /// The ids.
    pub fn iter(&self) -> impl Iterator<Item = u32> + 'a {
        self.ids
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
    }
    /// Appends the first `k` ids to `out`.
    pub fn extend_into(&self, k: usize, out: &mut Vec<u32>) {
        out.extend(self.iter().take(k));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut buf = Vec::new();
        encode(&[1, 2, u32::MAX], MORE, &mut buf);
        let v = PartView::parse(&buf).unwrap();
        assert!(v.more());
        assert_eq!(v.iter().collect::<Vec<_>>(), vec![1, 2, u32::MAX]);
        let mut out = vec![];
        v.extend_into(2, &mut out);
        assert_eq!(out, vec![1, 2]);
        encode(&[], 0, &mut buf);
        assert!(PartView::parse(&buf).unwrap().is_empty());
        assert!(PartView::parse(&buf[..4]).is_none());
        let mut lying = Vec::new();
        encode(&[1], 0, &mut lying);
        lying[0] = 9; // claims 9 ids, has 1
        assert!(PartView::parse(&lying).is_none());
    }
}
