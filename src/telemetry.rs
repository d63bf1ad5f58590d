//! Logs (tracing) and metrics (the `metrics` facade, exported in Prometheus text format).
//!
//! The recorder is process-global, so it is installed once and its handle shared: several
//! apps in one process (the tests) render the same registry.

mod asked_each_time;
pub mod caller;
pub mod settings;
mod throttle;
pub mod traces;

use std::io::IsTerminal;
use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::domain::AttemptState;

pub(crate) use throttle::{warn_throttled, Throttle};

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Seconds; HTTP and ledger latencies of a healthy sluice fall in the low buckets.
const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];
/// Seconds, for Redis calls as sluice sees them: a healthy call takes tens to hundreds of
/// microseconds, below the HTTP buckets' first.
const REDIS_CALL_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
];
/// Questions per Redis call (joins or status lookups of one sale sent together; at most 64).
const BATCH_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];
/// A ledger batch carries up to `ledger.batch_max` (256 by default).
const LEDGER_BATCH_BUCKETS: &[f64] = &[1.0, 4.0, 16.0, 64.0, 128.0, 256.0, 1024.0];

pub fn metrics_handle() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)
                .expect("static buckets are valid")
                // A full name wins over the suffix above.
                .set_buckets_for_metric(
                    Matcher::Full("sluice_queue_call_duration_seconds".into()),
                    REDIS_CALL_BUCKETS,
                )
                .expect("static buckets are valid")
                .set_buckets_for_metric(
                    Matcher::Full("sluice_queue_batch_size".into()),
                    BATCH_BUCKETS,
                )
                .expect("static buckets are valid")
                .set_buckets_for_metric(
                    Matcher::Full("sluice_queue_journal_batch_size".into()),
                    BATCH_BUCKETS,
                )
                .expect("static buckets are valid")
                .set_buckets_for_metric(
                    Matcher::Full("sluice_ledger_batch_size".into()),
                    LEDGER_BATCH_BUCKETS,
                )
                .expect("static buckets are valid")
                .build_recorder();
            let handle = recorder.handle();
            // Another recorder may already be installed (a test harness); then ours stays unused.
            let _ = metrics::set_global_recorder(recorder);
            describe();
            zero_counters();
            handle
        })
        .clone()
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!(
        "sluice_http_requests_total",
        "HTTP requests by operation and status"
    );
    describe_histogram!(
        "sluice_http_request_duration_seconds",
        Unit::Seconds,
        "HTTP request latency by operation"
    );
    describe_counter!(
        "sluice_transitions_total",
        "Attempt transitions by from, to and cause"
    );
    describe_counter!("sluice_joins_total", "Joins by outcome");
    describe_counter!(
        "sluice_status_answers_total",
        "Status answers by source: line (this replica's view of the queue) or store"
    );
    describe_counter!(
        "sluice_status_store_calls_total",
        "Queue-store calls made for status answers, by call: lookup, refresh (of a replica's view of the queue), seen (signs of life past one refresh's share), renumbered (a view reading what a lottery's draw made of each place)"
    );
    describe_counter!(
        "sluice_queue_signs_of_life_total",
        "Signs of life (a waiting user asked) sent to the queue store for the abandonment reaper, each user's at most once a window of a third of the abandonment time"
    );
    describe_counter!(
        "sluice_queue_tickets_refused_total",
        "Queue tickets presented that did not verify (answered from the store instead)"
    );
    describe_counter!("sluice_holds_total", "Hold requests by outcome");
    describe_counter!("sluice_admitted_total", "Attempts admitted, by sale");
    describe_counter!(
        "sluice_abandoned_total",
        "Waiting attempts that lost their place for showing no sign of life, by sale"
    );
    describe_gauge!(
        "sluice_queue_waiting",
        "Users waiting in the queue, by sale"
    );
    describe_gauge!(
        "sluice_active_users",
        "Admitted + holding + paying users, by sale"
    );
    describe_gauge!(
        "sluice_stock_remaining",
        "Units free to hold, by sale (queue store view)"
    );
    describe_gauge!(
        "sluice_admission_rate_per_minute",
        "Users actually admitted per minute (smoothed), by sale"
    );
    describe_counter!("sluice_reaper_runs_total", "Reaper runs");
    describe_counter!(
        "sluice_reaper_expired_total",
        "Attempts expired by the reapers, by cause"
    );
    describe_counter!(
        "sluice_queue_sync_errors_total",
        "Queue store updates that failed after a ledger commit"
    );
    describe_counter!("sluice_webhooks_total", "Payment webhooks by outcome");
    describe_counter!(
        "sluice_provider_calls_total",
        "Calls to the payment provider, by provider, call and outcome (ok, refused, unavailable)"
    );
    describe_histogram!(
        "sluice_provider_call_duration_seconds",
        Unit::Seconds,
        "Time of one call to the payment provider, by provider and call"
    );
    describe_counter!(
        "sluice_provider_webhooks_total",
        "Webhooks of a payment provider with an API of its own, by provider and outcome"
    );
    describe_counter!(
        "sluice_refunds_total",
        "Refunds asked of the payment provider, by provider, kind (operator, late) and outcome"
    );
    describe_counter!(
        "sluice_reconciler_lookups_total",
        "Payments pending too long looked up at the provider, by what it said"
    );
    describe_counter!(
        "sluice_outbox_dead_letters_total",
        "Events the sink refused events.max_tries times, set aside as dead letters"
    );
    describe_histogram!(
        "sluice_event_publish_duration_seconds",
        Unit::Seconds,
        "Time for the sink to take one batch of events"
    );
    describe_counter!(
        "sluice_payments_total",
        "Payments settled by the provider's webhook, by result (succeeded, failed)"
    );
    describe_counter!(
        "sluice_queue_drift_repaired_total",
        "Times a sale's holdings in the queue store (free units or seats, active set, holds, units per user) were found apart from the ledger's and rebuilt from it, by sale"
    );
    describe_counter!(
        "sluice_queue_settings_repaired_total",
        "Times the drift checker found the queue store holding another version of a sale's settings than the ledger (a change lost and not recorded as lost, a ledger restored from a backup, or a Redis restored from a snapshot taken before a close) and wrote the ledger's"
    );
    describe_counter!(
        "sluice_queue_drift_reads_total",
        "Times the drift checker read a sale's whole holdings from the queue store (only when the store's version stood still since its last check), by sale"
    );
    describe_gauge!(
        "sluice_ledger_breaker_open",
        "1 while the ledger's database is unreachable and calls to it fail fast, until a probe gets an answer"
    );
    describe_counter!(
        "sluice_ledger_breaker_opened_total",
        "Times the ledger's database was found unreachable"
    );
    describe_counter!(
        "sluice_trace_spans_dropped_total",
        "Spans of traces not sent: past telemetry.max_queued_spans waiting, or in a batch the collector did not take"
    );
    describe_counter!(
        "sluice_ledger_calls_total",
        "Calls to the ledger (a connection taken or a transaction begun), by the request that made them: join, status, or background (workers, refreshes a request only started)"
    );
    describe_gauge!(
        "sluice_queue_sync_pending",
        "Queue-store changes (stock back, sold, deadline moved) committed in the ledger and not yet applied to the queue store"
    );
    describe_gauge!(
        "sluice_queue_sales_behind",
        "Sales whose latest change (status, admission, details) the queue store has not taken yet"
    );
    describe_gauge!(
        "sluice_queue_sync_oldest_age_seconds",
        "Age of the oldest queue-store change not yet applied"
    );
    describe_counter!(
        "sluice_queue_sync_applied_total",
        "Queue-store changes the queue-sync worker applied because no request could"
    );
    describe_counter!(
        "sluice_queue_sale_changes_followed_total",
        "Changes to a sale's settings (status, admission, details) the queue store missed, written to it by the queue-sync worker"
    );
    describe_counter!(
        "sluice_queue_sync_replayed_total",
        "Queue-store changes the ledger saw applied that the store had lost (a failover or a restart), applied again"
    );
    describe_histogram!(
        "sluice_queue_call_duration_seconds",
        Unit::Seconds,
        "Calls to Redis by operation (label call), round trip included, failures and timeouts too"
    );
    describe_histogram!(
        "sluice_queue_batch_size",
        "Joins or status lookups (label call) of one sale sent to Redis in one script call"
    );
    describe_histogram!(
        "sluice_queue_journal_batch_size",
        "Calls of the embedded store whose writes went to its journal with one sync"
    );
    describe_histogram!(
        "sluice_ledger_batch_size",
        "Holds and checkouts (label call events) or an instant sale's claims (claims) of one sale written in one ledger transaction"
    );
    describe_counter!(
        "sluice_claims_total",
        "An instant sale's claims made by joins, by what the ledger made of them (claimed, claimed_before, sold_out, failed)"
    );
    describe_counter!(
        "sluice_phase_list_reads_total",
        "Whole reads of a list phase's members from the ledger, one per replica and version of the list (a join asks the replica's copy)"
    );
    describe_counter!(
        "sluice_queue_excess_units_taken_total",
        "Units a quantity sale's queue store had free that the ledger had taken (a failover lost the store's side of holds), taken off its count"
    );
    describe_histogram!(
        "sluice_ledger_commit_duration_seconds",
        Unit::Seconds,
        "Ledger write transactions, begin to commit, by operation"
    );
    describe_gauge!(
        "sluice_admission_target_rate_per_minute",
        "The admission rate in force (the controller's, or the manual setting), by sale"
    );
    describe_gauge!(
        "sluice_admission_max_active",
        "Cap on admitted + holding + paying users, by sale"
    );
    describe_gauge!(
        "sluice_admission_open",
        "1 while the sale admits (open, past opens_at); 0 once paused, closed or ended"
    );
    describe_gauge!(
        "sluice_admission_adaptive",
        "1 when the sale's rate is set by the controller, 0 when manual"
    );
    describe_gauge!(
        "sluice_admission_last_change",
        "1 for the reason of the controller's last move (increase, decrease, hold, stale, manual)"
    );
    describe_gauge!(
        "sluice_valve_signal_value",
        "Latest reading of each back-end pressure signal"
    );
    describe_gauge!(
        "sluice_valve_signal_target",
        "Target of each pressure signal"
    );
    describe_gauge!(
        "sluice_valve_signal_stale",
        "1 while a pressure signal cannot be read (the rate is held)"
    );
    describe_gauge!("sluice_outbox_pending", "Outbox rows not yet published");
    describe_gauge!(
        "sluice_outbox_oldest_age_seconds",
        Unit::Seconds,
        "Age of the oldest unpublished outbox row"
    );
    describe_counter!(
        "sluice_events_published_total",
        "Events handed to the event sink"
    );
    describe_counter!(
        "sluice_event_publish_errors_total",
        "Failed attempts to publish a batch of events"
    );
    describe_counter!(
        "sluice_gate_checks_total",
        "Gate checks of a proxy by outcome (not_guarded, bypass, session, renew, wait, store_down_open, store_down_closed)"
    );
    describe_counter!(
        "sluice_gate_bypasses_total",
        "Guarded requests that passed by a gate's rule, by rule"
    );
    describe_counter!(
        "sluice_gate_sessions_total",
        "Gate sessions started, renewed and ended early"
    );
    describe_gauge!(
        "sluice_gate_sessions_active",
        "Admitted visitors of a gate at once (its line's active set)"
    );
    describe_counter!(
        "sluice_gate_challenges_total",
        "Gate challenge answers checked with the provider, by outcome"
    );
    describe_counter!(
        "sluice_gate_visitors_total",
        "Visitors let into a gate's line"
    );
    describe_gauge!("sluice_gates", "Gates this replica knows");
    describe_gauge!(
        "sluice_gate_store_up",
        "Whether the gate's last probe of the queue store was answered"
    );
}

/// Counters that may stay at zero for a long time exist from the start, so `rate()` and the
/// alert rules see 0 rather than no series at all.
fn zero_counters() {
    for name in [
        "sluice_reaper_runs_total",
        "sluice_queue_sync_errors_total",
        "sluice_queue_sync_replayed_total",
        "sluice_queue_sale_changes_followed_total",
        "sluice_queue_settings_repaired_total",
        "sluice_events_published_total",
        "sluice_event_publish_errors_total",
        "sluice_outbox_dead_letters_total",
        "sluice_phase_list_reads_total",
        "sluice_trace_spans_dropped_total",
    ] {
        metrics::counter!(name).increment(0);
    }
}

/// `n` attempts went from `from` to `to` by `cause` (`sluice_transitions_total`).
pub fn count_transitions(from: &AttemptState, to: &AttemptState, cause: &str, n: u64) {
    metrics::counter!(
        "sluice_transitions_total",
        "from" => from.name(),
        "to" => to.name(),
        "cause" => cause.to_owned()
    )
    .increment(n);
}

/// What is logged when `RUST_LOG` is unset.
pub const DEFAULT_LOG_FILTER: &str = "info,tokio_cron_scheduler=warn";

/// Logs to stderr (stdout is for what a command prints); `RUST_LOG` filters (default `info`:
/// sluice's own events; each request is a `debug` line, see `api::measure`; the cron crate's
/// chatter about its own start-up only from `warn`). Colours only on a
/// terminal: a log file or collector gets plain text.
pub fn init_tracing(traces: Option<traces::TracesLayer>, json: bool) {
    use asked_each_time::AskedEachTime;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER));
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal() && !json);
    let logs = if json {
        logs.json()
            .with_current_span(true)
            .with_span_list(false)
            .boxed()
    } else {
        logs.with_target(false).boxed()
    }
    .with_filter(AskedEachTime(filter));
    // sluice's own spans, when traces are on.
    let traces = traces.map(|layer| {
        layer.with_filter(AskedEachTime(
            tracing_subscriber::filter::Targets::new().with_target("sluice", tracing::Level::INFO),
        ))
    });
    let _ = tracing_subscriber::registry()
        .with(traces)
        .with(logs)
        .try_init();
}
