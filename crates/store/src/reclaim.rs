//! Reclaim ring (being written).
