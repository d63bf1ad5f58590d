//! The attempt: one user's way through one sale, and the one machine that decides each of its
//! transitions, QUEUED ones included.
//!
//! ```text
//! QUEUED ──admit──▶ ADMITTED ──hold──▶ HOLD ──checkout──▶ PAYMENT_PENDING ──paid──▶ CONFIRMED
//!   │ └──────────────────────── claim (an instant sale) ──────────────────────────────▲
//!   │ leave            │ leave           │ release, leave       │ payment failed
//!   │ abandon          │ admission TTL   │ hold TTL             │ payment TTL
//!   │ sale closed      │                 │ (stock back)         │ (stock back)
//!   ▼                  ▼                 ▼                      ▼                  │ refund
//!                          EXPIRED (reason): never left; money arriving here asks for a refund
//!
//! superstates: live = ADMITTED, HOLD, PAYMENT_PENDING; holding stock = HOLD, PAYMENT_PENDING;
//! owning units = holding stock, and CONFIRMED (the units sold to it)
//! ```
//!
//! [`decide`] is pure: it takes the current state and an event and returns a [`Decision`] —
//! the next state, the effects on stock, and where the transition is kept and what it
//! announces — or a [`Rejected`] error. The caller owns the I/O: the ledger writes a decision in
//! one transaction (`ledger::transition`), and `service::transition` counts it and brings the
//! queue store in line.
//!
//! It is a plain exhaustive `match` over (state, event), with no statig. The attempts' states
//! live in the ledger and the queue store, and each event is decided for one stored state inside
//! its transaction; statig's machines own their state and are resumed through `serde`, which
//! this code did on every call, and its superstates and `on_transition` hooks need a machine
//! that lives across events. Here the superstates are named functions ([`AttemptState::is_live`],
//! [`AttemptState::holds_stock`]) and what every transition does is one function
//! (`on_transition`): the state handlers say only where an event leads.
//!
//! Rules every caller relies on:
//! - an event that does not apply to the state is [`Rejected`] (HTTP 409, or 410 once EXPIRED);
//! - an event that already happened leaves the state as it is (`changed == false`): repeats are
//!   idempotent;
//! - entering a state that owns units from one that does not (HOLD, or CONFIRMED by an
//!   instant sale's claim) takes them ([`Effect::TakeStock`]); leaving a state that owns
//!   units (HOLD, PAYMENT_PENDING, CONFIRMED) for EXPIRED gives them back
//!   ([`Effect::ReturnStock`]), which happens once because EXPIRED is never left;
//! - an operator's refund ends a CONFIRMED attempt (EXPIRED `refunded`): its units go back and
//!   the payment side is asked to refund ([`Effect::RefundRequired`]); a second refund is a
//!   repeat, and a refund of any other attempt is refused;
//! - a payment success after EXPIRED yields [`Effect::RefundRequired`] and stays EXPIRED;
//! - a payment failure after CONFIRMED is ignored: the first final word wins;
//! - a sale's close ends the waiting (QUEUED → EXPIRED `sale_closed`); the live finish normally.

use serde::{Deserialize, Serialize};

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
    /// An operator refunded the purchase: the units went back on sale.
    Refunded,
}

impl ExpiryReason {
    pub const ALL: [ExpiryReason; 9] = [
        ExpiryReason::Left,
        ExpiryReason::Abandoned,
        ExpiryReason::AdmissionTimeout,
        ExpiryReason::HoldTimeout,
        ExpiryReason::Released,
        ExpiryReason::PaymentFailed,
        ExpiryReason::PaymentTimeout,
        ExpiryReason::SaleClosed,
        ExpiryReason::Refunded,
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
            ExpiryReason::Refunded => "refunded",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

/// What happened to an attempt. Each variant is one transition cause in the audit trail.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttemptEvent {
    /// The valve let the attempt in (QUEUED, in the queue store only, until then).
    Admit,
    /// The user stepped out (a waiting user, or an admitted one giving the slot back; a holder
    /// releases).
    Leave,
    /// A waiting user stopped asking for their status (the abandonment reaper).
    Abandon,
    /// The sale closed while the attempt waited.
    SaleClosed,
    AdmissionTimeout,
    Hold,
    Release,
    HoldTimeout,
    Checkout,
    /// Checkout of a hold that costs nothing (a free claim): confirmed with no payment.
    ClaimFree,
    /// An instant sale's join that took a unit: confirmed at once, from the queue (the queue
    /// store decided it; the ledger records it).
    Claim,
    PaymentSucceeded,
    PaymentFailed,
    PaymentTimeout,
    /// An operator cancels a purchase and asks the payment side to refund it.
    Refund,
}

impl AttemptEvent {
    /// The checkout of a hold that costs `amount`: one that costs nothing is claimed at once
    /// (`ClaimFree`); any other waits for its payment (`Checkout`).
    pub fn checkout_of(amount: Option<&super::Money>) -> AttemptEvent {
        match amount {
            Some(m) if m.amount == 0 => AttemptEvent::ClaimFree,
            Some(_) | None => AttemptEvent::Checkout,
        }
    }

    pub const ALL: [AttemptEvent; 15] = [
        AttemptEvent::Admit,
        AttemptEvent::Leave,
        AttemptEvent::Abandon,
        AttemptEvent::SaleClosed,
        AttemptEvent::AdmissionTimeout,
        AttemptEvent::Hold,
        AttemptEvent::Release,
        AttemptEvent::HoldTimeout,
        AttemptEvent::Checkout,
        AttemptEvent::ClaimFree,
        AttemptEvent::Claim,
        AttemptEvent::PaymentSucceeded,
        AttemptEvent::PaymentFailed,
        AttemptEvent::PaymentTimeout,
        AttemptEvent::Refund,
    ];

    /// The cause recorded in `attempt_transitions` and in `sluice_transitions_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptEvent::Admit => "admit",
            AttemptEvent::Leave => "leave",
            AttemptEvent::Abandon => "abandon",
            AttemptEvent::SaleClosed => "sale_closed",
            AttemptEvent::AdmissionTimeout => "admission_timeout",
            AttemptEvent::Hold => "hold",
            AttemptEvent::Release => "release",
            AttemptEvent::HoldTimeout => "hold_timeout",
            AttemptEvent::Checkout => "checkout",
            AttemptEvent::ClaimFree => "claim_free",
            AttemptEvent::Claim => "claim",
            AttemptEvent::PaymentSucceeded => "payment_succeeded",
            AttemptEvent::PaymentFailed => "payment_failed",
            AttemptEvent::PaymentTimeout => "payment_timeout",
            AttemptEvent::Refund => "refund",
        }
    }

    /// The deadline events a reaper gives to attempts whose time ran out.
    pub const TIMEOUTS: [AttemptEvent; 3] = [
        AttemptEvent::AdmissionTimeout,
        AttemptEvent::HoldTimeout,
        AttemptEvent::PaymentTimeout,
    ];
}

/// Where an attempt is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AttemptState {
    /// Waiting in line: known to the queue store only.
    Queued,
    /// Let in; may hold stock until the admission deadline.
    Admitted,
    /// Holds units or seats until the hold deadline.
    Hold,
    /// Checked out; the payment provider has until the payment deadline to answer.
    PaymentPending,
    /// Paid: the units are sold.
    Confirmed,
    /// Ended without a purchase.
    Expired { reason: ExpiryReason },
}

/// A side effect the caller performs in the transaction that stores the transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Effect {
    /// The hold's units are taken from the sale's stock.
    TakeStock,
    /// The hold's units go back to the sale's stock.
    ReturnStock,
    /// Money arrived for an attempt that had already expired, or an operator refunded a
    /// purchase: emit `refund_required`.
    RefundRequired,
}

/// Where a transition is kept; what it announces is [`Decision::announces`] (`domain::events`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kept {
    /// Nothing changed: nothing to keep.
    Nowhere,
    /// A waiting attempt ended: it lives in the queue store only, so the transition is counted
    /// and has no ledger row, audit row or event.
    QueueStore,
    /// The ledger writes the state, its audit row and the event it announces, in one
    /// transaction.
    Ledger,
}

/// The answer of the machine to one event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub from: AttemptState,
    pub to: AttemptState,
    /// What happened: the audit trail's and the transition metric's cause.
    pub event: AttemptEvent,
    /// False when the event had already happened (an idempotent repeat) or is ignored by rule.
    pub changed: bool,
    pub effects: Vec<Effect>,
    pub kept: Kept,
}

/// The event does not apply to the attempt's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{event:?} does not apply to an attempt in state {state}")]
pub struct Rejected {
    pub state: AttemptState,
    pub event: AttemptEvent,
}

/// Runs one event through the machine, starting from `state`.
pub fn decide(state: AttemptState, event: AttemptEvent) -> Result<Decision, Rejected> {
    let next = match state {
        AttemptState::Queued => queued(event),
        AttemptState::Admitted => admitted(event),
        AttemptState::Hold => hold(event),
        AttemptState::PaymentPending => payment_pending(event),
        AttemptState::Confirmed => confirmed(event),
        AttemptState::Expired { reason } => expired(reason, event),
    };
    let to = match next {
        Next::Go(to) => to,
        Next::Stay => state,
        Next::Refuse => return Err(Rejected { state, event }),
    };
    Ok(on_transition(state, event, to))
}

/// Where a state's handler sends an event.
enum Next {
    Go(AttemptState),
    /// A repeat, or an event the state ignores by rule.
    Stay,
    /// The event does not apply.
    Refuse,
}

fn expire(reason: ExpiryReason) -> Next {
    Next::Go(AttemptState::Expired { reason })
}

fn queued(event: AttemptEvent) -> Next {
    match event {
        AttemptEvent::Admit => Next::Go(AttemptState::Admitted),
        AttemptEvent::Leave => expire(ExpiryReason::Left),
        AttemptEvent::Abandon => expire(ExpiryReason::Abandoned),
        AttemptEvent::SaleClosed => expire(ExpiryReason::SaleClosed),
        AttemptEvent::Claim => Next::Go(AttemptState::Confirmed),
        AttemptEvent::AdmissionTimeout
        | AttemptEvent::Hold
        | AttemptEvent::Release
        | AttemptEvent::HoldTimeout
        | AttemptEvent::Checkout
        | AttemptEvent::ClaimFree
        | AttemptEvent::PaymentSucceeded
        | AttemptEvent::PaymentFailed
        | AttemptEvent::PaymentTimeout
        | AttemptEvent::Refund => Next::Refuse,
    }
}

fn admitted(event: AttemptEvent) -> Next {
    match event {
        AttemptEvent::Admit | AttemptEvent::SaleClosed => Next::Stay,
        AttemptEvent::Leave => expire(ExpiryReason::Left),
        AttemptEvent::AdmissionTimeout => expire(ExpiryReason::AdmissionTimeout),
        AttemptEvent::Hold => Next::Go(AttemptState::Hold),
        AttemptEvent::Abandon
        | AttemptEvent::Release
        | AttemptEvent::HoldTimeout
        | AttemptEvent::Checkout
        | AttemptEvent::ClaimFree
        | AttemptEvent::Claim
        | AttemptEvent::PaymentSucceeded
        | AttemptEvent::PaymentFailed
        | AttemptEvent::PaymentTimeout
        | AttemptEvent::Refund => Next::Refuse,
    }
}

fn hold(event: AttemptEvent) -> Next {
    match event {
        AttemptEvent::Admit | AttemptEvent::Hold | AttemptEvent::SaleClosed => Next::Stay,
        AttemptEvent::Checkout => Next::Go(AttemptState::PaymentPending),
        AttemptEvent::ClaimFree => Next::Go(AttemptState::Confirmed),
        AttemptEvent::Release | AttemptEvent::Leave => expire(ExpiryReason::Released),
        AttemptEvent::HoldTimeout => expire(ExpiryReason::HoldTimeout),
        AttemptEvent::Abandon
        | AttemptEvent::Claim
        | AttemptEvent::AdmissionTimeout
        | AttemptEvent::PaymentSucceeded
        | AttemptEvent::PaymentFailed
        | AttemptEvent::PaymentTimeout
        | AttemptEvent::Refund => Next::Refuse,
    }
}

fn payment_pending(event: AttemptEvent) -> Next {
    match event {
        AttemptEvent::Admit
        | AttemptEvent::Hold
        | AttemptEvent::Checkout
        | AttemptEvent::SaleClosed => Next::Stay,
        AttemptEvent::PaymentSucceeded => Next::Go(AttemptState::Confirmed),
        AttemptEvent::PaymentFailed => expire(ExpiryReason::PaymentFailed),
        AttemptEvent::PaymentTimeout => expire(ExpiryReason::PaymentTimeout),
        AttemptEvent::ClaimFree
        | AttemptEvent::Claim
        | AttemptEvent::Leave
        | AttemptEvent::Abandon
        | AttemptEvent::AdmissionTimeout
        | AttemptEvent::Release
        | AttemptEvent::HoldTimeout
        | AttemptEvent::Refund => Next::Refuse,
    }
}

fn confirmed(event: AttemptEvent) -> Next {
    match event {
        // Repeats of what led here, and a failure report after the success: the first final
        // word of the provider wins.
        AttemptEvent::Admit
        | AttemptEvent::Hold
        | AttemptEvent::Checkout
        | AttemptEvent::ClaimFree
        | AttemptEvent::Claim
        | AttemptEvent::PaymentSucceeded
        | AttemptEvent::PaymentFailed
        | AttemptEvent::SaleClosed => Next::Stay,
        AttemptEvent::Refund => expire(ExpiryReason::Refunded),
        AttemptEvent::Leave
        | AttemptEvent::Abandon
        | AttemptEvent::AdmissionTimeout
        | AttemptEvent::Release
        | AttemptEvent::HoldTimeout
        | AttemptEvent::PaymentTimeout => Next::Refuse,
    }
}

fn expired(reason: ExpiryReason, event: AttemptEvent) -> Next {
    match event {
        // Every way out that leads to EXPIRED is a repeat (or a race lost to another expiry):
        // the attempt is already where it would go. Money after expiry never resurrects it
        // (`on_transition` asks for the refund).
        AttemptEvent::Leave
        | AttemptEvent::Abandon
        | AttemptEvent::SaleClosed
        | AttemptEvent::AdmissionTimeout
        | AttemptEvent::Release
        | AttemptEvent::HoldTimeout
        | AttemptEvent::PaymentSucceeded
        | AttemptEvent::PaymentFailed
        | AttemptEvent::PaymentTimeout => Next::Stay,
        // A refund repeated; an attempt that ended otherwise sold nothing to refund.
        AttemptEvent::Refund if reason == ExpiryReason::Refunded => Next::Stay,
        AttemptEvent::Refund
        | AttemptEvent::Admit
        | AttemptEvent::Hold
        | AttemptEvent::Checkout
        | AttemptEvent::ClaimFree
        | AttemptEvent::Claim => Next::Refuse,
    }
}

/// What every decision implies, from its two states alone: stock taken on entering a state
/// that owns units from one that does not, and given back on leaving one for EXPIRED, the refund of money that came
/// after the end or that an operator gives back, and where the transition is kept.
fn on_transition(from: AttemptState, event: AttemptEvent, to: AttemptState) -> Decision {
    let changed = from != to;
    let mut effects = Vec::new();
    if changed && to.owns_units() && !from.owns_units() {
        effects.push(Effect::TakeStock);
    }
    if changed && from.owns_units() && to.reason().is_some() {
        effects.push(Effect::ReturnStock);
    }
    let money_after_the_end =
        !changed && from.reason().is_some() && event == AttemptEvent::PaymentSucceeded;
    let refunded = changed && from == AttemptState::Confirmed && to.reason().is_some();
    if money_after_the_end || refunded {
        effects.push(Effect::RefundRequired);
    }
    let kept = match (changed, from) {
        (false, _) => Kept::Nowhere,
        (true, AttemptState::Queued) if to.reason().is_some() => Kept::QueueStore,
        (true, _) => Kept::Ledger,
    };
    Decision {
        from,
        to,
        event,
        changed,
        effects,
        kept,
    }
}

impl AttemptState {
    pub fn expired_because(reason: ExpiryReason) -> AttemptState {
        AttemptState::Expired { reason }
    }

    /// Every state, each expiry reason its own.
    pub fn all() -> impl Iterator<Item = AttemptState> {
        [
            AttemptState::Queued,
            AttemptState::Admitted,
            AttemptState::Hold,
            AttemptState::PaymentPending,
            AttemptState::Confirmed,
        ]
        .into_iter()
        .chain(ExpiryReason::ALL.map(AttemptState::expired_because))
    }

    pub fn is_terminal(&self) -> bool {
        match self {
            AttemptState::Confirmed | AttemptState::Expired { .. } => true,
            AttemptState::Queued
            | AttemptState::Admitted
            | AttemptState::Hold
            | AttemptState::PaymentPending => false,
        }
    }

    /// The live superstate: let in and not yet ended (the ledger's rows of a running sale).
    pub fn is_live(&self) -> bool {
        match self {
            AttemptState::Admitted | AttemptState::Hold | AttemptState::PaymentPending => true,
            AttemptState::Queued | AttemptState::Confirmed | AttemptState::Expired { .. } => false,
        }
    }

    /// The attempt's units are taken from the sale's stock: held, being paid for, or sold.
    pub fn owns_units(&self) -> bool {
        match self {
            AttemptState::Hold | AttemptState::PaymentPending | AttemptState::Confirmed => true,
            AttemptState::Queued | AttemptState::Admitted | AttemptState::Expired { .. } => false,
        }
    }

    /// The holding superstate: the attempt's units are taken from the sale's stock and not sold.
    pub fn holds_stock(&self) -> bool {
        match self {
            AttemptState::Hold | AttemptState::PaymentPending => true,
            AttemptState::Queued
            | AttemptState::Admitted
            | AttemptState::Confirmed
            | AttemptState::Expired { .. } => false,
        }
    }

    /// The state's name in the API and the ledger.
    pub fn name(&self) -> &'static str {
        match self {
            AttemptState::Queued => "QUEUED",
            AttemptState::Admitted => "ADMITTED",
            AttemptState::Hold => "HOLD",
            AttemptState::PaymentPending => "PAYMENT_PENDING",
            AttemptState::Confirmed => "CONFIRMED",
            AttemptState::Expired { .. } => "EXPIRED",
        }
    }

    pub fn reason(&self) -> Option<ExpiryReason> {
        match self {
            AttemptState::Expired { reason } => Some(*reason),
            AttemptState::Queued
            | AttemptState::Admitted
            | AttemptState::Hold
            | AttemptState::PaymentPending
            | AttemptState::Confirmed => None,
        }
    }

    /// Rebuilds a state from its stored name and reason.
    pub fn from_parts(name: &str, reason: Option<&str>) -> Option<Self> {
        Some(match name {
            "QUEUED" => AttemptState::Queued,
            "ADMITTED" => AttemptState::Admitted,
            "HOLD" => AttemptState::Hold,
            "PAYMENT_PENDING" => AttemptState::PaymentPending,
            "CONFIRMED" => AttemptState::Confirmed,
            "EXPIRED" => AttemptState::Expired {
                reason: ExpiryReason::parse(reason?)?,
            },
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

#[cfg(test)]
#[path = "attempt_tests.rs"]
mod tests;
