//! Choosing a lab's /24: one of 10.213.X.0/24 that no route of this machine
//! overlaps. Pure functions over `ip -4 route show table all`; the claim
//! itself (creating the interface `locusX`, which fails if another lab
//! holds X) is in `lab.rs`.

use std::net::Ipv4Addr;

/// The first two octets of every lab's addresses.
pub(crate) const LAB_NET: [u8; 2] = [10, 213];

/// A route's destination, `addr/len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Prefix {
    pub(crate) addr: Ipv4Addr,
    pub(crate) len: u8,
}

impl Prefix {
    fn mask(len: u8) -> u32 {
        if len == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(len))
        }
    }

    /// Whether the two share an address.
    pub(crate) fn overlaps(self, other: Prefix) -> bool {
        let mask = Self::mask(self.len.min(other.len));
        u32::from(self.addr) & mask == u32::from(other.addr) & mask
    }

    /// `a.b.c.d` (a /32) or `a.b.c.d/len`.
    fn parse(text: &str) -> Option<Prefix> {
        let (addr, len) = match text.split_once('/') {
            Some((addr, len)) => (addr, len.parse().ok()?),
            None => (text, 32),
        };
        (len <= 32).then_some(Prefix {
            addr: addr.parse().ok()?,
            len,
        })
    }
}

/// The /24 of candidate `x`: 10.213.x.0/24.
pub(crate) fn candidate(x: u8) -> Prefix {
    Prefix {
        addr: Ipv4Addr::new(LAB_NET[0], LAB_NET[1], x, 0),
        len: 24,
    }
}

/// Route types `ip route` prints before a destination.
const ROUTE_TYPES: [&str; 10] = [
    "unicast",
    "local",
    "broadcast",
    "multicast",
    "anycast",
    "unreachable",
    "blackhole",
    "prohibit",
    "throw",
    "nat",
];

/// The destinations of `ip -4 route show table all`, the default route left
/// out (a lab's /24 is more specific than it, so it takes nothing from it).
pub(crate) fn route_destinations(routes: &str) -> Vec<Prefix> {
    routes
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let mut first = words.next()?;
            if ROUTE_TYPES.contains(&first) {
                first = words.next()?;
            }
            Prefix::parse(first)
        })
        .collect()
}

/// The candidates no route overlaps, in order, and how many were left out.
pub(crate) fn free_candidates(routes: &str) -> (Vec<u8>, usize) {
    let taken = route_destinations(routes);
    let (free, overlapping): (Vec<u8>, Vec<u8>) =
        (0..=u8::MAX).partition(|&x| !taken.iter().any(|route| route.overlaps(candidate(x))));
    (free, overlapping.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROUTES: &str = "\
default via 192.0.2.1 dev eth0
10.213.4.0/24 dev locus4 proto kernel scope link src 10.213.4.1
10.213.8.0/22 via 192.0.2.9 dev eth0
192.0.2.0/24 dev eth0 proto kernel scope link src 192.0.2.2
local 10.213.4.1 dev locus4 table local proto kernel scope host src 10.213.4.1
broadcast 10.213.4.255 dev locus4 table local proto kernel scope link src 10.213.4.1
blackhole 10.213.200.7
local 127.0.0.0/8 dev lo table local proto kernel scope host src 127.0.0.1
";

    #[test]
    fn routes_overlapping_a_candidate_take_it_and_the_default_route_takes_none() {
        let (free, overlapping) = free_candidates(ROUTES);
        for x in [4, 8, 9, 10, 11, 200] {
            assert!(!free.contains(&x), "10.213.{x}.0/24 overlaps a route");
        }
        assert_eq!(overlapping, 6);
        assert_eq!(free.len(), 256 - 6);
        assert_eq!(free[..5], [0, 1, 2, 3, 5]);
    }

    #[test]
    fn a_wide_route_takes_every_candidate() {
        let (free, overlapping) = free_candidates("10.0.0.0/8 dev tun0 scope link\n");
        assert!(free.is_empty());
        assert_eq!(overlapping, 256);
    }

    #[test]
    fn overlap_is_by_the_shorter_prefix() {
        let p = |s| Prefix::parse(s).expect("prefix");
        assert!(p("10.213.0.0/16").overlaps(p("10.213.77.0/24")));
        assert!(p("10.213.77.5").overlaps(p("10.213.77.0/24")));
        assert!(!p("10.213.78.0/24").overlaps(p("10.213.77.0/24")));
        assert!(p("0.0.0.0/0").overlaps(p("10.213.77.0/24")));
        assert_eq!(Prefix::parse("10.0.0.0/33"), None);
        assert_eq!(Prefix::parse("default"), None);
    }
}
