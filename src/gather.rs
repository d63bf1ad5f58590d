//! What arrives together is written together. Calls of one sale that arrive while earlier ones
//! of the same sale are out wait in a [`Gathering`] and go together, as one batch, up to the
//! gathering's batch size; each asker gets its own answer. The queue store gathers joins and
//! status lookups into one script call (`queue/redis_batches.rs`); the ledger's writers gather
//! holds, checkouts and claims into one transaction and one commit (`service/batches.rs`).
//!
//! Nothing waits for company: with fewer than [`Limits::calls`] calls of a sale out, a
//! question goes at once (a batch of one). Only while the back end is busy with that sale do
//! questions gather, so a batch is as large as the load makes it.
//!
//! The data structure: per sale with questions pending or out, the pending ones in arrival
//! order and the number of calls out. A *drainer* (a task) takes the pending questions as one
//! batch, answers them, and takes the next batch until none is left; at most
//! [`Limits::calls`] drainers per sale. The map and both fields change under one lock, so a
//! question that arrives as the last drainer stops starts a new one.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use crate::domain::SaleId;

/// How many calls of one sale may be out at once, and how many questions one call carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Two keep the back end busy with one sale's batch while the next one gathers (one would
    /// leave it idle between an answer and the next call).
    pub calls: usize,
    /// Bounds how long one call holds the back end.
    pub batch: usize,
}

/// The pending questions of every sale; `A` is one question with the way to answer it
/// ([`Asked`] in use).
pub struct Gathering<A> {
    /// The batch-size histogram (`sluice_queue_batch_size`, `sluice_ledger_batch_size`): how
    /// much the gathering saves (1 a call when idle).
    metric: &'static str,
    /// What is asked (`join`, `status`, `hold`…): the histogram's label.
    call: &'static str,
    limits: Limits,
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
    /// A gathering of one kind of question; `call` names it in the batch-size `metric`.
    pub fn new(metric: &'static str, call: &'static str, limits: Limits) -> Self {
        Gathering {
            metric,
            call,
            limits: Limits {
                calls: limits.calls.max(1),
                batch: limits.batch.max(1),
            },
            sales: Mutex::new(HashMap::new()),
        }
    }

    /// Questions pending for `sale`, not yet in a call: how far behind the back end is.
    pub fn pending(&self, sale: SaleId) -> usize {
        let sales = self.sales.lock().expect("gathering lock");
        sales.get(&sale).map_or(0, |p| p.asks.len())
    }

    /// Adds a question. `Some` when the caller must run a drainer for the sale (fewer than
    /// the limit were running); otherwise a running drainer takes the question.
    fn add(self: &Arc<Self>, sale: SaleId, ask: A) -> Option<Drainer<A>> {
        let mut sales = self.sales.lock().expect("gathering lock");
        let pending = sales.entry(sale).or_insert_with(|| Pending {
            asks: Vec::new(),
            drainers: 0,
        });
        pending.asks.push(ask);
        if pending.drainers >= self.limits.calls {
            return None;
        }
        pending.drainers += 1;
        Some(Drainer {
            gathering: Arc::clone(self),
            sale,
            counted: true,
        })
    }
}

/// The right to take a sale's pending questions as batches. Finding none pending counts it
/// out, under the lock that saw none, so a question added after that starts another drainer;
/// dropping it before then (its task failed) counts it out too.
struct Drainer<A> {
    gathering: Arc<Gathering<A>>,
    sale: SaleId,
    /// Still among the sale's drainers: true until it finds nothing pending or is dropped.
    counted: bool,
}

impl<A> Drainer<A> {
    /// The next batch, oldest first, at most the batch size; `None` when none is pending: the
    /// drainer is then done, and counted out before the lock is let go.
    fn next_batch(&mut self) -> Option<Vec<A>> {
        if !self.counted {
            return None;
        }
        let mut sales = self.gathering.sales.lock().expect("gathering lock");
        let pending = sales.get_mut(&self.sale)?;
        if pending.asks.is_empty() {
            self.counted = false;
            count_out(&mut sales, self.sale);
            return None;
        }
        let take = pending.asks.len().min(self.gathering.limits.batch);
        Some(pending.asks.drain(..take).collect())
    }
}

/// Takes one drainer off `sale`'s count, and forgets the sale once nothing is left of it.
fn count_out<A>(sales: &mut HashMap<SaleId, Pending<A>>, sale: SaleId) {
    if let Some(pending) = sales.get_mut(&sale) {
        pending.drainers -= 1;
        if pending.drainers == 0 && pending.asks.is_empty() {
            sales.remove(&sale);
        }
    }
}

impl<A> Drop for Drainer<A> {
    fn drop(&mut self) {
        if !self.counted {
            return;
        }
        let mut sales = match self.gathering.sales.lock() {
            Ok(sales) => sales,
            Err(poisoned) => poisoned.into_inner(),
        };
        count_out(&mut sales, self.sale);
    }
}

/// What a failed call tells each question it carried.
pub trait CallError: Clone + Send + 'static {
    /// The call gave `got` answers to `asked` questions.
    fn miscounted(asked: usize, got: usize) -> Self;
    /// The call went away without answering (its task failed, or the runtime is stopping).
    fn dropped() -> Self;
}

/// A question and where its answer goes (the asker may have given up and dropped the other
/// end).
pub struct Asked<Q, T, E> {
    question: Q,
    reply: oneshot::Sender<Result<T, E>>,
    /// Told when the question's own call begins: a timeout that runs from then (the queue
    /// store's) is not spent waiting behind calls in flight.
    begun: oneshot::Sender<()>,
    /// The asker's place in its trace, when traces are on: its batch's span names it.
    asker: crate::telemetry::traces::Asker,
}

/// The asker's side of a question: its answer, and word that its call has begun.
pub struct Waiting<T, E> {
    pub answer: oneshot::Receiver<Result<T, E>>,
    pub begun: oneshot::Receiver<()>,
}

impl<T, E: CallError> Waiting<T, E> {
    /// The answer, however long it takes.
    pub async fn answer(self) -> Result<T, E> {
        self.answer.await.unwrap_or_else(|_| Err(E::dropped()))
    }
}

impl<Q, T, E> Gathering<Asked<Q, T, E>>
where
    Q: Send + 'static,
    T: Send + 'static,
    E: CallError,
{
    /// Asks `question` about `sale` together with the others pending for it. `call` answers a
    /// batch: each question's own answer, in order, or one error for all of them (the call as
    /// a whole failed). It runs in the drainer this question starts, if it starts one.
    pub fn ask<C, F>(self: &Arc<Self>, sale: SaleId, question: Q, call: C) -> Waiting<T, E>
    where
        C: Fn(Vec<Q>) -> F + Send + 'static,
        F: Future<Output = Result<Vec<Result<T, E>>, E>> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let (begun, started) = oneshot::channel();
        let asked = Asked {
            question,
            reply,
            begun,
            asker: crate::telemetry::traces::Asker::now(),
        };
        if let Some(drainer) = self.add(sale, asked) {
            // The batch is the asker's call, as the same call made alone would be.
            tokio::spawn(crate::telemetry::caller::carried(drainer.drain(call, sale)));
        }
        Waiting {
            answer,
            begun: started,
        }
    }
}

impl<Q, T, E: CallError> Drainer<Asked<Q, T, E>> {
    /// Answers the sale's pending questions, a batch (one `call`) at a time, until none is left.
    async fn drain<C, F>(mut self, call: C, sale: SaleId)
    where
        C: Fn(Vec<Q>) -> F,
        F: Future<Output = Result<Vec<Result<T, E>>, E>>,
    {
        while let Some(batch) = self.next_batch() {
            let gathering = &self.gathering;
            metrics::histogram!(gathering.metric, "call" => gathering.call)
                .record(batch.len() as f64);
            let mut askers = Vec::new();
            let (questions, replies): (Vec<Q>, Vec<_>) = batch
                .into_iter()
                .map(|a| {
                    let _ = a.begun.send(());
                    askers.push(a.asker);
                    (a.question, a.reply)
                })
                .unzip();
            // A span of the asker's trace, or of its own linking every asker it carried.
            let span = crate::telemetry::traces::batch_span(gathering.call, sale, askers);
            let asked = questions.len();
            let answers = match tracing::Instrument::instrument(call(questions), span).await {
                Ok(answers) if answers.len() != asked => Err(E::miscounted(asked, answers.len())),
                answers => answers,
            };
            match answers {
                Ok(answers) => {
                    for (reply, answer) in replies.into_iter().zip(answers) {
                        let _ = reply.send(answer);
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

    const LIMITS: Limits = Limits {
        calls: 2,
        batch: 64,
    };

    fn sale() -> SaleId {
        SaleId(Uuid::new_v4())
    }

    #[test]
    fn a_lone_question_starts_a_drainer_that_takes_it_alone() {
        let gathering = Arc::new(Gathering::new("test_batch_size", "test", LIMITS));
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
        let gathering = Arc::new(Gathering::new("test_batch_size", "test", LIMITS));
        let sale = sale();
        let mut first = gathering.add(sale, 0).unwrap();
        let mut second = gathering.add(sale, 1).unwrap();
        assert_eq!(first.next_batch(), Some(vec![0, 1]));
        assert_eq!(second.next_batch(), None, "the first took both");
        drop(second);
        // The first drainer's call is out; two slots were taken, one is free again.
        let mut third = gathering.add(sale, 2).expect("one drainer of two left");
        for n in 3..10 {
            assert!(gathering.add(sale, n).is_none(), "two drainers run");
        }
        assert_eq!(gathering.pending(sale), 8);
        assert_eq!(third.next_batch(), Some((2..10).collect()));
        assert_eq!(first.next_batch(), None);
    }

    #[test]
    fn a_batch_holds_at_most_the_batch_size() {
        let gathering = Arc::new(Gathering::new("test_batch_size", "test", LIMITS));
        let sale = sale();
        let mut drainer = gathering.add(sale, 0).unwrap();
        let _other = gathering.add(sale, 1).unwrap();
        for n in 2..(LIMITS.batch + 10) {
            assert!(gathering.add(sale, n).is_none());
        }
        assert_eq!(drainer.next_batch().unwrap().len(), LIMITS.batch);
        assert_eq!(
            drainer.next_batch(),
            Some((LIMITS.batch..LIMITS.batch + 10).collect())
        );
    }

    #[test]
    fn sales_gather_apart() {
        let gathering = Arc::new(Gathering::new("test_batch_size", "test", LIMITS));
        let (a, b) = (sale(), sale());
        let mut on_a = gathering.add(a, "a").unwrap();
        let mut on_b = gathering
            .add(b, "b")
            .expect("another sale has drainers of its own");
        assert_eq!(on_a.next_batch(), Some(vec!["a"]));
        assert_eq!(on_b.next_batch(), Some(vec!["b"]));
    }

    /// A question added after the last drainer found nothing pending, but before that
    /// drainer's task ended, starts a drainer of its own instead of waiting for the next
    /// question of the sale.
    #[test]
    fn a_question_after_the_last_drainer_found_none_starts_another() {
        let gathering = Arc::new(Gathering::new(
            "test_batch_size",
            "test",
            Limits {
                calls: 1,
                batch: 64,
            },
        ));
        let sale = sale();
        let mut drainer = gathering.add(sale, 0).unwrap();
        assert_eq!(drainer.next_batch(), Some(vec![0]));
        assert_eq!(drainer.next_batch(), None);
        let mut next = gathering
            .add(sale, 1)
            .expect("the drainer that found nothing pending is done");
        drop(drainer);
        assert_eq!(next.next_batch(), Some(vec![1]));
        assert_eq!(next.next_batch(), None);
        drop(next);
        assert!(gathering.sales.lock().unwrap().is_empty());
    }

    #[test]
    fn a_dropped_drainer_lets_the_next_question_start_one() {
        let gathering = Arc::new(Gathering::new("test_batch_size", "test", LIMITS));
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

    #[derive(Debug, Clone, PartialEq)]
    enum TestError {
        Down,
        Miscounted,
        Dropped,
    }

    impl CallError for TestError {
        fn miscounted(_: usize, _: usize) -> Self {
            TestError::Miscounted
        }
        fn dropped() -> Self {
            TestError::Dropped
        }
    }

    type Answers = Result<Vec<Result<u32, TestError>>, TestError>;

    /// Ten questions asked at once: `call` sees them as one batch; what it saw, by size.
    async fn ask_ten<F>(
        answer: impl Fn(Vec<u32>) -> F + Send + Sync + 'static,
    ) -> (Vec<Result<u32, TestError>>, Vec<usize>)
    where
        F: Future<Output = Answers> + Send + 'static,
    {
        let gathering = Arc::new(Gathering::new("test_batch_size", "test", LIMITS));
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let answer = Arc::new(answer);
        let sale = sale();
        let waits: Vec<_> = (0..10)
            .map(|n| {
                let (sizes, answer) = (Arc::clone(&sizes), Arc::clone(&answer));
                let call = move |batch: Vec<u32>| {
                    sizes.lock().unwrap().push(batch.len());
                    answer(batch)
                };
                gathering.ask(sale, n, call)
            })
            .collect();
        let answers = futures_util::future::join_all(waits.into_iter().map(Waiting::answer)).await;
        let sizes = sizes.lock().unwrap().clone();
        (answers, sizes)
    }

    #[tokio::test]
    async fn questions_asked_at_once_go_in_one_call_and_each_gets_its_own_answer() {
        let (answers, sizes) = ask_ten(|batch| async move {
            Ok(batch
                .iter()
                .map(|n| {
                    if n % 3 == 0 {
                        Err(TestError::Down)
                    } else {
                        Ok(n * 10)
                    }
                })
                .collect())
        })
        .await;
        for (n, answer) in answers.into_iter().enumerate() {
            let n = n as u32;
            let want = if n.is_multiple_of(3) {
                Err(TestError::Down)
            } else {
                Ok(n * 10)
            };
            assert_eq!(answer, want, "question {n} has its own answer");
        }
        assert_eq!(sizes, [10]);
    }

    #[tokio::test]
    async fn a_failed_call_fails_every_question_in_it() {
        let (answers, _) = ask_ten(|_| async { Err(TestError::Down) }).await;
        assert!(answers.iter().all(|a| *a == Err(TestError::Down)));
    }

    #[tokio::test]
    async fn answers_that_do_not_match_the_questions_are_an_error() {
        let (answers, _) =
            ask_ten(|batch| async move { Ok(batch[1..].iter().map(|n| Ok(*n)).collect()) }).await;
        assert!(answers.iter().all(|a| *a == Err(TestError::Miscounted)));
    }
}
