//! The attempt: one user's way through one sale, as a [`statig`] state machine.
//!
//! ```text
//! QUEUED ──admit──▶ ADMITTED ──hold──▶ HOLD ──checkout──▶ PAYMENT_PENDING ──paid──▶ CONFIRMED
//!    └─leave/abandon─┐  └─admission TTL─┐ └─hold TTL / release─┐ └─failed / payment TTL─┐
//!                    ▼                  ▼                      ▼                       ▼
//!                                          EXPIRED (reason)
//! ```
//!
//! The machine is pure: [`decide`] takes the current state and an event and returns a
//! [`Decision`] (the next state plus the effects the caller must carry out in the same ledger
//! transaction), or a [`Rejected`] error. No I/O happens here, so the caller owns the transaction
//! and the machine stays synchronous (statig's async machines do not mix with `tokio::spawn`).
//!
//! Rules every caller relies on:
//! - an event that does not apply to the state is [`Rejected`] (HTTP 409, or 410 once EXPIRED);
//! - an event that already happened leaves the state as it is (`changed == false`): repeats are
//!   idempotent;
//! - leaving HOLD or PAYMENT_PENDING for EXPIRED yields [`Effect::ReturnStock`] exactly once;
//! - a payment success after EXPIRED yields [`Effect::RefundRequired`] and stays EXPIRED;
//! - a payment failure after CONFIRMED is ignored: the first final word wins.

use serde::{Deserialize, Serialize};
use statig::prelude::*;

/// Why an attempt ended without a purchase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExpiryReason {
    Left,
    Abandoned,
    AdmissionTimeout,
    HoldTimeout,
    Released,
    PaymentFailed,
    PaymentTimeout,
    /// The sale was closed while the attempt still waited: its turn can no longer come.
    SaleClosed,
}

impl ExpiryReason {
    pub const ALL: [ExpiryReason; 8] = [
        ExpiryReason::Left,
        ExpiryReason::Abandoned,
        ExpiryReason::AdmissionTimeout,
        ExpiryReason::HoldTimeout,
        ExpiryReason::Released,
        ExpiryReason::PaymentFailed,
        ExpiryReason::PaymentTimeout,
        ExpiryReason::SaleClosed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ExpiryReason::Left => "left",
            ExpiryReason::Abandoned => "abandoned",
            ExpiryReason::AdmissionTimeout => "admission_timeout",
            ExpiryReason::HoldTimeout => "hold_timeout",
            ExpiryReason::Released => "released",
            ExpiryReason::PaymentFailed => "payment_failed",
            ExpiryReason::PaymentTimeout => "payment_timeout",
            ExpiryReason::SaleClosed => "sale_closed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

/// What happened to an attempt. Each variant is one transition cause in the audit trail.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttemptEvent {
    Admit,
    Leave,
    Abandon,
    AdmissionTimeout,
    Hold,
    Release,
    HoldTimeout,
    Checkout,
    PaymentSucceeded,
    PaymentFailed,
    PaymentTimeout,
}

impl AttemptEvent {
    pub const ALL: [AttemptEvent; 11] = [
        AttemptEvent::Admit,
        AttemptEvent::Leave,
        AttemptEvent::Abandon,
        AttemptEvent::AdmissionTimeout,
        AttemptEvent::Hold,
        AttemptEvent::Release,
        AttemptEvent::HoldTimeout,
        AttemptEvent::Checkout,
        AttemptEvent::PaymentSucceeded,
        AttemptEvent::PaymentFailed,
        AttemptEvent::PaymentTimeout,
    ];

    /// The cause recorded in `attempt_transitions`.
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptEvent::Admit => "admit",
            AttemptEvent::Leave => "leave",
            AttemptEvent::Abandon => "abandon",
            AttemptEvent::AdmissionTimeout => "admission_timeout",
            AttemptEvent::Hold => "hold",
            AttemptEvent::Release => "release",
            AttemptEvent::HoldTimeout => "hold_timeout",
            AttemptEvent::Checkout => "checkout",
            AttemptEvent::PaymentSucceeded => "payment_succeeded",
            AttemptEvent::PaymentFailed => "payment_failed",
            AttemptEvent::PaymentTimeout => "payment_timeout",
        }
    }
}

/// A side effect the caller performs in the transaction that stores the transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Effect {
    /// The hold's units are taken from the sale's stock.
    TakeStock,
    /// The hold's units go back to the sale's stock.
    ReturnStock,
    /// Money arrived for an attempt that had already expired: emit `refund_required`.
    RefundRequired,
}

/// The answer of the machine to one event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub from: AttemptState,
    pub to: AttemptState,
    /// False when the event had already happened (an idempotent repeat) or is ignored by rule.
    pub changed: bool,
    pub effects: Vec<Effect>,
}

/// The event does not apply to the attempt's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{event:?} does not apply to an attempt in state {state}")]
pub struct Rejected {
    pub state: AttemptState,
    pub event: AttemptEvent,
}

/// The shared storage of the machine: what the handler of the last event decided besides the
/// next state. It is scratch space, reset for every event.
#[derive(Default, Serialize, Deserialize)]
pub struct Attempt {
    #[serde(skip)]
    effects: Vec<Effect>,
    /// The handler refused the event (it stays `Handled` so statig keeps the state).
    #[serde(skip)]
    rejected: bool,
}

#[state_machine(
    initial = "AttemptState::queued()",
    state(
        name = "AttemptState",
        derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)
    )
)]
impl Attempt {
    #[state]
    fn queued(&mut self, event: &AttemptEvent) -> Outcome<AttemptState> {
        match event {
            AttemptEvent::Admit => Transition(AttemptState::admitted()),
            AttemptEvent::Leave => expire(ExpiryReason::Left),
            AttemptEvent::Abandon => expire(ExpiryReason::Abandoned),
            AttemptEvent::AdmissionTimeout
            | AttemptEvent::Hold
            | AttemptEvent::Release
            | AttemptEvent::HoldTimeout
            | AttemptEvent::Checkout
            | AttemptEvent::PaymentSucceeded
            | AttemptEvent::PaymentFailed
            | AttemptEvent::PaymentTimeout => self.reject(),
        }
    }

    #[state]
    fn admitted(&mut self, event: &AttemptEvent) -> Outcome<AttemptState> {
        match event {
            AttemptEvent::Admit => Handled,
            AttemptEvent::Leave => expire(ExpiryReason::Left),
            AttemptEvent::AdmissionTimeout => expire(ExpiryReason::AdmissionTimeout),
            AttemptEvent::Hold => {
                self.effects.push(Effect::TakeStock);
                Transition(AttemptState::hold())
            }
            AttemptEvent::Abandon
            | AttemptEvent::Release
            | AttemptEvent::HoldTimeout
            | AttemptEvent::Checkout
            | AttemptEvent::PaymentSucceeded
            | AttemptEvent::PaymentFailed
            | AttemptEvent::PaymentTimeout => self.reject(),
        }
    }

    #[state]
    fn hold(&mut self, event: &AttemptEvent) -> Outcome<AttemptState> {
        match event {
            AttemptEvent::Admit | AttemptEvent::Hold => Handled,
            AttemptEvent::Checkout => Transition(AttemptState::payment_pending()),
            AttemptEvent::Release | AttemptEvent::Leave => {
                self.effects.push(Effect::ReturnStock);
                expire(ExpiryReason::Released)
            }
            AttemptEvent::HoldTimeout => {
                self.effects.push(Effect::ReturnStock);
                expire(ExpiryReason::HoldTimeout)
            }
            AttemptEvent::Abandon
            | AttemptEvent::AdmissionTimeout
            | AttemptEvent::PaymentSucceeded
            | AttemptEvent::PaymentFailed
            | AttemptEvent::PaymentTimeout => self.reject(),
        }
    }

    #[state]
    fn payment_pending(&mut self, event: &AttemptEvent) -> Outcome<AttemptState> {
        match event {
            AttemptEvent::Admit | AttemptEvent::Hold | AttemptEvent::Checkout => Handled,
            AttemptEvent::PaymentSucceeded => Transition(AttemptState::confirmed()),
            AttemptEvent::PaymentFailed => {
                self.effects.push(Effect::ReturnStock);
                expire(ExpiryReason::PaymentFailed)
            }
            AttemptEvent::PaymentTimeout => {
                self.effects.push(Effect::ReturnStock);
                expire(ExpiryReason::PaymentTimeout)
            }
            AttemptEvent::Leave
            | AttemptEvent::Abandon
            | AttemptEvent::AdmissionTimeout
            | AttemptEvent::Release
            | AttemptEvent::HoldTimeout => self.reject(),
        }
    }

    #[state]
    fn confirmed(&mut self, event: &AttemptEvent) -> Outcome<AttemptState> {
        match event {
            // Repeats of what led here, and a failure report after the success: the first
            // final word of the provider wins.
            AttemptEvent::Admit
            | AttemptEvent::Hold
            | AttemptEvent::Checkout
            | AttemptEvent::PaymentSucceeded
            | AttemptEvent::PaymentFailed => Handled,
            AttemptEvent::Leave
            | AttemptEvent::Abandon
            | AttemptEvent::AdmissionTimeout
            | AttemptEvent::Release
            | AttemptEvent::HoldTimeout
            | AttemptEvent::PaymentTimeout => self.reject(),
        }
    }

    #[state]
    fn expired(&mut self, reason: &ExpiryReason, event: &AttemptEvent) -> Outcome<AttemptState> {
        match event {
            // Money after expiry: never resurrect, ask for a refund.
            AttemptEvent::PaymentSucceeded => {
                self.effects.push(Effect::RefundRequired);
                Handled
            }
            // Every other way out that leads to EXPIRED is a repeat (or a race lost to another
            // expiry); the attempt is already where it would go.
            AttemptEvent::Leave
            | AttemptEvent::Abandon
            | AttemptEvent::AdmissionTimeout
            | AttemptEvent::Release
            | AttemptEvent::HoldTimeout
            | AttemptEvent::PaymentFailed
            | AttemptEvent::PaymentTimeout => {
                let _ = reason;
                Handled
            }
            AttemptEvent::Admit | AttemptEvent::Hold | AttemptEvent::Checkout => self.reject(),
        }
    }
}

fn expire(reason: ExpiryReason) -> Outcome<AttemptState> {
    Transition(AttemptState::expired(reason))
}

impl Attempt {
    fn reject(&mut self) -> Outcome<AttemptState> {
        self.rejected = true;
        Handled
    }
}

/// Public names of the states (statig's generated constructors are private to this module).
impl AttemptState {
    pub const QUEUED: AttemptState = AttemptState::Queued {};
    pub const ADMITTED: AttemptState = AttemptState::Admitted {};
    pub const HOLD: AttemptState = AttemptState::Hold {};
    pub const PAYMENT_PENDING: AttemptState = AttemptState::PaymentPending {};
    pub const CONFIRMED: AttemptState = AttemptState::Confirmed {};

    pub fn expired_because(reason: ExpiryReason) -> AttemptState {
        AttemptState::expired(reason)
    }

    pub fn is_terminal(&self) -> bool {
        match self {
            AttemptState::Confirmed { .. } | AttemptState::Expired { .. } => true,
            AttemptState::Queued { .. }
            | AttemptState::Admitted { .. }
            | AttemptState::Hold { .. }
            | AttemptState::PaymentPending { .. } => false,
        }
    }

    /// The state's name in the API and the ledger.
    pub fn name(&self) -> &'static str {
        match self {
            AttemptState::Queued { .. } => "QUEUED",
            AttemptState::Admitted { .. } => "ADMITTED",
            AttemptState::Hold { .. } => "HOLD",
            AttemptState::PaymentPending { .. } => "PAYMENT_PENDING",
            AttemptState::Confirmed { .. } => "CONFIRMED",
            AttemptState::Expired { .. } => "EXPIRED",
        }
    }

    pub fn reason(&self) -> Option<ExpiryReason> {
        match self {
            AttemptState::Expired { reason } => Some(*reason),
            AttemptState::Queued { .. }
            | AttemptState::Admitted { .. }
            | AttemptState::Hold { .. }
            | AttemptState::PaymentPending { .. }
            | AttemptState::Confirmed { .. } => None,
        }
    }

    /// Rebuilds a state from its stored name and reason.
    pub fn from_parts(name: &str, reason: Option<&str>) -> Option<Self> {
        Some(match name {
            "QUEUED" => AttemptState::queued(),
            "ADMITTED" => AttemptState::admitted(),
            "HOLD" => AttemptState::hold(),
            "PAYMENT_PENDING" => AttemptState::payment_pending(),
            "CONFIRMED" => AttemptState::confirmed(),
            "EXPIRED" => AttemptState::expired(ExpiryReason::parse(reason?)?),
            _ => return None,
        })
    }
}

impl std::fmt::Display for AttemptState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.reason() {
            Some(reason) => write!(f, "{}({})", self.name(), reason.as_str()),
            None => f.write_str(self.name()),
        }
    }
}

/// Runs one event through the machine, starting from `state`.
pub fn decide(state: AttemptState, event: AttemptEvent) -> Result<Decision, Rejected> {
    // statig restores a machine in a given state through serde (its documented way to resume
    // a stored machine); entry actions would run again on init, so the machine has none.
    let stored = serde_json::json!({ "shared_storage": {}, "state": state });
    let mut machine: StateMachine<Attempt> =
        serde_json::from_value(stored).expect("an AttemptState always deserializes");
    machine.handle(&event);
    let to = *machine.state();
    let decided = machine.inner();
    if decided.rejected {
        return Err(Rejected { state, event });
    }
    Ok(Decision {
        from: state,
        to,
        changed: to != state,
        effects: decided.effects.clone(),
    })
}

#[cfg(test)]
#[path = "attempt_tests.rs"]
mod tests;
