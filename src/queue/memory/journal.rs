//! The embedded store's waiting lines on disk (`<data_dir>/lines.journal`), so a restart, a
//! clean one or a crash, finds every waiting user in their place.
//!
//! Only the lines are kept: the stock, the holds and the active set are the ledger's, and the
//! store is rebuilt from it as after a Redis flush. A line is a journal of JSON lines: a
//! sale's line begun (or written whole, after a lottery's draw), a join with its serial, a
//! departure (admitted, left, abandoned), a closed sale's line let go. Writes are batched: one
//! thread writes what has come since its last write and syncs it to disk once for all of it.
//! A join's answer waits for the sync of its batch (group commit), never a sync of its own, so
//! every join answered is on disk; a crash loses only joins not answered yet, whose clients
//! ask again. Departures do not wait: one lost to a crash puts its user back in line, unless
//! the ledger has them admitted since (the rebuild takes those out). At start the journal is
//! read and written anew, compacted to one record per sale.

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::{SaleId, UserId};

/// One record of the journal.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "t")]
pub(super) enum Record {
    /// The sale's line, whole: its numbering, last serial, whether its lottery was drawn, and
    /// who waits at which serial.
    #[serde(rename = "line")]
    Line {
        sale: Uuid,
        epoch: String,
        seq: u64,
        drawn: bool,
        #[serde(default)]
        drawn_from: Option<u64>,
        waiting: Vec<(u64, Uuid, String)>,
    },
    /// A user joined (or came back to their place) at `seq`.
    #[serde(rename = "join")]
    Join {
        sale: Uuid,
        seq: u64,
        attempt: Uuid,
        user: String,
    },
    /// An attempt left the line.
    #[serde(rename = "gone")]
    Gone { sale: Uuid, attempt: Uuid },
    /// A closed sale let go of everyone waiting.
    #[serde(rename = "clear")]
    Clear { sale: Uuid },
}

/// A sale's line as the journal kept it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct SavedLine {
    pub epoch: String,
    pub seq: u64,
    pub drawn: bool,
    /// The serial the last draw ordered from (none in a journal of before the phases).
    pub drawn_from: Option<u64>,
    /// Serial → (attempt, user), in the line's order.
    pub waiting: BTreeMap<u64, (Uuid, UserId)>,
}

impl SavedLine {
    fn apply(lines: &mut HashMap<SaleId, SavedLine>, record: Record) {
        match record {
            Record::Line {
                sale,
                epoch,
                seq,
                drawn,
                drawn_from,
                waiting,
            } => {
                let waiting = waiting
                    .into_iter()
                    .filter_map(|(serial, attempt, user)| {
                        Some((serial, (attempt, UserId::parse(&user).ok()?)))
                    })
                    .collect();
                lines.insert(
                    SaleId(sale),
                    SavedLine {
                        epoch,
                        seq,
                        drawn,
                        drawn_from,
                        waiting,
                    },
                );
            }
            Record::Join {
                sale,
                seq,
                attempt,
                user,
            } => {
                if let (Some(line), Ok(user)) = (lines.get_mut(&SaleId(sale)), UserId::parse(&user))
                {
                    line.seq = line.seq.max(seq);
                    line.waiting.insert(seq, (attempt, user));
                }
            }
            Record::Gone { sale, attempt } => {
                if let Some(line) = lines.get_mut(&SaleId(sale)) {
                    line.waiting.retain(|_, (a, _)| *a != attempt);
                }
            }
            Record::Clear { sale } => {
                if let Some(line) = lines.get_mut(&SaleId(sale)) {
                    line.waiting.clear();
                }
            }
        }
    }

    /// The line as one record.
    pub(super) fn record(&self, sale: SaleId) -> Record {
        Record::Line {
            sale: sale.0,
            epoch: self.epoch.clone(),
            seq: self.seq,
            drawn: self.drawn,
            drawn_from: self.drawn_from,
            waiting: self
                .waiting
                .iter()
                .map(|(serial, (attempt, user))| (*serial, *attempt, user.as_str().to_owned()))
                .collect(),
        }
    }
}

/// A record for the writer, and who waits for its sync.
type Entry = (Record, Option<tokio::sync::oneshot::Sender<bool>>);

/// The journal being written.
pub(super) struct Journal {
    to_writer: mpsc::Sender<Entry>,
    /// An exclusive lock on `lines.lock` beside the journal, held as long as the process
    /// lives: a second sluice on the same data directory (or `sluice reconcile` while one
    /// serves) would compact the journal under the first one's feet.
    _lock: File,
}

impl Journal {
    /// Reads the journal at `path` (none yet: no lines), writes it anew compacted, and starts
    /// the thread that appends to it; the lines it held.
    pub(super) fn open(path: &Path) -> anyhow::Result<(Journal, HashMap<SaleId, SavedLine>)> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let lock = File::create(path.with_extension("lock"))?;
        if lock.try_lock().is_err() {
            anyhow::bail!(
                "the waiting lines in {} are in use by another sluice (one data directory, one \
                 process)",
                path.display()
            );
        }
        let mut lines = HashMap::new();
        if let Ok(file) = File::open(path) {
            for line in BufReader::new(file).lines() {
                // A record cut short by a crash is the last one: it and what follows are lost.
                let Ok(record) = serde_json::from_str::<Record>(&line?) else {
                    break;
                };
                SavedLine::apply(&mut lines, record);
            }
        }
        let compacted = path.with_extension("journal.new");
        {
            let mut out = BufWriter::new(File::create(&compacted)?);
            for (sale, line) in &lines {
                serde_json::to_writer(&mut out, &line.record(*sale))?;
                out.write_all(b"\n")?;
            }
            out.into_inner()?.sync_all()?;
        }
        std::fs::rename(&compacted, path)?;
        let file = OpenOptions::new().append(true).open(path)?;
        let (tx, rx) = mpsc::channel();
        let path = path.to_owned();
        std::thread::Builder::new()
            .name("sluice-journal".into())
            .spawn(move || write_batches(file, path, rx))?;
        let journal = Journal {
            to_writer: tx,
            _lock: lock,
        };
        Ok((journal, lines))
    }

    /// Appends `record`; resolves once it is on disk (false: it could not be written).
    pub(super) fn append_synced(&self, record: Record) -> tokio::sync::oneshot::Receiver<bool> {
        let (done, synced) = tokio::sync::oneshot::channel();
        self.send((record, Some(done)));
        synced
    }

    /// Appends `record` with the next batch, waiting for nothing.
    pub(super) fn append(&self, record: Record) {
        self.send((record, None));
    }

    fn send(&self, entry: Entry) {
        // The writer lives as long as the process: a send cannot fail but at exit.
        let _ = self.to_writer.send(entry);
    }
}

/// The writer: takes everything sent since its last write, writes it, syncs once, and tells
/// those who wait.
fn write_batches(file: File, path: PathBuf, rx: mpsc::Receiver<Entry>) {
    let mut out = BufWriter::new(file);
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        batch.extend(rx.try_iter());
        let mut ok = true;
        for (record, _) in &batch {
            ok &= serde_json::to_writer(&mut out, record).is_ok() && out.write_all(b"\n").is_ok();
        }
        ok &= out.flush().is_ok() && out.get_ref().sync_data().is_ok();
        if !ok {
            tracing::warn!(path = %path.display(), "the waiting lines could not be written to disk");
        }
        metrics::histogram!("sluice_queue_journal_batch_size").record(batch.len() as f64);
        for (_, waiter) in batch {
            if let Some(waiter) = waiter {
                let _ = waiter.send(ok);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_journal() -> PathBuf {
        std::env::temp_dir()
            .join(format!("sluice-journal-{}", Uuid::new_v4().simple()))
            .join("lines.journal")
    }

    /// What was synced is read back after the journal is opened again (compacted), a
    /// departure and a cleared line included; a record cut short at the end is dropped.
    #[test]
    fn a_line_comes_back_as_it_was_written() {
        let path = temp_journal();
        let sale = Uuid::now_v7();
        let (a, b, c) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        {
            let (journal, lines) = Journal::open(&path).unwrap();
            assert!(lines.is_empty());
            let line = SavedLine {
                epoch: "e1".into(),
                ..SavedLine::default()
            };
            journal.append(line.record(SaleId(sale)));
            for (seq, attempt, user) in [(1, a, "ann"), (2, b, "bob"), (3, c, "cy")] {
                let user = user.to_owned();
                journal.append(Record::Join {
                    sale,
                    seq,
                    attempt,
                    user,
                });
            }
            let gone = Record::Gone { sale, attempt: b };
            assert!(journal.append_synced(gone).blocking_recv().unwrap());
        }
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"t\":\"join\",\"sa")
            .unwrap();
        let (_journal, lines) = Journal::open(&path).unwrap();
        let line = &lines[&SaleId(sale)];
        assert_eq!((line.epoch.as_str(), line.seq), ("e1", 3));
        let waiting: Vec<(u64, Uuid)> = line.waiting.iter().map(|(s, (a, _))| (*s, *a)).collect();
        assert_eq!(waiting, [(1, a), (3, c)]);
    }

    /// One data directory, one process: a second journal on the same file is refused while
    /// the first is open, and taken once it is closed.
    #[test]
    fn a_second_opener_is_refused_while_the_first_holds_the_journal() {
        let path = temp_journal();
        let first = Journal::open(&path).unwrap();
        let refused = Journal::open(&path).err().expect("refused").to_string();
        assert!(refused.contains("in use by another sluice"), "{refused}");
        drop(first);
        assert!(Journal::open(&path).is_ok());
    }
}
