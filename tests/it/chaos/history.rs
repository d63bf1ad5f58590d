//! What every client of an opening was told, and the invariants its history must keep.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// One answer a client got.
#[derive(Debug, Clone)]
pub struct Record {
    /// Since the opening began.
    pub at: Duration,
    /// How long the answer took.
    pub took: Duration,
    /// Which replica answered (0 or 1): shown in a violation's history.
    #[allow(dead_code)]
    pub who: String,
    pub op: &'static str,
    pub user: String,
    pub attempt: Option<String>,
    /// The HTTP status; 0 when no answer came (a connection cut, a timeout).
    pub status: u16,
    /// The attempt's state in the answer, with its reason (`EXPIRED(refunded)`).
    pub state: Option<String>,
    /// What else the answer said that a check reads (a webhook's `result`, a problem's type).
    pub note: String,
}

/// A fault in force from `from` to `to` (plus the time it takes to recover, [`GRACE`]).
#[derive(Debug, Clone)]
pub struct Fault {
    pub what: &'static str,
    pub from: Duration,
    pub to: Duration,
}

/// How long after a fault its effects (5xx, slow answers) may still show.
pub const GRACE: Duration = Duration::from_secs(8);

/// The slowest answer any operation promises: the queue store's and the ledger's bounds and a
/// provider call are each well under it.
pub const SLOWEST: Duration = Duration::from_secs(10);

/// The ledger's end of the opening, as the checks read it.
#[derive(Debug, Clone, Default)]
pub struct Ending {
    /// Each attempt's final state (`EXPIRED(reason)` with its reason).
    pub states: HashMap<String, String>,
    /// Each attempt's count of transitions into ADMITTED.
    pub admissions: HashMap<String, u32>,
    /// (seq, the order its admission was recorded in) of every admitted attempt of one line
    /// (one numbering of the queue store).
    pub admission_order: Vec<(i64, i64)>,
    /// Each provider event id applied, and how often the ledger holds it.
    pub provider_events: HashMap<String, u32>,
    /// Units by end: free, held, paying, sold; and the sale's total.
    pub units: (u64, u64, u64, u64),
    pub total: u64,
    /// Units of holds not given back whose attempts are not holding, paying or confirmed (a
    /// unit whose end is not accounted for).
    pub orphan_units: u64,
    /// Units sold, counted from the confirmed holds, and the units the sale's counter gave
    /// out for them (equal unless a unit was sold twice).
    pub sold_claims: (u64, u64),
    /// Free units as the ledger and as the queue store count them.
    pub free_ledger_vs_store: (u64, u64),
    /// The coupon drop beside the sale: units claimed, free in the ledger, its total, free
    /// in the queue store.
    pub coupons: (u64, u64, u64, u64),
}

/// The first violation found, with the history around it.
pub fn check(history: &[Record], faults: &[Fault], end: &Ending) -> Result<String, String> {
    let in_fault = |at: Duration| {
        faults
            .iter()
            .any(|f| at + Duration::from_millis(500) >= f.from && at <= f.to + GRACE)
    };
    let around = |attempt: Option<&str>, at: Duration| -> String {
        let lines: Vec<String> = history
            .iter()
            .filter(|r| match attempt {
                Some(a) => r.attempt.as_deref() == Some(a),
                None => r.at + Duration::from_secs(2) >= at && r.at <= at + Duration::from_secs(2),
            })
            .take(40)
            .map(|r| format!("  {r:?}"))
            .collect();
        let faults: Vec<String> = faults.iter().map(|f| format!("  {f:?}")).collect();
        format!(
            "history:\n{}\nfaults:\n{}",
            lines.join("\n"),
            faults.join("\n")
        )
    };
    let (sold, distinct) = end.sold_claims;
    if sold != distinct {
        return Err(format!(
            "a unit sold twice: {sold} units sold over {distinct} units given out\n{}",
            around(None, Duration::ZERO)
        ));
    }
    let (ledger_free, store_free) = end.free_ledger_vs_store;
    if ledger_free != store_free {
        return Err(format!(
            "the ledger has {ledger_free} units free and the queue store {store_free}"
        ));
    }
    let (claimed, coupons_free, coupons, coupons_in_store) = end.coupons;
    if claimed + coupons_free != coupons || coupons_free != coupons_in_store {
        return Err(format!(
            "coupons not accounted for: {claimed} claimed + {coupons_free} free of {coupons}, \
             {coupons_in_store} free in the queue store"
        ));
    }
    let (free, held, paying, sold_units) = end.units;
    if free + held + paying + sold_units != end.total || end.orphan_units > 0 {
        return Err(format!(
            "units not accounted for: free {free} + held {held} + paying {paying} + sold {sold_units} \
             of {}, {} claimed by attempts that hold none",
            end.total, end.orphan_units
        ));
    }
    for r in history {
        if r.state.as_deref() == Some("CONFIRMED") {
            let attempt = r.attempt.as_deref().unwrap_or_default();
            let now = end.states.get(attempt).map(String::as_str);
            if !matches!(now, Some("CONFIRMED") | Some("EXPIRED(refunded)")) {
                return Err(format!(
                    "{attempt} was answered CONFIRMED at {:?} and ended {now:?}\n{}",
                    r.at,
                    around(Some(attempt), r.at)
                ));
            }
        }
    }
    if let Some((attempt, n)) = end.admissions.iter().find(|(_, n)| **n > 1) {
        return Err(format!(
            "{attempt} admitted {n} times\n{}",
            around(Some(attempt), Duration::ZERO)
        ));
    }
    let mut by_order: Vec<(i64, i64)> = end.admission_order.clone();
    by_order.sort_by_key(|(_, order)| *order);
    if let Some(w) = by_order.windows(2).find(|w| w[1].0 < w[0].0) {
        return Err(format!(
            "admitted out of the line's order: serial {} after serial {}",
            w[1].0, w[0].0
        ));
    }
    if let Some((event, n)) = end.provider_events.iter().find(|(_, n)| **n > 1) {
        return Err(format!("provider event {event} applied {n} times"));
    }
    let mut applied: BTreeMap<&str, u32> = BTreeMap::new();
    for r in history
        .iter()
        .filter(|r| r.op == "webhook" && r.note == "applied")
    {
        *applied.entry(r.user.as_str()).or_default() += 1;
    }
    if let Some((event, n)) = applied.iter().find(|(_, n)| **n > 1) {
        return Err(format!("webhook {event} answered `applied` {n} times"));
    }
    for r in history {
        if r.took > SLOWEST {
            return Err(format!(
                "{} took {:?} (bound {SLOWEST:?})\n{}",
                r.op,
                r.took,
                around(r.attempt.as_deref(), r.at)
            ));
        }
        if r.status >= 500 && !in_fault(r.at) {
            return Err(format!(
                "{} answered {} at {:?} with no fault in force ({})\n{}",
                r.op,
                r.status,
                r.at,
                r.note,
                around(None, r.at)
            ));
        }
    }
    Ok(format!(
        "{} answers checked, {} faults, {} attempts; units free {free}, held {held}, paying \
         {paying}, sold {sold_units} of {}",
        history.len(),
        faults.len(),
        end.states.len(),
        end.total
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(op: &'static str, attempt: &str, status: u16, state: &str) -> Record {
        Record {
            at: Duration::from_secs(1),
            took: Duration::from_millis(5),
            who: "0".into(),
            op,
            user: "u".into(),
            attempt: Some(attempt.into()),
            status,
            state: Some(state.into()),
            note: String::new(),
        }
    }

    fn ending() -> Ending {
        Ending {
            units: (1, 0, 0, 1),
            total: 2,
            sold_claims: (1, 1),
            states: [("a".to_owned(), "CONFIRMED".to_owned())].into(),
            ..Default::default()
        }
    }

    #[test]
    fn the_checker_finds_what_it_guards() {
        let good = [record("status", "a", 200, "CONFIRMED")];
        assert!(check(&good, &[], &ending()).is_ok());
        let mut lost = ending();
        lost.states
            .insert("a".into(), "EXPIRED(payment_timeout)".into());
        assert!(check(&good, &[], &lost)
            .unwrap_err()
            .contains("answered CONFIRMED"));
        let mut twice = ending();
        twice.sold_claims = (2, 1);
        assert!(check(&good, &[], &twice)
            .unwrap_err()
            .contains("sold twice"));
        let failed = [record("hold", "a", 503, "HOLD")];
        assert!(check(&failed, &[], &ending())
            .unwrap_err()
            .contains("no fault in force"));
        let fault = Fault {
            what: "redis restarted empty",
            from: Duration::from_millis(900),
            to: Duration::from_secs(2),
        };
        assert!(check(&failed, &[fault], &ending()).is_ok());
    }
}
