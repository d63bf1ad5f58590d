//! The embedded store on disk (`<data_dir>/queue.aof`): the effects of every call that wrote,
//! as Redis's append-only file keeps them. Each call's writes are one `MULTI` … `EXEC` of
//! RESP arrays, so a call is replayed whole or, torn by a crash, not at all.
//!
//! Writes are batched: one thread writes what has come since its last write and syncs it to
//! disk once for all of it (group commit). A call that wrote answers after the sync of its
//! batch, never a sync of its own, so every answer given is on disk. At start the file is
//! replayed and written anew as one snapshot of the keyspace (compaction).

use std::fs::{File, OpenOptions};
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use ::redis::Value;
use tokio::sync::watch;

use super::keyspace::{Data, Keyspace};
use super::Bytes;

/// How many values a snapshot's command carries at most (a big hash is several HSETs).
const SNAPSHOT_CHUNK: usize = 1000;

/// The writer's progress: the last batch on disk, or why writing stopped.
#[derive(Clone, Debug)]
enum Synced {
    Upto(u64),
    Failed(String),
}

pub(super) struct Journal {
    /// Records to the writer thread, each with its number.
    to_writer: mpsc::Sender<(u64, Vec<u8>)>,
    /// The number of the last record queued (records are queued under the store's lock, so in
    /// the order their calls ran).
    queued: std::sync::atomic::AtomicU64,
    synced: watch::Receiver<Synced>,
}

/// Appends one command as a RESP array, as the Redis client packs it.
pub(super) fn encode(out: &mut Vec<u8>, argv: &[impl AsRef<[u8]>]) {
    let mut cmd = ::redis::Cmd::new();
    for a in argv {
        cmd.arg(a.as_ref());
    }
    cmd.write_packed_command(out);
}

/// One call's effects as a transaction.
pub(super) fn transaction(effects: &[Vec<Bytes>]) -> Vec<u8> {
    let mut out = Vec::new();
    encode(&mut out, &["MULTI"]);
    for e in effects {
        encode(&mut out, e);
    }
    encode(&mut out, &["EXEC"]);
    out
}

/// The next command of a journal, read by the Redis client's parser: a RESP array of bulk
/// strings; `None` at the end, or at a torn or malformed tail.
fn next_command(parser: &mut ::redis::Parser, input: &mut impl Read) -> Option<Vec<Bytes>> {
    match parser.parse_value(input).ok()? {
        Value::Array(items) => items
            .into_iter()
            .map(|item| match item {
                Value::BulkString(bytes) => Some(bytes),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// Replays a journal into `keyspace`: every whole transaction; a torn one at the end is left
/// out. Returns how many were replayed.
fn replay(path: &Path, keyspace: &mut Keyspace) -> anyhow::Result<u64> {
    let Ok(file) = File::open(path) else {
        return Ok(0);
    };
    let (mut parser, mut input) = (::redis::Parser::new(), BufReader::new(file));
    let mut pending: Vec<Vec<Bytes>> = Vec::new();
    let (mut open, mut replayed) = (false, 0);
    let mut ignored = Vec::new();
    while let Some(argv) = next_command(&mut parser, &mut input) {
        match argv.first().map(|n| n.to_ascii_uppercase()).as_deref() {
            Some(b"MULTI") => {
                pending.clear();
                open = true;
            }
            Some(b"EXEC") if open => {
                for argv in pending.drain(..) {
                    // A journal holds only what once ran; a command that fails now is a
                    // journal not written by this store, and is reported.
                    keyspace.run(0, &argv, &mut ignored).map_err(|e| {
                        anyhow::anyhow!("{}: a journalled command failed: {e}", path.display())
                    })?;
                    ignored.clear();
                }
                open = false;
                replayed += 1;
            }
            _ if open => pending.push(argv),
            _ => anyhow::bail!("{}: a command outside a transaction", path.display()),
        }
    }
    Ok(replayed)
}

/// The keyspace as commands that build it again.
fn snapshot(keyspace: &Keyspace, out: &mut impl Write) -> std::io::Result<()> {
    let mut buf = Vec::new();
    encode(&mut buf, &["MULTI"]);
    for (key, entry) in &keyspace.entries {
        let mut chunks = |name: &str, values: Vec<&[u8]>, per: usize| {
            for chunk in values.chunks(SNAPSHOT_CHUNK * per) {
                let mut argv: Vec<&[u8]> = vec![name.as_bytes(), key];
                argv.extend(chunk);
                encode(&mut buf, &argv);
            }
        };
        match &entry.data {
            Data::String(s) => encode(&mut buf, &[b"SET".as_slice(), key, s]),
            Data::Hash(h) => chunks(
                "HSET",
                h.iter().flat_map(|(f, v)| [f.as_slice(), v]).collect(),
                2,
            ),
            Data::Set(s) => chunks("SADD", s.iter().map(Vec::as_slice).collect(), 1),
            Data::List(l) => chunks("RPUSH", l.iter().map(Vec::as_slice).collect(), 1),
            Data::SortedSet(z) => {
                let scores: Vec<(String, &Bytes)> = z
                    .iter()
                    .map(|(s, m)| (super::sorted_set::Score::format(s), m))
                    .collect();
                chunks(
                    "ZADD",
                    scores
                        .iter()
                        .flat_map(|(s, m)| [s.as_bytes(), m.as_slice()])
                        .collect(),
                    2,
                )
            }
        }
        if let Some(at) = entry.expires_at_ms {
            encode(
                &mut buf,
                &[b"PEXPIREAT".as_slice(), key, at.to_string().as_bytes()],
            );
        }
        if buf.len() > 1 << 20 {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    encode(&mut buf, &["EXEC"]);
    out.write_all(&buf)
}

impl Journal {
    /// Replays the journal at `path` into `keyspace`, writes it anew as a snapshot, and opens
    /// it for appending.
    pub fn open(path: &Path, keyspace: &mut Keyspace) -> anyhow::Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let replayed = replay(path, keyspace)?;
        let fresh = path.with_extension("aof.new");
        {
            let mut out = BufWriter::new(File::create(&fresh)?);
            snapshot(keyspace, &mut out)?;
            out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        }
        std::fs::rename(&fresh, path)?;
        if let Some(dir) = path.parent() {
            File::open(dir)?.sync_all()?;
        }
        tracing::debug!(path = %path.display(), replayed, keys = keyspace.entries.len(), "queue store journal replayed");
        let file = OpenOptions::new().append(true).open(path)?;
        let (to_writer, from_callers) = mpsc::channel();
        let (report, synced) = watch::channel(Synced::Upto(0));
        let path = path.to_path_buf();
        std::thread::Builder::new()
            .name("queue-journal".into())
            .spawn(move || write_batches(path, file, from_callers, report))?;
        Ok(Journal {
            to_writer,
            queued: 0.into(),
            synced,
        })
    }

    /// Queues one call's effects (under the store's lock, so in the order calls ran): the
    /// number to wait for.
    pub fn append(&self, record: Vec<u8>) -> u64 {
        let n = self
            .queued
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            + 1;
        // A writer gone has reported why; the wait below answers it.
        let _ = self.to_writer.send((n, record));
        n
    }

    /// Waits until record `n` is on disk.
    pub async fn synced(&self, n: u64) -> Result<(), String> {
        let mut rx = self.synced.clone();
        let state = rx
            .wait_for(|s| matches!(s, Synced::Failed(_)) || matches!(s, Synced::Upto(u) if *u >= n))
            .await
            .map_err(|_| "the queue store's journal writer stopped".to_owned())?;
        match &*state {
            Synced::Failed(e) => Err(e.clone()),
            Synced::Upto(_) => Ok(()),
        }
    }
}

/// The writer thread: takes what has come, writes it, syncs once, reports the last number.
fn write_batches(
    path: PathBuf,
    file: File,
    from_callers: mpsc::Receiver<(u64, Vec<u8>)>,
    report: watch::Sender<Synced>,
) {
    let mut out = BufWriter::with_capacity(1 << 20, file);
    while let Ok((mut last, record)) = from_callers.recv() {
        let mut result = out.write_all(&record);
        let mut calls = 1;
        while let Ok((n, record)) = from_callers.try_recv() {
            last = n;
            calls += 1;
            result = result.and_then(|()| out.write_all(&record));
        }
        metrics::histogram!("sluice_queue_journal_batch_size").record(f64::from(calls));
        let result = result
            .and_then(|()| out.flush())
            .and_then(|()| out.get_ref().sync_data());
        if let Err(e) = result {
            let why = format!("{}: {e}", path.display());
            tracing::error!(error = %why, "queue store journal write failed; calls that write fail from now");
            report.send_replace(Synced::Failed(why));
            return;
        }
        report.send_replace(Synced::Upto(last));
    }
}
