//! Traces over OpenTelemetry's OTLP (`[telemetry]`): sluice's `tracing` spans become the trace
//! (`tracing-opentelemetry`), a caller's W3C `traceparent` is its parent, and the spans go to
//! the collector in batches from a thread of their own.
//!
//! What a collector that is down or slow may cost is bounded: spans wait in a queue of at most
//! `telemetry.max_queued_spans`; past it a span is dropped, as is a batch the collector did
//! not take, and both are counted (`sluice_trace_spans_dropped_total`). No request waits on
//! an export.
//!
//! The binary reads the configuration before it sets up logging, and sets up both at once
//! (`init_tracing`): a layer that downcasts, as `tracing-opentelemetry`'s does, cannot be
//! swapped in later.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::propagation::Extractor;
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry::KeyValue;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Sampler, SdkTracerProvider, SpanData, SpanExporter,
    SpanProcessor,
};
use opentelemetry_sdk::Resource;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Registry;

use super::settings::TelemetryConfig;

/// The layer that makes `tracing` spans a trace's.
pub type TracesLayer =
    tracing_opentelemetry::OpenTelemetryLayer<Registry, opentelemetry_sdk::trace::SdkTracer>;

/// Whether traces are on: requests skip their span otherwise.
static ON: AtomicBool = AtomicBool::new(false);

/// The share of new traces kept (`telemetry.trace_sample_ratio`, as `f64` bits), when sluice
/// decides it ([`OWN_SAMPLING`]).
static RATIO: AtomicU64 = AtomicU64::new(0);

/// Whether sluice decides which new traces are kept, before it makes their first span: then a
/// request whose trace is not kept makes no span at all, and costs what it costs with traces
/// off. Not when `OTEL_TRACES_SAMPLER` is set: the SDK's sampler then decides every span.
static OWN_SAMPLING: AtomicBool = AtomicBool::new(true);

/// A batch the collector has not taken within this is given up (its spans counted as dropped).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// The running traces: flushed and stopped with the server.
pub struct Traces {
    provider: SdkTracerProvider,
}

impl Traces {
    /// The layer to install in the process's subscriber (`init_tracing`).
    pub fn layer(&self) -> TracesLayer {
        tracing_opentelemetry::layer().with_tracer(self.provider.tracer("sluice"))
    }

    /// Sends what is queued (within the export timeout) and stops.
    pub fn stop(self) {
        ON.store(false, Ordering::Relaxed);
        if let Err(e) = self.provider.shutdown() {
            tracing::debug!(error = %e, "traces not flushed at stop");
        }
    }
}

/// Whether traces are being sent.
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// A span within the current one (a request's ledger transaction, a provider call): made only
/// while a trace is being recorded there, so the work of a request whose trace is not kept
/// makes none.
pub fn span(make: impl FnOnce() -> tracing::Span) -> tracing::Span {
    if !on() {
        return tracing::Span::none();
    }
    let current = tracing::Span::current();
    if !current.is_none() && recorded(&current).is_some() {
        make()
    } else {
        tracing::Span::none()
    }
}

/// The first span of a new trace (an admitter's tick, a reapers' pass, a relay's send): made
/// for the share of them that is kept.
pub fn root(make: impl FnOnce() -> tracing::Span) -> tracing::Span {
    if on() && keeps(None) {
        make()
    } else {
        tracing::Span::none()
    }
}

/// Whether a trace is kept: a caller's as the caller decided (`sampled`), a new one at the
/// ratio. Always, when the SDK's own sampler decides instead.
fn keeps(sampled: Option<bool>) -> bool {
    if !OWN_SAMPLING.load(Ordering::Relaxed) {
        return true;
    }
    sampled.unwrap_or_else(|| {
        let ratio = f64::from_bits(RATIO.load(Ordering::Relaxed));
        ratio >= 1.0 || rand::random::<f64>() < ratio
    })
}

/// How spans travel to the collector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Protocol {
    /// OTLP/HTTP with protobuf bodies, to `<endpoint>/v1/traces` (port 4318 by convention).
    HttpProtobuf,
    /// OTLP/gRPC, to `<endpoint>` (port 4317 by convention).
    Grpc,
}

/// The protocol: the configuration's, else the environment's standard variables, else
/// `http/protobuf` (the OpenTelemetry SDKs' default).
fn protocol(t: &TelemetryConfig) -> Protocol {
    let named = Some(t.otlp_protocol.clone())
        .filter(|p| !p.is_empty())
        .or_else(|| std::env::var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").ok())
        .or_else(|| std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL").ok());
    match named.as_deref() {
        Some("grpc") => Protocol::Grpc,
        _ => Protocol::HttpProtobuf,
    }
}

/// The collector's endpoint: the configuration's, else the environment's standard one.
fn endpoint(t: &TelemetryConfig, protocol: Protocol) -> Option<String> {
    let own = t
        .otlp_endpoint
        .as_deref()
        .unwrap_or("")
        .trim_end_matches('/');
    if !own.is_empty() {
        return Some(match protocol {
            Protocol::HttpProtobuf => format!("{own}/v1/traces"),
            Protocol::Grpc => own.to_owned(),
        });
    }
    [
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ]
    .iter()
    .any(|v| std::env::var(v).is_ok_and(|e| !e.is_empty()))
    .then(String::new)
}

/// The exporter for `protocol`, and the runtime a gRPC exporter needs: its channel runs on
/// tokio, while the batch processor exports from a plain thread of its own.
fn exporter(
    protocol: Protocol,
    endpoint: String,
) -> anyhow::Result<(opentelemetry_otlp::SpanExporter, Option<ExportRuntime>)> {
    match protocol {
        Protocol::HttpProtobuf => {
            let mut exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_timeout(EXPORT_TIMEOUT);
            // Empty: the SDK reads OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT itself.
            if !endpoint.is_empty() {
                exporter = exporter.with_endpoint(endpoint);
            }
            Ok((exporter.build()?, None))
        }
        Protocol::Grpc => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("sluice-traces")
                .enable_all()
                .build()?;
            let mut exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_timeout(EXPORT_TIMEOUT);
            if !endpoint.is_empty() {
                exporter = exporter.with_endpoint(endpoint);
            }
            // The channel starts its connection's task on the runtime it is built in.
            let exporter = {
                let _in_runtime = runtime.enter();
                exporter.build()?
            };
            Ok((exporter, Some(ExportRuntime(Some(runtime)))))
        }
    }
}

/// The tokio runtime a gRPC export runs on; dropped without waiting for its tasks, since it
/// is dropped on the batch processor's thread as it stops.
#[derive(Debug)]
struct ExportRuntime(Option<tokio::runtime::Runtime>);

impl Drop for ExportRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// Starts sending traces when an endpoint is configured; `instance` names this replica in
/// their resource. Its spans are made once its layer is installed (`Traces::layer`).
pub fn start(t: &TelemetryConfig, instance: &str) -> anyhow::Result<Option<Traces>> {
    let protocol = protocol(t);
    let Some(endpoint) = endpoint(t, protocol) else {
        return Ok(None);
    };
    let (exporter, runtime) = exporter(protocol, endpoint)?;
    let queued = Arc::new(AtomicUsize::new(0));
    let batches = BatchSpanProcessor::builder(Counted {
        inner: exporter,
        queued: Arc::clone(&queued),
        runtime,
    })
    .with_batch_config(
        BatchConfigBuilder::default()
            // Room past the bound kept in front of it, so the processor itself never drops.
            .with_max_queue_size(t.max_queued_spans.get() + 512)
            .with_max_export_batch_size(512.min(t.max_queued_spans.get()))
            .with_scheduled_delay(Duration::from_millis(500))
            .build(),
    )
    .build();
    let mut provider = SdkTracerProvider::builder().with_span_processor(Bounded {
        inner: batches,
        queued,
        max: t.max_queued_spans.get(),
    });
    // OTEL_TRACES_SAMPLER, when set, is the SDK's own default: it stays, and decides every
    // span. Otherwise sluice has decided before it makes a trace's first span (`keeps`).
    let own = std::env::var("OTEL_TRACES_SAMPLER").is_err();
    OWN_SAMPLING.store(own, Ordering::Relaxed);
    RATIO.store(t.trace_sample_ratio.to_bits(), Ordering::Relaxed);
    if own {
        provider = provider.with_sampler(Sampler::ParentBased(Box::new(Sampler::AlwaysOn)));
    }
    let mut resource = Resource::builder().with_attributes([
        KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
        KeyValue::new("service.instance.id", instance.to_owned()),
    ]);
    if std::env::var("OTEL_SERVICE_NAME").is_err() {
        resource = resource.with_service_name(t.service_name.clone());
    }
    let provider = provider.with_resource(resource.build()).build();
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    ON.store(true, Ordering::Relaxed);
    Ok(Some(Traces { provider }))
}

/// Keeps at most `max` ended spans waiting for export: a span past it is dropped and counted.
#[derive(Debug)]
struct Bounded<P> {
    inner: P,
    queued: Arc<AtomicUsize>,
    max: usize,
}

impl<P: SpanProcessor> SpanProcessor for Bounded<P> {
    fn on_start(&self, span: &mut opentelemetry_sdk::trace::Span, cx: &opentelemetry::Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        if self.queued.fetch_add(1, Ordering::AcqRel) >= self.max {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            dropped(1);
            return;
        }
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The exporter, counting what leaves the queue and what the collector did not take.
#[derive(Debug)]
struct Counted<E> {
    inner: E,
    queued: Arc<AtomicUsize>,
    /// The runtime the export runs on, when the exporter needs one (gRPC).
    runtime: Option<ExportRuntime>,
}

impl<E: SpanExporter> SpanExporter for Counted<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len();
        let result = match self.runtime.as_ref().and_then(|r| r.0.as_ref()) {
            // The processor's thread is not tokio's: the export blocks it on the runtime.
            Some(runtime) => runtime.block_on(self.inner.export(batch)),
            None => self.inner.export(batch).await,
        };
        self.queued.fetch_sub(n, Ordering::AcqRel);
        if result.is_err() {
            dropped(n);
        }
        result
    }

    fn shutdown_with_timeout(&mut self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&mut self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

fn dropped(n: usize) {
    metrics::counter!("sluice_trace_spans_dropped_total").increment(n as u64);
}

/// Request headers as the propagator reads them.
struct Headers<'a>(&'a poem::http::HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

/// The span of a request that came with `headers`, made by `make` when its trace is kept: the
/// caller's trace (its `traceparent` and `tracestate`) is its parent, and the caller's choice
/// to keep it or not holds; a request without one starts a trace, kept at the ratio.
pub fn request_span(
    headers: &poem::http::HeaderMap,
    make: impl FnOnce() -> tracing::Span,
) -> tracing::Span {
    if !on() {
        return tracing::Span::none();
    }
    // Most requests come without one: they are not read through the propagator.
    let caller = headers
        .contains_key("traceparent")
        .then(|| caller_of(&Headers(headers)))
        .flatten();
    if !keeps(
        caller
            .as_ref()
            .map(|c| c.span().span_context().is_sampled()),
    ) {
        return tracing::Span::none();
    }
    let span = make();
    if let Some(caller) = caller {
        let _ = span.set_parent(caller);
    }
    span
}

/// Makes the span named by `traceparent` (W3C Trace Context, as a row kept it) the parent of
/// `span`, so work done later for the same buyer joins the buyer's trace.
pub fn continue_from(span: &tracing::Span, traceparent: &str) {
    let carrier =
        std::collections::HashMap::from([("traceparent".to_owned(), traceparent.to_owned())]);
    if let Some(parent) = caller_of(&carrier) {
        let _ = span.set_parent(parent);
    }
}

/// The trace context `carrier` holds, when it holds a valid one.
fn caller_of(carrier: &dyn Extractor) -> Option<opentelemetry::Context> {
    let cx = opentelemetry::global::get_text_map_propagator(|p| p.extract(carrier));
    cx.span().span_context().is_valid().then_some(cx)
}

/// `span`'s place in its trace, while traces are on and it is recorded.
fn recorded(span: &tracing::Span) -> Option<opentelemetry::trace::SpanContext> {
    if !on() {
        return None;
    }
    let sc = span.context().span().span_context().clone();
    sc.is_valid().then_some(sc)
}

/// Where a request that asked something of a batch stands in its trace (nothing while traces
/// are off).
pub struct Asker(Option<opentelemetry::trace::SpanContext>);

impl Asker {
    /// The current span's place.
    pub fn now() -> Asker {
        Asker(recorded(&tracing::Span::current()))
    }
}

/// The span of one batch of `call` for `sale`: a child of its asker when it carried one traced
/// request, so a lone request's rows are of its trace; with several, a trace of its own that
/// links each of them (rows it writes are the batch's, and lead to every request it carried).
/// None when none of its requests is traced.
pub fn batch_span(
    call: &'static str,
    sale: crate::domain::SaleId,
    askers: Vec<Asker>,
) -> tracing::Span {
    if !on() {
        return tracing::Span::none();
    }
    let questions = askers.len();
    let mut askers: Vec<_> = askers.into_iter().filter_map(|a| a.0).collect();
    // None of its requests is traced: nor is the batch.
    if askers.is_empty() {
        return tracing::Span::none();
    }
    let span = tracing::info_span!(parent: None, "batch", call, %sale, questions);
    if askers.len() == 1 {
        let parent = opentelemetry::Context::new().with_remote_span_context(askers.remove(0));
        let _ = span.set_parent(parent);
    } else {
        for asker in askers {
            span.add_link(asker);
        }
    }
    span
}

/// Records `span`'s trace and span ids as its fields `trace_id` and `span_id`, so the log lines
/// written inside it carry them.
pub fn name_ids(span: &tracing::Span) {
    if let Some(sc) = recorded(span) {
        span.record("trace_id", sc.trace_id().to_string());
        span.record("span_id", sc.span_id().to_string());
    }
}

/// The current span's trace context as W3C Trace Context headers, for a call sluice makes:
/// `traceparent`, and `tracestate` when the trace carries one (a caller's, passed on); none
/// when no trace is being recorded.
pub fn trace_headers() -> Vec<(&'static str, String)> {
    let span = tracing::Span::current();
    if recorded(&span).is_none() {
        return Vec::new();
    }
    let mut carrier = std::collections::HashMap::new();
    opentelemetry::global::get_text_map_propagator(|p| {
        p.inject_context(&span.context(), &mut carrier)
    });
    ["traceparent", "tracestate"]
        .into_iter()
        .filter_map(|name| Some((name, carrier.remove(name).filter(|v| !v.is_empty())?)))
        .collect()
}

/// The current span's `traceparent`, kept with what it wrote (an outbox row, a payment, a
/// turn) for the work that continues its trace later: none when no trace is being recorded.
pub fn traceparent() -> Option<String> {
    trace_headers()
        .into_iter()
        .find_map(|(name, value)| (name == "traceparent").then_some(value))
}

/// The id of the trace the current span belongs to, when one is recorded.
pub fn current_trace_id() -> Option<String> {
    recorded(&tracing::Span::current()).map(|sc| sc.trace_id().to_string())
}
