//! sluice is SIGKILLed under load and started again (the real binary, nothing flushed): no
//! hold stays stuck (the reapers give the stock back), no confirmation is lost, the outbox
//! drains, and retried requests with their Idempotency-Key get their original answers.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use futures_util::StreamExt;
use serde_json::{json, Value};
use sqlx::Connection;

use crate::helpers::{fresh_database, test_config, SluiceProcess, ADMIN_KEY, WEBHOOK_SECRET};

const USERS: usize = 20;
const STOCK: u64 = 30;

struct Client {
    http: reqwest::Client,
    base: String,
    users: sluice::auth::UserTokens,
}

impl Client {
    fn of(sluice: &SluiceProcess) -> Self {
        Client {
            http: reqwest::Client::new(),
            base: sluice.base.clone(),
            users: sluice::auth::UserTokens::from_config(&sluice.config.auth).unwrap(),
        }
    }

    fn bearer(&self, user: &str) -> String {
        let user = sluice::domain::UserId::parse(user).unwrap();
        format!("Bearer {}", self.users.mint(&user, 3600).unwrap())
    }

    async fn admin(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("X-Admin-Key", ADMIN_KEY);
        if let Some(body) = body {
            req = req.json(&body);
        }
        req.send().await.unwrap().json().await.unwrap()
    }

    async fn user(
        &self,
        method: reqwest::Method,
        path: &str,
        user: &str,
        key: Option<&str>,
        body: Option<Value>,
    ) -> reqwest::Result<(u16, Value)> {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("Authorization", self.bearer(user))
            .timeout(Duration::from_secs(15));
        if let Some(key) = key {
            req = req.header("Idempotency-Key", key);
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await?;
        let status = resp.status().as_u16();
        Ok((status, resp.json().await.unwrap_or(Value::Null)))
    }

    async fn admitted(&self, sale: &str, user: &str) -> (String, String) {
        let (_, joined) = self
            .user(
                reqwest::Method::POST,
                &format!("/v1/sales/{sale}/attempts"),
                user,
                None,
                None,
            )
            .await
            .unwrap();
        let attempt = joined["attempt_id"].as_str().unwrap().to_owned();
        for _ in 0..200 {
            let (_, status) = self
                .user(
                    reqwest::Method::GET,
                    &format!("/v1/attempts/{attempt}"),
                    user,
                    None,
                    None,
                )
                .await
                .unwrap();
            if let Some(token) = status["admission_token"].as_str() {
                return (attempt, token.to_owned());
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("{user} was never admitted");
    }

    async fn hold(
        &self,
        attempt: &str,
        user: &str,
        token: &str,
        key: &str,
    ) -> reqwest::Result<(u16, Value)> {
        let body = json!({ "admission_token": token, "quantity": 1 });
        self.user(
            reqwest::Method::POST,
            &format!("/v1/attempts/{attempt}/hold"),
            user,
            Some(key),
            Some(body),
        )
        .await
    }
}

#[tokio::test]
async fn a_sigkilled_sluice_restarts_with_nothing_stuck_lost_or_answered_twice() {
    let mut config = test_config();
    let db = fresh_database().await;
    config.ledger.url = db.clone();
    let mut sluice = SluiceProcess::start(config, "warn").await;
    let client = Client::of(&sluice);
    let sale = client
        .admin(
            reqwest::Method::POST,
            "/v1/sales",
            Some(
                json!({"name": "crash", "quantity": STOCK, "per_user_limit": 2,
                "hold_ttl_secs": 3, "payment_ttl_secs": 600, "rate_per_minute": 600000}),
            ),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut users = Vec::new();
    for i in 0..USERS {
        let name = format!("crash-{i}");
        let (attempt, token) = client.admitted(&sale, &name).await;
        users.push((name, attempt, token));
    }

    // Before the crash: five buy, five hold (with keys; their answers are kept).
    let signer = sluice::payments::WebhookSigner::new(WEBHOOK_SECRET, 300);
    for (i, (name, attempt, token)) in users.iter().enumerate().take(5) {
        let (status, _) = client
            .hold(attempt, name, token, &format!("hold-{i}"))
            .await
            .unwrap();
        assert_eq!(status, 200);
        let (_, paying) = client
            .user(
                reqwest::Method::POST,
                &format!("/v1/attempts/{attempt}/checkout"),
                name,
                None,
                None,
            )
            .await
            .unwrap();
        let body = json!({"id": format!("evt-{i}"), "type": "payment.succeeded",
            "payment_reference": paying["payment"]["reference"]})
        .to_string();
        let signature = signer.sign(chrono::Utc::now().timestamp(), body.as_bytes());
        let ack = client
            .http
            .post(format!("{}/v1/webhooks/payments", client.base))
            .header("Sluice-Signature", signature)
            .header("Content-Type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(ack.status(), 200);
    }
    let mut answered = Vec::new();
    for (i, (name, attempt, token)) in users.iter().enumerate().take(10).skip(5) {
        answered.push(
            client
                .hold(attempt, name, token, &format!("hold-{i}"))
                .await
                .unwrap(),
        );
    }

    // Under load — the other ten hold at once, everyone polls — the process is killed.
    let in_flight = users
        .iter()
        .enumerate()
        .skip(10)
        .map(|(i, (name, attempt, token))| {
            let client = &client;
            async move {
                client
                    .hold(attempt, name, token, &format!("hold-{i}"))
                    .await
                    .ok()
            }
        });
    let polls = users.iter().map(|(name, attempt, _)| {
        let client = &client;
        async move {
            client
                .user(
                    reqwest::Method::GET,
                    &format!("/v1/attempts/{attempt}"),
                    name,
                    None,
                    None,
                )
                .await
                .ok()
        }
    });
    let killer = async {
        tokio::time::sleep(Duration::from_millis(15)).await;
        sluice.kill();
    };
    let (holds_before_kill, _, ()) = tokio::join!(join_all(in_flight), join_all(polls), killer);
    let cut_off = holds_before_kill.iter().filter(|a| a.is_none()).count();

    let restarted = Instant::now();
    sluice.spawn("warn").await;
    let restart_ms = restarted.elapsed().as_millis();

    // Retries with the same keys: answered holds get the very same answer; cut-off ones get
    // one consistent answer (a claim left by the dead process is taken over once stale).
    for (j, (i, (name, attempt, token))) in users.iter().enumerate().skip(5).enumerate() {
        let key = format!("hold-{i}");
        let deadline = Instant::now() + Duration::from_secs(30);
        let retried = loop {
            let answer = client.hold(attempt, name, token, &key).await.unwrap();
            let in_progress = answer.1["type"] == "/problems/idempotency-key-in-progress";
            if !in_progress || Instant::now() > deadline {
                break answer;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        if j < 5 {
            assert_eq!(retried, answered[j], "{name}: the original answer");
        } else {
            assert!(
                retried.0 == 200 || retried.0 == 409 || retried.0 == 410,
                "{name}: {retried:?}"
            );
        }
    }

    // Nothing confirmed is lost; no hold stays stuck: unpaid holds expire and give stock back.
    let mut ledger = sqlx::PgConnection::connect(&db).await.unwrap();
    let confirmed: i64 =
        sqlx::query_scalar("SELECT count(*) FROM attempts WHERE state = 'CONFIRMED'")
            .fetch_one(&mut ledger)
            .await
            .unwrap();
    assert_eq!(confirmed, 5, "every confirmation survived");
    let holds_per_attempt: Vec<i64> = sqlx::query_scalar(
        "SELECT count(*) FROM attempt_transitions WHERE to_state = 'HOLD' GROUP BY attempt_id",
    )
    .fetch_all(&mut ledger)
    .await
    .unwrap();
    assert!(
        holds_per_attempt.iter().all(|n| *n == 1),
        "a hold taken twice: {holds_per_attempt:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let stats = loop {
        let stats = client
            .admin(
                reqwest::Method::GET,
                &format!("/v1/sales/{sale}/stats"),
                None,
            )
            .await;
        if stats["holding"] == 0 && stats["remaining"] == STOCK - 5 {
            break stats;
        }
        assert!(
            Instant::now() < deadline,
            "holds stuck after the crash: {stats}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(stats["confirmed"], 5);

    // The outbox drains, and every confirmation reached the event sink.
    crate::helpers::outbox_relayed(&mut ledger).await;
    let events = std::fs::read_to_string(&sluice.config.events.file).unwrap();
    let confirmations: HashSet<String> = events
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "sluice.attempt.confirmed")
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        confirmations.len(),
        5,
        "each confirmation published (duplicates allowed, de-duplicated by id)"
    );

    super::record(
        "sluice SIGKILLed under load, restarted",
        &[
            ("requests cut off by the kill", cut_off.to_string()),
            ("restart to ready", format!("{restart_ms} ms")),
            ("keyed retries answered as the first time", "5 of 5".into()),
            ("holds stuck after restart", "0".into()),
            ("confirmations lost", "0 of 5".into()),
            ("events lost", "0".into()),
        ],
    );
}

crate::on_both_configurations!(a_coupon_drop_sigkilled_mid_batch_loses_no_answered_claim);

/// A coupon drop's replica is SIGKILLed while claims are being written in batches, and started
/// again. Every claim answered CONFIRMED is CONFIRMED in the ledger; every claim cut off was
/// either made (its retry answers it CONFIRMED) or not made at all (its retry claims anew, or
/// is told sold out), never half: at the end each user holds at most one unit, the ledger's
/// confirmed claims are exactly the users told CONFIRMED, and the ledger and the queue store
/// count the same units free.
async fn a_coupon_drop_sigkilled_mid_batch_loses_no_answered_claim(
    backend: crate::helpers::Backend,
) {
    const USERS: usize = 600;
    const COUPONS: u64 = 300;
    let mut config = test_config();
    match backend {
        crate::helpers::Backend::Embedded => {
            config.queue.url = String::new();
            config.ledger.url = String::new();
            config.embedded.data_dir = std::env::temp_dir()
                .join(format!("sluice-crash-{}", uuid::Uuid::new_v4().simple()));
        }
        _ => config.ledger.url = fresh_database().await,
    }
    let mut sluice = SluiceProcess::start(config, "warn").await;
    let client = Client::of(&sluice);
    let sale = client
        .admin(
            reqwest::Method::POST,
            "/v1/sales",
            Some(
                json!({"name": "crash drop", "quantity": COUPONS, "per_user_limit": 1,
                "instant": true, "max_active": 100000}),
            ),
        )
        .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // The kill falls once a sixth of the claims are answered, while 64 are out: by the count
    // of answers, not by a time, which a quiet machine's drop outran.
    let answered = std::sync::atomic::AtomicUsize::new(0);
    let claim = |user: String| {
        let (client, answered) = (&client, &answered);
        let path = format!("/v1/sales/{sale}/attempts");
        async move {
            let answer = client
                .user(reqwest::Method::POST, &path, &user, None, None)
                .await
                .ok();
            answered.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            (user, answer)
        }
    };
    let claims = futures_util::stream::iter((0..USERS).map(|i| claim(format!("drop-{i}"))))
        .buffer_unordered(64)
        .collect::<Vec<_>>();
    let killer = async {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while answered.load(std::sync::atomic::Ordering::SeqCst) < USERS / 6 {
            assert!(
                std::time::Instant::now() < deadline,
                "the drop never got going"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        sluice.kill();
    };
    let (answers, ()) = tokio::join!(claims, killer);
    let cut_off: Vec<&String> = answers
        .iter()
        .filter(|(_, a)| a.is_none())
        .map(|(u, _)| u)
        .collect();
    let confirmed_before: Vec<(&String, String)> = answers
        .iter()
        .filter_map(|(user, answer)| match answer {
            Some((201, body)) => Some((user, body["attempt_id"].as_str()?.to_owned())),
            _ => None,
        })
        .collect();
    assert!(
        !confirmed_before.is_empty() && !cut_off.is_empty(),
        "the kill fell mid-drop: {} confirmed, {} cut off",
        confirmed_before.len(),
        cut_off.len()
    );
    sluice.spawn("warn").await;

    // Every answered claim stands.
    for (user, attempt) in &confirmed_before {
        let (status, body) = client
            .user(
                reqwest::Method::GET,
                &format!("/v1/attempts/{attempt}"),
                user,
                None,
                None,
            )
            .await
            .unwrap();
        assert_eq!(
            (status, body["state"].as_str()),
            (200, Some("CONFIRMED")),
            "{user}"
        );
    }
    // Every user asks again (the cut-off ones retry; the others find their answer).
    let mut holders: HashSet<String> = HashSet::new();
    for (user, first) in &answers {
        let (status, body) = claim(user.clone())
            .await
            .1
            .expect("answered after the restart");
        let confirmed = match status {
            201 | 202 if body["state"] == "CONFIRMED" => true,
            202 => {
                let attempt = body["attempt_id"].as_str().unwrap().to_owned();
                let mut last = body;
                for _ in 0..200 {
                    if last["state"] == "CONFIRMED" || last["sold_out"] == true {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    last = client
                        .user(
                            reqwest::Method::GET,
                            &format!("/v1/attempts/{attempt}"),
                            user,
                            None,
                            None,
                        )
                        .await
                        .unwrap()
                        .1;
                }
                last["state"] == "CONFIRMED"
            }
            409 => false,
            other => panic!("{user}: {other} {body}"),
        };
        if matches!(first, Some((201, _))) {
            assert!(confirmed, "{user} was told CONFIRMED before the kill");
        }
        if confirmed {
            holders.insert(user.clone());
        }
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let stats = client
            .admin(
                reqwest::Method::GET,
                &format!("/v1/sales/{sale}/stats"),
                None,
            )
            .await;
        let offer = client
            .admin(
                reqwest::Method::GET,
                &format!("/v1/public/sales/{sale}/offer"),
                None,
            )
            .await;
        let agreed = stats["confirmed"] == holders.len() as u64
            && stats["remaining"] == COUPONS - holders.len() as u64
            && offer["remaining"] == stats["remaining"];
        if agreed {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} told CONFIRMED; ledger {stats}; store's offer {offer}",
            holders.len()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    super::record(
        "a coupon drop's replica SIGKILLed mid-batch, restarted",
        &[
            ("claims cut off by the kill", cut_off.len().to_string()),
            (
                "answered CONFIRMED before the kill, lost",
                format!("0 of {}", confirmed_before.len()),
            ),
            (
                "users holding a coupon at the end",
                holders.len().to_string(),
            ),
            ("units taken without a user told CONFIRMED", "0".into()),
        ],
    );
}
