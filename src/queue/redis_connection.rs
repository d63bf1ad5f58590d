//! The one connection the Redis queue store talks through: a single server (a multiplexed
//! [`ConnectionManager`]), a Redis Cluster (the `cluster-async` connection, which follows
//! MOVED/ASK and reconnects by itself), or the in-process Redis of the embedded default
//! ([`Embedded`]). The first two reconnect in the background, so the store never holds a dead
//! socket. Every key of a sale shares the hash slot `{sale:<id>}`, so each script
//! and pipeline of the store runs on one node whichever kind this is.

use std::sync::Arc;
use std::time::Duration;

use ::redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use ::redis::cluster::ClusterClientBuilder;
use ::redis::cluster_async::ClusterConnection;
use ::redis::{Cmd, Pipeline, RedisFuture, Value};

use super::embedded::Embedded;

#[derive(Clone)]
pub enum RedisConnection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
    InProcess(Arc<Embedded>),
}

/// A command's arguments as the in-process store takes them.
fn argv(cmd: &Cmd) -> Vec<Vec<u8>> {
    cmd.args_iter()
        .map(|a| match a {
            ::redis::Arg::Simple(b) => b.to_vec(),
            // No call of the store iterates a cursor client-side.
            _ => b"0".to_vec(),
        })
        .collect()
}

impl RedisConnection {
    /// A lazy connection: nothing is dialled until the first call, so sluice starts (and
    /// reports not-ready) while Redis is down. `urls` holds one server, or (cluster) the seed
    /// nodes the client learns the slot map from.
    pub fn new(urls: &[&str], cluster: bool, timeout: Duration) -> anyhow::Result<Self> {
        if cluster {
            let client = ClusterClientBuilder::new(urls.to_vec())
                .connection_timeout(timeout)
                .response_timeout(timeout)
                .retries(2)
                .max_retry_wait(200)
                .build()?;
            let config = ::redis::cluster::ClusterConfig::new()
                .set_connection_timeout(timeout)
                .set_response_timeout(timeout);
            return Ok(RedisConnection::Cluster(
                client.get_pending_async_connection_with_config(config),
            ));
        }
        let [url] = urls else {
            anyhow::bail!("a single Redis takes one url, got {}", urls.len());
        };
        let client = ::redis::Client::open(*url)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_millis(200));
        Ok(RedisConnection::Single(
            ConnectionManager::new_lazy_with_config(client, config)?,
        ))
    }
}

impl ConnectionLike for RedisConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            RedisConnection::Single(c) => c.req_packed_command(cmd),
            RedisConnection::Cluster(c) => c.req_packed_command(cmd),
            RedisConnection::InProcess(store) => {
                let argv = argv(cmd);
                Box::pin(async move { Ok(store.execute(argv).await) })
            }
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            RedisConnection::Single(c) => c.req_packed_commands(pipeline, offset, count),
            RedisConnection::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
            RedisConnection::InProcess(store) => {
                let commands: Vec<_> = pipeline.cmd_iter().map(argv).collect();
                Box::pin(async move {
                    let mut replies = Vec::with_capacity(commands.len());
                    for argv in commands {
                        replies.push(store.execute(argv).await);
                    }
                    Ok(replies.into_iter().skip(offset).take(count).collect())
                })
            }
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            RedisConnection::Single(c) => c.get_db(),
            RedisConnection::Cluster(c) => c.get_db(),
            RedisConnection::InProcess(_) => 0,
        }
    }
}
