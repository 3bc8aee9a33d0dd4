//! YCSB's core workload generators, sample for sample.
//!
//! Given the same sequence of uniform draws, every generator here returns
//! the same items as YCSB's Java classes (`site.ycsb.generator.*` and
//! `CoreWorkload`), so a run can be compared with published YCSB numbers and
//! with NetMigrate (6: workloads A, B, C and write ratios 0-30%, Zipfian
//! with theta 0.99). `tests/ycsb_matches_reference.rs` checks this against
//! samples computed by a Java re-derivation (real `java.util.Random`, real
//! `Math.pow`, Java `long` arithmetic) committed in `tests/data/`.
//!
//! How YCSB picks a key for a transaction (zipfian request distribution):
//!
//! ```text
//!  u ─▶ Zipfian over 0..=10^10 (zeta precomputed) ─▶ z
//!       z ─▶ fnvhash64(z) % item_count + min        ─▶ item   (ScrambledZipfian)
//!       item > record_count - 1 ? draw again         ─▶ key    (CoreWorkload::nextKeynum)
//! ```
//!
//! Randomness is pluggable ([`UniformSource`]): [`FastUniform`] for real
//! runs, [`JavaRandom`] (a port of `java.util.Random`) to replay YCSB's
//! arithmetic. Differences from YCSB, all deliberate and documented where
//! they live: nothing is drawn at construction (YCSB's `ZipfianGenerator`
//! constructor draws and discards one value), updates draw no field name or
//! value bytes (one field, values made by the caller), and the two inputs
//! for which Java's `Math.abs` returns a negative number map into range
//! instead of producing a negative item.

use rand::RngCore;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::error::{Result, WorkloadError};

/// YCSB's default Zipfian constant (`ZipfianGenerator.ZIPFIAN_CONSTANT`).
pub const ZIPFIAN_CONSTANT: f64 = 0.99;
/// Zeta(10^10, 0.99), precomputed by YCSB (`ScrambledZipfianGenerator.ZETAN`).
pub const SCRAMBLED_ZETAN: f64 = 26.46902820178302;
/// The item range of the Zipfian under a scrambled Zipfian
/// (`ScrambledZipfianGenerator.ITEM_COUNT`); YCSB builds it over
/// `0..=ITEM_COUNT`, i.e. `ITEM_COUNT + 1` items.
pub const SCRAMBLED_ITEM_COUNT: u64 = 10_000_000_000;
/// FNV-1 64-bit offset basis, as `Utils.FNV_OFFSET_BASIS_64`.
pub const FNV_OFFSET_BASIS_64: u64 = 0xCBF2_9CE4_8422_2325;
/// FNV-1 64-bit prime, as `Utils.FNV_PRIME_64`.
pub const FNV_PRIME_64: u64 = 1_099_511_628_211;
/// The largest record count accepted: YCSB truncates key numbers with
/// `intValue()`, so above this its keys would wrap negative.
pub const RECORD_COUNT_MAX: u64 = i32::MAX as u64;
/// Consecutive rejected key draws after which the uniform source is taken
/// to be broken (YCSB loops forever). A healthy source rejects at most the
/// one item past the end, so this is never reached in practice.
pub const KEY_DRAWS_MAX: u32 = 1_000_000;

// ---------------------------------------------------------------------------
// Uniform sources
// ---------------------------------------------------------------------------

/// A source of uniform draws, the only randomness the generators use.
pub trait UniformSource {
    /// The next double in `[0, 1)` (Java's `nextDouble`).
    fn next_f64(&mut self) -> f64;
    /// The next uniformly distributed 64-bit integer (Java's `nextLong`).
    fn next_i64(&mut self) -> i64;
}

/// A seeded fast generator (xoshiro256++) for real runs.
#[derive(Debug, Clone)]
pub struct FastUniform(Xoshiro256PlusPlus);

impl FastUniform {
    /// A generator from a seed; equal seeds give equal sequences.
    pub fn new(seed: u64) -> FastUniform {
        FastUniform(Xoshiro256PlusPlus::seed_from_u64(seed))
    }
}

impl UniformSource for FastUniform {
    fn next_f64(&mut self) -> f64 {
        // 53 random bits scaled by 2^-53: every value is in [0, 1).
        (self.0.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    fn next_i64(&mut self) -> i64 {
        self.0.next_u64() as i64
    }
}

/// A port of `java.util.Random`: the 48-bit linear congruential generator
/// of Knuth 3.2.1 with Java's seed scrambling, `nextInt`, `nextLong` and
/// `nextDouble` exactly as the JDK specifies them.
#[derive(Debug, Clone)]
pub struct JavaRandom {
    seed: u64,
}

impl JavaRandom {
    const MULTIPLIER: u64 = 0x5_DEEC_E66D;
    const ADDEND: u64 = 0xB;
    const MASK: u64 = (1 << 48) - 1;

    /// `new Random(seed)`.
    pub fn new(seed: i64) -> JavaRandom {
        JavaRandom {
            seed: (seed as u64 ^ Self::MULTIPLIER) & Self::MASK,
        }
    }

    /// `next(bits)`: the top `bits` of the new 48-bit state, as a Java int.
    fn next(&mut self, bits: u32) -> i32 {
        debug_assert!((1..=32).contains(&bits));
        self.seed = self
            .seed
            .wrapping_mul(Self::MULTIPLIER)
            .wrapping_add(Self::ADDEND)
            & Self::MASK;
        (self.seed >> (48 - bits)) as u32 as i32
    }

    /// `nextInt()`.
    pub fn next_int(&mut self) -> i32 {
        self.next(32)
    }

    /// `nextLong()`: `((long) next(32) << 32) + next(32)`, the second int
    /// sign-extended as Java does.
    pub fn next_long(&mut self) -> i64 {
        let high = (self.next(32) as i64) << 32;
        high.wrapping_add(self.next(32) as i64)
    }

    /// `nextDouble()`: `(((long) next(26) << 27) + next(27)) * 0x1.0p-53`.
    pub fn next_double(&mut self) -> f64 {
        let high = (self.next(26) as i64) << 27;
        (high + self.next(27) as i64) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

impl UniformSource for JavaRandom {
    fn next_f64(&mut self) -> f64 {
        self.next_double()
    }

    fn next_i64(&mut self) -> i64 {
        self.next_long()
    }
}

// ---------------------------------------------------------------------------
// Hashing
// ---------------------------------------------------------------------------

/// YCSB's `Utils.fnvhash64`: FNV-1 over the 8 bytes of `val`, low byte
/// first, in Java `long` arithmetic (arithmetic shift, wrapping multiply),
/// then `Math.abs`. The result is below 2^63 except for the (never
/// observed) hash `i64::MIN`, which Java's `Math.abs` leaves as is: it is
/// returned as `1 << 63`, the same bits.
pub fn fnvhash64(val: u64) -> u64 {
    let mut val = val as i64;
    let mut hash = FNV_OFFSET_BASIS_64 as i64;
    for _ in 0..8 {
        let octet = val & 0xff;
        val >>= 8; // arithmetic, as Java's `>>`
        hash ^= octet;
        hash = hash.wrapping_mul(FNV_PRIME_64 as i64);
    }
    hash.wrapping_abs() as u64
}

/// Java's `a % b` for a hash from [`fnvhash64`] and a positive modulus,
/// kept in `0..b`: Java would give a negative remainder for the one hash
/// `1 << 63` (a negative `long`); we use its Euclidean remainder instead.
fn hash_mod(hash: u64, modulus: u64) -> u64 {
    debug_assert!(modulus > 0 && modulus <= i64::MAX as u64);
    (hash as i64).rem_euclid(modulus as i64) as u64
}

/// YCSB's key name (`CoreWorkload.buildKeyName`): `"user"` followed by the
/// item number (its [`fnvhash64`] when `ordered_inserts` is false, YCSB's
/// default `insertorder=hashed`) left-padded with zeros to `zero_padding`
/// digits. NetMigrate uses 4-byte keys instead; encode [`Op::item`] there.
pub fn key_name(item: u64, zero_padding: usize, ordered_inserts: bool) -> String {
    let number = if ordered_inserts {
        item as i64
    } else {
        fnvhash64(item) as i64
    };
    format!("user{number:0>zero_padding$}")
}

// ---------------------------------------------------------------------------
// Zipfian
// ---------------------------------------------------------------------------

/// Zeta(from..to, theta) continued from `initial`: `initial + sum over
/// i in from..to of 1 / (i + 1)^theta`, summed in order as YCSB's
/// `zetastatic` does (the order fixes the rounding).
pub fn zeta(from: u64, to: u64, theta: f64, initial: f64) -> f64 {
    let mut sum = initial;
    for i in from..to {
        sum += 1.0 / ((i + 1) as f64).powf(theta);
    }
    sum
}

/// YCSB's `ZipfianGenerator` (Gray et al., SIGMOD 1994): items
/// `min..=max`, item `min` the most popular, P(min + i) proportional to
/// 1 / (i + 1)^theta. Construction sums zeta over all items (O(n)) unless
/// given; sampling is O(1). Popular items are clustered at `min`; use
/// [`ScrambledZipfian`] to spread them.
#[derive(Debug, Clone)]
pub struct Zipfian {
    base: u64,
    items: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    zeta2theta: f64,
    /// `1 + 0.5^theta`: below it (and above 1) a draw is item `base + 1`.
    second_bound: f64,
    count_for_zeta: u64,
}

impl Zipfian {
    /// Items `min..=max` with skew `theta` in (0, 1); sums zeta (O(items)).
    pub fn new(min: u64, max: u64, theta: f64) -> Result<Zipfian> {
        let items = Self::check(min, max, theta)?;
        Self::with_zetan(min, max, theta, zeta(0, items, theta, 0.0))
    }

    /// Items `min..=max` with a precomputed zeta(items, theta), as YCSB's
    /// four-argument constructor. The caller vouches for `zetan`.
    pub fn with_zetan(min: u64, max: u64, theta: f64, zetan: f64) -> Result<Zipfian> {
        let items = Self::check(min, max, theta)?;
        let zeta2theta = zeta(0, 2, theta, 0.0);
        let eta = Self::eta(items, theta, zeta2theta, zetan);
        Ok(Zipfian {
            base: min,
            items,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta,
            zeta2theta,
            second_bound: 1.0 + 0.5f64.powf(theta),
            count_for_zeta: items,
        })
    }

    fn check(min: u64, max: u64, theta: f64) -> Result<u64> {
        let range = |why| WorkloadError::Range { min, max, why };
        if max < min {
            return Err(range("max is below min"));
        }
        // Java longs: base + item must stay a positive long.
        if max >= i64::MAX as u64 {
            return Err(range("max must be below 2^63 - 1 (Java long)"));
        }
        if !(theta > 0.0 && theta < 1.0) {
            return Err(WorkloadError::Theta { theta });
        }
        Ok(max - min + 1)
    }

    fn eta(items: u64, theta: f64, zeta2theta: f64, zetan: f64) -> f64 {
        (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2theta / zetan)
    }

    /// Number of items the generator was built for.
    pub fn items(&self) -> u64 {
        self.items
    }

    /// The skew.
    pub fn theta(&self) -> f64 {
        self.theta
    }

    /// The next item (YCSB's `nextValue`), consuming one uniform draw.
    pub fn next(&mut self, u: &mut impl UniformSource) -> u64 {
        self.next_with_count(self.items, u)
    }

    /// YCSB's `nextLong(itemcount)`: the next item for a distribution that
    /// now has `item_count` items. A larger count than before extends zeta
    /// incrementally (and, as YCSB does, recomputes eta from the count the
    /// generator was built with); a smaller one keeps zeta and eta as they
    /// are (YCSB's default `allowitemcountdecrease = false`). Like YCSB,
    /// the result may exceed `min + item_count - 1` by one when the draw
    /// lies within rounding of 1.
    pub fn next_with_count(&mut self, item_count: u64, u: &mut impl UniformSource) -> u64 {
        if item_count > self.count_for_zeta {
            self.zetan = zeta(self.count_for_zeta, item_count, self.theta, self.zetan);
            self.count_for_zeta = item_count;
            self.eta = Self::eta(self.items, self.theta, self.zeta2theta, self.zetan);
        }
        self.sample(item_count, u.next_f64())
    }

    /// The item for one uniform draw `u` in [0, 1).
    fn sample(&self, item_count: u64, u: f64) -> u64 {
        let uz = u * self.zetan;
        if uz < 1.0 {
            return self.base;
        }
        if uz < self.second_bound {
            return self.base + 1;
        }
        // Same operation order as Java (no fused multiply-add); the cast
        // truncates toward zero and saturates as Java's `(long)` does.
        let scaled = item_count as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha);
        self.base + scaled as i64 as u64
    }
}

/// YCSB's `ScrambledZipfianGenerator` with theta 0.99: a Zipfian over
/// `0..=10^10` (zeta precomputed, so construction is O(1)) whose item is
/// hashed with [`fnvhash64`] into `min..=max`. Hot items are spread over
/// the range instead of clustered at `min`; which items are hot depends
/// only on the range size.
#[derive(Debug, Clone)]
pub struct ScrambledZipfian {
    min: u64,
    item_count: u64,
    zipfian: Zipfian,
}

impl ScrambledZipfian {
    /// Items `0..items` (YCSB's one-argument constructor).
    pub fn new(items: u64) -> Result<ScrambledZipfian> {
        if items == 0 {
            return Err(WorkloadError::NoItems {
                what: "a scrambled Zipfian",
            });
        }
        ScrambledZipfian::with_range(0, items - 1)
    }

    /// Items `min..=max` (inclusive, as YCSB).
    pub fn with_range(min: u64, max: u64) -> Result<ScrambledZipfian> {
        if max < min || max >= i64::MAX as u64 {
            return Err(WorkloadError::Range {
                min,
                max,
                why: "need min <= max < 2^63 - 1",
            });
        }
        // YCSB: new ZipfianGenerator(0, ITEM_COUNT, 0.99, ZETAN), so
        // ITEM_COUNT + 1 items with the zeta of ITEM_COUNT.
        let zipfian =
            Zipfian::with_zetan(0, SCRAMBLED_ITEM_COUNT, ZIPFIAN_CONSTANT, SCRAMBLED_ZETAN)?;
        Ok(ScrambledZipfian {
            min,
            item_count: max - min + 1,
            zipfian,
        })
    }

    /// Number of items in the range.
    pub fn items(&self) -> u64 {
        self.item_count
    }

    /// The next item, consuming one uniform draw.
    pub fn next(&mut self, u: &mut impl UniformSource) -> u64 {
        let z = self.zipfian.next(u);
        self.min + hash_mod(fnvhash64(z), self.item_count)
    }
}

/// YCSB's `UniformLongGenerator`: `|nextLong()| % interval + lb`, items
/// `lb..=ub` with the slight bias of the modulo that YCSB has. For the one
/// draw `i64::MIN` (Java: a negative item) the result is kept in range.
#[derive(Debug, Clone)]
pub struct UniformLong {
    lb: u64,
    interval: u64,
}

impl UniformLong {
    /// Items `lb..=ub`.
    pub fn new(lb: u64, ub: u64) -> Result<UniformLong> {
        if ub < lb || ub >= i64::MAX as u64 {
            return Err(WorkloadError::Range {
                min: lb,
                max: ub,
                why: "need lb <= ub < 2^63 - 1",
            });
        }
        Ok(UniformLong {
            lb,
            interval: ub - lb + 1,
        })
    }

    /// The next item, consuming one `next_i64` draw.
    pub fn next(&mut self, u: &mut impl UniformSource) -> u64 {
        let abs = u.next_i64().wrapping_abs() as u64;
        self.lb + hash_mod(abs, self.interval)
    }
}

// ---------------------------------------------------------------------------
// CoreWorkload: operation mix and key choice
// ---------------------------------------------------------------------------

/// How keys are chosen (YCSB's `requestdistribution`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestDistribution {
    /// `zipfian`: [`ScrambledZipfian`] over `0..=record_count` with draws
    /// past the last record rejected, exactly as `CoreWorkload` does.
    Zipfian,
    /// `uniform`: [`UniformLong`] over `0..record_count`.
    Uniform,
}

/// An operation mix: YCSB's `readproportion` and `updateproportion` with
/// `requestdistribution`. Inserts, scans and read-modify-writes are not
/// generated (NetMigrate's workloads have none).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Workload {
    /// Share of reads.
    pub read_proportion: f64,
    /// Share of updates.
    pub update_proportion: f64,
    /// How keys are chosen.
    pub request_distribution: RequestDistribution,
}

impl Workload {
    /// YCSB workload A: 50% reads, 50% updates, Zipfian.
    pub fn a() -> Workload {
        Workload {
            read_proportion: 0.5,
            update_proportion: 0.5,
            request_distribution: RequestDistribution::Zipfian,
        }
    }

    /// YCSB workload B: 95% reads, 5% updates, Zipfian (NetMigrate's default).
    pub fn b() -> Workload {
        Workload {
            read_proportion: 0.95,
            update_proportion: 0.05,
            request_distribution: RequestDistribution::Zipfian,
        }
    }

    /// YCSB workload C: reads only, Zipfian.
    pub fn c() -> Workload {
        Workload {
            read_proportion: 1.0,
            update_proportion: 0.0,
            request_distribution: RequestDistribution::Zipfian,
        }
    }

    /// Zipfian reads and updates with `write_ratio` (0..=1) updates, as
    /// NetMigrate's 0%, 5%, 10%, 20% and 30% runs.
    pub fn with_write_ratio(write_ratio: f64) -> Result<Workload> {
        let w = Workload {
            read_proportion: 1.0 - write_ratio,
            update_proportion: write_ratio,
            request_distribution: RequestDistribution::Zipfian,
        };
        if !(0.0..=1.0).contains(&write_ratio) {
            return Err(WorkloadError::Proportion {
                what: "write ratio",
                value: write_ratio,
            });
        }
        Ok(w)
    }

    /// The same mix with another key distribution.
    pub fn distribution(mut self, request_distribution: RequestDistribution) -> Workload {
        self.request_distribution = request_distribution;
        self
    }

    /// Checks the proportions (each in 0..=1, finite, not both zero).
    pub fn validate(&self) -> Result<()> {
        for (what, value) in [
            ("read proportion", self.read_proportion),
            ("update proportion", self.update_proportion),
        ] {
            if !(0.0..=1.0).contains(&value) {
                return Err(WorkloadError::Proportion { what, value });
            }
        }
        if self.read_proportion == 0.0 && self.update_proportion == 0.0 {
            return Err(WorkloadError::NoOperations);
        }
        Ok(())
    }

    /// An operation generator over records `0..record_count`.
    pub fn generator(&self, record_count: u64) -> Result<OpGenerator> {
        OpGenerator::new(self, record_count)
    }
}

/// One transaction: the operation and its record number (YCSB's `keynum`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// Read the record.
    Read(u64),
    /// Overwrite the record's value.
    Update(u64),
}

impl Op {
    /// The record number.
    pub fn item(&self) -> u64 {
        match *self {
            Op::Read(item) | Op::Update(item) => item,
        }
    }
}

#[derive(Debug, Clone)]
enum KeyChooser {
    Zipfian(ScrambledZipfian),
    Uniform(UniformLong),
}

/// YCSB's `CoreWorkload.doTransaction` for reads and updates: one uniform
/// draw picks the operation (`DiscreteGenerator`: READ then UPDATE, each
/// only if its proportion is above 0), then key draws until one is a
/// loaded record (`nextKeynum`).
#[derive(Debug, Clone)]
pub struct OpGenerator {
    /// (normalised weight, is update), in YCSB's order.
    choices: Vec<(f64, bool)>,
    keys: KeyChooser,
    last_record: u64,
}

impl OpGenerator {
    /// Operations of `workload` over records `0..record_count`.
    pub fn new(workload: &Workload, record_count: u64) -> Result<OpGenerator> {
        workload.validate()?;
        if record_count == 0 || record_count > RECORD_COUNT_MAX {
            return Err(WorkloadError::RecordCount {
                count: record_count,
            });
        }
        let mut weights = Vec::new();
        if workload.read_proportion > 0.0 {
            weights.push((workload.read_proportion, false));
        }
        if workload.update_proportion > 0.0 {
            weights.push((workload.update_proportion, true));
        }
        // DiscreteGenerator divides by the sum each time; same values.
        let sum: f64 = weights.iter().map(|w| w.0).sum();
        let choices = weights.iter().map(|&(w, up)| (w / sum, up)).collect();
        let keys = match workload.request_distribution {
            // insertstart 0, insertcount = record_count, no expected new
            // keys (no inserts): ScrambledZipfian(0, record_count), inclusive.
            RequestDistribution::Zipfian => {
                KeyChooser::Zipfian(ScrambledZipfian::with_range(0, record_count)?)
            }
            RequestDistribution::Uniform => {
                KeyChooser::Uniform(UniformLong::new(0, record_count - 1)?)
            }
        };
        Ok(OpGenerator {
            choices,
            keys,
            last_record: record_count - 1,
        })
    }

    /// The next operation.
    pub fn next(&mut self, u: &mut impl UniformSource) -> Op {
        let is_update = self.choose(u.next_f64());
        let item = self.next_item(u);
        if is_update {
            Op::Update(item)
        } else {
            Op::Read(item)
        }
    }

    /// `DiscreteGenerator.nextValue` for one draw. YCSB throws if rounding
    /// leaves the draw past the last weight; we take the last operation.
    fn choose(&self, mut val: f64) -> bool {
        for &(pw, is_update) in &self.choices {
            if val < pw {
                return is_update;
            }
            val -= pw;
        }
        self.choices.last().map(|c| c.1).unwrap_or(false)
    }

    /// `nextKeynum`: draw until the key is a loaded record.
    fn next_item(&mut self, u: &mut impl UniformSource) -> u64 {
        for _ in 0..KEY_DRAWS_MAX {
            let item = match &mut self.keys {
                KeyChooser::Zipfian(g) => g.next(u),
                KeyChooser::Uniform(g) => g.next(u),
            };
            if item <= self.last_record {
                return item;
            }
        }
        panic!("{KEY_DRAWS_MAX} consecutive key draws were past the last record: the uniform source is broken");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source replaying given doubles (and longs), for exact unit cases.
    struct Replay(Vec<f64>, usize);

    impl UniformSource for Replay {
        fn next_f64(&mut self) -> f64 {
            self.1 += 1;
            self.0[self.1 - 1]
        }
        fn next_i64(&mut self) -> i64 {
            (self.next_f64() * i64::MAX as f64) as i64
        }
    }

    #[test]
    fn java_random_known_values() {
        // Values every JDK gives (java.util.Random is specified exactly).
        assert_eq!(JavaRandom::new(0).next_int(), -1155484576);
        assert_eq!(JavaRandom::new(42).next_int(), -1170105035);
        assert_eq!(JavaRandom::new(0).next_double(), 0.730967787376657);
    }

    #[test]
    fn fnv_of_zero_and_sign() {
        // FNV-1 over eight zero bytes, then |.|.
        let mut h = FNV_OFFSET_BASIS_64;
        for _ in 0..8 {
            h = h.wrapping_mul(FNV_PRIME_64);
        }
        assert_eq!(fnvhash64(0), (h as i64).wrapping_abs() as u64);
        for v in [1u64, 255, 1 << 40, u64::MAX, i64::MAX as u64] {
            assert!(fnvhash64(v) < 1 << 63);
        }
    }

    #[test]
    fn zipfian_head_bounds() {
        let mut z = Zipfian::new(0, 999, 0.99).unwrap();
        let zetan = zeta(0, 1000, 0.99, 0.0);
        // u * zetan < 1 is item 0; below 1 + 0.5^theta item 1.
        let mut src = Replay(vec![0.0, 0.999 / zetan, 1.001 / zetan, 0.999999], 0);
        assert_eq!(z.next(&mut src), 0);
        assert_eq!(z.next(&mut src), 0);
        assert_eq!(z.next(&mut src), 1);
        let last = z.next(&mut src);
        assert!(last > 900 && last <= 1000, "{last}");
    }

    #[test]
    fn zipfian_incremental_zeta_equals_full_sum() {
        let mut z = Zipfian::new(0, 99, 0.9).unwrap();
        let mut src = FastUniform::new(1);
        z.next_with_count(150, &mut src);
        assert_eq!(z.zetan, zeta(100, 150, 0.9, zeta(0, 100, 0.9, 0.0)));
        assert!((z.zetan - zeta(0, 150, 0.9, 0.0)).abs() < 1e-12);
        let before = (z.zetan, z.eta);
        z.next_with_count(120, &mut src); // decrease: nothing recomputed
        assert_eq!((z.zetan, z.eta), before);
    }

    #[test]
    fn bad_parameters_are_errors() {
        assert!(matches!(
            Zipfian::new(5, 4, 0.99),
            Err(WorkloadError::Range { .. })
        ));
        assert_eq!(
            Zipfian::new(0, 9, 1.0).unwrap_err(),
            WorkloadError::Theta { theta: 1.0 }
        );
        assert!(matches!(
            ScrambledZipfian::new(0),
            Err(WorkloadError::NoItems { .. })
        ));
        assert!(UniformLong::new(3, 2).is_err());
        for bad in [-0.01, 1.01, f64::NAN, f64::INFINITY] {
            let e = Workload::with_write_ratio(bad).unwrap_err();
            assert!(e.to_string().contains("write ratio"), "{e}");
        }
        assert!(Workload::with_write_ratio(0.0).is_ok());
        assert!(Workload::with_write_ratio(1.0).is_ok());
        assert_eq!(
            Workload::b().generator(0).unwrap_err(),
            WorkloadError::RecordCount { count: 0 }
        );
        assert!(Workload::b().generator(RECORD_COUNT_MAX + 1).is_err());
        let none = Workload {
            read_proportion: 0.0,
            update_proportion: 0.0,
            request_distribution: RequestDistribution::Uniform,
        };
        assert_eq!(none.generator(10).unwrap_err(), WorkloadError::NoOperations);
    }

    #[test]
    fn key_names() {
        assert_eq!(key_name(7, 5, true), "user00007");
        assert_eq!(key_name(123456, 1, true), "user123456");
        assert_eq!(key_name(0, 1, false), format!("user{}", fnvhash64(0)));
    }

    #[test]
    fn single_record_is_always_item_zero() {
        let mut g = Workload::a().generator(1).unwrap();
        let mut src = FastUniform::new(3);
        for _ in 0..1000 {
            assert_eq!(g.next(&mut src).item(), 0);
        }
    }
}
