//! A fabric chosen at run time: [`AnyFabric`] is one of the sibling
//! implementations behind one type, so a program can pick its fabric from a
//! configuration file (`fabric = "local"` or `"tcp"`, see [`FabricKind`])
//! instead of naming it as a type parameter.
//!
//! Every method of [`Fabric`] and [`Port`], including the ones with default
//! implementations, is forwarded to the variant, so each keeps its own fast
//! paths (the in-process fabric's `read`/`cas` on borrowed buffers, its TSC
//! clock in `now_ns`, ...). The cost is one well-predicted branch per call
//! (measured in `benches/fabric.rs`). Decorators wrap it like any fabric:
//! `Counting<AnyFabric>`.
//!
//! The simulated fabric is not a variant: it is for tests, which name it as
//! a type. A new mechanism (RDMA verbs) is one more variant here.

use std::str::FromStr;
use std::time::Duration;

use crate::local::{LocalFabric, LocalPort};
use crate::tcp::{TcpFabric, TcpPort};
use crate::{
    Completion, Fabric, FabricError, Fencing, MachineId, Message, Output, PeerEpoch, Port,
    RegionId, RegionInfo, Result, WorkRequest,
};

/// Which implementation an [`AnyFabric`] is; what a configuration file names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FabricKind {
    /// Every machine in this process ([`crate::local`]), named `"local"`.
    Local,
    /// Machines served by nodes over TCP ([`crate::tcp`]), named `"tcp"`.
    Tcp,
}

impl FabricKind {
    /// Every kind, in the order error messages list them.
    pub const ALL: [FabricKind; 2] = [FabricKind::Local, FabricKind::Tcp];

    /// The name a configuration file uses.
    pub fn name(self) -> &'static str {
        match self {
            FabricKind::Local => "local",
            FabricKind::Tcp => "tcp",
        }
    }
}

impl std::fmt::Display for FabricKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FabricKind {
    type Err = FabricError;

    /// Parses a configuration value: exactly one of the names of [`FabricKind::ALL`].
    fn from_str(s: &str) -> Result<FabricKind> {
        FabricKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let names: Vec<String> = FabricKind::ALL
                    .iter()
                    .map(|k| format!("\"{}\"", k.name()))
                    .collect();
                FabricError::Config(format!(
                    "unknown fabric \"{s}\": the fabrics are {}",
                    names.join(", ")
                ))
            })
    }
}

/// One of the fabric implementations, chosen at run time. Cheap to clone
/// (shared), as its variants are.
#[derive(Debug, Clone)]
pub enum AnyFabric {
    /// The in-process fabric.
    Local(LocalFabric),
    /// One node of a TCP cluster.
    Tcp(TcpFabric),
}

/// The port of an [`AnyFabric`]: the matching variant's port.
pub enum AnyPort {
    /// A port of the in-process fabric.
    Local(LocalPort),
    /// A port of the TCP fabric.
    Tcp(TcpPort),
}

impl AnyFabric {
    /// Which implementation this is.
    pub fn kind(&self) -> FabricKind {
        match self {
            AnyFabric::Local(_) => FabricKind::Local,
            AnyFabric::Tcp(_) => FabricKind::Tcp,
        }
    }
}

impl AnyPort {
    /// Which implementation this port belongs to.
    pub fn kind(&self) -> FabricKind {
        match self {
            AnyPort::Local(_) => FabricKind::Local,
            AnyPort::Tcp(_) => FabricKind::Tcp,
        }
    }
}

impl From<LocalFabric> for AnyFabric {
    fn from(f: LocalFabric) -> Self {
        AnyFabric::Local(f)
    }
}

impl From<TcpFabric> for AnyFabric {
    fn from(f: TcpFabric) -> Self {
        AnyFabric::Tcp(f)
    }
}

impl std::fmt::Debug for AnyPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnyPort")
            .field("kind", &self.kind())
            .field("machine", &self.machine())
            .finish()
    }
}

/// `$body` with `$inner` bound to the variant's value, for every variant of `$ty`.
macro_rules! each {
    ($ty:ident, $value:expr, $inner:ident => $body:expr) => {
        match $value {
            $ty::Local($inner) => $body,
            $ty::Tcp($inner) => $body,
        }
    };
}

impl Fabric for AnyFabric {
    type Port = AnyPort;

    fn machine_count(&self) -> usize {
        each!(AnyFabric, self, f => f.machine_count())
    }

    fn hosts(&self, machine: MachineId) -> bool {
        each!(AnyFabric, self, f => f.hosts(machine))
    }

    fn register(&self, machine: MachineId, name: &str, len_bytes: u64) -> Result<RegionInfo> {
        each!(AnyFabric, self, f => f.register(machine, name, len_bytes))
    }

    fn lookup(&self, machine: MachineId, name: &str) -> Result<RegionInfo> {
        each!(AnyFabric, self, f => f.lookup(machine, name))
    }

    fn wake_on_message(&self, machine: MachineId, waker: std::thread::Thread) -> Result<bool> {
        each!(AnyFabric, self, f => f.wake_on_message(machine, waker))
    }

    fn port(&self, machine: MachineId) -> Result<AnyPort> {
        match self {
            AnyFabric::Local(f) => f.port(machine).map(AnyPort::Local),
            AnyFabric::Tcp(f) => f.port(machine).map(AnyPort::Tcp),
        }
    }
}

impl Fencing for AnyFabric {
    fn own_epoch(&self, me: MachineId) -> Result<u64> {
        each!(AnyFabric, self, f => Fencing::own_epoch(f, me))
    }
    fn set_own_epoch(&self, me: MachineId, epoch: u64) -> Result<()> {
        each!(AnyFabric, self, f => Fencing::set_own_epoch(f, me, epoch))
    }
    fn peer_epoch(&self, me: MachineId, peer: MachineId) -> Result<PeerEpoch> {
        each!(AnyFabric, self, f => Fencing::peer_epoch(f, me, peer))
    }
    fn set_peer_epoch(&self, me: MachineId, peer: MachineId, epoch: u64) -> Result<()> {
        each!(AnyFabric, self, f => Fencing::set_peer_epoch(f, me, peer, epoch))
    }
    fn mark_down(&self, me: MachineId, peer: MachineId, epoch: u64) -> Result<()> {
        each!(AnyFabric, self, f => Fencing::mark_down(f, me, peer, epoch))
    }
    fn fence(&self, me: MachineId) -> Result<()> {
        each!(AnyFabric, self, f => Fencing::fence(f, me))
    }
    fn is_fenced(&self, me: MachineId) -> Result<bool> {
        each!(AnyFabric, self, f => Fencing::is_fenced(f, me))
    }
    fn hold_peers(&self, me: MachineId) -> Result<()> {
        each!(AnyFabric, self, f => Fencing::hold_peers(f, me))
    }
    fn serve_peers(&self, me: MachineId) -> Result<()> {
        each!(AnyFabric, self, f => Fencing::serve_peers(f, me))
    }
}

impl Port for AnyPort {
    #[inline]
    fn machine(&self) -> MachineId {
        each!(AnyPort, self, p => p.machine())
    }

    #[inline]
    fn machine_count(&self) -> usize {
        each!(AnyPort, self, p => p.machine_count())
    }

    #[inline]
    fn post(&mut self, wr: WorkRequest) -> Result<()> {
        each!(AnyPort, self, p => p.post(wr))
    }

    #[inline]
    fn post_many(&mut self, wrs: &mut Vec<WorkRequest>) -> Result<()> {
        each!(AnyPort, self, p => p.post_many(wrs))
    }

    #[inline]
    fn poll(&mut self, out: &mut Vec<Completion>) -> Result<usize> {
        each!(AnyPort, self, p => p.poll(out))
    }

    #[inline]
    fn wait(&mut self, out: &mut Vec<Completion>) -> Result<usize> {
        each!(AnyPort, self, p => p.wait(out))
    }

    #[inline]
    fn inflight(&self) -> usize {
        each!(AnyPort, self, p => p.inflight())
    }

    #[inline]
    fn prefetch(&mut self, wr: &WorkRequest) {
        each!(AnyPort, self, p => p.prefetch(wr))
    }

    #[inline]
    fn execute(&mut self, wr: WorkRequest) -> Result<Output> {
        each!(AnyPort, self, p => p.execute(wr))
    }

    #[inline]
    fn read(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<()> {
        each!(AnyPort, self, p => p.read(target, region, offset, buf))
    }

    #[inline]
    fn read_overlapped(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        buf: &mut [u8],
        meanwhile: &mut dyn FnMut(),
    ) -> Result<()> {
        each!(AnyPort, self, p => p.read_overlapped(target, region, offset, buf, meanwhile))
    }

    #[inline]
    fn read_word(&mut self, target: MachineId, region: RegionId, offset: u64) -> Result<u64> {
        each!(AnyPort, self, p => p.read_word(target, region, offset))
    }

    #[inline]
    fn write(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        data: &[u8],
    ) -> Result<()> {
        each!(AnyPort, self, p => p.write(target, region, offset, data))
    }

    #[inline]
    fn write_word(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        word: u64,
    ) -> Result<()> {
        each!(AnyPort, self, p => p.write_word(target, region, offset, word))
    }

    #[inline]
    fn cas(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        expected: u64,
        new: u64,
    ) -> Result<u64> {
        each!(AnyPort, self, p => p.cas(target, region, offset, expected, new))
    }

    #[inline]
    fn fetch_add(
        &mut self,
        target: MachineId,
        region: RegionId,
        offset: u64,
        add: u64,
    ) -> Result<u64> {
        each!(AnyPort, self, p => p.fetch_add(target, region, offset, add))
    }

    #[inline]
    fn send(&mut self, target: MachineId, payload: &[u8]) -> Result<()> {
        each!(AnyPort, self, p => p.send(target, payload))
    }

    #[inline]
    fn try_recv(&mut self) -> Result<Option<Message>> {
        each!(AnyPort, self, p => p.try_recv())
    }

    #[inline]
    fn check_peer(&self, target: MachineId) -> Result<()> {
        each!(AnyPort, self, p => p.check_peer(target))
    }

    #[inline]
    fn relax(&mut self) {
        each!(AnyPort, self, p => p.relax())
    }

    #[inline]
    fn back_off(&mut self, round: u32) {
        each!(AnyPort, self, p => p.back_off(round))
    }

    #[inline]
    fn now_ns(&self) -> u64 {
        each!(AnyPort, self, p => p.now_ns())
    }

    #[inline]
    fn recv_timeout(&mut self, timeout: Duration) -> Result<Option<Message>> {
        each!(AnyPort, self, p => p.recv_timeout(timeout))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counting::{Counting, Locality};
    use crate::local::LocalConfig;
    use crate::tcp::loopback_cluster;
    use crate::OpKind;

    #[test]
    fn kinds_round_trip_through_their_names() {
        for k in FabricKind::ALL {
            assert_eq!(k.to_string().parse::<FabricKind>(), Ok(k));
        }
        assert_eq!("local".parse::<FabricKind>(), Ok(FabricKind::Local));
        assert_eq!("tcp".parse::<FabricKind>(), Ok(FabricKind::Tcp));
    }

    #[test]
    fn an_unknown_kind_names_the_accepted_ones() {
        for bad in ["rdma", "", "Local", " tcp"] {
            let Err(FabricError::Config(msg)) = bad.parse::<FabricKind>() else {
                panic!("{bad:?} parsed");
            };
            assert!(msg.contains(&format!("\"{bad}\"")), "{msg}");
            assert!(msg.contains("\"local\", \"tcp\""), "{msg}");
        }
    }

    #[test]
    fn each_variant_reports_its_kind() {
        let local = AnyFabric::from(LocalFabric::new(LocalConfig::with_machines(2)).unwrap());
        assert_eq!(local.kind(), FabricKind::Local);
        let p = local.port(1).unwrap();
        assert_eq!(
            (p.kind(), p.machine(), p.machine_count()),
            (FabricKind::Local, 1, 2)
        );

        let tcp = AnyFabric::from(loopback_cluster(1).unwrap().remove(0));
        assert_eq!(tcp.kind(), FabricKind::Tcp);
        assert_eq!(tcp.port(0).unwrap().kind(), FabricKind::Tcp);
        assert!(format!("{:?}", tcp.port(0).unwrap()).contains("Tcp"));
    }

    #[test]
    fn counting_wraps_it_like_any_fabric() {
        let f = Counting::new(AnyFabric::from(
            LocalFabric::new(LocalConfig::with_machines(2).without_model()).unwrap(),
        ));
        let r = f.register(1, "r", 64).unwrap().id;
        let mut p = f.port(0).unwrap();
        p.write_word(1, r, 8, 7).unwrap();
        assert_eq!(p.read_word(1, r, 8).unwrap(), 7);
        let s = f.counters().total();
        assert_eq!(s.ops_of(Locality::Remote, OpKind::Read), 1);
        assert_eq!(s.ops_of(Locality::Remote, OpKind::Write), 1);
        assert_eq!(f.inner().kind(), FabricKind::Local);
    }
}
