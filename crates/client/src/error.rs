//! The client's error type. Every variant that involves a server names it
//! (machine id when known, and address) and says why.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::proto::{ErrorCode, ProtoError};

/// Which server an error came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerRef {
    /// Its machine id, if known.
    pub id: Option<u8>,
    /// Its client address.
    pub addr: SocketAddr,
}

impl std::fmt::Display for ServerRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.id {
            Some(id) => write!(f, "server {id} ({})", self.addr),
            None => write!(f, "server at {}", self.addr),
        }
    }
}

/// What a client call can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The server could not be reached, or the connection broke.
    #[error("{server} is unavailable: {reason}")]
    Unavailable {
        /// The server.
        server: ServerRef,
        /// Why.
        reason: String,
    },
    /// No reply within the request's deadline (the connection is dropped).
    #[error("{server} did not answer within the deadline of {deadline_ms} ms")]
    Deadline {
        /// The server.
        server: ServerRef,
        /// The deadline.
        deadline_ms: u64,
    },
    /// The server refused us, or we refused it, at the handshake.
    #[error("{server}: authentication failed: {reason}")]
    Auth {
        /// The server.
        server: ServerRef,
        /// Why.
        reason: String,
    },
    /// The server answered with an error reply.
    #[error("{message} [{}]", code.name())]
    Server {
        /// The server.
        server: ServerRef,
        /// The code.
        code: ErrorCode,
        /// The server's message (it names the server).
        message: String,
    },
    /// The server sent bytes that are not the protocol.
    #[error("{server} broke the protocol: {error}")]
    Protocol {
        /// The server.
        server: ServerRef,
        /// What was wrong.
        error: ProtoError,
    },
    /// An argument the client refuses before sending anything.
    #[error("{0}")]
    Invalid(String),
    /// The cluster file cannot be used.
    #[error("cluster file {path}: {reason}")]
    ClusterFile {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// An input file cannot be read or is malformed (names the line).
    #[error("{0}")]
    Input(String),
}

impl ClientError {
    /// The same error, naming server `id` where it only had an address.
    pub(crate) fn with_id(mut self, id: u8) -> Self {
        match &mut self {
            ClientError::Unavailable { server, .. }
            | ClientError::Deadline { server, .. }
            | ClientError::Auth { server, .. }
            | ClientError::Server { server, .. }
            | ClientError::Protocol { server, .. } => {
                server.id.get_or_insert(id);
            }
            _ => {}
        }
        self
    }

    /// The error code, if the server replied with an error.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Server { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// The crate's result.
pub type Result<T, E = ClientError> = std::result::Result<T, E>;
