//! The built-in pressure signals: what each measures, its PromQL for the Prometheus source, its
//! default target, and how the embedded source computes the same figure from the process's own
//! metrics. Every query folds all replicas into one figure: the back end is shared.

/// How the embedded source computes a signal from two renders of `/metrics` (`before`, `now`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Local {
    /// The largest current value of a gauge, over all its series.
    Max(&'static str),
    /// Increase of `numerator` / increase of `denominator` (0 without traffic).
    Ratio {
        numerator: Selector,
        denominator: Selector,
    },
    /// Quantile `q` of a histogram's observations since the previous read.
    Quantile { histogram: &'static str, q: f64 },
}

/// A counter and the series of it to sum.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Selector {
    pub metric: &'static str,
    pub labels: &'static [(&'static str, LabelMatch)],
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LabelMatch {
    Is(&'static str),
    StartsWith(&'static str),
}

impl LabelMatch {
    pub fn matches(&self, value: Option<&str>) -> bool {
        match (self, value) {
            (LabelMatch::Is(want), Some(v)) => v == *want,
            (LabelMatch::StartsWith(prefix), Some(v)) => v.starts_with(prefix),
            (_, None) => false,
        }
    }
}

pub struct Builtin {
    pub name: &'static str,
    pub query: &'static str,
    pub target: f64,
    pub local: Local,
}

const ALL: &[(&str, LabelMatch)] = &[];

pub const BUILTINS: &[Builtin] = &[
    // Events committed but not yet in Kafka: the relay or the broker falls behind.
    Builtin {
        name: "outbox_pending_age",
        query: "max(sluice_outbox_oldest_age_seconds)",
        target: 10.0,
        local: Local::Max("sluice_outbox_oldest_age_seconds"),
    },
    // The database itself: slow commits come before pool timeouts and 503s.
    Builtin {
        name: "ledger_commit_p99",
        query: "histogram_quantile(0.99, sum by (le) (rate(sluice_ledger_commit_duration_seconds_bucket[1m])))",
        target: 0.25,
        local: Local::Quantile {
            histogram: "sluice_ledger_commit_duration_seconds",
            q: 0.99,
        },
    },
    // Admitted users who held and then let the hold lapse: checkout or payment is struggling.
    Builtin {
        name: "hold_expiry_ratio",
        query: "sum(rate(sluice_transitions_total{from=\"HOLD\",to=\"EXPIRED\"}[1m])) / sum(rate(sluice_transitions_total{to=\"HOLD\"}[1m]))",
        target: 0.5,
        local: Local::Ratio {
            numerator: Selector {
                metric: "sluice_transitions_total",
                labels: &[("from", LabelMatch::Is("HOLD")), ("to", LabelMatch::Is("EXPIRED"))],
            },
            denominator: Selector {
                metric: "sluice_transitions_total",
                labels: &[("to", LabelMatch::Is("HOLD"))],
            },
        },
    },
    // The payment provider declines or fails more than usual.
    Builtin {
        name: "payment_failure_ratio",
        query: "sum(rate(sluice_payments_total{result=\"failed\"}[1m])) / sum(rate(sluice_payments_total[1m]))",
        target: 0.3,
        local: Local::Ratio {
            numerator: Selector {
                metric: "sluice_payments_total",
                labels: &[("result", LabelMatch::Is("failed"))],
            },
            denominator: Selector {
                metric: "sluice_payments_total",
                labels: ALL,
            },
        },
    },
    // Events waiting for the relay: Kafka lag as sluice sees it.
    Builtin {
        name: "relay_lag",
        query: "max(sluice_outbox_pending)",
        target: 20_000.0,
        local: Local::Max("sluice_outbox_pending"),
    },
    // sluice itself failing requests (a store down, pool exhausted).
    Builtin {
        name: "http_5xx_ratio",
        query: "sum(rate(sluice_http_requests_total{status=~\"5..\"}[1m])) / sum(rate(sluice_http_requests_total[1m]))",
        target: 0.05,
        local: Local::Ratio {
            numerator: Selector {
                metric: "sluice_http_requests_total",
                labels: &[("status", LabelMatch::StartsWith("5"))],
            },
            denominator: Selector {
                metric: "sluice_http_requests_total",
                labels: ALL,
            },
        },
    },
];

pub fn builtin(name: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|b| b.name == name)
}
