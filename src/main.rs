//! The `sluice` command.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use sluice::config::Config;
use sluice::domain::UserId;

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

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    sluice::telemetry::init_tracing();
    let cli = Cli::parse();
    let config = match Config::load(cli.config.as_deref()) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("sluice: {e}");
            std::process::exit(2);
        }
    };
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => sluice::server::start(config).await?.wait().await,
        Command::Migrate => {
            let ledger = sluice::ledger::from_config(&config)?;
            ledger.migrate().await?;
            println!("ledger migrated");
            Ok(())
        }
        Command::Reconcile { sale } => {
            let app = sluice::service::App::build(config)?;
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
            for id in sales {
                let found = sluice::service::sales::restore_in_queue(&app, id, true).await?;
                println!(
                    "{id}: {}",
                    if found {
                        "rebuilt from the ledger"
                    } else {
                        "no such sale"
                    }
                );
            }
            Ok(())
        }
        Command::Openapi => {
            let app = sluice::service::App::build(config)?;
            println!("{}", sluice::api::openapi(&app).spec());
            Ok(())
        }
        Command::DevToken { user_id, ttl_secs } => {
            let user = UserId::parse(&user_id)?;
            let tokens = sluice::auth::UserTokens::from_config(&config.auth)?;
            println!("{}", tokens.mint(&user, ttl_secs)?);
            Ok(())
        }
    }
}
