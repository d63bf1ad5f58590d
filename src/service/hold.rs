//! Hold and release. A hold is taken in the queue store first (atomic, all or nothing, fast for
//! the thousands who lose), then in the ledger (conditional: the last guard against
//! overselling). If the ledger refuses or fails, the queue store gives the units back.

use super::transition::settle;
use super::{App, AttemptView, ServiceError, ServiceResult};
use crate::auth::admission_token::AdmissionTokenError;
use crate::domain::sale::parse_seat_id;
use crate::domain::Take;
use crate::domain::{AttemptEvent, AttemptId, UserId};
use crate::ledger::{EventAsk, LedgerError};
use crate::queue::HoldOutcome;

pub use crate::domain::best_seats::BestAsk;

/// What a client asks to hold.
#[derive(Debug, Clone, PartialEq)]
pub enum Ask {
    /// Units, or the seats it names.
    Take(Take),
    /// The best seats side by side.
    Best(BestAsk),
}

/// What a client asks to hold: exactly one of a quantity, seat ids or best available.
pub fn parse_ask(
    quantity: Option<u32>,
    seat_ids: Option<Vec<String>>,
    best: Option<BestAsk>,
) -> ServiceResult<Ask> {
    let Some(best) = best else {
        return parse_take(quantity, seat_ids).map(Ask::Take);
    };
    if quantity.is_some() || seat_ids.is_some() {
        return Err(ServiceError::validation(
            "best_available",
            "give exactly one of `quantity`, `seat_ids` or `best_available`",
        ));
    }
    if !(1..=crate::domain::best_seats::MAX_COUNT).contains(&best.count) {
        return Err(ServiceError::validation(
            "best_available.count",
            "must be between 1 and 20",
        ));
    }
    Ok(Ask::Best(best))
}

/// What a client asks to hold: exactly one of a quantity or seat ids.
fn parse_take(quantity: Option<u32>, seat_ids: Option<Vec<String>>) -> ServiceResult<Take> {
    match (quantity, seat_ids) {
        (Some(n), None) if (1..=1000).contains(&n) => Ok(Take::Quantity(n)),
        (Some(_), None) => Err(ServiceError::validation(
            "quantity",
            "must be between 1 and 1000",
        )),
        (None, Some(seats)) => {
            if seats.is_empty() || seats.len() > 100 {
                return Err(ServiceError::validation("seat_ids", "list 1 to 100 seats"));
            }
            for seat in &seats {
                parse_seat_id(seat).map_err(|e| ServiceError::validation(e.field, e.message))?;
            }
            let mut unique = seats.clone();
            unique.sort();
            unique.dedup();
            if unique.len() != seats.len() {
                return Err(ServiceError::validation(
                    "seat_ids",
                    "seat ids must be unique",
                ));
            }
            Ok(Take::Seats(seats))
        }
        _ => Err(ServiceError::validation(
            "quantity",
            "give exactly one of `quantity`, `seat_ids` or `best_available`",
        )),
    }
}

pub async fn hold(
    app: &App,
    attempt: AttemptId,
    user: &UserId,
    admission_token: &str,
    ask: Ask,
) -> ServiceResult<AttemptView> {
    let admitted_until_ms = match app.admission.verify(admission_token, attempt, user) {
        Ok(claims) => claims.exp * 1000,
        Err(AdmissionTokenError::Expired) => return Err(ServiceError::AdmissionExpired),
        Err(AdmissionTokenError::Invalid | AdmissionTokenError::WrongAttempt) => {
            return Err(ServiceError::AdmissionTokenInvalid)
        }
    };
    if app.gates.fronts(attempt.sale) {
        return Err(ServiceError::validation(
            "attempt_id",
            "a gate's line holds no stock: its admission is traded for a session",
        ));
    }
    // Once the queue store has taken the units, the ledger's side must follow (or the units go
    // back) whatever becomes of the request: a client that goes away drops the request's
    // future, which would leave the units taken in the store only. So the two steps run to
    // their end on a task of their own.
    let (app, user) = (app.clone(), user.clone());
    super::to_the_end("the hold", async move {
        write_hold(&app, attempt, &user, ask, admitted_until_ms).await
    })
    .await
}

/// The hold in the queue store, then in the ledger; the store's units back if the ledger
/// refuses or fails.
async fn write_hold(
    app: &App,
    attempt: AttemptId,
    user: &UserId,
    ask: Ask,
    admitted_until_ms: i64,
) -> ServiceResult<AttemptView> {
    let _in_flight = app.holds_in_flight.hold(attempt.sale);
    let outcome = match &ask {
        Ask::Take(take) => app.queue.hold(attempt, user, take).await?,
        Ask::Best(best) => {
            let blocks = super::seat_map::blocks(app, attempt.sale, best).await?;
            app.queue.hold_best(attempt, user, best, &blocks).await?
        }
    };
    let label = match &outcome {
        HoldOutcome::Held { .. } => "held",
        HoldOutcome::NotAdmitted => "not_admitted",
        HoldOutcome::LimitReached { .. } => "limit",
        HoldOutcome::SoldOut { .. } => "sold_out",
        HoldOutcome::SeatTaken { .. } => "seat_taken",
        HoldOutcome::WrongKind => "wrong_kind",
        HoldOutcome::NoAdjacent { .. } => "no_adjacent",
    };
    metrics::counter!("sluice_holds_total", "outcome" => label).increment(1);
    let held =
        match outcome {
            HoldOutcome::Held { take } => take,
            // The queue store no longer counts the attempt as active: the ledger says why.
            HoldOutcome::NotAdmitted => return explain_not_admitted(app, attempt, user).await,
            HoldOutcome::LimitReached { already } => {
                return Err(ServiceError::LimitReached { already })
            }
            HoldOutcome::SoldOut { remaining } => return Err(ServiceError::SoldOut { remaining }),
            HoldOutcome::SeatTaken { seat } => return Err(ServiceError::SeatTaken(seat)),
            HoldOutcome::WrongKind => return Err(ServiceError::validation(
                "quantity",
                "this sale sells named seats: give `seat_ids` (or `quantity` for a quantity sale)",
            )),
            HoldOutcome::NoAdjacent { free } => {
                let count = match &ask {
                    Ask::Best(best) => best.count,
                    Ask::Take(take) => take.units(),
                };
                return Err(ServiceError::NoAdjacent { count, free });
            }
        };
    let ask = EventAsk {
        id: attempt,
        user: Some(user.clone()),
        event: AttemptEvent::Hold,
        take: Some(held),
    };
    match app.batches.apply(ask).await {
        Ok(applied) => {
            settle(app, &applied).await;
            Ok(AttemptView::from_record(&applied.record, None))
        }
        Err(e) => {
            let e = super::transition::settle_refusal(app, e).await;
            // Whatever the ledger said, it holds nothing for this attempt now (a refused or
            // failed transaction rolled back; an expired attempt had its hold returned). If the
            // attempt is still admitted there (units refused, or the ledger unreachable), it
            // keeps its slot to try again; otherwise the slot goes too.
            let still_admitted = match &e {
                LedgerError::Unavailable(_)
                | LedgerError::SoldOut
                | LedgerError::SeatTaken(_)
                | LedgerError::UnknownSeat(_) => Some(admitted_until_ms),
                LedgerError::NotFound
                | LedgerError::Rejected(_)
                | LedgerError::RejectedAfterExpiry { .. }
                | LedgerError::SaleClosed
                | LedgerError::NameTaken(_)
                | LedgerError::Conflict(_)
                | LedgerError::NotFree { .. }
                | LedgerError::SeatExists(_)
                | LedgerError::TooMany { .. }
                | LedgerError::Other(_) => None,
            };
            if let Err(restore) = app.queue.restore(attempt, still_admitted).await {
                tracing::error!(%attempt, error = %restore, "could not give queue-store stock back after a refused hold");
            }
            Err(match e {
                LedgerError::SoldOut => ServiceError::SoldOut { remaining: 0 },
                other => other.into(),
            })
        }
    }
}

async fn explain_not_admitted(
    app: &App,
    attempt: AttemptId,
    user: &UserId,
) -> ServiceResult<AttemptView> {
    let record = app.ledger.attempt(attempt).await?;
    match record {
        Some(record) if record.user == *user => {
            // Ask the machine: a repeat (already HOLD) is answered with the state, anything
            // else is refused with the state's own reason.
            match crate::domain::decide(record.state, AttemptEvent::Hold) {
                Ok(d) if !d.changed => Ok(AttemptView::from_record(&record, None)),
                Ok(_) => Err(ServiceError::NotAdmitted),
                Err(rejected) => Err(LedgerError::Rejected(rejected).into()),
            }
        }
        Some(_) => Err(ServiceError::NotFound("attempt")),
        None => super::attempt_event::unrecorded(app, attempt, user, AttemptEvent::Hold).await,
    }
}

pub async fn release(app: &App, attempt: AttemptId, user: &UserId) -> ServiceResult<AttemptView> {
    super::attempt_event::apply_event(app, attempt, user, AttemptEvent::Release).await
}
