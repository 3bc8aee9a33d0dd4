//! `locus cluster add-server`: one more server joins a running cluster and
//! slots move to it until they are balanced (issue 59). The cluster must
//! run on etcd (the slot table and the members' addresses live there) and
//! have room (`[cluster] max_servers`, fixed by `cluster up --max-servers`).
//!
//! Steps: a free id and free ports are written into the cluster file (the
//! servers already running learn the new server's addresses from its etcd
//! registration, their clients from SERVERS); the server starts owning no
//! slot; once it answers (and links to the coordinator), the slots are
//! rebalanced over every server that answers, here with `--wait`, or by a
//! detached `locus cluster rebalance` whose progress `cluster moves` shows.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use clap::Args;
use locus_client::{Client, ClientConfig};
use locus_membership::Membership;
use locus_server::config::ServerEntry;
use locus_server::supervise::{FreePorts, Role, Supervisor, Tie};
use locus_server::ClusterFile;

use crate::cluster::{Started, CLUSTER_FILE, LINK_WAIT, UP_WAIT};
use crate::cluster_move::{
    batch_or_default, check_batch, done_json, print_done, up_servers, with_bar,
};
use crate::CliResult;

#[derive(Args, Debug)]
pub struct AddArgs {
    /// The directory `cluster up` used.
    #[arg(long, default_value = "locus-cluster")]
    pub dir: PathBuf,
    /// Move the slots in this command and return when they are balanced;
    /// without it a detached `cluster rebalance` moves them (its output:
    /// DIR/logs/rebalance.log; `cluster moves` shows its progress).
    #[arg(long, conflicts_with = "no_rebalance")]
    pub wait: bool,
    /// Only start the server (it owns no slot); move slots to it later with
    /// `cluster rebalance` (e.g. once several servers are added).
    #[arg(long)]
    pub no_rebalance: bool,
    /// Slots per batch (see `cluster move`; default 1, with replication 64).
    #[arg(long)]
    pub batch_slots: Option<usize>,
    /// Stop the new server after this many seconds (as `cluster up --lifetime-s`).
    #[arg(long)]
    pub lifetime_s: Option<u64>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `cluster add-server`.
pub(crate) fn add_server(a: AddArgs) -> CliResult {
    if let Some(b) = a.batch_slots {
        check_batch(b)?;
    }
    let path = a.dir.join(CLUSTER_FILE);
    let mut file = ClusterFile::load(&path)?;
    let Some(etcd) = file.etcd.clone() else {
        return Err(format!(
            "{}: adding a server needs [etcd] (the slot table and the servers' addresses live there); start the cluster without --no-etcd",
            path.display()
        )
        .into());
    };
    let id = file.servers.len();
    if id >= file.machines() {
        return Err(format!(
            "{}: the cluster has room for {} servers and has them all (max_servers is fixed when the cluster is made: `cluster up --max-servers`)",
            path.display(),
            file.machines()
        )
        .into());
    }
    let running = crate::cluster::read_pids(&a.dir)
        .unwrap_or_default()
        .into_iter()
        .filter(|s| crate::cluster::alive(s.pid))
        .count();
    if running == 0 {
        return Err(format!(
            "no process of the cluster in {} is running: `locus cluster up --dir {}` first",
            a.dir.display(),
            a.dir.display()
        )
        .into());
    }
    let id = id as u8;
    let mut ports = FreePorts::default();
    file.servers.push(ServerEntry {
        id,
        fabric: ports.take()?,
        client: ports.take()?,
        metrics: Some(ports.take()?),
    });
    file.validate()?;
    drop(ports);
    // `load` made the paths absolute; write the file as it was read, plus
    // the new entry.
    let mut written = ClusterFile::load_raw(&path)?;
    written.servers.push(file.servers[id as usize].clone());
    written.write(&path)?;
    let t0 = Instant::now();
    let exe = std::env::current_exe()?;
    let mut sup = Supervisor::new(&exe, &path, &a.dir.join("logs"), Tie::Detached);
    let pid = match sup.spawn(Role::Server(id), &[], a.lifetime_s) {
        Ok(p) => p,
        Err(e) => {
            let _ = unlist(&path, id);
            return Err(format!("cannot start server {id}: {e}").into());
        }
    };
    let mut pids = crate::cluster::read_pids(&a.dir).unwrap_or_default();
    pids.push(Started {
        role: "server".into(),
        id: Some(id),
        pid,
    });
    crate::cluster::write_pids(&a.dir, &pids)?;
    let client = Client::from_file(&path, ClientConfig::default())?;
    let mut ready = sup.wait_servers(&client, &[id], UP_WAIT);
    if ready.is_ok() && file.coordinator.is_some() {
        ready = sup.wait_linked(&client, &[id], LINK_WAIT);
    }
    if ready.is_ok() {
        ready = wait_known(&client, id);
    }
    if let Err(e) = ready {
        let _ = locus_server::supervise::terminate(
            &[pid],
            std::time::Duration::from_secs(5),
            crate::cluster::alive,
        );
        let _ = unlist(&path, id);
        return Err(format!(
            "server {id} did not come up (it is removed from the cluster file again): {e}"
        )
        .into());
    }
    let s = &file.servers[id as usize];
    let started_s = t0.elapsed().as_secs_f64();
    if !a.json {
        println!(
            "server {id} started in {started_s:.1} s: clients {}  fabric {}  metrics http://{}/metrics  pid {pid}",
            s.client,
            s.fabric,
            s.metrics.map(|m| m.to_string()).unwrap_or_default()
        );
    }
    if a.no_rebalance {
        if a.json {
            println!(
                "{}",
                serde_json::json!({"id": id, "pid": pid, "client": s.client.to_string(),
                                   "started_s": started_s})
            );
        } else {
            println!(
                "it owns no slot yet: `locus cluster rebalance --dir {}` moves slots to it",
                a.dir.display()
            );
        }
        return Ok(());
    }
    if !a.wait {
        let log = a.dir.join("logs").join("rebalance.log");
        let out = std::fs::File::create(&log)
            .map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let err = out.try_clone()?;
        let mut rebalance = Command::new(&exe);
        rebalance.args(["cluster", "rebalance", "--json"]);
        if let Some(b) = a.batch_slots {
            rebalance.arg("--batch-slots").arg(b.to_string());
        }
        rebalance
            .arg("--dir")
            .arg(&a.dir)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start `locus cluster rebalance`: {e}"))?;
        if a.json {
            println!(
                "{}",
                serde_json::json!({"id": id, "pid": pid, "client": s.client.to_string(),
                                   "started_s": started_s, "rebalance_log": log})
            );
        } else {
            println!(
                "slots are moving to it in the background (log {}); `locus cluster moves --dir {}` shows them",
                log.display(),
                a.dir.display()
            );
        }
        return Ok(());
    }
    let m = Membership::connect(&etcd.config())?;
    let mover = crate::cluster_move::mover(&client, &m, &a.dir, "add-server")?;
    let members = up_servers(&client);
    let replicated = crate::cluster_reshape::replicated(&mover)?;
    let batch_slots = batch_or_default(a.batch_slots, replicated)?;
    if replicated {
        // Its share of copies first, then of primaries (handed to it once
        // it backs them).
        let what = format!("slots balanced over servers {members:?}");
        let extra = serde_json::json!({"id": id, "pid": pid, "started_s": started_s,
                                       "members": members});
        return crate::cluster_reshape::reshape_and_report(
            mover,
            &client,
            &members,
            batch_slots,
            a.json,
            &what,
            extra,
        );
    }
    let t1 = Instant::now();
    let (_, done) = with_bar(a.json, |p| mover.rebalance(&members, batch_slots, false, p))?;
    let secs = t1.elapsed().as_secs_f64();
    if a.json {
        let mut j = done_json(&done, secs);
        j["id"] = id.into();
        j["pid"] = pid.into();
        j["started_s"] = started_s.into();
        j["members"] = members.into();
        println!("{j}");
    } else {
        print_done(
            &format!("slots balanced over servers {members:?}"),
            &done,
            secs,
        );
    }
    Ok(())
}

/// Waits until every server that answers knows server `id` (learned from
/// its etcd registration): slots may move to it only once they all reach it.
fn wait_known(client: &Client, id: u8) -> locus_server::Result<()> {
    let t0 = Instant::now();
    for peer in up_servers(client).into_iter().filter(|&p| p != id) {
        loop {
            let known = matches!(
                client.call(peer, &locus_client::proto::Request::Servers, None),
                Ok(locus_client::proto::Reply::Servers(list)) if list.iter().any(|(s, _)| *s == id)
            );
            if known {
                break;
            }
            if t0.elapsed() >= LINK_WAIT {
                return Err(locus_server::ServerError::Membership(format!(
                    "server {peer} has not learned server {id}'s address from etcd after {} s",
                    LINK_WAIT.as_secs()
                )));
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
    Ok(())
}

/// Takes server `id` out of the cluster file again (a start that failed).
fn unlist(path: &std::path::Path, id: u8) -> CliResult {
    let mut f = ClusterFile::load_raw(path)?;
    f.servers.retain(|s| s.id != id);
    f.write(path)?;
    Ok(())
}
