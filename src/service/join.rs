//! Join a sale's queue. Touches only the queue store (unless the store lost the sale), after
//! checking the proof of work the sale asks for (its settings kept in memory for a second).

use chrono::Utc;

use super::{sales, App, AttemptView, ServiceError, ServiceResult};
use crate::auth::Ticket;
use crate::domain::{SaleId, UserId};
use crate::queue::JoinOutcome;

/// Joins `sale`; `work` is the proof-of-work nonce, needed when the sale asks for one;
/// `code` an access code, for a phase open to holders of codes.
pub async fn join(
    app: &App,
    sale: SaleId,
    user: &UserId,
    work: Option<&str>,
    code: Option<&str>,
) -> ServiceResult<AttemptView> {
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
    let mut outcome = app.queue.join(sale, user, now_ms).await?;
    if outcome == JoinOutcome::UnknownSale && sales::restore_in_queue(app, sale, false).await? {
        outcome = app.queue.join(sale, user, now_ms).await?;
    }
    let label = match &outcome {
        JoinOutcome::Queued { .. } => "queued",
        JoinOutcome::Active { .. } => "active",
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
            Ok(view)
        }
        JoinOutcome::Active { attempt } => super::status::from_store(app, attempt, user).await,
        JoinOutcome::UnknownSale => Err(ServiceError::NotFound("sale")),
        JoinOutcome::Closed => Err(ServiceError::SaleClosed),
    }
}
