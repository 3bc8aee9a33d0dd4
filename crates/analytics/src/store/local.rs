//! The Oracle backend: every edge block in local memory (Fargraph+ 9.2, Table 1).

use std::collections::VecDeque;

use super::{
    BlockTable, EdgeStore, FetchStream, Footprint, Residency, Resident, Segment, StreamStats,
    SEGMENT_BYTES_DEFAULT,
};
use crate::error::Result;
use crate::grid::{Grid, Order};
use crate::store::Backend;

/// All blocks of the given orders, copied into local memory.
pub struct LocalStore {
    table: BlockTable,
    resident: Resident,
}

impl LocalStore {
    /// Copies the blocks of `orders` out of `grid`.
    pub fn new(grid: &Grid, orders: &[Order]) -> Result<LocalStore> {
        let table = BlockTable::new(grid, orders)?;
        let resident = Resident::copy(grid, &table, &Residency::all(&table, true));
        Ok(LocalStore { table, resident })
    }
}

impl EdgeStore for LocalStore {
    fn backend(&self) -> Backend {
        Backend::Local
    }

    fn table(&self) -> &BlockTable {
        &self.table
    }

    fn open_stream(&self) -> Result<Box<dyn FetchStream + '_>> {
        Ok(Box::new(LocalStream {
            resident: &self.resident,
            pending: VecDeque::with_capacity(2),
            stats: StreamStats::default(),
        }))
    }

    fn segment_bytes_max(&self) -> u64 {
        SEGMENT_BYTES_DEFAULT
    }

    fn footprint(&self) -> Footprint {
        Footprint {
            resident_bytes: self.resident.len(),
            ..Footprint::default()
        }
    }
}

struct LocalStream<'s> {
    resident: &'s Resident,
    pending: VecDeque<Segment>,
    stats: StreamStats,
}

impl FetchStream for LocalStream<'_> {
    fn begin(&mut self, seg: Segment) -> Result<()> {
        debug_assert!(self.pending.len() < self.depth_max());
        self.pending.push_back(seg);
        Ok(())
    }

    fn consume(&mut self, f: &mut dyn FnMut(&[u8])) -> Result<()> {
        let seg = self.pending.pop_front().expect("consume after begin");
        let (Some(bytes), None) = self.resident.split(&seg) else {
            unreachable!("the Oracle holds every block");
        };
        self.stats.bytes_resident += bytes.len() as u64;
        f(bytes);
        Ok(())
    }

    fn stats(&self) -> StreamStats {
        self.stats
    }
}
