//! What the real binary logs. Secrets never reach the logs: at `debug` level it goes through a
//! whole purchase, refused credentials and a bad webhook; none of the secrets, nor the tokens
//! and signatures clients sent, appear in anything it printed. At its default level it logs its
//! own events, not one line per request (requests are counted), nor, while Redis is away, one
//! line per failed request: one a second, with how many it left out.

use reqwest::Method;
use serde_json::json;

use futures_util::future::join_all;

use crate::helpers::{
    create_sale_at, free_port, fresh_database, pause_sale_at, test_config, PrivateRedis,
    SluiceProcess, ADMIN_KEY, USER_SECRET, WEBHOOK_SECRET,
};

/// A sale on `sluice` (admin API; paused: nobody is admitted), a user's token, and that
/// user's attempt in the sale.
async fn sale_and_attempt(
    sluice: &SluiceProcess,
    http: &reqwest::Client,
    sale: serde_json::Value,
    paused: bool,
) -> (String, String, String) {
    let url = |p: &str| format!("{}{p}", sluice.base);
    let user_token = sluice::auth::UserTokens::from_config(&sluice.config.auth)
        .unwrap()
        .mint(&sluice::domain::UserId::parse("log-reader").unwrap(), 600)
        .unwrap();
    let sale = create_sale_at(http, &sluice.base, sale).await;
    if paused {
        pause_sale_at(http, &sluice.base, &sale).await;
    }
    let bearer = format!("Bearer {user_token}");
    let joined: serde_json::Value = http
        .post(url(&format!("/v1/sales/{sale}/attempts")))
        .header("Authorization", &bearer)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let attempt = joined["attempt_id"].as_str().unwrap().to_owned();
    (user_token, sale, attempt)
}

#[tokio::test]
async fn the_default_level_logs_events_not_requests() {
    let mut config = test_config();
    config.ledger.url = fresh_database().await;
    let sluice = SluiceProcess::start(config, "").await;
    let http = reqwest::Client::new();
    // The attempt stays queued: its status comes from the queue store.
    let (token, _, attempt) = sale_and_attempt(
        &sluice,
        &http,
        json!({"name": "quiet", "quantity": 5}),
        true,
    )
    .await;
    let polls = 25;
    for _ in 0..polls {
        let status = http
            .get(format!("{}/v1/attempts/{attempt}", sluice.base))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(status.status(), 200);
    }
    let metrics = sluice.metrics().await;
    let logs = sluice.logs();
    assert!(
        logs.contains("sluice is serving"),
        "its own events are logged: {logs}"
    );
    assert!(
        !logs.contains("/v1/"),
        "no line per request at the default level: {logs}"
    );
    for chatter in ["Uninited", "Job creator created"] {
        assert!(
            !logs.contains(chatter),
            "the cron crate's start-up lines are not logged at the default level: {logs}"
        );
    }
    assert!(
        !logs.contains('\u{1b}'),
        "no terminal colours in a log file: {logs}"
    );
    let counted: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("sluice_http_requests_total{"))
        .filter(|l| l.contains("operation=\"getAttempt\"") && l.contains("status=\"200\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(counted, polls as f64, "each poll is counted:\n{metrics}");
}

/// The `left_out=` counts of the warnings that say `message`, one per line (0 without one).
fn left_out_counts(logs: &str, message: &str) -> Vec<u64> {
    let warning = format!(" WARN {message} ");
    logs.lines()
        .filter(|line| line.contains(&warning))
        .map(|line| {
            let count = line.split_once("left_out=").map_or("", |(_, count)| count);
            let digits = count.split(|c: char| !c.is_ascii_digit()).next();
            digits.and_then(|d| d.parse().ok()).unwrap_or(0)
        })
        .collect()
}

#[tokio::test]
async fn an_outage_is_logged_once_a_second_not_once_a_failed_request() {
    let dir = std::env::temp_dir().join(format!("sluice-redis-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let port = free_port();
    let mut redis = PrivateRedis::start(port, &dir);
    let mut config = test_config();
    config.ledger.url = fresh_database().await;
    config.queue.url = format!("redis://127.0.0.1:{port}");
    config.queue.timeout_ms = sluice::config::Millis(150);
    let sluice = SluiceProcess::start(config, "").await;
    let http = reqwest::Client::new();
    let (token, _, attempt) = sale_and_attempt(
        &sluice,
        &http,
        json!({"name": "outage", "quantity": 5}),
        true,
    )
    .await;

    redis.stop();
    // Status without a ticket asks the queue store: every one fails alike, at once.
    let poll = || async {
        http.get(format!("{}/v1/attempts/{attempt}", sluice.base))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .status()
    };
    let burst = 200;
    let statuses = join_all((0..burst).map(|_| poll())).await;
    assert!(statuses.iter().all(|s| *s == 503), "{statuses:?}");
    // One more in a later second is logged, with the count of the burst's left out.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert_eq!(poll().await, 503);

    let logs = sluice.logs();
    let failed = left_out_counts(&logs, "request failed");
    assert!(
        failed.len() < 10,
        "{} lines for {} failed requests:\n{logs}",
        failed.len(),
        burst + 1
    );
    assert_eq!(
        failed.iter().map(|left_out| left_out + 1).sum::<u64>(),
        burst + 1,
        "each failed request is logged or counted as left out: {failed:?}"
    );
    let unavailable = left_out_counts(&logs, "queue store unavailable");
    assert!(
        !unavailable.is_empty() && unavailable.len() < 10,
        "{unavailable:?}\n{logs}"
    );
    drop(redis);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn secrets_and_credentials_never_reach_the_logs() {
    let mut config = test_config();
    config.ledger.url = fresh_database().await;
    let seed = config.auth.admission_key_seed_hex.clone().unwrap();
    let sluice = SluiceProcess::start(config, "debug").await;
    let http = reqwest::Client::new();
    let url = |p: &str| format!("{}{p}", sluice.base);
    let (user_token, sale, attempt) = sale_and_attempt(
        &sluice,
        &http,
        json!({"name": "logs", "quantity": 5, "rate_per_minute": 600000}),
        false,
    )
    .await;
    let (sale, attempt) = (sale.as_str(), attempt.as_str());
    let bearer = format!("Bearer {user_token}");
    let mut admission_token = String::new();
    for _ in 0..100 {
        let status: serde_json::Value = http
            .get(url(&format!("/v1/attempts/{attempt}")))
            .header("Authorization", &bearer)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if let Some(token) = status["admission_token"].as_str() {
            admission_token = token.to_owned();
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(!admission_token.is_empty(), "admitted");
    let held = http
        .post(url(&format!("/v1/attempts/{attempt}/hold")))
        .header("Authorization", &bearer)
        .json(&json!({"admission_token": admission_token, "quantity": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(held.status(), 200);
    let paying: serde_json::Value = http
        .post(url(&format!("/v1/attempts/{attempt}/checkout")))
        .header("Authorization", &bearer)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let reference = paying["payment"]["reference"].as_str().unwrap();
    let body =
        json!({"id": "evt-log", "type": "payment.succeeded", "payment_reference": reference})
            .to_string();
    let signer = sluice::payments::WebhookSigner::new(WEBHOOK_SECRET, 300);
    let signature = signer.sign(chrono::Utc::now().timestamp(), body.as_bytes());
    let ok = http
        .post(url("/v1/webhooks/payments"))
        .header("Sluice-Signature", &signature)
        .header("Content-Type", "application/json")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    // Refusals log too: a wrong admin key, a bad signature, a wrong bearer.
    let wrong_key = "wrong-admin-key-0123456789";
    let _ = http
        .request(Method::GET, url(&format!("/v1/sales/{sale}")))
        .header("X-Admin-Key", wrong_key)
        .send()
        .await;
    let _ = http
        .post(url("/v1/webhooks/payments"))
        .header("Sluice-Signature", "t=1,v1=deadbeef")
        .body(body)
        .send()
        .await;
    let _ = http
        .get(url(&format!("/v1/attempts/{attempt}")))
        .header("Authorization", "Bearer not-a-real-token-but-secret-ish")
        .send()
        .await;

    let logs = sluice.logs();
    assert!(
        logs.contains(&format!("path=\"/v1/attempts/{attempt}/hold\"")),
        "at debug, each request has its line: {logs}"
    );
    for (what, secret) in [
        ("admin key", ADMIN_KEY),
        ("wrong admin key", wrong_key),
        ("user JWT secret", USER_SECRET),
        ("webhook secret", WEBHOOK_SECRET),
        ("admission key seed", seed.expose()),
        ("user token", user_token.as_str()),
        ("admission token", admission_token.as_str()),
        ("webhook signature", signature.as_str()),
        ("bad bearer", "not-a-real-token-but-secret-ish"),
    ] {
        assert!(!logs.contains(secret), "the {what} is in the logs");
    }
    crate::reliability::record(
        "Secrets in logs (debug level, purchase + refusals)",
        &[
            ("secrets found", "0 of 9".into()),
            ("log lines", logs.lines().count().to_string()),
        ],
    );
}
