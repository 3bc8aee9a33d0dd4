//! The STATS reply (docs/protocol.md section 6): what `locus cluster status`
//! and `locus stats` show of one server.

use std::sync::atomic::Ordering;

use locus_client::proto::{Op, Reply, STATS_JSON_MAX};
use locus_fabric::counting::Locality;
use serde_json::json;

use crate::conn::Connection;

/// This server's statistics as a STATS reply.
pub(crate) fn reply(c: &mut Connection<'_>) -> Reply {
    let s = c.s;
    let me = s.id;
    let summary = match c.worker().and_then(|w| w.home_summary()) {
        Ok(x) => x,
        Err(e) => {
            return Reply::Error {
                code: locus_node::node::code_of(&e),
                message: c.named(&format!("cannot scan the key table: {e}")),
            }
        }
    };
    let (replicas, replica_bytes) = c.worker().map(|w| w.replicas_held()).unwrap_or((0, 0));
    let store = s.store();
    let usage = store.usage().into_iter().find(|u| u.machine == me);
    let cache = store.cache(me).map(|c| {
        let st = c.stats();
        json!({"entries": c.len(), "bytes": c.bytes(), "hits": st.hits,
               "misses": st.misses, "hit_rate": st.hit_rate()})
    });
    let ops = store.fabric().counters().snapshot()[me as usize];
    let mut requests = serde_json::Map::new();
    // Client ops past HELLO (control ops never reach a client connection).
    for op in Op::ALL
        .into_iter()
        .filter(|o| !o.is_control() && *o != Op::Hello)
    {
        requests.insert(
            op.name().into(),
            s.requests[op as usize & 15].load(Ordering::Relaxed).into(),
        );
    }
    let coordinator = s.file.coordinator.as_ref().map(|_| {
        let c = &s.control;
        let d = &c.driver;
        let n = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        json!({"linked": c.linked.load(Ordering::Acquire), "links": n(&c.links),
               "reports": n(&d.reports), "hot_reports": n(&d.hot_reports),
               "reports_dropped": n(&d.reports_dropped), "jobs": n(&c.jobs),
               "moved": n(&d.moved), "moved_bytes": n(&d.bytes_moved),
               "replicas_created": n(&d.replicas_created), "failed": n(&d.failed)})
    });
    let v = json!({
        "server": me,
        "machines": s.file.machines(),
        "address": s.client_addr.to_string(),
        "pid": std::process::id(),
        "uptime_s": s.started.elapsed().as_secs_f64(),
        "keys": summary.keys,
        "vertices": summary.vertices,
        "values_here": summary.held_here,
        "values_away": summary.held_away,
        "value_live_bytes": usage.map_or(0, |u| u.value_live_bytes),
        "value_used_bytes": usage.map_or(0, |u| u.value_used_bytes),
        "value_region_bytes": store.config().value_region_bytes,
        "cache": cache,
        "migrations_in": s.node.migrations_in().0,
        "migrated_bytes": s.node.migrations_in().1,
        "replicas_held": replicas,
        "replica_bytes": replica_bytes,
        "reclaim_backlog": store.reclaim_backlog(me),
        "coordinator": coordinator,
        "durability": s.node.durability_json(),
        "recovery": s.node.recovery_json(),
        "backup": s.node.backup_json(),
        "membership": s.membership.as_ref().map(|m| m.stats_json(store.fabric().inner(), me)),
        "clients": s.clients.load(Ordering::Relaxed),
        "requests": requests,
        "ops": {"local": ops.ops_total(Locality::Local), "remote": ops.ops_total(Locality::Remote),
                "local_bytes": ops.bytes_total(Locality::Local),
                "remote_bytes": ops.bytes_total(Locality::Remote)},
        "auth_refused": s.auth_refused.load(Ordering::Relaxed)
            + store.fabric().inner().auth_refusals(),
    });
    let text = v.to_string();
    debug_assert!(text.len() <= STATS_JSON_MAX);
    Reply::Stats(text)
}
