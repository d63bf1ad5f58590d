//! The embedded default's queue store: a Redis in process. The Redis queue store
//! (`RedisQueue`) talks to it as to a server, through the same connection type, so the
//! scripts of `lua/` are the one implementation of the queue's behaviour whichever store runs
//! them. What lives here is what Redis itself provides, not what sluice decides.
//!
//! # Layout
//! - `keyspace.rs`: the values and the commands the scripts and the store call, with Redis's
//!   replies; `sorted_set.rs` the sorted set they rest on.
//! - `scripting.rs`: Lua 5.1 as Redis runs it (`redis.call`, `KEYS`, `ARGV`, the script
//!   cache); `struct_lib.rs` the `struct` library.
//! - `journal.rs`: each call's writes on disk, replayed at start (the append-only file).
//!
//! One lock serves every call, as Redis's one thread does: a script runs alone, so each is
//! atomic, and a call that wrote answers once its effects are on disk.

mod journal;
mod keyspace;
mod scripting;
mod sorted_set;
mod struct_lib;

use std::path::Path;
use std::sync::Arc;

use tokio::sync::Mutex;

use ::redis::Value;

use self::journal::Journal;
use self::keyspace::{Keyspace, Reply};
use self::scripting::{error_value, Scripting};

/// A key, a value, an argument: Redis's strings are bytes.
type Bytes = Vec<u8>;

pub struct Embedded {
    /// The Lua state, its scripts and the keyspace, behind the one lock every call takes: a
    /// script holds it for its whole batch, so a call that waits for it yields its thread to
    /// the requests instead of blocking it.
    state: Mutex<Scripting>,
    /// Where writes are kept; none for a store that keeps nothing (tests, tools).
    journal: Option<Journal>,
}

impl Embedded {
    /// A store that keeps nothing on disk.
    pub fn in_memory() -> Arc<Self> {
        Arc::new(Embedded {
            state: Mutex::new(Scripting::new(Keyspace::default()).expect("a Lua state")),
            journal: None,
        })
    }

    /// A store kept in the journal at `path`, replayed now.
    pub fn durable(path: &Path) -> anyhow::Result<Arc<Self>> {
        Self::durable_rewriting_after(path, journal::REWRITE_MIN_BYTES)
    }

    /// A durable store whose journal is written anew once `rewrite_min` bytes (and more than
    /// its last snapshot) were appended.
    fn durable_rewriting_after(path: &Path, rewrite_min: u64) -> anyhow::Result<Arc<Self>> {
        let mut keyspace = Keyspace::default();
        let journal = Journal::open(path, &mut keyspace, rewrite_min)?;
        Ok(Arc::new(Embedded {
            state: Mutex::new(Scripting::new(keyspace)?),
            journal: Some(journal),
        }))
    }

    /// Runs one command (`argv[0]` its name) and answers as Redis would; an error is a
    /// [`Value::ServerError`]. A call that wrote answers once its writes are on disk.
    pub async fn execute(&self, argv: Vec<Bytes>) -> Value {
        let (reply, written) = {
            let mut state = self.state.lock().await;
            let reply = run(&mut state, keyspace::now_ms(), &argv);
            let effects = std::mem::take(&mut state.running().effects);
            let written = match &self.journal {
                Some(journal) if !effects.is_empty() => {
                    let n = journal.append(journal::transaction(&effects));
                    if journal.wants_snapshot() {
                        journal.start_from(&state.running().keyspace);
                    }
                    Some(n)
                }
                _ => None,
            };
            (reply, written)
        };
        if let (Some(journal), Some(n)) = (&self.journal, written) {
            if let Err(e) = journal.synced(n).await {
                return error_value(format!("ERR the queue store's journal failed: {e}"));
            }
        }
        reply.unwrap_or_else(error_value)
    }
}

/// One command: the script commands here, the rest on the keyspace.
fn run(state: &mut Scripting, now_ms: i64, argv: &[Bytes]) -> Reply {
    let name = argv
        .first()
        .map(|n| n.to_ascii_uppercase())
        .unwrap_or_default();
    let rest = argv.get(1..).unwrap_or_default();
    match name.as_slice() {
        b"EVALSHA" | b"EVAL" if rest.is_empty() => {
            Err("ERR wrong number of arguments for 'evalsha' command".to_owned())
        }
        b"EVALSHA" => state.eval_sha(now_ms, &rest[0], &rest[1..]),
        b"EVAL" => state.eval(now_ms, &rest[0], &rest[1..]),
        b"SCRIPT" => {
            let sub = rest
                .first()
                .map(|s| s.to_ascii_uppercase())
                .unwrap_or_default();
            match (sub.as_slice(), rest.get(1..).unwrap_or_default()) {
                (b"LOAD", [source]) => state
                    .load(source)
                    .map(|sha| Value::BulkString(sha.into_bytes())),
                (b"EXISTS", shas) if !shas.is_empty() => Ok(Value::Array(
                    shas.iter()
                        .map(|s| Value::Int(i64::from(state.exists(s))))
                        .collect(),
                )),
                _ => Err("ERR unknown or malformed SCRIPT subcommand".to_owned()),
            }
        }
        _ => {
            let mut running = state.running();
            let scripting::Running {
                keyspace, effects, ..
            } = &mut *running;
            keyspace.run(now_ms, argv, effects)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(words: &[&str]) -> Vec<Bytes> {
        words.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    /// A store that rewrites the same few keys appends far more than its keyspace holds: its
    /// file is written anew from the keyspace as it runs, and replays to the same keyspace.
    #[tokio::test]
    async fn a_journal_that_outgrows_its_keyspace_is_written_anew_and_replays_the_same() {
        let dir =
            std::env::temp_dir().join(format!("sluice-aof-{}", uuid::Uuid::new_v4().simple()));
        let path = dir.join("queue.aof");
        let store = Embedded::durable_rewriting_after(&path, 4096).unwrap();
        let mut appended = 0;
        for i in 0..2000 {
            let (value, field) = (i.to_string(), format!("f{}", i % 10));
            for c in [
                command(&["SET", "k", &value]),
                command(&["HSET", "h", &field, &value]),
            ] {
                appended += journal::transaction(std::slice::from_ref(&c)).len();
                store.execute(c).await;
            }
        }
        let size = std::fs::metadata(&path).unwrap().len();
        assert!(
            size < 16 * 1024,
            "the journal holds {size} bytes after {appended} were appended"
        );
        drop(store);
        let again = Embedded::durable(&path).unwrap();
        let get = again.execute(command(&["GET", "k"])).await;
        assert_eq!(get, Value::BulkString(b"1999".to_vec()));
        let fields = again.execute(command(&["HLEN", "h"])).await;
        assert_eq!(fields, Value::Int(10));
        let last = again.execute(command(&["HGET", "h", "f9"])).await;
        assert_eq!(last, Value::BulkString(b"1999".to_vec()));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// As Redis propagates only what made its keyspace dirty, a write whose reply says it
    /// changed nothing leaves nothing in the journal (and its call waits for no sync); a write
    /// that changed something does.
    #[tokio::test]
    async fn a_write_that_changed_nothing_is_not_journalled() {
        let dir =
            std::env::temp_dir().join(format!("sluice-aof-{}", uuid::Uuid::new_v4().simple()));
        let path = dir.join("queue.aof");
        let store = Embedded::durable(&path).unwrap();
        for c in [
            command(&["HSET", "h", "f", "v"]),
            command(&["SADD", "s", "m"]),
            command(&["ZADD", "z", "1", "m"]),
            command(&["SET", "k", "v"]),
        ] {
            store.execute(c).await;
        }
        let size = || std::fs::metadata(&path).unwrap().len();
        let before = size();
        for c in [
            command(&["HSETNX", "h", "f", "other"]),
            command(&["HDEL", "h", "missing"]),
            command(&["DEL", "missing"]),
            command(&["SADD", "s", "m"]),
            command(&["SREM", "s", "missing"]),
            command(&["ZREM", "z", "missing"]),
            command(&["ZREMRANGEBYSCORE", "z", "5", "9"]),
            command(&["PEXPIRE", "missing", "1000"]),
            command(&["SET", "k", "w", "NX"]),
            command(&["LPOP", "missing"]),
            command(&["ZPOPMIN", "missing"]),
            command(&[
                "EVAL",
                "return redis.call('HSETNX', KEYS[1], 'f', 'x')",
                "1",
                "h",
            ]),
        ] {
            let name = String::from_utf8_lossy(&c[0]).into_owned();
            store.execute(c).await;
            assert_eq!(size(), before, "{name} changed nothing, and was journalled");
        }
        store.execute(command(&["HSETNX", "h", "g", "v"])).await;
        assert!(size() > before, "a write that changed something is kept");
        drop(store);
        let again = Embedded::durable(&path).unwrap();
        let kept = again.execute(command(&["HGET", "h", "f"])).await;
        assert_eq!(kept, Value::BulkString(b"v".to_vec()));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Two processes on one data directory would each write the file anew under the other.
    #[tokio::test]
    async fn a_journal_another_store_holds_is_not_opened_until_it_lets_go() {
        let dir =
            std::env::temp_dir().join(format!("sluice-aof-{}", uuid::Uuid::new_v4().simple()));
        let path = dir.join("queue.aof");
        let first = Embedded::durable(&path).unwrap();
        first.execute(command(&["SET", "k", "kept"])).await;
        let refused = Embedded::durable(&path)
            .err()
            .expect("a second store refused");
        assert!(
            refused
                .to_string()
                .contains("in use by another sluice process"),
            "{refused}"
        );
        drop(first);
        let second = Embedded::durable(&path).unwrap();
        let kept = second.execute(command(&["GET", "k"])).await;
        assert_eq!(kept, Value::BulkString(b"kept".to_vec()));
        drop(second);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
