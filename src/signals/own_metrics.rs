//! Signals from the process's own metrics (embedded default): each read renders `/metrics`,
//! parses it, and computes every built-in signal as its PromQL would over the time since the
//! previous read — gauges as they are, ratios and quantiles from the counters' and buckets'
//! increases. One process is the whole deployment here, so its metrics are the back end's.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use metrics_exporter_prometheus::PrometheusHandle;
use prometheus_parse::{Scrape, Value};

use super::{Signal, SignalSource};
use crate::domain::signal_catalogue::{builtin, Local, Selector};
use crate::domain::valve::Reading;

pub struct OwnMetrics {
    handle: PrometheusHandle,
    signals: Vec<Signal>,
    /// Each signal's counters at the previous read: the start of the next window.
    previous: Mutex<HashMap<String, Cumulative>>,
}

/// Running totals a windowed signal needs.
#[derive(Debug, Clone, PartialEq)]
pub enum Cumulative {
    Ratio {
        numerator: f64,
        denominator: f64,
    },
    /// `(le, count)` summed over the histogram's series, `le` ascending, `+Inf` last.
    Buckets(Vec<(f64, f64)>),
}

impl OwnMetrics {
    pub fn new(handle: PrometheusHandle, signals: Vec<Signal>) -> Self {
        OwnMetrics {
            handle,
            signals,
            previous: Mutex::new(HashMap::new()),
        }
    }
}

#[async_trait]
impl SignalSource for OwnMetrics {
    async fn read(&self) -> Vec<Reading> {
        let text = self.handle.render();
        let scrape = parse(&text);
        let mut previous = self.previous.lock().expect("not poisoned");
        self.signals
            .iter()
            .map(|s| {
                // Configuration only lets built-in signals through in embedded mode.
                let value = match (&scrape, builtin(&s.name)) {
                    (Some(scrape), Some(b)) => {
                        let (value, now) = evaluate(scrape, &b.local, previous.get(&s.name));
                        if let Some(now) = now {
                            previous.insert(s.name.clone(), now);
                        }
                        Some(value)
                    }
                    _ => None,
                };
                Reading {
                    name: s.name.clone(),
                    value,
                    target: s.target,
                }
            })
            .collect()
    }
}

pub fn parse(text: &str) -> Option<Scrape> {
    Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).ok()
}

/// The signal's value over the window since `before`, and the totals that start the next one.
pub fn evaluate(
    scrape: &Scrape,
    local: &Local,
    before: Option<&Cumulative>,
) -> (f64, Option<Cumulative>) {
    match local {
        Local::Max(metric) => {
            let max = scrape
                .samples
                .iter()
                .filter(|s| s.metric == *metric)
                .filter_map(|s| scalar(&s.value))
                .fold(0.0_f64, f64::max);
            (max, None)
        }
        Local::Ratio {
            numerator,
            denominator,
        } => {
            let (n, d) = (sum(scrape, numerator), sum(scrape, denominator));
            let (n0, d0) = match before {
                Some(Cumulative::Ratio {
                    numerator,
                    denominator,
                }) => (*numerator, *denominator),
                _ => (0.0, 0.0),
            };
            let (dn, dd) = ((n - n0).max(0.0), (d - d0).max(0.0));
            let ratio = if dd > 0.0 { dn / dd } else { 0.0 };
            let now = Cumulative::Ratio {
                numerator: n,
                denominator: d,
            };
            (ratio, Some(now))
        }
        Local::Quantile { histogram, q } => {
            let now = buckets(scrape, histogram);
            let window: Vec<(f64, f64)> = match before {
                Some(Cumulative::Buckets(old)) => now
                    .iter()
                    .map(|(le, c)| {
                        let c0 = old.iter().find(|(l, _)| l == le).map_or(0.0, |(_, c0)| *c0);
                        (*le, (c - c0).max(0.0))
                    })
                    .collect(),
                _ => now.clone(),
            };
            (quantile(*q, &window), Some(Cumulative::Buckets(now)))
        }
    }
}

fn scalar(value: &Value) -> Option<f64> {
    match value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => Some(*v),
        Value::Histogram(_) | Value::Summary(_) => None,
    }
}

fn sum(scrape: &Scrape, selector: &Selector) -> f64 {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == selector.metric)
        .filter(|s| {
            selector
                .labels
                .iter()
                .all(|(name, m)| m.matches(s.labels.get(name)))
        })
        .filter_map(|s| scalar(&s.value))
        .sum()
}

fn buckets(scrape: &Scrape, histogram: &str) -> Vec<(f64, f64)> {
    let mut by_le: Vec<(f64, f64)> = Vec::new();
    for sample in scrape.samples.iter().filter(|s| s.metric == histogram) {
        let Value::Histogram(counts) = &sample.value else {
            continue;
        };
        for c in counts {
            match by_le.iter_mut().find(|(le, _)| *le == c.less_than) {
                Some((_, n)) => *n += c.count,
                None => by_le.push((c.less_than, c.count)),
            }
        }
    }
    by_le.sort_by(|a, b| a.0.total_cmp(&b.0));
    by_le
}

/// `histogram_quantile` over cumulative `(le, count)` buckets: linear within the bucket the
/// rank falls in; the largest finite bound if it falls in `+Inf`; 0 without observations.
pub fn quantile(q: f64, buckets: &[(f64, f64)]) -> f64 {
    let Some(&(_, total)) = buckets.last() else {
        return 0.0;
    };
    if total <= 0.0 {
        return 0.0;
    }
    let rank = q * total;
    let (mut lower, mut below) = (0.0, 0.0);
    for &(le, count) in buckets {
        if count >= rank {
            if le.is_infinite() {
                return lower;
            }
            if count == below {
                return le;
            }
            return lower + (le - lower) * (rank - below) / (count - below);
        }
        (lower, below) = (le, count);
    }
    lower
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::signal_catalogue::builtin;

    const BEFORE: &str = r#"# TYPE sluice_http_requests_total counter
sluice_http_requests_total{operation="join",status="200"} 90
sluice_http_requests_total{operation="hold",status="503"} 10
# TYPE sluice_outbox_oldest_age_seconds gauge
sluice_outbox_oldest_age_seconds 3.5
# TYPE sluice_ledger_commit_duration_seconds histogram
sluice_ledger_commit_duration_seconds_bucket{op="apply",le="0.01"} 100
sluice_ledger_commit_duration_seconds_bucket{op="apply",le="0.1"} 100
sluice_ledger_commit_duration_seconds_bucket{op="apply",le="1"} 100
sluice_ledger_commit_duration_seconds_bucket{op="apply",le="+Inf"} 100
sluice_ledger_commit_duration_seconds_sum{op="apply"} 0.5
sluice_ledger_commit_duration_seconds_count{op="apply"} 100
"#;

    /// 100 more requests, 50 of them 503; 100 more commits, all between 0.1 and 1 s.
    const AFTER: &str = r#"# TYPE sluice_http_requests_total counter
sluice_http_requests_total{operation="join",status="200"} 140
sluice_http_requests_total{operation="hold",status="503"} 60
# TYPE sluice_outbox_oldest_age_seconds gauge
sluice_outbox_oldest_age_seconds 12
# TYPE sluice_ledger_commit_duration_seconds histogram
sluice_ledger_commit_duration_seconds_bucket{op="apply",le="0.01"} 100
sluice_ledger_commit_duration_seconds_bucket{op="apply",le="0.1"} 100
sluice_ledger_commit_duration_seconds_bucket{op="apply",le="1"} 200
sluice_ledger_commit_duration_seconds_bucket{op="apply",le="+Inf"} 200
sluice_ledger_commit_duration_seconds_sum{op="apply"} 50.5
sluice_ledger_commit_duration_seconds_count{op="apply"} 200
"#;

    fn over_window(signal: &str) -> (f64, f64) {
        let local = builtin(signal).expect("built in").local;
        let (first, totals) = evaluate(&parse(BEFORE).unwrap(), &local, None);
        let (second, _) = evaluate(&parse(AFTER).unwrap(), &local, totals.as_ref());
        (first, second)
    }

    #[test]
    fn ratios_count_only_the_window_since_the_previous_read() {
        let (first, second) = over_window("http_5xx_ratio");
        assert_eq!(first, 0.1, "10 of 100 since start");
        assert_eq!(second, 0.5, "50 of the 100 since the previous read");
    }

    #[test]
    fn quantiles_come_from_the_window_buckets() {
        let (first, second) = over_window("ledger_commit_p99");
        assert!(first <= 0.01, "all fast at first: {first}");
        assert!(
            (0.9..=1.0).contains(&second),
            "p99 of the slow window: {second}"
        );
    }

    #[test]
    fn gauges_are_read_as_they_are_and_missing_metrics_read_zero() {
        assert_eq!(over_window("outbox_pending_age"), (3.5, 12.0));
        assert_eq!(over_window("payment_failure_ratio"), (0.0, 0.0));
    }

    #[test]
    fn quantile_edges() {
        assert_eq!(quantile(0.99, &[]), 0.0);
        assert_eq!(quantile(0.99, &[(0.1, 0.0), (f64::INFINITY, 0.0)]), 0.0);
        assert_eq!(quantile(0.5, &[(0.1, 0.0), (f64::INFINITY, 4.0)]), 0.1);
        assert_eq!(
            quantile(0.5, &[(1.0, 2.0), (2.0, 4.0), (f64::INFINITY, 4.0)]),
            1.0
        );
    }
}
