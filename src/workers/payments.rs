//! The provider's side of open payments, for providers sluice calls (`Connector::has_api`):
//! - at the deadline ([`settle_due`], from each reaper pass, ahead of the payment timeouts):
//!   each payment past its deadline is canceled at the provider, which answers what it is;
//!   paid → CONFIRMED (a lost webhook costs nothing); not paid → it can no longer be paid,
//!   and the reaper expires the attempt with its stock back;
//! - the reconciler ([`run`]): payments pending `payments.reconcile_after_secs` or more are
//!   looked up, so a webhook that never comes is not waited on.
//!
//! A provider that does not answer leaves the attempt to the reaper: its stock comes back at
//! the deadline, and a payment that succeeds afterwards is refunded (`refund_late`).

use std::time::Duration;

use crate::ledger::OpenPayment;
use crate::payments::Found;
use crate::service::payment::{apply, apply_paid};
use crate::service::App;

/// Payments handled per pass at most; the next pass takes the rest.
const BATCH: u32 = 100;

/// Cancels (or finds paid) the payments past their deadline, ahead of the reaper's expiry.
pub async fn settle_due(app: &App) {
    if !app.provider.has_api() {
        return;
    }
    let due = match app.ledger.open_payments(true, 0, BATCH).await {
        Ok(due) => due,
        Err(e) => {
            tracing::warn!(error = %e, "due payments not read");
            return;
        }
    };
    for payment in due {
        let Some(id) = payment.provider_payment_id.clone() else {
            continue;
        };
        match app.provider.cancel(&id).await {
            Ok(Some(Found::Paid(paid))) => confirm(app, &payment, &id, paid, "deadline").await,
            Ok(_) => {}
            Err(e) => tracing::warn!(attempt = %payment.attempt, error = %e,
                "the provider was not asked about a payment at its deadline: it expires, and a late success is refunded"),
        }
    }
}

/// Looks up the payments pending longer than `payments.reconcile_after_secs`, every that long
/// (at most a minute, at least a second).
pub async fn run(app: App) {
    if !app.provider.has_api() {
        return;
    }
    let after = app.config.payments.reconcile_after_secs.0;
    let mut every = tokio::time::interval(Duration::from_secs(after.clamp(1, 60)));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        if app.drain.is_draining() {
            return;
        }
        reconcile(&app, after).await;
    }
}

async fn reconcile(app: &App, after: u64) {
    let open = match app.ledger.open_payments(false, after, BATCH).await {
        Ok(open) => open,
        Err(e) => {
            tracing::warn!(error = %e, "open payments not read");
            return;
        }
    };
    for payment in open {
        let Some(id) = payment.provider_payment_id.clone() else {
            continue;
        };
        let found = app.provider.lookup(&id).await;
        let outcome = match found {
            Ok(Some(Found::Paid(paid))) => {
                confirm(app, &payment, &id, paid, "reconciler").await;
                "paid"
            }
            Ok(Some(Found::Canceled)) => {
                let event = format!("reconciler:canceled:{id}");
                if let Err(e) = apply(app, &event, payment.reference, false).await {
                    tracing::warn!(attempt = %payment.attempt, error = %e, "a canceled payment's attempt is not expired");
                }
                "canceled"
            }
            Ok(Some(Found::Open { .. }) | None) => "open",
            Err(_) => "unavailable",
        };
        metrics::counter!("sluice_reconciler_lookups_total", "outcome" => outcome).increment(1);
    }
}

/// A payment the provider says is paid: CONFIRMED when it paid the hold's amount (each source
/// applies it once by its event id; the machine makes a second source's word a repeat).
async fn confirm(app: &App, payment: &OpenPayment, id: &str, paid: crate::domain::Money, by: &str) {
    let event = format!("{by}:paid:{id}");
    let held = payment.amount.as_ref();
    match apply_paid(app, &event, payment.reference, payment.attempt, held, &paid).await {
        Ok(Some(_)) => {
            tracing::info!(attempt = %payment.attempt, by, "a payment found paid at the provider is confirmed")
        }
        Ok(None) => {}
        Err(e) => {
            tracing::warn!(attempt = %payment.attempt, error = %e, "a paid payment is not confirmed yet")
        }
    }
}
