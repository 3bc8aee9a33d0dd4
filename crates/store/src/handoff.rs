//! The handoff of one key from its old home A to its new home B, as a
//! step machine without I/O (issue 59; `docs/design.md`, "The handoff of
//! one key"). B runs it, as a MIGRATE target runs [`crate::migrate`]: one
//! operation in flight at a time, the driver carrying out each [`Step`].
//!
//! ```text
//!  start ──▶ Bucket(A) ──word MOVED(B)──▶ Done(AlreadyHanded)
//!              │  ├─ key absent ─────────▶ Done(Absent)
//!              │  ├─ lost / MOVED(C) ────▶ Done(Lost / MovedElsewhere)
//!              │  ├─ null word ─────────────────────────────────▶ Pend ──▶ Log ──▶ Publish
//!              │  └─ a value (at A, C or B) ──▶ Alloc ──▶ Value ──▶ Check ──▶ Pend ──▶ Log ──▶ Invalidate ──▶ Publish
//!              └─ chain goes on ──▶ Bucket (overflow)         header changed ──▶ Restart(Invalidated)
//!  Publish: CAS A's word w ──▶ MOVED(B)   ──lost──▶ Restart(Conflict)
//!     └─won──▶ Own: CAS B's word PENDING(A) ──▶ the copy's address ──▶ Done(Handed)
//!              (a null word has no copy: B's entry becomes empty)
//! ```
//!
//! Invariants (E1-E3 of the design), each by the order of the states:
//! - **H1** (E2) B's word names the copy only after A's word says MOVED(B):
//!   until then B's entry holds `PENDING(A)`, which no reader follows;
//! - **H2** (E3) the copy is durable in B's log ([`Step::Log`]) before the
//!   CAS that makes it B's;
//! - **H3** (MIGRATE's P1-P3) the value, copied into B's region wherever
//!   it was, is checked by its landed header; the old block is zeroed before
//!   the CAS and only within half a reclaim lease of reading A's word, and
//!   goes to its holder's reclaim ring after the CAS;
//! - a restart leaves B's `PENDING(A)` entry (still A's key, so harmless)
//!   and the allocated copy, which the driver frees.

use locus_fabric::{MachineId, Output};

use crate::addr::{lost_on, moved_to, moved_word, pending_word, Addr, Header};
use crate::migrate::{data, header_word, Access, Restart};
use crate::table::{addr_word_offset, BucketView, InChain, Key, TableLayout};
use crate::Result;

/// What the driver does next for a handoff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Post this operation and feed its completion to [`HandoffJob::on_completion`].
    Post(Access),
    /// Allocate a block of `size_units` in B's value region and feed its
    /// offset to [`HandoffJob::on_allocated`].
    Alloc {
        /// Size in 8-byte units.
        size_units: u64,
    },
    /// Put the key into B's table with `pending_word(A)` unless it has an
    /// entry (a `PENDING(A)` entry from an earlier attempt is kept), and feed
    /// the byte offset of its address word to [`HandoffJob::on_pended`].
    Pend {
        /// The word to put.
        pending: u64,
    },
    /// Make the key's list, the value at `word` as B will name it, durable
    /// in B's log (or do nothing without one), then call
    /// [`HandoffJob::on_logged`]. `word` 0: the key has no value.
    Log {
        /// B's address word of the copy.
        word: u64,
    },
    /// Start over with [`HandoffJob::start`]; free the copy if one was allocated.
    Restart(Restart),
    /// Finished.
    Done(Outcome),
}

/// How a handoff ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The key is B's now.
    Handed(Handed),
    /// A's word already said MOVED(B): an earlier attempt finished it.
    AlreadyHanded,
    /// A's table has no such key: nothing to hand over (creations of keys
    /// in a moving slot go to B, E5).
    Absent,
    /// A's word marks the value lost with this machine (Pragh 5, `recover.rs`).
    Lost(MachineId),
    /// A's word says the key went to another machine: the move's record and
    /// A disagree, which the driver reports.
    MovedElsewhere(MachineId),
}

/// What a finished handoff leaves for its driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handed {
    /// A's word before the handoff.
    pub from_word: u64,
    /// B's word now (0: the key had no value; B's entry is empty).
    pub new_word: u64,
    /// Byte offset of the key's address word in B's table.
    pub own_offset: u64,
    /// Bytes copied from A's value region (0 if the value stayed where it was).
    pub bytes_copied: u64,
    /// The old block as (its holder, a reclaim-ring entry for the holder's
    /// ring): A, a third machine C or B, wherever the value was.
    pub old_entry: Option<(MachineId, u64)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Idle,
    Bucket(u64),
    Alloc,
    Value,
    Check,
    Pend,
    Log,
    Invalidate,
    Publish,
    Own,
    Done,
}

/// One key's handoff from `from` (A) to `me` (B).
#[derive(Debug)]
pub struct HandoffJob {
    key: Key,
    me: MachineId,
    from: MachineId,
    layout: TableLayout,
    lease_ns: u64,
    state: State,
    /// A time no later than the READ that found `seen`.
    seen_at_ns: u64,
    /// Byte offset of the key's address word at A.
    addr_offset: u64,
    /// A's word as read.
    seen: u64,
    /// The value at A, when A's word names one.
    old: Option<Addr>,
    /// B's word of the copy (0: no value).
    new_word: u64,
    /// The copy's block in B's region, when the value was copied.
    copy: Option<Addr>,
    own_offset: u64,
    restarts: u32,
}

impl HandoffJob {
    /// A handoff of `key` from `from` to `me`, in tables of `layout`, with
    /// a reclaim lease of `lease_ns`.
    pub fn new(
        key: Key,
        me: MachineId,
        from: MachineId,
        layout: TableLayout,
        lease_ns: u64,
    ) -> HandoffJob {
        assert_ne!(me, from, "a handoff is between two machines");
        HandoffJob {
            key,
            me,
            from,
            layout,
            lease_ns,
            state: State::Idle,
            seen_at_ns: 0,
            addr_offset: 0,
            seen: 0,
            old: None,
            new_word: 0,
            copy: None,
            own_offset: 0,
            restarts: 0,
        }
    }

    /// The key.
    pub fn key(&self) -> Key {
        self.key
    }

    /// Times the job has started over.
    pub fn restarts(&self) -> u32 {
        self.restarts
    }

    /// Starts, or starts over after a [`Step::Restart`], at `now_ns`.
    pub fn start(&mut self, now_ns: u64) -> Step {
        assert_eq!(
            self.state,
            State::Idle,
            "start of a handoff that is running"
        );
        self.old = None;
        self.copy = None;
        self.new_word = 0;
        self.seen_at_ns = now_ns;
        let offset = self.layout.bucket_offset(self.layout.bucket_of(self.key));
        self.state = State::Bucket(offset);
        Step::Post(Access::ReadBucket {
            home: self.from,
            offset,
        })
    }

    /// Feeds the completion of the operation in flight; `now_ns` is the
    /// clock (used before the invalidation, P3).
    ///
    /// # Panics
    /// If the output is not the one the posted operation gives (a driver bug).
    pub fn on_completion(&mut self, output: Output, now_ns: u64) -> Result<Step> {
        match self.state {
            State::Bucket(offset) => match BucketView::parse(&data(output)).search(self.key) {
                InChain::Found { slot, word } => {
                    self.addr_offset = addr_word_offset(offset, slot);
                    self.seen = word;
                    self.on_word(word)
                }
                InChain::Absent => Ok(self.finish(Outcome::Absent)),
                InChain::Next(n) => {
                    let next = self.layout.overflow_offset(n);
                    self.state = State::Bucket(next);
                    Ok(Step::Post(Access::ReadBucket {
                        home: self.from,
                        offset: next,
                    }))
                }
            },
            State::Value => {
                assert_eq!(output, Output::Placed, "a READ into the copy's block");
                let copy = self.copy.expect("allocated before the value READ");
                self.state = State::Check;
                Ok(Step::Post(Access::ReadOwnHeader {
                    offset_units: copy.offset_units(),
                }))
            }
            State::Check => {
                let header = Header::decode(header_word(&data(output)));
                let old = self.old.expect("set before the value READ");
                if !header.matches(old) {
                    return Ok(self.restart(Restart::Invalidated));
                }
                Ok(self.pend())
            }
            State::Invalidate => {
                let Output::Written(_) = output else {
                    panic!("a WRITE completed with {output:?}")
                };
                Ok(self.publish())
            }
            State::Publish => {
                let Output::Word(prev) = output else {
                    panic!("a CAS completed with {output:?}")
                };
                if prev != self.seen {
                    return Ok(self.restart(Restart::Conflict));
                }
                self.state = State::Own;
                Ok(Step::Post(Access::Publish {
                    home: self.me,
                    offset: self.own_offset,
                    expected: pending_word(self.from),
                    new: self.new_word,
                }))
            }
            State::Own => {
                let Output::Word(prev) = output else {
                    panic!("a CAS completed with {output:?}")
                };
                // Only B writes a PENDING word, and B's writers leave it be.
                assert_eq!(
                    prev,
                    pending_word(self.from),
                    "B's PENDING word changed under the handoff of {:?}",
                    self.key
                );
                let _ = now_ns;
                Ok(self.handed())
            }
            s @ (State::Idle | State::Alloc | State::Pend | State::Log | State::Done) => {
                panic!("a completion for a handoff in state {s:?}")
            }
        }
    }

    /// Feeds the offset of the block the driver allocated for the copy.
    pub fn on_allocated(&mut self, offset_units: u64) -> Result<Step> {
        assert_eq!(self.state, State::Alloc, "an allocation nobody asked for");
        let old = self.old.expect("set before the allocation");
        let copy = Addr::local(old.size_units(), offset_units)?;
        self.copy = Some(copy);
        self.new_word = copy.encode();
        self.state = State::Value;
        Ok(Step::Post(Access::ReadValue {
            holder: old.holder(self.from),
            offset_units: old.offset_units(),
            size_units: old.size_units(),
            into_units: offset_units,
        }))
    }

    /// Feeds the byte offset of the key's address word in B's table, which
    /// now holds `PENDING(A)`.
    pub fn on_pended(&mut self, own_offset: u64) -> Step {
        assert_eq!(self.state, State::Pend, "a pended entry nobody asked for");
        self.own_offset = own_offset;
        self.state = State::Log;
        Step::Log {
            word: self.new_word,
        }
    }

    /// Called instead of [`HandoffJob::on_logged`] when the value the copy
    /// names changed before it could be logged (a value at C updated
    /// meanwhile): the job starts over.
    pub fn on_stale_copy(&mut self) -> Step {
        assert_eq!(self.state, State::Log, "a log nobody asked for");
        self.restart(Restart::Invalidated)
    }

    /// Called when the copy is durable at B (H2), at `now_ns`.
    pub fn on_logged(&mut self, now_ns: u64) -> Step {
        assert_eq!(self.state, State::Log, "a log nobody asked for");
        match self.copy {
            Some(_) => {
                let old = self.old.expect("a copy has an old value");
                // P3: A's old block may be zeroed only while it cannot have
                // been reused, half a lease after A's word was read.
                if now_ns.saturating_sub(self.seen_at_ns) >= self.lease_ns / 2 {
                    return self.restart(Restart::Expired);
                }
                self.state = State::Invalidate;
                Step::Post(Access::Invalidate {
                    holder: old.holder(self.from),
                    offset_units: old.offset_units(),
                })
            }
            None => self.publish(),
        }
    }

    fn on_word(&mut self, w: u64) -> Result<Step> {
        if let Some(to) = moved_to(w) {
            return Ok(self.finish(if to == self.me {
                Outcome::AlreadyHanded
            } else {
                Outcome::MovedElsewhere(to)
            }));
        }
        if let Some(m) = lost_on(w) {
            return Ok(self.finish(Outcome::Lost(m)));
        }
        match Addr::decode(w) {
            // No value: nothing to copy. B's entry still goes through
            // PENDING to empty, so that a marker B left when it handed the
            // key away earlier does not outlive this handoff.
            None => Ok(self.pend()),
            // Wherever the value is (A, a third machine C, B itself), it is
            // copied into a new block of B's, as a MIGRATE to B would: a
            // MIGRATE in flight invalidates the block it read before its
            // CAS, so a block B's word kept naming could be one that a
            // racing MIGRATE zeroed and then lost its CAS to this handoff
            // (the simulation found it). A copy makes the race the one of
            // two MIGRATEs, which Pragh's order already settles.
            Some(a) => {
                // A value held away from its home must fit the remote word
                // (Pragh 4.1's 32 MiB), as B's word may name it later.
                Addr::remote(self.me, a.size_units(), 0)?;
                self.old = Some(a);
                self.state = State::Alloc;
                Ok(Step::Alloc {
                    size_units: a.size_units(),
                })
            }
        }
    }

    fn pend(&mut self) -> Step {
        self.state = State::Pend;
        Step::Pend {
            pending: pending_word(self.from),
        }
    }

    fn publish(&mut self) -> Step {
        self.state = State::Publish;
        Step::Post(Access::Publish {
            home: self.from,
            offset: self.addr_offset,
            expected: self.seen,
            new: moved_word(self.me),
        })
    }

    fn handed(&mut self) -> Step {
        let old_entry = self.copy.and(self.old).map(|o| {
            let entry = Addr::local(o.size_units(), o.offset_units())
                .expect("a held value's address fits a local word")
                .encode();
            (o.holder(self.from), entry)
        });
        let h = Handed {
            from_word: self.seen,
            new_word: self.new_word,
            own_offset: self.own_offset,
            bytes_copied: self.copy.map_or(0, |c| c.size_units() * 8),
            old_entry,
        };
        self.finish(Outcome::Handed(h))
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

#[cfg(test)]
mod tests;
