//! A payment provider's worst day: every event delivered five times, all shuffled and sent at
//! once, with attempts whose payment failed and then succeeded, or succeeded and then failed,
//! and money arriving after the attempt expired.
//!
//! The rule (also in docs/reliability.md): the first provider event applied to a
//! PAYMENT_PENDING attempt settles it — success → CONFIRMED, failure → EXPIRED
//! (payment_failed, stock back). After that a failure is ignored, and a success on an EXPIRED
//! attempt emits one `refund_required` (the attempt stays EXPIRED). Repeats of an event id are
//! duplicates. So each attempt ends in exactly one final state, left PAYMENT_PENDING once, and
//! owes a refund exactly when money came in for an attempt that did not confirm.

use std::collections::HashMap;
use std::time::Duration;

use futures_util::stream::{self, StreamExt};
use rand::seq::SliceRandom;
use serde_json::json;

use crate::helpers::TestApp;

#[derive(Clone, Copy, PartialEq, Debug)]
enum Story {
    Succeeds,
    Fails,
    FailsThenSucceeds,
    SucceedsThenFails,
}

const PER_STORY: usize = 8;
const REPEATS: usize = 5;

#[tokio::test]
async fn every_webhook_five_times_shuffled_and_concurrent_settles_each_attempt_once() {
    let t = TestApp::spawn().await;
    let stories = [
        Story::Succeeds,
        Story::Fails,
        Story::FailsThenSucceeds,
        Story::SucceedsThenFails,
    ];
    let total = (stories.len() * PER_STORY) as u64;
    let sale = t
        .create_sale(json!({ "quantity": total, "per_user_limit": 1, "payment_ttl_secs": 600 }))
        .await;
    let late_sale = t
        .create_sale(json!({ "quantity": PER_STORY, "per_user_limit": 1, "payment_ttl_secs": 1 }))
        .await;

    // Everyone pays; late buyers' payments time out first.
    let mut attempts: Vec<(String, String, String, Option<Story>)> = Vec::new(); // (user, attempt, reference, story)
    for (s, story) in stories.iter().enumerate() {
        for i in 0..PER_STORY {
            let user = format!("storm-{s}-{i}");
            let (attempt, payment) = t.paying(&sale, &user, 1).await;
            let reference = payment["reference"].as_str().unwrap().to_owned();
            attempts.push((user, attempt, reference, Some(*story)));
        }
    }
    for i in 0..PER_STORY {
        let user = format!("late-{i}");
        let (attempt, payment) = t.paying(&late_sale, &user, 1).await;
        let reference = payment["reference"].as_str().unwrap().to_owned();
        attempts.push((user, attempt, reference, None));
    }
    for (user, attempt, _, story) in &attempts {
        if story.is_none() {
            t.wait_for(attempt, user, "EXPIRED", Duration::from_secs(15))
                .await;
        }
    }

    // Every provider event, five times, shuffled, 32 at a time.
    let mut deliveries = Vec::new();
    for (n, (_, _, reference, story)) in attempts.iter().enumerate() {
        let events: &[(&str, &str)] = match story {
            Some(Story::Succeeds) | None => &[("ok", "payment.succeeded")],
            Some(Story::Fails) => &[("no", "payment.failed")],
            Some(Story::FailsThenSucceeds) | Some(Story::SucceedsThenFails) => {
                &[("no", "payment.failed"), ("ok", "payment.succeeded")]
            }
        };
        for (suffix, kind) in events {
            for _ in 0..REPEATS {
                deliveries.push((format!("evt-{n}-{suffix}"), *kind, reference.clone()));
            }
        }
    }
    deliveries.shuffle(&mut rand::thread_rng());
    let sent = deliveries.len();
    let statuses: Vec<u16> = stream::iter(deliveries)
        .map(|(id, kind, reference)| {
            let t = &t;
            async move { t.webhook(&id, kind, &reference).await.status().as_u16() }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");

    let mut finals: HashMap<&str, u32> = HashMap::new();
    let mut refunds_owed = 0;
    for (user, attempt, _, story) in &attempts {
        let state = t.status(attempt, user).await["state"]
            .as_str()
            .unwrap()
            .to_owned();
        let trail = t.audit_trail(attempt).await;
        let left_pending = trail
            .iter()
            .filter(|(from, _, _)| from == "PAYMENT_PENDING")
            .count();
        assert_eq!(
            left_pending, 1,
            "{attempt} left PAYMENT_PENDING {left_pending} times: {trail:?}"
        );
        let refunds = t.refunds_for(attempt).await;
        let money_came = !matches!(story, Some(Story::Fails));
        let expected_refunds = i64::from(money_came && state == "EXPIRED");
        assert_eq!(
            refunds, expected_refunds,
            "{attempt} ({story:?}, {state}) refunds"
        );
        match story {
            Some(Story::Succeeds) => assert_eq!(state, "CONFIRMED"),
            Some(Story::Fails) | None => assert_eq!(state, "EXPIRED"),
            Some(_) => assert!(state == "CONFIRMED" || state == "EXPIRED", "{state}"),
        }
        refunds_owed += refunds;
        *finals
            .entry(if state == "CONFIRMED" {
                "confirmed"
            } else {
                "expired"
            })
            .or_default() += 1;
    }
    let stats = t.stats(&sale).await;
    let confirmed = stats["confirmed"].as_u64().unwrap();
    assert_eq!(
        confirmed + stats["remaining"].as_u64().unwrap(),
        total,
        "{stats}"
    );
    assert_eq!(t.stats(&late_sale).await["confirmed"], 0);
    super::record(
        "Webhook storm (each event ×5, shuffled, 32 concurrent)",
        &[
            ("attempts", attempts.len().to_string()),
            ("deliveries", sent.to_string()),
            ("double settlements", "0".into()),
            (
                "confirmed / expired",
                format!("{} / {}", finals["confirmed"], finals["expired"]),
            ),
            (
                "refunds owed (money after expiry or failure)",
                refunds_owed.to_string(),
            ),
            ("units oversold", "0".into()),
        ],
    );
    t.stop().await;
}
