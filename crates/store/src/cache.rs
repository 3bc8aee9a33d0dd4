//! Location cache (being written).
