use proptest::prelude::*;

use super::*;
use crate::domain::EventType;
use AttemptEvent as E;

/// Every (state, event) pair, each expiry reason's EXPIRED included: where the event leads
/// ("=" stays, "-" is refused), the effects on stock and where the transition is kept.
#[test]
fn transition_table() {
    // Columns in the order of AttemptEvent::ALL.
    const EVENTS: [AttemptEvent; 15] = [
        E::Admit,
        E::Leave,
        E::Abandon,
        E::SaleClosed,
        E::AdmissionTimeout,
        E::Hold,
        E::Release,
        E::HoldTimeout,
        E::Checkout,
        E::ClaimFree,
        E::Claim,
        E::PaymentSucceeded,
        E::PaymentFailed,
        E::PaymentTimeout,
        E::Refund,
    ];
    assert_eq!(EVENTS, AttemptEvent::ALL);
    #[rustfmt::skip]
    let rows: [(&str, [&str; 15]); 6] = [
        //                admit       leave                    abandon              closed                  admission TTL                hold       release              hold TTL                 checkout           free         claim        paid         failed                   payment TTL                 refund
        ("QUEUED",          ["ADMITTED", "EXPIRED(left)",       "EXPIRED(abandoned)", "EXPIRED(sale_closed)", "-",                          "-",      "-",                  "-",                     "-",               "-",         "CONFIRMED", "-",         "-",                     "-", "-"]),
        ("ADMITTED",        ["=",        "EXPIRED(left)",       "-",                  "=",                    "EXPIRED(admission_timeout)", "HOLD",   "-",                  "-",                     "-",               "-",         "-",         "-",         "-",                     "-", "-"]),
        ("HOLD",            ["=",        "EXPIRED(released)",   "-",                  "=",                    "-",                          "=",      "EXPIRED(released)",  "EXPIRED(hold_timeout)", "PAYMENT_PENDING", "CONFIRMED", "-",         "-",         "-",                     "-", "-"]),
        ("PAYMENT_PENDING", ["=",        "-",                   "-",                  "=",                    "-",                          "=",      "-",                  "-",                     "=",               "-",         "-",         "CONFIRMED", "EXPIRED(payment_failed)", "EXPIRED(payment_timeout)", "-"]),
        ("CONFIRMED",       ["=",        "-",                   "-",                  "=",                    "-",                          "=",      "-",                  "-",                     "=",               "=",         "=",         "=",         "=",                     "-", "EXPIRED(refunded)"]),
        ("EXPIRED",         ["-",        "=",                   "=",                  "=",                    "=",                          "-",      "=",                  "=",                     "-",               "-",         "-",         "=",         "=",                     "=", "-"]),
    ];
    let mut checked = 0;
    for from in AttemptState::all() {
        let (_, row) = rows
            .iter()
            .find(|(name, _)| *name == from.name())
            .unwrap_or_else(|| panic!("no row for {from}"));
        for (event, expected) in EVENTS.into_iter().zip(row) {
            // A refund repeated: only the refunded EXPIRED takes it again.
            let refunded = AttemptState::expired_because(ExpiryReason::Refunded);
            let expected = match (from, event) {
                (f, E::Refund) if f == refunded => &"=",
                _ => expected,
            };
            let got = decide(from, event);
            checked += 1;
            if *expected == "-" {
                assert_eq!(
                    got,
                    Err(Rejected { state: from, event }),
                    "{from} + {event:?}"
                );
                continue;
            }
            let d = got.unwrap_or_else(|e| panic!("{from} + {event:?}: {e}"));
            let to = if *expected == "=" {
                from.to_string()
            } else {
                expected.to_string()
            };
            assert_eq!(d.to.to_string(), to, "{from} + {event:?}");
            assert_eq!(d.changed, d.to != from, "{from} + {event:?}");
            assert_eq!(d.event, event);
            let effects: &[Effect] = match (from, event) {
                (AttemptState::Admitted, E::Hold) | (AttemptState::Queued, E::Claim) => {
                    &[Effect::TakeStock]
                }
                (AttemptState::Hold, E::Leave | E::Release | E::HoldTimeout)
                | (AttemptState::PaymentPending, E::PaymentFailed | E::PaymentTimeout) => {
                    &[Effect::ReturnStock]
                }
                (AttemptState::Expired { .. }, E::PaymentSucceeded) => &[Effect::RefundRequired],
                (AttemptState::Confirmed, E::Refund) => {
                    &[Effect::ReturnStock, Effect::RefundRequired]
                }
                _ => &[],
            };
            assert_eq!(d.effects, effects, "{from} + {event:?}");
            let kept = match (d.changed, from) {
                (false, _) => Kept::Nowhere,
                (true, AttemptState::Queued) if !matches!(event, E::Admit | E::Claim) => {
                    Kept::QueueStore
                }
                (true, _) => Kept::Ledger,
            };
            assert_eq!(d.kept, kept, "{from} + {event:?}");
            assert_eq!(
                d.announces(),
                (kept == Kept::Ledger)
                    .then(|| EventType::entering(d.to))
                    .flatten(),
                "{from} + {event:?}"
            );
        }
    }
    assert_eq!(
        checked,
        (5 + ExpiryReason::ALL.len()) * AttemptEvent::ALL.len()
    );
}

#[test]
fn states_round_trip_through_their_stored_form() {
    for s in AttemptState::all() {
        let back = AttemptState::from_parts(s.name(), s.reason().map(ExpiryReason::as_str));
        assert_eq!(back, Some(s));
    }
    assert_eq!(AttemptState::from_parts("EXPIRED", Some("bogus")), None);
    assert_eq!(AttemptState::from_parts("NOPE", None), None);
}

/// A simulated sale: several attempts, each holding `quantity` units, and one stock counter.
struct Sim {
    total: i64,
    stock: i64,
    attempts: Vec<SimAttempt>,
}

struct SimAttempt {
    state: AttemptState,
    quantity: i64,
    taken: u32,
    returned: u32,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any sequence of events on any attempts keeps stock in [0, total], returns each hold's
    /// units at most once (exactly once if it ended EXPIRED), and never leaves a terminal state
    /// but by a refund of a purchase.
    #[test]
    fn random_event_sequences_keep_stock_sound(
        total in 1i64..20,
        quantities in prop::collection::vec(1i64..5, 1..6),
        steps in prop::collection::vec((0usize..6, 0usize..AttemptEvent::ALL.len()), 0..80),
    ) {
        let mut sim = Sim {
            total,
            stock: total,
            attempts: quantities.iter().map(|&q| SimAttempt {
                state: AttemptState::Queued, quantity: q, taken: 0, returned: 0,
            }).collect(),
        };
        for (who, ev) in steps {
            let Some(att) = sim.attempts.get_mut(who) else { continue };
            let event = AttemptEvent::ALL[ev];
            // Stock is checked before the machine is asked, as the hold path does.
            let takes = matches!((att.state, event), (AttemptState::Admitted, E::Hold) | (AttemptState::Queued, E::Claim));
            if takes && sim.stock < att.quantity {
                continue;
            }
            let before = att.state;
            match decide(att.state, event) {
                Err(rejected) => prop_assert_eq!(rejected.state, before),
                Ok(d) => {
                    // A refund ends a CONFIRMED attempt; nothing else leaves an end.
                    if before.is_terminal() && !(before == AttemptState::Confirmed && event == E::Refund) {
                        prop_assert_eq!(d.to, before, "left a terminal state");
                    }
                    if event == E::PaymentSucceeded && before.reason().is_some() {
                        prop_assert_eq!(&d.effects, &vec![Effect::RefundRequired]);
                    }
                    for effect in &d.effects {
                        match effect {
                            Effect::TakeStock => { sim.stock -= att.quantity; att.taken += 1; }
                            Effect::ReturnStock => { sim.stock += att.quantity; att.returned += 1; }
                            Effect::RefundRequired => {}
                        }
                    }
                    att.state = d.to;
                }
            }
            prop_assert!(sim.stock >= 0 && sim.stock <= sim.total, "stock {} of {}", sim.stock, sim.total);
        }
        for att in &sim.attempts {
            prop_assert!(att.taken <= 1);
            prop_assert!(att.returned <= att.taken);
            let ended_expired_after_hold = att.taken == 1 && att.state.reason().is_some();
            prop_assert_eq!(att.returned == 1, ended_expired_after_hold);
        }
        let held: i64 = sim.attempts.iter().filter(|a| a.taken > a.returned).map(|a| a.quantity).sum();
        prop_assert_eq!(sim.stock + held, sim.total);
    }
}
