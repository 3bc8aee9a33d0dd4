//! TCP fabric (being written).
