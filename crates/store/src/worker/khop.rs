//! The k-hop query (Pragh 6's traversal, any number of hops): the one
//! traversal every caller runs (the server's KHOP, `locus query`, the
//! benchmarks' two-hop workload).
//!
//! [`HopReads::Pipelined`] (the default) posts every read a hop needs and
//! waits once. Pragh reads one value at a time because an RDMA READ costs
//! 2 us; over TCP a READ is a round trip of tens of microseconds, and a hop
//! of a hundred vertices read one by one pays a hundred of them. Each
//! distinct vertex of the frontier is read once (a repeated vertex's list is
//! copied), in windows of [`PIPELINE_WINDOW`] reads in flight; a TCP port
//! sends a window to each peer as one write when it waits, so the reads go
//! out grouped by machine. A value held here is read at once (no round
//! trip); one held elsewhere costs one READ if its address is known (its
//! key homed here, or in the location cache), else a bucket READ first.
//! Every read goes through the location cache as Pragh's GET does
//! (a cache lookup, or `record` for what the cache does not serve), so the
//! monitor counts it (Pragh 4.4). A bucket's overflow chain is followed by
//! further posted READs; a list continued in a further part is read on from
//! part 1 by the synchronous GET after the batch, and a value invalidated
//! under the batch is read again by it (it retries).
//!
//! [`HopReads::OneAtATime`] is Pragh Fig. 8's one synchronous GET at a time,
//! repeats read again: the Pragh benchmark keeps it so its figures stay
//! faithful. Both give the same answer.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use locus_fabric::{FabricError, MachineId, Output, Port, WorkRequest};

use super::{Slot, Worker, PIPELINE_WINDOW};
use crate::addr::{Addr, Header};
use crate::adjacency::PartView;
use crate::table::{addr_word_offset, BucketView, Key, BUCKET_BYTES};
use crate::{Result, StoreError, VertexId};

/// The largest frontier (counting repeats) a k-hop reaches by default.
pub const FRONTIER_MAX: usize = 64 << 20;

/// How a k-hop reads the lists of one hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HopReads {
    /// Every read of a hop posted at once (within the window), one wait.
    #[default]
    Pipelined,
    /// One synchronous GET at a time, as Pragh Fig. 8.
    OneAtATime,
}

/// Bounds on one k-hop query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KhopLimits {
    /// The largest frontier (counting repeats) any hop may reach.
    pub frontier_max: usize,
    /// A time on the port's clock ([`Port::now_ns`]) after which no further
    /// hop starts; `None`: no deadline.
    pub deadline_ns: Option<u64>,
}

impl Default for KhopLimits {
    fn default() -> Self {
        KhopLimits {
            frontier_max: FRONTIER_MAX,
            deadline_ns: None,
        }
    }
}

/// What a k-hop query found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Khop {
    /// Whether the start vertex has an entry (if not, nothing was read past it).
    pub found: bool,
    /// Lists visited, counting repeats: the GETs one at a time would issue.
    pub visited: usize,
}

/// A vertex's place in one pipelined hop.
#[derive(Debug, Clone, Copy)]
enum Read {
    /// Not issued yet.
    Waiting,
    /// The READ of its bucket at this offset (main or overflow) is in flight.
    Bucket { offset: u64 },
    /// Its value READ is in flight, from the slot.
    Value(Slot, Addr),
    /// Done: `len` ids from `start` in the hop's list buffer.
    Done { start: u32, len: u32 },
    /// Done: the vertex has no entry.
    Absent,
    /// Part 0 read (`len` ids from `start`); its list goes on in part 1.
    More { start: u32, len: u32 },
    /// Read again by the synchronous GET after the batch.
    Again,
}

/// The id of a request: the vertex's index, and whether it reads a bucket.
#[inline]
fn request_id(i: usize, bucket: bool) -> u64 {
    (i as u64) << 1 | bucket as u64
}

/// A multiplicative hasher for vertex ids (the frontier map is rebuilt
/// every hop; SipHash cost more than the map saves on small hops).
#[derive(Default)]
pub(super) struct IdHasher(u64);

impl Hasher for IdHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    #[inline]
    fn write_u32(&mut self, x: u32) {
        self.0 = (x as u64 ^ 0xA076_1D64_78BD_642F).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// What a worker keeps between pipelined hops (buffers reused).
#[derive(Default)]
pub(super) struct HopScratch {
    /// Distinct vertices of the frontier, first-seen order.
    distinct: Vec<VertexId>,
    /// Index in `distinct` of each vertex.
    index: HashMap<VertexId, u32, BuildHasherDefault<IdHasher>>,
    /// Each distinct vertex's read.
    reads: Vec<Read>,
    /// The lists read, back to back.
    lists: Vec<VertexId>,
    /// A hop's output when it is not the last.
    next: Vec<VertexId>,
    /// Neighbours per vertex of the hop being read.
    k: usize,
}

impl<F: locus_fabric::Fabric> Worker<F> {
    /// Up to `k` neighbours of `start`, then up to `k` neighbours of each of
    /// those, `hops` times: `out` is cleared and receives the last hop's
    /// vertices in order, repeats included (each path counts). `reads`
    /// chooses how a hop reads (module doc); both give the same answer.
    /// A start vertex without an entry gives `found: false` and an empty
    /// `out`. Fails with [`StoreError::FrontierTooLarge`] or
    /// [`StoreError::DeadlinePassed`] past `limits`.
    pub fn k_hop(
        &mut self,
        start: VertexId,
        hops: u32,
        k: usize,
        reads: HopReads,
        limits: KhopLimits,
        out: &mut Vec<VertexId>,
    ) -> Result<Khop> {
        let mut frontier = std::mem::take(&mut self.scratch);
        let mut scratch = std::mem::take(&mut self.hop);
        self.query_now_ns = Some(self.port.now_ns());
        let r = self.k_hop_inner(
            start,
            hops,
            k,
            reads,
            limits,
            &mut frontier,
            &mut scratch,
            out,
        );
        self.query_now_ns = None;
        if !matches!(r, Ok(Khop { found: true, .. })) {
            out.clear();
        }
        self.scratch = frontier;
        self.hop = scratch;
        r
    }

    /// [`Worker::k_hop`] with the worker's buffers taken out: `frontier`
    /// and `s.next` alternate as a hop's input and output, and the last hop
    /// writes into `out` (no copy at the end).
    #[allow(clippy::too_many_arguments)]
    fn k_hop_inner(
        &mut self,
        start: VertexId,
        hops: u32,
        k: usize,
        reads: HopReads,
        limits: KhopLimits,
        frontier: &mut Vec<VertexId>,
        s: &mut HopScratch,
        out: &mut Vec<VertexId>,
    ) -> Result<Khop> {
        frontier.clear();
        frontier.push(start);
        out.clear();
        if hops == 0 {
            out.push(start);
            return Ok(Khop {
                found: self.neighbors(start, 0, &mut s.next)?,
                visited: 0,
            });
        }
        let mut next = std::mem::take(&mut s.next);
        let mut visited = 0;
        let r = (|| {
            for hop in 0..hops {
                if hop > 0 {
                    if let Some(d) = limits.deadline_ns {
                        if self.port.now_ns() > d {
                            return Err(StoreError::DeadlinePassed { hops_done: hop });
                        }
                    }
                }
                visited += frontier.len();
                let dest = if hop + 1 == hops {
                    &mut *out
                } else {
                    &mut next
                };
                dest.clear();
                let found = match reads {
                    HopReads::OneAtATime => {
                        let mut found = true;
                        for (i, &u) in frontier.iter().enumerate() {
                            let f = self.neighbors(u, k, dest)?;
                            if i == 0 {
                                found = f;
                            }
                            check_frontier(dest.len(), hop, limits)?;
                        }
                        found
                    }
                    HopReads::Pipelined => self.hop_pipelined(frontier, k, hop, limits, s, dest)?,
                };
                if hop == 0 && !found {
                    return Ok(Khop {
                        found: false,
                        visited,
                    });
                }
                if hop + 1 < hops {
                    std::mem::swap(frontier, &mut next);
                }
            }
            Ok(Khop {
                found: true,
                visited,
            })
        })();
        s.next = next;
        r
    }

    /// One hop with its reads posted at once: `dest` receives up to `k`
    /// neighbours of each vertex of `frontier`, in order. Returns whether
    /// `frontier[0]` has an entry.
    fn hop_pipelined(
        &mut self,
        frontier: &[VertexId],
        k: usize,
        hop: u32,
        limits: KhopLimits,
        s: &mut HopScratch,
        dest: &mut Vec<VertexId>,
    ) -> Result<bool> {
        s.distinct.clear();
        s.index.clear();
        s.lists.clear();
        s.reads.clear();
        if frontier.len() == 1 {
            s.distinct.push(frontier[0]);
        } else {
            for &u in frontier {
                let n = s.distinct.len() as u32;
                s.index.entry(u).or_insert_with(|| {
                    s.distinct.push(u);
                    n
                });
            }
        }
        s.reads.resize(s.distinct.len(), Read::Waiting);
        s.k = k;
        self.read_and_finish(s)?;
        let found = !matches!(s.reads.first(), Some(Read::Absent));
        if in_order(frontier.len(), s) {
            // The lists were read back to back in the frontier's order (no
            // repeated vertex, and every list done at once or in order, as
            // when all are held here): they are the next frontier as they are.
            debug_assert!(dest.is_empty());
            std::mem::swap(dest, &mut s.lists);
            check_frontier(dest.len(), hop, limits)?;
            return Ok(found);
        }
        for &u in frontier {
            let i = if frontier.len() == 1 {
                0
            } else {
                s.index[&u] as usize
            };
            match s.reads[i] {
                Read::Done { start, len } => {
                    dest.extend_from_slice(&s.lists[start as usize..(start + len) as usize])
                }
                Read::Absent => {}
                other => {
                    unreachable!("a read of a hop was left {other:?} before its lists are copied")
                }
            }
            check_frontier(dest.len(), hop, limits)?;
        }
        Ok(found)
    }

    /// Reads the lists of `s.distinct` (up to `s.k` ids each) posted at
    /// once, then finishes what the batch left (a list continued in further
    /// parts, a value invalidated under it) with one synchronous GET each:
    /// every read ends `Done` or `Absent`.
    fn read_and_finish(&mut self, s: &mut HopScratch) -> Result<()> {
        if let Err(e) = self.read_lists(s) {
            // Leave the port empty: a later call must not meet stale completions.
            self.drain_all();
            return Err(e);
        }
        let k = s.k;
        for i in 0..s.distinct.len() {
            let start = s.lists.len();
            let found = match s.reads[i] {
                Read::Again => self.neighbors(s.distinct[i], k, &mut s.lists)?,
                Read::More { start: at, len } => {
                    // Part 0 as the batch read it, then the rest.
                    let at = at as usize;
                    s.lists.extend_from_within(at..at + len as usize);
                    let rest = k - len as usize;
                    self.neighbors_from(s.distinct[i], 1, rest, &mut s.lists)?
                }
                _ => continue,
            };
            s.reads[i] = if found {
                Read::Done {
                    start: start as u32,
                    len: (s.lists.len() - start) as u32,
                }
            } else {
                Read::Absent
            };
        }
        Ok(())
    }

    /// The whole lists of `vertices` (each once), read as a k-hop reads a
    /// hop: every read posted at once (within [`PIPELINE_WINDOW`]), one wait
    /// per pass, so a batch of N vertices costs a few round trips, not 2N
    /// (a slot move's copy at its new home). `None`: no entry. A vertex
    /// whose word is a marker fails the call as [`Worker::get`] fails.
    pub fn get_many(&mut self, vertices: &[VertexId]) -> Result<Vec<Option<Vec<VertexId>>>> {
        let mut s = std::mem::take(&mut self.hop);
        self.query_now_ns = Some(self.port.now_ns());
        s.distinct.clear();
        s.index.clear();
        s.lists.clear();
        s.reads.clear();
        s.distinct.extend_from_slice(vertices);
        s.reads.resize(vertices.len(), Read::Waiting);
        s.k = usize::MAX;
        let r = self.read_and_finish(&mut s).map(|()| {
            s.reads
                .iter()
                .map(|r| match *r {
                    Read::Done { start, len } => {
                        Some(s.lists[start as usize..(start + len) as usize].to_vec())
                    }
                    Read::Absent => None,
                    other => unreachable!("a read left {other:?} after it was finished"),
                })
                .collect()
        });
        self.query_now_ns = None;
        self.hop = s;
        r
    }

    /// Reads the lists of `s.distinct` with at most [`PIPELINE_WINDOW`]
    /// requests in flight; leaves `Read::Again` where the synchronous GET
    /// must finish.
    fn read_lists(&mut self, s: &mut HopScratch) -> Result<()> {
        let n = s.distinct.len();
        // Before every READ of the batch: a cache entry made from a bucket
        // read here is stamped no later than the READ (Pragh Fig. 8 line 25).
        let now = self.lookup_now_ns();
        let mut issued = 0;
        let mut completions = std::mem::take(&mut self.completions);
        let r = (|| loop {
            while issued < n && self.port.inflight() < PIPELINE_WINDOW {
                self.issue(issued, s)?;
                issued += 1;
            }
            if self.port.inflight() == 0 {
                if issued == n {
                    return Ok(());
                }
                continue;
            }
            completions.clear();
            self.port.wait(&mut completions)?;
            for c in completions.drain(..) {
                let i = (c.id >> 1) as usize;
                debug_assert!(i < n, "a completion this hop did not post");
                let bytes = match c.result {
                    Ok(Output::Data(bytes)) => bytes,
                    Ok(_) => unreachable!("a READ completes with data"),
                    // A value READ through a cached address at a machine
                    // that is gone: drop the entry; the GET finishes the
                    // vertex from its home's word.
                    Err(FabricError::PeerUnavailable { .. })
                        if c.id & 1 == 0
                            && matches!(s.reads[i], Read::Value(slot, _) if slot.cached || slot.replica) =>
                    {
                        let Read::Value(slot, addr) = s.reads[i] else {
                            unreachable!("matched above")
                        };
                        self.forget_invalid(Key::part(s.distinct[i], 0), &slot, addr);
                        s.reads[i] = Read::Again;
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                };
                if c.id & 1 == 1 {
                    self.bucket_read(i, bytes, now, s)?;
                } else {
                    self.value_read(i, bytes, s);
                }
            }
        })();
        completions.clear();
        self.completions = completions;
        r
    }

    /// Starts vertex `i`'s read: its value's if its address is known
    /// without a round trip (homed here, or in the location cache), else its
    /// bucket's.
    fn issue(&mut self, i: usize, s: &mut HopScratch) -> Result<()> {
        let key = Key::part(s.distinct[i], 0);
        let home = self.home(key);
        if home != self.machine && self.shared.config.cache_lookups {
            let now = self.lookup_now_ns();
            let replicas = self.shared.config.replica_bytes_max > 0;
            // An entry cached without its position is a miss, as in `locate`.
            let hit = self.cached_lookup(key, home, now, replicas);
            if let Some((word, position)) = hit.filter(|h| h.1 != u64::MAX) {
                let slot = Slot {
                    home,
                    addr_offset: position,
                    addr_word: word,
                    cached: true,
                    replica: position == crate::cache::REPLICA_POSITION,
                };
                if slot.replica {
                    self.stats.replica_reads += 1;
                }
                return self.issue_value(i, slot, s);
            }
        }
        if home != self.machine {
            let layout = self.shared.layout;
            return self.read_bucket(i, home, layout.bucket_offset(layout.bucket_of(key)), s);
        }
        // Homed here: the local table (and a replica of a value held away).
        match self.locate(key, true)? {
            Some(slot) => self.issue_value(i, slot, s),
            None => {
                s.reads[i] = Read::Absent;
                Ok(())
            }
        }
    }

    /// Posts the READ of vertex `i`'s bucket at `offset` of `home`'s table.
    fn read_bucket(
        &mut self,
        i: usize,
        home: MachineId,
        offset: u64,
        s: &mut HopScratch,
    ) -> Result<()> {
        let kr = self.keys_region(home);
        let buf = self.buffer(BUCKET_BYTES as usize);
        self.port.post(WorkRequest::read_into(
            request_id(i, true),
            home,
            kr,
            offset,
            buf,
        ))?;
        s.reads[i] = Read::Bucket { offset };
        Ok(())
    }

    /// Posts the READ of the value `slot` names, or settles vertex `i` if
    /// the slot names none (or marks it lost: an error, as a GET).
    fn issue_value(&mut self, i: usize, slot: Slot, s: &mut HopScratch) -> Result<()> {
        let key = Key::part(s.distinct[i], 0);
        let Some(addr) = Addr::decode(slot.addr_word) else {
            lost(key, slot.addr_word)?;
            s.reads[i] = Read::Absent;
            return Ok(());
        };
        let holder = addr.holder(slot.home);
        if holder == self.machine {
            // Held here (at home, migrated here, or a replica): a local READ
            // costs no round trip, so it is done now, as a GET does it.
            let record = self
                .records(&slot, addr)
                .then(|| (key, slot.addr_word, self.lookup_now_ns()));
            self.fetch_counting(slot.home, addr, record)?;
            let bytes = std::mem::take(&mut self.value);
            self.settle(i, slot, addr, &bytes, s);
            self.value = bytes;
            return Ok(());
        }
        let vr = self.values_region(holder);
        let buf = self.buffer((addr.size_units() * 8) as usize);
        self.port.post(WorkRequest::read_into(
            request_id(i, false),
            holder,
            vr,
            addr.offset_units() * 8,
            buf,
        ))?;
        // Counted while the READ is in flight, as a GET counts.
        if self.records(&slot, addr) {
            let now = self.lookup_now_ns();
            if let (Some(c), Some(w)) = (self.cache(), super::cache_form(slot.home, slot.addr_word))
            {
                c.record(key, w, now);
            }
        }
        s.reads[i] = Read::Value(slot, addr);
        Ok(())
    }

    /// A bucket came back: post the value's READ, or the next bucket's of
    /// an overflow chain, or settle the vertex.
    fn bucket_read(
        &mut self,
        i: usize,
        bytes: Vec<u8>,
        now: u64,
        s: &mut HopScratch,
    ) -> Result<()> {
        let key = Key::part(s.distinct[i], 0);
        let home = self.home(key);
        let Read::Bucket { offset: off } = s.reads[i] else {
            unreachable!("a bucket READ completes for a vertex reading its bucket")
        };
        let view = BucketView::parse(&bytes);
        self.keep(bytes);
        let mut found = None;
        for (j, &(kw, aw)) in view.slots.iter().enumerate() {
            if kw == key.word() {
                found = Some((j, aw));
                break;
            }
            if kw == 0 {
                break;
            }
        }
        let Some((j, aw)) = found else {
            if view.slots.iter().any(|&(kw, _)| kw == 0) || view.link == 0 {
                s.reads[i] = Read::Absent;
                return Ok(());
            }
            self.stats.overflow_hops += 1;
            let next = self.shared.layout.overflow_offset(view.link - 1);
            return self.read_bucket(i, home, next, s);
        };
        let slot = Slot {
            home,
            addr_offset: addr_word_offset(off, j as u64),
            addr_word: aw,
            cached: false,
            replica: false,
        };
        if aw != 0 {
            self.remember_at(key, home, aw, slot.addr_offset, now);
        }
        self.issue_value(i, slot, s)
    }

    /// A value came back from another machine.
    fn value_read(&mut self, i: usize, bytes: Vec<u8>, s: &mut HopScratch) {
        let Read::Value(slot, addr) = s.reads[i] else {
            unreachable!("a value READ completes for a vertex reading its value")
        };
        self.stats.values_read += 1;
        self.stats.values_read_remote += (addr.holder(slot.home) != self.machine) as u64;
        self.settle(i, slot, addr, &bytes, s);
        self.keep(bytes);
    }

    /// Vertex `i`'s value read through `slot` at `addr` (header first):
    /// keeps up to `s.k` ids if the header still names it, and reads on
    /// from part 1 after the batch if the list goes on; if it was
    /// invalidated, the GET reads it again after the batch.
    fn settle(&mut self, i: usize, slot: Slot, addr: Addr, bytes: &[u8], s: &mut HopScratch) {
        let key = Key::part(s.distinct[i], 0);
        let header = Header::decode(u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")));
        // The header is checked before its length is trusted (an invalidated
        // value's header is zero; `matches` bounds the payload).
        let view = header
            .matches(addr)
            .then(|| PartView::parse(&bytes[8..8 + header.payload_bytes as usize]))
            .flatten();
        let k = s.k;
        s.reads[i] = match view {
            Some(view) => {
                let start = s.lists.len();
                view.extend_into(k, &mut s.lists);
                self.note_tracked(key);
                let (start, len) = (start as u32, (s.lists.len() - start) as u32);
                if view.more() && view.len() < k {
                    Read::More { start, len }
                } else {
                    Read::Done { start, len }
                }
            }
            None => {
                // Invalidated (updated or migrated, Pragh Fig. 8 lines 15-18).
                self.forget_invalid(key, &slot, addr);
                Read::Again
            }
        };
    }
}

/// Whether the lists of a hop over `frontier_len` vertices lie in `s.lists`
/// in the frontier's order, back to back and nothing else: no vertex
/// repeats, and each read's list starts where the one before ends.
fn in_order(frontier_len: usize, s: &HopScratch) -> bool {
    if s.distinct.len() != frontier_len {
        return false;
    }
    let mut at = 0u32;
    for r in &s.reads {
        match *r {
            Read::Done { start, len } if start == at => at += len,
            Read::Absent => {}
            _ => return false,
        }
    }
    at as usize == s.lists.len()
}

/// `Err(FrontierTooLarge)` once a hop's frontier passes the limit.
#[inline]
fn check_frontier(len: usize, hop: u32, limits: KhopLimits) -> Result<()> {
    if len > limits.frontier_max {
        return Err(StoreError::FrontierTooLarge {
            hop: hop + 1,
            vertices_max: limits.frontier_max,
        });
    }
    Ok(())
}

/// `Err(ValueLost)` if `word` marks `key`'s value lost.
#[inline]
fn lost(key: Key, word: u64) -> Result<()> {
    super::read::lost(key, word)
}
