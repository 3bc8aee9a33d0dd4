//! `locus cluster rebalance --primaries`: after failovers the primaries
//! stay where they failed over to; this gives them back evenly, each slot
//! handed to a backup of it that already holds every list (issue 60
//! requirement 3; the driver is `locus_server::moves::handover`).

use std::time::Instant;

use locus_server::moves::HandedOver;

use crate::cluster_move::{check_batch, mover, open, with_bar, RebalanceArgs};
use crate::CliResult;

/// Slots per handover unless `--batch-slots` says otherwise.
const BATCH_SLOTS: usize = 64;

pub(crate) fn run(a: RebalanceArgs) -> CliResult {
    let batch_slots = a.batch_slots.unwrap_or(BATCH_SLOTS);
    check_batch(batch_slots)?;
    let (client, m, dir) = open(&a.at)?;
    let mover = mover(&client, &m, &dir, "rebalance --primaries")?;
    let plan = mover.primary_plan(batch_slots)?;
    let (_, before) = mover.table()?;
    let servers = client.machines() as u8;
    let owners = |t: &locus_store::SlotTable| -> Vec<u32> {
        (0..servers)
            .map(|id| {
                (0..t.slots())
                    .filter(|&s| t.owner_of_slot(s) == Some(id))
                    .count() as u32
            })
            .collect()
    };
    let mut pairs: std::collections::BTreeMap<(u8, u8), usize> = Default::default();
    for h in &plan {
        *pairs.entry((h.from, h.to)).or_default() += h.slots.len();
    }
    if a.plan || plan.is_empty() {
        if a.json {
            let rows: Vec<_> = pairs
                .iter()
                .map(|((f, t), n)| serde_json::json!({"from": f, "to": t, "slots": n}))
                .collect();
            println!(
                "{}",
                serde_json::json!({"primaries": owners(&before), "handovers": rows})
            );
        } else if pairs.is_empty() {
            println!(
                "primaries per server {:?}: as even as the backups allow, nothing to hand over",
                owners(&before)
            );
        } else {
            for ((f, t), n) in pairs {
                println!("{n} slot(s) from server {f} to its backup server {t}");
            }
        }
        return Ok(());
    }
    let total: u64 = plan.iter().map(|h| h.slots.len() as u64).sum();
    let t0 = Instant::now();
    let mut done = HandedOver::default();
    with_bar(a.json, |p| -> CliResult {
        p(0, total);
        for h in &plan {
            let r = mover.hand_over(h).map_err(|e| {
                format!(
                    "{e} ({} of {total} slot(s) handed over before it; run the command again to go on)",
                    done.slots
                )
            })?;
            done.slots += r.slots;
            done.vertices += r.vertices;
            done.table_epoch = r.table_epoch;
            p(done.slots, total);
        }
        Ok(())
    })?;
    let secs = t0.elapsed().as_secs_f64();
    let (_, after) = mover.table()?;
    if a.json {
        println!(
            "{}",
            serde_json::json!({
                "handovers": plan.len(), "slots": done.slots, "vertices": done.vertices,
                "table_epoch": done.table_epoch, "seconds": secs,
                "primaries_before": owners(&before), "primaries": owners(&after),
            })
        );
    } else {
        println!(
            "primaries given back: {} slot(s) in {} handover(s), {} vertices now served by their new primaries, in {secs:.2} s; primaries per server {:?} (were {:?}); slot table epoch {}",
            done.slots,
            plan.len(),
            done.vertices,
            owners(&after),
            owners(&before),
            done.table_epoch
        );
    }
    Ok(())
}
