//! The seam between sluice and whoever takes the money (`payments.provider`): start a payment
//! for an attempt, say what the page needs to pay, look a payment up, cancel it, refund it.
//! Each provider implements [`Connector`] in its own module; general code holds the one this
//! deployment uses (`registry.rs` makes it) and never names a provider. Calls never run inside
//! a ledger transaction, nor on join or status.

use std::any::Any;

use async_trait::async_trait;
use uuid::Uuid;

use super::calls::ProviderError;
use super::page_sources::PageSources;
use super::providers::pay::PayWith;
use crate::domain::{AttemptId, Money};

/// A provider of payments, as sluice uses it.
#[async_trait]
pub trait Connector: Send + Sync + 'static {
    /// Its name: the value of `payments.provider`, the label of its metrics, the provider of
    /// the ledger's payment rows and the last segment of its webhook's path.
    fn name(&self) -> &'static str;

    /// Whether sluice calls the provider's API: it is told each payment's amount (so a sale
    /// needs a price), asked about payments, and refunds through it.
    fn has_api(&self) -> bool {
        true
    }

    /// Starts the payment of `order`, or finds the one started before (`id`): what the page
    /// needs to pay it.
    async fn start(&self, order: &Order<'_>, id: Option<&str>) -> Result<Started, ProviderError>;

    /// What the provider says of its payment `id`; `None` for providers sluice does not call
    /// (their webhooks say it).
    async fn lookup(&self, id: &str) -> Result<Option<Found>, ProviderError>;

    /// Cancels the payment `id` so it can no longer be paid; what it is after (a payment that
    /// was paid meanwhile stays paid).
    async fn cancel(&self, id: &str) -> Result<Option<Found>, ProviderError>;

    /// Refunds `amount` of the payment `id` (none when no payment was started at the
    /// provider); `key` names the refund (one per attempt), so a retry is one refund.
    async fn refund(
        &self,
        id: Option<&str>,
        amount: u64,
        key: &str,
    ) -> Result<RefundTaken, ProviderError>;

    /// What the page needs to pay `reference` in any answer, not only checkout's (the
    /// sandbox's URL); none for a provider whose payment checkout starts.
    fn standing_pay(&self, _reference: Uuid) -> Option<PayWith> {
        None
    }

    /// What the waiting page loads from the provider (its script, frames and API), for the
    /// page's policy.
    fn page_sources(&self) -> PageSources {
        PageSources::default()
    }

    /// Verifies a webhook the provider posted to `POST /v1/webhooks/{name}`, and says what it
    /// reports (read from the provider's API where the body is not to be trusted).
    async fn webhook(&self, _delivered: &Delivered<'_>) -> Result<Reported, WebhookError> {
        Err(WebhookError::NoWebhook)
    }

    /// The provider itself, for the routes that are its own (a buyer's return from its window).
    fn as_any(&self) -> &dyn Any;
}

/// A webhook as it arrived: its headers, its exact body (signatures are over its bytes), and
/// the time it arrived (unix seconds), which a signature's timestamp must be near.
pub struct Delivered<'a> {
    pub headers: &'a reqwest::header::HeaderMap,
    pub body: &'a [u8],
    pub now: i64,
}

impl Delivered<'_> {
    /// The header `name`, as text ("" when absent or not text: it then fails to verify).
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    /// The body as JSON of type `T`; `what` names it in the refusal ("an event of the provider").
    pub fn json<T: serde::de::DeserializeOwned>(&self, what: &str) -> Result<T, WebhookError> {
        serde_json::from_slice(self.body).map_err(|e| WebhookError::Invalid {
            field: "body",
            detail: format!("not {what}: {e}"),
        })
    }
}

/// What a provider's webhook reports, once verified.
#[derive(Debug, Clone, PartialEq)]
pub enum Reported {
    /// Nothing sluice acts on: another kind of event, or a payment sluice did not start.
    Ignored,
    /// The provider's payment `id` is as `found` says; `event` names this word, applied once.
    Payment {
        id: String,
        event: String,
        found: Found,
    },
    /// The provider refunded its payment `id` (`refund`, its id of the refund).
    Refunded {
        id: String,
        event: String,
        refund: String,
    },
}

/// Why a webhook was not taken.
#[derive(Debug)]
pub enum WebhookError {
    /// This provider posts no webhook there.
    NoWebhook,
    /// Its signature (or secret) does not verify.
    BadSignature(String),
    /// Its body is not what the provider sends: `field`, and what is wrong with it.
    Invalid { field: &'static str, detail: String },
    /// The provider could not be asked what the webhook names: it is to send it again.
    Provider(ProviderError),
}

/// A payment to start: the attempt's, for its hold's amount.
pub struct Order<'a> {
    pub attempt: AttemptId,
    /// The ledger's reference of the payment (one per attempt).
    pub reference: Uuid,
    /// The hold's amount (none when the sale is not priced: only providers that are not told
    /// the amount take such payments).
    pub amount: Option<&'a Money>,
    /// What the provider's window shows the buyer: the sale's name.
    pub name: &'a str,
}

/// The id under which the buyer's browser starts the payment of `reference` in a provider's
/// window that takes the shop's own id: `sluice-` and the reference's 32 hex digits, within
/// the rules such windows set (6-64 characters of `[A-Za-z0-9_-]`).
pub fn provider_payment_id(reference: Uuid) -> String {
    format!("sluice-{}", reference.simple())
}

/// The longest order name sluice gives a provider's window (100 characters, the shortest
/// limit among the windows it opens).
const ORDER_NAME_CHARS: usize = 100;

/// `name` cut to what the provider's window shows (whole characters, never a split one).
pub fn order_name(name: &str) -> String {
    name.chars().take(ORDER_NAME_CHARS).collect()
}

/// A payment started at the provider.
#[derive(Debug, Clone, PartialEq)]
pub struct Started {
    /// The provider's id of the payment (none for providers sluice does not call).
    pub id: Option<String>,
    pub pay: PayWith,
}

/// What the provider says of a payment.
#[derive(Debug, Clone, PartialEq)]
pub enum Found {
    /// Paid, this much.
    Paid(Money),
    /// Not paid yet; the last attempt's failure, if one failed.
    Open { last_failure: Option<String> },
    /// Canceled: it can no longer be paid.
    Canceled,
}

/// A refund the provider took.
#[derive(Debug, Clone, PartialEq)]
pub struct RefundTaken {
    /// The provider's id of the refund (none when the shop refunds: `sandbox`, `webhook`).
    pub id: Option<String>,
}

/// The hold's amount, which a provider with an API must be told; `provider` names it in the
/// refusal.
pub fn priced<'a>(order: &Order<'a>, provider: &str) -> Result<&'a Money, ProviderError> {
    order
        .amount
        .ok_or_else(|| ProviderError::Refused(format!("{provider} takes priced payments only")))
}

/// Paid `amount` minor units of `currency` (an unknown currency is not a payment sluice took).
pub fn paid(amount: u64, currency: &str) -> Found {
    match crate::domain::Currency::parse(&currency.to_ascii_uppercase()) {
        Ok(currency) => Found::Paid(Money { amount, currency }),
        Err(_) => Found::Open { last_failure: None },
    }
}

/// The refusal of a refund for an attempt whose payment was never started at the provider.
pub fn nothing_started() -> ProviderError {
    ProviderError::Refused("no payment was started at the provider for this attempt".into())
}
