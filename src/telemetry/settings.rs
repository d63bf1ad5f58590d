//! The `[telemetry]` section of the settings: where traces go and how many are kept.

use std::num::NonZeroUsize;

use serde::{Deserialize, Serialize};

use crate::setting::HttpUrl;

/// Traces over OpenTelemetry's OTLP: off unless an endpoint is set, here or in the standard
/// `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the other standard
/// `OTEL_*` variables are honoured too, as every OpenTelemetry SDK honours them).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The collector's OTLP endpoint: `http://otel-collector:4318` for `http/protobuf` (traces
    /// go to its `/v1/traces`), `http://otel-collector:4317` for `grpc`. Empty: traces off,
    /// unless the environment names one.
    #[serde(with = "crate::setting::or_empty")]
    pub otlp_endpoint: Option<HttpUrl>,
    /// How traces are sent: `http/protobuf` or `grpc`. Empty: as the standard
    /// `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL` say, else
    /// `http/protobuf`.
    pub otlp_protocol: String,
    /// The share of traces kept (0 to 1) for requests that come without a caller's trace; a
    /// caller's trace is kept or left as the caller decided. `OTEL_TRACES_SAMPLER` overrides it.
    pub trace_sample_ratio: f64,
    /// The service's name in its traces (`OTEL_SERVICE_NAME` overrides it).
    pub service_name: String,
    /// Spans waiting to be sent at most; past it new ones are dropped and counted
    /// (`sluice_trace_spans_dropped_total`), so a collector that is down costs no memory.
    pub max_queued_spans: NonZeroUsize,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
            otlp_endpoint: None,
            otlp_protocol: String::new(),
            trace_sample_ratio: 1.0,
            service_name: "sluice".into(),
            max_queued_spans: NonZeroUsize::new(2048).expect("non-zero"),
        }
    }
}
