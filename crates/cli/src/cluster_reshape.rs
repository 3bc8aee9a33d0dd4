//! `cluster rebalance | move | add-server | remove-server` on a replicated
//! cluster (issue 60 with issue 59's commands): slots change servers by
//! copies to new backups and handovers to backups, never by a plain slot
//! move (`docs/design.md`, "A replicated cluster changes shape"; the
//! driver is `locus_server::moves::reshape`).

use std::time::Instant;

use locus_client::Client;
use locus_server::moves::{Mover, ReshapeStep, Reshaped};
use locus_store::SlotTable;

use crate::cluster_move::with_bar;
use crate::CliResult;

/// Slots per batch of a replicated cluster's steps unless `--batch-slots`
/// says otherwise (one commit and one install per batch).
pub(crate) const BATCH_SLOTS: usize = 64;

/// Whether the cluster keeps each slot on more than one server.
pub(crate) fn replicated(mover: &Mover) -> CliResult<bool> {
    Ok(mover.table()?.1.replication() > 1)
}

/// Slots each server owns and backs in `t`, as JSON.
fn shape_json(t: &SlotTable, servers: u8) -> serde_json::Value {
    let (owns, backs) = shape(t, servers);
    serde_json::json!({"primaries": owns, "backups": backs})
}

fn shape(t: &SlotTable, servers: u8) -> (Vec<u32>, Vec<u32>) {
    let owns = (0..servers)
        .map(|id| {
            (0..t.slots())
                .filter(|&s| t.owner_of_slot(s) == Some(id))
                .count() as u32
        })
        .collect();
    let backs = (0..servers)
        .map(|id| (0..t.slots()).filter(|&s| t.is_backup(s, id)).count() as u32)
        .collect();
    (owns, backs)
}

/// The result of a run, as JSON (the plain moves' `slots` and `batches`
/// count the copies and handovers together).
fn done_json(r: &Reshaped, secs: f64, t: &SlotTable, servers: u8) -> serde_json::Value {
    let mut j = serde_json::json!({
        "replication": t.replication(),
        "slots": r.slots_copied + r.slots_handed, "batches": r.rejoins + r.handovers,
        "slots_copied": r.slots_copied, "rejoins": r.rejoins,
        "slots_handed": r.slots_handed, "handovers": r.handovers,
        "vertices": r.vertices, "bytes": r.bytes,
        "table_epoch": r.table_epoch, "seconds": secs,
    });
    j["shape"] = shape_json(t, servers);
    j
}

/// The result of a run, for a reader.
fn print_done(what: &str, r: &Reshaped, secs: f64, t: &SlotTable, servers: u8) {
    let (owns, backs) = shape(t, servers);
    println!(
        "{what}: {} slot(s) copied to new backups in {} batch(es) ({} vertices, {} bytes), {} slot(s) handed to a backup in {} batch(es), in {secs:.2} s; primaries per server {owns:?}, backups per server {backs:?}; slot table epoch {}",
        r.slots_copied, r.rejoins, r.vertices, r.bytes, r.slots_handed, r.handovers, r.table_epoch
    );
}

/// Runs the reshaping over `members` with a progress bar (the mover keeps
/// a rejoin's goal on error, for the coordinator) and prints what it did:
/// `what` for a reader, or JSON with `extra` fields.
pub(crate) fn reshape_and_report(
    mover: Mover,
    client: &Client,
    members: &[u8],
    batch_slots: usize,
    json: bool,
    what: &str,
    extra: serde_json::Value,
) -> CliResult {
    let mover = mover.keeping_goal_on_error();
    let t0 = Instant::now();
    let r = with_bar(json, |p| mover.reshape(members, batch_slots, p))?;
    report(&mover, client, &r, t0, json, what, extra)
}

/// Prints what a run did (see [`reshape_and_report`]).
pub(crate) fn report(
    mover: &Mover,
    client: &Client,
    r: &Reshaped,
    t0: Instant,
    json: bool,
    what: &str,
    extra: serde_json::Value,
) -> CliResult {
    let secs = t0.elapsed().as_secs_f64();
    let (_, after) = mover.table()?;
    let servers = client.machines() as u8;
    if json {
        let mut j = done_json(r, secs, &after, servers);
        if let (Some(j), serde_json::Value::Object(extra)) = (j.as_object_mut(), extra) {
            j.extend(extra);
        }
        println!("{j}");
    } else {
        print_done(what, r, secs, &after, servers);
    }
    Ok(())
}

/// `cluster rebalance --plan` with replication: the plan's steps summed
/// per kind and pair.
pub(crate) fn print_plan(mover: &Mover, client: &Client, members: &[u8], json: bool) -> CliResult {
    let plan = mover.reshape_plan(members)?;
    let mut copies: std::collections::BTreeMap<(u8, u8), u64> = Default::default();
    let mut handed: std::collections::BTreeMap<(u8, u8), u64> = Default::default();
    for s in &plan.steps {
        match s {
            ReshapeStep::Rejoin {
                owner,
                learner,
                slots,
                ..
            } => *copies.entry((*owner, *learner)).or_default() += slots.len() as u64,
            ReshapeStep::HandOver { from, to, slots } => {
                *handed.entry((*from, *to)).or_default() += slots.len() as u64
            }
        }
    }
    let (_, before) = mover.table()?;
    if json {
        let rows = |m: &std::collections::BTreeMap<(u8, u8), u64>| -> Vec<serde_json::Value> {
            m.iter()
                .map(|((f, t), n)| serde_json::json!({"from": f, "to": t, "slots": n}))
                .collect()
        };
        println!(
            "{}",
            serde_json::json!({
                "members": members, "replication": before.replication(),
                "copies": rows(&copies), "handovers": rows(&handed),
                "rounds": plan.rounds, "done": plan.done,
                "shape": shape_json(&before, client.machines() as u8),
            })
        );
        return Ok(());
    }
    if plan.steps.is_empty() {
        println!(
            "balanced over servers {members:?} (replication {}): nothing to move",
            before.replication()
        );
        return Ok(());
    }
    for ((f, t), n) in &copies {
        println!("{n} slot(s) of server {f} copied to server {t}, a new backup of them");
    }
    for ((f, t), n) in &handed {
        println!("{n} slot(s) handed from server {f} to its backup server {t}");
    }
    if !plan.done {
        println!(
            "(the plan stops after {} rounds short of even: run the command again afterwards)",
            plan.rounds
        );
    }
    Ok(())
}

/// `cluster remove-server` with replication: server `a.id`'s primaries
/// handed to backups of theirs and its copies made on the members, then
/// the values Pragh migrated onto it recalled and the server stopped, all
/// under the mover's lock (so that the coordinator's rejoins do not make
/// it a backup again before it stops).
pub(crate) fn remove(
    a: &crate::cluster_move::RemoveArgs,
    client: &Client,
    mover: Mover,
    members: &[u8],
    batch_slots: usize,
) -> CliResult {
    let mover = mover.keeping_goal_on_error();
    let t0 = Instant::now();
    let (r, (recalled, recalled_bytes), stopped) = mover.holding(|| {
        let r = with_bar(a.json, |p| mover.reshape(members, batch_slots, p))?;
        // Never stop a server that still holds a copy: with some slot's
        // last copies it would take them away.
        let (_, t) = mover.table()?;
        let held = (0..t.slots())
            .filter(|&s| t.owner_of_slot(s) == Some(a.id) || t.is_backup(s, a.id))
            .count();
        if held > 0 {
            return Err(locus_server::ServerError::Move(format!(
                "server {} still holds {held} slot(s) after the plan (table epoch {}): it is not stopped; run the command again",
                a.id,
                t.epoch()
            )));
        }
        let recalled = mover.recall(a.id)?;
        let stopped = crate::cluster_move::stop_server(&a.at.dir, a.id);
        Ok((r, recalled, stopped))
    })?;
    let secs = t0.elapsed().as_secs_f64();
    let (_, after) = mover.table()?;
    let servers = client.machines() as u8;
    if a.json {
        let mut j = done_json(&r, secs, &after, servers);
        j["id"] = a.id.into();
        j["values_recalled"] = recalled.into();
        j["bytes_recalled"] = recalled_bytes.into();
        j["stopped"] = stopped.into();
        println!("{j}");
        return Ok(());
    }
    print_done(
        &format!("server {} drained", a.id),
        &r,
        secs,
        &after,
        servers,
    );
    println!("{recalled} value(s) ({recalled_bytes} bytes) migrated back to their homes");
    if stopped {
        println!(
            "server {} stopped; it holds no slot and no copy (`cluster up --dir` would start it again, and the coordinator would make it a backup again)",
            a.id
        );
    } else {
        println!(
            "server {} holds no slot and no copy now; no live process of it is recorded in {}: stop it yourself",
            a.id,
            a.at.dir.display()
        );
    }
    Ok(())
}
