//! Which request a call to a back end is made for: `join` and `status` are the paths that
//! must not wait on the ledger (a crowd of waiting users would be a crowd of queries), and
//! `sluice_ledger_calls_total{caller}` shows that they do not. A request names itself with
//! [`on`]; a batch run by a task of its own carries the caller of the request that started it
//! (`gather.rs`); anything else (workers, a refresh a request only started) is `background`.

use std::future::Future;

use tokio::task::futures::TaskLocalFuture;

tokio::task_local! {
    static CALLER: &'static str;
}

/// Runs `work` as `caller`'s.
pub fn on<F: Future>(caller: &'static str, work: F) -> TaskLocalFuture<&'static str, F> {
    CALLER.scope(caller, work)
}

/// The caller of the task now running, if a request named one.
pub fn current() -> Option<&'static str> {
    CALLER.try_with(|caller| *caller).ok()
}

/// What work not made for a request counts as.
const BACKGROUND: &str = "background";

/// `work`, to run on a task of its own, as the current task's caller's.
pub fn carried<F: Future>(work: F) -> TaskLocalFuture<&'static str, F> {
    CALLER.scope(current().unwrap_or(BACKGROUND), work)
}

/// Counts one call to the ledger (a connection taken or a transaction begun) for its caller.
pub fn count_ledger_call() {
    metrics::counter!("sluice_ledger_calls_total", "caller" => current().unwrap_or(BACKGROUND))
        .increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_call_is_its_requests_and_a_spawned_task_is_nobodys() {
        assert_eq!(current(), None);
        on("join", async {
            assert_eq!(current(), Some("join"));
            let spawned = tokio::spawn(async { current() }).await.unwrap();
            assert_eq!(spawned, None, "a task of its own is not the request's");
        })
        .await;
    }
}
