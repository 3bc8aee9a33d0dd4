//! [`Membership`]: the connection to etcd, its runtime, and registration.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, ConnectOptions, GetOptions, PutOptions, Txn, TxnOp};
use tokio::runtime::Runtime;

use crate::error::{MembershipError, Result};
use crate::lease::{Lease, Registration};

/// Longest any single etcd request may take before it is an error.
pub(crate) const OP_TIMEOUT: Duration = Duration::from_secs(5);

/// How to reach etcd and where Locus's keys live (the cluster file's `[etcd]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdConfig {
    /// Client endpoints, `http://HOST:PORT`.
    pub endpoints: Vec<String>,
    /// Prefix of every key, e.g. `/locus` (one etcd can hold several clusters).
    pub prefix: String,
    /// Lease time-to-live in seconds: how long a member that stops renewing
    /// stays registered, so the bound on failure detection.
    pub lease_ttl_s: u64,
}

impl EtcdConfig {
    /// Rejects settings that cannot work, naming the key.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(MembershipError::Config(m));
        if self.endpoints.is_empty() {
            return bad(
                "endpoints is empty: give at least one, e.g. [\"http://127.0.0.1:2379\"]".into(),
            );
        }
        for e in &self.endpoints {
            if !(e.starts_with("http://") || e.starts_with("https://")) || e.len() < 10 {
                return bad(format!(
                    "endpoints: {e:?} is not a URL like \"http://127.0.0.1:2379\""
                ));
            }
        }
        if !self.prefix.starts_with('/') || self.prefix.ends_with('/') || self.prefix.len() < 2 {
            return bad(format!(
                "prefix = {:?}: it must start with '/' and not end with one, e.g. \"/locus\"",
                self.prefix
            ));
        }
        if !(1..=600).contains(&self.lease_ttl_s) {
            return bad(format!(
                "lease_ttl_s = {} but must be 1..=600 (seconds)",
                self.lease_ttl_s
            ));
        }
        Ok(())
    }
}

/// One live incarnation of a machine, as registered in etcd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The machine.
    pub machine: u8,
    /// Its epoch (>= 1).
    pub epoch: u64,
    /// What it registered with (its addresses, free text).
    pub info: String,
}

/// A connection to etcd with its own small runtime. Cheap to clone.
#[derive(Clone)]
pub struct Membership {
    pub(crate) rt: Arc<Runtime>,
    pub(crate) client: Client,
    pub(crate) cfg: EtcdConfig,
}

impl std::fmt::Debug for Membership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Membership")
            .field("cfg", &self.cfg)
            .finish()
    }
}

impl Membership {
    /// Connects (at most 5 s per attempt) after validating `cfg`.
    pub fn connect(cfg: &EtcdConfig) -> Result<Membership> {
        cfg.validate()?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("locus-etcd")
            .enable_all()
            .build()
            .map_err(|e| MembershipError::Process(format!("cannot start the etcd runtime: {e}")))?;
        let endpoints = cfg.endpoints.join(",");
        let opts = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(2))
            .with_keep_alive(Duration::from_secs(1), Duration::from_secs(2));
        let client = rt
            .block_on(async {
                let mut c = tokio::time::timeout(
                    OP_TIMEOUT,
                    Client::connect(cfg.endpoints.clone(), Some(opts)),
                )
                .await
                .map_err(|_| "no answer within 5 s".to_string())?
                .map_err(|e| e.to_string())?;
                // The channel connects lazily: ask once, so a wrong endpoint fails here.
                tokio::time::timeout(OP_TIMEOUT, c.status())
                    .await
                    .map_err(|_| "no answer within 5 s".to_string())?
                    .map_err(|e| e.to_string())?;
                Ok::<_, String>(c)
            })
            .map_err(|reason| MembershipError::Connect { endpoints, reason })?;
        Ok(Membership {
            rt: Arc::new(rt),
            client,
            cfg: cfg.clone(),
        })
    }

    /// The settings.
    pub fn config(&self) -> &EtcdConfig {
        &self.cfg
    }

    pub(crate) fn key(&self, rest: &str) -> String {
        format!("{}/{rest}", self.cfg.prefix)
    }

    pub(crate) fn members_prefix(&self) -> String {
        self.key("members/")
    }

    /// Runs `fut` on the runtime, bounded by [`OP_TIMEOUT`].
    pub(crate) fn block<T, E: std::fmt::Display>(
        &self,
        action: &str,
        fut: impl Future<Output = std::result::Result<T, E>>,
    ) -> Result<T> {
        self.rt.block_on(async {
            match tokio::time::timeout(OP_TIMEOUT, fut).await {
                Err(_) => Err(MembershipError::Timeout {
                    action: action.to_string(),
                    ms: OP_TIMEOUT.as_millis() as u64,
                }),
                Ok(r) => r.map_err(|e| MembershipError::etcd(action, e)),
            }
        })
    }

    /// Grants a lease of `lease_ttl_s` and starts renewing it (`who` names
    /// the holder in log lines and errors).
    pub(crate) fn grant(&self, who: &str) -> Result<Lease> {
        let ttl = self.cfg.lease_ttl_s as i64;
        let mut c = self.client.clone();
        let sent = std::time::Instant::now();
        let id = self
            .block(
                &format!("granting a lease to {who}"),
                c.lease_grant(ttl, None),
            )?
            .id();
        Ok(Lease::start(self, id, who.to_string(), sent))
    }

    /// Registers `machine` under a new lease at its next epoch, with `info`
    /// (its addresses, for people): [`Membership::reserve_epoch`] then
    /// [`Membership::register_at`].
    pub fn register(&self, machine: u8, info: &str) -> Result<Registration> {
        let epoch = self.reserve_epoch(machine)?;
        self.register_at(machine, epoch, info)
    }

    /// Takes `machine`'s next epoch (invariant 1: the counter is bumped in a
    /// transaction guarded by its mod revision) without registering it yet:
    /// a restarting server takes its epoch before it recovers, so its fabric
    /// speaks as the new incarnation from the start, and registers (becomes
    /// live) only after recovery.
    pub fn reserve_epoch(&self, machine: u8) -> Result<u64> {
        let who = format!("machine {machine}");
        let epoch_key = self.key(&format!("epochs/{machine:03}"));
        for _ in 0..100 {
            let mut c = self.client.clone();
            let got = self.block(
                &format!("reading the epoch of {who}"),
                c.get(epoch_key.clone(), None),
            )?;
            let (last, guard) = match got.kvs().first() {
                None => (0, Compare::version(epoch_key.clone(), CompareOp::Equal, 0)),
                Some(kv) => (
                    parse_u64(&epoch_key, kv.value(), "an epoch number")?,
                    Compare::mod_revision(epoch_key.clone(), CompareOp::Equal, kv.mod_revision()),
                ),
            };
            let epoch = last + 1;
            let txn = Txn::new().when([guard]).and_then([TxnOp::put(
                epoch_key.clone(),
                epoch.to_string(),
                None,
            )]);
            let mut c = self.client.clone();
            let r = self.block(&format!("taking the next epoch of {who}"), c.txn(txn))?;
            if r.succeeded() {
                return Ok(epoch);
            }
        }
        Err(MembershipError::etcd(
            format!("taking the next epoch of {who}"),
            "the epoch counter changed under 100 attempts in a row",
        ))
    }

    /// Registers `machine` at `epoch` (from [`Membership::reserve_epoch`])
    /// under a new kept-alive lease, only if no later epoch was taken since
    /// (else this incarnation is already fenced out: an error saying so).
    pub fn register_at(&self, machine: u8, epoch: u64, info: &str) -> Result<Registration> {
        let who = format!("machine {machine}");
        let lease = self.grant(&who)?;
        let epoch_key = self.key(&format!("epochs/{machine:03}"));
        let member_key = self.key(&format!("members/{machine:03}"));
        let txn = Txn::new()
            .when([Compare::value(
                epoch_key.clone(),
                CompareOp::Equal,
                epoch.to_string(),
            )])
            .and_then([
                TxnOp::put(
                    member_key,
                    format!("{epoch} {info}"),
                    Some(PutOptions::new().with_lease(lease.id())),
                ),
                TxnOp::put(
                    self.key(&format!("registered/{machine:03}")),
                    epoch.to_string(),
                    None,
                ),
            ]);
        let mut c = self.client.clone();
        let r = self.block(&format!("registering {who}"), c.txn(txn))?;
        if !r.succeeded() {
            let now = self.last_epoch(machine)?;
            return Err(MembershipError::LeaseLost {
                who,
                reason: format!(
                    "epoch {epoch} was superseded by epoch {now} before it registered: \
                     another incarnation started; this one is fenced out"
                ),
            });
        }
        tracing::info!(machine, epoch, "registered in etcd");
        Ok(Registration::new(machine, epoch, lease))
    }

    /// The live members and the etcd revision they were read at.
    pub fn members(&self) -> Result<(Vec<Member>, i64)> {
        let prefix = self.members_prefix();
        let mut c = self.client.clone();
        let r = self.block(
            "reading the membership",
            c.get(prefix.clone(), Some(GetOptions::new().with_prefix())),
        )?;
        let rev = r.header().map_or(0, |h| h.revision());
        let members = r
            .kvs()
            .iter()
            .map(|kv| parse_member(&prefix, kv.key(), kv.value()))
            .collect::<Result<Vec<_>>>()?;
        Ok((members, rev))
    }

    /// The last epoch handed to `machine` (0 if none), live, starting
    /// (taken but not registered yet) or dead.
    pub fn last_epoch(&self, machine: u8) -> Result<u64> {
        self.read_epoch(&format!("epochs/{machine:03}"), machine)
    }

    /// The epoch of `machine`'s last registration (0 if it never registered),
    /// live or dead: the newest incarnation that may have served anyone.
    pub fn last_registered(&self, machine: u8) -> Result<u64> {
        self.read_epoch(&format!("registered/{machine:03}"), machine)
    }

    fn read_epoch(&self, rest: &str, machine: u8) -> Result<u64> {
        let key = self.key(rest);
        let mut c = self.client.clone();
        let r = self.block(
            &format!("reading the epoch of machine {machine}"),
            c.get(key.clone(), None),
        )?;
        match r.kvs().first() {
            None => Ok(0),
            Some(kv) => parse_u64(&key, kv.value(), "an epoch number"),
        }
    }
}

pub(crate) fn parse_u64(key: &str, v: &[u8], expected: &'static str) -> Result<u64> {
    std::str::from_utf8(v)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| MembershipError::Corrupt {
            key: key.to_string(),
            value: String::from_utf8_lossy(v).into_owned(),
            expected,
        })
}

/// `P/members/mmm` = "<epoch> <info>".
pub(crate) fn parse_member(prefix: &str, key: &[u8], value: &[u8]) -> Result<Member> {
    let k = String::from_utf8_lossy(key).into_owned();
    let corrupt = |expected| MembershipError::Corrupt {
        key: k.clone(),
        value: String::from_utf8_lossy(value).into_owned(),
        expected,
    };
    let machine: u8 = k
        .strip_prefix(prefix)
        .and_then(|m| m.parse().ok())
        .ok_or_else(|| corrupt("a member key ending in a machine id"))?;
    let s = std::str::from_utf8(value).map_err(|_| corrupt("\"<epoch> <info>\""))?;
    let (e, info) = s.split_once(' ').unwrap_or((s, ""));
    let epoch = e.parse().map_err(|_| corrupt("\"<epoch> <info>\""))?;
    Ok(Member {
        machine,
        epoch,
        info: info.to_string(),
    })
}

impl Membership {
    /// Revokes lease `id` (tests use it to end another holder's lease).
    pub fn revoke_lease_for_tests(&self, id: i64) -> Result<()> {
        let mut c = self.client.clone();
        self.block("revoking a lease", c.lease_revoke(id))
            .map(|_| ())
    }
}
