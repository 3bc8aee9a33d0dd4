//! The coordinator's durable record of approved migrations (Pragh 3).
//!
//! One redb table maps a key (`u64`) to the latest target approved for it
//! (`u8`, a machine id). [`Record::persist`] writes a batch in one
//! transaction and returns only once redb has committed it (redb's default
//! durability: the commit is on disk), so a driver that persists before it
//! starts the migrations cannot lose an approval to a crash.

use std::path::{Path, PathBuf};

use locus_fabric::MachineId;
use locus_store::Key;
use redb::{Database, ReadableTable, TableDefinition};

use crate::error::{CoordinatorError, Result};
use crate::policy::{Action, Event};

const TARGETS: TableDefinition<u64, u8> = TableDefinition::new("latest_target");

/// The record file.
#[derive(Debug)]
pub struct Record {
    db: Database,
    path: PathBuf,
}

impl Record {
    /// Opens `path`, creating an empty record if it does not exist.
    /// A file that is not a record is [`CoordinatorError::RecordOpen`].
    pub fn open(path: &Path) -> Result<Record> {
        let db = Database::create(path).map_err(|e| CoordinatorError::RecordOpen {
            path: path.to_path_buf(),
            source: Box::new(e),
        })?;
        let r = Record {
            db,
            path: path.to_path_buf(),
        };
        // Create the table so an empty record reads as empty.
        r.persist(&[])?;
        Ok(r)
    }

    /// A [`CoordinatorError::Record`] for a redb failure while doing `action`.
    fn io(&self, action: &'static str) -> impl Fn(redb::Error) -> CoordinatorError + '_ {
        move |e| CoordinatorError::Record {
            path: self.path.clone(),
            action,
            source: Box::new(e),
        }
    }

    /// Durably records each (key, latest target), in one transaction.
    pub fn persist(&self, entries: &[(Key, MachineId)]) -> Result<()> {
        let io = self.io("persisting approvals");
        let tx = self.db.begin_write().map_err(|e| io(e.into()))?;
        {
            let mut t = tx.open_table(TARGETS).map_err(|e| io(e.into()))?;
            for &(key, target) in entries {
                t.insert(key.0, target).map_err(|e| io(e.into()))?;
            }
        }
        tx.commit().map_err(|e| io(e.into()))
    }

    /// Persist-then-act (Pragh 4.4): makes the target of every
    /// [`Action::Persist`] in `actions` durable, in one transaction, before
    /// the caller carries out any of them. On failure nothing is approved: the
    /// caller must drop the batch's `Migrate` actions and feed the coordinator
    /// the returned events (each approval ended, not at its target), so it
    /// sees the keys again in later reports.
    pub fn persist_approvals(
        &self,
        actions: &[Action],
    ) -> std::result::Result<(), (CoordinatorError, Vec<Event>)> {
        let persist: Vec<(Key, MachineId)> = actions
            .iter()
            .filter_map(|a| match a {
                Action::Persist { key, target } => Some((*key, *target)),
                _ => None,
            })
            .collect();
        if persist.is_empty() {
            return Ok(());
        }
        self.persist(&persist).map_err(|e| {
            let undo = persist
                .into_iter()
                .map(|(key, to)| Event::Migrated { key, to, ok: false })
                .collect();
            (e, undo)
        })
    }

    /// Every recorded (key, latest target), by key.
    pub fn load(&self) -> Result<Vec<(Key, MachineId)>> {
        let io = self.io("loading approvals");
        let tx = self.db.begin_read().map_err(|e| io(e.into()))?;
        let t = tx.open_table(TARGETS).map_err(|e| io(e.into()))?;
        let mut out = Vec::new();
        for row in t.iter().map_err(|e| io(e.into()))? {
            let (k, v) = row.map_err(|e| io(e.into()))?;
            out.push((Key(k.value()), v.value()));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn survives_reopen_and_keeps_the_latest_target() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("coord.redb");
        {
            let r = Record::open(&path).unwrap();
            assert!(r.load().unwrap().is_empty());
            r.persist(&[(Key(7), 3), (Key(9), 1)]).unwrap();
            r.persist(&[(Key(7), 5)]).unwrap();
        }
        let r = Record::open(&path).unwrap();
        assert_eq!(r.load().unwrap(), vec![(Key(7), 5), (Key(9), 1)]);
    }

    #[test]
    fn a_file_that_is_not_a_record_is_refused_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("junk.redb");
        std::fs::write(
            &path,
            b"this is not a redb file, just some text that is long enough",
        )
        .unwrap();
        let e = Record::open(&path).unwrap_err();
        assert!(
            matches!(&e, CoordinatorError::RecordOpen { path: p, .. } if *p == path),
            "{e:?}"
        );
        let msg = e.to_string();
        assert!(
            msg.contains("junk.redb") && msg.contains("delete it"),
            "{msg}"
        );
    }
}
