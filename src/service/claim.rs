//! An instant sale's claims: the queue store decides each (`lua/join.lua` for a join while
//! nobody waits, `lua/admit_batch.lua` for the line's turn), then the ledger records them in
//! batches ([`crate::ledger::Ledger::record_claims`]) before anyone is answered, and the store
//! is told which it has. A claim the ledger refuses (it had no unit, or the user had claimed
//! under another attempt: a store that lost data) gives the store's unit back; a claim the
//! ledger could not be asked about stays in the store, answered `claimed` again to its user's
//! retry and recorded by the sale's admitter once its time is past
//! ([`crate::queue::CLAIM_RECORD_MS`]): either taken or not, never half.

use super::transition::settle;
use super::{App, AttemptView, ServiceError, ServiceResult};
use crate::domain::{AttemptId, SaleId, UserId};
use crate::ledger::{ClaimAsk, Claimed, LedgerError, LedgerResult};
use crate::queue::StaleClaim;

/// Records the claim the store made for `attempt` (join serial `serial`) and answers the
/// attempt after it, and whether this recorded it (not a record made before). Runs to its
/// end on a task of its own: a client that goes away does not leave the claim half made.
pub async fn record(
    app: &App,
    attempt: AttemptId,
    user: &UserId,
    serial: u64,
) -> ServiceResult<(AttemptView, bool)> {
    let ask = ClaimAsk {
        attempt,
        user: user.clone(),
        seq: serial,
    };
    let app = app.clone();
    super::to_the_end("the claim", async move {
        let _in_flight = app.holds_in_flight.hold(attempt.sale);
        let outcome = app.batches.claim(ask).await;
        answer(&app, attempt, outcome).await
    })
    .await
}

/// What the ledger's outcome of one claim answers, the store brought in line.
async fn answer(
    app: &App,
    attempt: AttemptId,
    outcome: LedgerResult<Claimed>,
) -> ServiceResult<(AttemptView, bool)> {
    let label = match &outcome {
        Ok(Claimed::Recorded(_)) => "claimed",
        Ok(Claimed::Before(_)) => "claimed_before",
        Err(LedgerError::SoldOut) => "sold_out",
        Err(_) => "failed",
    };
    metrics::counter!("sluice_claims_total", "outcome" => label).increment(1);
    match outcome {
        Ok(Claimed::Recorded(applied)) => {
            settle(app, &applied).await;
            let now = applied.decision().changed;
            Ok((AttemptView::from_record(&applied.record, None), now))
        }
        Ok(Claimed::Before(record)) => {
            give_back(app, attempt).await;
            Ok((AttemptView::from_record(&record, None), false))
        }
        Err(e) if e.is_refusal() => {
            give_back(app, attempt).await;
            Err(match e {
                LedgerError::SoldOut => ServiceError::SoldOut { remaining: 0 },
                other => other.into(),
            })
        }
        // Not known to be recorded: the claim stays for a retry or the admitter.
        Err(e) => Err(e.into()),
    }
}

/// A claim the ledger refused: the store's unit goes back, and the claim leaves the store.
async fn give_back(app: &App, attempt: AttemptId) {
    if let Err(e) = app.queue.restore(attempt, None).await {
        tracing::warn!(%attempt, error = %e, "a refused claim's unit is still taken in the queue store: the drift checker gives it back");
    }
    if let Err(e) = app.queue.claims_recorded(attempt.sale, &[attempt]).await {
        tracing::debug!(%attempt, error = %e, "a refused claim is still awaiting its record in the queue store");
    }
}

/// Records claims the store made and nobody recorded in their time (their replica went
/// away, or its ledger failed): the sale's admitter calls this every tick. How many it
/// recorded.
pub async fn record_stale(app: &App, sale: SaleId) -> anyhow::Result<usize> {
    let stale = app.queue.stale_claims(sale).await?;
    if stale.is_empty() {
        return Ok(0);
    }
    let asks: Vec<ClaimAsk> = stale
        .into_iter()
        .map(
            |StaleClaim {
                 attempt,
                 user,
                 serial,
             }| ClaimAsk {
                attempt,
                user,
                seq: serial,
            },
        )
        .collect();
    settle_batch(app, sale, &asks).await
}

/// Records a batch of the store's claims (the admitter's turn, or stale ones) and brings the
/// store in line with each outcome; how many the ledger has now. `Err` only when the ledger
/// failed: the claims are then as they were, for the caller. (A store that fails to hear
/// which the ledger has answers them `claimed` until told: recording again changes nothing.)
pub async fn settle_batch(app: &App, sale: SaleId, asks: &[ClaimAsk]) -> anyhow::Result<usize> {
    let outcomes = app.ledger.record_claims(sale, asks).await?;
    let mut recorded = Vec::with_capacity(asks.len());
    let mut count = 0;
    for (ask, outcome) in asks.iter().zip(outcomes) {
        match outcome {
            Ok(Claimed::Recorded(applied)) => {
                settle(app, &applied).await;
                count += 1;
                recorded.push(ask.attempt);
            }
            Ok(Claimed::Before(_)) | Err(_) => {
                give_back(app, ask.attempt).await;
            }
        }
    }
    if let Err(e) = app.queue.claims_recorded(sale, &recorded).await {
        tracing::warn!(%sale, error = %e, "recorded claims still marked as awaiting their record");
    }
    Ok(count)
}
