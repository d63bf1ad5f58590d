//! The `sluice` command.

use std::io::Write;
use std::path::PathBuf;

use clap::{Parser, Subcommand};
use sluice::domain::UserId;

/// mimalloc: allocation-heavy request handling (JSON, JWT, headers) on many threads; glibc's
/// malloc showed up as a fifth of the CPU under load (see docs/benchmarks.md). Built without
/// transparent huge pages (Cargo.toml says why): memory per open connection.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "sluice",
    version,
    about = "Waiting room and first-come-first-served reservations"
)]
struct Cli {
    /// A TOML file layered over the built-in defaults (then SLUICE__… variables override it).
    #[arg(long, short, global = true, env = "SLUICE_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the API and run the workers (the default).
    Serve,
    /// Apply pending ledger migrations and exit.
    Migrate,
    /// Rebuild the queue store's view of sales from the ledger (free stock, live attempts,
    /// holds). Pause admission (or stop the service) while it runs.
    Reconcile {
        /// Only this sale; default: every sale that is open now.
        #[arg(long)]
        sale: Option<String>,
    },
    /// Domain events on Kafka.
    Events {
        #[command(subcommand)]
        command: EventsCommand,
    },
    /// Print the OpenAPI document.
    Openapi,
    /// Print a user bearer token signed with the configured HS256 secret (for development).
    DevToken {
        user_id: String,
        /// Lifetime in seconds.
        #[arg(long, default_value_t = 86_400)]
        ttl_secs: i64,
    },
}

#[derive(Subcommand)]
enum EventsCommand {
    /// Print the events of the topic, one JSON envelope a line, each event once (the reference
    /// consumer).
    Tail {
        /// Kafka bootstrap servers; default: events.kafka_brokers from the configuration.
        #[arg(long)]
        brokers: Option<String>,
        #[arg(long, default_value = "sluice-tail")]
        group: String,
        /// Start at the oldest event the topic keeps (else only new ones).
        #[arg(long)]
        from_beginning: bool,
        /// Stop after this many events.
        #[arg(long)]
        max: Option<u64>,
        /// Stop after this many seconds without an event.
        #[arg(long)]
        idle_secs: Option<u64>,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let path = cli.config.as_deref();
    let command = cli.command.unwrap_or(Command::Serve);
    if !matches!(command, Command::Serve) {
        sluice::telemetry::init_tracing(None, false);
    }
    match command {
        Command::Serve => {
            // Listened for before the configuration loads (where secrets may be generated and
            // written), so a SIGTERM from the first moment on drains rather than kills.
            let signals = sluice::server::StopSignals::listen()?;
            let config = load_config(path);
            // Logging starts with the traces, which the configuration turns on.
            let instance = sluice::service::new_instance_id();
            let traces = sluice::telemetry::traces::start(&config.telemetry, &instance)?;
            let json = config.logging.format == "json";
            sluice::telemetry::init_tracing(traces.as_ref().map(|t| t.layer()), json);
            sluice::server::start_as(config, instance, traces)
                .await?
                .wait(signals)
                .await
        }
        Command::Migrate => {
            let config = load_config(path);
            let ledger = sluice::ledger::from_config(&config)?;
            sluice::server::migrate_ledger(ledger.as_ref(), &config).await?;
            say("ledger migrated")
        }
        Command::Reconcile { sale } => {
            let app = sluice::service::App::build(load_config(path))?;
            // As `serve` does: a ledger never served from (a fresh embedded one) has its tables.
            sluice::server::migrate_on_start(&app).await?;
            let sales = match sale {
                Some(id) => vec![sluice::domain::SaleId::parse(&id)?],
                None => app
                    .ledger
                    .admitting_sales()
                    .await?
                    .into_iter()
                    .map(|p| p.sale)
                    .collect(),
            };
            if sales.is_empty() {
                say("no sale is open: nothing to rebuild")?;
            }
            for id in sales {
                let found = sluice::service::sales::restore_in_queue(&app, id, true).await?;
                let outcome = if found {
                    "rebuilt from the ledger"
                } else {
                    "no such sale"
                };
                say(format_args!("{id}: {outcome}"))?;
            }
            Ok(())
        }
        Command::Events {
            command:
                EventsCommand::Tail {
                    brokers,
                    group,
                    from_beginning,
                    max,
                    idle_secs,
                },
        } => {
            let config = load_config(path);
            let brokers = brokers.unwrap_or_else(|| config.events.kafka_brokers.clone());
            anyhow::ensure!(
                !brokers.is_empty(),
                "no Kafka brokers: pass --brokers or set events.kafka_brokers"
            );
            let options = sluice::events::tail::TailOptions {
                brokers,
                topic: config.events.topic.clone(),
                group,
                from_beginning,
                max,
                idle: idle_secs.map(std::time::Duration::from_secs),
            };
            sluice::events::tail::tail(options, &mut std::io::stdout().lock()).await?;
            Ok(())
        }
        Command::Openapi => {
            let config = load_config(path);
            let queue = sluice::queue::detached(&config);
            let app = sluice::service::App::build_on(config, queue)?;
            say(sluice::api::document(&app))
        }
        Command::DevToken { user_id, ttl_secs } => {
            let user = UserId::parse(&user_id)?;
            let tokens = sluice::auth::UserTokens::from_config(&load_config(path).auth)?;
            say(tokens.mint(&user, ttl_secs)?)
        }
    }
}

/// Prints one line. A reader that went away (`sluice openapi | head`) is not an error: the
/// rest of the output is not wanted, and the command's work stands.
fn say(line: impl std::fmt::Display) -> anyhow::Result<()> {
    match writeln!(std::io::stdout().lock(), "{line}") {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        written => Ok(written?),
    }
}

/// The configuration, or the process ends with status 2 and the reason.
fn load_config(path: Option<&std::path::Path>) -> sluice::config::Config {
    match sluice::secrets::load(path) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("sluice: {e}");
            std::process::exit(2);
        }
    }
}
