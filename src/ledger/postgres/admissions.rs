//! Recording admissions: the attempt's first ledger row (QUEUED → ADMITTED).

use sqlx::PgPool;
use uuid::Uuid;

use super::{db_error, outbox};
use crate::domain::{AttemptEvent, AttemptState, DomainEvent};
use crate::ledger::{AdmissionPlan, LedgerResult};
use crate::queue::Admitted;

pub(super) async fn record(
    pool: &PgPool,
    plan: &AdmissionPlan,
    admitted: &[Admitted],
) -> LedgerResult<()> {
    if admitted.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = admitted.iter().map(|a| a.attempt.local).collect();
    let users: Vec<&str> = admitted.iter().map(|a| a.user.as_str()).collect();
    let seqs: Vec<i64> = admitted.iter().map(|a| a.seq as i64).collect();
    let (from, to) = (AttemptState::QUEUED, AttemptState::ADMITTED);
    let cause = AttemptEvent::Admit.as_str();

    let mut tx = pool.begin().await.map_err(db_error)?;
    // ON CONFLICT: a retried batch (after a timeout that did commit) records nothing twice.
    let inserted: Vec<Uuid> = sqlx::query_scalar(
        "INSERT INTO attempts (id, sale_id, user_id, seq, state, admission_expires_at)
         SELECT id, $1, user_id, seq, 'ADMITTED', now() + make_interval(secs => $5)
         FROM unnest($2::uuid[], $3::text[], $4::bigint[]) AS t(id, user_id, seq)
         ON CONFLICT (id) DO NOTHING RETURNING id",
    )
    .bind(plan.sale.0)
    .bind(&ids)
    .bind(&users)
    .bind(&seqs)
    .bind(plan.admission_ttl_secs as f64)
    .fetch_all(&mut *tx)
    .await
    .map_err(db_error)?;
    sqlx::query(
        "INSERT INTO attempt_transitions (attempt_id, from_state, to_state, cause)
         SELECT unnest($1::uuid[]), $2, $3, $4",
    )
    .bind(&inserted)
    .bind(from.name())
    .bind(to.name())
    .bind(cause)
    .execute(&mut *tx)
    .await
    .map_err(db_error)?;
    for a in admitted
        .iter()
        .filter(|a| inserted.contains(&a.attempt.local))
    {
        if let Some(event) =
            DomainEvent::for_transition(a.attempt, a.user.as_str(), from, to, cause)
        {
            outbox::insert(&mut tx, &event).await?;
        }
    }
    tx.commit().await.map_err(db_error)
}
