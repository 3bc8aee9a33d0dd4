//! The far-memory server (Fargraph+ 4, 8.2: the daemon on the passive side)
//! and its control protocol.
//!
//! Control is kept apart from bulk data (Fargraph+ 6.3): a client asks for
//! memory with a small two-sided message on a **control port** and reads the
//! answer with one-sided READs of the server's control region; edge data then
//! moves only by one-sided READs and WRITEs on the engine threads' own ports,
//! which never carry a control message. The server's threads never touch bulk
//! data (over TCP the fabric's service threads execute the one-sided verbs).
//!
//! ```text
//!  ALLOC  (client -> server, SEND, 24 bytes):  | op=1 u8 | 0 x7 | seq u64 LE | bytes u64 LE |
//!  FREE   (client -> server, SEND, 24 bytes):  | op=2 u8 | 0 x7 | seq u64 LE | region u64 LE |
//!  answer (server's region "fargraph-control", words written before `seq`, which is written last):
//!     word 0 seq | 1 status | 2 region id | 3 region bytes | 4 bytes in use | 5 limit bytes
//!     status 0 ok, 1 over the server's memory limit, 2 bad request, 3 fabric error
//! ```
//!
//! Regions cannot be unregistered, so a FREEd region is kept and handed to a
//! later ALLOC that fits in it; the server registers a new one only when none
//! fits and its limit allows. One client at a time is expected: two clients
//! sending concurrently may each read the other's answer and time out.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use locus_fabric::{Fabric, FabricError, MachineId, Port, RegionId};

use crate::error::{AnalyticsError, Result};

/// Name of the server's control region.
pub const CONTROL_REGION: &str = "fargraph-control";
/// Bytes of the control region (8 words).
const CONTROL_BYTES: u64 = 64;
/// Longest a client waits for an answer.
pub const ANSWER_TIMEOUT_MS: u64 = 10_000;
/// Most region names a server tries.
const NAMES_MAX: u64 = 1 << 16;
/// How long the server sleeps between empty inbox polls.
const POLL_SLEEP_US: u64 = 200;

const OP_ALLOC: u8 = 1;
const OP_FREE: u8 = 2;
const STATUS_OK: u64 = 0;
const STATUS_FULL: u64 = 1;
const STATUS_BAD: u64 = 2;
const STATUS_FABRIC: u64 = 3;

fn encode(op: u8, seq: u64, arg: u64) -> [u8; 24] {
    let mut m = [0u8; 24];
    m[0] = op;
    m[8..16].copy_from_slice(&seq.to_le_bytes());
    m[16..24].copy_from_slice(&arg.to_le_bytes());
    m
}

/// A region lent by the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The region on the server's machine.
    pub region: RegionId,
    /// Its size (at least what was asked).
    pub len_bytes: u64,
}

/// Serves `machine`'s memory to far-memory clients until `stop` is set:
/// registers the control region (if absent), then answers ALLOC and FREE
/// messages. At most `memory_bytes_max` bytes of regions are registered.
pub fn serve<F: Fabric>(
    fabric: &F,
    machine: MachineId,
    memory_bytes_max: u64,
    stop: &AtomicBool,
) -> Result<()> {
    let control = match fabric.lookup(machine, CONTROL_REGION) {
        Ok(info) => info.id,
        Err(_) => fabric.register(machine, CONTROL_REGION, CONTROL_BYTES)?.id,
    };
    let mut port = fabric.port(machine)?;
    // (region, bytes, free): every region this server registered.
    let mut regions: Vec<(RegionId, u64, bool)> = Vec::new();
    let mut used: u64 = 0;
    let mut serial = 0u64;
    while !stop.load(Ordering::Acquire) {
        let Some(msg) = port.try_recv()? else {
            std::thread::sleep(Duration::from_micros(POLL_SLEEP_US));
            continue;
        };
        let p = &msg.payload;
        if p.len() != 24 {
            continue; // not ours: a control message is exactly 24 bytes
        }
        let seq = u64::from_le_bytes(p[8..16].try_into().expect("8 bytes"));
        let arg = u64::from_le_bytes(p[16..24].try_into().expect("8 bytes"));
        let answer: [u64; 5] = match p[0] {
            OP_ALLOC => {
                let bytes = arg.max(8).next_multiple_of(8);
                let fit = regions
                    .iter_mut()
                    .filter(|r| r.2 && r.1 >= bytes)
                    .min_by_key(|r| r.1);
                if let Some(r) = fit {
                    r.2 = false;
                    [STATUS_OK, u64::from(r.0 .0), r.1, used, memory_bytes_max]
                } else if used + bytes > memory_bytes_max {
                    [STATUS_FULL, 0, 0, used, memory_bytes_max]
                } else {
                    // Names may be taken by an earlier server on this machine: skip them.
                    let registered = loop {
                        serial += 1;
                        match fabric.register(machine, &format!("fargraph-{serial}"), bytes) {
                            Err(FabricError::DuplicateRegion { .. }) if serial < NAMES_MAX => {}
                            other => break other,
                        }
                    };
                    match registered {
                        Ok(info) => {
                            used += bytes;
                            regions.push((info.id, bytes, false));
                            [
                                STATUS_OK,
                                u64::from(info.id.0),
                                bytes,
                                used,
                                memory_bytes_max,
                            ]
                        }
                        Err(_) => [STATUS_FABRIC, 0, 0, used, memory_bytes_max],
                    }
                }
            }
            OP_FREE => {
                if let Some(r) = regions.iter_mut().find(|r| u64::from(r.0 .0) == arg) {
                    r.2 = true;
                }
                continue; // FREE is not answered
            }
            _ => [STATUS_BAD, 0, 0, used, memory_bytes_max],
        };
        let mut words = Vec::with_capacity(40);
        for w in answer {
            words.extend_from_slice(&w.to_le_bytes());
        }
        port.write(machine, control, 8, &words)?;
        // Published last: a reader that sees `seq` sees the answer (release/acquire).
        port.write_word(machine, control, 0, seq)?;
    }
    Ok(())
}

/// A client's control connection to a far-memory server.
pub struct Control<P: Port> {
    port: P,
    server: MachineId,
    control: RegionId,
}

impl<P: Port> Control<P> {
    /// Opens the control port (acting as `client`) and finds the server's
    /// control region, waiting up to [`ANSWER_TIMEOUT_MS`] for it to appear.
    pub fn connect<F: Fabric<Port = P>>(
        fabric: &F,
        client: MachineId,
        server: MachineId,
    ) -> Result<Control<P>> {
        Control::connect_within(fabric, client, server, ANSWER_TIMEOUT_MS)
    }

    /// [`Control::connect`], waiting at most `timeout_ms` for the server.
    pub fn connect_within<F: Fabric<Port = P>>(
        fabric: &F,
        client: MachineId,
        server: MachineId,
        timeout_ms: u64,
    ) -> Result<Control<P>> {
        let deadline = Instant::now() + Duration::from_millis(timeout_ms);
        let control = loop {
            match fabric.lookup(server, CONTROL_REGION) {
                Ok(info) => break info.id,
                Err(FabricError::NoSuchRegion { .. }) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(FabricError::NoSuchRegion { .. }) => {
                    return Err(AnalyticsError::Server {
                        machine: server,
                        reason: format!(
                        "no region '{CONTROL_REGION}' after {timeout_ms} ms: is it a far-memory \
                             server? start one with `locus analytics serve`"
                    ),
                    })
                }
                Err(e) => return Err(e.into()),
            }
        };
        Ok(Control {
            port: fabric.port(client)?,
            server,
            control,
        })
    }

    /// Borrows a region of at least `bytes` from the server.
    pub fn alloc(&mut self, bytes: u64) -> Result<Lease> {
        let seq = unique_seq();
        self.port.send(self.server, &encode(OP_ALLOC, seq, bytes))?;
        let deadline = Instant::now() + Duration::from_millis(ANSWER_TIMEOUT_MS);
        let mut buf = [0u8; 48];
        loop {
            self.port.read(self.server, self.control, 0, &mut buf)?;
            let w = |k: usize| u64::from_le_bytes(buf[k * 8..k * 8 + 8].try_into().expect("8"));
            if w(0) == seq {
                let (status, used, limit) = (w(1), w(4), w(5));
                return match status {
                    STATUS_OK => Ok(Lease {
                        region: RegionId(w(2) as u16),
                        len_bytes: w(3),
                    }),
                    STATUS_FULL => Err(AnalyticsError::Server {
                        machine: self.server,
                        reason: format!(
                            "{bytes} more bytes would exceed its memory limit ({used} of {limit} \
                             bytes in use): restart it with a larger --memory"
                        ),
                    }),
                    _ => Err(AnalyticsError::Server {
                        machine: self.server,
                        reason: format!("it could not register {bytes} bytes (status {status})"),
                    }),
                };
            }
            if Instant::now() >= deadline {
                return Err(AnalyticsError::Server {
                    machine: self.server,
                    reason: format!(
                        "no answer to an allocation of {bytes} bytes within {ANSWER_TIMEOUT_MS} ms"
                    ),
                });
            }
            std::thread::sleep(Duration::from_micros(POLL_SLEEP_US));
        }
    }

    /// Returns a region to the server (best effort: no answer).
    pub fn free(&mut self, lease: Lease) -> Result<()> {
        self.port.send(
            self.server,
            &encode(OP_FREE, unique_seq(), u64::from(lease.region.0)),
        )?;
        Ok(())
    }
}

/// A request number unlikely to repeat across clients and runs (never 0, the
/// control region's initial value).
fn unique_seq() -> u64 {
    use std::sync::atomic::AtomicU64;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mixed = (u64::from(std::process::id()) << 40)
        ^ nanos
        ^ (NEXT.fetch_add(1, Ordering::Relaxed) << 20);
    mixed | 1
}

/// Runs `body` while a server for `server` runs on a scoped thread of this
/// process (when this process hosts that machine; otherwise `body` alone).
pub fn with_server<F: Fabric, R>(
    fabric: &F,
    server: MachineId,
    memory_bytes_max: u64,
    body: impl FnOnce() -> Result<R>,
) -> Result<R> {
    if !fabric.hosts(server) {
        return body();
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let daemon = s.spawn(|| serve(fabric, server, memory_bytes_max, &stop));
        let r = body();
        stop.store(true, Ordering::Release);
        let served = daemon
            .join()
            .map_err(|_| AnalyticsError::WorkerPanicked("the far-memory server".into()))?;
        served?;
        r
    })
}
