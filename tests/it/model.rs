//! The service against the pure machine: random sequences of user, provider, admin and clock
//! events go through the real service (HTTP, queue store, ledger, reaper) on both backends,
//! and after every step each answer and each attempt's state equal what `domain::decide`
//! says, the stock is conserved (free + held + paying + sold = total) and equals the model's
//! in the ledger and the queue store, and each attempt's audit trail is exactly the machine's
//! transitions that the ledger keeps. A fixed seed and a small case count keep it short.
//! Abandonment takes real time (its shortest setting, 3 s), so it is driven only where it can
//! happen: a buyer waiting in a paused sale stops asking while the others go on.
//! An instant sale runs the same way (its own cases): a join is the claim, decided by the
//! machine's `claim` (QUEUED → CONFIRMED), and buyers who wait (a paused sale, or one sold
//! out) are claimed for in join order once the sale is open and has units.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, RngAlgorithm, TestRng, TestRunner};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use sluice::domain::{decide, AttemptEvent, AttemptState, Decision, Effect, Kept, SaleId};

use crate::helpers::{Backend, TestApp};

const USERS: usize = 3;
const UNITS: u32 = 6;
const CASES: u32 = 80;
const MAX_STEPS: usize = 30;
/// The abandonment time (`workers.abandon_after_secs`, at its shortest).
const ABANDON: Duration = Duration::from_secs(3);

/// One thing that happens to the sale, its buyers or the clock.
#[derive(Clone, Copy, Debug)]
enum Step {
    Join(usize),
    Leave(usize),
    Hold(usize, u32),
    Release(usize),
    Checkout(usize),
    /// The provider reports the payment (a new provider event id each time).
    Paid(usize),
    Failed(usize),
    /// The provider delivers its last event for the attempt again.
    Redeliver(usize),
    /// The clock passes the attempt's current deadline, and a reaper pass runs.
    Deadline(usize),
    /// The clock passes the attempt's deadline and, before any reaper, the buyer takes the
    /// next step (an admitted one holds, a holder checks out): the attempt expires first.
    Late(usize),
    /// An operator refunds the buyer's attempt.
    Refund(usize),
    /// A waiting buyer stops asking for longer than the abandonment time, while the other
    /// waiting buyers go on asking; then the admitter's abandonment pass runs.
    Silent(usize),
    Pause,
    Resume,
    Close,
}

fn step() -> impl Strategy<Value = Step> {
    let user = 0..USERS;
    prop_oneof![
        3 => user.clone().prop_map(Step::Join),
        1 => user.clone().prop_map(Step::Leave),
        4 => (user.clone(), 1..=3u32).prop_map(|(u, q)| Step::Hold(u, q)),
        1 => user.clone().prop_map(Step::Release),
        4 => user.clone().prop_map(Step::Checkout),
        3 => user.clone().prop_map(Step::Paid),
        2 => user.clone().prop_map(Step::Failed),
        1 => user.clone().prop_map(Step::Redeliver),
        2 => user.clone().prop_map(Step::Deadline),
        2 => user.clone().prop_map(Step::Late),
        2 => user.clone().prop_map(Step::Refund),
        1 => user.clone().prop_map(Step::Silent),
        1 => Just(Step::Pause),
        1 => Just(Step::Resume),
        1 => Just(Step::Close),
    ]
}

/// An instant sale's steps: what can happen to a claim.
fn instant_step() -> impl Strategy<Value = Step> {
    let user = 0..USERS;
    prop_oneof![
        4 => user.clone().prop_map(Step::Join),
        1 => user.clone().prop_map(Step::Leave),
        2 => user.prop_map(Step::Refund),
        1 => Just(Step::Pause),
        1 => Just(Step::Resume),
        1 => Just(Step::Close),
    ]
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SaleState {
    Open,
    Paused,
    Closed,
}

/// What the pure machine says of one buyer's attempt, and what the test needs to drive it.
struct Buyer {
    name: String,
    /// When it joined, among the run's joins (an instant sale claims for waiters in order).
    joined: usize,
    attempt: String,
    state: AttemptState,
    /// Units the attempt holds or bought.
    units: u32,
    /// The audit trail the ledger must have: (from, to, cause).
    trail: Vec<(String, String, String)>,
    refunds: i64,
    admission_token: Option<String>,
    payment_reference: Option<String>,
    last_webhook: Option<(String, &'static str)>,
}

struct Model {
    sale: String,
    /// An instant sale: a join is the claim.
    instant: bool,
    joins: usize,
    status: SaleState,
    free: u32,
    buyers: Vec<Option<Buyer>>,
    webhooks: u32,
}

impl Buyer {
    /// Moves the model by `decision` (already known to apply).
    fn take(&mut self, decision: &Decision, free: &mut u32) {
        for effect in &decision.effects {
            match effect {
                Effect::TakeStock => *free -= self.units,
                Effect::ReturnStock => *free += self.units,
                Effect::RefundRequired => self.refunds += 1,
            }
        }
        if decision.kept == Kept::Ledger {
            self.trail.push((
                decision.from.name().to_owned(),
                decision.to.name().to_owned(),
                decision.event.as_str().to_owned(),
            ));
        }
        self.state = decision.to;
    }
}

/// Asserts that an answer is the machine's: the state it leads to, or a refusal (409, or 410
/// once EXPIRED).
async fn expect_answer(
    what: &str,
    resp: reqwest::Response,
    decided: &Result<Decision, sluice::domain::Rejected>,
) -> Value {
    let status = resp.status();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    match decided {
        Ok(d) => {
            assert_eq!(status, StatusCode::OK, "{what}: {body}");
            assert_eq!(body["state"], d.to.name(), "{what}: {body}");
        }
        Err(rejected) => {
            let expected = match rejected.state {
                AttemptState::Expired { .. } => StatusCode::GONE,
                _ => StatusCode::CONFLICT,
            };
            assert_eq!(status, expected, "{what} is refused: {body}");
        }
    }
    body
}

/// What a generated step means where the run is: a buyer's event before they joined is their
/// join, and a payment answer before any checkout is a checkout, so few steps are lost.
fn in_context(m: &Model, step: Step) -> Step {
    let user = match step {
        Step::Join(u)
        | Step::Leave(u)
        | Step::Hold(u, _)
        | Step::Release(u)
        | Step::Checkout(u)
        | Step::Paid(u)
        | Step::Failed(u)
        | Step::Redeliver(u)
        | Step::Deadline(u)
        | Step::Late(u)
        | Step::Refund(u)
        | Step::Silent(u) => u,
        Step::Pause | Step::Resume | Step::Close => return step,
    };
    let confirmed = |b: &Option<Buyer>| {
        b.as_ref()
            .is_some_and(|b| b.state == AttemptState::Confirmed)
    };
    let queued = |b: &Option<Buyer>| b.as_ref().is_some_and(|b| b.state == AttemptState::Queued);
    if let Step::Silent(_) = step {
        // Only a waiting buyer can go silent: one who waits, if anyone does.
        if let Some(waiting) = m.buyers.iter().position(queued) {
            return Step::Silent(waiting);
        }
    }
    if let Step::Refund(_) = step {
        // A purchase is rare and late in a sequence: a refund goes to one when there is one.
        if let Some(bought) = m.buyers.iter().position(confirmed) {
            return Step::Refund(bought);
        }
    }
    match (&m.buyers[user], step) {
        (None, _) => Step::Join(user),
        (Some(b), Step::Paid(_) | Step::Failed(_) | Step::Redeliver(_))
            if b.payment_reference.is_none() =>
        {
            Step::Checkout(user)
        }
        _ => step,
    }
}

async fn apply(t: &TestApp, m: &mut Model, step: Step) -> Step {
    let step = in_context(m, step);
    let what = format!("{step:?}");
    match step {
        Step::Join(u) => {
            if m.buyers[u].is_some() {
                return step;
            }
            let name = format!("buyer{u}");
            let resp = t
                .as_user(
                    Method::POST,
                    &format!("/v1/sales/{}/attempts", m.sale),
                    &name,
                )
                .send()
                .await
                .unwrap();
            if m.status == SaleState::Closed {
                crate::helpers::assert_problem(resp, 409, "/problems/sale-closed").await;
                return step;
            }
            let waiting = m
                .buyers
                .iter()
                .flatten()
                .any(|b| b.state == AttemptState::Queued);
            let claims = m.instant && m.status == SaleState::Open && !waiting;
            if claims && m.free == 0 {
                crate::helpers::assert_problem(resp, 409, "/problems/sold-out").await;
                return step;
            }
            let decided =
                claims.then(|| decide(AttemptState::Queued, AttemptEvent::Claim).unwrap());
            let expected = if claims { 201 } else { 202 };
            assert_eq!(resp.status(), expected, "{what}");
            let body: Value = resp.json().await.unwrap();
            m.joins += 1;
            m.buyers[u] = Some(Buyer {
                joined: m.joins,
                name,
                attempt: body["attempt_id"].as_str().unwrap().to_owned(),
                state: AttemptState::Queued,
                units: 0,
                trail: Vec::new(),
                refunds: 0,
                admission_token: None,
                payment_reference: None,
                last_webhook: None,
            });
            if let Some(d) = decided {
                let b = m.buyers[u].as_mut().unwrap();
                assert_eq!(body["state"], d.to.name(), "{what}: {body}");
                b.units = 1;
                b.take(&d, &mut m.free);
            }
        }
        Step::Leave(u) | Step::Release(u) | Step::Checkout(u) => {
            let Some(b) = m.buyers[u].as_mut() else {
                return step;
            };
            let (method, path, event) = match step {
                Step::Leave(_) => (Method::DELETE, String::new(), AttemptEvent::Leave),
                Step::Release(_) => (Method::DELETE, "/hold".into(), AttemptEvent::Release),
                _ => (Method::POST, "/checkout".into(), AttemptEvent::Checkout),
            };
            let decided = decide(b.state, event);
            let resp = t
                .as_user(
                    method,
                    &format!("/v1/attempts/{}{path}", b.attempt),
                    &b.name,
                )
                .send()
                .await
                .unwrap();
            let body = expect_answer(&what, resp, &decided).await;
            if let Ok(d) = decided {
                b.take(&d, &mut m.free);
                if let Some(reference) = body["payment"]["reference"].as_str() {
                    b.payment_reference = Some(reference.to_owned());
                }
            }
        }
        Step::Hold(u, quantity) => {
            let Some(b) = m.buyers[u].as_mut() else {
                return step;
            };
            let Some(token) = b.admission_token.clone() else {
                return step; // never admitted: no token to present
            };
            let resp = t
                .hold(
                    &b.attempt,
                    &b.name,
                    json!({ "admission_token": token, "quantity": quantity }),
                )
                .await;
            if b.state == AttemptState::Admitted && m.free < quantity {
                crate::helpers::assert_problem(resp, 409, "/problems/sold-out").await;
                return step;
            }
            let decided = decide(b.state, AttemptEvent::Hold);
            expect_answer(&what, resp, &decided).await;
            if let Ok(d) = decided {
                if d.changed {
                    b.units = quantity;
                }
                b.take(&d, &mut m.free);
            }
        }
        Step::Paid(u) | Step::Failed(u) | Step::Redeliver(u) => {
            let Some(b) = m.buyers[u].as_mut() else {
                return step;
            };
            let Some(reference) = b.payment_reference.clone() else {
                return step;
            };
            if let Step::Redeliver(_) = step {
                let Some((id, kind)) = b.last_webhook.clone() else {
                    return step;
                };
                let resp = t.webhook(&id, kind, &reference).await;
                assert_eq!(resp.status(), 200, "{what}");
                let ack: Value = resp.json().await.unwrap();
                assert_eq!(ack["result"], "duplicate", "{what}: {ack}");
                assert_eq!(ack["attempt_state"], b.state.name(), "{what}: {ack}");
                return step;
            }
            let (kind, event) = match step {
                Step::Paid(_) => ("payment.succeeded", AttemptEvent::PaymentSucceeded),
                _ => ("payment.failed", AttemptEvent::PaymentFailed),
            };
            m.webhooks += 1;
            let id = format!("evt-{}-{}", m.sale, m.webhooks);
            let resp = t.webhook(&id, kind, &reference).await;
            let d =
                decide(b.state, event).expect("a payment reference means a payment answer applies");
            assert_eq!(resp.status(), 200, "{what}");
            let ack: Value = resp.json().await.unwrap();
            let result = if d.effects.contains(&Effect::RefundRequired) {
                "refund_required"
            } else if d.changed {
                "applied"
            } else {
                "ignored"
            };
            assert_eq!(ack["result"], result, "{what}: {ack}");
            assert_eq!(ack["attempt_state"], d.to.name(), "{what}: {ack}");
            b.take(&d, &mut m.free);
            b.last_webhook = Some((id, kind));
        }
        Step::Deadline(u) => {
            let Some(b) = m.buyers[u].as_mut() else {
                return step;
            };
            let event = match b.state {
                AttemptState::Admitted => AttemptEvent::AdmissionTimeout,
                AttemptState::Hold => AttemptEvent::HoldTimeout,
                AttemptState::PaymentPending => AttemptEvent::PaymentTimeout,
                AttemptState::Queued | AttemptState::Confirmed | AttemptState::Expired { .. } => {
                    return step
                }
            };
            t.pass_deadline(&b.attempt, event).await;
            sluice::workers::reapers::reap(&t.app).await;
            let d = decide(b.state, event).expect("a timeout applies to its own state");
            b.take(&d, &mut m.free);
        }
        Step::Late(u) => {
            let Some(b) = m.buyers[u].as_mut() else {
                return step;
            };
            let (timeout, event) = match b.state {
                AttemptState::Admitted => (AttemptEvent::AdmissionTimeout, AttemptEvent::Hold),
                AttemptState::Hold => (AttemptEvent::HoldTimeout, AttemptEvent::Checkout),
                AttemptState::Queued
                | AttemptState::PaymentPending
                | AttemptState::Confirmed
                | AttemptState::Expired { .. } => return step,
            };
            let Some(token) = b.admission_token.clone() else {
                return step;
            };
            t.pass_deadline(&b.attempt, timeout).await;
            let resp = match event {
                AttemptEvent::Hold => {
                    let body = json!({ "admission_token": token, "quantity": 1 });
                    t.hold(&b.attempt, &b.name, body).await
                }
                _ => t.checkout(&b.attempt, &b.name).await,
            };
            let expired = decide(b.state, timeout).expect("a timeout applies to its own state");
            b.take(&expired, &mut m.free);
            let decided = decide(b.state, event);
            expect_answer(&what, resp, &decided).await;
            if let Ok(d) = decided {
                b.take(&d, &mut m.free);
            }
        }
        Step::Refund(u) => {
            let sale = m.sale.clone();
            let Some(b) = m.buyers[u].as_mut() else {
                return step;
            };
            let path = format!("/v1/sales/{sale}/attempts/{}/refund", b.attempt);
            let resp = t.admin(Method::POST, &path).send().await.unwrap();
            let status = resp.status();
            let body: Value = resp.json().await.unwrap_or(Value::Null);
            // Support knows an attempt from its admission on: one that only waited is not found.
            if b.trail.is_empty() {
                assert_eq!(status, StatusCode::NOT_FOUND, "{what}: {body}");
                return step;
            }
            let decided = decide(b.state, AttemptEvent::Refund);
            match &decided {
                Ok(d) => {
                    assert_eq!(status, StatusCode::OK, "{what}: {body}");
                    assert_eq!(body["attempt"]["state"], d.to.name(), "{what}: {body}");
                    b.take(d, &mut m.free);
                }
                Err(rejected) => {
                    let expected = match rejected.state {
                        AttemptState::Expired { .. } => StatusCode::GONE,
                        _ => StatusCode::CONFLICT,
                    };
                    assert_eq!(status, expected, "{what} is refused: {body}");
                }
            }
        }
        Step::Silent(u) => {
            if !m.buyers[u]
                .as_ref()
                .is_some_and(|b| b.state == AttemptState::Queued)
            {
                return step;
            }
            let others: Vec<(String, String)> = m
                .buyers
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != u)
                .filter_map(|(_, b)| b.as_ref())
                .filter(|b| b.state == AttemptState::Queued)
                .map(|b| (b.attempt.clone(), b.name.clone()))
                .collect();
            let until = Instant::now() + ABANDON + Duration::from_millis(300);
            while Instant::now() < until {
                for (attempt, name) in &others {
                    t.status(attempt, name).await;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            let sale = SaleId::parse(&m.sale).unwrap();
            let taken = t.app.queue.abandon(sale, 100).await.unwrap();
            assert_eq!(taken, 1, "{what}: only the silent buyer");
            sluice::service::transition::waiting_ended(AttemptEvent::Abandon, taken);
            let b = m.buyers[u].as_mut().unwrap();
            let d = decide(b.state, AttemptEvent::Abandon).expect("abandonment applies");
            b.take(&d, &mut m.free);
        }
        Step::Pause | Step::Resume | Step::Close => {
            let (action, to) = match step {
                Step::Pause => ("pause", SaleState::Paused),
                Step::Resume => ("resume", SaleState::Open),
                _ => ("close", SaleState::Closed),
            };
            let resp = t
                .admin(Method::POST, &format!("/v1/sales/{}/{action}", m.sale))
                .send()
                .await
                .unwrap();
            if m.status == SaleState::Closed && to != SaleState::Closed {
                crate::helpers::assert_problem(resp, 409, "/problems/sale-closed").await;
                return step;
            }
            assert_eq!(resp.status(), 200, "{what}");
            m.status = to;
            if to == SaleState::Closed {
                for b in m.buyers.iter_mut().flatten() {
                    let d = decide(b.state, AttemptEvent::SaleClosed).expect("a close applies");
                    b.take(&d, &mut m.free);
                }
            }
        }
    }
    step
}

/// While the sale is open, the valve lets every waiting buyer in (its cap is above the
/// buyers): the model admits them and the test waits until the service has. An instant
/// sale's waiters are claimed for in join order while units last.
async fn admissions_follow(t: &TestApp, m: &mut Model) {
    if m.status != SaleState::Open {
        return;
    }
    if m.instant {
        let mut waiting: Vec<&mut Buyer> = m
            .buyers
            .iter_mut()
            .flatten()
            .filter(|b| b.state == AttemptState::Queued)
            .collect();
        waiting.sort_by_key(|b| b.joined);
        for b in waiting {
            if m.free == 0 {
                break;
            }
            t.wait_for(&b.attempt, &b.name, "CONFIRMED", Duration::from_secs(10))
                .await;
            b.units = 1;
            let d = decide(b.state, AttemptEvent::Claim).unwrap();
            b.take(&d, &mut m.free);
        }
        return;
    }
    for b in m.buyers.iter_mut().flatten() {
        if b.state != AttemptState::Queued {
            continue;
        }
        let status = t
            .wait_for(&b.attempt, &b.name, "ADMITTED", Duration::from_secs(10))
            .await;
        b.admission_token = Some(status["admission_token"].as_str().unwrap().to_owned());
        let d = decide(b.state, AttemptEvent::Admit).unwrap();
        b.take(&d, &mut m.free);
    }
}

/// Every attempt's state, the stock and the audit trails against the model.
async fn check(t: &TestApp, m: &Model, after: &[Step]) {
    let sale = SaleId::parse(&m.sale).unwrap();
    for b in m.buyers.iter().flatten() {
        let resp = t
            .as_user(Method::GET, &format!("/v1/attempts/{}", b.attempt), &b.name)
            .send()
            .await
            .unwrap();
        let status: Value = resp.json().await.unwrap();
        assert_eq!(
            status["state"],
            b.state.name(),
            "{} after {after:?}: {status}",
            b.name
        );
        if let Some(reason) = b.state.reason() {
            assert_eq!(
                status["reason"],
                reason.as_str(),
                "{} after {after:?}",
                b.name
            );
        }
        let id = sluice::domain::AttemptId::parse(&b.attempt).unwrap();
        let record = t.app.ledger.attempt(id).await.unwrap();
        match (record, b.trail.is_empty()) {
            (Some(record), false) => {
                assert_eq!(
                    record.state, b.state,
                    "{} in the ledger after {after:?}",
                    b.name
                )
            }
            (None, true) => {}
            (record, _) => panic!("{}: ledger row {record:?} after {after:?}", b.name),
        }
        assert_eq!(
            t.audit_trail(&b.attempt).await,
            b.trail,
            "{}'s trail after {after:?}",
            b.name
        );
        assert_eq!(
            t.refunds_for(&b.attempt).await,
            b.refunds,
            "{}'s refunds",
            b.name
        );
    }
    let ledger = t.app.ledger.stats(sale).await.unwrap();
    let (held, paying, sold) = m.buyers.iter().flatten().fold((0, 0, 0), |(h, p, s), b| {
        let u = u64::from(b.units);
        match b.state {
            AttemptState::Hold => (h + u, p, s),
            AttemptState::PaymentPending => (h, p + u, s),
            AttemptState::Confirmed => (h, p, s + u),
            AttemptState::Queued | AttemptState::Admitted | AttemptState::Expired { .. } => {
                (h, p, s)
            }
        }
    });
    assert_eq!(
        (
            ledger.remaining,
            ledger.units_held,
            ledger.units_paying,
            ledger.units_sold
        ),
        (m.free, held, paying, sold),
        "the ledger's units after {after:?}"
    );
    let total = if m.instant { 2 } else { UNITS };
    assert_eq!(u64::from(m.free) + held + paying + sold, u64::from(total));
    let queue = t.app.queue.stats(sale).await.unwrap();
    assert_eq!(
        queue.remaining,
        u64::from(m.free),
        "the queue store's free units after {after:?}"
    );
}

/// The machine's transitions the run went through, as "FROM --cause--> TO".
type Seen = std::sync::Mutex<std::collections::BTreeSet<String>>;

async fn run_case(t: &TestApp, steps: &[Step], seen: &Seen, instant: bool) {
    let sale = match instant {
        false => json!({ "quantity": UNITS, "per_user_limit": 3, "max_active": 100 }),
        true => json!({ "quantity": 2, "per_user_limit": 1, "max_active": 100, "instant": true }),
    };
    let sale = t.create_sale(sale).await;
    let mut m = Model {
        sale,
        instant,
        joins: 0,
        status: SaleState::Open,
        free: if instant { 2 } else { UNITS },
        buyers: (0..USERS).map(|_| None).collect(),
        webhooks: 0,
    };
    let mut done = Vec::with_capacity(steps.len());
    for &step in steps {
        done.push(apply(t, &mut m, step).await);
        admissions_follow(t, &mut m).await;
        check(t, &m, &done).await;
    }
    let mut seen = seen.lock().unwrap();
    for b in m.buyers.iter().flatten() {
        seen.extend(
            b.trail
                .iter()
                .map(|(from, to, cause)| format!("{from} --{cause}--> {to}")),
        );
        if let Some(reason) = b.state.reason().filter(|_| b.trail.is_empty()) {
            seen.insert(format!("QUEUED --> EXPIRED({})", reason.as_str()));
        }
    }
}

fn the_service_follows_the_machine(backend: Backend) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let t = runtime.block_on(TestApp::spawn_on_with(backend, |c| {
        // Deadlines pass when a step says so, and the step runs the reaper itself.
        c.workers.reaper_cron = "0 0 0 1 1 *".into();
        c.workers.abandon_after_secs = sluice::config::Seconds(ABANDON.as_secs());
    }));
    let config = ProptestConfig {
        cases: CASES,
        failure_persistence: None,
        max_shrink_iters: 64,
        max_shrink_time: 60_000,
        ..ProptestConfig::default()
    };
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[23; 32]);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let started = Instant::now();
    let seen = Seen::default();
    let result = runner.run(&prop::collection::vec(step(), 1..=MAX_STEPS), |steps| {
        runtime.block_on(run_case(&t, &steps, &seen, false));
        Ok(())
    });
    // An instant sale's cases: joins (claims), leaves, refunds and the operator's changes.
    let instant_steps = prop::collection::vec(instant_step(), 1..=MAX_STEPS / 2);
    let mut instant_runner = TestRunner::new_with_rng(
        ProptestConfig {
            cases: CASES / 2,
            ..runner.config().clone()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &[29; 32]),
    );
    let result = result.and_then(|()| {
        instant_runner.run(&instant_steps, |steps| {
            runtime.block_on(run_case(&t, &steps, &seen, true));
            Ok(())
        })
    });
    let seen = seen.into_inner().unwrap();
    eprintln!(
        "{CASES} cases in {:?}, through {} transitions:",
        started.elapsed(),
        seen.len()
    );
    for transition in &seen {
        eprintln!("  {transition}");
    }
    runtime.block_on(t.stop());
    if let Err(e) = result {
        panic!("{e}");
    }
    // The seed's sequences go through every transition a buyer can make, those that need
    // several steps in a row included (a purchase, then its refund; a wait, then silence).
    for transition in [
        "QUEUED --admit--> ADMITTED",
        "QUEUED --> EXPIRED(left)",
        "QUEUED --> EXPIRED(abandoned)",
        "QUEUED --> EXPIRED(sale_closed)",
        "ADMITTED --hold--> HOLD",
        "ADMITTED --leave--> EXPIRED",
        "ADMITTED --admission_timeout--> EXPIRED",
        "HOLD --checkout--> PAYMENT_PENDING",
        "HOLD --release--> EXPIRED",
        "HOLD --leave--> EXPIRED",
        "HOLD --hold_timeout--> EXPIRED",
        "PAYMENT_PENDING --payment_succeeded--> CONFIRMED",
        "PAYMENT_PENDING --payment_failed--> EXPIRED",
        "PAYMENT_PENDING --payment_timeout--> EXPIRED",
        "CONFIRMED --refund--> EXPIRED",
        "QUEUED --claim--> CONFIRMED",
    ] {
        assert!(
            seen.contains(transition),
            "no case went {transition}: {seen:?}"
        );
    }
}

#[test]
fn the_service_follows_the_machine_on_servers() {
    the_service_follows_the_machine(Backend::Servers)
}

#[test]
fn the_service_follows_the_machine_embedded() {
    the_service_follows_the_machine(Backend::Embedded)
}
