//! `locus serve`: a memory node of the TCP fabric in its own process, hosting
//! one machine's named regions until its lifetime ends or its standard input
//! closes. `bench foundation` measures against it.

use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use clap::Args;
use locus_fabric::tcp::{TcpConfig, TcpFabric};
use locus_fabric::Fabric;

use crate::CliResult;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on (loopback by default; port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: String,
    /// Machines in the cluster.
    #[arg(long, default_value_t = 2)]
    pub machines: usize,
    /// The machine this process hosts.
    #[arg(long, default_value_t = 1)]
    pub machine: u8,
    /// A region to register, as NAME:BYTES (repeatable).
    #[arg(long = "region", value_name = "NAME:BYTES")]
    pub regions: Vec<String>,
    /// Exit after this many seconds (every server here stops by itself).
    #[arg(long, default_value_t = 600)]
    pub lifetime_s: u64,
}

/// Parses `NAME:BYTES` (BYTES may end in K, M or G).
fn parse_region(spec: &str) -> Result<(String, u64), String> {
    let (name, size) = spec
        .split_once(':')
        .ok_or_else(|| format!("--region {spec}: expected NAME:BYTES, e.g. bench:1M"))?;
    let (digits, mult) = match size.chars().last() {
        Some('K' | 'k') => (&size[..size.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&size[..size.len() - 1], 1 << 20),
        Some('G' | 'g') => (&size[..size.len() - 1], 1 << 30),
        _ => (size, 1),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("--region {spec}: '{size}' is not a byte count"))?;
    Ok((name.to_string(), n * mult))
}

/// Placeholder address for machines a node never talks to.
fn unused_peer() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 9))
}

pub fn serve(a: ServeArgs) -> CliResult {
    if a.machines < 2 || a.machines > locus_fabric::MACHINES_MAX {
        return Err(format!("--machines {} must be 2..=128", a.machines).into());
    }
    if a.machine as usize >= a.machines {
        return Err(format!(
            "--machine {} is not below --machines {}",
            a.machine, a.machines
        )
        .into());
    }
    let listener =
        TcpListener::bind(&a.listen).map_err(|e| format!("cannot listen on {}: {e}", a.listen))?;
    let addr = listener.local_addr()?;
    let mut peers = vec![unused_peer(); a.machines];
    peers[a.machine as usize] = addr;
    let fabric = TcpFabric::from_listener(TcpConfig::new(vec![a.machine], peers), listener)?;
    for spec in &a.regions {
        let (name, bytes) = parse_region(spec)?;
        fabric.register(a.machine, &name, bytes)?;
    }
    println!("listening on {addr}");
    std::io::stdout().flush()?;
    crate::wait_for_lifetime_or_parent(Duration::from_secs(a.lifetime_s));
    fabric.shutdown();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_region;

    #[test]
    fn region_specs() {
        assert_eq!(parse_region("a:1M").unwrap(), ("a".to_string(), 1 << 20));
        assert_eq!(parse_region("b:4096").unwrap(), ("b".to_string(), 4096));
        assert!(parse_region("c").is_err());
        assert!(parse_region("c:x").is_err());
    }
}
