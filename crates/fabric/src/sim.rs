//! Simulated fabric (being written).
