//! The embedded default keeps its waiting lines in its data directory: a thousand users wait
//! in a paused sale, sluice (the real binary, SQLite and the in-process store) is stopped by
//! SIGTERM and started again, then killed by SIGKILL right after more joins were answered and
//! started again; each time every waiting user is in the same place, nobody is told to rejoin,
//! and joining again answers the same attempt.

use std::time::Duration;

use futures_util::future::join_all;
use serde_json::{json, Value};

use crate::helpers::{create_sale_at, pause_sale_at, test_config, SluiceProcess};

const USERS: usize = 1000;

struct Client {
    http: reqwest::Client,
    base: String,
    users: sluice::auth::UserTokens,
}

impl Client {
    async fn as_user(&self, method: reqwest::Method, path: &str, user: &str) -> (u16, Value) {
        let user_id = sluice::domain::UserId::parse(user).unwrap();
        let resp = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header(
                "Authorization",
                format!("Bearer {}", self.users.mint(&user_id, 3600).unwrap()),
            )
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// Each user's attempt and place, as status answers them.
    async fn places(&self, attempts: &[(String, String)]) -> Vec<(u16, String, u64)> {
        let mut places = Vec::with_capacity(attempts.len());
        for chunk in attempts.chunks(50) {
            places.extend(
                join_all(chunk.iter().map(|(user, attempt)| async move {
                    let (status, body) = self
                        .as_user(
                            reqwest::Method::GET,
                            &format!("/v1/attempts/{attempt}"),
                            user,
                        )
                        .await;
                    let state = body["state"].as_str().unwrap_or("").to_owned();
                    (status, state, body["position"].as_u64().unwrap_or(0))
                }))
                .await,
            );
        }
        places
    }

    /// `users` join the sale; their attempts, in the order of the users.
    async fn join(&self, sale: &str, users: &[String]) -> Vec<(String, String)> {
        let mut attempts = Vec::with_capacity(users.len());
        for chunk in users.chunks(50) {
            attempts.extend(
                join_all(chunk.iter().map(|user| async move {
                    let (status, body) = self
                        .as_user(
                            reqwest::Method::POST,
                            &format!("/v1/sales/{sale}/attempts"),
                            user,
                        )
                        .await;
                    assert_eq!(status, 202, "{body}");
                    (
                        user.clone(),
                        body["attempt_id"].as_str().unwrap().to_owned(),
                    )
                }))
                .await,
            );
        }
        attempts
    }
}

#[tokio::test]
async fn waiting_users_keep_their_places_across_a_sigterm_and_a_sigkill() {
    let dir = std::env::temp_dir().join(format!("sluice-lines-{}", uuid::Uuid::new_v4().simple()));
    let mut config = test_config();
    config.queue.url.clear();
    config.ledger.url.clear();
    config.embedded.data_dir = dir.clone();
    let mut sluice = SluiceProcess::start(config, "warn").await;
    let client = Client {
        http: reqwest::Client::new(),
        base: sluice.base.clone(),
        users: sluice::auth::UserTokens::from_config(&sluice.config.auth).unwrap(),
    };
    let sale = create_sale_at(
        &client.http,
        &client.base,
        json!({ "name": "restart", "quantity": 10 }),
    )
    .await;
    pause_sale_at(&client.http, &client.base, &sale).await;
    let users: Vec<String> = (0..USERS).map(|i| format!("waiter-{i}")).collect();
    let mut attempts = client.join(&sale, &users).await;
    let before = client.places(&attempts).await;
    assert!(
        before
            .iter()
            .all(|(status, state, place)| *status == 200 && state == "QUEUED" && *place > 0),
        "everyone waits before the restart"
    );
    let mut places: Vec<u64> = before.iter().map(|(_, _, p)| *p).collect();
    places.sort();
    assert_eq!(
        places,
        (1..=USERS as u64).collect::<Vec<_>>(),
        "{USERS} distinct places"
    );

    // A clean stop.
    let (exit, _) = sluice
        .terminate(Duration::from_secs(30))
        .await
        .expect("sluice stops on SIGTERM");
    assert!(exit.success());
    sluice.spawn("warn").await;
    let after = client.places(&attempts).await;
    assert_eq!(
        after, before,
        "every user in the same place after a SIGTERM"
    );

    // A crash right after more joins were answered.
    let more: Vec<String> = (USERS..USERS + 100)
        .map(|i| format!("waiter-{i}"))
        .collect();
    attempts.extend(client.join(&sale, &more).await);
    let before = client.places(&attempts).await;
    sluice.kill();
    sluice.spawn("warn").await;
    let after = client.places(&attempts).await;
    assert_eq!(
        after, before,
        "every user in the same place after a SIGKILL"
    );
    assert!(after
        .iter()
        .all(|(status, state, _)| *status == 200 && state == "QUEUED"));
    // Joining again answers the same attempt.
    let again = client.join(&sale, &users[..10]).await;
    assert_eq!(again[..], attempts[..10]);
    crate::reliability::record(
        "The embedded default stopped by SIGTERM, then killed by SIGKILL, with users waiting",
        &[
            ("waiting users", format!("{} then {}", USERS, USERS + 100)),
            (
                "in the same place after each restart",
                format!("{} of {}", after.len(), attempts.len()),
            ),
            ("told to rejoin", "0".into()),
        ],
    );
    drop(sluice);
    let _ = std::fs::remove_dir_all(dir);
}
