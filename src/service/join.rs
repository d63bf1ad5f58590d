//! Join a sale's queue. Touches only the queue store (unless the store lost the sale), after
//! checking the proof of work the sale asks for (its settings kept in memory for a second).
//! An instant sale's join is its claim: the store decides it, and the ledger records it in a
//! batch before the answer (`claim.rs`).

use chrono::Utc;

use super::{sales, App, AttemptView, ServiceError, ServiceResult};
use crate::auth::Ticket;
use crate::domain::{SaleId, UserId};
use crate::queue::JoinOutcome;

/// A join's answer: the attempt, and whether this join claimed it (an instant sale's claim
/// made now, not one found).
pub struct Joined {
    pub view: AttemptView,
    pub claimed_now: bool,
}

/// Joins `sale`; `work` is the proof-of-work nonce, needed when the sale asks for one;
/// `code` an access code, for a phase open to holders of codes.
pub async fn join(
    app: &App,
    sale: SaleId,
    user: &UserId,
    work: Option<&str>,
    code: Option<&str>,
) -> ServiceResult<Joined> {
    if let Some(rules) = super::offer::join_rules(app, sale).await? {
        let pow = &rules.sale.proof_of_work;
        if pow.is_on() && !pow.verify(sale, user, work.unwrap_or("")) {
            metrics::counter!("sluice_joins_total", "outcome" => "no_proof_of_work").increment(1);
            return Err(ServiceError::ProofOfWorkRequired {
                bits: pow.bits,
                salt: pow.salt.clone(),
            });
        }
        if !rules.phases.is_empty() {
            if let Err(e) = super::phases::gate(app, sale, user, code, &rules.phases).await {
                metrics::counter!("sluice_joins_total", "outcome" => "not_in_phase").increment(1);
                return Err(e);
            }
        }
    }
    let now_ms = Utc::now().timestamp_millis();
    // Claims this replica's ledger has not taken up yet, beyond a full batch: an instant
    // sale's line fronts the joins until it catches up.
    let front = app.batches.claims_waiting(sale) >= app.config.ledger.batch_max as usize;
    let mut outcome = app.queue.join_or_claim(sale, user, now_ms, front).await?;
    if outcome == JoinOutcome::UnknownSale && sales::restore_in_queue(app, sale, false).await? {
        outcome = app.queue.join_or_claim(sale, user, now_ms, front).await?;
    }
    let label = match &outcome {
        JoinOutcome::Queued { .. } => "queued",
        JoinOutcome::Active { .. } => "active",
        JoinOutcome::Claimed { .. } => "claimed",
        JoinOutcome::SoldOut => "sold_out",
        JoinOutcome::LimitReached { .. } => "limit",
        JoinOutcome::UnknownSale => "unknown_sale",
        JoinOutcome::Closed => "closed",
    };
    metrics::counter!("sluice_joins_total", "outcome" => label).increment(1);
    match outcome {
        JoinOutcome::Queued {
            attempt,
            position,
            waiting,
            measured_rate,
            configured_rate,
            serial,
            epoch,
        } => {
            let rate = super::status::best_rate(measured_rate, configured_rate);
            let mut view = super::status::waiting(app, attempt, position, waiting, rate);
            view.as_of = Some(Utc::now());
            view.queue_ticket = Some(app.tickets.issue(attempt, user, &Ticket { serial, epoch }));
            Ok(Joined {
                view,
                claimed_now: false,
            })
        }
        JoinOutcome::Active { attempt } => Ok(Joined {
            view: super::status::from_store(app, attempt, user).await?,
            claimed_now: false,
        }),
        JoinOutcome::Claimed { attempt, serial } => {
            let (view, claimed_now) = super::claim::record(app, attempt, user, serial).await?;
            Ok(Joined { view, claimed_now })
        }
        JoinOutcome::SoldOut => Err(ServiceError::SoldOut { remaining: 0 }),
        JoinOutcome::LimitReached { already } => Err(ServiceError::LimitReached { already }),
        JoinOutcome::UnknownSale => Err(ServiceError::NotFound("sale")),
        JoinOutcome::Closed => Err(ServiceError::SaleClosed),
    }
}
