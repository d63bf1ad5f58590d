//! Calls of one sale that arrive together go to Redis together. Every status answer, every
//! poll of a status stream and every join asks Redis one thing about one attempt or user; one
//! script call each made each pay for a round of the Redis client (command encoding, the
//! connection task, a reply parsed) and for a script call in Redis, and read the sale's figures
//! again. Questions that arrive while earlier ones of the same sale are out wait in a
//! [`Gathering`] and go together, up to [`MAX_QUESTIONS`] in one call of a script that answers
//! many (`lua/position.lua`, `lua/join.lua`), one answer per question, in order.
//!
//! Nothing waits for company: with fewer than [`MAX_CALLS`] calls of a sale out, a question
//! goes at once (a batch of one). Only while Redis is busy with that sale do questions gather,
//! so a batch is as large as the load makes it.
//!
//! The data structure: per sale with questions pending or out, the pending ones in arrival
//! order and the number of calls out. A *drainer* (a task) takes the pending questions as one
//! batch, answers them, and takes the next batch until none is left; at most [`MAX_CALLS`]
//! drainers per sale. The map and both fields change under one lock, so a question that
//! arrives as the last drainer stops starts a new one.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;

use super::{QueueError, QueueResult};
use crate::domain::SaleId;

/// Calls of one sale out at once: two keep Redis busy with one sale's batch while the next one
/// gathers (one would leave Redis idle between a reply and the next call).
pub const MAX_CALLS: usize = 2;

/// Questions in one call: bounds how long one script holds Redis (10-20 µs a question).
pub const MAX_QUESTIONS: usize = 64;

/// The pending questions of every sale; `A` is one question with the way to answer it
/// ([`Asked`] in use).
pub struct Gathering<A> {
    /// What is asked (`join`, `status`): the label of the batch-size histogram.
    call: &'static str,
    sales: Mutex<HashMap<SaleId, Pending<A>>>,
}

/// One sale's side of a [`Gathering`].
struct Pending<A> {
    /// Questions not yet in a call, oldest first.
    asks: Vec<A>,
    /// Drainers of this sale (each with at most one call out).
    drainers: usize,
}

impl<A> Gathering<A> {
    /// A gathering of one kind of question; `call` names it in the batch-size metric.
    pub fn new(call: &'static str) -> Self {
        Gathering {
            call,
            sales: Mutex::new(HashMap::new()),
        }
    }

    /// Adds a question. `Some` when the caller must run a drainer for the sale (fewer than
    /// [`MAX_CALLS`] were running); otherwise a running drainer takes the question.
    fn add(self: &Arc<Self>, sale: SaleId, ask: A) -> Option<Drainer<A>> {
        let mut sales = self.sales.lock().expect("gathering lock");
        let pending = sales.entry(sale).or_insert_with(|| Pending {
            asks: Vec::new(),
            drainers: 0,
        });
        pending.asks.push(ask);
        if pending.drainers >= MAX_CALLS {
            return None;
        }
        pending.drainers += 1;
        Some(Drainer {
            gathering: Arc::clone(self),
            sale,
        })
    }

    /// Questions pending for `sale`.
    #[cfg(test)]
    fn pending(&self, sale: SaleId) -> usize {
        let sales = self.sales.lock().expect("gathering lock");
        sales.get(&sale).map_or(0, |p| p.asks.len())
    }
}

/// The right to take a sale's pending questions as batches. Dropping it (at the end, or if the
/// task running it fails) counts it out, so the next question starts another.
struct Drainer<A> {
    gathering: Arc<Gathering<A>>,
    sale: SaleId,
}

impl<A> Drainer<A> {
    /// The next batch, oldest first, at most [`MAX_QUESTIONS`]; `None` when none is pending (the
    /// drainer is then done).
    fn next_batch(&mut self) -> Option<Vec<A>> {
        let mut sales = self.gathering.sales.lock().expect("gathering lock");
        let pending = sales.get_mut(&self.sale)?;
        if pending.asks.is_empty() {
            return None;
        }
        let take = pending.asks.len().min(MAX_QUESTIONS);
        Some(pending.asks.drain(..take).collect())
    }
}

impl<A> Drop for Drainer<A> {
    fn drop(&mut self) {
        let mut sales = match self.gathering.sales.lock() {
            Ok(sales) => sales,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(pending) = sales.get_mut(&self.sale) {
            pending.drainers -= 1;
            if pending.drainers == 0 && pending.asks.is_empty() {
                sales.remove(&self.sale);
            }
        }
    }
}

/// A question and where its answer goes (the asker may have given up and dropped the other
/// end).
pub struct Asked<Q, R> {
    question: Q,
    reply: oneshot::Sender<QueueResult<R>>,
    /// Told when the question's own call begins: its timeout runs from then.
    begun: oneshot::Sender<()>,
}

/// How long a question may wait for its call to begin, in units of the timeout: behind at
/// most [`MAX_CALLS`] calls in flight, each bounded by the timeout itself, and a backlog of
/// full batches.
const WAIT_TO_BEGIN: u32 = 4;

impl<Q: Send + 'static, R: Send + 'static> Gathering<Asked<Q, R>> {
    /// Asks `question` about `sale` together with the others pending for it. `call` answers a
    /// batch (one answer per question, in order); it runs in the drainer this question starts,
    /// if it starts one. Waits at most `timeout` for the answer once its call has begun: the
    /// wait behind a call in flight is not the store's slowness (that call is bounded by the
    /// timeout itself), and is bounded apart (`WAIT_TO_BEGIN` timeouts).
    pub async fn ask<C, F>(
        self: &Arc<Self>,
        sale: SaleId,
        question: Q,
        timeout: Duration,
        call: C,
    ) -> QueueResult<R>
    where
        C: Fn(Vec<Q>) -> F + Send + 'static,
        F: Future<Output = QueueResult<Vec<R>>> + Send + 'static,
    {
        let (reply, mut answer) = oneshot::channel();
        let (begun, started) = oneshot::channel();
        let asked = Asked {
            question,
            reply,
            begun,
        };
        if let Some(drainer) = self.add(sale, asked) {
            tokio::spawn(drainer.drain(call));
        }
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
        answered.unwrap_or_else(|_| Err(QueueError::Unavailable("call dropped".into())))
    }
}

impl<Q, R> Drainer<Asked<Q, R>> {
    /// Answers the sale's pending questions, a batch (one `call`) at a time, until none is left.
    async fn drain<C, F>(mut self, call: C)
    where
        C: Fn(Vec<Q>) -> F,
        F: Future<Output = QueueResult<Vec<R>>>,
    {
        while let Some(batch) = self.next_batch() {
            // How much the batching saves: SREs see the questions per call (1 when idle).
            super::record_batch(self.gathering.call, batch.len());
            let (questions, replies): (Vec<Q>, Vec<_>) = batch
                .into_iter()
                .map(|a| {
                    let _ = a.begun.send(());
                    (a.question, a.reply)
                })
                .unzip();
            let asked = questions.len();
            let answers = match call(questions).await {
                Ok(answers) if answers.len() != asked => Err(QueueError::Protocol(format!(
                    "{} answers to {asked} questions",
                    answers.len()
                ))),
                answers => answers,
            };
            match answers {
                Ok(answers) => {
                    for (reply, answer) in replies.into_iter().zip(answers) {
                        let _ = reply.send(Ok(answer));
                    }
                }
                Err(e) => {
                    for reply in replies {
                        let _ = reply.send(Err(e.clone()));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn sale() -> SaleId {
        SaleId(Uuid::new_v4())
    }

    #[test]
    fn a_lone_question_starts_a_drainer_that_takes_it_alone() {
        let gathering = Arc::new(Gathering::new("test"));
        let sale = sale();
        let mut drainer = gathering
            .add(sale, 1)
            .expect("the first question starts a drainer");
        assert_eq!(drainer.next_batch(), Some(vec![1]));
        assert_eq!(drainer.next_batch(), None);
        drop(drainer);
        assert!(
            gathering.sales.lock().unwrap().is_empty(),
            "a done sale is forgotten"
        );
    }

    #[test]
    fn questions_arriving_while_calls_are_out_go_together_in_order() {
        let gathering = Arc::new(Gathering::new("test"));
        let sale = sale();
        let mut first = gathering.add(sale, 0).unwrap();
        let mut second = gathering.add(sale, 1).unwrap();
        assert_eq!(first.next_batch(), Some(vec![0, 1]));
        assert_eq!(second.next_batch(), None, "the first took both");
        drop(second);
        // The first drainer's call is out; two slots were taken, one is free again.
        let mut third = gathering.add(sale, 2).expect("one drainer of two left");
        for n in 3..10 {
            assert!(gathering.add(sale, n).is_none(), "{MAX_CALLS} drainers run");
        }
        assert_eq!(gathering.pending(sale), 8);
        assert_eq!(third.next_batch(), Some((2..10).collect()));
        assert_eq!(first.next_batch(), None);
    }

    #[test]
    fn a_batch_holds_at_most_max_questions() {
        let gathering = Arc::new(Gathering::new("test"));
        let sale = sale();
        let mut drainer = gathering.add(sale, 0).unwrap();
        let _other = gathering.add(sale, 1).unwrap();
        for n in 2..(MAX_QUESTIONS + 10) {
            assert!(gathering.add(sale, n).is_none());
        }
        assert_eq!(drainer.next_batch().unwrap().len(), MAX_QUESTIONS);
        assert_eq!(
            drainer.next_batch(),
            Some((MAX_QUESTIONS..MAX_QUESTIONS + 10).collect())
        );
    }

    #[test]
    fn sales_gather_apart() {
        let gathering = Arc::new(Gathering::new("test"));
        let (a, b) = (sale(), sale());
        let mut on_a = gathering.add(a, "a").unwrap();
        let mut on_b = gathering
            .add(b, "b")
            .expect("another sale has drainers of its own");
        assert_eq!(on_a.next_batch(), Some(vec!["a"]));
        assert_eq!(on_b.next_batch(), Some(vec!["b"]));
    }

    #[test]
    fn a_dropped_drainer_lets_the_next_question_start_one() {
        let gathering = Arc::new(Gathering::new("test"));
        let sale = sale();
        let first = gathering.add(sale, 0).unwrap();
        let second = gathering.add(sale, 1).unwrap();
        assert!(gathering.add(sale, 2).is_none());
        // Both fail without taking a batch (their task died): the questions stay pending.
        drop(first);
        drop(second);
        let mut next = gathering.add(sale, 3).expect("no drainer runs");
        assert_eq!(next.next_batch(), Some(vec![0, 1, 2, 3]));
    }

    /// Ten questions asked at once: `call` sees them as one batch; what it saw, by size.
    async fn ask_ten<F>(
        answer: impl Fn(Vec<u32>) -> F + Send + Sync + 'static,
    ) -> (Vec<QueueResult<u32>>, Vec<usize>)
    where
        F: Future<Output = QueueResult<Vec<u32>>> + Send + 'static,
    {
        let gathering = Arc::new(Gathering::new("test"));
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let answer = Arc::new(answer);
        let (sale, timeout) = (sale(), Duration::from_secs(1));
        let asks = (0..10).map(|n| {
            let (sizes, answer) = (Arc::clone(&sizes), Arc::clone(&answer));
            let call = move |batch: Vec<u32>| {
                sizes.lock().unwrap().push(batch.len());
                answer(batch)
            };
            let gathering = Arc::clone(&gathering);
            async move { gathering.ask(sale, n, timeout, call).await }
        });
        let answers = futures_util::future::join_all(asks).await;
        let sizes = sizes.lock().unwrap().clone();
        (answers, sizes)
    }

    #[tokio::test]
    async fn questions_asked_at_once_go_in_one_call_and_each_gets_its_own_answer() {
        let (answers, sizes) =
            ask_ten(|batch| async move { Ok(batch.iter().map(|n| n * 10).collect()) }).await;
        let answers: Vec<u32> = answers.into_iter().map(Result::unwrap).collect();
        assert_eq!(answers, (0..10).map(|n| n * 10).collect::<Vec<_>>());
        assert_eq!(sizes, [10]);
    }

    #[tokio::test]
    async fn a_failed_call_fails_every_question_in_it() {
        let (answers, _) = ask_ten(|_| async { Err(QueueError::Unavailable("down".into())) }).await;
        for answer in answers {
            assert!(matches!(answer, Err(QueueError::Unavailable(m)) if m == "down"));
        }
    }

    #[tokio::test]
    async fn answers_that_do_not_match_the_questions_are_a_protocol_error() {
        let (answers, _) = ask_ten(|batch| async move { Ok(batch[1..].to_vec()) }).await;
        for answer in answers {
            assert!(matches!(answer, Err(QueueError::Protocol(_))), "{answer:?}");
        }
    }

    /// A question that waits behind calls in flight has its own call's time: the wait is not
    /// counted against its timeout (each call here takes 0.8 of the timeout; the third
    /// question's call begins only once the first call is over).
    #[tokio::test(start_paused = true)]
    async fn the_wait_behind_calls_in_flight_is_not_counted_against_the_timeout() {
        let gathering = Arc::new(Gathering::new("test"));
        let (sale, timeout) = (sale(), Duration::from_millis(100));
        let call = |batch: Vec<u32>| async move {
            tokio::time::sleep(Duration::from_millis(80)).await;
            Ok(batch)
        };
        let ask = |n: u32| {
            let gathering = Arc::clone(&gathering);
            async move { gathering.ask(sale, n, timeout, call).await }
        };
        // Two calls in flight, one question each: the most there are for a sale.
        let first = tokio::spawn(ask(1));
        tokio::time::sleep(Duration::from_millis(1)).await;
        let second = tokio::spawn(ask(2));
        tokio::time::sleep(Duration::from_millis(1)).await;
        let started = tokio::time::Instant::now();
        let third = tokio::spawn(ask(3)).await.unwrap();
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
        let (answers, _) = ask_ten(|_| std::future::pending()).await;
        for answer in answers {
            assert!(matches!(answer, Err(QueueError::Unavailable(m)) if m == "timed out"));
        }
    }
}
