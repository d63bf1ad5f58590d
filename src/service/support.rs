//! What support and operations read: the sales, a sale's attempts by state or by user (with a
//! buyer's place in the queue while they wait), and one attempt whole with its audit trail and
//! its payment's provider events. Lists are pages newest first; a page's cursor is its last
//! item's id, so items added meanwhile (new sales, new admissions) never shift a later page.

use uuid::Uuid;

use super::{App, ServiceError, ServiceResult};
use crate::domain::{AttemptId, SaleId, SaleStatus, UserId};
use crate::ledger::{AttemptQuery, AttemptRecord, PaymentEventRow, SaleSummary, TransitionRow};
use crate::queue::WaitingPlace;

/// One page of a list, and the cursor of the next (none on the last).
pub struct Page<T> {
    pub items: Vec<T>,
    pub next: Option<String>,
}

/// Builds a page from up to `limit + 1` items read: the extra one says a next page exists.
pub(super) fn page<T>(mut items: Vec<T>, limit: u32, id: impl Fn(&T) -> String) -> Page<T> {
    let more = items.len() > limit as usize;
    items.truncate(limit as usize);
    let next = if more { items.last().map(id) } else { None };
    Page { items, next }
}

pub(super) fn cursor(value: Option<&str>) -> ServiceResult<Option<Uuid>> {
    value
        .map(|c| {
            Uuid::parse_str(c).map_err(|_| {
                ServiceError::validation(
                    "cursor",
                    "not a cursor this list gave (pass `next_cursor` as it came)",
                )
            })
        })
        .transpose()
}

pub async fn sales(
    app: &App,
    status: Option<SaleStatus>,
    after: Option<&str>,
    limit: u32,
) -> ServiceResult<Page<SaleSummary>> {
    let before = cursor(after)?.map(SaleId);
    let sales = app.ledger.list_sales(status, before, limit + 1).await?;
    Ok(page(sales, limit, |s| s.id.to_string()))
}

/// A page of a sale's attempts from the ledger and, when a buyer is looked up by user id (no
/// state asked, the first page), their attempt still waiting in the queue: the ledger has
/// attempts from their admission on only.
pub struct AttemptList {
    pub page: Page<AttemptRecord>,
    pub waiting: Option<WaitingPlace>,
}

pub async fn attempts(
    app: &App,
    sale: SaleId,
    state: Option<&'static str>,
    user: Option<UserId>,
    after: Option<&str>,
    limit: u32,
) -> ServiceResult<AttemptList> {
    app.ledger
        .sale_settings(sale)
        .await?
        .ok_or(ServiceError::NotFound("sale"))?;
    let waiting = match (&user, after, state) {
        (Some(user), None, None) => app.queue.waiting_of(sale, user).await?,
        _ => None,
    };
    let query = AttemptQuery {
        state,
        user,
        before: cursor(after)?,
        limit: limit + 1,
    };
    let attempts = app.ledger.list_attempts(sale, &query).await?;
    Ok(AttemptList {
        page: page(attempts, limit, |a| a.id.local.to_string()),
        waiting,
    })
}

/// One attempt whole: its record, its audit trail and its payment's provider events.
pub struct AttemptFile {
    pub record: AttemptRecord,
    pub trail: Vec<TransitionRow>,
    pub payment_events: Vec<PaymentEventRow>,
}

pub async fn attempt(app: &App, sale: SaleId, id: AttemptId) -> ServiceResult<AttemptFile> {
    match app.ledger.attempt(id).await? {
        Some(record) if id.sale == sale => file_of(app, record).await,
        _ => Err(ServiceError::NoAttemptFile(id)),
    }
}

/// The file of an attempt already read: its trail and its payment's provider events added.
pub async fn file_of(app: &App, record: AttemptRecord) -> ServiceResult<AttemptFile> {
    Ok(AttemptFile {
        trail: app.ledger.trail(record.id).await?,
        payment_events: app.ledger.payment_events(record.id).await?,
        record,
    })
}
