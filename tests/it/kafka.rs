//! The outbox relay to a real Kafka-protocol broker (tansu): events arrive in order, each once
//! by id; an outage grows the backlog and then drains it with nothing lost; several relays keep
//! per-sale order; an event the broker refuses goes to the dead letters.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::{Headers, Message};
use serde_json::json;

use crate::helpers::{consume, kafka_brokers, PrivateBroker, TestApp};

fn topic() -> String {
    format!("sluice.events.t{}", uuid::Uuid::new_v4().simple())
}

async fn wait_drained(t: &TestApp, within: Duration) {
    let deadline = Instant::now() + within;
    while t.app.ledger.outbox_backlog().await.unwrap().0 > 0 {
        assert!(Instant::now() < deadline, "the outbox never drained");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_lifecycle_s_events_arrive_in_kafka_in_order_once() {
    let topic = topic();
    let t = TestApp::spawn_with(|c| {
        c.events.kafka_brokers = kafka_brokers();
        c.events.topic = topic.clone();
        c.events.partitions = 3;
    })
    .await;
    let sale = t.create_sale(json!({ "quantity": 3 })).await;
    let (attempt, token) = t.admitted(&sale, "alice").await;
    t.hold(
        &attempt,
        "alice",
        json!({ "admission_token": token, "quantity": 1 }),
    )
    .await;
    let paying: serde_json::Value = t.checkout(&attempt, "alice").await.json().await.unwrap();
    let reference = paying["payment"]["reference"].as_str().unwrap();
    for _ in 0..3 {
        t.webhook("evt_kafka", "payment.succeeded", reference).await;
    }
    wait_drained(&t, Duration::from_secs(30)).await;

    let events = consume(&kafka_brokers(), &topic, 6).await;
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "sluice.sale.opened",
            "sluice.admin.action",
            "sluice.attempt.admitted",
            "sluice.attempt.held",
            "sluice.attempt.payment_pending",
            "sluice.attempt.confirmed"
        ],
        "one sale's events in order"
    );

    // The record: key = sale id, headers = event id, type, schema version.
    let consumer: StreamConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", kafka_brokers())
        .set(
            "group.id",
            format!("headers-{}", uuid::Uuid::new_v4().simple()),
        )
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&[&topic]).unwrap();
    let message = tokio::time::timeout(Duration::from_secs(20), consumer.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(message.key(), Some(sale.as_bytes()));
    let headers = message.headers().expect("headers");
    let names: HashSet<&str> = headers.iter().map(|h| h.key).collect();
    assert_eq!(
        names,
        HashSet::from(["event-id", "event-type", "schema-version"])
    );

    // The reference consumer piped into a reader that went away (`sluice events tail | head`)
    // stops at its first line, without an error.
    let options = sluice::events::tail::TailOptions {
        brokers: kafka_brokers(),
        topic: topic.clone(),
        group: format!("closed-{}", uuid::Uuid::new_v4().simple()),
        from_beginning: true,
        max: None,
        idle: Some(Duration::from_secs(20)),
    };
    let printed = sluice::events::tail::tail(options, &mut ClosedPipe).await;
    assert_eq!(printed.expect("a reader that went away is not an error"), 0);
    t.stop().await;
}

/// Output whose reader went away: every write fails as on a closed pipe.
struct ClosedPipe;

impl std::io::Write for ClosedPipe {
    fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
        Err(std::io::ErrorKind::BrokenPipe.into())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_broker_outage_grows_the_backlog_then_drains_with_nothing_lost() {
    let broker = PrivateBroker::start();
    let topic = topic();
    let t = TestApp::spawn_with(|c| {
        c.events.kafka_brokers = broker.brokers.clone();
        c.events.topic = topic.clone();
    })
    .await;
    let sale = t
        .create_sale(json!({ "quantity": 1000, "per_user_limit": 1 }))
        .await;
    let load = |from: usize, to: usize| {
        let (t, sale) = (&t, &sale);
        join_all((from..to).map(move |i| async move {
            let user = format!("u{i}");
            let (attempt, token) = t.admitted(sale, &user).await;
            t.hold(
                &attempt,
                &user,
                json!({ "admission_token": token, "quantity": 1 }),
            )
            .await;
        }))
    };
    load(0, 20).await;
    wait_drained(&t, Duration::from_secs(30)).await;

    broker.signal(false);
    let stopped = Instant::now();
    let mut most = 0;
    for round in 0..5 {
        // Bounded load while the broker does not answer: 5 rounds of 10 users.
        load(100 + round * 10, 110 + round * 10).await;
        most = most.max(t.app.ledger.outbox_backlog().await.unwrap().0);
    }
    let left = Duration::from_secs(10).saturating_sub(stopped.elapsed());
    tokio::time::sleep(left).await;
    assert!(
        most >= 50,
        "the backlog grew while the broker was away ({most})"
    );
    let health = t.http.get(t.url("/health/live")).send().await.unwrap();
    assert_eq!(health.status(), 200, "the service did not crash");
    broker.signal(true);
    wait_drained(&t, Duration::from_secs(60)).await;

    let pool = sqlx::PgPool::connect(&t.app.config.ledger.url)
        .await
        .unwrap();
    let committed: Vec<uuid::Uuid> = sqlx::query_scalar("SELECT id FROM outbox")
        .fetch_all(&pool)
        .await
        .unwrap();
    let events = consume(&broker.brokers, &topic, committed.len() as u64).await;
    let published: HashSet<String> = events
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect();
    let committed: HashSet<String> = committed.iter().map(|id| id.to_string()).collect();
    assert_eq!(
        published,
        committed,
        "every committed event is in Kafka: {} of them",
        committed.len()
    );
    crate::reliability::record(
        "Broker stopped (SIGSTOP) for 10 s under load",
        &[
            ("largest backlog while away", format!("{most} events")),
            ("events committed", committed.len().to_string()),
            ("events lost", "0".into()),
        ],
    );
    t.stop().await;
}

#[tokio::test]
async fn several_relays_keep_per_sale_order_over_ten_thousand_events() {
    let topic = topic();
    let t = TestApp::spawn_with(|c| {
        c.workers.enabled = false;
        c.events.kafka_brokers = kafka_brokers();
        c.events.topic = topic.clone();
    })
    .await;
    // 10,000 events of 20 sales, interleaved, each with its place in its sale's sequence.
    let pool = sqlx::PgPool::connect(&t.app.config.ledger.url)
        .await
        .unwrap();
    let sales: Vec<uuid::Uuid> = (0..20).map(|_| uuid::Uuid::now_v7()).collect();
    sqlx::query(
        "INSERT INTO outbox (id, sale_id, event_type, payload)
         SELECT id, sale, 'sluice.attempt.admitted',
                jsonb_build_object('id', id, 'type', 'sluice.attempt.admitted', 'sale_id', sale,
                  'attempt_id', null, 'occurred_at', now(), 'schema_version', 1, 'data', jsonb_build_object('seq', g))
         FROM (SELECT g, gen_random_uuid() AS id, ($1::uuid[])[1 + g % 20] AS sale
               FROM generate_series(0, 9999) g) x
         ORDER BY g",
    )
    .bind(&sales)
    .execute(&pool)
    .await
    .unwrap();
    let sink = |_| {
        std::sync::Arc::new(
            sluice::events::KafkaSink::new(&kafka_brokers(), &topic, 1_000_000).unwrap(),
        )
    };
    sink(0).ensure_topic(4).await.unwrap();
    let relays: Vec<_> = (0..3)
        .map(|i| tokio::spawn(sluice::workers::relay::run(t.app.clone(), sink(i))))
        .collect();
    // One relay dies mid-way; another takes over.
    tokio::time::sleep(Duration::from_millis(300)).await;
    relays[0].abort();
    wait_drained(&t, Duration::from_secs(120)).await;

    let events = consume(&kafka_brokers(), &topic, 10_000).await;
    assert_eq!(events.len(), 10_000, "nothing lost");
    let mut last: HashMap<String, i64> = HashMap::new();
    for e in &events {
        let seq = e["data"]["seq"].as_i64().unwrap();
        let sale = e["sale_id"].as_str().unwrap().to_owned();
        let previous = last.insert(sale, seq);
        assert!(
            previous.is_none_or(|p| p < seq),
            "per-sale order broken at seq {seq} after {previous:?}"
        );
    }
    for relay in relays {
        relay.abort();
    }
    t.stop().await;
}

#[tokio::test]
async fn an_event_the_broker_refuses_is_dead_lettered_and_the_rest_flows() {
    let topic = topic();
    let t = TestApp::spawn_with(|c| {
        c.events.kafka_brokers = kafka_brokers();
        c.events.topic = topic.clone();
        c.events.max_message_bytes = 2_000;
        c.events.max_tries = 3;
    })
    .await;
    let pool = sqlx::PgPool::connect(&t.app.config.ledger.url)
        .await
        .unwrap();
    let huge = uuid::Uuid::now_v7();
    sqlx::query(
        "INSERT INTO outbox (id, sale_id, event_type, payload)
         VALUES ($1, $2, 'sluice.sale.opened', jsonb_build_object('id', $1::text, 'data', repeat('x', 5000)))",
    )
    .bind(huge)
    .bind(uuid::Uuid::now_v7())
    .execute(&pool)
    .await
    .unwrap();
    let sale = t.create_sale(json!({ "quantity": 1 })).await;
    wait_drained(&t, Duration::from_secs(30)).await;
    let dead: Option<i32> =
        sqlx::query_scalar("SELECT tries FROM outbox WHERE id = $1 AND dead_at IS NOT NULL")
            .bind(huge)
            .fetch_optional(&pool)
            .await
            .unwrap();
    assert_eq!(dead, Some(3), "dead-lettered after 3 refusals");
    let events = consume(&kafka_brokers(), &topic, 1).await;
    assert_eq!(
        events[0]["sale_id"],
        sale.as_str(),
        "the events after it still flow"
    );
    let metrics = t.metrics().await;
    assert!(metrics.contains("sluice_outbox_dead_letters_total"));
    t.stop().await;
}
