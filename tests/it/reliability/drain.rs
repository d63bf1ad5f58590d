//! SIGTERM, as Kubernetes and `docker stop` send it, to the real binary under load: readiness
//! answers 503, every request already sent is answered, a status stream ends with a last
//! event, the process exits 0 within its bound; stopped and started again three times under
//! purchases, the events file holds no event twice; a drained admitter hands its sales to
//! another replica at once, not a lease's life later; with a drain delay, new connections are
//! still answered until it ends.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sqlx::Connection;

use crate::helpers::{
    create_sale_at, fresh_database, test_config, SluiceProcess, ADMIN_KEY, WEBHOOK_SECRET,
};

const BOUND: Duration = Duration::from_secs(10);

/// What the load saw.
#[derive(Default)]
struct Tally {
    answered: AtomicUsize,
    /// Sent on a connection and not answered: what a drain must never cause.
    failed_in_flight: AtomicUsize,
    purchases: AtomicUsize,
}

struct Load {
    http: reqwest::Client,
    base: String,
    users: sluice::auth::UserTokens,
    webhooks: sluice::payments::WebhookSigner,
    tally: Arc<Tally>,
    stop: Arc<AtomicBool>,
}

enum Outcome {
    Answered(u16, Value),
    Gone,
}

impl Load {
    async fn send(&self, req: reqwest::RequestBuilder) -> Outcome {
        match req.timeout(Duration::from_secs(15)).send().await {
            Ok(resp) => {
                let status = resp.status().as_u16();
                match resp.bytes().await {
                    Ok(body) => {
                        self.tally.answered.fetch_add(1, Ordering::Relaxed);
                        Outcome::Answered(
                            status,
                            serde_json::from_slice(&body).unwrap_or(Value::Null),
                        )
                    }
                    Err(e) => {
                        eprintln!("body cut off: {e:?}");
                        self.tally.failed_in_flight.fetch_add(1, Ordering::Relaxed);
                        Outcome::Gone
                    }
                }
            }
            // Refused before anything was sent (the listener is closed): expected once it drains.
            Err(e) if e.is_connect() => Outcome::Gone,
            Err(e) => {
                eprintln!("request failed in flight: {e:?}");
                self.tally.failed_in_flight.fetch_add(1, Ordering::Relaxed);
                Outcome::Gone
            }
        }
    }

    fn as_user(&self, method: reqwest::Method, path: &str, user: &str) -> reqwest::RequestBuilder {
        let id = sluice::domain::UserId::parse(user).unwrap();
        self.http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(self.users.mint(&id, 3600).unwrap())
    }

    /// One buyer after another: join, wait for the turn, hold, check out, pay (the provider's
    /// signed webhook); every step writes events. Stops when told, or once refused.
    async fn buyers(&self, sale: &str, worker: usize) {
        for n in 0.. {
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            let user = format!("w{worker}-{n}-{}", uuid::Uuid::new_v4().simple());
            let Outcome::Answered(202, joined) = self
                .send(self.as_user(
                    reqwest::Method::POST,
                    &format!("/v1/sales/{sale}/attempts"),
                    &user,
                ))
                .await
            else {
                return;
            };
            let attempt = joined["attempt_id"].as_str().unwrap().to_owned();
            let mut token = None;
            for _ in 0..200 {
                match self
                    .send(self.as_user(
                        reqwest::Method::GET,
                        &format!("/v1/attempts/{attempt}"),
                        &user,
                    ))
                    .await
                {
                    Outcome::Answered(200, status) if status["state"] == "ADMITTED" => {
                        token = status["admission_token"].as_str().map(str::to_owned);
                        break;
                    }
                    Outcome::Answered(..) => tokio::time::sleep(Duration::from_millis(20)).await,
                    Outcome::Gone => return,
                }
            }
            let Some(token) = token else { return };
            let hold = self
                .as_user(
                    reqwest::Method::POST,
                    &format!("/v1/attempts/{attempt}/hold"),
                    &user,
                )
                .json(&json!({ "admission_token": token, "quantity": 1 }));
            let Outcome::Answered(200, _) = self.send(hold).await else {
                return;
            };
            let checkout = self.as_user(
                reqwest::Method::POST,
                &format!("/v1/attempts/{attempt}/checkout"),
                &user,
            );
            let Outcome::Answered(200, paying) = self.send(checkout).await else {
                return;
            };
            let reference = paying["payment"]["reference"].as_str().unwrap();
            let body = json!({ "id": format!("evt-{attempt}"), "type": "payment.succeeded",
                "payment_reference": reference })
            .to_string();
            let signature = self
                .webhooks
                .sign(chrono::Utc::now().timestamp(), body.as_bytes());
            let webhook = self
                .http
                .post(format!("{}/v1/webhooks/payments", self.base))
                .header("Sluice-Signature", signature)
                .header("Content-Type", "application/json")
                .body(body);
            if let Outcome::Answered(200, _) = self.send(webhook).await {
                self.tally.purchases.fetch_add(1, Ordering::Relaxed);
            } else {
                return;
            }
        }
    }
}

fn config() -> sluice::config::Config {
    let mut config = test_config();
    config.http.shutdown_timeout_secs = sluice::config::Seconds(BOUND.as_secs());
    config
}

#[tokio::test]
async fn sigterm_under_load_drains_answers_everything_sent_and_duplicates_no_event() {
    let mut config = config();
    config.ledger.url = fresh_database().await;
    let mut sluice = SluiceProcess::start(config.clone(), "").await;
    let setup = reqwest::Client::new();
    let sale = create_sale_at(
        &setup,
        &sluice.base,
        json!({ "name": "drain", "quantity": 100000, "per_user_limit": 1,
                "rate_per_minute": 600000, "max_active": 100000 }),
    )
    .await;
    let waiting_sale = create_sale_at(
        &setup,
        &sluice.base,
        json!({ "name": "paused", "quantity": 5 }),
    )
    .await;
    setup
        .post(format!("{}/v1/sales/{waiting_sale}/pause", sluice.base))
        .header("X-Admin-Key", ADMIN_KEY)
        .send()
        .await
        .unwrap();

    let mut purchases = 0;
    for round in 0..3 {
        if round > 0 {
            sluice.spawn("").await;
        }
        let tally = Arc::new(Tally::default());
        let stop = Arc::new(AtomicBool::new(false));
        let load = Arc::new(Load {
            // As a load balancer keeps its idle connections for less than the server's drain
            // grace (a second): the server closes a connection idle past that, and a request
            // sent on it at that instant would meet a closed socket, as with any keep-alive
            // server. The pool's clock starts when this client has read an answer, which on a
            // busy two-core machine can be long after the server sent it: a twentieth of the
            // grace leaves the rest for that delay.
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(64)
                .pool_idle_timeout(Duration::from_millis(50))
                .build()
                .unwrap(),
            base: sluice.base.clone(),
            users: sluice::auth::UserTokens::from_config(&config.auth).unwrap(),
            webhooks: sluice::payments::WebhookSigner::new(WEBHOOK_SECRET, 300),
            tally: tally.clone(),
            stop: stop.clone(),
        });
        let workers: Vec<_> = (0..12)
            .map(|w| {
                let (load, sale) = (load.clone(), sale.clone());
                tokio::spawn(async move { load.buyers(&sale, w).await })
            })
            .collect();
        // A waiting user's status stream, open across the drain.
        let joined: Value = load
            .as_user(
                reqwest::Method::POST,
                &format!("/v1/sales/{waiting_sale}/attempts"),
                "streamer",
            )
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let attempt = joined["attempt_id"].as_str().unwrap().to_owned();
        let stream = load
            .as_user(
                reqwest::Method::GET,
                &format!("/v1/attempts/{attempt}/events"),
                "streamer",
            )
            .send()
            .await
            .unwrap();
        assert_eq!(stream.status(), 200);
        let reading = tokio::spawn(async move {
            let mut stream = stream;
            let mut text = String::new();
            loop {
                match stream.chunk().await {
                    Ok(Some(bytes)) => text.push_str(&String::from_utf8_lossy(&bytes)),
                    Ok(None) => return Ok(text),
                    Err(e) => return Err(format!("stream cut off: {e:?} after {text}")),
                }
            }
        });
        // A client with a kept-alive connection, as a load balancer's health check.
        let probe = reqwest::Client::new();
        let ready = probe
            .get(format!("{}/health/ready", sluice.base))
            .send()
            .await
            .unwrap();
        assert_eq!(ready.status(), 200);

        tokio::time::sleep(Duration::from_millis(1500)).await;
        let answered_before = tally.answered.load(Ordering::Relaxed);
        let ready_url = format!("{}/health/ready", load.base);
        let (exit, during) =
            tokio::join!(sluice.terminate(BOUND + Duration::from_secs(5)), async {
                tokio::time::sleep(Duration::from_millis(100)).await;
                probe.get(&ready_url).send().await
            });
        stop.store(true, Ordering::Relaxed);
        for worker in workers {
            worker.await.unwrap();
        }
        let (status, took) = exit.expect("sluice exits by itself");
        assert!(
            status.success(),
            "exit 0, got {status:?}: {}",
            sluice.logs()
        );
        assert!(took < BOUND, "within its bound: {took:?}");
        if let Ok(during) = during {
            assert_eq!(during.status(), 503, "readiness answers 503 while draining");
        }
        let streamed = reading
            .await
            .unwrap()
            .expect("the stream ends, not cut off");
        assert!(
            streamed.matches("data:").count() >= 2,
            "a last event at the drain: {streamed}"
        );
        assert!(
            streamed.trim_end().ends_with('}'),
            "ends after a whole event: {streamed}"
        );
        let failed = tally.failed_in_flight.load(Ordering::Relaxed);
        assert_eq!(failed, 0, "requests sent and not answered");
        assert!(
            answered_before > 50,
            "the load ran: {answered_before} answers"
        );
        purchases += tally.purchases.load(Ordering::Relaxed);
        assert!(sluice.logs().contains("draining"), "{}", sluice.logs());
    }

    // Once more, to relay whatever is left, then a last drain: every event exactly once.
    sluice.spawn("").await;
    let mut ledger = sqlx::PgConnection::connect(&config.ledger.url)
        .await
        .unwrap();
    crate::helpers::outbox_relayed(&mut ledger).await;
    let (status, _) = sluice
        .terminate(BOUND + Duration::from_secs(5))
        .await
        .unwrap();
    assert!(status.success());
    let events = std::fs::read_to_string(&config.events.file).unwrap();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for line in events.lines() {
        let event: Value = serde_json::from_str(line).unwrap();
        *seen
            .entry(event["id"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    let duplicates = seen.values().filter(|n| **n > 1).count();
    assert_eq!(duplicates, 0, "events published twice across three drains");
    let confirmed = events.matches("sluice.attempt.confirmed").count();
    assert!(
        confirmed >= purchases && purchases > 0,
        "{confirmed} confirmations, {purchases} purchases"
    );
    super::record(
        "SIGTERM under load, three times",
        &[
            ("requests sent and not answered", "0".into()),
            ("purchases during the rounds", purchases.to_string()),
            ("events published twice", duplicates.to_string()),
        ],
    );
}

/// The instance id a process logged when it started serving.
fn instance_of(sluice: &SluiceProcess) -> String {
    let logs = sluice.logs();
    let at = logs
        .find("instance=")
        .expect("the serving line names the instance");
    logs[at + "instance=".len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

async fn admitter(http: &reqwest::Client, base: &str, sale: &str) -> Option<String> {
    crate::helpers::admitter_of(http, base, sale)
        .await
        .map(|(instance, _)| instance)
}

#[tokio::test]
async fn a_drained_admitter_hands_its_sales_to_another_replica_at_once() {
    let mut config = config();
    config.ledger.url = fresh_database().await;
    // A lease that would take 20 s to run out by itself.
    config.workers.lease_ttl_ms = sluice::config::Millis(20_000);
    let mut a = SluiceProcess::start(config.clone(), "").await;
    let mut b = SluiceProcess::start(config.clone(), "").await;
    let http = reqwest::Client::new();
    let sale = create_sale_at(
        &http,
        &a.base,
        json!({ "name": "handover", "quantity": 10 }),
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let first = loop {
        if let Some(holder) = admitter(&http, &a.base, &sale).await {
            break holder;
        }
        assert!(Instant::now() < deadline, "nobody admits");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let (leaving, staying) = if first == instance_of(&a) {
        (&mut a, &b)
    } else {
        assert_eq!(first, instance_of(&b));
        (&mut b, &a)
    };
    let (status, _) = leaving.terminate(BOUND).await.expect("exits");
    assert!(status.success());
    let stopped = Instant::now();
    let next = loop {
        match admitter(&http, &staying.base, &sale).await {
            Some(holder) if holder != first => break holder,
            _ => {}
        }
        assert!(
            stopped.elapsed() < Duration::from_secs(5),
            "the other replica did not take over: the lease was not given up"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    assert_eq!(next, instance_of(staying));
    super::record(
        "an admitter drained by SIGTERM",
        &[(
            "another replica admits after",
            format!("{} ms", stopped.elapsed().as_millis()),
        )],
    );
}

/// With `http.drain_delay_secs`, a replica that is going still takes new connections for that
/// long (as a load balancer's or kube-proxy's routes lag behind), answering them `Connection:
/// close` while readiness says 503; then the port closes and the process exits.
#[tokio::test]
async fn during_the_drain_delay_new_connections_are_answered_then_the_port_closes() {
    let mut config = config();
    config.ledger.url = fresh_database().await;
    config.http.drain_delay_secs = sluice::config::Seconds(3);
    let mut sluice = SluiceProcess::start(config, "").await;
    sluice.signal("TERM");
    tokio::time::sleep(Duration::from_millis(500)).await;
    // A new client each time: a new connection, as a load balancer's for a new request.
    let fresh = || {
        reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .unwrap()
    };
    let live = fresh()
        .get(format!("{}/health/live", sluice.base))
        .send()
        .await
        .expect("a new connection is taken during the delay");
    assert_eq!(live.status(), 200);
    assert_eq!(
        live.headers()
            .get("connection")
            .map(|v| v.to_str().unwrap()),
        Some("close")
    );
    let ready = fresh()
        .get(format!("{}/health/ready", sluice.base))
        .send()
        .await
        .unwrap();
    assert_eq!(
        ready.status(),
        503,
        "readiness fails from the drain's start"
    );
    let (status, _) = sluice.terminate(BOUND).await.expect("exits by itself");
    assert!(status.success(), "{}", sluice.logs());
    let after = fresh()
        .get(format!("{}/health/live", sluice.base))
        .send()
        .await;
    assert!(
        after.as_ref().is_err_and(|e| e.is_connect()),
        "the port is closed once the process is gone: {after:?}"
    );
}

/// A connection opened and never used (a browser's preconnect, the loser of a client pool's
/// race to connect) does not hold the drain: the process stops without waiting out the shutdown
/// bound (10 s here; the idle timeout is 60 s).
#[tokio::test]
async fn a_connection_that_never_sent_a_byte_does_not_hold_the_drain() {
    let mut config = config();
    config.ledger.url = fresh_database().await;
    let mut sluice = SluiceProcess::start(config, "").await;
    let addr = sluice.base.trim_start_matches("http://").to_owned();
    let _silent = tokio::net::TcpStream::connect(&addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (status, _) = sluice.terminate(BOUND).await.expect("exits by itself");
    assert!(status.success());
    assert!(
        !sluice.logs().contains("cut off"),
        "the drain waited for the silent connection: {}",
        sluice.logs()
    );
}

/// SIGTERM while the process starts (a rolling update that changes its mind, a quick Ctrl-C)
/// is not lost and does not kill it: it finishes starting, drains and exits 0.
#[tokio::test]
async fn a_sigterm_while_starting_drains_and_exits_0() {
    let mut config = config();
    config.ledger.url = fresh_database().await;
    let mut sluice = SluiceProcess::launch(config, "");
    tokio::time::sleep(Duration::from_millis(50)).await;
    let (status, _) = sluice.terminate(BOUND).await.expect("exits by itself");
    assert!(
        status.success(),
        "exit 0, not ended by the signal: {status:?}: {}",
        sluice.logs()
    );
    assert!(sluice.logs().contains("draining"), "{}", sluice.logs());
}
