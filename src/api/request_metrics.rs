//! Every request's count and latency (`sluice_http_requests_total` by operation, method and
//! status; `sluice_http_request_duration_seconds` by operation), through handles each worker
//! thread keeps. Finding a metric by its labels in the registry allocates the labels, hashes
//! the key and locks a shard of the registry, on every request; the label sets are few (an
//! operation answers a handful of statuses), so each thread looks each one up once. The
//! recorder keeps every metric it made (no idle timeout), so a kept handle stays the one
//! `/metrics` renders.

use std::cell::RefCell;
use std::collections::HashMap;

use metrics::{Counter, Histogram};
use poem::http::{Method, StatusCode};

/// The labels of one request: operation id, method, status.
type Labels = (&'static str, Method, StatusCode);

thread_local! {
    static HANDLES: RefCell<HashMap<Labels, (Counter, Histogram)>> = RefCell::default();
}

/// Counts one request of `operation` answered with `status`, and records how long it took.
pub fn record(operation: &'static str, method: &Method, status: StatusCode, seconds: f64) {
    HANDLES.with_borrow_mut(|handles| {
        let (count, latency) = handles
            .entry((operation, method.clone(), status))
            .or_insert_with(|| {
                (
                    metrics::counter!("sluice_http_requests_total",
                        "operation" => operation,
                        "method" => method.to_string(),
                        "status" => status.as_u16().to_string()),
                    metrics::histogram!("sluice_http_request_duration_seconds",
                        "operation" => operation),
                )
            });
        count.increment(1);
        latency.record(seconds);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of the rendered series that starts with `series`.
    fn value(rendered: &str, series: &str) -> Option<f64> {
        rendered
            .lines()
            .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
    }

    #[test]
    fn requests_recorded_on_several_threads_add_up_in_one_series() {
        let handle = crate::telemetry::metrics_handle();
        let record_two = || {
            record("countingTest", &Method::GET, StatusCode::OK, 0.001);
            record("countingTest", &Method::GET, StatusCode::OK, 0.002);
        };
        record_two();
        std::thread::spawn(record_two).join().unwrap();
        record("countingTest", &Method::GET, StatusCode::NOT_FOUND, 0.001);

        let rendered = handle.render();
        let ok =
            r#"sluice_http_requests_total{operation="countingTest",method="GET",status="200"}"#;
        let missing =
            r#"sluice_http_requests_total{operation="countingTest",method="GET",status="404"}"#;
        assert_eq!(value(&rendered, ok), Some(4.0), "{rendered}");
        assert_eq!(value(&rendered, missing), Some(1.0), "{rendered}");
        let latencies = r#"sluice_http_request_duration_seconds_count{operation="countingTest"}"#;
        assert_eq!(value(&rendered, latencies), Some(5.0), "{rendered}");
    }
}
