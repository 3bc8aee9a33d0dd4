//! The migration index (NetMigrate 4.2): a Bloom filter of completed groups and a counting
//! Bloom filter of groups under migration, 4 hash functions each (NetMigrate 5), and the
//! routing decision of Fig. 3 from the two look-ups.
//!
//! Both filters are fixed-size register arrays sized in bytes, as on a switch: the BF is one bit
//! per entry, the CBF one byte per entry. Every operation touches exactly `HASHES` entries.
//!
//! ```text
//!   BF  CBF   state                      read          write
//!   0   0     S1 not started             source        source
//!   0   1     S2 under migration         both          destination
//!   1   0     S3 migrated                destination   destination   (it pulls what it lacks)
//!   1   1     S4 false positive          both          destination
//! ```

use crate::error::{PlacementError as Error, Result};
use crate::mix64;

/// Hash functions per filter (NetMigrate 5 uses 4 for both BF and CBF).
pub const HASHES: usize = 4;
/// Largest filter: 64 MiB, the paper's whole-switch SRAM budget (NetMigrate 1).
pub const FILTER_BYTES_MAX: usize = 64 << 20;

const SEEDS: [u64; HASHES] = [
    0x243f_6a88_85a3_08d3,
    0x1319_8a2e_0370_7344,
    0xa409_3822_299f_31d0,
    0x082e_fa98_ec4e_6c89,
];

#[inline]
fn slot(i: usize, group: u32, entries: usize) -> usize {
    (mix64(group as u64 ^ SEEDS[i]) % entries as u64) as usize
}

fn check_bytes(what: &'static str, bytes: usize) -> Result<()> {
    if bytes == 0 || bytes > FILTER_BYTES_MAX {
        return Err(Error::InvalidSetting {
            key: what,
            value: bytes.to_string(),
            expected: format!("1..={FILTER_BYTES_MAX} bytes"),
        });
    }
    Ok(())
}

/// A Bloom filter over group ids: bits only ever set (until `clear`), so membership is monotonic.
#[derive(Clone, Debug)]
pub struct BloomFilter {
    words: Vec<u64>,
    bits: usize,
}

impl BloomFilter {
    /// A filter of `bytes` bytes (8 bits per byte).
    pub fn new(bytes: usize) -> Result<Self> {
        check_bytes("bf_bytes", bytes)?;
        let bits = bytes * 8;
        Ok(Self {
            words: vec![0; bits.div_ceil(64)],
            bits,
        })
    }

    /// Marks a group.
    pub fn insert(&mut self, group: u32) {
        for i in 0..HASHES {
            let b = slot(i, group, self.bits);
            self.words[b / 64] |= 1 << (b % 64);
        }
    }

    /// Whether a group may have been inserted (no false negatives).
    pub fn contains(&self, group: u32) -> bool {
        (0..HASHES).all(|i| {
            let b = slot(i, group, self.bits);
            self.words[b / 64] & (1 << (b % 64)) != 0
        })
    }

    /// Sets every bit (the Rocksteady-like "everything migrated" preset of NetMigrate 4.4).
    pub fn fill(&mut self) {
        self.words.iter_mut().for_each(|w| *w = u64::MAX);
    }

    /// Clears every bit (the control plane does this when it reuses an instance slot).
    pub fn clear(&mut self) {
        self.words.iter_mut().for_each(|w| *w = 0);
    }

    /// The filter as bytes (bit `b` is bit `b % 8` of byte `b / 8`), as a
    /// server sends it to clients with the slot table.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out: Vec<u8> = self.words.iter().flat_map(|w| w.to_le_bytes()).collect();
        out.truncate(self.bits / 8);
        out
    }

    /// A filter from [`BloomFilter::to_bytes`].
    pub fn from_bytes(b: &[u8]) -> Result<Self> {
        let mut f = Self::new(b.len())?;
        for (i, &byte) in b.iter().enumerate() {
            f.words[i / 8] |= u64::from(byte) << (8 * (i % 8));
        }
        Ok(f)
    }
}

/// A counting Bloom filter with 8-bit counters (NetMigrate 5). A counter that reaches 255
/// sticks there: it is never decremented again, so the filter can over-report but never
/// under-report a group under migration (a false negative would send reads to the source only).
#[derive(Clone, Debug)]
pub struct CountingBloomFilter {
    counters: Vec<u8>,
    saturated: u64,
}

impl CountingBloomFilter {
    /// A filter of `bytes` one-byte counters.
    pub fn new(bytes: usize) -> Result<Self> {
        check_bytes("cbf_bytes", bytes)?;
        Ok(Self {
            counters: vec![0; bytes],
            saturated: 0,
        })
    }

    /// A group starts migrating (GROUP-START).
    pub fn increment(&mut self, group: u32) {
        for i in 0..HASHES {
            let n = self.counters.len();
            let c = &mut self.counters[slot(i, group, n)];
            if *c == u8::MAX {
                continue;
            }
            *c += 1;
            if *c == u8::MAX {
                self.saturated += 1;
            }
        }
    }

    /// A group finished migrating (GROUP-COMPLETE). Counters never go below zero; the router
    /// refuses a COMPLETE for a group the filter does not contain.
    pub fn decrement(&mut self, group: u32) {
        for i in 0..HASHES {
            let n = self.counters.len();
            let c = &mut self.counters[slot(i, group, n)];
            if *c != u8::MAX && *c > 0 {
                *c -= 1;
            }
        }
    }

    /// Whether a group may be under migration.
    pub fn contains(&self, group: u32) -> bool {
        (0..HASHES).all(|i| self.counters[slot(i, group, self.counters.len())] > 0)
    }

    /// Sets every counter to 1 (the Fulva-like "always pending" preset of NetMigrate 4.4).
    pub fn fill_one(&mut self) {
        self.counters.iter_mut().for_each(|c| *c = 1);
    }

    /// Counters stuck at 255 so far (each one is a permanent source of false positives).
    pub fn saturated(&self) -> u64 {
        self.saturated
    }

    /// Zeroes every counter.
    pub fn clear(&mut self) {
        self.counters.iter_mut().for_each(|c| *c = 0);
        self.saturated = 0;
    }

    /// The counters, one byte each.
    pub fn as_bytes(&self) -> &[u8] {
        &self.counters
    }

    /// A filter from [`CountingBloomFilter::as_bytes`].
    pub fn from_bytes(b: &[u8]) -> Result<Self> {
        check_bytes("cbf_bytes", b.len())?;
        Ok(Self {
            counters: b.to_vec(),
            saturated: b.iter().filter(|&&c| c == u8::MAX).count() as u64,
        })
    }
}

/// A group's state as the filters report it (NetMigrate Fig. 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupState {
    /// S1: not started.
    NotStarted,
    /// S2: under migration.
    Migrating,
    /// S3: migrated.
    Migrated,
    /// S4: both filters positive, a false positive.
    Conflict,
}

/// Where one query goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// To the source only.
    Source,
    /// To the destination only (it pulls what it lacks).
    Destination,
    /// A read to both; the client keeps the newer reply.
    DoubleRead,
}

/// S1..S4 from the two look-ups.
pub fn classify(bf: bool, cbf: bool) -> GroupState {
    match (bf, cbf) {
        (false, false) => GroupState::NotStarted,
        (false, true) => GroupState::Migrating,
        (true, false) => GroupState::Migrated,
        (true, true) => GroupState::Conflict,
    }
}

/// The routing decision of Fig. 3 (pure): no state that sends a write to the destination is
/// followed by one that reads from the source alone.
pub fn decide(state: GroupState, is_write: bool) -> Route {
    match (state, is_write) {
        (GroupState::NotStarted, _) => Route::Source,
        (GroupState::Migrated, _) => Route::Destination,
        (GroupState::Migrating | GroupState::Conflict, true) => Route::Destination,
        (GroupState::Migrating | GroupState::Conflict, false) => Route::DoubleRead,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bloom_has_no_false_negatives() {
        let mut bf = BloomFilter::new(16).unwrap();
        for g in (0..40).step_by(3) {
            bf.insert(g);
        }
        for g in (0..40).step_by(3) {
            assert!(bf.contains(g));
        }
    }

    #[test]
    fn tiny_bloom_reports_false_positives() {
        let mut bf = BloomFilter::new(1).unwrap();
        for g in 0..4 {
            bf.insert(g);
        }
        let fp = (100..1100).filter(|&g| bf.contains(g)).count();
        assert!(fp > 0, "an 8-bit filter with 4 groups must collide");
    }

    #[test]
    fn counting_filter_returns_to_empty() {
        let mut cbf = CountingBloomFilter::new(8).unwrap();
        for g in 0..20 {
            cbf.increment(g);
        }
        for g in 0..20 {
            assert!(cbf.contains(g));
        }
        for g in 0..20 {
            cbf.decrement(g);
        }
        assert!((0..20).all(|g| !cbf.contains(g)));
    }

    #[test]
    fn saturated_counters_stick() {
        let mut cbf = CountingBloomFilter::new(1).unwrap();
        for _ in 0..300 {
            cbf.increment(7);
        }
        assert!(cbf.saturated() > 0);
        for _ in 0..300 {
            cbf.decrement(7);
        }
        assert!(cbf.contains(7), "a stuck counter must keep reporting");
    }

    #[test]
    fn the_decision_never_reads_the_source_alone_after_a_write_went_to_the_destination() {
        use GroupState::*;
        assert_eq!(decide(classify(false, false), false), Route::Source);
        assert_eq!(decide(classify(false, false), true), Route::Source);
        for state in [Migrating, Migrated, Conflict] {
            assert_eq!(decide(state, true), Route::Destination);
            assert_ne!(decide(state, false), Route::Source, "{state:?}");
        }
        assert_eq!(decide(Migrating, false), Route::DoubleRead);
        assert_eq!(decide(Migrated, false), Route::Destination);
        assert_eq!(decide(Conflict, false), Route::DoubleRead);
        assert_eq!(classify(true, true), Conflict);
    }

    #[test]
    fn sizes_are_checked() {
        assert!(BloomFilter::new(0).is_err());
        assert!(CountingBloomFilter::new(FILTER_BYTES_MAX + 1).is_err());
    }

    #[test]
    fn filters_round_trip_through_bytes() {
        let mut bf = BloomFilter::new(13).unwrap();
        let mut cbf = CountingBloomFilter::new(7).unwrap();
        for g in [1u32, 77, 4095] {
            bf.insert(g);
            cbf.increment(g);
        }
        let (bf2, cbf2) = (
            BloomFilter::from_bytes(&bf.to_bytes()).unwrap(),
            CountingBloomFilter::from_bytes(cbf.as_bytes()).unwrap(),
        );
        assert_eq!(bf.to_bytes().len(), 13);
        for g in 0..5000 {
            assert_eq!(bf.contains(g), bf2.contains(g), "group {g}");
            assert_eq!(cbf.contains(g), cbf2.contains(g), "group {g}");
        }
        assert!(BloomFilter::from_bytes(&[]).is_err());
        assert!(BloomFilter::new(FILTER_BYTES_MAX).is_ok());
    }
}
