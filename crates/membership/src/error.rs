//! Errors of the membership crate: each names what failed and against which
//! endpoint, machine or key.

/// A membership failure.
#[derive(Debug, thiserror::Error)]
pub enum MembershipError {
    /// The `[etcd]` settings cannot work.
    #[error("bad [etcd] setting: {0}")]
    Config(String),
    /// No etcd answered at the endpoints.
    #[error("cannot reach etcd at {endpoints}: {reason}")]
    Connect {
        /// The endpoints tried, comma-separated.
        endpoints: String,
        /// Why.
        reason: String,
    },
    /// An etcd request failed.
    #[error("etcd failed while {action}: {reason}")]
    Etcd {
        /// What was being done.
        action: String,
        /// etcd's or the transport's error.
        reason: String,
    },
    /// An etcd request did not finish in time.
    #[error("etcd did not answer within {ms} ms while {action}")]
    Timeout {
        /// What was being done.
        action: String,
        /// The bound.
        ms: u64,
    },
    /// A value in etcd is not what Locus writes there.
    #[error("etcd key {key} holds {value:?}, which is not {expected}")]
    Corrupt {
        /// The key.
        key: String,
        /// Its value, lossily decoded.
        value: String,
        /// What was expected.
        expected: &'static str,
    },
    /// The lease ended (expired or revoked): this member is fenced out.
    #[error("the etcd lease of {who} is lost: {reason}")]
    LeaseLost {
        /// Whose lease.
        who: String,
        /// Why.
        reason: String,
    },
    /// Another driver holds the slot mover's lock (`P/mover`).
    #[error("another slot mover is running: {holder} holds the lock (wait for it; a killed one's lock ends with its lease, and the coordinator then settles what it left)")]
    MoverBusy {
        /// The holder's token.
        holder: String,
    },
    /// Starting or waiting for a private etcd failed.
    #[error("etcd process: {0}")]
    Process(String),
}

/// The crate's result.
pub type Result<T> = std::result::Result<T, MembershipError>;

impl MembershipError {
    pub(crate) fn etcd(action: impl Into<String>, e: impl std::fmt::Display) -> Self {
        MembershipError::Etcd {
            action: action.into(),
            reason: e.to_string(),
        }
    }
}
