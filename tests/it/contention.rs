//! Many admitted users hold at once for little stock: exactly the stock is sold, never more.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde_json::json;
use tokio::sync::Semaphore;

use crate::helpers::TestApp;

const USERS: usize = 2000;
const UNITS: u64 = 100;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_concurrent_holds_for_one_hundred_units_three_rounds() {
    let t = Arc::new(TestApp::spawn().await);
    for round in 0..3 {
        let sale = t
            .create_sale(json!({ "quantity": UNITS, "max_active": USERS, "per_user_limit": 1 }))
            .await;
        // Everybody joins (bounded concurrency: the joins are not what is measured here).
        let gate = Arc::new(Semaphore::new(200));
        let joins = (0..USERS).map(|i| {
            let (t, sale, gate) = (t.clone(), sale.clone(), gate.clone());
            async move {
                let _permit = gate.acquire().await.unwrap();
                let user = format!("r{round}u{i}");
                let joined = t.join(&sale, &user).await;
                (user, joined["attempt_id"].as_str().unwrap().to_owned())
            }
        });
        let attempts: Vec<(String, String)> = join_all(joins).await;

        // Wait until the admission loop let everybody in.
        let deadline = Instant::now() + Duration::from_secs(60);
        while t.stats(&sale).await["admitted"].as_u64().unwrap() < USERS as u64 {
            assert!(Instant::now() < deadline, "not everybody was admitted");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let tokens = join_all(attempts.iter().map(|(user, attempt)| {
            let (t, gate) = (t.clone(), gate.clone());
            async move {
                let _permit = gate.acquire().await.unwrap();
                t.status(attempt, user).await["admission_token"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            }
        }))
        .await;

        // All holds at once.
        let start = Arc::new(tokio::sync::Barrier::new(USERS));
        let holds = attempts.iter().zip(tokens).map(|((user, attempt), token)| {
            let (t, start) = (t.clone(), start.clone());
            let (user, attempt) = (user.clone(), attempt.clone());
            tokio::spawn(async move {
                start.wait().await;
                let resp = t
                    .hold(
                        &attempt,
                        &user,
                        json!({ "admission_token": token, "quantity": 1 }),
                    )
                    .await;
                let status = resp.status().as_u16();
                (status, resp.text().await.unwrap_or_default())
            })
        });
        let answers: Vec<(u16, String)> = join_all(holds)
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        let statuses: Vec<u16> = answers.iter().map(|(s, _)| *s).collect();
        let errors: Vec<&String> = answers
            .iter()
            .filter(|(s, _)| *s >= 500)
            .map(|(_, b)| b)
            .take(3)
            .collect();
        let held = statuses.iter().filter(|s| **s == 200).count();
        let sold_out = statuses.iter().filter(|s| **s == 409).count();
        let server_errors = statuses.iter().filter(|s| **s >= 500).count();
        assert_eq!(server_errors, 0, "round {round}: no 5xx, got {errors:?}");
        assert_eq!(
            held as u64, UNITS,
            "round {round}: exactly the stock is held"
        );
        assert_eq!(
            sold_out,
            USERS - UNITS as usize,
            "round {round}: the rest are told it is sold out"
        );

        let stats = t.stats(&sale).await;
        assert_eq!(stats["remaining"], 0, "round {round}");
        assert_eq!(stats["holding"], UNITS, "round {round}");
        let queue = t
            .app
            .queue
            .stats(sluice::domain::SaleId::parse(&sale).unwrap())
            .await
            .unwrap();
        assert_eq!(queue.remaining, 0, "round {round}: Redis agrees");
        // The ledger's own sum: held units never exceed the total.
        let pool = sqlx::PgPool::connect(&t.app.config.ledger.url)
            .await
            .unwrap();
        let sold: i64 = sqlx::query_scalar(
            "SELECT COALESCE(sum(quantity), 0) FROM holds WHERE sale_id = $1 AND status <> 'returned'",
        )
        .bind(uuid::Uuid::parse_str(&sale).unwrap())
        .fetch_one(&pool)
        .await
        .unwrap();
        assert_eq!(sold as u64, UNITS, "round {round}");
        pool.close().await;
    }
    crate::reliability::record(
        "2,000 concurrent holds for 100 units (3 rounds)",
        &[
            ("units sold per round", format!("{UNITS} of {UNITS}")),
            ("units oversold", "0".into()),
            ("5xx", "0".into()),
        ],
    );
}
