//! `locus cluster move | rebalance | remove-server | moves`: slots moved
//! between the servers of a running cluster while it serves (issue 59; the
//! driver is `locus_server::moves`). Needs `[etcd]`: the committed slot
//! table lives there.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use locus_client::{Client, ClientConfig};
use locus_membership::Membership;
use locus_node::progress::Reporter;
use locus_server::moves::{parse_slots, Mover, MovesDone};
use locus_server::ClusterFile;

use crate::cluster::CLUSTER_FILE;
use crate::CliResult;

/// Where the cluster is: `--dir` or `--cluster`.
#[derive(Args, Debug)]
pub struct Where {
    /// The directory `cluster up` used (or give --cluster).
    #[arg(long, default_value = "locus-cluster")]
    pub dir: PathBuf,
    /// A cluster file (default: DIR/cluster.toml).
    #[arg(long, value_name = "FILE")]
    pub cluster: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct MoveArgs {
    #[command(flatten)]
    pub at: Where,
    /// The slots to move: numbers and ranges, `0-99,200`.
    #[arg(long)]
    pub slots: String,
    /// The server they move to.
    #[arg(long)]
    pub to: u8,
    /// Slots per batch: each batch's updates wait while it moves, and each
    /// commits the table once.
    #[arg(long, default_value_t = 1)]
    pub batch_slots: usize,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct RebalanceArgs {
    #[command(flatten)]
    pub at: Where,
    /// Print the moves without making them.
    #[arg(long)]
    pub plan: bool,
    /// Slots per batch (see `cluster move`).
    #[arg(long, default_value_t = 1)]
    pub batch_slots: usize,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct RemoveArgs {
    #[command(flatten)]
    pub at: Where,
    /// The server to drain and stop.
    #[arg(long)]
    pub id: u8,
    /// Slots per batch (see `cluster move`).
    #[arg(long, default_value_t = 1)]
    pub batch_slots: usize,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct MovesArgs {
    #[command(flatten)]
    pub at: Where,
    /// First finish or roll back what an interrupted move left in flight
    /// (a batch committed in etcd is finished, any other rolled back).
    #[arg(long)]
    pub settle: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

type Opened = (Client, Membership);

/// A client of the cluster and its etcd.
fn open(at: &Where) -> CliResult<Opened> {
    let path = at
        .cluster
        .clone()
        .unwrap_or_else(|| at.dir.join(CLUSTER_FILE));
    let file = ClusterFile::load(&path)?;
    let Some(etcd) = &file.etcd else {
        return Err(format!(
            "{}: slot moves need [etcd] (the committed slot table lives there); start the cluster without --no-etcd",
            path.display()
        )
        .into());
    };
    let client = Client::from_file(
        &path,
        ClientConfig {
            deadline: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(2),
            ..ClientConfig::default()
        },
    )?;
    let m = Membership::connect(&etcd.config())?;
    Ok((client, m))
}

pub(crate) fn check_batch(batch_slots: usize) -> CliResult {
    if batch_slots == 0 {
        return Err("--batch-slots must be at least 1".into());
    }
    Ok(())
}

/// Runs `f` with a progress bar of slots moved (hidden for JSON or off a terminal).
pub(crate) fn with_bar<T>(quiet: bool, f: impl FnOnce(&mut dyn FnMut(u64, u64)) -> T) -> T {
    let reporter = if quiet {
        Reporter::quiet()
    } else {
        Reporter::terminal()
    };
    let bar = reporter.bar(0, "slots moved");
    let r = f(&mut |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    });
    bar.finish_and_clear();
    r
}

pub(crate) fn done_json(done: &MovesDone, secs: f64) -> serde_json::Value {
    serde_json::json!({
        "batches": done.batches, "slots": done.slots,
        "vertices": done.vertices, "keys": done.keys, "bytes": done.bytes,
        "settled": done.settled, "table_epoch": done.table_epoch, "seconds": secs,
    })
}

pub(crate) fn print_done(what: &str, done: &MovesDone, secs: f64) {
    if done.settled > 0 {
        println!(
            "settled {} batch(es) an interrupted move left in flight",
            done.settled
        );
    }
    println!(
        "{what}: {} slot(s) in {} batch(es), {} vertices, {} keys, {} bytes in {secs:.2} s; slot table epoch {}",
        done.slots, done.batches, done.vertices, done.keys, done.bytes, done.table_epoch
    );
}

/// `cluster move`.
pub(crate) fn run(a: MoveArgs) -> CliResult {
    check_batch(a.batch_slots)?;
    let (client, m) = open(&a.at)?;
    let mover = Mover::new(&client, &m);
    let (_, table) = mover.table()?;
    let slots = parse_slots(&a.slots, table.slots())?;
    let t0 = Instant::now();
    let done = with_bar(a.json, |p| mover.move_slots(&slots, a.to, a.batch_slots, p))?;
    let secs = t0.elapsed().as_secs_f64();
    if a.json {
        let mut j = done_json(&done, secs);
        j["to"] = a.to.into();
        println!("{j}");
    } else {
        print_done(&format!("moved to server {}", a.to), &done, secs);
    }
    Ok(())
}

/// Servers that answer a PING: the ones slots may go to.
pub(crate) fn up_servers(client: &Client) -> Vec<u8> {
    (0..client.machines() as u8)
        .filter(|&id| client.ping(id).is_ok())
        .collect()
}

/// `cluster rebalance`.
pub(crate) fn rebalance(a: RebalanceArgs) -> CliResult {
    check_batch(a.batch_slots)?;
    let (client, m) = open(&a.at)?;
    let mover = Mover::new(&client, &m);
    let members = up_servers(&client);
    let t0 = Instant::now();
    let (moves, done) = with_bar(a.json || a.plan, |p| {
        mover.rebalance(&members, a.batch_slots, a.plan, p)
    })?;
    let secs = t0.elapsed().as_secs_f64();
    if !a.plan {
        if a.json {
            let mut j = done_json(&done, secs);
            j["members"] = members.into();
            println!("{j}");
        } else {
            print_done(&format!("rebalanced over servers {members:?}"), &done, secs);
        }
        return Ok(());
    }
    let mut pairs: std::collections::BTreeMap<(u8, u8), u64> = Default::default();
    for mv in &moves {
        *pairs.entry((mv.from, mv.to)).or_default() += 1;
    }
    if a.json {
        let rows: Vec<_> = pairs
            .iter()
            .map(|((f, t), n)| serde_json::json!({"from": f, "to": t, "slots": n}))
            .collect();
        println!("{}", serde_json::json!({"members": members, "moves": rows}));
    } else if pairs.is_empty() {
        println!("balanced over servers {members:?}: nothing to move");
    } else {
        for ((f, t), n) in pairs {
            println!("{n} slot(s) from server {f} to server {t}");
        }
    }
    Ok(())
}

/// `cluster remove-server`.
pub(crate) fn remove_server(a: RemoveArgs) -> CliResult {
    check_batch(a.batch_slots)?;
    let (client, m) = open(&a.at)?;
    if a.id as usize >= client.machines() {
        return Err(format!("no server {} in a cluster of {}", a.id, client.machines()).into());
    }
    let mover = Mover::new(&client, &m);
    let members: Vec<u8> = up_servers(&client)
        .into_iter()
        .filter(|&id| id != a.id)
        .collect();
    if members.is_empty() {
        return Err(format!(
            "server {} is the only server up: nothing could take its slots",
            a.id
        )
        .into());
    }
    let t0 = Instant::now();
    let (_, done) = with_bar(a.json, |p| {
        mover.rebalance(&members, a.batch_slots, false, p)
    })?;
    // The values Pragh migrated onto it go back to their homes.
    let (recalled, recalled_bytes) = mover.recall(a.id)?;
    let stopped = stop_server(&a.at.dir, a.id);
    let secs = t0.elapsed().as_secs_f64();
    if a.json {
        let mut j = done_json(&done, secs);
        j["id"] = a.id.into();
        j["values_recalled"] = recalled.into();
        j["bytes_recalled"] = recalled_bytes.into();
        j["stopped"] = stopped.into();
        println!("{j}");
        return Ok(());
    }
    print_done(&format!("server {} drained", a.id), &done, secs);
    println!("{recalled} value(s) ({recalled_bytes} bytes) migrated back to their homes");
    if stopped {
        println!(
            "server {} stopped; it holds no slot (`cluster up --dir` would start it again, with no slot)",
            a.id
        );
    } else {
        println!(
            "server {} holds no slot now; no live process of it is recorded in {}: stop it yourself",
            a.id,
            a.at.dir.display()
        );
    }
    Ok(())
}

/// Stops server `id` if `cluster up` in `dir` started it; whether it did.
fn stop_server(dir: &Path, id: u8) -> bool {
    let pid = crate::cluster::read_pids(dir)
        .unwrap_or_default()
        .into_iter()
        .find(|s| s.role == "server" && s.id == Some(id))
        .map(|s| s.pid)
        .filter(|&p| crate::cluster::alive(p));
    match pid {
        Some(p) => {
            locus_server::supervise::terminate(&[p], Duration::from_secs(10), crate::cluster::alive)
                == 0
        }
        None => false,
    }
}

/// `cluster moves`.
pub(crate) fn moves(a: MovesArgs) -> CliResult {
    let (client, m) = open(&a.at)?;
    let mover = Mover::new(&client, &m);
    let settled = if a.settle { mover.settle()? } else { 0 };
    let (_, table) = mover.table()?;
    let counts = table.counts();
    let servers = mover.in_flight();
    if a.json {
        let rows: Vec<_> = servers
            .iter()
            .map(|(id, f)| {
                let n = counts[*id as usize];
                match f {
                    Some(f) => serde_json::json!({"id": id, "up": true, "slots": n,
                        "in_flight": f.iter().map(|x| serde_json::json!({
                            "slot": x.slot, "leaving": x.leaving, "peer": x.peer
                        })).collect::<Vec<_>>()}),
                    None => serde_json::json!({"id": id, "up": false, "slots": n}),
                }
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({"table_epoch": table.epoch(), "settled": settled, "servers": rows})
        );
        return Ok(());
    }
    if a.settle {
        println!("settled {settled} batch(es) an interrupted move left in flight");
    }
    println!(
        "slot table epoch {} (etcd), {} slots",
        table.epoch(),
        table.slots()
    );
    for (id, f) in servers {
        let n = counts[id as usize];
        match f {
            None => println!("server {id}: {n} slots, not answering"),
            Some(f) if f.is_empty() => println!("server {id}: {n} slots, no move in flight"),
            Some(f) => {
                let out = f.iter().filter(|x| x.leaving).count();
                println!(
                    "server {id}: {n} slots, {out} leaving and {} arriving (a move was interrupted: `cluster moves --settle` finishes or rolls it back)",
                    f.len() - out
                );
            }
        }
    }
    Ok(())
}
