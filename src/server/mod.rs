//! Starting sluice: migrate, bind, serve ([`http`]), run the workers.

pub mod http;

use std::net::SocketAddr;
use std::time::Instant;

use tokio::net::{TcpListener, TcpSocket};
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::task::JoinHandle;

use crate::config::Config;
use crate::ledger::Ledger;
use crate::service::App;
use crate::workers::Workers;

/// A running sluice.
pub struct Running {
    /// Where it listens (the real port when the config asked for port 0).
    pub addr: SocketAddr,
    pub app: App,
    server: JoinHandle<()>,
    workers: Option<Workers>,
    /// Keep each identity provider's published keys fresh (when user tokens are checked with
    /// them): stopped with the process.
    jwks: Vec<JoinHandle<()>>,
    /// Traces over OTLP, when on: what is queued is sent at the stop.
    traces: Option<crate::telemetry::traces::Traces>,
}

/// Connections the kernel completes and queues before sluice accepts them. A sale's opening
/// brings new connections in a burst; past the queue's length the kernel drops their SYNs and
/// each of those clients waits a second or more to try again. The kernel caps it at
/// `net.core.somaxconn` (4096 on current kernels).
const LISTEN_BACKLOG: u32 = 4096;

/// The listener on `addr`, with the address reusable at once after a restart (as std's bind
/// sets it) and a queue of [`LISTEN_BACKLOG`].
fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

pub async fn start(config: Config) -> anyhow::Result<Running> {
    start_as(config, crate::service::new_instance_id(), None).await
}

/// Starts as the replica `instance`, with its traces (the binary starts them before its
/// logging: `telemetry::traces`).
pub async fn start_as(
    config: Config,
    instance: String,
    traces: Option<crate::telemetry::traces::Traces>,
) -> anyhow::Result<Running> {
    let app = App::build_as(config, instance)?;
    migrate_on_start(&app).await?;
    // Redis's script cache is filled before the first request; a Redis that is away now gets
    // the scripts from the queue-sync worker once it answers.
    if let Err(e) = app.queue.prepare().await {
        tracing::debug!(error = %e, "queue store not prepared at start");
    }
    // The gates are read before the first check: a check before them would let everything
    // through. Workers keep them fresh; without workers, this replica reads them itself.
    if let Err(e) = crate::service::gate::refresh(&app).await {
        tracing::warn!(error = %e, "could not read the gates at start");
    }
    if !app.config.workers.enabled {
        tokio::spawn(crate::service::gate::run(app.clone()));
    }
    let listen_on = app.config.http.listen;
    let listener = listen(listen_on)
        .map_err(|e| anyhow::anyhow!("listening on {listen_on} (http.listen): {e}"))?;
    let addr = listener.local_addr()?;
    let routes = crate::api::routes(app.clone());
    let idle_timeout = app.config.http_idle_timeout();
    let server = tokio::spawn(http::serve(
        listener,
        routes,
        idle_timeout,
        app.config.http.drain_delay_secs.duration(),
        app.drain.subscribe(),
    ));
    // The identity provider's published keys: fetched before the first request (a provider
    // that does not answer leaves them to the next try), then kept fresh.
    let mut jwks = Vec::new();
    for keys in app.users.jwks() {
        keys.fetch().await;
        jwks.push(tokio::spawn(keys.run()));
    }
    let workers = if app.config.workers.enabled {
        Some(Workers::start(&app).await?)
    } else {
        None
    };
    let queue = match (app.config.queue.url.is_empty(), app.config.queue.cluster) {
        (true, _) => "in-process",
        (false, false) => "redis",
        (false, true) => "redis cluster",
    };
    // The instance id names this process as a sale's admitter (getAdmission's `admitter`).
    tracing::info!(%addr, ledger = %ledger_name(&app.config), queue, instance = %app.instance_id, "sluice is serving");
    if app.config.ledger_is_embedded() {
        tracing::info!(
            admin_key = %app.config.auth.admin_key.expose(),
            secrets = %crate::secrets::path(&app.config).display(),
            "embedded mode: send the admin key as X-Admin-Key; `sluice dev-token <user>` mints user tokens"
        );
    }
    Ok(Running {
        addr,
        app,
        server,
        workers,
        jwks,
        traces,
    })
}

impl Running {
    /// Drains and stops, within `http.shutdown_timeout_secs`: readiness answers 503 and status
    /// streams send their last event; the listener closes (`http.drain_delay_secs` later) and
    /// every open connection finishes its request in flight; meanwhile the workers stop at a
    /// clean point (the admission loop after its tick, giving up its sales' leases so another
    /// replica admits at once; the relay once its batch in flight is published and marked).
    /// Whatever is still running at the bound is cut off.
    pub async fn stop(self) {
        let bound = self.app.config.http.shutdown_timeout_secs.duration();
        let started = Instant::now();
        self.app.drain.start();
        let mut server = self.server;
        for keys in &self.jwks {
            keys.abort();
        }
        let workers = async {
            if let Some(workers) = self.workers {
                workers.stop(bound).await;
            }
        };
        let (served, ()) = tokio::join!(tokio::time::timeout(bound, &mut server), workers);
        if served.is_err() {
            tracing::warn!(
                ?bound,
                "connections still open at the shutdown bound: cut off"
            );
            server.abort();
        }
        tracing::info!(took_ms = started.elapsed().as_millis() as u64, "stopped");
        if let Some(traces) = self.traces {
            // The exporter's client blocks: off the runtime's threads.
            let _ = tokio::task::spawn_blocking(move || traces.stop()).await;
        }
    }

    /// Serves until the process is asked to stop (SIGTERM, as from Kubernetes or `docker
    /// stop`, or SIGINT / Ctrl-C), then drains ([`Running::stop`]).
    pub async fn wait(self, mut signals: StopSignals) -> anyhow::Result<()> {
        let signal = tokio::select! {
            _ = signals.terminate.recv() => "SIGTERM",
            _ = signals.interrupt.recv() => "SIGINT",
        };
        tracing::info!(signal, "draining");
        self.stop().await;
        Ok(())
    }
}

/// SIGTERM and SIGINT, listened for from before the process starts serving: one that arrives
/// while it starts is kept for [`Running::wait`], which drains at once (unlistened, a signal's
/// default action ends the process there and then, with no drain and not exit 0).
pub struct StopSignals {
    terminate: Signal,
    interrupt: Signal,
}

impl StopSignals {
    pub fn listen() -> std::io::Result<Self> {
        Ok(StopSignals {
            terminate: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
        })
    }
}

/// Applies the ledger's pending migrations when `ledger.migrate_on_start` says to: before
/// serving, and before a one-shot command that reads the ledger.
pub async fn migrate_on_start(app: &App) -> anyhow::Result<()> {
    if app.config.ledger.migrate_on_start {
        migrate_ledger(app.ledger.as_ref(), &app.config).await?;
    }
    Ok(())
}

/// Applies the ledger's pending migrations; an error names the ledger.
pub async fn migrate_ledger(ledger: &dyn Ledger, config: &Config) -> anyhow::Result<()> {
    ledger
        .migrate()
        .await
        .map_err(|e| anyhow::anyhow!("migrating the ledger ({}): {e}", ledger_name(config)))
}

/// The ledger for messages: the embedded database's file, or the URL without its password.
fn ledger_name(config: &Config) -> String {
    if config.ledger_is_embedded() {
        config
            .embedded
            .data_dir
            .join("sluice.db")
            .display()
            .to_string()
    } else {
        redact(&config.ledger.url)
    }
}

/// A database URL without its password, for messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{}{}@{}", &url[..scheme + 3], user, &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}
