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
use locus_server::moves::{parse_slots, Journal, Mover, MovesDone, Progress};
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
    /// commits the table once (default 1; with replication 64, each batch
    /// a copy to a new backup or a handover).
    #[arg(long)]
    pub batch_slots: Option<usize>,
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
    /// Give primaries back instead of moving slots: with replication, hand
    /// slots from the servers owning most to backups of theirs owning
    /// fewest (after failovers), no data copied.
    #[arg(long)]
    pub primaries: bool,
    /// Slots per batch (see `cluster move`; default 1, with replication or
    /// --primaries 64: a handover's updates wait only while its table is
    /// committed).
    #[arg(long)]
    pub batch_slots: Option<usize>,
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
    /// Return once the server is drained and stopped. The command always
    /// does: the flag is accepted so that scripts can spell it as for
    /// `add-server`.
    #[arg(long)]
    pub wait: bool,
    /// Slots per batch (see `cluster move`).
    #[arg(long)]
    pub batch_slots: Option<usize>,
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
    /// Ask the move running now (a `cluster move`, `rebalance`,
    /// `add-server` or `remove-server`) to stop after its batch in hand and
    /// move back the slots it moved; waits for it to finish.
    #[arg(long, conflicts_with = "settle")]
    pub cancel: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// A client of the cluster, its etcd, and the directory of its cluster file
/// (where a mover's journal is).
type Opened = (Client, Membership, PathBuf);

/// A client of the cluster and its etcd.
pub(crate) fn open(at: &Where) -> CliResult<Opened> {
    let path = at
        .cluster
        .clone()
        .unwrap_or_else(|| at.dir.join(CLUSTER_FILE));
    let dir = path
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
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
    Ok((client, m, dir))
}

/// A mover for `command` that keeps a journal in `dir`, refusing to start
/// while another mover's journal says it runs.
pub(crate) fn mover<'a>(
    client: &'a Client,
    m: &'a Membership,
    dir: &Path,
    command: &str,
) -> CliResult<Mover<'a>> {
    if let Some(p) = running(dir) {
        return Err(format!(
            "a {} (pid {}) is moving slots now ({} of {} done): wait for it, or `locus cluster moves --cancel`",
            p.command, p.pid, p.slots_done, p.slots_total
        )
        .into());
    }
    Ok(Mover::new(client, m)
        .named(format!(
            "locus cluster {command} (pid {})",
            std::process::id()
        ))
        .with_journal(Journal::new(dir, command)))
}

/// Whether process `pid` exists (and is not a zombie).
fn process_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}

/// The journal of a mover that runs now in `dir`.
fn running(dir: &Path) -> Option<Progress> {
    Journal::read(dir).filter(|p| p.state == "running" && process_alive(p.pid))
}

/// One line on a mover's journal.
fn journal_line(p: &Progress) -> String {
    let alive = process_alive(p.pid);
    let head = format!(
        "{} (pid {}): {} of {} slots in {} batch(es), {} vertices, {} bytes",
        p.command, p.pid, p.slots_done, p.slots_total, p.batches, p.vertices, p.bytes
    );
    match p.state.as_str() {
        "running" if alive => format!(
            "running: {head}; {:.1} slots/s, ETA {}",
            p.rate(),
            p.eta_s().map_or("unknown".into(), |s| format!("{s:.0} s"))
        ),
        "running" => format!(
            "stopped mid-way (its process is gone): {head}; `cluster moves --settle` finishes or rolls back its batch in flight"
        ),
        "done" => format!("last move done: {head}"),
        state => format!(
            "last move {state}: {head}; {}",
            p.error.as_deref().unwrap_or("")
        ),
    }
}

/// `--batch-slots` as given, or its default: 1, or with replication
/// [`crate::cluster_reshape::BATCH_SLOTS`]; checked.
pub(crate) fn batch_or_default(given: Option<usize>, replicated: bool) -> CliResult<usize> {
    let b = given.unwrap_or(if replicated {
        crate::cluster_reshape::BATCH_SLOTS
    } else {
        1
    });
    check_batch(b)?;
    Ok(b)
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
    if let Some(b) = a.batch_slots {
        check_batch(b)?;
    }
    let (client, m, dir) = open(&a.at)?;
    let mover = mover(&client, &m, &dir, "move")?;
    let (_, table) = mover.table()?;
    let slots = parse_slots(&a.slots, table.slots())?;
    let replicated = table.replication() > 1;
    let batch_slots = batch_or_default(a.batch_slots, replicated)?;
    let t0 = Instant::now();
    if replicated {
        let mover = mover.keeping_goal_on_error();
        let r = with_bar(a.json, |p| {
            mover.move_replicated(&slots, a.to, batch_slots, p)
        })?;
        let what = format!("primaries given to server {}", a.to);
        let extra = serde_json::json!({"to": a.to});
        return crate::cluster_reshape::report(&mover, &client, &r, t0, a.json, &what, extra);
    }
    let done = with_bar(a.json, |p| mover.move_slots(&slots, a.to, batch_slots, p))?;
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
    if a.primaries {
        return crate::cluster_primaries::run(a);
    }
    if let Some(b) = a.batch_slots {
        check_batch(b)?;
    }
    let (client, m, dir) = open(&a.at)?;
    let mover = if a.plan {
        Mover::new(&client, &m)
    } else {
        mover(&client, &m, &dir, "rebalance")?
    };
    let members = up_servers(&client);
    let replicated = crate::cluster_reshape::replicated(&mover)?;
    let batch_slots = batch_or_default(a.batch_slots, replicated)?;
    if replicated && a.plan {
        return crate::cluster_reshape::print_plan(&mover, &client, &members, a.json);
    }
    if replicated {
        let what = format!("rebalanced over servers {members:?}");
        let extra = serde_json::json!({ "members": members });
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
    let t0 = Instant::now();
    let (moves, done) = with_bar(a.json || a.plan, |p| {
        mover.rebalance(&members, batch_slots, a.plan, p)
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
    if let Some(b) = a.batch_slots {
        check_batch(b)?;
    }
    let (client, m, dir) = open(&a.at)?;
    if a.id as usize >= client.machines() {
        return Err(format!("no server {} in a cluster of {}", a.id, client.machines()).into());
    }
    let mover = mover(&client, &m, &dir, "remove-server")?;
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
    let replicated = crate::cluster_reshape::replicated(&mover)?;
    let batch_slots = batch_or_default(a.batch_slots, replicated)?;
    if replicated {
        return crate::cluster_reshape::remove(&a, &client, mover, &members, batch_slots);
    }
    let t0 = Instant::now();
    let (_, done) = with_bar(a.json, |p| mover.rebalance(&members, batch_slots, false, p))?;
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
pub(crate) fn stop_server(dir: &Path, id: u8) -> bool {
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
    let (client, m, dir) = open(&a.at)?;
    if a.cancel {
        return cancel(&dir, a.json);
    }
    let mover = Mover::new(&client, &m);
    let now = running(&dir);
    if a.settle {
        if let Some(p) = &now {
            return Err(format!(
                "a {} (pid {}) is moving slots now: nothing to settle until it ends (`cluster moves --cancel` stops it)",
                p.command, p.pid
            )
            .into());
        }
    }
    let journal = Journal::read(&dir);
    let settled = if a.settle { mover.settle()? } else { 0 };
    let (_, table) = mover.table()?;
    let counts = table.counts();
    let servers = mover.in_flight();
    // Who drives moves now, and what a driver that died left to finish
    // (docs/design.md "One mover at a time").
    let driver = m.mover_holder()?;
    let goal: Option<serde_json::Value> =
        m.goal_load()?.and_then(|g| serde_json::from_slice(&g).ok());
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
        let mv = journal.as_ref().map(|p| {
            let mut j = serde_json::to_value(p).unwrap_or_default();
            j["alive"] = process_alive(p.pid).into();
            j["rate_slots_per_s"] = p.rate().into();
            j["eta_s"] = p.eta_s().into();
            j
        });
        println!(
            "{}",
            serde_json::json!({"table_epoch": table.epoch(), "settled": settled, "driver": driver, "goal": goal, "servers": rows, "move": mv})
        );
        return Ok(());
    }
    if let Some(p) = &journal {
        println!("{}", journal_line(p));
    }
    if a.settle {
        println!("settled {settled} batch(es) an interrupted move left in flight");
    }
    match &driver {
        Some(d) => println!(
            "moves are driven by {d}{}",
            goal.as_ref()
                .map_or(String::new(), |g| format!(", toward {g}"))
        ),
        None => println!(
            "no mover runs (the coordinator settles a batch left in flight within a few seconds)"
        ),
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
                let why = match &now {
                    Some(_) => "the running move's batch in hand",
                    None => {
                        "a move was interrupted: `cluster moves --settle` finishes or rolls it back"
                    }
                };
                println!(
                    "server {id}: {n} slots, {out} leaving and {} arriving ({why})",
                    f.len() - out
                );
            }
        }
    }
    Ok(())
}

/// How long `--cancel` waits for the mover to move its slots back.
const CANCEL_WAIT: Duration = Duration::from_secs(600);

/// `cluster moves --cancel`.
fn cancel(dir: &Path, json: bool) -> CliResult {
    let Some(p) = running(dir) else {
        return Err(format!("no move is running in {}", dir.display()).into());
    };
    Journal::request_cancel(dir)
        .map_err(|e| format!("cannot ask the mover to cancel in {}: {e}", dir.display()))?;
    if !json {
        println!(
            "asked the {} (pid {}) to stop; it moves back the {} slot(s) it moved",
            p.command, p.pid, p.slots_done
        );
    }
    let t0 = Instant::now();
    let end = loop {
        let now = Journal::read(dir);
        match now {
            Some(q) if q.state == "running" && process_alive(q.pid) => {}
            Some(q) => break q,
            None => return Err("the mover's journal disappeared".into()),
        }
        if t0.elapsed() > CANCEL_WAIT {
            return Err(format!(
                "the {} (pid {}) has not ended {} s after the request",
                p.command,
                p.pid,
                CANCEL_WAIT.as_secs()
            )
            .into());
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    if json {
        println!("{}", serde_json::to_value(&end)?);
    } else {
        println!("{}", journal_line(&end));
    }
    Ok(())
}
