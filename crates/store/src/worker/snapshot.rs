//! A worker's side of snapshots (issue 63, requirement 4; protocol and rules
//! S2/S3 in [`crate::snapshot`]): BEGIN, PRE-IMAGES and END at this machine
//! as a home, the hooks the write paths call (record before the CAS, keep a
//! recorded block instead of retiring it), and the reader that assembles a
//! cut from one-sided reads and pre-images.
//!
//! The record of a key lives at its home; the write paths reach it through
//! this process's shared state, so a key's home and the machine holding its
//! value must be hosted by one process (every in-process store). Across
//! processes the home would record before forwarding a part op and the holder
//! would hand it the replaced block: not built (`docs/design.md`), so BEGIN
//! is refused unless this process's store hosts every machine.

use locus_fabric::{Fabric, MachineId, Port};

use super::Worker;
use crate::addr::Addr;
use crate::adjacency::PartView;
use crate::snapshot::{CutAssembler, Kept, PartValue, PinnedBlock, PreImage, SnapshotConfig};
use crate::table::Key;
use crate::{Result, StoreError, VertexId};

/// Rounds of reads and fetches a cut takes at most (each round settles at
/// least one more part of some vertex; chains are a few parts long).
pub const CUT_ROUNDS_MAX: u32 = 1024;

/// A cut as [`Worker::read_cut`] assembled it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// Each vertex asked for and its list at the cut (`None`: no vertex).
    pub lists: Vec<(VertexId, Option<Vec<VertexId>>)>,
    /// Pre-images used (keys changed since the cut and read from pinned blocks).
    pub pre_images_used: usize,
    /// Parts read live.
    pub live_reads: usize,
    /// Times the pre-images were fetched.
    pub fetches: u32,
}

impl<F: Fabric> Worker<F> {
    /// BEGIN of snapshot `id` at this machine as a home: from now on the
    /// first write of each key homed here records the key's word (S2). The
    /// caller makes this the cut: no vertex op may be in flight anywhere
    /// (S1, the node's gate). A snapshot open longer than
    /// `config.open_s_max` is ended by the home.
    ///
    /// Refused unless this process hosts every machine: the write paths
    /// reach a key's record through the process's shared state, and a
    /// write or MIGRATE in another process would neither record nor keep
    /// (see the module doc); a wrong cut must not pass for a right one.
    pub fn snapshot_begin(&mut self, id: u64, config: SnapshotConfig) -> Result<()> {
        let machines = self.shared.machines as MachineId;
        if (0..machines).any(|m| !self.shared.fabric.hosts(m)) {
            return Err(StoreError::FeatureOff {
                operation: "a snapshot's BEGIN",
                setting: "every machine of the cluster hosted by this process's store \
                          (pre-images across processes are not built)",
            });
        }
        self.snapshot_expire()?;
        let now = self.port.now_ns();
        self.home_snapshot(self.machine)?
            .with(|r| r.begin(id, config, now))
    }

    /// PRE-IMAGES of snapshot `id` at this home: every key first written
    /// since BEGIN, with its word at the cut (0: absent then).
    pub fn snapshot_pre_images(&mut self, id: u64) -> Result<Vec<PreImage>> {
        self.snapshot_expire()?;
        self.home_snapshot(self.machine)?.with(|r| r.pre_images(id))
    }

    /// END of snapshot `id` at this home: drops the record and retires the
    /// blocks it kept (S3). Returns how many.
    pub fn snapshot_end(&mut self, id: u64) -> Result<usize> {
        self.snapshot_expire()?;
        let pinned = self.home_snapshot(self.machine)?.with(|r| r.end(id))?;
        let n = pinned.len();
        self.retire_pinned(pinned)?;
        Ok(n)
    }

    /// Ends this home's snapshot if it outlived its bound, retiring what it
    /// kept (called by every snapshot call and by garbage collection).
    pub(super) fn snapshot_expire(&mut self) -> Result<()> {
        let Some(snap) = self.shared.snapshots[self.machine as usize].as_ref() else {
            return Ok(());
        };
        if !snap.is_open() {
            return Ok(());
        }
        let now = self.port.now_ns();
        let pinned = snap.with(|r| r.expire(now));
        self.retire_pinned(pinned)
    }

    fn home_snapshot(&self, home: MachineId) -> Result<&crate::snapshot::HomeSnapshot> {
        self.shared.snapshots[home as usize]
            .as_ref()
            .ok_or(StoreError::NotHosted { machine: home })
    }

    /// S2's hook: a write of `key` (homed at `home`) is about to replace
    /// `word`. Called before the old header is zeroed and before the CAS.
    #[inline]
    pub(super) fn snapshot_note(&mut self, key: Key, home: MachineId, word: u64) -> Result<()> {
        let Some(snap) = self.shared.snapshots[home as usize].as_ref() else {
            return Ok(());
        };
        if !snap.is_open() {
            return Ok(());
        }
        let ended = snap.with(|r| r.note_write(key, word));
        self.retire_pinned(ended)
    }

    /// S3's hook: a CAS replaced `key`'s word `old` (homed at `home`), whose
    /// block is `entry` at `holder`. If the home's open snapshot keeps the
    /// block (`kept()`), the caller must not retire it.
    #[inline]
    pub(super) fn snapshot_keeps(
        &mut self,
        key: Key,
        home: MachineId,
        old: u64,
        holder: MachineId,
        entry: u64,
    ) -> Kept {
        let Some(snap) = self.shared.snapshots[home as usize].as_ref() else {
            return Kept::No;
        };
        if !snap.is_open() {
            return Kept::No;
        }
        let kept = snap.with(|r| r.keeps(key, old, PinnedBlock { holder, entry }));
        self.stats.snapshot_blocks_kept += kept.kept() as u64;
        kept
    }

    /// Retires blocks a snapshot kept: a hosted holder's at once (its lease
    /// starts now), another's through its reclaim ring.
    fn retire_pinned(&mut self, pinned: Vec<PinnedBlock>) -> Result<()> {
        if pinned.is_empty() {
            return Ok(());
        }
        let now = self.port.now_ns();
        for b in pinned {
            let a = Addr::decode(b.entry).expect("a pinned block has a local word");
            match self.shared.allocs[b.holder as usize].as_ref() {
                Some(alloc) => alloc.retire(a.offset_units(), a.size_units(), now),
                None => self.reclaim_queue.push((b.holder, b.entry)),
            }
        }
        self.flush_reclaims()
    }

    /// Reads the cut of `vertices` for an open snapshot (S2): every part
    /// one-sided through the ordinary read path, then the pre-images from
    /// `fetch` (every home's, after the reads), then the pinned blocks the
    /// pre-images name; again while a vertex's chain at the cut needs parts
    /// not read yet. A part's value at the cut is its pre-image if it has
    /// one, else what was read. `fetch` gets this worker to post with.
    pub fn read_cut(
        &mut self,
        vertices: &[VertexId],
        mut fetch: impl FnMut(&mut Self) -> Result<Vec<PreImage>>,
    ) -> Result<Cut> {
        let mut a = CutAssembler::new(vertices);
        let mut live_reads = 0;
        for _ in 0..CUT_ROUNDS_MAX {
            let needs = a.needs();
            if needs.is_empty() && !a.fetch_due() {
                return Ok(Cut {
                    pre_images_used: a.pre_images_used(),
                    fetches: a.fetches(),
                    live_reads,
                    lists: a.finish(),
                });
            }
            for pre in needs.pinned {
                let v = self.read_pre_image(pre)?;
                a.on_pinned(pre, v);
            }
            for key in needs.live {
                // Along the live chain at once: most chains are unchanged.
                let mut key = key;
                loop {
                    let v = self.read_live_part(key)?;
                    live_reads += 1;
                    let more = v.as_ref().is_some_and(|p| p.more);
                    a.on_live(key, v);
                    if !more {
                        break;
                    }
                    key = Key::part(key.vertex(), key.part_index() + 1);
                }
            }
            if a.fetch_due() {
                let pre = fetch(self)?;
                a.on_pre_images(pre);
            }
        }
        Err(StoreError::Contention {
            key: vertices.first().map_or(0, |&v| Key::part(v, 0).0),
            retries: CUT_ROUNDS_MAX,
        })
    }

    /// One part read live, as GET reads it.
    fn read_live_part(&mut self, key: Key) -> Result<Option<PartValue>> {
        if self.read_value(key)?.is_none() {
            return Ok(None);
        }
        let view = self.current_part();
        Ok(Some(PartValue {
            ids: view.iter().collect(),
            more: view.more(),
        }))
    }

    /// A pre-image's value: its pinned block, read one-sidedly by the
    /// recorded word. Not by its header, which the write that replaced the
    /// word zeroed (P2): the payload's own count bounds it.
    fn read_pre_image(&mut self, pre: PreImage) -> Result<Option<PartValue>> {
        let Some(addr) = Addr::decode(pre.word) else {
            super::read::lost(pre.key, pre.word)?;
            return Ok(None);
        };
        let holder = addr.holder(pre.home);
        let mut bytes = vec![0u8; (addr.size_units() * 8) as usize];
        let vr = self.values_region(holder);
        self.port
            .read(holder, vr, addr.offset_units() * 8, &mut bytes)?;
        self.stats.values_read += 1;
        let view = PartView::parse(&bytes[8..]).ok_or_else(|| StoreError::Malformed {
            machine: holder,
            reason: format!(
                "the pre-image of key {:#x} at offset {} (units) is no adjacency list: was its block reused?",
                pre.key.0,
                addr.offset_units()
            ),
        })?;
        Ok(Some(PartValue {
            ids: view.iter().collect(),
            more: view.more(),
        }))
    }
}
