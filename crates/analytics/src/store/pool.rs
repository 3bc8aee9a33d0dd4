//! The paged backend's frame pool: the local budget's 4 KB frames, shared
//! by edge pages and (with `paged_vertices`) vertex pages, oldest first.
//! Edge pages are restamped on every touch (exact LRU); vertex pages when
//! they are faulted in, first written or mapped back ([`super::vpage`] has
//! their states and invariants). The pool only decides; the callers in
//! `vpage.rs` do the unmaps and write-backs its [`Reclaim`] asks for.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// Key bit of a vertex page in the pool (edge pages are below it).
pub(crate) const VERTEX: u64 = 1 << 63;

/// A vertex page's frame.
pub(crate) enum VFrame {
    Fetching,
    Clean,
    Dirty,
    Busy,
    Inactive { bytes: Vec<u8>, dirty: bool },
}

pub(crate) enum Frame {
    Edge(Arc<Vec<u8>>),
    Vertex(VFrame),
}

/// What reclaiming the oldest usable frame asks of the caller.
pub(crate) enum Reclaim {
    /// A frame was freed (an edge page or a clean inactive vertex page).
    Freed(Option<Vec<u8>>),
    /// Unmap vertex page `q` (now Busy), keeping its bytes.
    Unmap { q: u64, dirty: bool },
    /// Write vertex page `q`'s bytes (it is Busy) to far memory, then drop it.
    Writeback { q: u64, bytes: Vec<u8> },
    /// Every frame is Busy or Fetching: wait.
    Wait,
}

/// The frames of the local budget, oldest first.
pub(crate) struct Pool {
    pub(crate) capacity: usize,
    pub(crate) frames: HashMap<u64, (Frame, u64)>,
    pub(crate) by_age: BTreeMap<u64, u64>,
    pub(crate) clock: u64,
    /// Vertex pages whose far copy is valid.
    pub(crate) far_copy: HashSet<u64>,
    pub(crate) vertex_frames: u64,
    pub(crate) vertex_frames_peak: u64,
}

impl Pool {
    pub(crate) fn new(capacity: usize) -> Pool {
        Pool {
            capacity,
            frames: HashMap::with_capacity(capacity.min(1 << 20)),
            by_age: BTreeMap::new(),
            clock: 0,
            far_copy: HashSet::new(),
            vertex_frames: 0,
            vertex_frames_peak: 0,
        }
    }

    /// Whether edge page `page` has a frame.
    pub(crate) fn contains(&self, page: u64) -> bool {
        self.frames.contains_key(&page)
    }

    /// Edge page `page` if cached, marked most recently used.
    pub(crate) fn get(&mut self, page: u64) -> Option<Arc<Vec<u8>>> {
        debug_assert!(page & VERTEX == 0);
        let (frame, stamp) = self.frames.get_mut(&page)?;
        let Frame::Edge(bytes) = frame else {
            unreachable!("edge keys hold edge frames")
        };
        let bytes = Arc::clone(bytes);
        let old = *stamp;
        self.clock += 1;
        *stamp = self.clock;
        self.by_age.remove(&old);
        self.by_age.insert(self.clock, page);
        Some(bytes)
    }

    pub(crate) fn insert(&mut self, key: u64, frame: Frame) {
        assert!(
            self.frames.len() < self.capacity,
            "a frame was made room for"
        );
        self.clock += 1;
        if key & VERTEX != 0 {
            self.vertex_frames += 1;
            self.vertex_frames_peak = self.vertex_frames_peak.max(self.vertex_frames);
        }
        let old = self.frames.insert(key, (frame, self.clock));
        assert!(old.is_none(), "page {key:#x} had a frame already");
        self.by_age.insert(self.clock, key);
        debug_assert_eq!(self.frames.len(), self.by_age.len());
    }

    pub(crate) fn remove(&mut self, key: u64) -> Option<Frame> {
        let (frame, stamp) = self.frames.remove(&key)?;
        self.by_age.remove(&stamp);
        if key & VERTEX != 0 {
            self.vertex_frames -= 1;
        }
        Some(frame)
    }

    pub(crate) fn vframe(&mut self, q: u64) -> Option<&mut VFrame> {
        match self.frames.get_mut(&(q | VERTEX)) {
            Some((Frame::Vertex(v), _)) => Some(v),
            Some(_) => unreachable!("vertex keys hold vertex frames"),
            None => None,
        }
    }

    /// Sets vertex page `q`'s frame and marks it most recently used.
    pub(crate) fn set(&mut self, q: u64, state: VFrame) {
        let key = q | VERTEX;
        let (frame, stamp) = self.frames.get_mut(&key).expect("the page has a frame");
        *frame = Frame::Vertex(state);
        let old = *stamp;
        self.clock += 1;
        *stamp = self.clock;
        self.by_age.remove(&old);
        self.by_age.insert(self.clock, key);
    }

    pub(crate) fn full(&self, need: usize) -> bool {
        self.frames.len() + need > self.capacity
    }

    /// Takes the oldest frame that is not Busy or Fetching (see [`Reclaim`]).
    pub(crate) fn reclaim(&mut self) -> Reclaim {
        let mut pick = None;
        for (_, &key) in self.by_age.iter() {
            match &self.frames[&key].0 {
                Frame::Vertex(VFrame::Busy | VFrame::Fetching) => continue,
                _ => {
                    pick = Some(key);
                    break;
                }
            }
        }
        let Some(key) = pick else {
            return Reclaim::Wait;
        };
        let q = key & !VERTEX;
        let (frame, _) = self.frames.get_mut(&key).expect("picked");
        match frame {
            Frame::Edge(_) => match self.remove(key) {
                Some(Frame::Edge(b)) => Reclaim::Freed(Arc::try_unwrap(b).ok()),
                _ => unreachable!(),
            },
            Frame::Vertex(v) => match std::mem::replace(v, VFrame::Busy) {
                VFrame::Clean => Reclaim::Unmap { q, dirty: false },
                VFrame::Dirty => Reclaim::Unmap { q, dirty: true },
                VFrame::Inactive { bytes, dirty: true } => Reclaim::Writeback { q, bytes },
                VFrame::Inactive {
                    bytes,
                    dirty: false,
                } => {
                    self.remove(key);
                    Reclaim::Freed(Some(bytes))
                }
                VFrame::Busy | VFrame::Fetching => unreachable!("skipped"),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(b: u8) -> Arc<Vec<u8>> {
        Arc::new(vec![b; 8])
    }

    #[test]
    fn edge_pages_leave_least_recently_used_first() {
        let mut pool = Pool::new(3);
        for p in 0..3 {
            pool.insert(p, Frame::Edge(page(p as u8)));
        }
        assert!(pool.get(0).is_some()); // 1 is now the oldest
        assert!(pool.full(1));
        match pool.reclaim() {
            Reclaim::Freed(Some(b)) => assert_eq!(b, vec![1u8; 8]),
            _ => panic!("an unshared edge page is freed"),
        }
        assert!(pool.get(1).is_none());
        // A page still held by a reader is freed but not handed back for reuse.
        let held = pool.get(0).unwrap();
        pool.get(2);
        assert!(matches!(pool.reclaim(), Reclaim::Freed(None)));
        assert_eq!(held[0], 0);
    }

    #[test]
    fn a_mapped_vertex_page_gets_a_second_chance_and_busy_frames_are_skipped() {
        let mut pool = Pool::new(4);
        pool.insert(VERTEX | 7, Frame::Vertex(VFrame::Clean));
        pool.insert(VERTEX | 8, Frame::Vertex(VFrame::Fetching));
        pool.insert(1, Frame::Edge(page(1)));
        // The oldest, a mapped vertex page, is unmapped, not evicted.
        assert!(matches!(
            pool.reclaim(),
            Reclaim::Unmap { q: 7, dirty: false }
        ));
        // Busy (7) and Fetching (8) are skipped: the edge page goes.
        assert!(matches!(pool.reclaim(), Reclaim::Freed(_)));
        assert!(matches!(pool.reclaim(), Reclaim::Wait));
        pool.set(
            7,
            VFrame::Inactive {
                bytes: vec![0; 8],
                dirty: true,
            },
        );
        // An untouched inactive dirty page is written back.
        assert!(matches!(pool.reclaim(), Reclaim::Writeback { q: 7, .. }));
        pool.set(
            7,
            VFrame::Inactive {
                bytes: vec![0; 8],
                dirty: false,
            },
        );
        assert!(matches!(pool.reclaim(), Reclaim::Freed(Some(_))));
        assert_eq!(pool.vertex_frames, 1);
    }
}
