//! A request's time budget for the queue store: one `queue.timeout_ms` across all its store
//! calls, not one per call. A request that makes two (a hold, then giving units back) waits
//! on the store at most the timeout in all before its 503, where each call with its own
//! timeout let it wait twice as long. Time spent waiting behind a batched call in flight does
//! not count (see `redis_batches`): only the store's answer does. Outside a request (workers,
//! status streams) every call has the full timeout.

use std::cell::Cell;
use std::future::Future;
use std::time::Duration;

use tokio::task::futures::TaskLocalFuture;

tokio::task_local! {
    static LEFT: Cell<Duration>;
}

/// Runs `request` with `budget` for all its queue-store calls. The task-local future itself,
/// not an `async fn` awaiting it: that would hold `request` twice (the argument and the
/// scope it is moved into), and so would every request's future under the middleware.
pub fn within<F: Future>(budget: Duration, request: F) -> TaskLocalFuture<Cell<Duration>, F> {
    LEFT.scope(Cell::new(budget), request)
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

    #[test]
    fn the_budget_adds_next_to_nothing_to_the_request_s_future() {
        let request = async {
            let state = [7u8; 4096];
            tokio::task::yield_now().await;
            std::hint::black_box(&state);
        };
        let alone = std::mem::size_of_val(&request);
        let with_budget = within(Duration::from_secs(1), request);
        assert!(
            std::mem::size_of_val(&with_budget) <= alone + 64,
            "{alone} bytes alone, {} within the budget",
            std::mem::size_of_val(&with_budget)
        );
    }
}
