//! The status of an attempt as a client sees it, and when it should ask again.

use chrono::{DateTime, Utc};
use rand::Rng;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::{AttemptId, AttemptState};
use crate::ledger::{AttemptRecord, HeldStock};
use crate::payments::PayWith;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptView {
    pub attempt: AttemptId,
    pub state: AttemptState,
    /// 1-based place in the queue while QUEUED.
    pub position: Option<u64>,
    /// How many wait in the sale (known while QUEUED).
    pub waiting: Option<u64>,
    pub estimated_wait_secs: Option<u64>,
    pub poll_after_ms: u64,
    pub admission_token: Option<String>,
    pub admission_expires_at: Option<DateTime<Utc>>,
    pub hold: Option<HeldStock>,
    pub hold_expires_at: Option<DateTime<Utc>>,
    pub payment_reference: Option<Uuid>,
    pub payment_expires_at: Option<DateTime<Utc>>,
    /// Who takes the payment (the answer names it, and the sandbox's URL).
    #[serde(default)]
    pub provider: Option<String>,
    /// What the page needs to pay, as checkout starts the payment (never stored: a saved
    /// response replayed gets it anew).
    #[serde(skip)]
    pub pay: Option<PayWith>,
    /// The provider's last failed try of the payment (the buyer may try again).
    #[serde(default)]
    pub payment_failure: Option<String>,
    /// While QUEUED: nothing is free to hold and nothing held can come back.
    #[serde(default)]
    pub sold_out: bool,
    /// While QUEUED: when the figures (position, waiting) were exact.
    #[serde(default)]
    pub as_of: Option<DateTime<Utc>>,
    /// While QUEUED: the attempt's queue ticket, to present with the next status question.
    #[serde(default)]
    pub queue_ticket: Option<String>,
}

impl AttemptView {
    /// A waiting attempt, from the queue store alone.
    pub fn queued(attempt: AttemptId, position: u64, waiting: u64, rate_per_minute: f64) -> Self {
        let eta = estimated_wait_secs(position, rate_per_minute);
        AttemptView {
            attempt,
            state: AttemptState::Queued,
            position: Some(position),
            waiting: Some(waiting),
            estimated_wait_secs: eta,
            poll_after_ms: poll_after_ms(AttemptState::Queued, eta),
            ..Self::bare(attempt, AttemptState::Queued)
        }
    }

    /// An attempt with no details beyond its state.
    pub fn bare(attempt: AttemptId, state: AttemptState) -> Self {
        AttemptView {
            attempt,
            state,
            position: None,
            waiting: None,
            estimated_wait_secs: None,
            poll_after_ms: poll_after_ms(state, None),
            admission_token: None,
            admission_expires_at: None,
            hold: None,
            hold_expires_at: None,
            payment_reference: None,
            payment_expires_at: None,
            provider: None,
            pay: None,
            payment_failure: None,
            sold_out: false,
            as_of: None,
            queue_ticket: None,
        }
    }

    /// An attempt from ADMITTED on, from its ledger record; `token` is its admission token
    /// (given only while ADMITTED).
    pub fn from_record(record: &AttemptRecord, token: Option<String>) -> Self {
        let state = record.state;
        let admitted = state == AttemptState::Admitted;
        AttemptView {
            admission_token: token.filter(|_| admitted),
            admission_expires_at: admitted.then_some(record.admission_expires_at),
            hold: record.hold.clone(),
            hold_expires_at: (state == AttemptState::Hold)
                .then_some(record.hold_expires_at)
                .flatten(),
            payment_reference: record.payment_reference,
            payment_failure: record.payment_failure.clone(),
            payment_expires_at: (state == AttemptState::PaymentPending)
                .then_some(record.payment_expires_at)
                .flatten(),
            ..Self::bare(record.id, state)
        }
    }
}

/// Position over the admission rate; `None` before anyone can say.
fn estimated_wait_secs(position: u64, rate_per_minute: f64) -> Option<u64> {
    (rate_per_minute > 0.0).then(|| ((position as f64) * 60.0 / rate_per_minute).ceil() as u64)
}

/// When to ask again: long when far from the head, short when near or when something is about
/// to happen; ±20 % jitter so a crowd that joined together does not poll together.
pub fn poll_after_ms(state: AttemptState, eta_secs: Option<u64>) -> u64 {
    let base: u64 = match state {
        AttemptState::Queued => match eta_secs {
            Some(eta) => (eta.saturating_mul(1000) / 10).clamp(1_000, 30_000),
            None => 5_000,
        },
        AttemptState::Admitted | AttemptState::Hold => 5_000,
        AttemptState::PaymentPending => 2_000,
        AttemptState::Confirmed | AttemptState::Expired { .. } => 60_000,
    };
    let jitter = rand::thread_rng().gen_range(0.8..=1.2);
    (base as f64 * jitter) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn far_waiters_poll_less_often_than_near_ones() {
        let near = poll_after_ms(AttemptState::Queued, estimated_wait_secs(5, 600.0));
        let far = poll_after_ms(AttemptState::Queued, estimated_wait_secs(50_000, 600.0));
        assert!((800..=1_200).contains(&near), "{near}");
        assert!((24_000..=36_000).contains(&far), "{far}");
        assert_eq!(estimated_wait_secs(600, 600.0), Some(60));
        assert_eq!(estimated_wait_secs(1, 0.0), None);
    }

    /// A line that stopped moving (the cap reached, nobody leaving) has a measured rate that
    /// decays towards zero, and an expected wait that grows past any number: the poll hint is
    /// the longest, not an overflow.
    #[test]
    fn a_line_that_stopped_moving_is_asked_about_at_the_longest_interval() {
        let eta = estimated_wait_secs(100_000, 1e-300);
        assert_eq!(eta, Some(u64::MAX));
        let after = poll_after_ms(AttemptState::Queued, eta);
        assert!((24_000..=36_000).contains(&after), "{after}");
    }
}
