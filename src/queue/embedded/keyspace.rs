//! The in-process keyspace: the Redis commands the scripts of `lua/` and the Redis queue store
//! call, with Redis's replies, over values held in process. One command is one call of
//! [`Keyspace::run`]; a write reports its effect, the command as the journal replays it
//! (`journal.rs`), with a relative expiry written as the time it falls due, as Redis's
//! append-only file writes it.
//!
//! What differs from Redis, and why nothing sluice does can tell:
//! - a scan's cursor is opaque (it resumes after the last element returned, in byte order), so
//!   a full scan returns every element present throughout exactly once, where Redis may repeat
//!   one; a page holds exactly `COUNT` elements, where Redis's is about that many;
//! - an expired key goes when it is next read, never by a sweep: the keys that expire (a lease,
//!   a controller's state) are few and read often.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ops::Bound;

use ::redis::Value;

use super::sorted_set::{Score, ScoreRange, SortedSet};

use super::Bytes;

/// An error reply: Redis's code and message (`ERR ...`, `WRONGTYPE ...`).
pub(super) type CommandError = String;

pub(super) type Reply = Result<Value, CommandError>;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
const NOT_FLOAT: &str = "ERR value is not a valid float";
const SYNTAX: &str = "ERR syntax error";

/// A key's value: each of the five types sluice uses.
pub(super) enum Data {
    String(Bytes),
    /// Ordered by field, so that a scan resumes after the last field it returned.
    Hash(BTreeMap<Bytes, Bytes>),
    /// Ordered by member, for the same reason.
    Set(BTreeSet<Bytes>),
    SortedSet(SortedSet),
    List(VecDeque<Bytes>),
}

impl Data {
    fn is_empty(&self) -> bool {
        match self {
            Data::String(_) => false,
            Data::Hash(h) => h.is_empty(),
            Data::Set(s) => s.is_empty(),
            Data::SortedSet(z) => z.is_empty(),
            Data::List(l) => l.is_empty(),
        }
    }
}

pub(super) struct Entry {
    pub data: Data,
    /// When the key goes (Unix ms); none for a key that stays.
    pub expires_at_ms: Option<i64>,
}

/// Every key, and what a command runs at.
#[derive(Default)]
pub(super) struct Keyspace {
    pub(super) entries: HashMap<Bytes, Entry>,
}

/// A command's arguments after its name, read in order.
struct Args<'a> {
    name: &'a str,
    rest: &'a [Bytes],
}

impl<'a> Args<'a> {
    fn arity(&self, min: usize, even_after: Option<usize>) -> Result<(), CommandError> {
        let bad_pairs =
            even_after.is_some_and(|from| (self.rest.len().saturating_sub(from)) % 2 != 0);
        if self.rest.len() < min || bad_pairs {
            return Err(format!(
                "ERR wrong number of arguments for '{}' command",
                self.name.to_ascii_lowercase()
            ));
        }
        Ok(())
    }
    fn exact(&self, n: usize) -> Result<(), CommandError> {
        if self.rest.len() != n {
            return self.arity(usize::MAX, None);
        }
        Ok(())
    }
}

fn int(b: &[u8]) -> Result<i64, CommandError> {
    std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or_else(|| NOT_INTEGER.to_owned())
}

fn float(b: &[u8]) -> Result<f64, CommandError> {
    Score::parse(b).ok_or_else(|| NOT_FLOAT.to_owned())
}

fn bulk(b: &[u8]) -> Value {
    Value::BulkString(b.to_vec())
}

fn int_reply(n: impl TryInto<i64>) -> Reply {
    Ok(Value::Int(n.try_into().unwrap_or(i64::MAX)))
}

fn array(items: impl IntoIterator<Item = Value>) -> Value {
    Value::Array(items.into_iter().collect())
}

fn eq(b: &[u8], word: &str) -> bool {
    b.eq_ignore_ascii_case(word.as_bytes())
}

/// A Redis index (negative from the end) within a length, as LRANGE and GETRANGE read it:
/// `None` for an empty range.
fn range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let stop = if stop < 0 {
        len + stop
    } else {
        stop.min(len - 1)
    };
    (start <= stop && start < len).then_some((start as usize, stop as usize))
}

/// The writes, by name: the commands whose effects the journal keeps.
pub(super) fn is_write(name: &str) -> bool {
    matches!(
        name,
        "SET"
            | "SETRANGE"
            | "INCR"
            | "INCRBY"
            | "DECRBY"
            | "DEL"
            | "UNLINK"
            | "PEXPIRE"
            | "PEXPIREAT"
            | "HSET"
            | "HDEL"
            | "HINCRBY"
            | "HSETNX"
            | "SADD"
            | "SREM"
            | "ZADD"
            | "ZREM"
            | "ZREMRANGEBYSCORE"
            | "ZPOPMIN"
            | "RPUSH"
            | "LPOP"
            | "FLUSHALL"
    )
}

/// Whether the reply of the write `name` says it changed nothing: a SET that NX or XX kept
/// from writing, a count of what was changed that is zero, nothing popped.
fn changed_nothing(name: &str, reply: &Value) -> bool {
    match (name, reply) {
        ("SET" | "LPOP", Value::Nil) => true,
        (
            "HSETNX" | "HDEL" | "DEL" | "UNLINK" | "SADD" | "SREM" | "ZREM" | "ZREMRANGEBYSCORE"
            | "PEXPIRE" | "PEXPIREAT",
            Value::Int(0),
        ) => true,
        ("ZPOPMIN" | "LPOP", Value::Array(items)) => items.is_empty(),
        _ => false,
    }
}

impl Keyspace {
    /// Runs one command (`argv[0]` its name) at `now_ms`. A write that changed something
    /// leaves its effect in `effects`; one whose reply says it changed nothing leaves none,
    /// as Redis propagates only the commands that made its keyspace dirty, so a call that
    /// wrote nothing waits for no journal sync.
    pub fn run(&mut self, now_ms: i64, argv: &[Bytes], effects: &mut Vec<Vec<Bytes>>) -> Reply {
        let Some((name, rest)) = argv.split_first() else {
            return Err("ERR empty command".to_owned());
        };
        let name = String::from_utf8_lossy(name).to_ascii_uppercase();
        let a = Args { name: &name, rest };
        let reply = self.dispatch(now_ms, &a)?;
        if is_write(&name) && !changed_nothing(&name, &reply) {
            effects.push(self.effect(now_ms, &name, argv));
        }
        Ok(reply)
    }

    /// The command as the journal replays it: a relative expiry as the time it falls due.
    fn effect(&self, now_ms: i64, name: &str, argv: &[Bytes]) -> Vec<Bytes> {
        match name {
            "PEXPIRE" => {
                let ms = int(&argv[2]).unwrap_or(0);
                vec![
                    b"PEXPIREAT".to_vec(),
                    argv[1].clone(),
                    (now_ms + ms).to_string().into_bytes(),
                ]
            }
            "SET" => {
                let mut out = argv[..3].to_vec();
                if let Some(at) = self.entries.get(&argv[1]).and_then(|e| e.expires_at_ms) {
                    out.push(b"PXAT".to_vec());
                    out.push(at.to_string().into_bytes());
                }
                out
            }
            _ => argv.to_vec(),
        }
    }

    fn dispatch(&mut self, now: i64, a: &Args<'_>) -> Reply {
        let r = a.rest;
        match a.name {
            "PING" => Ok(Value::SimpleString("PONG".to_owned())),
            "TIME" => {
                let us = now_us();
                Ok(array([
                    bulk((us / 1_000_000).to_string().as_bytes()),
                    bulk((us % 1_000_000).to_string().as_bytes()),
                ]))
            }
            "FLUSHALL" => {
                self.entries.clear();
                Ok(Value::Okay)
            }
            "DEL" | "UNLINK" => {
                a.arity(1, None)?;
                let gone = r.iter().filter(|k| self.live(now, k).is_some()).count();
                for k in r {
                    self.entries.remove(k);
                }
                int_reply(gone)
            }
            "EXISTS" => {
                a.arity(1, None)?;
                int_reply(r.iter().filter(|k| self.live(now, k).is_some()).count())
            }
            "PEXPIRE" | "PEXPIREAT" => {
                a.exact(2)?;
                let n = int(&r[1])?;
                let at = if a.name == "PEXPIRE" { now + n } else { n };
                match self.live(now, &r[0]) {
                    None => int_reply(0),
                    Some(_) if at <= now => {
                        self.entries.remove(&r[0]);
                        int_reply(1)
                    }
                    Some(e) => {
                        e.expires_at_ms = Some(at);
                        int_reply(1)
                    }
                }
            }
            "PTTL" => {
                a.exact(1)?;
                match self.live(now, &r[0]) {
                    None => int_reply(-2),
                    Some(e) => int_reply(e.expires_at_ms.map_or(-1, |at| at - now)),
                }
            }
            "GET" => {
                a.exact(1)?;
                Ok(self.string(now, &r[0])?.map_or(Value::Nil, bulk))
            }
            "SET" => self.set(now, a),
            "INCR" | "INCRBY" | "DECRBY" => {
                let by = match a.name {
                    "INCR" => {
                        a.exact(1)?;
                        1
                    }
                    "INCRBY" => {
                        a.exact(2)?;
                        int(&r[1])?
                    }
                    _ => {
                        a.exact(2)?;
                        int(&r[1])?.checked_neg().ok_or(NOT_INTEGER)?
                    }
                };
                let old = self.string(now, &r[0])?.map(int).transpose()?.unwrap_or(0);
                let new = old
                    .checked_add(by)
                    .ok_or("ERR increment or decrement would overflow")?;
                self.put_string(now, &r[0], new.to_string().into_bytes());
                int_reply(new)
            }
            "SETRANGE" => {
                a.exact(3)?;
                let offset =
                    usize::try_from(int(&r[1])?).map_err(|_| "ERR offset is out of range")?;
                let mut s = self
                    .string(now, &r[0])?
                    .map(<[u8]>::to_vec)
                    .unwrap_or_default();
                if r[2].is_empty() {
                    return int_reply(s.len());
                }
                if s.len() < offset + r[2].len() {
                    s.resize(offset + r[2].len(), 0);
                }
                s[offset..offset + r[2].len()].copy_from_slice(&r[2]);
                let len = s.len();
                self.put_string(now, &r[0], s);
                int_reply(len)
            }
            "GETRANGE" => {
                a.exact(3)?;
                let (start, stop) = (int(&r[1])?, int(&r[2])?);
                let s = self.string(now, &r[0])?.unwrap_or_default();
                Ok(bulk(
                    range(start, stop, s.len()).map_or(&[][..], |(f, t)| &s[f..=t]),
                ))
            }
            "HSET" | "HSETNX" | "HDEL" | "HGET" | "HMGET" | "HINCRBY" | "HEXISTS" | "HGETALL"
            | "HLEN" | "HSCAN" => self.hash_command(now, a),
            "SADD" | "SREM" | "SCARD" | "SISMEMBER" | "SMISMEMBER" | "SMEMBERS" | "SSCAN" => {
                self.set_command(now, a)
            }
            "ZADD" | "ZSCORE" | "ZREM" | "ZCARD" | "ZCOUNT" | "ZRANGEBYSCORE"
            | "ZREMRANGEBYSCORE" | "ZPOPMIN" | "ZSCAN" => self.sorted_set_command(now, a),
            "RPUSH" | "LPOP" | "LRANGE" | "LLEN" | "LINDEX" => self.list_command(now, a),
            _ => Err(format!(
                "ERR unknown command '{}', with args beginning with: ",
                a.name.to_ascii_lowercase()
            )),
        }
    }

    /// The key's entry unless it has expired (an expired one goes now).
    fn live(&mut self, now: i64, key: &[u8]) -> Option<&mut Entry> {
        if self
            .entries
            .get(key)?
            .expires_at_ms
            .is_some_and(|at| at <= now)
        {
            self.entries.remove(key);
            return None;
        }
        self.entries.get_mut(key)
    }

    fn string(&mut self, now: i64, key: &[u8]) -> Result<Option<&[u8]>, CommandError> {
        match self.live(now, key) {
            None => Ok(None),
            Some(Entry {
                data: Data::String(s),
                ..
            }) => Ok(Some(s)),
            Some(_) => Err(WRONGTYPE.to_owned()),
        }
    }

    /// Writes a string value, keeping the key's expiry (INCR, SETRANGE).
    fn put_string(&mut self, now: i64, key: &[u8], value: Bytes) {
        let expires_at_ms = self.live(now, key).and_then(|e| e.expires_at_ms);
        self.entries.insert(
            key.to_vec(),
            Entry {
                data: Data::String(value),
                expires_at_ms,
            },
        );
    }

    fn set(&mut self, now: i64, a: &Args<'_>) -> Reply {
        a.arity(2, None)?;
        let r = a.rest;
        let (mut expires_at_ms, mut nx, mut xx, mut i) = (None, false, false, 2);
        while i < r.len() {
            let opt = &r[i];
            let value = |i: usize| {
                r.get(i + 1)
                    .ok_or(SYNTAX)
                    .and_then(|v| int(v).map_err(|_| NOT_INTEGER))
            };
            if eq(opt, "PX") || eq(opt, "PXAT") || eq(opt, "EX") {
                let n = value(i).map_err(str::to_owned)?;
                if n <= 0 && !eq(opt, "PXAT") {
                    return Err("ERR invalid expire time in 'set' command".to_owned());
                }
                expires_at_ms = Some(if eq(opt, "PX") {
                    now + n
                } else if eq(opt, "EX") {
                    now + n * 1000
                } else {
                    n
                });
                i += 2;
            } else if eq(opt, "NX") {
                nx = true;
                i += 1;
            } else if eq(opt, "XX") {
                xx = true;
                i += 1;
            } else {
                return Err(SYNTAX.to_owned());
            }
        }
        let exists = self.live(now, &r[0]).is_some();
        if (nx && exists) || (xx && !exists) {
            return Ok(Value::Nil);
        }
        self.entries.insert(
            r[0].clone(),
            Entry {
                data: Data::String(r[1].clone()),
                expires_at_ms,
            },
        );
        Ok(Value::Okay)
    }

    /// The key's value of the type `pick` takes, created empty by `make` if absent and `create`.
    fn typed<T>(
        &mut self,
        now: i64,
        key: &[u8],
        create: Option<fn() -> Data>,
        pick: fn(&mut Data) -> Option<&mut T>,
    ) -> Result<Option<&mut T>, CommandError> {
        if self.live(now, key).is_none() {
            let Some(make) = create else { return Ok(None) };
            self.entries.insert(
                key.to_vec(),
                Entry {
                    data: make(),
                    expires_at_ms: None,
                },
            );
        }
        let entry = self.entries.get_mut(key).expect("present");
        pick(&mut entry.data)
            .map(Some)
            .ok_or_else(|| WRONGTYPE.to_owned())
    }

    /// Removes a container a command left empty, as Redis does.
    fn drop_if_empty(&mut self, key: &[u8]) {
        if self.entries.get(key).is_some_and(|e| e.data.is_empty()) {
            self.entries.remove(key);
        }
    }

    fn hash_command(&mut self, now: i64, a: &Args<'_>) -> Reply {
        fn pick(d: &mut Data) -> Option<&mut BTreeMap<Bytes, Bytes>> {
            if let Data::Hash(h) = d {
                Some(h)
            } else {
                None
            }
        }
        fn make() -> Data {
            Data::Hash(BTreeMap::new())
        }
        let r = a.rest;
        let key = r.first().map(Vec::as_slice).unwrap_or_default();
        let reply = match a.name {
            "HSET" => {
                a.arity(3, Some(1))?;
                let h = self.typed(now, key, Some(make), pick)?.expect("created");
                let added = r[1..]
                    .chunks(2)
                    .filter(|p| h.insert(p[0].clone(), p[1].clone()).is_none())
                    .count();
                int_reply(added)
            }
            "HSETNX" => {
                a.exact(3)?;
                let h = self.typed(now, key, Some(make), pick)?.expect("created");
                if h.contains_key(&r[1]) {
                    int_reply(0)
                } else {
                    h.insert(r[1].clone(), r[2].clone());
                    int_reply(1)
                }
            }
            "HDEL" => {
                a.arity(2, None)?;
                let Some(h) = self.typed(now, key, None, pick)? else {
                    return int_reply(0);
                };
                int_reply(r[1..].iter().filter(|f| h.remove(*f).is_some()).count())
            }
            "HINCRBY" => {
                a.exact(3)?;
                let by = int(&r[2])?;
                let h = self.typed(now, key, Some(make), pick)?.expect("created");
                let old = match h.get(&r[1]) {
                    None => 0,
                    Some(v) => int(v).map_err(|_| "ERR hash value is not an integer")?,
                };
                let new = old
                    .checked_add(by)
                    .ok_or("ERR increment or decrement would overflow")?;
                h.insert(r[1].clone(), new.to_string().into_bytes());
                int_reply(new)
            }
            "HGET" => {
                a.exact(2)?;
                let h = self.typed(now, key, None, pick)?;
                Ok(h.and_then(|h| h.get(&r[1])).map_or(Value::Nil, |v| bulk(v)))
            }
            "HMGET" => {
                a.arity(2, None)?;
                let h = self.typed(now, key, None, pick)?;
                Ok(array(r[1..].iter().map(|f| {
                    h.as_ref()
                        .and_then(|h| h.get(f))
                        .map_or(Value::Nil, |v| bulk(v))
                })))
            }
            "HEXISTS" => {
                a.exact(2)?;
                let h = self.typed(now, key, None, pick)?;
                int_reply(i64::from(h.is_some_and(|h| h.contains_key(&r[1]))))
            }
            "HGETALL" => {
                a.exact(1)?;
                let h = self.typed(now, key, None, pick)?;
                Ok(array(
                    h.into_iter()
                        .flat_map(|h| h.iter())
                        .flat_map(|(f, v)| [bulk(f), bulk(v)]),
                ))
            }
            "HLEN" => {
                a.exact(1)?;
                int_reply(self.typed(now, key, None, pick)?.map_or(0, |h| h.len()))
            }
            "HSCAN" => {
                let (from, count) = scan_args(a)?;
                let h = self.typed(now, key, None, pick)?;
                let page: Vec<(&Bytes, &Bytes)> = h
                    .map(|h| {
                        h.range::<Bytes, _>((
                            from.as_ref().map_or(Bound::Unbounded, Bound::Excluded),
                            Bound::Unbounded,
                        ))
                        .take(count)
                        .collect()
                    })
                    .unwrap_or_default();
                let next = next_cursor(page.len(), count, page.last().map(|(f, _)| f.as_slice()));
                Ok(array([
                    next,
                    array(page.into_iter().flat_map(|(f, v)| [bulk(f), bulk(v)])),
                ]))
            }
            _ => unreachable!("a hash command"),
        };
        self.drop_if_empty(key);
        reply
    }

    fn set_command(&mut self, now: i64, a: &Args<'_>) -> Reply {
        fn pick(d: &mut Data) -> Option<&mut BTreeSet<Bytes>> {
            if let Data::Set(s) = d {
                Some(s)
            } else {
                None
            }
        }
        fn make() -> Data {
            Data::Set(BTreeSet::new())
        }
        let r = a.rest;
        let key = r.first().map(Vec::as_slice).unwrap_or_default();
        let reply = match a.name {
            "SADD" => {
                a.arity(2, None)?;
                let s = self.typed(now, key, Some(make), pick)?.expect("created");
                int_reply(r[1..].iter().filter(|m| s.insert((*m).clone())).count())
            }
            "SREM" => {
                a.arity(2, None)?;
                let Some(s) = self.typed(now, key, None, pick)? else {
                    return int_reply(0);
                };
                int_reply(r[1..].iter().filter(|m| s.remove(*m)).count())
            }
            "SCARD" => {
                a.exact(1)?;
                int_reply(self.typed(now, key, None, pick)?.map_or(0, |s| s.len()))
            }
            "SISMEMBER" => {
                a.exact(2)?;
                let s = self.typed(now, key, None, pick)?;
                int_reply(i64::from(s.is_some_and(|s| s.contains(&r[1]))))
            }
            "SMISMEMBER" => {
                a.arity(2, None)?;
                let s = self.typed(now, key, None, pick)?;
                Ok(array(r[1..].iter().map(|m| {
                    Value::Int(i64::from(s.as_ref().is_some_and(|s| s.contains(m))))
                })))
            }
            "SMEMBERS" => {
                a.exact(1)?;
                let s = self.typed(now, key, None, pick)?;
                Ok(array(s.into_iter().flat_map(|s| s.iter()).map(|m| bulk(m))))
            }
            "SSCAN" => {
                let (from, count) = scan_args(a)?;
                let s = self.typed(now, key, None, pick)?;
                let page: Vec<&Bytes> = s
                    .map(|s| {
                        s.range::<Bytes, _>((
                            from.as_ref().map_or(Bound::Unbounded, Bound::Excluded),
                            Bound::Unbounded,
                        ))
                        .take(count)
                        .collect()
                    })
                    .unwrap_or_default();
                let next = next_cursor(page.len(), count, page.last().map(|m| m.as_slice()));
                Ok(array([next, array(page.into_iter().map(|m| bulk(m)))]))
            }
            _ => unreachable!("a set command"),
        };
        self.drop_if_empty(key);
        reply
    }

    fn sorted_set_command(&mut self, now: i64, a: &Args<'_>) -> Reply {
        fn pick(d: &mut Data) -> Option<&mut SortedSet> {
            if let Data::SortedSet(z) = d {
                Some(z)
            } else {
                None
            }
        }
        fn make() -> Data {
            Data::SortedSet(SortedSet::default())
        }
        let r = a.rest;
        let key = r.first().map(Vec::as_slice).unwrap_or_default();
        let reply = match a.name {
            "ZADD" => {
                a.arity(3, None)?;
                let (mut nx, mut xx, mut ch, mut i) = (false, false, false, 1);
                while i < r.len() {
                    if eq(&r[i], "NX") {
                        nx = true;
                    } else if eq(&r[i], "XX") {
                        xx = true;
                    } else if eq(&r[i], "CH") {
                        ch = true;
                    } else {
                        break;
                    }
                    i += 1;
                }
                let pairs = &r[i..];
                if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
                    return Err(SYNTAX.to_owned());
                }
                if nx && xx {
                    return Err(
                        "ERR XX and NX options at the same time are not compatible".to_owned()
                    );
                }
                let scores = pairs
                    .chunks(2)
                    .map(|p| float(&p[0]))
                    .collect::<Result<Vec<_>, _>>()?;
                let Some(z) = self.typed(now, key, (!xx).then_some(make as fn() -> Data), pick)?
                else {
                    return int_reply(0);
                };
                let mut counted = 0;
                for (pair, score) in pairs.chunks(2).zip(scores) {
                    let old = z.score(&pair[1]);
                    match old {
                        Some(_) if nx => {}
                        None if xx => {}
                        Some(o) => {
                            if o != score {
                                z.insert(pair[1].clone(), score);
                                counted += usize::from(ch);
                            }
                        }
                        None => {
                            z.insert(pair[1].clone(), score);
                            counted += 1;
                        }
                    }
                }
                int_reply(counted)
            }
            "ZSCORE" => {
                a.exact(2)?;
                let z = self.typed(now, key, None, pick)?;
                Ok(z.and_then(|z| z.score(&r[1]))
                    .map_or(Value::Nil, |s| bulk(Score::format(s).as_bytes())))
            }
            "ZREM" => {
                a.arity(2, None)?;
                let Some(z) = self.typed(now, key, None, pick)? else {
                    return int_reply(0);
                };
                int_reply(r[1..].iter().filter(|m| z.remove(m)).count())
            }
            "ZCARD" => {
                a.exact(1)?;
                int_reply(self.typed(now, key, None, pick)?.map_or(0, |z| z.len()))
            }
            "ZCOUNT" => {
                a.exact(3)?;
                let range =
                    ScoreRange::parse(&r[1], &r[2]).ok_or("ERR min or max is not a float")?;
                int_reply(
                    self.typed(now, key, None, pick)?
                        .map_or(0, |z| z.range(&range).count()),
                )
            }
            "ZRANGEBYSCORE" => {
                a.arity(3, None)?;
                let range =
                    ScoreRange::parse(&r[1], &r[2]).ok_or("ERR min or max is not a float")?;
                let (mut scores, mut offset, mut limit, mut i) = (false, 0usize, usize::MAX, 3);
                while i < r.len() {
                    if eq(&r[i], "WITHSCORES") {
                        scores = true;
                        i += 1;
                    } else if eq(&r[i], "LIMIT") && i + 2 < r.len() {
                        let (o, c) = (int(&r[i + 1])?, int(&r[i + 2])?);
                        if o < 0 {
                            return Ok(array([]));
                        }
                        offset = o as usize;
                        limit = usize::try_from(c).unwrap_or(usize::MAX);
                        i += 3;
                    } else {
                        return Err(SYNTAX.to_owned());
                    }
                }
                let z = self.typed(now, key, None, pick)?;
                let items: Vec<(f64, Bytes)> = z
                    .map(|z| {
                        z.range(&range)
                            .skip(offset)
                            .take(limit)
                            .map(|(s, m)| (s, m.clone()))
                            .collect()
                    })
                    .unwrap_or_default();
                Ok(array(items.into_iter().flat_map(|(s, m)| {
                    let score = scores.then(|| bulk(Score::format(s).as_bytes()));
                    std::iter::once(bulk(&m)).chain(score)
                })))
            }
            "ZREMRANGEBYSCORE" => {
                a.exact(3)?;
                let range =
                    ScoreRange::parse(&r[1], &r[2]).ok_or("ERR min or max is not a float")?;
                let Some(z) = self.typed(now, key, None, pick)? else {
                    return int_reply(0);
                };
                let gone: Vec<Bytes> = z.range(&range).map(|(_, m)| m.clone()).collect();
                for m in &gone {
                    z.remove(m);
                }
                int_reply(gone.len())
            }
            "ZPOPMIN" => {
                a.arity(1, None)?;
                let count = match r.get(1) {
                    None => 1,
                    Some(c) => usize::try_from(int(c)?)
                        .map_err(|_| "ERR value is out of range, must be positive")?,
                };
                let Some(z) = self.typed(now, key, None, pick)? else {
                    return Ok(array([]));
                };
                let mut out = Vec::new();
                for _ in 0..count {
                    let Some((s, m)) = z.pop_min() else { break };
                    out.push(bulk(&m));
                    out.push(bulk(Score::format(s).as_bytes()));
                }
                Ok(array(out))
            }
            "ZSCAN" => {
                let (from, count) = scan_args(a)?;
                let z = self.typed(now, key, None, pick)?;
                let page: Vec<(Bytes, f64)> = z
                    .map(|z| {
                        z.members_after(from.as_deref())
                            .take(count)
                            .map(|(m, s)| (m.clone(), s))
                            .collect()
                    })
                    .unwrap_or_default();
                let next = next_cursor(page.len(), count, page.last().map(|(m, _)| m.as_slice()));
                Ok(array([
                    next,
                    array(
                        page.into_iter()
                            .flat_map(|(m, s)| [bulk(&m), bulk(Score::format(s).as_bytes())]),
                    ),
                ]))
            }
            _ => unreachable!("a sorted-set command"),
        };
        self.drop_if_empty(key);
        reply
    }

    fn list_command(&mut self, now: i64, a: &Args<'_>) -> Reply {
        fn pick(d: &mut Data) -> Option<&mut VecDeque<Bytes>> {
            if let Data::List(l) = d {
                Some(l)
            } else {
                None
            }
        }
        fn make() -> Data {
            Data::List(VecDeque::new())
        }
        let r = a.rest;
        let key = r.first().map(Vec::as_slice).unwrap_or_default();
        let reply = match a.name {
            "RPUSH" => {
                a.arity(2, None)?;
                let l = self.typed(now, key, Some(make), pick)?.expect("created");
                l.extend(r[1..].iter().cloned());
                int_reply(l.len())
            }
            "LPOP" => {
                a.arity(1, None)?;
                let count = r.get(1).map(|c| int(c)).transpose()?;
                if count.is_some_and(|c| c < 0) {
                    return Err("ERR value is out of range, must be positive".to_owned());
                }
                let Some(l) = self.typed(now, key, None, pick)? else {
                    return Ok(Value::Nil);
                };
                match count {
                    None => Ok(l.pop_front().map_or(Value::Nil, |v| bulk(&v))),
                    Some(c) => {
                        let n = (c as usize).min(l.len());
                        Ok(array(l.drain(..n).map(|v| bulk(&v))))
                    }
                }
            }
            "LRANGE" => {
                a.exact(3)?;
                let (start, stop) = (int(&r[1])?, int(&r[2])?);
                let l = self.typed(now, key, None, pick)?;
                let items = match l.and_then(|l| range(start, stop, l.len()).map(|span| (l, span)))
                {
                    Some((l, (f, t))) => l.range(f..=t).map(|v| bulk(v)).collect(),
                    None => Vec::new(),
                };
                Ok(Value::Array(items))
            }
            "LLEN" => {
                a.exact(1)?;
                int_reply(self.typed(now, key, None, pick)?.map_or(0, |l| l.len()))
            }
            "LINDEX" => {
                a.exact(2)?;
                let i = int(&r[1])?;
                let l = self.typed(now, key, None, pick)?;
                Ok(l.and_then(|l| {
                    let i = if i < 0 { l.len() as i64 + i } else { i };
                    usize::try_from(i).ok().and_then(|i| l.get(i))
                })
                .map_or(Value::Nil, |v| bulk(v)))
            }
            _ => unreachable!("a list command"),
        };
        self.drop_if_empty(key);
        reply
    }
}

/// A scan's cursor and COUNT (10 unless given): the element it resumes after, none for "0".
fn scan_args(a: &Args<'_>) -> Result<(Option<Bytes>, usize), CommandError> {
    a.arity(2, None)?;
    let r = a.rest;
    let from = match r[1].as_slice() {
        b"0" => None,
        c => Some(
            c.strip_prefix(b"1")
                .and_then(|h| hex::decode(h).ok())
                .ok_or("ERR invalid cursor")?,
        ),
    };
    let (mut count, mut i) = (10usize, 2);
    while i < r.len() {
        if eq(&r[i], "COUNT") && i + 1 < r.len() {
            count = usize::try_from(int(&r[i + 1])?)
                .ok()
                .filter(|c| *c > 0)
                .ok_or(SYNTAX)?;
            i += 2;
        } else {
            return Err(SYNTAX.to_owned());
        }
    }
    Ok((from, count))
}

/// The cursor a page answers: "0" once the page came short, else one that resumes after `last`.
fn next_cursor(got: usize, count: usize, last: Option<&[u8]>) -> Value {
    match last {
        Some(last) if got == count => bulk(format!("1{}", hex::encode(last)).as_bytes()),
        _ => bulk(b"0"),
    }
}

/// The wall clock in microseconds since the Unix epoch (TIME).
fn now_us() -> i64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    d.as_micros() as i64
}

/// The wall clock in milliseconds since the Unix epoch: what expiries are measured against.
pub(super) fn now_ms() -> i64 {
    now_us() / 1000
}
