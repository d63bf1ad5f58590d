//! The valve's control law: how the admission rate follows the back end's pressure.
//!
//! AIMD — additive increase, multiplicative decrease — as TCP congestion control and Netflix's
//! concurrency-limits `AIMDLimit` do: while every signal is comfortably under its target the
//! rate grows by a fixed step each tick; as soon as one is over, the rate is multiplied by
//! `backoff` (< 1). Between `hold_band × target` and the target the rate holds, which damps
//! the saw-tooth near capacity. A gradient rule (Envoy's adaptive concurrency:
//! `limit × (target / measured)`) reacts faster to slow creep but amplifies noisy signals; the
//! signals here (queue ages, ratios, p99s) are noisy and scraped every few seconds, so AIMD's
//! bounded steps are the safer law. The rate never leaves `[min, max]`, and a stale signal
//! (Prometheus unreachable) holds the last rate rather than guessing: the valve never stalls. A
//! signal that is read and over its target still backs the rate off when another is stale.
//!
//! Pure and deterministic: the caller feeds readings and applies the result.

/// One pressure reading against its target (say outbox pending age: 3.2 s vs 5 s).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Reading {
    pub name: String,
    /// `None`: the signal could not be read this tick.
    pub value: Option<f64>,
    pub target: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ValveSettings {
    /// Users per minute, the floor and ceiling of the rate.
    pub min: f64,
    pub max: f64,
    /// Users per minute added per tick while every signal is under the hold band.
    pub step: f64,
    /// Factor applied when a signal is over its target.
    pub backoff: f64,
    /// Fraction of a target under which a signal counts as comfortable.
    pub hold_band: f64,
}

/// Why the rate moved (or did not) on the last tick; exported as a metric label.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Change {
    /// Every signal comfortably under its target: one step up.
    Increase,
    /// `signal` is over its target: multiplied by `backoff`.
    Decrease { signal: String },
    /// Some signal is between the hold band and its target: unchanged.
    Hold,
    /// `signal` could not be read (and none read is over): unchanged.
    Stale { signal: String },
}

impl Change {
    /// The metric label of the change.
    pub fn reason(&self) -> &'static str {
        match self {
            Change::Increase => "increase",
            Change::Decrease { .. } => "decrease",
            Change::Hold => "hold",
            Change::Stale { .. } => "stale",
        }
    }

    /// The signal that caused it, if one did.
    pub fn signal(&self) -> Option<&str> {
        match self {
            Change::Decrease { signal } | Change::Stale { signal } => Some(signal),
            Change::Increase | Change::Hold => None,
        }
    }
}

/// What a sale's admitter publishes of its controller after each tick, for admins and for
/// the replica that takes over the sale's lease (it starts from `rate`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ControllerState {
    pub rate: f64,
    pub last: Change,
    pub readings: Vec<Reading>,
    pub updated_at_ms: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Valve {
    pub settings: ValveSettings,
    pub rate: f64,
    pub last: Change,
}

impl Valve {
    pub fn new(settings: ValveSettings, initial: f64) -> Self {
        Valve {
            settings,
            rate: initial.clamp(settings.min, settings.max),
            last: Change::Hold,
        }
    }

    /// One control step.
    pub fn tick(&mut self, readings: &[Reading]) -> Change {
        let s = self.settings;
        // Known pressure wins over a missing reading: backing off is always safe.
        let change = if let Some(over) = readings
            .iter()
            .find(|r| r.value.is_some_and(|v| v > r.target))
        {
            self.rate = (self.rate * s.backoff).max(s.min);
            Change::Decrease {
                signal: over.name.clone(),
            }
        } else if let Some(stale) = readings.iter().find(|r| r.value.is_none()) {
            Change::Stale {
                signal: stale.name.clone(),
            }
        } else if readings
            .iter()
            .all(|r| r.value.is_some_and(|v| v <= r.target * s.hold_band))
        {
            self.rate = (self.rate + s.step).min(s.max);
            Change::Increase
        } else {
            Change::Hold
        };
        self.last = change.clone();
        change
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SETTINGS: ValveSettings = ValveSettings {
        min: 60.0,
        max: 6000.0,
        step: 120.0,
        backoff: 0.7,
        hold_band: 0.8,
    };

    /// A simulated back end: it handles `capacity` users a minute; users admitted beyond that
    /// wait in a backlog, and the latency signal grows with the backlog (queueing delay).
    struct Plant {
        capacity: f64,
        backlog: f64,
    }

    impl Plant {
        /// One tick of a minute at `rate`; returns the latency (seconds) the signal would read.
        fn run(&mut self, rate: f64) -> f64 {
            self.backlog = (self.backlog + rate - self.capacity).max(0.0);
            0.2 + 60.0 * self.backlog / self.capacity
        }
    }

    fn reading(latency: f64) -> Vec<Reading> {
        vec![Reading {
            name: "ledger_latency_p99".into(),
            value: Some(latency),
            target: 2.0,
        }]
    }

    #[test]
    fn converges_near_capacity_without_wild_swings() {
        let mut valve = Valve::new(SETTINGS, 120.0);
        let mut plant = Plant {
            capacity: 3000.0,
            backlog: 0.0,
        };
        let mut rates = Vec::new();
        for _ in 0..300 {
            let latency = plant.run(valve.rate);
            valve.tick(&reading(latency));
            rates.push(valve.rate);
        }
        let settled = &rates[200..];
        let mean = settled.iter().sum::<f64>() / settled.len() as f64;
        let (lo, hi) = settled
            .iter()
            .fold((f64::MAX, f64::MIN), |(l, h), r| (l.min(*r), h.max(*r)));
        assert!(
            (0.7 * 3000.0..=1.05 * 3000.0).contains(&mean),
            "mean {mean}"
        );
        assert!(
            lo >= 0.55 * 3000.0 && hi <= 1.15 * 3000.0,
            "swings {lo}..{hi}"
        );
    }

    #[test]
    fn backs_off_within_a_few_ticks_when_capacity_drops() {
        let mut valve = Valve::new(SETTINGS, 120.0);
        let mut plant = Plant {
            capacity: 3000.0,
            backlog: 0.0,
        };
        for _ in 0..200 {
            let latency = plant.run(valve.rate);
            valve.tick(&reading(latency));
        }
        plant.capacity = 1000.0;
        let ticks = (1..=20)
            .find(|_| {
                let latency = plant.run(valve.rate);
                valve.tick(&reading(latency));
                valve.rate <= 1000.0
            })
            .expect("the rate falls below the new capacity");
        assert!(ticks <= 6, "took {ticks} ticks");
        // And it climbs back to the ceiling when the pressure is gone for good.
        plant.capacity = 1_000_000.0;
        for _ in 0..100 {
            let latency = plant.run(valve.rate);
            valve.tick(&reading(latency));
        }
        assert_eq!(valve.rate, SETTINGS.max);
    }

    #[test]
    fn a_stale_signal_holds_the_rate_and_says_so() {
        let mut valve = Valve::new(SETTINGS, 1000.0);
        let stale = vec![
            Reading {
                name: "outbox_age".into(),
                value: Some(0.1),
                target: 5.0,
            },
            Reading {
                name: "kafka_lag".into(),
                value: None,
                target: 100.0,
            },
        ];
        assert_eq!(
            valve.tick(&stale),
            Change::Stale {
                signal: "kafka_lag".into()
            }
        );
        assert_eq!(valve.rate, 1000.0);
        assert_eq!(
            valve.tick(&reading(0.1)),
            Change::Increase,
            "control resumes"
        );
    }

    #[test]
    fn known_pressure_backs_off_even_when_another_signal_is_stale() {
        let mut valve = Valve::new(SETTINGS, 1000.0);
        let mut readings = reading(9.0);
        readings.insert(
            0,
            Reading {
                name: "kafka_lag".into(),
                value: None,
                target: 100.0,
            },
        );
        assert_eq!(
            valve.tick(&readings),
            Change::Decrease {
                signal: "ledger_latency_p99".into()
            }
        );
        assert_eq!(valve.rate, 700.0);
    }

    proptest::proptest! {
        /// Whatever the readings, the rate stays a finite number within [min, max].
        #[test]
        fn no_reading_sequence_leaves_the_bounds(
            initial in -1e9f64..1e9,
            values in proptest::collection::vec(proptest::option::of(0.0f64..20.0), 1..200),
        ) {
            let mut valve = Valve::new(SETTINGS, initial);
            for value in values {
                valve.tick(&[Reading { name: "x".into(), value, target: 2.0 }]);
                proptest::prop_assert!(valve.rate.is_finite());
                proptest::prop_assert!(valve.rate >= SETTINGS.min && valve.rate <= SETTINGS.max);
            }
        }
    }

    #[test]
    fn the_rate_never_leaves_its_bounds() {
        let mut valve = Valve::new(SETTINGS, 1e9);
        assert_eq!(valve.rate, SETTINGS.max);
        for _ in 0..100 {
            valve.tick(&reading(100.0));
        }
        assert_eq!(valve.rate, SETTINGS.min);
        for _ in 0..1000 {
            valve.tick(&reading(0.0));
            assert!(valve.rate >= SETTINGS.min && valve.rate <= SETTINGS.max);
        }
        assert_eq!(valve.rate, SETTINGS.max);
    }
}
