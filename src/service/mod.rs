//! The use cases. HTTP handlers parse and delegate here; each file is one use case, and none
//! knows about HTTP.
//!
//! [`App`] holds the backends: the queue store (hot path) and the ledger (truth), each behind
//! its trait, plus the keys that sign and verify tokens and webhooks.

mod error;
mod idempotency;
pub mod in_flight;
pub mod limits;
mod sync;
mod view;

pub mod attempt_event;
pub mod batches;
pub mod checkout;
pub mod claim;
pub mod drain;
pub mod figures;
pub mod gate;
pub mod hold;
pub mod join;
pub mod layouts;
pub mod leave;
pub mod line;
pub mod member_lists;
pub mod offer;
pub mod operators;
pub mod payment;
pub mod phases;
pub mod provider_webhook;
pub mod refund;
pub mod sales;
pub mod sandbox;
pub mod seat_map;
pub mod status;
pub mod status_stream;
pub mod support;
pub mod toss;
pub mod transition;
pub mod web_push;

use std::sync::Arc;

use metrics_exporter_prometheus::PrometheusHandle;

pub use error::ServiceError;
pub use idempotency::{idempotent, IdempotencyKey};
use sync::sync_queue_all;
pub use view::{poll_after_ms, AttemptView};

use crate::auth::{AdminKey, AdmissionTokens, QueueTickets, UserTokens};
use crate::config::Config;
use crate::ledger::Ledger;
use crate::payments::WebhookSigner;
use crate::queue::QueueStore;

pub type ServiceResult<T> = Result<T, ServiceError>;

/// Runs `work` to its end on a task of its own, whatever becomes of the request that asked:
/// a client that goes away drops the request's future, which would stop a change made in the
/// queue store before the ledger follows (a hold's units, a claim). `what` names it should
/// the runtime go away first.
pub(crate) async fn to_the_end<T: Send + 'static>(
    what: &'static str,
    work: impl std::future::Future<Output = ServiceResult<T>> + Send + 'static,
) -> ServiceResult<T> {
    // Still the request's: its caller and its span go with it.
    let work = crate::telemetry::caller::carried(tracing::Instrument::in_current_span(work));
    match tokio::spawn(work).await {
        Ok(answer) => answer,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // The runtime is going away.
        Err(e) => Err(ServiceError::Internal(format!("{what} was cut short: {e}"))),
    }
}

/// Everything a request or a worker needs; cheap to clone.
/// Everything a request or a worker needs, shared: cloning an `App` (per request in the
/// middleware, per status stream and poll) copies one pointer, not the keys, validators and
/// handles inside (which allocate when copied).
#[derive(Clone)]
pub struct App(Arc<AppParts>);

impl std::ops::Deref for App {
    type Target = AppParts;

    fn deref(&self) -> &AppParts {
        &self.0
    }
}

pub struct AppParts {
    pub config: Arc<Config>,
    /// Queue order, positions, active set, stock counters: every join and status call.
    pub queue: Arc<dyn QueueStore>,
    /// The truth from ADMITTED on; never touched by join or by the status of waiting users.
    pub ledger: Arc<dyn Ledger>,
    /// The ledger's writes that arrive together, gathered into one transaction per sale.
    pub batches: batches::LedgerBatches,
    /// This replica's copies of list phases' members: a presale's joins read no ledger.
    pub member_lists: member_lists::MemberLists,
    /// Verifies the customer's user tokens.
    pub users: UserTokens,
    /// Signs and verifies admission tokens.
    pub admission: AdmissionTokens,
    /// Signs and verifies queue tickets (a waiting attempt's place, for status from the view).
    pub tickets: QueueTickets,
    /// This replica's view of each waiting line it answers for, and its status streams.
    pub lines: Arc<line::Lines>,
    pub admin_key: AdminKey,
    pub webhooks: WebhookSigner,
    /// Who takes the payments (`payments.provider`).
    pub provider: std::sync::Arc<dyn crate::payments::Connector>,
    pub metrics: PrometheusHandle,
    /// Per-user limits of join and status.
    pub limits: Arc<limits::Limits>,
    /// This process's name in admission leases.
    pub instance_id: String,
    /// Recent offers by sale: every waiting-room page asks for one, the ledger answers at most
    /// once a second per sale and replica.
    pub offers: Arc<offer::OfferCache>,
    /// Whether the process is shutting down: readiness and status streams follow it.
    pub drain: drain::Drain,
    /// Holds taken in the queue store and not yet settled in the ledger, by sale: the drift
    /// checker leaves those sales alone.
    pub holds_in_flight: in_flight::InFlight,
    /// Attempts whose turn came, handed from the admission loop to the sender of the
    /// "it's your turn" messages (`crate::notify`).
    pub turns: crate::notify::Turns,
    /// This replica's seat maps of the sales it is asked about, each read at most once per
    /// `queue.line_refresh_ms`.
    pub seat_maps: seat_map::SeatMaps,
    /// The gates in front of sites, as this replica last read them, and their keys.
    pub gates: gate::GateState,
}

/// A new replica's id: it names the process as a sale's admitter and in its traces.
pub fn new_instance_id() -> String {
    uuid::Uuid::now_v7().simple().to_string()
}

impl App {
    /// Builds the backends named by the configuration (no connection is made yet).
    pub fn build(config: Config) -> anyhow::Result<App> {
        Self::build_as(config, new_instance_id())
    }

    /// [`App::build`], as the replica `instance`.
    pub fn build_as(config: Config, instance: String) -> anyhow::Result<App> {
        let queue = crate::queue::from_config(&config)?;
        Self::assemble(config, queue, instance)
    }

    /// Builds the backends named by the configuration, with `queue` as the queue store.
    pub fn build_on(config: Config, queue: Arc<dyn QueueStore>) -> anyhow::Result<App> {
        Self::assemble(config, queue, new_instance_id())
    }

    fn assemble(
        config: Config,
        queue: Arc<dyn QueueStore>,
        instance: String,
    ) -> anyhow::Result<App> {
        let ledger = crate::ledger::from_config(&config)?;
        let seed = config.auth.admission_key_seed_hex.as_ref().map(|hex_seed| {
            let bytes = hex::decode(hex_seed.expose()).expect("validated at load");
            <[u8; 32]>::try_from(bytes.as_slice()).expect("validated at load")
        });
        if seed.is_none() {
            tracing::warn!("auth.admission_key_seed_hex is unset: admission tokens are signed with a key generated at start, which other replicas cannot verify");
        }
        Ok(App(Arc::new(AppParts {
            users: UserTokens::from_config(&config.auth)?,
            admission: AdmissionTokens::new(seed),
            tickets: QueueTickets::new(seed),
            lines: Arc::new(line::Lines::new(
                Arc::clone(&queue),
                config.queue.line_refresh_ms.duration(),
                config.workers.abandon_after_secs.duration(),
            )),
            admin_key: AdminKey::new(config.auth.admin_key.expose()),
            webhooks: WebhookSigner::new(
                config.payments.webhook_secret.expose(),
                config.payments.tolerance_secs.0,
            ),
            provider: crate::payments::providers::from_config(
                &config.payments,
                config.payment_provider(),
                config.http.public_url.as_deref().unwrap_or(""),
            )?,
            metrics: crate::telemetry::metrics_handle(),
            limits: Arc::new(limits::Limits::new(&config.limits)),
            instance_id: instance,
            offers: Arc::default(),
            drain: drain::Drain::default(),
            holds_in_flight: Default::default(),
            turns: crate::notify::Turns::new(&config.notify)?,
            seat_maps: Default::default(),
            gates: gate::GateState::new(&config.gate, seed),
            member_lists: Default::default(),
            batches: batches::LedgerBatches::new(
                Arc::clone(&ledger),
                Arc::clone(&queue),
                &config.ledger,
            ),
            queue,
            ledger,
            config: Arc::new(config),
        })))
    }
}
