//! Admissions, payment webhooks, reapers and saved responses on SQLite.

use sqlx::sqlite::SqlitePool;
use sqlx::Row;
use uuid::Uuid;

use super::{attempts, db_error, SqliteLedger, NOW_MS};
use crate::domain::{AttemptEvent, AttemptId, AttemptState, DomainEvent, SaleId, UserId};
use crate::ledger::transition::{timeout_state, transition, AttemptTx};
use crate::ledger::OutboxEvent;
use crate::ledger::{
    AdmissionPlan, Applied, LedgerError, LedgerResult, PaymentApplied, SavedResponse,
};
use crate::queue::Admitted;

pub(super) async fn record_admissions(
    ledger: &SqliteLedger,
    plan: &AdmissionPlan,
    admitted: &[Admitted],
) -> LedgerResult<()> {
    if admitted.is_empty() {
        return Ok(());
    }
    let (from, to) = (AttemptState::QUEUED, AttemptState::ADMITTED);
    let cause = AttemptEvent::Admit.as_str();
    let mut tx = ledger.write().await?;
    for a in admitted {
        // OR IGNORE: a retried batch records nothing twice.
        let inserted = sqlx::query(&format!(
            "INSERT OR IGNORE INTO attempts (id, sale_id, user_id, seq, state, admitted_at_ms, admission_expires_at_ms, updated_at_ms)
             VALUES (?, ?, ?, ?, 'ADMITTED', {NOW_MS}, {NOW_MS} + 1000 * ?, {NOW_MS})"
        ))
        .bind(a.attempt.local)
        .bind(plan.sale.0)
        .bind(a.user.as_str())
        .bind(a.seq as i64)
        .bind(plan.admission_ttl_secs as i64)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        if inserted.rows_affected() == 1 {
            tx.audit(a.attempt, from, to, cause).await?;
            if let Some(event) =
                DomainEvent::for_transition(a.attempt, a.user.as_str(), from, to, cause)
            {
                tx.insert_event(&event).await?;
            }
        }
    }
    tx.commit().await.map_err(db_error)
}

pub(super) async fn payment_event(
    ledger: &SqliteLedger,
    provider_event_id: &str,
    reference: Uuid,
    succeeded: bool,
) -> LedgerResult<PaymentApplied> {
    let mut tx = ledger.write().await?;
    let row = sqlx::query("SELECT a.id, a.sale_id FROM payments p JOIN attempts a ON a.id = p.attempt_id WHERE p.reference = ?")
        .bind(reference)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error)?;
    let Some(row) = row else {
        return Ok(PaymentApplied::UnknownReference);
    };
    let id = AttemptId {
        sale: SaleId(row.get("sale_id")),
        local: row.get("id"),
    };
    let record = attempts::load(&mut tx, id)
        .await?
        .ok_or(LedgerError::NotFound)?;
    let claimed = sqlx::query(&format!(
        "INSERT OR IGNORE INTO payment_events (provider_event_id, payment_reference, kind, received_at_ms) VALUES (?, ?, ?, {NOW_MS})"
    ))
    .bind(provider_event_id)
    .bind(reference)
    .bind(if succeeded { "succeeded" } else { "failed" })
    .execute(&mut *tx)
    .await
    .map_err(db_error)?;
    if claimed.rows_affected() == 0 {
        return Ok(PaymentApplied::Duplicate { record });
    }
    let event = if succeeded {
        AttemptEvent::PaymentSucceeded
    } else {
        AttemptEvent::PaymentFailed
    };
    let applied = transition(&mut *tx, record, event, None).await?;
    tx.commit().await.map_err(db_error)?;
    Ok(PaymentApplied::Applied(applied))
}

pub(super) async fn expire_due(
    ledger: &SqliteLedger,
    event: AttemptEvent,
    limit: u32,
) -> LedgerResult<Vec<Applied>> {
    let (state, deadline) = timeout_state(event)?;
    let deadline = format!("{deadline}_ms");
    let mut tx = ledger.write().await?;
    let rows = sqlx::query(&format!(
        "SELECT id, sale_id FROM attempts WHERE state = ? AND {deadline} <= {NOW_MS} ORDER BY {deadline} LIMIT ?"
    ))
    .bind(state)
    .bind(limit as i64)
    .fetch_all(&mut *tx)
    .await
    .map_err(db_error)?;
    let mut expired = Vec::with_capacity(rows.len());
    for row in rows {
        let id = AttemptId {
            sale: SaleId(row.get("sale_id")),
            local: row.get("id"),
        };
        let record = attempts::load(&mut tx, id)
            .await?
            .ok_or(LedgerError::NotFound)?;
        expired.push(transition(&mut *tx, record, event, None).await?);
    }
    tx.commit().await.map_err(db_error)?;
    Ok(expired)
}

pub(super) async fn saved_response(
    pool: &SqlitePool,
    user: &UserId,
    key: &str,
) -> LedgerResult<Option<SavedResponse>> {
    let row = sqlx::query(
        "SELECT request_hash, status, body FROM idempotency_keys WHERE user_id = ? AND key = ?",
    )
    .bind(user.as_str())
    .bind(key)
    .fetch_optional(pool)
    .await
    .map_err(db_error)?;
    match row {
        None => Ok(None),
        Some(r) => Ok(Some(SavedResponse {
            request_hash: r.get("request_hash"),
            status: r.get::<i64, _>("status") as u16,
            body: serde_json::from_str(r.get("body"))
                .map_err(|e| LedgerError::Other(e.to_string()))?,
        })),
    }
}

/// Inserts an in-progress claim (status 0), or takes over one that went stale.
pub(super) async fn reserve_key(
    pool: &SqlitePool,
    user: &UserId,
    key: &str,
    request_hash: &str,
    stale_after_secs: u64,
) -> LedgerResult<bool> {
    let inserted = sqlx::query(&format!(
        "INSERT OR IGNORE INTO idempotency_keys (user_id, key, request_hash, status, body, created_at_ms)
         VALUES (?, ?, ?, 0, 'null', {NOW_MS})"
    ))
    .bind(user.as_str())
    .bind(key)
    .bind(request_hash)
    .execute(pool)
    .await
    .map_err(db_error)?;
    if inserted.rows_affected() == 1 {
        return Ok(true);
    }
    let taken_over = sqlx::query(&format!(
        "UPDATE idempotency_keys SET request_hash = ?, created_at_ms = {NOW_MS}
         WHERE user_id = ? AND key = ? AND status = 0 AND created_at_ms < {NOW_MS} - ?"
    ))
    .bind(request_hash)
    .bind(user.as_str())
    .bind(key)
    .bind(stale_after_secs as i64 * 1000)
    .execute(pool)
    .await
    .map_err(db_error)?;
    Ok(taken_over.rows_affected() == 1)
}

pub(super) async fn release_key(pool: &SqlitePool, user: &UserId, key: &str) -> LedgerResult<()> {
    sqlx::query("DELETE FROM idempotency_keys WHERE user_id = ? AND key = ? AND status = 0")
        .bind(user.as_str())
        .bind(key)
        .execute(pool)
        .await
        .map_err(db_error)?;
    Ok(())
}

/// Completes a claim with the answer; a finished answer is never overwritten.
pub(super) async fn save_response(
    pool: &SqlitePool,
    user: &UserId,
    key: &str,
    saved: &SavedResponse,
) -> LedgerResult<()> {
    sqlx::query(&format!(
        "INSERT INTO idempotency_keys (user_id, key, request_hash, status, body, created_at_ms)
         VALUES (?, ?, ?, ?, ?, {NOW_MS})
         ON CONFLICT (user_id, key) DO UPDATE SET status = excluded.status, body = excluded.body
         WHERE idempotency_keys.status = 0"
    ))
    .bind(user.as_str())
    .bind(key)
    .bind(&saved.request_hash)
    .bind(saved.status as i64)
    .bind(saved.body.to_string())
    .execute(pool)
    .await
    .map_err(db_error)?;
    Ok(())
}

pub(super) async fn purge_saved_responses(
    pool: &SqlitePool,
    older_than_secs: u64,
) -> LedgerResult<u64> {
    let done = sqlx::query(&format!(
        "DELETE FROM idempotency_keys WHERE created_at_ms < {NOW_MS} - 1000 * ?"
    ))
    .bind(older_than_secs as i64)
    .execute(pool)
    .await
    .map_err(db_error)?;
    Ok(done.rows_affected())
}

pub(super) async fn pending_events(
    pool: &SqlitePool,
    limit: u32,
    after: Option<Uuid>,
) -> LedgerResult<Vec<OutboxEvent>> {
    let rows = sqlx::query(
        "SELECT id, sale_id, event_type, payload FROM outbox
         WHERE published_at_ms IS NULL AND dead_at_ms IS NULL
           AND (?2 IS NULL OR (created_at_ms, id) > (SELECT created_at_ms, id FROM outbox WHERE id = ?2))
         ORDER BY created_at_ms, id LIMIT ?1",
    )
    .bind(limit as i64)
    .bind(after)
    .fetch_all(pool)
    .await
    .map_err(db_error)?;
    Ok(rows
        .iter()
        .map(|r| OutboxEvent {
            id: r.get("id"),
            sale_id: SaleId(r.get("sale_id")),
            event_type: r.get("event_type"),
            payload: r.get("payload"),
        })
        .collect())
}

pub(super) async fn mark_published(ledger: &SqliteLedger, ids: &[Uuid]) -> LedgerResult<()> {
    let mut tx = ledger.write().await?;
    for id in ids {
        sqlx::query(&format!(
            "UPDATE outbox SET published_at_ms = {NOW_MS}, tries = tries + 1 WHERE id = ?"
        ))
        .bind(id)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
    }
    tx.commit().await.map_err(db_error)
}

pub(super) async fn outbox_backlog(pool: &SqlitePool) -> LedgerResult<(u64, f64)> {
    let rows = sqlx::query_as(
        "SELECT count(*), min(created_at_ms) FROM outbox WHERE published_at_ms IS NULL",
    )
    .fetch_one(pool)
    .await
    .map_err(db_error)?;
    Ok(super::backlog_of(rows))
}

pub(super) async fn record_refusal(
    ledger: &SqliteLedger,
    id: Uuid,
    max_tries: u32,
) -> LedgerResult<bool> {
    let mut tx = ledger.write().await?;
    let dead: Option<bool> = sqlx::query_scalar(&format!(
        "UPDATE outbox SET tries = tries + 1, dead_at_ms = CASE WHEN tries + 1 >= ? THEN {NOW_MS} END
         WHERE id = ? RETURNING dead_at_ms IS NOT NULL"
    ))
    .bind(max_tries as i64)
    .bind(id)
    .fetch_optional(&mut *tx)
    .await
    .map_err(db_error)?;
    tx.commit().await.map_err(db_error)?;
    Ok(dead.unwrap_or(false))
}
