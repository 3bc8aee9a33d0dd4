//! Helpers shared by the server's integration tests.

use std::collections::BTreeSet;
use std::net::{SocketAddr, TcpListener};
use std::sync::Mutex;

/// A loopback address with a port the system had free, never one this
/// process was handed before: a listener bound to port 0 is dropped at once,
/// so without the check two calls could return the same port and a cluster
/// file would name it twice (seen once in CI: a server's fabric and another
/// server's client address on one port).
pub fn free() -> SocketAddr {
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    loop {
        let a = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        if GIVEN
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(a.port())
        {
            return a;
        }
    }
}
