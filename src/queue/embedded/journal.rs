//! The embedded store on disk (`<data_dir>/queue.aof`): the effects of every call that wrote,
//! as Redis's append-only file keeps them. Each call's writes are one `MULTI` … `EXEC` of
//! RESP arrays, so a call is replayed whole or, torn by a crash, not at all.
//!
//! Writes are batched: one thread writes what has come since its last write and syncs it to
//! disk once for all of it (group commit). A call that wrote answers after the sync of its
//! batch, never a sync of its own, so every answer given is on disk. At start the file is
//! replayed and written anew as one snapshot of the keyspace (compaction); while the store
//! runs it is written anew the same way once what was appended since the last snapshot
//! outgrows both the snapshot and [`REWRITE_MIN_BYTES`] (as Redis's `auto-aof-rewrite-*`
//! settings do), so a long-running store's file stays the size of its keyspace.

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

/// What must be appended since the last snapshot before the file is written anew (Redis's
/// `auto-aof-rewrite-min-size`): a small store's file is not rewritten for every few writes.
pub(super) const REWRITE_MIN_BYTES: u64 = 64 << 20;

/// What the writer thread is given, in the order the calls ran.
enum Record {
    /// One call's effects, with its number.
    Call(u64, Vec<u8>),
    /// The whole keyspace as of the call before it: the file starts again from it.
    Snapshot(Vec<u8>),
}

/// The writer's progress: the last batch on disk, or why writing stopped.
#[derive(Clone, Debug)]
enum Synced {
    Upto(u64),
    Failed(String),
}

pub(super) struct Journal {
    /// Records to the writer thread.
    to_writer: mpsc::Sender<Record>,
    /// The number of the last call queued (calls are queued under the store's lock, so in
    /// the order they ran).
    queued: std::sync::atomic::AtomicU64,
    synced: watch::Receiver<Synced>,
    /// Bytes of calls queued since the last snapshot, and that snapshot's size: when to write
    /// the file anew.
    appended: std::sync::atomic::AtomicU64,
    snapshot_bytes: std::sync::atomic::AtomicU64,
    /// The least that must be appended before a rewrite ([`REWRITE_MIN_BYTES`]).
    rewrite_min: u64,
    /// Held locked for the journal's life (`queue.aof.lock`): a second process on the same
    /// data directory (a second server, `sluice reconcile`) would write the file anew under
    /// this one, whose later writes would then be lost.
    _lock: File,
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
    /// it for appending; it is written anew once `rewrite_min` bytes and more than the
    /// snapshot were appended.
    pub fn open(path: &Path, keyspace: &mut Keyspace, rewrite_min: u64) -> anyhow::Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let lock = lock(path)?;
        let replayed = replay(path, keyspace)?;
        let mut first = Vec::new();
        snapshot(keyspace, &mut first)?;
        let file = start_anew(path, &first)?;
        tracing::debug!(path = %path.display(), replayed, keys = keyspace.entries.len(), "queue store journal replayed");
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
            appended: 0.into(),
            snapshot_bytes: (first.len() as u64).into(),
            rewrite_min,
            _lock: lock,
        })
    }

    /// Queues one call's effects (under the store's lock, so in the order calls ran): the
    /// number to wait for.
    pub fn append(&self, record: Vec<u8>) -> u64 {
        use std::sync::atomic::Ordering::SeqCst;
        let n = self.queued.fetch_add(1, SeqCst) + 1;
        self.appended.fetch_add(record.len() as u64, SeqCst);
        // A writer gone has reported why; the wait below answers it.
        let _ = self.to_writer.send(Record::Call(n, record));
        n
    }

    /// Whether the file has grown enough to be written anew from the keyspace.
    pub fn wants_snapshot(&self) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        let appended = self.appended.load(SeqCst);
        appended >= self.rewrite_min && appended > self.snapshot_bytes.load(SeqCst)
    }

    /// Queues the keyspace as the file's new start (under the store's lock, after the last
    /// call's effects): the writer writes it to a new file and appends the calls after it there.
    pub fn start_from(&self, keyspace: &Keyspace) {
        use std::sync::atomic::Ordering::SeqCst;
        let mut bytes = Vec::new();
        // Writing into memory cannot fail.
        let _ = snapshot(keyspace, &mut bytes);
        self.snapshot_bytes.store(bytes.len() as u64, SeqCst);
        self.appended.store(0, SeqCst);
        let _ = self.to_writer.send(Record::Snapshot(bytes));
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

/// The journal's lock file beside `path`, locked for this process alone; an error naming the
/// data directory when another process holds it.
fn lock(path: &Path) -> anyhow::Result<File> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path.with_extension("aof.lock"))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
            "{} is in use by another sluice process: stop it first, or give this one another \
             embedded.data_dir",
            path.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => Err(e.into()),
    }
}

/// Writes `first` to a new file beside `path`, syncs it, and puts it in `path`'s place: the
/// file to append to. Until the rename the old file stands whole.
fn start_anew(path: &Path, first: &[u8]) -> std::io::Result<File> {
    let fresh = path.with_extension("aof.new");
    {
        let mut out = File::create(&fresh)?;
        out.write_all(first)?;
        out.sync_all()?;
    }
    std::fs::rename(&fresh, path)?;
    if let Some(dir) = path.parent() {
        File::open(dir)?.sync_all()?;
    }
    OpenOptions::new().append(true).open(path)
}

/// The writer thread: takes what has come, writes it, syncs once, reports the last number. A
/// snapshot ends a batch: what came before it is synced to the old file, then the file starts
/// anew from it.
fn write_batches(
    path: PathBuf,
    file: File,
    from_callers: mpsc::Receiver<Record>,
    report: watch::Sender<Synced>,
) {
    let mut out = BufWriter::with_capacity(1 << 20, file);
    while let Ok(first) = from_callers.recv() {
        let (mut last, mut calls, mut result, mut snapshot) = (None, 0, Ok(()), None);
        let mut record = Some(first);
        while let Some(r) = record {
            match r {
                Record::Call(n, bytes) => {
                    last = Some(n);
                    calls += 1;
                    result = result.and_then(|()| out.write_all(&bytes));
                }
                Record::Snapshot(bytes) => {
                    snapshot = Some(bytes);
                    break;
                }
            }
            record = from_callers.try_recv().ok();
        }
        if calls > 0 {
            metrics::histogram!("sluice_queue_journal_batch_size").record(f64::from(calls));
        }
        let result = result
            .and_then(|()| out.flush())
            .and_then(|()| out.get_ref().sync_data());
        if let Err(e) = result {
            let why = format!("{}: {e}", path.display());
            tracing::error!(error = %why, "queue store journal write failed; calls that write fail from now");
            report.send_replace(Synced::Failed(why));
            return;
        }
        if let Some(n) = last {
            report.send_replace(Synced::Upto(n));
        }
        if let Some(bytes) = snapshot {
            // A rewrite that fails leaves the old file whole, and appending goes on there.
            match start_anew(&path, &bytes) {
                Ok(file) => {
                    out = BufWriter::with_capacity(1 << 20, file);
                    metrics::counter!("sluice_queue_journal_rewrites_total").increment(1);
                }
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "queue store journal not written anew; appending to it still")
                }
            }
        }
    }
}
