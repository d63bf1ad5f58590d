//! Traces as an SRE follows them: the real binary (on both configurations) sends its spans over
//! OTLP/HTTP (and OTLP/gRPC) to a receiver that decodes them with the OpenTelemetry project's own protobuf
//! definitions (`tests/otlp/receiver.py`, `opentelemetry-proto` from PyPI). A buyer whose
//! requests come with a `traceparent` is one trace there; a problem answer names its trace;
//! a collector that is down costs no request anything, and what it did not take is counted.

use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::{create_sale_at, test_config, SluiceProcess};

/// The caller's trace and span (a shop's frontend or gateway).
const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// The test receiver, running; what it decoded is in `out`.
struct Receiver {
    child: Child,
    port: u16,
    out: PathBuf,
}

impl Receiver {
    fn start() -> Receiver {
        Receiver::spawn(0, false)
    }

    /// A receiver that waits `delay_secs` before each answer (a slow collector).
    fn answering_after(delay_secs: u32) -> Receiver {
        Receiver::spawn(delay_secs, false)
    }

    /// A receiver of OTLP over gRPC.
    fn grpc() -> Receiver {
        Receiver::spawn(0, true)
    }

    fn spawn(delay_secs: u32, grpc: bool) -> Receiver {
        let dir =
            std::env::temp_dir().join(format!("sluice-otlp-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let (port_file, out) = (dir.join("port"), dir.join("spans.jsonl"));
        let child = Command::new("python3")
            .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/otlp/receiver.py"))
            .arg(&port_file)
            .arg(&out)
            .args(["--delay", &delay_secs.to_string()])
            .args(grpc.then_some("--grpc"))
            .spawn()
            .expect("python3 with opentelemetry-proto and grpcio (scripts/tools)");
        let deadline = Instant::now() + Duration::from_secs(10);
        let port = loop {
            if let Ok(port) = std::fs::read_to_string(&port_file) {
                break port.trim().parse().unwrap();
            }
            assert!(Instant::now() < deadline, "the OTLP receiver did not start");
            std::thread::sleep(Duration::from_millis(50));
        };
        Receiver { child, port, out }
    }

    fn spans(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The spans of `trace`, once `ready` holds of them (within 15 s: batches leave every
    /// half second).
    async fn trace(&self, trace: &str, ready: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let spans: Vec<Value> = self
                .spans()
                .into_iter()
                .filter(|s| s["trace_id"] == trace)
                .collect();
            if ready(&spans) {
                return spans;
            }
            assert!(
                Instant::now() < deadline,
                "the receiver never got the trace: {spans:#?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Receiver {
    /// The first span named `name` (within 15 s).
    async fn named(&self, name: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(span) = self.spans().into_iter().find(|s| s["name"] == name) {
                return span;
            }
            assert!(Instant::now() < deadline, "no span named {name}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An embedded sluice sending its traces to `endpoint` over `protocol`, logging JSON lines (its
/// requests too).
async fn traced_sluice_over(
    endpoint: String,
    protocol: &str,
    max_queued_spans: usize,
) -> SluiceProcess {
    traced_sluice_with(endpoint, protocol, max_queued_spans, 1.0).await
}

/// The same, keeping `ratio` of the traces that start in it.
async fn traced_sluice_with(
    endpoint: String,
    protocol: &str,
    max_queued_spans: usize,
    ratio: f64,
) -> SluiceProcess {
    let mut config = embedded_config(endpoint);
    config.telemetry.otlp_protocol = protocol.into();
    config.telemetry.trace_sample_ratio = ratio;
    config.telemetry.max_queued_spans = std::num::NonZeroUsize::new(max_queued_spans).unwrap();
    config.logging.format = "json".into();
    SluiceProcess::start(config, "info,sluice=debug").await
}

/// The embedded default in a data directory of its own, its traces sent to `endpoint`.
fn embedded_config(endpoint: String) -> sluice::config::Config {
    let mut config = test_config();
    config.queue.url.clear();
    config.ledger.url.clear();
    config.embedded.data_dir =
        std::env::temp_dir().join(format!("sluice-traced-{}", uuid::Uuid::new_v4().simple()));
    config.telemetry.otlp_endpoint = (!endpoint.is_empty()).then(|| crate::helpers::url(endpoint));
    config
}

/// A user's call with the caller's `traceparent`.
async fn call(
    sluice: &SluiceProcess,
    method: reqwest::Method,
    path: &str,
    user: &str,
    body: Option<Value>,
    traceparent: &str,
) -> (u16, Value) {
    let users = sluice::auth::UserTokens::from_config(&sluice.config.auth).unwrap();
    let token = users
        .mint(&sluice::domain::UserId::parse(user).unwrap(), 3600)
        .unwrap();
    let mut request = reqwest::Client::new()
        .request(method, format!("{}{path}", sluice.base))
        .header("Authorization", format!("Bearer {token}"));
    if !traceparent.is_empty() {
        request = request.header("traceparent", traceparent);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let resp = request.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// A buyer on the embedded default is one trace at the receiver.
#[tokio::test]
async fn a_buyers_requests_are_one_trace_at_a_real_otlp_receiver() {
    buyer_is_one_trace(Stores::Embedded).await;
}

/// The same on Redis and PostgreSQL, where the confirmation's Kafka record carries the trace.
#[tokio::test]
async fn a_buyers_requests_are_one_trace_on_redis_and_postgresql() {
    buyer_is_one_trace(Stores::Servers).await;
}

#[derive(Clone, Copy, PartialEq)]
enum Stores {
    Embedded,
    Servers,
}

/// A buyer whose requests come with a `traceparent` pays at Toss (the stand-in of
/// `tests/standins/toss`, which records the headers of each call): join, status, hold,
/// checkout and the return from Toss's window are one trace; Toss's confirm is a child
/// `provider.call` whose `traceparent` the stand-in saw; Toss's webhook is applied in that
/// trace; a problem answer and its log line name their trace; the support file shows it.
async fn buyer_is_one_trace(stores: Stores) {
    let receiver = Receiver::start();
    let toss =
        crate::helpers::StandIn::start("toss/toss_standin.py", &[crate::toss::SECRET_KEY]).await;
    let endpoint = format!("http://127.0.0.1:{}", receiver.port);
    let topic = format!("sluice.events.t{}", uuid::Uuid::new_v4().simple());
    let mut config = match stores {
        Stores::Embedded => embedded_config(endpoint),
        Stores::Servers => {
            let mut config = test_config();
            config.ledger.url = crate::helpers::fresh_database().await;
            config.events.kafka_brokers = crate::helpers::kafka_brokers();
            config.events.topic = topic.clone();
            config.telemetry.otlp_endpoint = Some(crate::helpers::url(endpoint));
            config
        }
    };
    config.logging.format = "json".into();
    crate::toss::on_toss(&mut config, &toss);
    let sluice = SluiceProcess::start(config, "info,sluice=debug").await;
    let http = reqwest::Client::new();
    let sale = create_sale_at(
        &http,
        &sluice.base,
        json!({ "name": "traced", "quantity": 5, "currency": "KRW", "unit_price": 55_000 }),
    )
    .await;
    let parent = format!("00-{TRACE}-{CALLER_SPAN}-01");
    let get = reqwest::Method::GET;
    let post = reqwest::Method::POST;

    let (status, joined) = call(
        &sluice,
        post.clone(),
        &format!("/v1/sales/{sale}/attempts"),
        "tracy",
        None,
        &parent,
    )
    .await;
    assert_eq!(status, 202, "{joined}");
    let attempt = joined["attempt_id"].as_str().unwrap().to_owned();
    let path = format!("/v1/attempts/{attempt}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let admitted = loop {
        let (_, now) = call(&sluice, get.clone(), &path, "tracy", None, &parent).await;
        if now["state"] == "ADMITTED" {
            break now;
        }
        assert!(Instant::now() < deadline, "never admitted: {now}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let hold = json!({ "admission_token": admitted["admission_token"], "quantity": 1 });
    let (status, held) = call(
        &sluice,
        post.clone(),
        &format!("{path}/hold"),
        "tracy",
        Some(hold),
        &parent,
    )
    .await;
    assert_eq!(status, 200, "{held}");
    let (status, paying) = call(
        &sluice,
        post.clone(),
        &format!("{path}/checkout"),
        "tracy",
        None,
        &parent,
    )
    .await;
    assert_eq!(status, 200, "{paying}");
    // The buyer pays in Toss's window, and comes back to sluice with the buyer's trace.
    let pay = &paying["payment"]["pay"];
    let window = json!({ "orderId": pay["order_id"], "amount": pay["amount"], "orderName": "x" });
    let key = toss.control("/_window/pay", window).await["paymentKey"]
        .as_str()
        .unwrap()
        .to_owned();
    let back = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(format!("{}/v1/payments/toss/success", sluice.base))
        .query(&[
            ("paymentKey", key.as_str()),
            ("orderId", pay["order_id"].as_str().unwrap()),
            ("amount", "55000"),
        ])
        .header("traceparent", &parent)
        .header("tracestate", "shop=buyer-7")
        .send()
        .await
        .unwrap();
    assert_eq!(back.status(), 303);
    let (_, now) = call(&sluice, get.clone(), &path, "tracy", None, &parent).await;
    assert_eq!(now["state"], "CONFIRMED", "{now}");
    // Toss's webhook of the same payment: applied (once) in the buyer's trace.
    let hook = toss
        .control(
            "/_test/webhook",
            json!({ "url": format!("{}/v1/webhooks/toss", sluice.base), "paymentKey": key }),
        )
        .await;
    assert_eq!(hook["answers"], json!([200]), "{hook}");

    // A problem answer names its trace, the one the receiver gets.
    let other = "0af7651916cd43dd8448eb211c80319c";
    let (status, problem) = call(
        &sluice,
        get.clone(),
        "/v1/attempts/not-an-attempt",
        "tracy",
        None,
        &format!("00-{other}-b7ad6b7169203331-01"),
    )
    .await;
    assert_eq!(status, 404, "{problem}");
    assert_eq!(problem["trace_id"], other, "{problem}");

    let spans = receiver
        .trace(TRACE, |spans| {
            let routes: Vec<&str> = spans
                .iter()
                .filter_map(|s| s["attributes"]["http.route"].as_str())
                .collect();
            [
                "joinSale",
                "getAttempt",
                "holdStock",
                "checkout",
                "tossSuccess",
            ]
            .iter()
            .all(|r| routes.contains(r))
                && spans.iter().any(|s| s["name"] == "ledger.transaction")
                && spans.iter().any(|s| s["name"] == "provider.call")
                && spans
                    .iter()
                    .filter(|s| s["name"] == "payment.apply")
                    .count()
                    >= 2
        })
        .await;
    let join = spans
        .iter()
        .find(|s| s["attributes"]["http.route"] == "joinSale")
        .unwrap();
    assert_eq!(
        join["parent_span_id"], CALLER_SPAN,
        "the caller's span is the join's parent"
    );
    assert_eq!(join["service"], "sluice");
    assert!(join["instance"].as_str().is_some_and(|i| !i.is_empty()));
    assert_eq!(join["attributes"]["http.response.status_code"], 202);
    // The ledger's transactions and the provider's call are children of the trace's spans.
    let ids: Vec<&Value> = spans.iter().map(|s| &s["span_id"]).collect();
    for child in spans
        .iter()
        .filter(|s| s["name"] == "ledger.transaction" || s["name"] == "provider.call")
    {
        assert!(
            ids.contains(&&child["parent_span_id"]),
            "an orphan: {child}"
        );
    }
    // Toss saw the confirm's span as its caller.
    let confirm = spans
        .iter()
        .find(|s| s["name"] == "provider.call" && s["attributes"]["call"] == "confirm")
        .unwrap_or_else(|| panic!("no confirm call in {spans:#?}"));
    let calls = toss.calls().await;
    let seen = calls
        .iter()
        .find(|c| c["path"] == "/v1/payments/confirm")
        .unwrap_or_else(|| panic!("Toss was not asked to confirm: {calls:?}"));
    assert_eq!(
        seen["traceparent"],
        json!(format!(
            "00-{TRACE}-{}-01",
            confirm["span_id"].as_str().unwrap()
        )),
        "{seen}"
    );
    // The caller's tracestate goes on with its trace.
    assert_eq!(seen["tracestate"], "shop=buyer-7", "{seen}");
    // The webhook's word, applied in the trace the payment was checked out in.
    assert!(spans
        .iter()
        .filter(|s| s["name"] == "payment.apply")
        .all(|s| s["attributes"]["succeeded"] == true));
    // Its log line names the trace too.
    let logs = sluice.logs();
    let line = logs
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["fields"]["message"] == "request" && l["fields"]["status"] == 404)
        .unwrap_or_else(|| panic!("no JSON line of the refused request: {logs}"));
    assert_eq!(line["span"]["trace_id"], other, "{line}");
    assert!(
        line["timestamp"].is_string() && line["level"] == "DEBUG",
        "{line}"
    );
    let refused = receiver.trace(other, |spans| !spans.is_empty()).await;
    assert_eq!(refused[0]["attributes"]["http.response.status_code"], 404);
    // The operator's support file names the trace of each step the buyer's requests made.
    let file: Value = http
        .get(format!(
            "{}/v1/sales/{sale}/attempts/{attempt}",
            sluice.base
        ))
        .header("X-Admin-Key", crate::helpers::ADMIN_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let trail = file["trail"].as_array().unwrap();
    for cause in ["hold", "checkout", "payment_succeeded"] {
        let step = trail
            .iter()
            .find(|s| s["cause"] == cause)
            .unwrap_or_else(|| panic!("no {cause} in {file}"));
        assert_eq!(step["trace_id"], TRACE, "{step}");
    }
    // The background work has spans of its own: the admitter's ticks, with their sale.
    let tick = receiver.named("admission.tick").await;
    assert_eq!(tick["attributes"]["sale"], sale.as_str());
    // On Redis and PostgreSQL, the confirmation's Kafka record continues the buyer's trace.
    if stores == Stores::Servers {
        let traceparent = confirmed_record(&topic).await;
        assert!(
            traceparent.starts_with(&format!("00-{TRACE}-")),
            "{traceparent}"
        );
    }
}

/// `telemetry.otlp_protocol = "grpc"`: the same trace reaches a gRPC receiver (grpcio serving
/// the project's own `TraceService`).
#[tokio::test]
async fn a_buyers_join_reaches_a_grpc_receiver_in_the_buyers_trace() {
    let receiver = Receiver::grpc();
    let sluice =
        traced_sluice_over(format!("http://127.0.0.1:{}", receiver.port), "grpc", 2048).await;
    let sale = create_sale_at(
        &reqwest::Client::new(),
        &sluice.base,
        json!({ "name": "traced over grpc", "quantity": 5 }),
    )
    .await;
    let parent = format!("00-{TRACE}-{CALLER_SPAN}-01");
    let (status, joined) = call(
        &sluice,
        reqwest::Method::POST,
        &format!("/v1/sales/{sale}/attempts"),
        "grace",
        None,
        &parent,
    )
    .await;
    assert_eq!(status, 202, "{joined}");
    let spans = receiver
        .trace(TRACE, |spans| {
            spans
                .iter()
                .any(|s| s["attributes"]["http.route"] == "joinSale")
        })
        .await;
    let join = spans
        .iter()
        .find(|s| s["attributes"]["http.route"] == "joinSale")
        .unwrap();
    assert_eq!(join["parent_span_id"], CALLER_SPAN, "{join}");
    assert_eq!(join["service"], "sluice");
}

/// "It's your turn" continues the trace of the admitter's tick that admitted the user: the
/// shop's webhook and the Web Push message arrive with that tick's `traceparent` (seen by the
/// push service stand-in, `tests/standins/push`, which is the shop's webhook too).
#[tokio::test]
async fn turn_messages_carry_the_admitting_ticks_trace() {
    let receiver = Receiver::start();
    let shop =
        crate::helpers::StandIn::start("push/push_service.py", &["shop-hook-secret-01234"]).await;
    let vapid = shop.control("/_test/vapid", json!({})).await;
    let mut config = embedded_config(format!("http://127.0.0.1:{}", receiver.port));
    config.notify.webhook_url = Some(crate::helpers::url(format!("{}/hook", shop.url())));
    config.notify.webhook_secret = "shop-hook-secret-01234".into();
    config.notify.vapid_private_key = vapid["private_key"].as_str().unwrap().into();
    config.notify.vapid_public_key = vapid["public_key"].as_str().unwrap().into();
    config.notify.vapid_subject = "mailto:ops@shop.example".into();
    config.notify.web_push_hosts = vec!["127.0.0.1".into()];
    let sluice = SluiceProcess::start(config, "info").await;
    let http = reqwest::Client::new();
    let sale = create_sale_at(
        &http,
        &sluice.base,
        json!({ "name": "turns", "quantity": 5 }),
    )
    .await;
    crate::helpers::pause_sale_at(&http, &sluice.base, &sale).await;
    let (status, joined) = call(
        &sluice,
        reqwest::Method::POST,
        &format!("/v1/sales/{sale}/attempts"),
        "turner",
        None,
        "",
    )
    .await;
    assert_eq!(status, 202, "{joined}");
    let attempt = joined["attempt_id"].as_str().unwrap();
    let subscription = shop.control("/_test/subscribe", json!({})).await;
    let (status, body) = call(
        &sluice,
        reqwest::Method::PUT,
        &format!("/v1/attempts/{attempt}/web-push"),
        "turner",
        Some(subscription),
        "",
    )
    .await;
    assert_eq!(status, 204, "{body}");
    let resumed = http
        .post(format!("{}/v1/sales/{sale}/resume", sluice.base))
        .header("X-Admin-Key", crate::helpers::ADMIN_KEY)
        .send()
        .await
        .unwrap();
    assert!(resumed.status().is_success());
    let deadline = Instant::now() + Duration::from_secs(15);
    let (hook, push) = loop {
        let calls = shop.calls().await;
        let find = |kind: &str| calls.iter().find(|c| c["kind"] == kind).cloned();
        if let (Some(hook), Some(push)) = (find("hook"), find("push")) {
            break (hook, push);
        }
        assert!(Instant::now() < deadline, "no turn messages: {calls:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(push["status"], 201, "{push}");
    let traceparent = hook["traceparent"]
        .as_str()
        .unwrap_or_else(|| panic!("no traceparent on the shop's webhook: {hook}"));
    assert_eq!(push["traceparent"], traceparent, "{push}");
    let parts: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(parts.len(), 4, "{traceparent}");
    let ticks = receiver
        .trace(parts[1], |spans| {
            spans.iter().any(|s| s["name"] == "admission.tick")
        })
        .await;
    let tick = ticks
        .iter()
        .find(|s| s["name"] == "admission.tick")
        .unwrap();
    assert_eq!(tick["attributes"]["sale"], sale.as_str(), "{tick}");
}

/// Joins of one sale that arrive together ride in one call: the batch is a trace of its own
/// that links each request it carried, in the requests' own traces.
#[tokio::test]
async fn a_batch_of_several_requests_links_each_of_them() {
    let receiver = Receiver::start();
    let sluice = traced_sluice_over(
        format!("http://127.0.0.1:{}", receiver.port),
        "http/protobuf",
        4096,
    )
    .await;
    let sale = create_sale_at(
        &reqwest::Client::new(),
        &sluice.base,
        json!({ "name": "batched", "quantity": 5 }),
    )
    .await;
    crate::helpers::pause_sale_at(&reqwest::Client::new(), &sluice.base, &sale).await;
    let join = format!("/v1/sales/{sale}/attempts");
    let traces: Vec<String> = (0..64)
        .map(|i| format!("{i:032x}").replacen('0', "a", 1))
        .collect();
    let joins = traces.iter().enumerate().map(|(i, trace)| {
        let (sluice, join) = (&sluice, &join);
        async move {
            let parent = format!("00-{trace}-{CALLER_SPAN}-01");
            call(
                sluice,
                reqwest::Method::POST,
                join,
                &format!("b{i}"),
                None,
                &parent,
            )
            .await
        }
    });
    for (status, body) in futures_util::future::join_all(joins).await {
        assert_eq!(status, 202, "{body}");
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    let batch = loop {
        let found = receiver
            .spans()
            .into_iter()
            .find(|s| s["name"] == "batch" && s["links"].as_array().is_some_and(|l| l.len() >= 2));
        if let Some(batch) = found {
            break batch;
        }
        assert!(Instant::now() < deadline, "no batch of several requests");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let links = batch["links"].as_array().unwrap();
    assert_eq!(
        batch["attributes"]["questions"]
            .to_string()
            .trim_matches('"'),
        links.len().to_string(),
        "one link a request: {batch}"
    );
    assert!(
        !traces.contains(&batch["trace_id"].as_str().unwrap().to_owned()),
        "a trace of its own: {batch}"
    );
    for link in links {
        assert!(
            traces.contains(&link["trace_id"].as_str().unwrap().to_owned()),
            "a link to a request's trace: {link}"
        );
    }
}

/// The standard variables, as every OpenTelemetry SDK reads them, with nothing in
/// `[telemetry]`: `OTEL_EXPORTER_OTLP_ENDPOINT` turns traces on, `OTEL_EXPORTER_OTLP_PROTOCOL`
/// picks gRPC, `OTEL_SERVICE_NAME` names the service, and `OTEL_TRACES_SAMPLER` keeps every
/// trace where `trace_sample_ratio` says none.
#[tokio::test]
async fn the_standard_otel_variables_are_honoured() {
    let receiver = Receiver::grpc();
    let mut config = embedded_config(String::new());
    config.telemetry.trace_sample_ratio = 0.0;
    let env = [
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{}", receiver.port),
        ),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc".to_owned()),
        ("OTEL_SERVICE_NAME", "shop-waiting-room".to_owned()),
        ("OTEL_TRACES_SAMPLER", "always_on".to_owned()),
    ];
    let sluice = SluiceProcess::start_with_env(config, "info", &env).await;
    let sale = create_sale_at(
        &reqwest::Client::new(),
        &sluice.base,
        json!({ "name": "standard variables", "quantity": 5 }),
    )
    .await;
    let join = format!("/v1/sales/{sale}/attempts");
    let (status, body) = call(&sluice, reqwest::Method::POST, &join, "otel", None, "").await;
    assert_eq!(status, 202, "{body}");
    let deadline = Instant::now() + Duration::from_secs(15);
    let joined = loop {
        let spans = receiver.spans();
        if let Some(span) = spans
            .into_iter()
            .find(|s| s["attributes"]["http.route"] == "joinSale")
        {
            break span;
        }
        assert!(Instant::now() < deadline, "no join's span");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(joined["service"], "shop-waiting-room", "{joined}");
}

/// With `trace_sample_ratio = 0`, only a caller's kept trace is recorded: a request without a
/// `traceparent`, or with one its caller did not keep (flags `00`), makes no span, and so do
/// the ledger transactions and batches of its work.
#[tokio::test]
async fn only_the_traces_kept_are_recorded() {
    let receiver = Receiver::start();
    let endpoint = format!("http://127.0.0.1:{}", receiver.port);
    let sluice = traced_sluice_with(endpoint, "http/protobuf", 2048, 0.0).await;
    let sale = create_sale_at(
        &reqwest::Client::new(),
        &sluice.base,
        json!({ "name": "sampled", "quantity": 5 }),
    )
    .await;
    let join = format!("/v1/sales/{sale}/attempts");
    let post = reqwest::Method::POST;
    let not_kept = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00";
    for (user, traceparent) in [("newcomer", ""), ("unkept", not_kept)] {
        let (status, body) = call(&sluice, post.clone(), &join, user, None, traceparent).await;
        assert_eq!(status, 202, "{body}");
    }
    let kept = format!("00-{TRACE}-{CALLER_SPAN}-01");
    let (status, body) = call(&sluice, post, &join, "kept", None, &kept).await;
    assert_eq!(status, 202, "{body}");
    receiver
        .trace(TRACE, |spans| {
            spans
                .iter()
                .any(|s| s["attributes"]["http.route"] == "joinSale")
        })
        .await;
    // The kept join's batch of one left with it, in one export; give any other a moment.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let others: Vec<Value> = receiver
        .spans()
        .into_iter()
        .filter(|s| s["trace_id"] != TRACE)
        .collect();
    assert!(others.is_empty(), "spans of traces not kept: {others:#?}");
}

#[tokio::test]
async fn a_collector_that_is_down_costs_no_request_and_its_drops_are_counted() {
    // Nothing listens there.
    let port = crate::helpers::free_port();
    joins_go_on_and_drops_are_counted(format!("http://127.0.0.1:{port}"), "http/protobuf").await;
}

/// A collector that answers only after 8 s (past the export's 5 s): the same.
#[tokio::test]
async fn a_slow_collector_costs_no_request_and_its_drops_are_counted() {
    let receiver = Receiver::answering_after(8);
    let endpoint = format!("http://127.0.0.1:{}", receiver.port);
    joins_go_on_and_drops_are_counted(endpoint, "http/protobuf").await;
}

/// The same over gRPC, to a collector that is down.
#[tokio::test]
async fn a_grpc_collector_that_is_down_costs_no_request_and_its_drops_are_counted() {
    let port = crate::helpers::free_port();
    joins_go_on_and_drops_are_counted(format!("http://127.0.0.1:{port}"), "grpc").await;
}

/// 200 joins through a sluice whose collector is at `endpoint` (16 spans may wait): each is
/// answered, and the spans past the queue or in batches the collector did not take are counted.
async fn joins_go_on_and_drops_are_counted(endpoint: String, protocol: &str) {
    let sluice = traced_sluice_over(endpoint, protocol, 16).await;
    let http = reqwest::Client::new();
    let sale = create_sale_at(
        &http,
        &sluice.base,
        json!({ "name": "untraced", "quantity": 5 }),
    )
    .await;
    for i in 0..200 {
        let parent = format!("00-{TRACE}-{CALLER_SPAN}-01");
        let (status, body) = call(
            &sluice,
            reqwest::Method::POST,
            &format!("/v1/sales/{sale}/attempts"),
            &format!("u{i}"),
            None,
            &parent,
        )
        .await;
        assert!(status == 202 || status == 201, "{status}: {body}");
    }
    // More spans than the queue holds were made: those past it, and the batches the
    // collector never took, are counted.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let dropped: f64 = sluice
            .metrics()
            .await
            .lines()
            .find(|l| l.starts_with("sluice_trace_spans_dropped_total "))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap_or(0.0);
        if dropped >= 200.0 - 16.0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "dropped spans counted: {dropped}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Redis + PostgreSQL + the Kafka protocol: an instant sale's claim, made in a request that came
/// with a `traceparent`, is written to the outbox with that trace, and its Kafka record carries
/// it as its `traceparent` header, so a consumer continues the buyer's trace.
#[tokio::test]
async fn a_claims_kafka_record_continues_the_buyers_trace() {
    let receiver = Receiver::start();
    let topic = format!("sluice.events.t{}", uuid::Uuid::new_v4().simple());
    let mut config = test_config();
    config.ledger.url = crate::helpers::fresh_database().await;
    config.events.kafka_brokers = crate::helpers::kafka_brokers();
    config.events.topic = topic.clone();
    config.telemetry.otlp_endpoint = Some(crate::helpers::url(format!(
        "http://127.0.0.1:{}",
        receiver.port
    )));
    let sluice = SluiceProcess::start(config, "").await;
    let http = reqwest::Client::new();
    let sale = create_sale_at(
        &http,
        &sluice.base,
        json!({ "name": "traced claims", "quantity": 5, "per_user_limit": 1, "instant": true }),
    )
    .await;
    let trace = "5af7651916cd43dd8448eb211c80319d";
    let (status, claimed) = call(
        &sluice,
        reqwest::Method::POST,
        &format!("/v1/sales/{sale}/attempts"),
        "claimer",
        None,
        &format!("00-{trace}-{CALLER_SPAN}-01"),
    )
    .await;
    assert_eq!(status, 201, "{claimed}");
    assert_eq!(claimed["state"], "CONFIRMED");

    let traceparent = confirmed_record(&topic).await;
    assert!(
        traceparent.starts_with(&format!("00-{trace}-")),
        "{traceparent}"
    );
    // The span it names is one the receiver got, in the buyer's trace.
    let span_id = traceparent.split('-').nth(2).unwrap().to_owned();
    receiver
        .trace(trace, |spans| spans.iter().any(|s| s["span_id"] == span_id))
        .await;
}

/// The `traceparent` header of the first `sluice.attempt.confirmed` record of `topic` (within
/// 30 s).
async fn confirmed_record(topic: &str) -> String {
    use rdkafka::consumer::{Consumer, StreamConsumer};
    use rdkafka::message::{Headers, Message};
    let consumer: StreamConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", crate::helpers::kafka_brokers())
        .set(
            "group.id",
            format!("traced-{}", uuid::Uuid::new_v4().simple()),
        )
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&[topic]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let traceparent = loop {
        assert!(Instant::now() < deadline, "no confirmed record");
        let Ok(Ok(message)) = tokio::time::timeout(Duration::from_secs(5), consumer.recv()).await
        else {
            continue;
        };
        let headers = message.headers().expect("headers");
        let header = |name: &str| {
            headers
                .iter()
                .find(|h| h.key == name)
                .and_then(|h| h.value)
                .map(|v| String::from_utf8_lossy(v).into_owned())
        };
        if header("event-type").as_deref() == Some("sluice.attempt.confirmed") {
            break header("traceparent");
        }
    };
    traceparent.expect("the record carries a traceparent")
}
