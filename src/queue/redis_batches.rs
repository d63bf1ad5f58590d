//! Calls of one sale that arrive together go to Redis together. Every status answer, every
//! poll of a status stream and every join asks Redis one thing about one attempt or user; one
//! script call each made each pay for a round of the Redis client (command encoding, the
//! connection task, a reply parsed) and for a script call in Redis, and read the sale's figures
//! again. Questions that arrive while earlier ones of the same sale are out gather
//! ([`crate::gather`]) and go together, up to [`MAX_QUESTIONS`] in one call of a script that
//! answers many (`lua/position.lua`, `lua/join.lua`), one answer per question, in order.
//!
//! What is the queue store's own here is the waiting: a question's timeout runs from the
//! moment its own call begins, against the request's budget (`budget.rs`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::{QueueError, QueueResult};
use crate::domain::SaleId;
use crate::gather::{self, CallError, Limits};

/// Calls of one sale out at once: two keep the store busy with one sale's batch while the next
/// one gathers (one would leave it idle between a reply and the next call, and the in-process
/// store idle while a call waits for its journal's sync).
pub const MAX_CALLS: usize = 2;

/// Questions in one call: bounds how long one script holds Redis (10-20 µs a question).
pub const MAX_QUESTIONS: usize = 64;

/// The questions of one kind the queue store gathers; `Q` asks, `R` answers.
pub type Gathering<Q, R> = gather::Gathering<gather::Asked<Q, R, QueueError>>;

/// A gathering of the queue store's questions of kind `call` (`join`, `status`), with at most
/// `calls` calls of a sale out at once.
pub fn gathering<Q, R>(call: &'static str, calls: usize) -> Arc<Gathering<Q, R>> {
    Arc::new(gather::Gathering::new(
        "sluice_queue_batch_size",
        call,
        Limits {
            calls,
            batch: MAX_QUESTIONS,
        },
    ))
}

impl CallError for QueueError {
    fn miscounted(asked: usize, got: usize) -> Self {
        QueueError::Protocol(format!("{got} answers to {asked} questions"))
    }

    fn dropped() -> Self {
        QueueError::Unavailable("call dropped".into())
    }
}

/// How long a question may wait for its call to begin, in units of the timeout: behind at
/// most [`MAX_CALLS`] calls in flight, each bounded by the timeout itself, and a backlog of
/// full batches.
const WAIT_TO_BEGIN: u32 = 4;

/// Asks `question` about `sale` together with the others pending for it. `call` answers a
/// batch (one answer per question, in order). Waits at most `timeout` for the answer once its
/// call has begun: the wait behind a call in flight is not the store's slowness (that call is
/// bounded by the timeout itself), and is bounded apart (`WAIT_TO_BEGIN` timeouts).
pub async fn ask<Q, R, C, F>(
    gathering: &Arc<Gathering<Q, R>>,
    sale: SaleId,
    question: Q,
    timeout: Duration,
    call: C,
) -> QueueResult<R>
where
    Q: Send + 'static,
    R: Send + 'static,
    C: Fn(Vec<Q>) -> F + Send + 'static,
    F: Future<Output = QueueResult<Vec<R>>> + Send + 'static,
{
    let call = move |questions: Vec<Q>| {
        let answered = call(questions);
        async move { Ok(answered.await?.into_iter().map(Ok).collect()) }
    };
    let gather::Waiting {
        mut answer,
        begun: started,
    } = gathering.ask(sale, question, call);
    // Until its call begins (or answers, which tells it too).
    let waiting = tokio::time::timeout(timeout * WAIT_TO_BEGIN, async {
        tokio::select! {
            biased;
            answered = &mut answer => Some(answered),
            _ = started => None,
        }
    });
    let answered = match waiting.await {
        Ok(Some(answered)) => answered,
        Ok(None) => {
            // The call has begun: the store's answer counts against the request's budget.
            let begun = std::time::Instant::now();
            let answered = tokio::time::timeout(super::budget::left(timeout), answer).await;
            super::budget::spend(begun.elapsed());
            match answered {
                Ok(answered) => answered,
                Err(_) => return Err(QueueError::Unavailable("timed out".into())),
            }
        }
        Err(_) => return Err(QueueError::Unavailable("timed out".into())),
    };
    answered.unwrap_or_else(|_| Err(QueueError::dropped()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn sale() -> SaleId {
        SaleId(Uuid::new_v4())
    }

    /// Ten questions asked at once: `call` sees them as one batch.
    async fn ask_ten<F>(
        answer: impl Fn(Vec<u32>) -> F + Send + Sync + 'static,
    ) -> Vec<QueueResult<u32>>
    where
        F: Future<Output = QueueResult<Vec<u32>>> + Send + 'static,
    {
        let gathering = gathering("test", MAX_CALLS);
        let answer = Arc::new(answer);
        let (sale, timeout) = (sale(), Duration::from_secs(1));
        let asks = (0..10).map(|n| {
            let answer = Arc::clone(&answer);
            let call = move |batch: Vec<u32>| answer(batch);
            let gathering = Arc::clone(&gathering);
            async move { ask(&gathering, sale, n, timeout, call).await }
        });
        futures_util::future::join_all(asks).await
    }

    #[tokio::test]
    async fn a_failed_call_fails_every_question_in_it() {
        let answers = ask_ten(|_| async { Err(QueueError::Unavailable("down".into())) }).await;
        for answer in answers {
            assert!(matches!(answer, Err(QueueError::Unavailable(m)) if m == "down"));
        }
    }

    #[tokio::test]
    async fn answers_that_do_not_match_the_questions_are_a_protocol_error() {
        let answers = ask_ten(|batch| async move { Ok(batch[1..].to_vec()) }).await;
        for answer in answers {
            assert!(matches!(answer, Err(QueueError::Protocol(_))), "{answer:?}");
        }
    }

    /// A question that waits behind calls in flight has its own call's time: the wait is not
    /// counted against its timeout (each call here takes 0.8 of the timeout; the third
    /// question's call begins only once the first call is over).
    #[tokio::test(start_paused = true)]
    async fn the_wait_behind_calls_in_flight_is_not_counted_against_the_timeout() {
        let gathering = gathering("test", MAX_CALLS);
        let (sale, timeout) = (sale(), Duration::from_millis(100));
        let call = |batch: Vec<u32>| async move {
            tokio::time::sleep(Duration::from_millis(80)).await;
            Ok(batch)
        };
        let asking = |n: u32| {
            let gathering = Arc::clone(&gathering);
            async move { ask(&gathering, sale, n, timeout, call).await }
        };
        // Two calls in flight, one question each: the most there are for a sale.
        let first = tokio::spawn(asking(1));
        tokio::time::sleep(Duration::from_millis(1)).await;
        let second = tokio::spawn(asking(2));
        tokio::time::sleep(Duration::from_millis(1)).await;
        let started = tokio::time::Instant::now();
        let third = tokio::spawn(asking(3)).await.unwrap();
        assert_eq!(third.unwrap(), 3, "answered, not timed out");
        assert!(
            started.elapsed() > timeout,
            "it waited behind a call in flight"
        );
        assert_eq!(first.await.unwrap().unwrap(), 1);
        assert_eq!(second.await.unwrap().unwrap(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_that_never_answers_times_out() {
        let answers = ask_ten(|_| std::future::pending()).await;
        for answer in answers {
            assert!(matches!(answer, Err(QueueError::Unavailable(m)) if m == "timed out"));
        }
    }
}
