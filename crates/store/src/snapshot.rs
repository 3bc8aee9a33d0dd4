//! A snapshot's record at a home, and the assembly of a cut from one-sided
//! reads and pre-images (issue 63, requirement 4; design rules S2 and S3 in
//! `docs/design.md`, "Analytics over a running cluster"). Neither does I/O:
//! the worker (`worker/snapshot.rs`) takes the record's lock around each
//! call and carries out what it answers (retiring blocks, reading values).
//!
//! ```text
//!  begin(id) ──▶ Open ──first write of key k (before its CAS)──▶ k -> word as of the cut
//!                  │   ──a CAS that replaced k's recorded word──▶ that block pinned, not retired
//!                  ├─ pre_images(id): every (k, word)
//!                  ├─ end(id) ───────────────────────────────▶ Closed: retire the pinned blocks
//!                  └─ open longer than open_s_max, or more than
//!                     entries_max records ──────────────────▶ Closed(ended): retire them;
//!                                                             later calls of id fail, saying why
//! ```
//!
//! Rules:
//! - **S2 (pre-images).** While a snapshot is open, the first write of a key
//!   records the key's address word as it was at the cut (0: absent). An
//!   update records it under the vertex's update lock *before* it zeroes the
//!   old header and CASes ([`SnapshotRecord::note_write`]); later writes of
//!   the key record nothing. So a reader that read a key after its first
//!   change finds that key in the record it fetches after all its reads.
//! - **S3 (pinning).** The block a recorded word names outlives the snapshot:
//!   whoever's CAS replaces that word (the update, or a MIGRATE that won the
//!   race with it) hands the block to the record instead of retiring it
//!   ([`SnapshotRecord::keeps`]), and [`SnapshotRecord::end`] gives the pinned
//!   blocks back for retirement. A MIGRATE whose CAS replaced the word of a
//!   key with no record yet records that word itself (the value was the
//!   cut's: no update of the key published since the cut, or it would have
//!   recorded first) and pins the old copy. The pinned block's *header* may be
//!   zero (an update zeroes its old header before its CAS, P2 in
//!   ARCHITECTURE.md; so does MIGRATE), so a cut reader reads a pinned block
//!   by the recorded word and the payload's own count, never by its header:
//!   what must never happen is the block's reuse.
//! - The cut itself (S1: no vertex op in flight anywhere at BEGIN) is the
//!   caller's: a node's gate, or a test's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use locus_fabric::MachineId;

use crate::addr::Addr;
use crate::table::Key;
use crate::{Result, StoreError, VertexId};

/// Seconds a snapshot may stay open unless configured (`--snapshot-max-s`).
pub const SNAPSHOT_OPEN_S_MAX_DEFAULT: u64 = 600;
/// Keys one home records for one snapshot unless configured.
pub const SNAPSHOT_ENTRIES_MAX_DEFAULT: usize = 1 << 24;

/// A snapshot's limits at a home.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotConfig {
    /// A snapshot open longer than this is ended by the home (its pinned
    /// blocks retired), and later calls for it fail with
    /// [`StoreError::SnapshotEnded`].
    pub open_s_max: u64,
    /// Keys recorded at most; one more ends the snapshot the same way (a
    /// write never fails because a snapshot is open).
    pub entries_max: usize,
}

impl Default for SnapshotConfig {
    fn default() -> Self {
        SnapshotConfig {
            open_s_max: SNAPSHOT_OPEN_S_MAX_DEFAULT,
            entries_max: SNAPSHOT_ENTRIES_MAX_DEFAULT,
        }
    }
}

impl SnapshotConfig {
    /// Checks the limits, naming the field that is wrong.
    pub fn validate(&self) -> Result<()> {
        if self.open_s_max == 0 {
            return Err(StoreError::Config(
                "snapshot open_s_max must be at least 1 second".into(),
            ));
        }
        if self.entries_max == 0 {
            return Err(StoreError::Config(
                "snapshot entries_max must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

/// Why a home ended a snapshot before its END.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndedBy {
    /// It was open longer than `open_s_max`.
    Expired {
        /// The limit, in seconds.
        open_s_max: u64,
    },
    /// It recorded more than `entries_max` keys.
    Overflowed {
        /// The limit.
        entries_max: usize,
    },
}

impl std::fmt::Display for EndedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EndedBy::Expired { open_s_max } => {
                write!(f, "it was open longer than {open_s_max} s (open_s_max)")
            }
            EndedBy::Overflowed { entries_max } => write!(
                f,
                "it recorded more than {entries_max} changed keys (entries_max)"
            ),
        }
    }
}

/// A block a record keeps from reuse: its holder and its reclaim-ring entry
/// (a local address word: size and offset in the holder's value region).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinnedBlock {
    /// The machine whose value region holds it.
    pub holder: MachineId,
    /// `Addr::local(size, offset)` encoded.
    pub entry: u64,
}

/// What [`SnapshotRecord::keeps`] decided about a replaced block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// Not kept: retire it as usual.
    No,
    /// Kept: its word was recorded before (by the write's S2 record; for a
    /// MIGRATE, a write in flight recorded it and then lost its CAS).
    Recorded,
    /// Kept, and its word recorded just now (a MIGRATE of a key no write
    /// had recorded yet).
    RecordedNow,
}

impl Kept {
    /// Whether the record keeps the block (the caller must not retire it).
    pub fn kept(self) -> bool {
        self != Kept::No
    }
}

/// One recorded pre-image: `key`'s address word at the cut, as its home's
/// table held it (0: the key had no value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreImage {
    /// The key.
    pub key: Key,
    /// Its home (a local word names a block in the home's region).
    pub home: MachineId,
    /// The word.
    pub word: u64,
}

#[derive(Debug)]
struct Open {
    id: u64,
    began_ns: u64,
    config: SnapshotConfig,
    /// Key -> its word at the cut.
    words: HashMap<Key, u64>,
    pinned: Vec<PinnedBlock>,
}

/// One home's snapshot state: at most one snapshot open; the last one the
/// home ended on its own is remembered so its later calls can say why.
#[derive(Debug)]
pub struct SnapshotRecord {
    home: MachineId,
    open: Option<Open>,
    ended: Option<(u64, EndedBy)>,
}

impl SnapshotRecord {
    /// A home's record, with no snapshot open.
    pub fn new(home: MachineId) -> SnapshotRecord {
        SnapshotRecord {
            home,
            open: None,
            ended: None,
        }
    }

    /// Whether a snapshot is open.
    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// The open snapshot's id.
    pub fn open_id(&self) -> Option<u64> {
        self.open.as_ref().map(|o| o.id)
    }

    /// Starts recording snapshot `id` at `now_ns`. BEGIN again of the open
    /// id is a no-op (a retried message); another id while one is open is refused.
    pub fn begin(&mut self, id: u64, config: SnapshotConfig, now_ns: u64) -> Result<()> {
        config.validate()?;
        match &self.open {
            Some(o) if o.id == id => return Ok(()),
            Some(o) => {
                return Err(StoreError::SnapshotBusy {
                    id,
                    open: o.id,
                    machine: self.home,
                })
            }
            None => {}
        }
        self.open = Some(Open {
            id,
            began_ns: now_ns,
            config,
            words: HashMap::new(),
            pinned: Vec::new(),
        });
        Ok(())
    }

    /// Ends the open snapshot if it outlived its `open_s_max` at `now_ns`;
    /// returns the blocks it pinned, for the caller to retire.
    pub fn expire(&mut self, now_ns: u64) -> Vec<PinnedBlock> {
        let Some(o) = &self.open else {
            return Vec::new();
        };
        let open_ns = o.config.open_s_max.saturating_mul(1_000_000_000);
        if now_ns.saturating_sub(o.began_ns) <= open_ns {
            return Vec::new();
        }
        let open_s_max = o.config.open_s_max;
        self.close(EndedBy::Expired { open_s_max })
    }

    fn close(&mut self, why: EndedBy) -> Vec<PinnedBlock> {
        let o = self.open.take().expect("closing an open snapshot");
        self.ended = Some((o.id, why));
        o.pinned
    }

    /// The open snapshot, if it is `id`; else the error saying why not.
    fn open_as(&mut self, id: u64) -> Result<&mut Open> {
        let home = self.home;
        match (&mut self.open, self.ended) {
            (Some(o), _) if o.id == id => Ok(o),
            (_, Some((ended, why))) if ended == id => Err(StoreError::SnapshotEnded {
                id,
                machine: home,
                why: why.to_string(),
            }),
            _ => Err(StoreError::SnapshotNotOpen { id, machine: home }),
        }
    }

    /// S2: a write of `key` is about to replace `word` (its home's word as
    /// the writer read it; 0 for a key with no value): the first such write
    /// since the cut records it. Call before the old header is zeroed and
    /// before the CAS. Returns blocks to retire if this ended the snapshot
    /// (too many records).
    pub fn note_write(&mut self, key: Key, word: u64) -> Vec<PinnedBlock> {
        let Some(o) = &mut self.open else {
            return Vec::new();
        };
        if o.words.contains_key(&key) {
            return Vec::new();
        }
        if o.words.len() >= o.config.entries_max {
            let entries_max = o.config.entries_max;
            return self.close(EndedBy::Overflowed { entries_max });
        }
        o.words.insert(key, word);
        Vec::new()
    }

    /// S3: a CAS (an update's or a MIGRATE's) replaced `key`'s word `old`,
    /// whose block `block` would now be retired. The record keeps the block
    /// instead (pinned until END) if `old` is the key's recorded word. A key
    /// with no record yet records `old` first (a MIGRATE's CAS: the value
    /// was the cut's; see the module doc).
    pub fn keeps(&mut self, key: Key, old: u64, block: PinnedBlock) -> Kept {
        let Some(o) = &mut self.open else {
            return Kept::No;
        };
        let (recorded, now) = match o.words.get(&key) {
            Some(w) => (*w, false),
            None if o.words.len() < o.config.entries_max => {
                o.words.insert(key, old);
                (old, true)
            }
            None => return Kept::No, // the next note_write ends the snapshot
        };
        if recorded != old || Addr::decode(old).is_none() {
            return Kept::No;
        }
        debug_assert!(
            !o.pinned.contains(&block),
            "block {block:?} of key {key:?} pinned twice"
        );
        o.pinned.push(block);
        if now {
            Kept::RecordedNow
        } else {
            Kept::Recorded
        }
    }

    /// Whether the open snapshot keeps `block` (the value-region scan must
    /// not free it).
    pub fn pins(&self, holder: MachineId, offset_units: u64) -> bool {
        self.open.as_ref().is_some_and(|o| {
            o.pinned.iter().any(|b| {
                b.holder == holder
                    && Addr::decode(b.entry).map(|a| a.offset_units()) == Some(offset_units)
            })
        })
    }

    /// The blocks the open snapshot pins.
    pub fn pinned(&self) -> &[PinnedBlock] {
        self.open.as_ref().map_or(&[], |o| &o.pinned)
    }

    /// Every key recorded for snapshot `id` so far, with its word at the cut.
    pub fn pre_images(&mut self, id: u64) -> Result<Vec<PreImage>> {
        let home = self.home;
        let o = self.open_as(id)?;
        Ok(o.words
            .iter()
            .map(|(&key, &word)| PreImage { key, home, word })
            .collect())
    }

    /// Ends snapshot `id`: drops its record and returns its pinned blocks
    /// for the caller to retire.
    pub fn end(&mut self, id: u64) -> Result<Vec<PinnedBlock>> {
        self.open_as(id)?;
        Ok(self.open.take().expect("checked open").pinned)
    }
}

/// A home's record as its workers share it: a flag every write reads (no
/// lock while no snapshot is open) and the record behind a lock that is
/// never held across a fabric operation.
pub(crate) struct HomeSnapshot {
    open: AtomicBool,
    record: Mutex<SnapshotRecord>,
}

impl HomeSnapshot {
    pub(crate) fn new(home: MachineId) -> HomeSnapshot {
        HomeSnapshot {
            open: AtomicBool::new(false),
            record: Mutex::new(SnapshotRecord::new(home)),
        }
    }

    /// Whether a snapshot is open. A write that reads false was invoked
    /// before BEGIN or after END (the caller's gate, S1); a MIGRATE that
    /// reads false after its CAS replaced a word before BEGIN.
    #[inline]
    pub(crate) fn is_open(&self) -> bool {
        self.open.load(Ordering::SeqCst)
    }

    /// Runs `f` on the record under its lock.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut SnapshotRecord) -> R) -> R {
        let mut g = self.record.lock().unwrap_or_else(|e| e.into_inner());
        let r = f(&mut g);
        self.open.store(g.is_open(), Ordering::SeqCst);
        r
    }

    /// Offsets of the blocks of `holder` the open snapshot pins.
    pub(crate) fn pinned_offsets(&self, holder: MachineId) -> Vec<u64> {
        if !self.is_open() {
            return Vec::new();
        }
        self.with(|r| {
            r.pinned()
                .iter()
                .filter(|b| b.holder == holder)
                .filter_map(|b| Addr::decode(b.entry).map(|a| a.offset_units()))
                .collect()
        })
    }
}

/// One part of an adjacency list, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartValue {
    /// Its neighbours.
    pub ids: Vec<VertexId>,
    /// Whether part i+1 follows (`adjacency::MORE`).
    pub more: bool,
}

/// What a [`CutAssembler`] needs next.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Needs {
    /// Keys to read live (one-sided, the ordinary read path), after which
    /// the pre-images must be fetched again before the reads count.
    pub live: Vec<Key>,
    /// Pre-images to read: their blocks are pinned, so any time will do.
    pub pinned: Vec<PreImage>,
}

impl Needs {
    /// Whether nothing is needed: the cut is assembled.
    pub fn is_empty(&self) -> bool {
        self.live.is_empty() && self.pinned.is_empty()
    }
}

/// Assembles the cut of some vertices' adjacency lists, without I/O (S2):
/// a key's value at the cut is its pre-image's block if the record has one
/// (absent if the word is 0), else the value read live, provided that read
/// came before the pre-images were fetched. A vertex's list at the cut is
/// its parts at the cut, followed by their MORE flags from part 0.
///
/// The driver loop ([`crate::Worker::read_cut`]): read [`Needs::pinned`]
/// and [`Needs::live`], then fetch the pre-images, until
/// [`CutAssembler::needs`] is empty. A vertex whose pre-image ends its chain
/// sooner or later than the live one needs another round.
#[derive(Debug, Default)]
pub struct CutAssembler {
    vertices: Vec<VertexId>,
    /// Live reads not yet confirmed by a fetch after them.
    unconfirmed: HashMap<Key, Option<PartValue>>,
    /// Live reads made before the latest fetch.
    live: HashMap<Key, Option<PartValue>>,
    /// The latest fetch.
    pre: HashMap<Key, PreImage>,
    /// Pre-images read, by key (with the word read, in case a later fetch
    /// named another one: it cannot while the snapshot is open).
    pinned: HashMap<Key, (u64, Option<PartValue>)>,
    /// Fetches made.
    fetches: u32,
}

impl CutAssembler {
    /// The cut of `vertices` is to be assembled.
    pub fn new(vertices: &[VertexId]) -> CutAssembler {
        CutAssembler {
            vertices: vertices.to_vec(),
            ..CutAssembler::default()
        }
    }

    /// A live read of `key` (`None`: no value).
    pub fn on_live(&mut self, key: Key, value: Option<PartValue>) {
        self.unconfirmed.insert(key, value);
    }

    /// A read of a pinned pre-image's block (`None`: the word was 0).
    pub fn on_pinned(&mut self, pre: PreImage, value: Option<PartValue>) {
        self.pinned.insert(pre.key, (pre.word, value));
    }

    /// The pre-images fetched (from every home), after the live reads so
    /// far: those reads now count.
    pub fn on_pre_images(&mut self, pre: impl IntoIterator<Item = PreImage>) {
        self.pre = pre.into_iter().map(|p| (p.key, p)).collect();
        self.live.extend(self.unconfirmed.drain());
        self.fetches += 1;
    }

    /// Fetches of pre-images so far.
    pub fn fetches(&self) -> u32 {
        self.fetches
    }

    /// Pre-images read from pinned blocks so far (keys changed since the
    /// cut; those absent at the cut need no read).
    pub fn pre_images_used(&self) -> usize {
        self.pinned.len()
    }

    /// The value of `key` at the cut if known: `Some(None)` absent,
    /// `None` unknown yet (with what to read added to `needs`).
    fn part_at_cut(&self, key: Key, needs: &mut Needs) -> Option<Option<&PartValue>> {
        if let Some(p) = self.pre.get(&key) {
            if p.word == 0 {
                return Some(None); // absent at the cut
            }
            return match self.pinned.get(&key) {
                Some((w, v)) if *w == p.word => Some(v.as_ref()),
                _ => {
                    needs.pinned.push(*p);
                    None
                }
            };
        }
        if let Some(v) = self.live.get(&key) {
            return Some(v.as_ref());
        }
        // Read but not confirmed yet: the next fetch settles it.
        if !self.unconfirmed.contains_key(&key) {
            needs.live.push(key);
        }
        None
    }

    /// What to read next. Empty with no fetch due ([`CutAssembler::fetch_due`]):
    /// [`CutAssembler::finish`] may be called.
    pub fn needs(&self) -> Needs {
        let mut needs = Needs::default();
        for &v in &self.vertices {
            let mut part = 0u32;
            loop {
                match self.part_at_cut(Key::part(v, part), &mut needs) {
                    Some(Some(p)) if p.more => part += 1,
                    _ => break,
                }
            }
        }
        needs
    }

    /// Whether live reads wait for a fetch before they count.
    pub fn fetch_due(&self) -> bool {
        !self.unconfirmed.is_empty()
    }

    /// Each vertex's list at the cut (`None`: it did not exist), in the
    /// order given. Panics if [`CutAssembler::needs`] is not empty (a driver bug).
    pub fn finish(self) -> Vec<(VertexId, Option<Vec<VertexId>>)> {
        assert!(
            self.needs().is_empty() && !self.fetch_due(),
            "a cut finished with reads outstanding"
        );
        let mut out = Vec::with_capacity(self.vertices.len());
        let mut none = Needs::default();
        for &v in &self.vertices {
            let mut list = Vec::new();
            let mut part = 0u32;
            let exists = loop {
                match self.part_at_cut(Key::part(v, part), &mut none) {
                    Some(Some(p)) => {
                        list.extend_from_slice(&p.ids);
                        if !p.more {
                            break true;
                        }
                        part += 1;
                    }
                    // A part after one with MORE has a value at the cut
                    // (part i+1 is published before part i's flag).
                    Some(None) => break part > 0,
                    None => unreachable!("needs() was empty"),
                }
            };
            out.push((v, exists.then_some(list)));
        }
        out
    }
}

#[cfg(test)]
mod tests;
