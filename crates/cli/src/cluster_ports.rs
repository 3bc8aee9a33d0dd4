//! Free loopback ports for `cluster up`'s cluster file (`FreePorts`).

use std::net::{SocketAddr, TcpListener};

use crate::CliResult;

/// Free loopback ports for one cluster file. Each stays bound until every
/// port is chosen, so the operating system cannot hand out the same port
/// twice (a released port may be given again at once); they are released
/// when this is dropped, just before the processes bind them.
///
/// Ports are taken below the kernel's ephemeral range (where outgoing
/// connections get their local ports), from a random start: between the
/// release and a process's bind, an outgoing connection could otherwise be
/// given the chosen port and the process would fail with "address already
/// in use". If none is free there, the kernel picks one.
#[derive(Default)]
pub(crate) struct FreePorts(Vec<TcpListener>);

/// Ports tried below the ephemeral range before the kernel is asked.
const PORT_TRIES: u32 = 64;

impl FreePorts {
    pub(crate) fn next(&mut self) -> CliResult<SocketAddr> {
        let (lo, hi) = below_ephemeral();
        let span = u64::from(hi - lo);
        let start = random_u64() % span;
        for i in 0..u64::from(PORT_TRIES) {
            let port = lo + ((start + i * 7919) % span) as u16;
            if self
                .0
                .iter()
                .any(|l| l.local_addr().is_ok_and(|a| a.port() == port))
            {
                continue;
            }
            if let Ok(l) = TcpListener::bind(("127.0.0.1", port)) {
                let addr = l.local_addr()?;
                self.0.push(l);
                return Ok(addr);
            }
        }
        let l = TcpListener::bind("127.0.0.1:0")?;
        let addr = l.local_addr()?;
        self.0.push(l);
        Ok(addr)
    }
}

/// The ports `[lo, hi)` below the kernel's ephemeral range (Linux's
/// `ip_local_port_range`, 32768 by default): up to 12,768 of them, above 1024.
fn below_ephemeral() -> (u16, u16) {
    let first = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let hi = first.max(2048);
    (hi.saturating_sub(12_768).max(1024), hi)
}

/// A random number from the standard library's per-process hash keys.
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_bound_until_dropped_and_below_the_ephemeral_range() {
        let (lo, hi) = below_ephemeral();
        assert!(1024 <= lo && lo < hi, "{lo}..{hi}");
        let mut p = FreePorts::default();
        let got: Vec<SocketAddr> = (0..16).map(|_| p.next().unwrap()).collect();
        let mut ports: Vec<u16> = got.iter().map(|a| a.port()).collect();
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), 16, "distinct: {got:?}");
        // Bound while held (on a busy machine a port may have come from the
        // kernel's fallback, outside the range, but never twice).
        assert!(TcpListener::bind(got[0]).is_err(), "held until dropped");
        drop(p);
        assert!(TcpListener::bind(got[0]).is_ok(), "released on drop");
        assert!(ports.iter().filter(|&&x| (lo..hi).contains(&x)).count() >= 8);
    }
}
