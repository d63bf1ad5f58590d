//! Gates in front of sites (`domain::gate`): the operators' gates, the forward-auth check of
//! each request a proxy asks about, and visitors' way through: a place in the gate's line under
//! a visitor cookie, the session an admission is traded for, its renewal and its end.
//!
//! Each replica keeps the gates and the sessions ended early in memory ([`GateState`]), read
//! from the ledger every `gate.refresh_ms`, and whether the queue store answers, asked every
//! `gate.store_probe_ms`: the check of an admitted visitor is a cookie's signature and these,
//! with no store call and no ledger read.
//!
//! Layout: this file (the state and its refresh); `check.rs` (the check); `visitors.rs` (a
//! visitor's cookie and token, the session traded for an admission, its renewal and end);
//! `admin.rs` (the operators' gates).

pub mod admin;
pub mod check;
pub mod visitors;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use uuid::Uuid;

use super::App;
use crate::auth::gate_cookies::GateSigner;
use crate::domain::gate::Gate;
use crate::domain::{AttemptId, SaleId};
use crate::gate::challenge::Verifier;
use crate::gate::settings::GateConfig;

/// The gates and the sessions ended early, as this replica last read them.
#[derive(Default)]
pub struct GateSet {
    /// In the order they were made: the first that guards a request checks it.
    pub gates: Vec<Arc<Gate>>,
    pub by_id: HashMap<Uuid, Arc<Gate>>,
    pub by_sale: HashMap<SaleId, Arc<Gate>>,
    /// Sessions ended before their time: their cookies no longer pass.
    pub ended: HashSet<AttemptId>,
}

impl GateSet {
    fn new(gates: Vec<Gate>, ended: HashSet<AttemptId>) -> Self {
        let gates: Vec<Arc<Gate>> = gates.into_iter().map(Arc::new).collect();
        GateSet {
            by_id: gates.iter().map(|g| (g.id, Arc::clone(g))).collect(),
            by_sale: gates.iter().map(|g| (g.sale, Arc::clone(g))).collect(),
            gates,
            ended,
        }
    }
}

/// This replica's gates, signer, challenge checker and view of the queue store's health.
pub struct GateState {
    set: ArcSwap<GateSet>,
    /// Held while the set is read from the ledger and replaced, or a session's end is added:
    /// a read that began before a change is never stored after the set that has it.
    changing: tokio::sync::Mutex<()>,
    /// Whether the queue store answered its last probe (or call of the gate's).
    store_up: AtomicBool,
    pub signer: GateSigner,
    pub verifier: Verifier,
}

impl GateState {
    pub fn new(config: &GateConfig, seed: Option<[u8; 32]>) -> Self {
        // Every series of the gate's figures from the start, so that a dashboard shows zero
        // rather than nothing.
        for provider in ["Turnstile", "hCaptcha"] {
            for outcome in ["passed", "failed"] {
                metrics::counter!("sluice_gate_challenges_total", "provider" => provider, "outcome" => outcome)
                    .increment(0);
            }
        }
        for event in ["started", "renewed", "ended"] {
            metrics::counter!("sluice_gate_sessions_total", "event" => event).increment(0);
        }
        GateState {
            set: ArcSwap::from_pointee(GateSet::default()),
            changing: tokio::sync::Mutex::new(()),
            store_up: AtomicBool::new(true),
            signer: GateSigner::new(seed),
            verifier: Verifier::new(config),
        }
    }

    pub fn set(&self) -> arc_swap::Guard<Arc<GateSet>> {
        self.set.load()
    }

    /// Whether `sale` is a gate's line (its stock is never held).
    pub fn fronts(&self, sale: SaleId) -> bool {
        self.set.load().by_sale.contains_key(&sale)
    }

    pub fn gate(&self, id: Uuid) -> Option<Arc<Gate>> {
        self.set.load().by_id.get(&id).cloned()
    }

    pub fn store_up(&self) -> bool {
        self.store_up.load(Ordering::Relaxed)
    }

    fn note_store(&self, up: bool) {
        self.store_up.store(up, Ordering::Relaxed);
        metrics::gauge!("sluice_gate_store_up").set(if up { 1.0 } else { 0.0 });
    }

    /// Notes a session ended here at once (the other replicas read it at their next refresh).
    async fn note_ended(&self, attempt: AttemptId) {
        let _changing = self.changing.lock().await;
        let now = self.set.load();
        let mut ended = now.ended.clone();
        ended.insert(attempt);
        let gates = now.gates.iter().map(|g| Gate::clone(g)).collect();
        self.set.store(Arc::new(GateSet::new(gates, ended)));
    }
}

/// Reads the gates and the sessions ended early from the ledger into this replica's set.
pub async fn refresh(app: &App) -> super::ServiceResult<()> {
    let _changing = app.gates.changing.lock().await;
    let gates = app.ledger.gates().await?;
    let ended = app.ledger.ended_gate_sessions().await?;
    metrics::gauge!("sluice_gates").set(gates.len() as f64);
    app.gates
        .set
        .store(Arc::new(GateSet::new(gates, ended.into_iter().collect())));
    Ok(())
}

/// Sessions at once, per gate: its line's active set (a figure, not the check's business).
async fn count_sessions(app: &App) {
    let gates = app.gates.set().gates.clone();
    for gate in gates {
        if let Ok(stats) = app.queue.stats(gate.sale).await {
            metrics::gauge!("sluice_gate_sessions_active", "gate" => gate.id.to_string())
                .set(stats.active as f64);
        }
    }
}

/// Keeps this replica's gates fresh and its view of the queue store's health, until the
/// process ends.
pub async fn run(app: App) {
    let config = &app.config.gate;
    let mut read = tokio::time::interval(config.refresh_ms.duration());
    let mut probe = tokio::time::interval(config.store_probe_ms.duration());
    read.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    probe.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let budget = config
        .store_probe_ms
        .duration()
        .clamp(Duration::from_millis(100), Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = read.tick() => {
                if let Err(e) = refresh(&app).await {
                    tracing::warn!(error = %e, "could not read the gates");
                }
            }
            _ = probe.tick() => {
                let up = matches!(tokio::time::timeout(budget, app.queue.ping()).await, Ok(Ok(())));
                app.gates.note_store(up);
                if up {
                    count_sessions(&app).await;
                }
            }
        }
    }
}
