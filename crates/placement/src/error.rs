//! The crate's errors.

/// What went wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlacementError {
    /// A setting out of its range.
    #[error("{key} = {value}: expected {expected}")]
    InvalidSetting {
        /// The setting's name.
        key: &'static str,
        /// The value given.
        value: String,
        /// The accepted range or rule.
        expected: String,
    },
    /// An encoded slot table that does not decode.
    #[error("slot table, byte {at}: {what}")]
    Malformed {
        /// Where in the encoding.
        at: usize,
        /// What is wrong there.
        what: String,
    },
}

/// The crate's result.
pub type Result<T, E = PlacementError> = std::result::Result<T, E>;
