//! A request's time budget for the queue store: one `queue.timeout_ms` across all its store
//! calls, not one per call. A request that makes two (a hold, then giving units back) waits
//! on the store at most the timeout in all before its 503, where each call with its own
//! timeout let it wait twice as long. Time spent waiting behind a batched call in flight does
//! not count (see `redis_batches`): only the store's answer does. Outside a request (workers,
//! status streams) every call has the full timeout.

use std::cell::Cell;
use std::future::Future;
use std::time::Duration;

tokio::task_local! {
    static LEFT: Cell<Duration>;
}

/// Runs `request` with `budget` for all its queue-store calls.
pub async fn within<F: Future>(budget: Duration, request: F) -> F::Output {
    LEFT.scope(Cell::new(budget), request).await
}

/// What the next call may take: what is left of the request's budget, at most `timeout`.
pub fn left(timeout: Duration) -> Duration {
    LEFT.try_with(|left| left.get().min(timeout))
        .unwrap_or(timeout)
}

/// Counts `spent` against the request's budget.
pub fn spend(spent: Duration) {
    let _ = LEFT.try_with(|left| left.set(left.get().saturating_sub(spent)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn calls_share_one_budget_within_a_request_and_have_their_own_outside() {
        let timeout = Duration::from_millis(150);
        assert_eq!(left(timeout), timeout, "no request: the full timeout");
        within(timeout, async {
            spend(Duration::from_millis(100));
            assert_eq!(left(timeout), Duration::from_millis(50));
            spend(Duration::from_millis(80));
            assert_eq!(left(timeout), Duration::ZERO, "spent");
        })
        .await;
        assert_eq!(left(timeout), timeout);
    }
}
