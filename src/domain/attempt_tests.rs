use proptest::prelude::*;

use super::*;
use AttemptEvent as E;
use ExpiryReason as R;

fn expired(reason: ExpiryReason) -> AttemptState {
    AttemptState::expired(reason)
}

/// Every (state, event) pair: the expected next state, effects, or rejection.
#[test]
fn transition_table() {
    let q = AttemptState::queued();
    let a = AttemptState::admitted();
    let h = AttemptState::hold();
    let p = AttemptState::payment_pending();
    let c = AttemptState::confirmed();
    let x = expired(R::HoldTimeout);
    type Row = (
        AttemptState,
        AttemptEvent,
        Option<(AttemptState, &'static [Effect])>,
    );
    let table: Vec<Row> = vec![
        (q, E::Admit, Some((a, &[]))),
        (q, E::Leave, Some((expired(R::Left), &[]))),
        (q, E::Abandon, Some((expired(R::Abandoned), &[]))),
        (q, E::Hold, None),
        (q, E::Checkout, None),
        (q, E::PaymentSucceeded, None),
        (a, E::Admit, Some((a, &[]))),
        (a, E::Hold, Some((h, &[Effect::TakeStock]))),
        (a, E::Leave, Some((expired(R::Left), &[]))),
        (
            a,
            E::AdmissionTimeout,
            Some((expired(R::AdmissionTimeout), &[])),
        ),
        (a, E::Checkout, None),
        (a, E::Release, None),
        (a, E::PaymentSucceeded, None),
        (h, E::Hold, Some((h, &[]))),
        (h, E::Checkout, Some((p, &[]))),
        (
            h,
            E::Release,
            Some((expired(R::Released), &[Effect::ReturnStock])),
        ),
        (
            h,
            E::Leave,
            Some((expired(R::Released), &[Effect::ReturnStock])),
        ),
        (
            h,
            E::HoldTimeout,
            Some((expired(R::HoldTimeout), &[Effect::ReturnStock])),
        ),
        (h, E::AdmissionTimeout, None),
        (h, E::PaymentSucceeded, None),
        (p, E::Checkout, Some((p, &[]))),
        (p, E::PaymentSucceeded, Some((c, &[]))),
        (
            p,
            E::PaymentFailed,
            Some((expired(R::PaymentFailed), &[Effect::ReturnStock])),
        ),
        (
            p,
            E::PaymentTimeout,
            Some((expired(R::PaymentTimeout), &[Effect::ReturnStock])),
        ),
        (p, E::Release, None),
        (p, E::HoldTimeout, None),
        (c, E::PaymentSucceeded, Some((c, &[]))),
        (c, E::PaymentFailed, Some((c, &[]))),
        (c, E::Checkout, Some((c, &[]))),
        (c, E::PaymentTimeout, None),
        (c, E::Release, None),
        (x, E::PaymentSucceeded, Some((x, &[Effect::RefundRequired]))),
        (x, E::PaymentFailed, Some((x, &[]))),
        (x, E::Release, Some((x, &[]))),
        (x, E::HoldTimeout, Some((x, &[]))),
        (x, E::Hold, None),
        (x, E::Checkout, None),
        (x, E::Admit, None),
    ];
    for (from, event, expected) in table {
        let got = decide(from, event);
        match expected {
            Some((to, effects)) => {
                let d = got.unwrap_or_else(|e| panic!("{from} + {event:?}: {e}"));
                assert_eq!(d.to, to, "{from} + {event:?}");
                assert_eq!(d.effects, effects, "{from} + {event:?}");
                assert_eq!(d.changed, to != from, "{from} + {event:?}");
            }
            None => assert_eq!(
                got,
                Err(Rejected { state: from, event }),
                "{from} + {event:?}"
            ),
        }
    }
}

#[test]
fn states_round_trip_through_their_stored_form() {
    let mut all = vec![
        AttemptState::queued(),
        AttemptState::admitted(),
        AttemptState::hold(),
        AttemptState::payment_pending(),
        AttemptState::confirmed(),
    ];
    all.extend(ExpiryReason::ALL.map(AttemptState::expired));
    for s in all {
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
    /// units at most once (exactly once if it ended EXPIRED), and never leaves a terminal state.
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
                state: AttemptState::queued(), quantity: q, taken: 0, returned: 0,
            }).collect(),
        };
        for (who, ev) in steps {
            let Some(att) = sim.attempts.get_mut(who) else { continue };
            let event = AttemptEvent::ALL[ev];
            // Stock is checked before the machine is asked, as the hold path does.
            if event == E::Hold && att.state == AttemptState::admitted() && sim.stock < att.quantity {
                continue;
            }
            let before = att.state;
            match decide(att.state, event) {
                Err(rejected) => prop_assert_eq!(rejected.state, before),
                Ok(d) => {
                    if before.is_terminal() {
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
