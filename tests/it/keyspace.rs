//! The embedded store's keyspace against a real Redis, command by command: the same calls on
//! both, the same replies. A reply whose order Redis leaves open (a hash's fields, a set's
//! members) is compared sorted; a scan is compared by what a full iteration returns; an error
//! by its code (the text after the code is Redis's own wording, which varies by version).

use redis::aio::ConnectionLike;
use redis::Value;
use sluice::queue::embedded::Embedded;
use std::sync::Arc;

use crate::helpers::redis_url;

/// A real Redis and a fresh in-process one, with a key prefix of the test's own.
struct Both {
    redis: redis::aio::MultiplexedConnection,
    embedded: Arc<Embedded>,
    prefix: String,
}

/// How a reply is compared.
#[derive(Clone, Copy)]
enum Compare {
    Exact,
    /// The reply's items (or, for a flat list of pairs, its pairs) in any order.
    Unordered,
    Pairs,
}

impl Both {
    async fn new() -> Self {
        let client = redis::Client::open(redis_url()).unwrap();
        Both {
            redis: client.get_multiplexed_async_connection().await.unwrap(),
            embedded: Embedded::in_memory(),
            prefix: format!("ks{}:", uuid::Uuid::new_v4().simple()),
        }
    }

    /// The arguments with each `$k` made a key of this test.
    fn argv(&self, args: &[&str]) -> Vec<Vec<u8>> {
        args.iter()
            .map(|a| match a.strip_prefix('$') {
                Some(k) => format!("{}{k}", self.prefix).into_bytes(),
                None => a.as_bytes().to_vec(),
            })
            .collect()
    }

    async fn call_both(&mut self, args: &[&str]) -> (Value, Value) {
        let argv = self.argv(args);
        let mut cmd = redis::cmd(std::str::from_utf8(&argv[0]).unwrap());
        for a in &argv[1..] {
            cmd.arg(a.as_slice());
        }
        let real = self.redis.req_packed_command(&cmd).await.unwrap();
        let ours = self.embedded.execute(argv).await;
        (real, ours)
    }

    /// Runs the command on both and asserts the same reply.
    async fn same(&mut self, args: &[&str]) -> Value {
        self.same_as(args, Compare::Exact).await
    }

    async fn same_as(&mut self, args: &[&str], how: Compare) -> Value {
        let (real, ours) = self.call_both(args).await;
        assert_eq!(
            normal(&real, how),
            normal(&ours, how),
            "{args:?}: Redis answered {real:?}, the keyspace {ours:?}"
        );
        ours
    }

    async fn same_each(&mut self, calls: &[&[&str]]) {
        for args in calls {
            self.same(args).await;
        }
    }

    /// Scans the key from "0" to the end on both, `COUNT` `count`: the same elements.
    async fn same_scan(&mut self, command: &str, key: &str, count: usize, pairs: bool) {
        let mut seen = Vec::new();
        for side in 0..2 {
            let mut cursor = "0".to_owned();
            let mut items = Vec::new();
            for _ in 0..10_000 {
                let argv = self.argv(&[command, key, &cursor, "COUNT", &count.to_string()]);
                let (real, ours) = if side == 0 {
                    let mut cmd = redis::cmd(command);
                    for a in &argv[1..] {
                        cmd.arg(a.as_slice());
                    }
                    (
                        Some(self.redis.req_packed_command(&cmd).await.unwrap()),
                        None,
                    )
                } else {
                    (None, Some(self.embedded.execute(argv).await))
                };
                let reply = real.or(ours).unwrap();
                let Value::Array(parts) = reply else {
                    panic!("{command}: {reply:?}")
                };
                let [Value::BulkString(next), Value::Array(page)] = &parts[..] else {
                    panic!("{command}: {parts:?}")
                };
                items.extend(page.iter().cloned());
                cursor = String::from_utf8(next.clone()).unwrap();
                if cursor == "0" {
                    break;
                }
            }
            assert_eq!(cursor, "0", "{command} did not end");
            let how = if pairs {
                Compare::Pairs
            } else {
                Compare::Unordered
            };
            let items = normal(&Value::Array(items), how);
            if pairs {
                // A full iteration returns each element once: no pair repeats on either side.
                let Norm::List(l) = &items else {
                    unreachable!()
                };
                let mut dedup = l.clone();
                dedup.dedup();
                assert_eq!(dedup.len(), l.len(), "{command} returned an element twice");
            }
            seen.push(items);
        }
        assert_eq!(
            seen[0], seen[1],
            "{command} {key}: Redis and the keyspace scanned different elements"
        );
    }
}

/// A reply in a form two stores' replies compare in.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Norm {
    Nil,
    Int(i64),
    Bytes(Vec<u8>),
    Status(String),
    Error(String),
    List(Vec<Norm>),
}

fn normal(v: &Value, how: Compare) -> Norm {
    match v {
        Value::Nil => Norm::Nil,
        Value::Int(i) => Norm::Int(*i),
        Value::BulkString(b) => Norm::Bytes(b.clone()),
        Value::Okay => Norm::Status("OK".into()),
        Value::SimpleString(s) => Norm::Status(s.clone()),
        Value::ServerError(e) => Norm::Error(e.code().to_owned()),
        Value::Array(items) => {
            let mut items: Vec<Norm> = items.iter().map(|i| normal(i, Compare::Exact)).collect();
            match how {
                Compare::Exact => {}
                Compare::Unordered => items.sort(),
                Compare::Pairs => {
                    let mut pairs: Vec<Vec<Norm>> = items.chunks(2).map(<[Norm]>::to_vec).collect();
                    pairs.sort();
                    items = pairs.concat();
                }
            }
            Norm::List(items)
        }
        other => panic!("a reply sluice's stores never give: {other:?}"),
    }
}

#[tokio::test]
async fn strings_answer_as_redis_does() {
    let mut b = Both::new().await;
    b.same_each(&[
        &["GET", "$missing"],
        &["SET", "$a", "1"],
        &["GET", "$a"],
        &["INCR", "$a"],
        &["INCRBY", "$a", "5"],
        &["DECRBY", "$a", "2"],
        &["INCR", "$fresh"],
        &["SET", "$s", "hello"],
        &["INCR", "$s"],
        &["SETRANGE", "$s", "8", "xy"],
        &["GET", "$s"],
        &["SETRANGE", "$pad", "3", "z"],
        &["GET", "$pad"],
        &["GETRANGE", "$s", "0", "-1"],
        &["GETRANGE", "$s", "-3", "-1"],
        &["GETRANGE", "$s", "5", "2"],
        &["GETRANGE", "$s", "2", "100"],
        &["GETRANGE", "$missing", "0", "3"],
        &["SET", "$a", "2", "NX"],
        &["SET", "$nope", "2", "XX"],
        &["GET", "$nope"],
        &["SET", "$e", "v", "PX", "100000"],
        &["GET", "$e"],
        &["SET", "$e", "v", "PX", "0"],
        &["SET", "$e", "v", "BOGUS"],
        &["INCRBY", "$a", "x"],
        &["GET"],
        &["PING"],
    ])
    .await;
}

#[tokio::test]
async fn hashes_answer_as_redis_does() {
    let mut b = Both::new().await;
    b.same_each(&[
        &["HSET", "$h", "f1", "v1", "f2", "v2"],
        &["HSET", "$h", "f1", "x", "f3", "v3"],
        &["HSET", "$h", "f1"],
        &["HGET", "$h", "f1"],
        &["HGET", "$h", "nope"],
        &["HGET", "$missing", "f1"],
        &["HMGET", "$h", "f1", "nope", "f2"],
        &["HMGET", "$missing", "a", "b"],
        &["HINCRBY", "$h", "c", "3"],
        &["HINCRBY", "$h", "c", "-10"],
        &["HINCRBY", "$h", "f1", "1"],
        &["HEXISTS", "$h", "f1"],
        &["HEXISTS", "$h", "zz"],
        &["HSETNX", "$h", "f1", "y"],
        &["HSETNX", "$h", "f4", "z"],
        &["HDEL", "$h", "f1", "nope"],
        &["HLEN", "$h"],
        &["HLEN", "$missing"],
        &["SET", "$str", "v"],
        &["HGET", "$str", "f"],
        &["HSET", "$str", "f", "v"],
        &["HDEL", "$one", "f"],
        &["HSET", "$one", "f", "v"],
        &["HDEL", "$one", "f"],
        &["EXISTS", "$one"],
    ])
    .await;
    b.same_as(&["HGETALL", "$h"], Compare::Pairs).await;
    b.same(&["HGETALL", "$missing"]).await;
}

#[tokio::test]
async fn sets_answer_as_redis_does() {
    let mut b = Both::new().await;
    b.same_each(&[
        &["SADD", "$s", "a", "b", "c"],
        &["SADD", "$s", "a", "d"],
        &["SREM", "$s", "b", "x"],
        &["SCARD", "$s"],
        &["SCARD", "$missing"],
        &["SISMEMBER", "$s", "a"],
        &["SISMEMBER", "$s", "b"],
        &["SMISMEMBER", "$s", "a", "b", "c"],
        &["SMISMEMBER", "$missing", "a"],
        &["SREM", "$s", "a", "c", "d"],
        &["EXISTS", "$s"],
        &["SADD", "$s", "z"],
    ])
    .await;
    b.same(&["SADD", "$t", "q", "r", "s"]).await;
    b.same_as(&["SMEMBERS", "$t"], Compare::Unordered).await;
}

#[tokio::test]
async fn sorted_sets_answer_as_redis_does() {
    let mut b = Both::new().await;
    b.same_each(&[
        &["ZADD", "$z", "1", "a", "2", "b", "3", "c"],
        &["ZADD", "$z", "XX", "5", "a", "9", "d"],
        &["ZADD", "$z", "NX", "7", "a", "4", "e"],
        &["ZADD", "$z", "1.5", "f"],
        &["ZADD", "$z", "x", "f"],
        &["ZADD", "$z", "1"],
        &["ZADD", "$missing", "XX", "1", "a"],
        &["EXISTS", "$missing"],
        &["ZSCORE", "$z", "a"],
        &["ZSCORE", "$z", "f"],
        &["ZSCORE", "$z", "nope"],
        &["ZCARD", "$z"],
        &["ZCOUNT", "$z", "-inf", "+inf"],
        &["ZCOUNT", "$z", "(1.5", "3"],
        &["ZCOUNT", "$z", "nan", "3"],
        &["ZRANGEBYSCORE", "$z", "-inf", "+inf"],
        &["ZRANGEBYSCORE", "$z", "-inf", "4", "LIMIT", "1", "2"],
        &["ZRANGEBYSCORE", "$z", "2", "+inf", "WITHSCORES"],
        &["ZRANGEBYSCORE", "$z", "(2", "(5"],
        &["ZRANGEBYSCORE", "$z", "9", "1"],
        &["ZADD", "$z", "1", "x", "1", "y", "1", "w"],
        &["ZRANGEBYSCORE", "$z", "1", "1"],
        &["ZREMRANGEBYSCORE", "$z", "-inf", "(1.5"],
        &["ZRANGEBYSCORE", "$z", "-inf", "+inf", "WITHSCORES"],
        &["ZPOPMIN", "$z"],
        &["ZPOPMIN", "$z", "2"],
        &["ZPOPMIN", "$missing", "2"],
        &["ZREM", "$z", "a", "nope"],
        &["ZADD", "$big", "1733550000123", "t"],
        &["ZSCORE", "$big", "t"],
        &["ZPOPMIN", "$z", "100"],
        &["EXISTS", "$z"],
    ])
    .await;
}

#[tokio::test]
async fn lists_answer_as_redis_does() {
    let mut b = Both::new().await;
    b.same_each(&[
        &["RPUSH", "$l", "a", "b", "c", "d"],
        &["RPUSH", "$l", "e"],
        &["LLEN", "$l"],
        &["LINDEX", "$l", "0"],
        &["LINDEX", "$l", "-1"],
        &["LINDEX", "$l", "9"],
        &["LRANGE", "$l", "0", "-1"],
        &["LRANGE", "$l", "1", "2"],
        &["LRANGE", "$l", "-2", "-1"],
        &["LRANGE", "$l", "5", "9"],
        &["LRANGE", "$missing", "0", "-1"],
        &["LPOP", "$l"],
        &["LPOP", "$l", "2"],
        &["LPOP", "$l", "9"],
        &["LPOP", "$l"],
        &["LPOP", "$l", "2"],
        &["LLEN", "$l"],
        &["EXISTS", "$l"],
    ])
    .await;
}

#[tokio::test]
async fn keys_expire_and_go_as_redis_does() {
    let mut b = Both::new().await;
    b.same_each(&[
        &["SET", "$a", "1"],
        &["HSET", "$h", "f", "v"],
        &["DEL", "$a", "$h", "$nope"],
        &["EXISTS", "$a", "$h"],
        &["SET", "$a", "1"],
        &["UNLINK", "$a"],
        &["SET", "$t", "1"],
        &["PEXPIRE", "$t", "100000"],
        &["PEXPIRE", "$nope", "10"],
        &["SET", "$gone", "1", "PX", "30"],
        &["PEXPIRE", "$t2", "x"],
    ])
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(80)).await;
    b.same_each(&[&["GET", "$gone"], &["EXISTS", "$gone"], &["GET", "$t"]])
        .await;
    // A key set again loses its expiry.
    b.same_each(&[&["SET", "$t", "2"], &["PTTL", "$t"]]).await;
    let (real, ours) = b.call_both(&["TIME"]).await;
    for reply in [real, ours] {
        let Value::Array(parts) = reply else {
            panic!("TIME: {reply:?}")
        };
        let secs: i64 = redis::from_redis_value(parts[0].clone()).unwrap();
        let micros: i64 = redis::from_redis_value(parts[1].clone()).unwrap();
        assert!((0..1_000_000).contains(&micros));
        assert!((chrono::Utc::now().timestamp() - secs).abs() <= 2);
    }
}

#[tokio::test]
async fn scans_return_every_element_once_as_redis_does() {
    let mut b = Both::new().await;
    let fields: Vec<String> = (0..257).map(|i| format!("f{i}")).collect();
    for chunk in fields.chunks(50) {
        let mut hset = vec!["HSET", "$h"];
        let mut sadd = vec!["SADD", "$s"];
        let mut zadd = vec!["ZADD", "$z"];
        let scores: Vec<String> = chunk.iter().map(|f| f[1..].to_owned()).collect();
        for (f, s) in chunk.iter().zip(&scores) {
            hset.extend([f.as_str(), s.as_str()]);
            sadd.push(f);
            zadd.extend([s.as_str(), f.as_str()]);
        }
        b.same(&hset).await;
        b.same(&sadd).await;
        b.same(&zadd).await;
    }
    for count in [1, 7, 500] {
        b.same_scan("HSCAN", "$h", count, true).await;
        b.same_scan("SSCAN", "$s", count, false).await;
        b.same_scan("ZSCAN", "$z", count, true).await;
    }
    b.same_scan("HSCAN", "$missing", 10, true).await;
}

#[tokio::test]
async fn scripts_run_and_convert_as_redis_does() {
    let mut b = Both::new().await;
    let scripts: &[&str] = &[
        "return {1, 'a', false, {2, 'b'}, 3.7, true}",
        "return {1, nil, 3}",
        "return 3.99",
        "return -2.5",
        "return false",
        "return nil",
        "redis.call('HSET', KEYS[1], 'f', ARGV[1]) return redis.call('HGET', KEYS[1], 'f')",
        "return redis.call('HINCRBY', KEYS[1], 'n', 2.0)",
        "return redis.call('SET', KEYS[1], 'x')",
        "return redis.call('PING')",
        "local r = redis.call('SET', KEYS[1], 'y') return r.ok",
        "return redis.call('GET', KEYS[1] .. 'nothing') == false and 1 or 0",
        "return redis.status_reply('FINE')",
        "return redis.error_reply('MYERR it broke')",
        "return redis.call('HGET', KEYS[1], 'f')",
        "return redis.pcall('HGET', KEYS[1], 'f')['err'] ~= nil and 1 or 0",
        "return redis.sha1hex('abc')",
        "return redis.sha1hex('')",
        "return struct.pack('>I4', 258)",
        "return struct.pack('<I2', 258) .. struct.pack('>i4', -2)",
        "return {struct.unpack('>I4', '\\0\\0\\1\\2xyz', 1)}",
        "return {struct.unpack('>i2', 'ab\\255\\254', 3)}",
        "return #KEYS + #ARGV * 10",
        "return ARGV",
        "return tostring(1e15) .. ' ' .. tostring(0.1) .. ' ' .. tostring(2^53)",
        "return redis.call('ZSCORE', KEYS[2], 'm')",
        "redis.call('ZADD', KEYS[2], 1.25, 'm') return redis.call('ZSCORE', KEYS[2], 'm')",
        "return redis.call('NOSUCHCOMMAND')",
        "return redis.call('SET', KEYS[1], {})",
        "this is not lua",
        "error('boom')",
        "local ok = pcall(redis.call, 'NOSUCHCOMMAND') return ok and 1 or 0",
        "pcall(redis.call, 'HGET', KEYS[1], 'f') error('after')",
        "return redis.pcall('HGET', KEYS[1], 'f', 'extra')",
    ];
    for s in scripts {
        b.same(&["SET", "$str", "plain"]).await;
        b.same(&["EVAL", s, "2", "$k", "$z", "v1", "v2"]).await;
        // A command that fails inside a script fails the script, with the command's code.
        b.same(&[
            "EVAL",
            "return redis.call('HGET', KEYS[1], 'f')",
            "1",
            "$str",
        ])
        .await;
    }
    let sha = b
        .same(&["SCRIPT", "LOAD", "return ARGV[1] .. KEYS[1]"])
        .await;
    let Value::BulkString(sha) = sha else {
        panic!("{sha:?}")
    };
    let sha = String::from_utf8(sha).unwrap();
    b.same_each(&[
        &["EVALSHA", &sha, "1", "x", "y"],
        &[
            "SCRIPT",
            "EXISTS",
            &sha,
            "0000000000000000000000000000000000000000",
        ],
        &["EVALSHA", "0000000000000000000000000000000000000000", "0"],
        &["EVALSHA", &sha, "3", "x"],
    ])
    .await;
}
