//! The ledger's writes that arrive together go together ([`crate::gather`]): holds and
//! checkouts of one sale share one transaction ([`Ledger::apply_all`]), an instant sale's
//! claims another ([`Ledger::record_claims`]), and so one commit. A write that finds nothing
//! of its sale out goes at once, alone; only while the database is busy with a sale do its
//! writes gather, up to `ledger.batch_max` in one transaction. Nothing is answered before
//! its batch is committed. Once a batch of claims is, the queue store hears which it has
//! in one call.

use std::sync::Arc;

use crate::domain::SaleId;
use crate::gather::{Asked, CallError, Gathering, Limits};
use crate::ledger::{Applied, ClaimAsk, Claimed, EventAsk, Ledger, LedgerError, LedgerResult};
use crate::queue::QueueStore;

impl CallError for LedgerError {
    fn miscounted(asked: usize, got: usize) -> Self {
        LedgerError::Other(format!("{got} outcomes to {asked} writes"))
    }

    fn dropped() -> Self {
        LedgerError::Unavailable("the batch's transaction went away".into())
    }
}

/// The gatherings of the ledger's hot writes.
pub struct LedgerBatches {
    ledger: Arc<dyn Ledger>,
    queue: Arc<dyn QueueStore>,
    events: Arc<Gathering<Asked<EventAsk, Applied, LedgerError>>>,
    claims: Arc<Gathering<Asked<ClaimAsk, Claimed, LedgerError>>>,
}

impl LedgerBatches {
    pub fn new(
        ledger: Arc<dyn Ledger>,
        queue: Arc<dyn QueueStore>,
        config: &crate::config::LedgerConfig,
    ) -> Self {
        let limits = Limits {
            calls: config.batch_calls as usize,
            batch: config.batch_max as usize,
        };
        let metric = "sluice_ledger_batch_size";
        LedgerBatches {
            ledger,
            queue,
            events: Arc::new(Gathering::new(metric, "events", limits)),
            claims: Arc::new(Gathering::new(metric, "claims", limits)),
        }
    }

    /// Applies one event ([`Ledger::apply`]) in the sale's next batch.
    pub async fn apply(&self, ask: EventAsk) -> LedgerResult<Applied> {
        let sale = ask.id.sale;
        let ledger = Arc::clone(&self.ledger);
        let call = move |asks: Vec<EventAsk>| {
            let ledger = Arc::clone(&ledger);
            async move { ledger.apply_all(sale, &asks).await }
        };
        self.events.ask(sale, ask, call).answer().await
    }

    /// Records one claim ([`Ledger::record_claims`]) in the sale's next batch.
    pub async fn claim(&self, claim: ClaimAsk) -> LedgerResult<Claimed> {
        let sale = claim.attempt.sale;
        let (ledger, queue) = (Arc::clone(&self.ledger), Arc::clone(&self.queue));
        let call = move |claims: Vec<ClaimAsk>| {
            let (ledger, queue) = (Arc::clone(&ledger), Arc::clone(&queue));
            async move {
                let outcomes = ledger.record_claims(sale, &claims).await?;
                let recorded: Vec<_> = claims
                    .iter()
                    .zip(&outcomes)
                    .filter(|(_, o)| matches!(o, Ok(Claimed::Recorded(_))))
                    .map(|(c, _)| c.attempt)
                    .collect();
                if let Err(e) = queue.claims_recorded(sale, &recorded).await {
                    // Answered `claimed` again until then: recording again changes nothing.
                    tracing::debug!(%sale, error = %e, "recorded claims still marked as awaiting their record");
                }
                Ok(outcomes)
            }
        };
        self.claims.ask(sale, claim, call).answer().await
    }

    /// Claims of the sale waiting for a transaction of their own: how far the ledger is
    /// behind this replica's claims.
    pub fn claims_waiting(&self, sale: SaleId) -> usize {
        self.claims.pending(sale)
    }
}
