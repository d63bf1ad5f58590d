//! Relay throughput next to the raw producer's, on the same broker in the same run.
//!
//! Both producers are warm when the clock starts: each has sent one event and had it
//! acknowledged, so neither figure counts the broker connection, the topic's metadata or the
//! idempotent producer's id (about half a second here, a one-off in a relay that runs for days,
//! and most of a 20,000-event run).
//!
//! `scripts/bench` runs it (it needs the broker and PostgreSQL of `scripts/services`):
//! `cargo run --release --example bench_relay -- <brokers> <postgres admin url> [events]`.

use std::time::{Duration, Instant};

use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::ClientConfig;
use sluice::config::Config;
use sluice::events::KafkaSink;
use sqlx::Connection;

const BATCH: usize = 500;

fn payload(i: usize, sale: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "id": uuid::Uuid::now_v7(), "type": "sluice.attempt.admitted", "sale_id": sale,
        "attempt_id": null, "occurred_at": chrono::Utc::now(), "schema_version": 1,
        "data": { "user_id": format!("user-{i}"), "from": "QUEUED", "to": "ADMITTED", "reason": null, "cause": "admit" }
    }))
    .unwrap()
}

async fn raw_producer(brokers: &str, topic: &str, n: usize) -> f64 {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "5")
        .create()
        .unwrap();
    let sales: Vec<String> = (0..20).map(|_| uuid::Uuid::now_v7().to_string()).collect();
    let warm_up = payload(0, &sales[0]);
    producer
        .send(
            FutureRecord::to(topic).key(&sales[0]).payload(&warm_up),
            Duration::from_secs(30),
        )
        .await
        .map_err(|(e, _)| e)
        .unwrap();
    let started = Instant::now();
    for chunk in (0..n).collect::<Vec<_>>().chunks(BATCH) {
        let mut deliveries = Vec::new();
        for &i in chunk {
            let sale = &sales[i % sales.len()];
            let body = payload(i, sale);
            let record = FutureRecord::to(topic).key(sale).payload(&body);
            deliveries.push(producer.send_result(record).map_err(|(e, _)| e).unwrap());
        }
        for d in deliveries {
            d.await.unwrap().map_err(|(e, _)| e).unwrap();
        }
    }
    n as f64 / started.elapsed().as_secs_f64()
}

async fn relay(brokers: &str, pg_admin: &str, topic: &str, n: usize) -> f64 {
    let db = format!("sluice_bench_{}", uuid::Uuid::new_v4().simple());
    let mut admin = sqlx::PgConnection::connect(pg_admin).await.unwrap();
    sqlx::query(&format!("CREATE DATABASE {db}"))
        .execute(&mut admin)
        .await
        .unwrap();
    let url = format!("{}/{db}", pg_admin.rsplit_once('/').unwrap().0);
    let mut config = Config::default();
    config.ledger.url = url.clone();
    config.auth.admin_key = "bench-admin-key-0123456789".into();
    config.auth.user_jwt_hs256_secret = Some("bench-user-secret-0123456789".into());
    config.auth.admission_key_seed_hex = Some("00".repeat(32).into());
    config.payments.webhook_secret = "bench-webhook-secret-0123456789".into();
    config.events.batch = std::num::NonZeroU32::new(BATCH as u32).expect("a batch");
    config.events.poll_ms = sluice::config::Millis(10);
    let app = sluice::service::App::build(config).unwrap();
    app.ledger.migrate().await.unwrap();
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    sqlx::query(
        "INSERT INTO outbox (id, sale_id, event_type, payload)
         SELECT id, sale, 'sluice.attempt.admitted', jsonb_build_object('id', id, 'type', 'sluice.attempt.admitted',
           'sale_id', sale, 'attempt_id', null, 'occurred_at', now(), 'schema_version', 1,
           'data', jsonb_build_object('user_id', 'user-' || g, 'from', 'QUEUED', 'to', 'ADMITTED', 'reason', null, 'cause', 'admit'))
         FROM (SELECT g, gen_random_uuid() AS id, ('00000000-0000-7000-8000-' || lpad((g % 20)::text, 12, '0'))::uuid AS sale
               FROM generate_series(1, $1) g) x
         ORDER BY g",
    )
    .bind(n as i32)
    .execute(&pool)
    .await
    .unwrap();
    let sink = KafkaSink::new(brokers, topic, 1_000_000).unwrap();
    sink.ensure_topic(6).await.unwrap();
    let sale = sluice::domain::SaleId(uuid::Uuid::now_v7());
    let warm_up = sluice::ledger::OutboxEvent {
        id: uuid::Uuid::now_v7(),
        sale_id: sale,
        event_type: "sluice.attempt.admitted".into(),
        payload: String::from_utf8(payload(0, &sale.0.to_string())).unwrap(),
        traceparent: None,
    };
    sluice::events::EventSink::publish(&sink, &[warm_up])
        .await
        .unwrap();
    // The relay as it runs in sluice, until the outbox is empty.
    let started = Instant::now();
    let relay = tokio::spawn(sluice::workers::relay::run(
        app.clone(),
        std::sync::Arc::new(sink),
    ));
    // Whether any event is left (not the backlog's count, which would cost the ledger more
    // than the relay's own reads do, 40 times a second).
    let pending =
        "SELECT EXISTS (SELECT 1 FROM outbox WHERE published_at IS NULL AND dead_at IS NULL)";
    while sqlx::query_scalar::<_, bool>(pending)
        .fetch_one(&pool)
        .await
        .unwrap()
    {
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let rate = n as f64 / started.elapsed().as_secs_f64();
    relay.abort();
    pool.close().await;
    drop(app);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let _ = sqlx::query(&format!("DROP DATABASE {db} WITH (FORCE)"))
        .execute(&mut admin)
        .await;
    rate
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let brokers = args.get(1).expect("brokers").clone();
    let pg_admin = args.get(2).expect("postgres admin url").clone();
    let n: usize = args.get(3).map(|s| s.parse().unwrap()).unwrap_or(50_000);
    let topic = format!("sluice.bench.{}", uuid::Uuid::new_v4().simple());
    let sink = KafkaSink::new(&brokers, &topic, 1_000_000).unwrap();
    sink.ensure_topic(6).await.unwrap();
    let raw = raw_producer(&brokers, &topic, n).await;
    let relayed = relay(&brokers, &pg_admin, &topic, n).await;
    println!("events: {n}");
    println!("raw producer: {raw:.0} events/s");
    println!("outbox relay: {relayed:.0} events/s");
    println!("ratio: {:.2} (goal >= 0.5)", relayed / raw);
}
