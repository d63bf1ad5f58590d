//! Web Push subscriptions by attempt (`crate::ledger::PushLedger`).

use async_trait::async_trait;
use sqlx::Row;

use super::{db_error, Conn, SqlLedger};
use crate::domain::AttemptId;
use crate::ledger::sql_types::TextList;
use crate::ledger::{LedgerResult, PushLedger};
use crate::notify::web_push::Subscription;

async fn take(
    conn: &mut Conn,
    attempts: &[AttemptId],
) -> LedgerResult<Vec<(AttemptId, Subscription)>> {
    let ids: Vec<String> = attempts.iter().map(ToString::to_string).collect();
    let rows = sqlx::query(concat!(
        "DELETE FROM push_subscriptions WHERE attempt_id IN (SELECT value FROM ",
        each_text!("$1"),
        ") RETURNING attempt_id, endpoint, p256dh, auth, lang"
    ))
    .bind(TextList(&ids))
    .fetch_all(conn)
    .await
    .map_err(db_error)?;
    Ok(rows
        .into_iter()
        .filter_map(|r| {
            let attempt = AttemptId::parse(r.get::<&str, _>("attempt_id")).ok()?;
            Some((
                attempt,
                Subscription {
                    endpoint: r.get("endpoint"),
                    p256dh: r.get("p256dh"),
                    auth: r.get("auth"),
                    lang: r.get("lang"),
                },
            ))
        })
        .collect())
}

#[async_trait]
impl PushLedger for SqlLedger {
    async fn save_push_subscription(
        &self,
        attempt: AttemptId,
        subscription: &crate::notify::web_push::Subscription,
    ) -> LedgerResult<()> {
        let conn = &mut *self.conn().await?;
        sqlx::query(concat!(
            "INSERT INTO push_subscriptions (attempt_id, endpoint, p256dh, auth, lang, created_at)
             VALUES ($1, $2, $3, $4, $5, ",
            now!(),
            ") ON CONFLICT (attempt_id) DO UPDATE SET endpoint = excluded.endpoint,
               p256dh = excluded.p256dh, auth = excluded.auth, lang = excluded.lang,
               created_at = excluded.created_at"
        ))
        .bind(attempt.to_string())
        .bind(&subscription.endpoint)
        .bind(&subscription.p256dh)
        .bind(&subscription.auth)
        .bind(&subscription.lang)
        .execute(conn)
        .await
        .map_err(db_error)?;
        Ok(())
    }

    async fn take_push_subscriptions(
        &self,
        attempts: &[AttemptId],
    ) -> LedgerResult<Vec<(AttemptId, crate::notify::web_push::Subscription)>> {
        if attempts.is_empty() {
            return Ok(Vec::new());
        }
        take(&mut *self.conn().await?, attempts).await
    }

    async fn purge_push_subscriptions(&self, older_than_secs: u64) -> LedgerResult<u64> {
        let conn = &mut *self.conn().await?;
        super::purge_older(conn, "push_subscriptions", older_than_secs).await
    }
}
