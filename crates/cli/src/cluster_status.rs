//! `locus cluster status`: each server's statistics, the coordinator's
//! metrics and, with `[etcd]`, the coordinator leader and every server's
//! epoch (split from `cluster.rs`).

use std::net::SocketAddr;
use std::time::Duration;

use locus_client::{Client, ClientConfig};
use locus_server::config::ClusterFile;

use crate::cluster::{read_pids, StatusArgs, CLUSTER_FILE};
use crate::CliResult;

/// The unlabelled samples of a Prometheus endpoint (`GET /metrics`, 1 s bound).
fn scrape(addr: SocketAddr) -> Option<std::collections::HashMap<String, f64>> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut text = String::new();
    s.take(4 << 20).read_to_string(&mut text).ok()?;
    let body = text.split_once("\r\n\r\n")?.1;
    Some(
        body.lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let (name, v) = l.split_once(' ')?;
                Some((name.to_string(), v.trim().parse().ok()?))
            })
            .collect(),
    )
}

pub(crate) fn status(a: StatusArgs) -> CliResult {
    let path = a
        .cluster
        .clone()
        .unwrap_or_else(|| a.dir.join(CLUSTER_FILE));
    let client = Client::from_file(
        &path,
        ClientConfig {
            deadline: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(2),
            ..ClientConfig::default()
        },
    )?;
    let pids = read_pids(&a.dir).unwrap_or_default();
    // Slots per server by the table a live server holds (None: none answered).
    let table = client.slot_table().ok();
    let slots_of = |id: u8| table.as_ref().map(|t| t.counts()[id as usize]);
    let mut rows = Vec::new();
    for id in 0..client.machines() as u8 {
        let pid = pids
            .iter()
            .find(|s| s.role == "server" && s.id == Some(id))
            .map(|s| s.pid);
        let addr = client.address(id).map(|a| a.to_string());
        rows.push(match client.stats(id) {
            Ok(st) => serde_json::json!({"id": id, "up": true, "address": addr, "pid": st["pid"], "slots": slots_of(id), "stats": st}),
            Err(e) => serde_json::json!({"id": id, "up": false, "address": addr, "pid": pid, "slots": slots_of(id), "error": e.to_string()}),
        });
    }
    let file = ClusterFile::load(&path).ok();
    let etcd = file
        .as_ref()
        // The servers listed: ids past them (the cluster's room) have none.
        .and_then(|f| Some((f.etcd.as_ref()?, f.servers.len())))
        .map(|(e, n)| {
            crate::cluster_etcd::status(e, n)
                .unwrap_or_else(|| serde_json::json!({"endpoints": e.endpoints, "up": false}))
        });
    let coordinator = file.as_ref().and_then(|f| f.coordinator.as_ref()).map(|c| {
        // With etcd, the leader's metrics (the standby's once it took over).
        let (control, metrics_addr) = match &etcd {
            Some(e) => {
                // etcd.json lives beside the cluster file `cluster up` wrote.
                let dir = path.parent().unwrap_or(&a.dir);
                let (l, m) = crate::cluster_etcd::leader_metrics(
                    dir,
                    c.control,
                    c.metrics,
                    e["leader"].as_str(),
                );
                (l.unwrap_or_else(|| c.control.to_string()), m)
            }
            None => (c.control.to_string(), c.metrics),
        };
        let metrics = metrics_addr.and_then(scrape);
        let get = |name: &str| {
            metrics
                .as_ref()
                .and_then(|m| m.get(name).map(|&v| v as u64))
        };
        // The live process's own id (a restarted coordinator is not in pids.json).
        let pid = get("locus_process_id").or_else(|| {
            pids.iter()
                .find(|s| s.role == "coordinator")
                .map(|s| s.pid as u64)
        });
        serde_json::json!({
            "up": metrics.is_some(),
            "control": control,
            "pid": pid,
            "servers_linked": get("locus_coordinator_servers_linked"),
            "approved": get("locus_coordinator_approved_total"),
            "migrated": get("locus_coordinator_migrated_ok_total"),
            "replicas_approved": get("locus_coordinator_replicas_approved_total"),
            "reports": get("locus_coordinator_reports_total"),
        })
    });
    let slot_table = table
        .as_ref()
        .map(|t| serde_json::json!({"epoch": t.epoch(), "slots": t.slots()}));
    if a.json {
        let v = serde_json::json!({"servers": rows, "coordinator": coordinator, "etcd": etcd, "slot_table": slot_table});
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    match &coordinator {
        Some(c) if c["up"] == true => println!(
            "coordinator up (control {}, pid {}): {} servers linked, {} migrations approved, {} done, {} replicas approved",
            c["control"].as_str().unwrap_or(""),
            c["pid"],
            c["servers_linked"],
            c["approved"],
            c["migrated"],
            c["replicas_approved"]
        ),
        Some(c) if etcd.as_ref().is_some_and(|e| e["leader"].is_string()) => println!(
            "coordinator at {} is not leading (down, or standing by); the leader is below (etcd)",
            c["control"].as_str().unwrap_or("")
        ),
        Some(c) => println!(
            "coordinator DOWN (control {}): servers keep serving; values move only by `locus migrate` until it is back",
            c["control"].as_str().unwrap_or("")
        ),
        None => println!("no coordinator in the cluster file"),
    }
    if let Some(e) = &etcd {
        if e["up"] == false {
            println!(
                "etcd DOWN ({}): no membership changes until `locus cluster up --dir` restarts it",
                e["endpoints"]
            );
        } else {
            let epochs: Vec<String> = e["epochs"]
                .as_array()
                .map(|v| {
                    v.iter()
                        .map(|x| {
                            format!(
                                "{}@{}{}",
                                x["id"],
                                x["epoch"],
                                if x["live"] == true { "" } else { " (down)" }
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            println!(
                "etcd {}: coordinator leader {} (term {}); server epochs {}",
                e["endpoints"],
                e["leader"].as_str().unwrap_or("none"),
                e["term"],
                epochs.join(" ")
            );
        }
    }
    match &table {
        Some(t) => {
            println!(
                "slot table: epoch {}, {} slots (a vertex's home is the owner of slot vertex % {})",
                t.epoch(),
                t.slots(),
                t.slots()
            );
            if t.replication() > 1 {
                let r = usize::from(t.replication());
                let short = (0..t.slots())
                    .filter(|&s| t.backups_of_slot(s).len() + 1 < r)
                    .count();
                let backs: Vec<String> = (0..t.machines().min(256))
                    .map(|m| m as u8)
                    .map(|m| (m, (0..t.slots()).filter(|&s| t.is_backup(s, m)).count()))
                    .filter(|&(m, n)| {
                        n > 0 || (0..t.slots()).any(|s| t.owner_of_slot(s) == Some(m))
                    })
                    .map(|(m, n)| format!("{m}: {n}"))
                    .collect();
                println!(
                    "replication: {r} servers per slot (a primary and its backups); {short} slots short of a backup{}; slots backed by server: {}",
                    if short > 0 {
                        " (they failed over; the leading coordinator makes live servers back them again)"
                    } else {
                        ""
                    },
                    backs.join(", ")
                );
            }
        }
        None => println!("slot table: no server answered SLOTS"),
    }
    println!(
        "{:>3} {:>5} {:>21} {:>8} {:>5} {:>9} {:>9} {:>7} {:>7} {:>11} {:>6} {:>6} {:>6} {:>7}",
        "id",
        "state",
        "address",
        "pid",
        "slots",
        "vertices",
        "keys",
        "here",
        "away",
        "value bytes",
        "hit%",
        "migr",
        "repl",
        "reclaim"
    );
    for r in &rows {
        let st = &r["stats"];
        if r["up"].as_bool() == Some(true) {
            let n = |v: &serde_json::Value| v.to_string();
            println!(
                "{:>3} {:>5} {:>21} {:>8} {:>5} {:>9} {:>9} {:>7} {:>7} {:>11} {:>6.1} {:>6} {:>6} {:>7}",
                n(&r["id"]),
                "up",
                r["address"].as_str().unwrap_or(""),
                n(&st["pid"]),
                n(&r["slots"]),
                n(&st["vertices"]),
                n(&st["keys"]),
                n(&st["values_here"]),
                n(&st["values_away"]),
                n(&st["value_live_bytes"]),
                st["cache"]["hit_rate"].as_f64().unwrap_or(0.0) * 100.0,
                n(&st["migrations_in"]),
                n(&st["replicas_held"]),
                n(&st["reclaim_backlog"])
            );
        } else {
            println!(
                "{:>3} {:>5} {:>21} {:>8} {:>5}  {}",
                r["id"].to_string(),
                "DOWN",
                r["address"].as_str().unwrap_or(""),
                r["pid"]
                    .as_u64()
                    .map(|p| p.to_string())
                    .unwrap_or("-".into()),
                r["slots"].to_string(),
                r["error"].as_str().unwrap_or("")
            );
        }
    }
    Ok(())
}
