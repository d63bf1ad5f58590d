//! An opening's double taps: the same users join through two replicas at the same moment (a
//! double tap, or a retry, landing on two replicas behind a load balancer). Each user gets one
//! attempt and one place whichever replica answers, and the places are the line's `1..=n`.
//! Two replicas share a store only over Redis; the in-process store's own case is
//! `queue_store::two_replicas::in_process` (two callers at once).

use std::collections::HashSet;

use futures_util::{stream, StreamExt};
use serde_json::{json, Value};

use crate::helpers::{pause_sale_at, Backend, TestApp};
use crate::on_configurations;

on_configurations!(
    [servers: Servers, servers_on_cluster: ServersOnCluster]
    users_joining_through_two_replicas_at_once_get_one_attempt_and_one_place,
);

const USERS: u64 = 300;

async fn users_joining_through_two_replicas_at_once_get_one_attempt_and_one_place(
    backend: Backend,
) {
    let a = TestApp::spawn_on(backend).await;
    let b = TestApp::spawn_config((*a.app.config).clone()).await;
    let sale = a.create_sale(json!({ "quantity": 10 })).await;
    // Paused: nobody is admitted, so a place is the user's place in the join order.
    pause_sale_at(&a.http, &a.base, &sale).await;
    let answers: Vec<(Value, Value)> = stream::iter(0..USERS)
        .map(|i| {
            let (a, b, sale) = (&a, &b, &sale);
            async move {
                let user = format!("double-tap-{i}");
                tokio::join!(a.join(sale, &user), b.join(sale, &user))
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    for (through_a, through_b) in &answers {
        assert_eq!(
            (&through_a["attempt_id"], &through_a["position"]),
            (&through_b["attempt_id"], &through_b["position"]),
            "one attempt and one place: {through_a} {through_b}"
        );
    }
    let attempts: HashSet<&str> = answers
        .iter()
        .map(|(x, _)| x["attempt_id"].as_str().unwrap())
        .collect();
    assert_eq!(attempts.len() as u64, USERS);
    let places: HashSet<u64> = answers
        .iter()
        .map(|(x, _)| x["position"].as_u64().unwrap())
        .collect();
    assert_eq!(places, (1..=USERS).collect::<HashSet<_>>());
    assert_eq!(a.stats(&sale).await["waiting"], USERS);
    b.stop().await;
    a.stop().await;
}
