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
