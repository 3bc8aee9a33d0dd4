//! [`Client`]: a blocking, thread-safe handle on a running cluster. It keeps
//! a small pool of authenticated connections per server, routes requests
//! about a vertex to its home (the owner of its slot in the cluster's slot
//! table, fetched with SLOTS and kept as a hint), gives every request a
//! deadline, and names the server in every error. A server that does not
//! home the vertex answers `WrongHome`; the client then fetches the table
//! again and retries, at most [`ROUTE_RETRIES_MAX`] times per operation,
//! counting each retry ([`Client::routing`]).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use locus_placement::index::{classify, BloomFilter, CountingBloomFilter, GroupState};
use locus_placement::slots::{SlotTable, SLOTS_DEFAULT};

use locus_fabric::auth::{Listener, Secret};

use crate::conn::{is_connection_error, Conn};
use crate::error::{ClientError, Result, ServerRef};
use crate::proto::{ErrorCode, KhopReply, Reply, Request, HOPS_MAX, K_MAX};

/// Client settings.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The cluster secret (`None` only for servers that run without one, in tests).
    pub secret: Option<Secret>,
    /// Deadline of a request unless a call says otherwise.
    pub deadline: Duration,
    /// Longest wait for a connection and its handshake.
    pub connect_timeout: Duration,
    /// Idle connections kept per server.
    pub pool_max_per_server: usize,
    /// Name sent in HELLO (server logs).
    pub name: String,
    /// Send an update of a slot a move has handed to its new home, by the
    /// migration index the old home sends with SLOTS (true); false routes
    /// by the table alone (a baseline: such updates then wait for the
    /// move's commit).
    pub follow_hints: bool,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            secret: None,
            deadline: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(3),
            pool_max_per_server: 8,
            name: format!("locus-client/{}", env!("CARGO_PKG_VERSION")),
            follow_hints: true,
        }
    }
}

/// Where a vertex's value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    /// Its home machine.
    pub home: u8,
    /// The machine holding its value (part 0).
    pub holder: u8,
    /// Whether it has an entry at all.
    pub found: bool,
}

/// What a manual migration did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Moved {
    /// Where part 0 was.
    pub from: u8,
    /// Where it is now.
    pub to: u8,
    /// Values moved (0: it was already there).
    pub parts: u32,
    /// Bytes copied.
    pub bytes: u64,
}

/// Retries of one operation after `WrongHome` answers (each after fetching
/// the slot table again); past them the operation fails with that answer.
/// A retry that finds the table unchanged waits first (a slot move in
/// flight: its old home refuses the slot's updates until the new table is
/// committed), 1 ms doubling to [`ROUTE_BACKOFF_MAX`]: about 0.4 s in all.
pub const ROUTE_RETRIES_MAX: u32 = 10;
/// The longest wait before one retry.
pub const ROUTE_BACKOFF_MAX: Duration = Duration::from_millis(64);

/// How the client has followed the cluster's slot table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Routing {
    /// The epoch of the table held (0: none fetched yet).
    pub table_epoch: u64,
    /// Tables fetched with SLOTS.
    pub table_fetches: u64,
    /// Operations sent again after a `WrongHome` answer.
    pub retries: u64,
    /// Updates sent to a slot's new home by a move's migration index
    /// before the table named it.
    pub hinted: u64,
}

/// Whether `req` updates a vertex (coordinated by its home, so routed by
/// the migration index's write decision).
fn is_update(req: &Request) -> bool {
    matches!(
        req,
        Request::Put { .. }
            | Request::InsertEdge { .. }
            | Request::DeleteEdge { .. }
            | Request::DeleteVertex { .. }
    )
}

/// One move's migration index as a client holds it (a hint: the servers
/// decide, design E1-E6 and V1-V3).
#[derive(Debug, Clone)]
struct Hint {
    from: u8,
    to: u8,
    handed: BloomFilter,
    in_flight: CountingBloomFilter,
}

impl Hint {
    fn decode(h: &crate::proto::MoveHint) -> Option<Hint> {
        Some(Hint {
            from: h.from,
            to: h.to,
            handed: BloomFilter::from_bytes(&h.bf).ok()?,
            in_flight: CountingBloomFilter::from_bytes(&h.cbf).ok()?,
        })
    }
}

/// A running cluster's client.
pub struct Client {
    /// Client addresses by server id: the cluster file's, then those of
    /// servers added later, learned with SERVERS when a slot table names
    /// an owner past them.
    servers: RwLock<Vec<SocketAddr>>,
    /// Idle connections per server id (room for every id).
    pools: Vec<Mutex<Vec<Conn>>>,
    config: ClientConfig,
    /// The slot table as last fetched: a hint the servers check.
    table: RwLock<Option<Arc<SlotTable>>>,
    /// The migration index of each server's leaving moves, as its last
    /// SLOTS reply gave it ([`Hint`]): where updates of a slot it handed go.
    hints: RwLock<Vec<Hint>>,
    table_fetches: AtomicU64,
    retries: AtomicU64,
    /// Updates sent to a new home by a hint.
    hinted: AtomicU64,
    /// Servers listed in the cluster file (a new cluster's homes).
    file_servers: usize,
    /// The cluster's room for servers, as the first HELLO said (0: none yet).
    room: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("servers", &self.addresses())
            .finish()
    }
}

impl Client {
    /// A client of the servers at `servers` (index = machine id). Nothing is
    /// connected until the first call.
    pub fn new(servers: Vec<SocketAddr>, config: ClientConfig) -> Result<Client> {
        if servers.is_empty() || servers.len() > locus_fabric::MACHINES_MAX {
            return Err(ClientError::Invalid(format!(
                "a cluster has 1..=128 servers, not {}",
                servers.len()
            )));
        }
        let file_servers = servers.len();
        Ok(Client {
            pools: (0..locus_fabric::MACHINES_MAX)
                .map(|_| Mutex::new(Vec::new()))
                .collect(),
            servers: RwLock::new(servers),
            config,
            table: RwLock::new(None),
            hints: RwLock::new(Vec::new()),
            hinted: AtomicU64::new(0),
            table_fetches: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            file_servers,
            room: Default::default(),
        })
    }

    /// A client of the cluster described by a cluster file; the secret comes
    /// from `LOCUS_SECRET` or the file.
    pub fn from_file(path: &Path, mut config: ClientConfig) -> Result<Client> {
        let f = crate::file::ClientFile::load(path)?;
        if config.secret.is_none() {
            config.secret = f.secret;
        }
        Client::new(f.servers, config)
    }

    /// Servers the client knows of (ids `0..machines()`): the cluster
    /// file's, and those added since that a slot table named.
    pub fn machines(&self) -> usize {
        self.addresses().len()
    }

    /// The client address of server `id`.
    pub fn address(&self, id: u8) -> Option<SocketAddr> {
        self.addresses().get(id as usize).copied()
    }

    /// The client addresses known, by server id.
    pub fn addresses(&self) -> Vec<SocketAddr> {
        self.servers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Asks server `from` (then the others in turn) which servers it
    /// knows and adds those past the ones known. Returns how many are
    /// known now.
    pub fn learn_servers(&self, from: u8) -> Result<usize> {
        let n = self.machines();
        let mut last = None;
        for i in 0..n {
            let id = ((from as usize + i) % n) as u8;
            let list = match self.call(id, &Request::Servers, None) {
                Ok(Reply::Servers(list)) => list,
                Ok(r) => return Err(self.unexpected(id, r)),
                Err(e) => {
                    last = Some(e);
                    continue;
                }
            };
            let mut held = self.servers.write().unwrap_or_else(|e| e.into_inner());
            for (sid, addr) in list {
                if sid as usize != held.len() {
                    continue; // known already (ids are dense: 0..n)
                }
                let a = addr
                    .parse::<SocketAddr>()
                    .map_err(|e| ClientError::Protocol {
                        server: ServerRef {
                            id: Some(id),
                            addr: held[id as usize],
                        },
                        error: crate::proto::ProtoError::Malformed {
                            op: "servers",
                            what: format!("server {sid}'s address {addr:?}: {e}"),
                        },
                    })?;
                held.push(a);
            }
            return Ok(held.len());
        }
        Err(last.expect("a cluster has at least one server"))
    }

    /// The home machine of `v` by the slot table held, fetched on first
    /// use; if no server answers SLOTS, by a new cluster's table (the
    /// default slot count over the file's servers), which the servers
    /// correct with `WrongHome` where it is wrong.
    pub fn home(&self, v: u32) -> u8 {
        self.home_or_protocol_error(v)
            .unwrap_or_else(|_| self.fallback_home(v))
    }

    /// [`Client::home`], except that a server answering SLOTS with a
    /// malformed table is an error, not a reason to fall back.
    fn home_or_protocol_error(&self, v: u32) -> Result<u8> {
        match self.slot_table() {
            Ok(t) => Ok(t.owner_of(v)),
            Err(e @ ClientError::Protocol { .. }) => Err(e),
            Err(_) => Ok(self.fallback_home(v)),
        }
    }

    /// A new cluster's home of `v`: the default slot count over the file's servers.
    fn fallback_home(&self, v: u32) -> u8 {
        (v % SLOTS_DEFAULT % self.file_servers as u32) as u8
    }

    /// The slot table held, fetched with SLOTS if none is.
    pub fn slot_table(&self) -> Result<Arc<SlotTable>> {
        if let Some(t) = self
            .table
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            return Ok(Arc::clone(t));
        }
        self.refresh_slot_table(0)
    }

    /// Fetches the slot table, asking server `first` and then the others
    /// in turn until one answers; keeps it unless the table held is newer.
    pub fn refresh_slot_table(&self, first: u8) -> Result<Arc<SlotTable>> {
        let n = self.machines();
        // A malformed table from any server wins over unreachable ones: it
        // is the error to report.
        let mut last = None;
        let mut malformed = None;
        for i in 0..n {
            let id = ((first as usize + i) % n) as u8;
            let t = match self.call(id, &Request::Slots, None) {
                Ok(Reply::Slots { table: raw, hints }) => {
                    let t = SlotTable::decode(&raw).map_err(|e| ClientError::Protocol {
                        server: self.server_ref(id),
                        error: crate::proto::ProtoError::Malformed {
                            op: "slots",
                            what: e.to_string(),
                        },
                    })?;
                    // This server's moves, as it sees them now.
                    let mut held = self.hints.write().unwrap_or_else(|e| e.into_inner());
                    held.retain(|h| h.from != id);
                    held.extend(
                        hints
                            .iter()
                            .filter(|h| h.from == id)
                            .filter_map(Hint::decode),
                    );
                    t
                }
                Ok(r) => return Err(self.unexpected(id, r)),
                Err(e @ ClientError::Protocol { .. }) => {
                    malformed = Some(e);
                    continue;
                }
                Err(e) => {
                    last = Some(e);
                    continue;
                }
            };
            if t.owners().iter().any(|&o| o as usize >= n) {
                // The table names a server added after the cluster file
                // was read: learn its address.
                self.learn_servers(id)?;
            }
            if usize::from(t.machines()) < n {
                return Err(ClientError::Unavailable {
                    server: self.server_ref(id),
                    reason: format!(
                        "its slot table has owners below {}, but the cluster file lists {n} servers; the file is stale",
                        t.machines()
                    ),
                });
            }
            self.table_fetches.fetch_add(1, Ordering::Relaxed);
            let mut held = self.table.write().unwrap_or_else(|e| e.into_inner());
            match held.as_ref() {
                Some(h) if h.epoch() >= t.epoch() => {}
                _ => *held = Some(Arc::new(t)),
            }
            return Ok(Arc::clone(held.as_ref().expect("set above")));
        }
        Err(malformed
            .or(last)
            .expect("a cluster has at least one server"))
    }

    /// How the client has followed the slot table so far.
    pub fn routing(&self) -> Routing {
        Routing {
            table_epoch: self
                .table
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .map_or(0, |t| t.epoch()),
            table_fetches: self.table_fetches.load(Ordering::Relaxed),
            retries: self.retries.load(Ordering::Relaxed),
            hinted: self.hinted.load(Ordering::Relaxed),
        }
    }

    /// Sends `req`, about vertex `v`, to `v`'s home; on `WrongHome` fetches
    /// the table again (from the server that refused) and retries, at most
    /// [`ROUTE_RETRIES_MAX`] times. A home that cannot be connected to (it
    /// may have left the cluster: nothing was sent) sends the client to the
    /// other servers for a newer table, and the request goes to the new
    /// home if the table changed; a home that is just down stays an error.
    /// Returns the server that answered.
    fn routed(&self, v: u32, req: &Request) -> Result<(u8, Reply)> {
        let mut retries = 0;
        let hints = self.config.follow_hints;
        let mut by_hint = hints && is_update(req);
        loop {
            let home = self.home_or_protocol_error(v)?;
            let id = match by_hint.then(|| self.hinted_home(v, home)).flatten() {
                Some(to) => {
                    self.hinted.fetch_add(1, Ordering::Relaxed);
                    match self.call(to, req, None) {
                        // A false positive, a hint gone stale (the move
                        // was rolled back), or a new home that is down:
                        // ask the home by the table (which refreshes it).
                        Err(e) if e.code() == Some(ErrorCode::WrongHome) || never_sent(&e) => {
                            self.retries.fetch_add(1, Ordering::Relaxed);
                            by_hint = false;
                            continue;
                        }
                        r => return r.map(|r| (to, r)),
                    }
                }
                None => home,
            };
            match self.call(id, req, None) {
                Err(e) if e.code() == Some(ErrorCode::WrongHome) && retries < ROUTE_RETRIES_MAX => {
                    by_hint = hints && is_update(req);
                    let before = self.routing().table_epoch;
                    retries += 1;
                    self.retries.fetch_add(1, Ordering::Relaxed);
                    if self.refresh_slot_table(id)?.epoch() <= before {
                        let wait = Duration::from_millis(1 << (retries - 1).min(16));
                        std::thread::sleep(wait.min(ROUTE_BACKOFF_MAX));
                    }
                }
                Err(e) if never_sent(&e) && retries < ROUTE_RETRIES_MAX => {
                    let before = self.routing().table_epoch;
                    let n = self.machines() as u8;
                    match self.refresh_slot_table((id + 1) % n.max(1)) {
                        Ok(t) if t.epoch() > before && t.owner_of(v) != id => {
                            retries += 1;
                            self.retries.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => return Err(e),
                    }
                }
                r => return r.map(|r| (id, r)),
            }
        }
    }

    /// Where an update of `v` goes by the migration index of `home`'s
    /// moves, if not to `home`: the new home of a slot handed to it (S3, or
    /// S4 where the filters cannot tell). NetMigrate Fig. 3 sends S2 writes
    /// to the destination too, which pulls what it lacks (PriorityPull);
    /// here a new home serves a slot only once it is handed, so S2 writes
    /// stay with the old home, which refuses them until then.
    fn hinted_home(&self, v: u32, home: u8) -> Option<u8> {
        let slot = self.slot_table().ok()?.slot_of(v);
        let hints = self.hints.read().unwrap_or_else(|e| e.into_inner());
        hints.iter().filter(|h| h.from == home).find_map(|h| {
            let state = classify(h.handed.contains(slot), h.in_flight.contains(slot));
            matches!(state, GroupState::Migrated | GroupState::Conflict).then_some(h.to)
        })
    }

    fn server_ref(&self, id: u8) -> ServerRef {
        ServerRef {
            id: Some(id),
            addr: self.address(id).unwrap_or(locus_fabric::tcp::UNASSIGNED),
        }
    }

    fn connect(&self, id: u8) -> Result<Conn> {
        let addr = self.address(id).expect("checked by call");
        let c = Conn::connect(
            addr,
            self.config.secret.as_ref(),
            Listener::Client,
            &self.config.name,
            self.config.connect_timeout,
        )
        .map_err(|e| e.with_id(id))?;
        let h = c.hello();
        // HELLO's machine count is the cluster's room for servers: at
        // least the servers known, the same at every server.
        let known = self.machines();
        let room = self
            .room
            .compare_exchange(0, h.machines as usize, Ordering::Relaxed, Ordering::Relaxed)
            .unwrap_or_else(|held| held);
        let room = if room == 0 { h.machines as usize } else { room };
        if h.server_id != id || (h.machines as usize) < known || h.machines as usize != room {
            return Err(ClientError::Unavailable {
                server: self.server_ref(id),
                reason: format!(
                    "it says it is server {} of a cluster of {} machines, but the client knows it as server {id} of {known} (room for {room}); the cluster file is stale",
                    h.server_id,
                    h.machines,
                ),
            });
        }
        Ok(c)
    }

    /// Sends `req` to server `id` and returns its reply. A pooled connection
    /// that turns out to be dead is replaced once, for requests that are safe
    /// to repeat.
    pub fn call(&self, id: u8, req: &Request, deadline: Option<Duration>) -> Result<Reply> {
        if id as usize >= self.machines() {
            return Err(ClientError::Invalid(format!(
                "server {id} is not in the cluster (servers 0..{})",
                self.machines()
            )));
        }
        let deadline = deadline.unwrap_or(self.config.deadline);
        let pooled = self.pools[id as usize]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .filter(|c| !c.peer_closed());
        let (mut conn, was_pooled) = match pooled {
            Some(c) => (c, true),
            None => (self.connect(id)?, false),
        };
        let mut r = conn.call(req, deadline);
        if was_pooled && idempotent(req) && matches!(&r, Err(e) if is_connection_error(e)) {
            conn = self.connect(id)?;
            r = conn.call(req, deadline);
        }
        // Keep the connection only if it is in a known state: a reply (or an
        // error reply) was read whole.
        if matches!(&r, Ok(_) | Err(ClientError::Server { .. })) {
            let mut pool = self.pools[id as usize]
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if pool.len() < self.config.pool_max_per_server {
                pool.push(conn);
            }
        }
        r
    }

    pub(crate) fn unexpected(&self, id: u8, r: Reply) -> ClientError {
        ClientError::Protocol {
            server: self.server_ref(id),
            error: crate::proto::ProtoError::Malformed {
                op: "reply",
                what: format!("unexpected reply {r:?}"),
            },
        }
    }

    /// Checks that server `id` answers.
    pub fn ping(&self, id: u8) -> Result<()> {
        match self.call(id, &Request::Ping, None)? {
            Reply::Pong => Ok(()),
            r => Err(self.unexpected(id, r)),
        }
    }

    /// Up to `k` neighbours of `v` (0: all), asked of its home.
    pub fn neighbors(&self, v: u32, k: u32) -> Result<Vec<u32>> {
        match self.routed(v, &Request::Neighbors { vertex: v, k })? {
            (_, Reply::Neighbors(ids)) => Ok(ids),
            (id, r) => Err(self.unexpected(id, r)),
        }
    }

    /// The whole lists of `vertices` (`None`: no entry), in their order,
    /// read by server `id` with its reads posted together (any server reads
    /// any key), one LISTS request per [`crate::proto::LISTS_VERTICES_MAX`].
    pub fn lists(&self, id: u8, vertices: &[u32]) -> Result<Vec<Option<Vec<u32>>>> {
        let mut out = Vec::with_capacity(vertices.len());
        for chunk in vertices.chunks(crate::proto::LISTS_VERTICES_MAX) {
            let req = Request::Lists {
                vertices: chunk.to_vec(),
            };
            match self.call(id, &req, None)? {
                r @ Reply::Lists { .. } if matches!(&r, Reply::Lists { lens, .. } if lens.len() == chunk.len()) => {
                    out.extend(
                        r.lists()
                            .expect("a LISTS reply")
                            .into_iter()
                            .map(|l| l.map(<[u32]>::to_vec)),
                    )
                }
                r => return Err(self.unexpected(id, r)),
            }
        }
        Ok(out)
    }

    /// Replaces `v`'s adjacency list.
    pub fn put(&self, v: u32, ids: &[u32]) -> Result<()> {
        if ids.len() > crate::proto::IDS_MAX {
            return Err(ClientError::Invalid(format!(
                "a list of {} neighbours is past the protocol's {} per request",
                ids.len(),
                crate::proto::IDS_MAX
            )));
        }
        let req = Request::Put {
            vertex: v,
            ids: ids.to_vec(),
        };
        match self.routed(v, &req)? {
            (_, Reply::Put) => Ok(()),
            (id, r) => Err(self.unexpected(id, r)),
        }
    }

    /// Adds the edge `v -> u`; true if the list changed.
    pub fn insert_edge(&self, v: u32, u: u32) -> Result<bool> {
        let req = Request::InsertEdge {
            vertex: v,
            neighbor: u,
        };
        match self.routed(v, &req)? {
            (_, Reply::Changed(c)) => Ok(c),
            (id, r) => Err(self.unexpected(id, r)),
        }
    }

    /// Removes the edge `v -> u`; true if the list changed.
    pub fn delete_edge(&self, v: u32, u: u32) -> Result<bool> {
        let req = Request::DeleteEdge {
            vertex: v,
            neighbor: u,
        };
        match self.routed(v, &req)? {
            (_, Reply::Changed(c)) => Ok(c),
            (id, r) => Err(self.unexpected(id, r)),
        }
    }

    /// Removes vertex `v` (its whole list), asked of its home; returns the
    /// list it had, or `None` if it had no entry. Edges of other vertices
    /// that point at `v` stay: see [`Client::delete_vertex_both`].
    pub fn delete_vertex(&self, v: u32) -> Result<Option<Vec<u32>>> {
        match self.routed(v, &Request::DeleteVertex { vertex: v })? {
            (_, Reply::Removed(list)) => Ok(list),
            (id, r) => Err(self.unexpected(id, r)),
        }
    }

    /// Removes vertex `v` of a graph that stores both directions of every
    /// edge: first `u -> v` from each neighbour `u` (at `u`'s home), then
    /// `v` itself, then `u -> v` for any neighbour an update added
    /// meanwhile. Interrupted, it can be run again: until `v` is gone its
    /// list still names the neighbours left to clean. Returns the list `v`
    /// had (`None`: no entry) and how many reverse edges were removed.
    pub fn delete_vertex_both(&self, v: u32) -> Result<(Option<Vec<u32>>, u64)> {
        let mut removed = 0u64;
        let first = match self.neighbors(v, 0) {
            Ok(l) => l,
            Err(e) if e.code() == Some(ErrorCode::UnknownVertex) => Vec::new(),
            Err(e) => return Err(e),
        };
        for &u in &first {
            removed += self.delete_edge(u, v)? as u64;
        }
        let list = self.delete_vertex(v)?;
        for &u in list.iter().flatten().filter(|u| !first.contains(u)) {
            removed += self.delete_edge(u, v)? as u64;
        }
        Ok((list, removed))
    }

    /// A k-hop traversal from `v`, run at its home.
    pub fn khop(&self, v: u32, hops: u8, k: u32) -> Result<KhopReply> {
        if hops == 0 || hops > HOPS_MAX || k == 0 || k > K_MAX {
            return Err(ClientError::Invalid(format!(
                "hops = {hops}, k = {k}: hops must be 1..={HOPS_MAX} and k 1..={K_MAX}"
            )));
        }
        match self.routed(v, &Request::Khop { vertex: v, hops, k })? {
            (_, Reply::Khop(r)) => Ok(r),
            (id, r) => Err(self.unexpected(id, r)),
        }
    }

    /// Where `v`'s value is.
    pub fn locate(&self, v: u32) -> Result<Location> {
        match self.routed(v, &Request::Where { vertex: v })? {
            (
                _,
                Reply::Where {
                    home,
                    holder,
                    found,
                },
            ) => Ok(Location {
                home,
                holder,
                found,
            }),
            (id, r) => Err(self.unexpected(id, r)),
        }
    }

    /// Moves `v`'s value to machine `to` (which runs the migration, Pragh 4.1).
    pub fn migrate(&self, v: u32, to: u8) -> Result<Moved> {
        match self.call(to, &Request::Migrate { vertex: v }, None)? {
            Reply::Migrate {
                from,
                to,
                parts,
                bytes,
            } => Ok(Moved {
                from,
                to,
                parts,
                bytes,
            }),
            r => Err(self.unexpected(to, r)),
        }
    }

    /// Server `id`'s statistics (docs/protocol.md section 6).
    pub fn stats(&self, id: u8) -> Result<serde_json::Value> {
        match self.call(id, &Request::Stats, None)? {
            Reply::Stats(json) => serde_json::from_str(&json).map_err(|e| ClientError::Protocol {
                server: self.server_ref(id),
                error: crate::proto::ProtoError::Malformed {
                    op: "stats",
                    what: format!("not JSON: {e}"),
                },
            }),
            r => Err(self.unexpected(id, r)),
        }
    }

    /// Applies one LOAD batch at server `id` (every vertex must be homed
    /// there); returns (vertices changed, edges added).
    pub fn load_batch(
        &self,
        id: u8,
        vertices: Vec<(u32, Vec<u32>)>,
        deadline: Option<Duration>,
    ) -> Result<(u32, u64)> {
        self.load_batch_changed(id, vertices, deadline)
            .map(|(v, e, _)| (v, e))
    }

    /// [`Client::load_batch`], also returning, per vertex entry of the
    /// batch in its order, whether that vertex's list changed.
    pub fn load_batch_changed(
        &self,
        id: u8,
        vertices: Vec<(u32, Vec<u32>)>,
        deadline: Option<Duration>,
    ) -> Result<(u32, u64, Vec<bool>)> {
        let n = vertices.len();
        match self.call(id, &Request::Load { vertices }, deadline)? {
            Reply::Load {
                vertices,
                edges_added,
                changed,
            } if changed.len() == n => Ok((vertices, edges_added, changed)),
            r => Err(self.unexpected(id, r)),
        }
    }
}

/// Requests that may be sent twice without changing the result.
fn idempotent(req: &Request) -> bool {
    matches!(
        req,
        Request::Ping
            | Request::Neighbors { .. }
            | Request::Khop { .. }
            | Request::Where { .. }
            | Request::Stats
            | Request::Put { .. }
    )
}

/// Whether `e` is a failure to connect, before anything was sent.
fn never_sent(e: &ClientError) -> bool {
    matches!(e, ClientError::Unavailable { reason, .. } if reason.starts_with(crate::conn::CANNOT_CONNECT))
}
