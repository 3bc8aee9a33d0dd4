//! `locus analytics serve` (a far-memory server) and `locus analytics
//! profile` (the placement's profile table), beside `analytics.rs`.

use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use locus_analytics::algo::Algo;
use locus_analytics::control;
use locus_fabric::tcp::{TcpConfig, TcpFabric};

use super::{cores, parse_bytes, ProfileArgs, ProfileSize, ServeArgs};
use crate::CliResult;

pub(super) fn serve(a: ServeArgs) -> CliResult {
    use std::io::Write;
    use std::sync::atomic::{AtomicBool, Ordering};
    let memory = parse_bytes("--memory", &a.memory)?;
    let listener =
        TcpListener::bind(&a.listen).map_err(|e| format!("cannot listen on {}: {e}", a.listen))?;
    let addr = listener.local_addr()?;
    // Machine 1 of a two-machine cluster; the client (machine 0) is never called.
    let unused = SocketAddr::from(([127, 0, 0, 1], 9));
    let config = TcpConfig {
        pin_memory: true,
        ..TcpConfig::new(vec![1], vec![unused, addr])
    };
    let fabric = TcpFabric::from_listener(config, listener)?;
    println!("listening on {addr}");
    std::io::stdout().flush()?;
    let stop = AtomicBool::new(false);
    let lifetime = Duration::from_secs(a.lifetime_s);
    std::thread::scope(|s| -> CliResult {
        let daemon = s.spawn(|| locus_analytics::server::serve(&fabric, 1, memory, &stop));
        crate::wait_for_lifetime_or_parent(lifetime);
        stop.store(true, Ordering::Release);
        let r = daemon
            .join()
            .map_err(|_| "the server thread panicked".to_string())?;
        fabric.shutdown();
        Ok(r?)
    })
}

pub(super) fn profile(a: ProfileArgs) -> CliResult {
    let cores = cores();
    let mut threads: Vec<usize> = (1..=cores).collect();
    threads.push(cores * 2);
    let spec = match a.preset {
        ProfileSize::Quick => control::Collect {
            scales: vec![14, 16],
            algos: Algo::ALL.to_vec(),
            threads,
            ratios: vec![0.0, 0.8],
        },
        ProfileSize::Full => control::Collect {
            scales: vec![16, 18, 20],
            algos: Algo::ALL.to_vec(),
            threads,
            ratios: vec![0.0, 0.5, 0.8],
        },
    };
    let table = control::collect(&spec, &mut |r| {
        eprintln!(
            "{:<8} {:>10} edges  {:>2} threads  ratio {:.2}  {:>8.3} s",
            r.algo, r.edges, r.threads, r.far_ratio, r.time_s
        )
    })?;
    table.save(&a.out)?;
    println!("wrote {} ({} rows)", a.out.display(), table.rows.len());
    Ok(())
}
