//! MIGRATE as a step machine that does no I/O (Pragh 4.1, Fig. 6; pipelined as in Pragh 5).
//!
//! A [`MigrateJob`] moves one key's value into the value region of the
//! machine running it (the target), with one-sided operations only: the
//! holder's and the home's threads take no part. The job never touches a port,
//! an allocator or a cache. It is given inputs (the cached address, a
//! completion, an allocated offset, the clock) and answers with a [`Step`]:
//! an operation to post, a block to allocate, a restart, or the outcome. A
//! driver ([`crate::Worker::migrate_batch`]) carries the steps out, for one key
//! or for a window of keys whose operations overlap; `migrate(k)` is a batch
//! of one. At most one operation of a job is in flight at a time.
//!
//! ```text
//!  start(cached) ──no cached address──▶ Bucket ──key found, held elsewhere──▶ Alloc
//!     │                                  │ ├─ key absent / null word ──▶ Done(Absent)
//!     │                                  │ ├─ held here ──────────────▶ Done(AlreadyHere)
//!     │                                  │ └─ chain goes on ──▶ Bucket (overflow bucket)
//!     ├──cached, held elsewhere──────────────────────────────────────▶ Alloc
//!     └──cached, held here──▶ OwnHeader ──header valid──▶ Done(AlreadyHere)
//!                                 └─ stale ──▶ Restart(StaleCache)
//!  Alloc ──offset──▶ Value ──landed──▶ Check ──header matches, lease ok──▶ Invalidate ──written──▶ Publish
//!                   (READ into     (the copy's    ├─ header zero/other ──▶ Restart(Invalidated)
//!                    the block)     own header)   └─ half a lease since the word was read ──▶ Restart(Expired)
//!  Publish ──CAS returned the word read──▶ Done(Moved)   ──another word──▶ Restart(Conflict)
//! ```
//!
//! As in Pragh Fig. 6 (lines 4-6), the block is allocated from the size in
//! the address word and the value is READ straight into it (a READ whose
//! local buffer is the block, [`locus_fabric::Verb::ReadTo`]); the copy's
//! header, read from this machine's own memory, tells whether the value was
//! still live when it was read.
//!
//! Invariants (ARCHITECTURE.md, P1 and P2), each enforced by the order of the states:
//! - **P1** the publishing CAS is asked for only after the READ that lands
//!   the copy (header included) has completed and the landed header matched;
//! - **P2** the WRITE of zero over the old header completes before that CAS is
//!   asked for, so no reader can use the old copy once the new one is published;
//! - **P3** the old block is zeroed only while it cannot have been reused: the
//!   address was read (or cached, stamped before its READ) less than half a
//!   reclaim lease before the invalidating WRITE is asked for. A block is
//!   reused no sooner than a lease after it was retired, and it was retired
//!   no sooner than the address was read; a job that took longer (a thread
//!   descheduled mid-migration) starts over instead of zeroing what may now
//!   be another key's live value. The other half of the lease covers the
//!   WRITE's flight and the CAS that follows;
//! - a restart leaves nothing behind but the allocated copy, which the driver
//!   frees (never published: the CAS lost, or it was not tried).

use locus_fabric::{MachineId, Output};

use crate::addr::{Addr, Header};
use crate::table::{addr_word_offset, BucketView, InChain, Key, TableLayout};
use crate::Result;

/// What a migration did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Migration {
    /// The value moved here from `from`.
    Moved {
        /// The previous holder.
        from: MachineId,
        /// Bytes copied (header included).
        bytes: u64,
    },
    /// The value was here already.
    AlreadyHere,
    /// The key has no value.
    Absent,
}

/// A one-sided operation a job asks its driver to post.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// READ the bucket at byte `offset` of `home`'s key region.
    ReadBucket {
        /// The key's home.
        home: MachineId,
        /// Byte offset of the bucket.
        offset: u64,
    },
    /// READ the header word of the block at `offset_units` of the target's own value region.
    ReadOwnHeader {
        /// Offset in 8-byte units.
        offset_units: u64,
    },
    /// READ a whole value, header included, from `holder`'s value region
    /// into the block allocated for it in the target's own value region.
    ReadValue {
        /// The machine holding the value.
        holder: MachineId,
        /// Offset in 8-byte units.
        offset_units: u64,
        /// Size in 8-byte units.
        size_units: u64,
        /// Offset of the allocated block in 8-byte units.
        into_units: u64,
    },
    /// WRITE zero over the old value's header word (invalidation, Fig. 6 l.9-10).
    Invalidate {
        /// The old holder.
        holder: MachineId,
        /// Offset of the old block in 8-byte units.
        offset_units: u64,
    },
    /// CAS the key's address word at byte `offset` of `home`'s key region (Fig. 6 l.7-8).
    Publish {
        /// The key's home.
        home: MachineId,
        /// Byte offset of the address word.
        offset: u64,
        /// The word as read.
        expected: u64,
        /// The new copy's address word.
        new: u64,
    },
}

/// What the driver does next for a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Post this operation and feed its completion to [`MigrateJob::on_completion`].
    Post(Access),
    /// Allocate a block of `size_units` in the target's value region and feed
    /// its offset to [`MigrateJob::on_allocated`].
    Alloc {
        /// Size in 8-byte units.
        size_units: u64,
    },
    /// Start over with [`MigrateJob::start`]: free the copy if one was
    /// allocated, and drop the address word read from the location cache.
    Restart(Restart),
    /// Finished.
    Done(Outcome),
}

/// Why a job starts over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    /// A cached address named a copy here whose header is no longer valid.
    StaleCache,
    /// The value's header did not match its address: updated or migrated
    /// since the address was read (Pragh Fig. 8 l.15-18's check).
    Invalidated,
    /// The publishing CAS lost to an update or another migration.
    Conflict,
    /// Half a reclaim lease passed between reading the address and the
    /// invalidation: the old block might be reused by now (invariant P3).
    Expired,
}

/// A location-cache entry for the key being migrated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cached {
    /// The cached address word.
    pub word: u64,
    /// Byte offset of the key's address word at its home.
    pub position: u64,
    /// When the entry was stamped (before the READ or CAS that made it current).
    pub stamped_ns: u64,
}

/// How a job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The copy is published; the driver keeps it, caches its address and
    /// queues the old block for its holder's reclaim ring (Fig. 6 l.11).
    Moved(Published),
    /// The value was here already.
    AlreadyHere,
    /// The key has no value.
    Absent,
}

/// What a successful migration leaves for its driver to record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Published {
    /// The previous holder.
    pub from: MachineId,
    /// Bytes copied (header included).
    pub bytes: u64,
    /// The new address word.
    pub new_word: u64,
    /// Byte offset of the key's address word at its home.
    pub addr_offset: u64,
    /// The clock when the CAS was asked for: a cache entry for the new address
    /// is stamped with it (its lease counts from before the CAS, invariant P3).
    pub cas_ns: u64,
    /// The old block as a reclaim-ring entry (a local address word: its size
    /// and offset in the old holder's value region).
    pub old_entry: u64,
}

impl Outcome {
    /// The caller-facing summary.
    pub fn migration(&self) -> Migration {
        match self {
            Outcome::Moved(p) => Migration::Moved {
                from: p.from,
                bytes: p.bytes,
            },
            Outcome::AlreadyHere => Migration::AlreadyHere,
            Outcome::Absent => Migration::Absent,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Waiting for `start` (new, or restarted).
    Idle,
    /// The READ of the bucket at this byte offset is in flight.
    Bucket(u64),
    /// The READ of the own copy's header is in flight.
    OwnHeader,
    /// Waiting for the driver's allocation of the copy's block.
    Alloc,
    /// The READ of the value into the block is in flight.
    Value,
    /// The READ of the landed copy's header is in flight.
    Check,
    /// The invalidating WRITE is in flight.
    Invalidate,
    /// The publishing CAS is in flight.
    Publish,
    /// Finished.
    Done,
}

/// One key's migration to the machine `me`.
#[derive(Debug)]
pub struct MigrateJob {
    key: Key,
    me: MachineId,
    home: MachineId,
    layout: TableLayout,
    /// The reclaim lease, in ns.
    lease_ns: u64,
    state: State,
    /// A time no later than the READ that found the address word `seen`.
    seen_at_ns: u64,
    /// Byte offset of the key's address word at its home.
    addr_offset: u64,
    /// The address word as read (from the bucket or the cache).
    seen: u64,
    old: Option<Addr>,
    new: Option<Addr>,
    cas_ns: u64,
    restarts: u32,
    /// A buffer the job is done with, for the driver to reuse.
    spare: Option<Vec<u8>>,
}

impl MigrateJob {
    /// A migration of `key` (homed at `home`, in a table of `layout`) to
    /// `me`, in a store whose reclaim lease is `lease_ns`.
    pub fn new(
        key: Key,
        me: MachineId,
        home: MachineId,
        layout: TableLayout,
        lease_ns: u64,
    ) -> MigrateJob {
        MigrateJob {
            key,
            me,
            home,
            layout,
            lease_ns,
            state: State::Idle,
            seen_at_ns: 0,
            addr_offset: 0,
            seen: 0,
            old: None,
            new: None,
            cas_ns: 0,
            restarts: 0,
            spare: None,
        }
    }

    /// The key.
    pub fn key(&self) -> Key {
        self.key
    }

    /// The address word the job last read (0 before the first read).
    pub fn seen_word(&self) -> u64 {
        self.seen
    }

    /// Times the job has started over.
    pub fn restarts(&self) -> u32 {
        self.restarts
    }

    /// Whether the next completion needs the clock: only the copy's check
    /// (the lease check before invalidating) and the invalidation's (the
    /// CAS is stamped). Other completions may be given 0, sparing a clock read.
    #[inline]
    pub fn wants_clock(&self) -> bool {
        matches!(self.state, State::Check | State::Invalidate)
    }

    /// A buffer the job no longer needs (a bucket or header read).
    #[inline]
    pub fn take_spare(&mut self) -> Option<Vec<u8>> {
        self.spare.take()
    }

    /// Starts, or starts over after a [`Step::Restart`], at `now_ns`.
    /// `cached` is the location cache's entry for the key, if it has one
    /// with the position of the address word: the lookup READ is skipped (Pragh 5).
    #[inline]
    pub fn start(&mut self, cached: Option<Cached>, now_ns: u64) -> Result<Step> {
        assert_eq!(self.state, State::Idle, "start of a job that is running");
        self.old = None;
        self.new = None;
        // The bucket READs come after this instant.
        self.seen_at_ns = now_ns;
        if let Some(c) = cached {
            if let Some(addr) = Addr::decode(c.word) {
                self.seen = c.word;
                self.addr_offset = c.position;
                self.seen_at_ns = c.stamped_ns.min(now_ns);
                if addr.holder(self.home) == self.me {
                    // Only if our copy is still live: a stale entry may name a
                    // copy that has moved on (its header is zero then).
                    self.state = State::OwnHeader;
                    return Ok(Step::Post(Access::ReadOwnHeader {
                        offset_units: addr.offset_units(),
                    }));
                }
                return self.read_value(addr);
            }
        }
        let offset = self.layout.bucket_offset(self.layout.bucket_of(self.key));
        self.state = State::Bucket(offset);
        Ok(Step::Post(Access::ReadBucket {
            home: self.home,
            offset,
        }))
    }

    /// Feeds the completion of the job's operation in flight; `now_ns` is the
    /// clock before the next operation is posted (read only where
    /// [`MigrateJob::wants_clock`] says so; any value elsewhere).
    ///
    /// # Panics
    /// If the output is not the one the posted operation gives (a driver bug).
    #[inline]
    pub fn on_completion(&mut self, output: Output, now_ns: u64) -> Result<Step> {
        match self.state {
            State::Bucket(offset) => {
                let bytes = data(output);
                let view = BucketView::parse(&bytes);
                self.spare = Some(bytes);
                match view.search(self.key) {
                    InChain::Found { slot, word: aw } => {
                        self.addr_offset = addr_word_offset(offset, slot);
                        self.seen = aw;
                        match Addr::decode(aw) {
                            None => Ok(self.finish(Outcome::Absent)),
                            Some(a) if a.holder(self.home) == self.me => {
                                Ok(self.finish(Outcome::AlreadyHere))
                            }
                            Some(a) => self.read_value(a),
                        }
                    }
                    InChain::Absent => Ok(self.finish(Outcome::Absent)),
                    InChain::Next(n) => {
                        let next = self.layout.overflow_offset(n);
                        self.state = State::Bucket(next);
                        Ok(Step::Post(Access::ReadBucket {
                            home: self.home,
                            offset: next,
                        }))
                    }
                }
            }
            State::OwnHeader | State::Check => {
                let bytes = data(output);
                let word = header_word(&bytes);
                self.spare = Some(bytes);
                self.on_own_header(word, now_ns)
            }
            State::Value => {
                assert_eq!(
                    output,
                    Output::Placed,
                    "a READ into the copy's block completed with another output"
                );
                let new = self.new.expect("allocated before the value READ");
                self.state = State::Check;
                Ok(Step::Post(Access::ReadOwnHeader {
                    offset_units: new.offset_units(),
                }))
            }
            State::Invalidate => {
                let Output::Written(buf) = output else {
                    panic!("a WRITE completed with {output:?}")
                };
                self.spare = Some(buf);
                let new = self.new.expect("allocated before the value READ");
                self.cas_ns = now_ns;
                self.state = State::Publish;
                Ok(Step::Post(Access::Publish {
                    home: self.home,
                    offset: self.addr_offset,
                    expected: self.seen,
                    new: new.encode(),
                }))
            }
            State::Publish => {
                let Output::Word(prev) = output else {
                    panic!("a CAS completed with {output:?}")
                };
                if prev != self.seen {
                    return Ok(self.restart(Restart::Conflict));
                }
                let old = self.old.expect("set before the value READ");
                let new = self.new.expect("allocated before the value READ");
                let published = Published {
                    from: old.holder(self.home),
                    bytes: old.size_units() * 8,
                    new_word: new.encode(),
                    addr_offset: self.addr_offset,
                    cas_ns: self.cas_ns,
                    old_entry: Addr::local(old.size_units(), old.offset_units())?.encode(),
                };
                Ok(self.finish(Outcome::Moved(published)))
            }
            s @ (State::Idle | State::Alloc | State::Done) => {
                panic!("a completion for a job in state {s:?}")
            }
        }
    }

    /// Feeds the header word a [`Access::ReadOwnHeader`] read (the same as
    /// its completion through [`MigrateJob::on_completion`], for a driver
    /// that reads its own memory with a plain load).
    ///
    /// # Panics
    /// If the job did not ask for its own header.
    #[inline]
    pub fn on_own_header(&mut self, header_word: u64, now_ns: u64) -> Result<Step> {
        let header = Header::decode(header_word);
        match self.state {
            State::OwnHeader => {
                let addr = Addr::decode(self.seen).expect("decoded in start");
                if header.matches(addr) {
                    Ok(self.finish(Outcome::AlreadyHere))
                } else {
                    Ok(self.restart(Restart::StaleCache))
                }
            }
            State::Check => {
                let old = self.old.expect("set before the value READ");
                // The value was updated or migrated before it was read
                // (Pragh Fig. 8 l.15-18's check, on the copy).
                if !header.matches(old) {
                    return Ok(self.restart(Restart::Invalidated));
                }
                if now_ns.saturating_sub(self.seen_at_ns) >= self.lease_ns / 2 {
                    return Ok(self.restart(Restart::Expired));
                }
                self.state = State::Invalidate;
                Ok(Step::Post(Access::Invalidate {
                    holder: old.holder(self.home),
                    offset_units: old.offset_units(),
                }))
            }
            s => panic!("an own header fed to a job in state {s:?}"),
        }
    }

    /// Feeds the offset of the block the driver allocated for the copy; the
    /// value is READ into it next.
    #[inline]
    pub fn on_allocated(&mut self, offset_units: u64) -> Result<Step> {
        assert_eq!(self.state, State::Alloc, "an allocation nobody asked for");
        let old = self.old.expect("set before the allocation");
        self.new = Some(Addr::at(
            self.home,
            self.me,
            old.size_units(),
            offset_units,
        )?);
        self.state = State::Value;
        Ok(Step::Post(Access::ReadValue {
            holder: old.holder(self.home),
            offset_units: old.offset_units(),
            size_units: old.size_units(),
            into_units: offset_units,
        }))
    }

    /// Asks for the copy's block, sized by the address word (Fig. 6 line 4).
    fn read_value(&mut self, addr: Addr) -> Result<Step> {
        // A value held away from its home must fit the remote address's size
        // field (Pragh 4.1's 32 MiB): refuse before reading it.
        Addr::at(self.home, self.me, addr.size_units(), 0)?;
        self.old = Some(addr);
        self.state = State::Alloc;
        Ok(Step::Alloc {
            size_units: addr.size_units(),
        })
    }

    fn restart(&mut self, why: Restart) -> Step {
        self.state = State::Idle;
        self.restarts += 1;
        Step::Restart(why)
    }

    fn finish(&mut self, outcome: Outcome) -> Step {
        self.state = State::Done;
        Step::Done(outcome)
    }
}

pub(crate) fn data(output: Output) -> Vec<u8> {
    match output {
        Output::Data(bytes) => bytes,
        other => panic!("a READ completed with {other:?}"),
    }
}

pub(crate) fn header_word(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(
        bytes[..8]
            .try_into()
            .expect("a header READ has a header word"),
    )
}

#[cfg(test)]
mod tests;
