//! A sale's phases: a member presale from 19:00, then the general sale from 20:00. Each phase
//! says who may join while it runs and the admission rate, the cap on active users and the
//! per-user limit it runs with; the stock is the sale's, so what one phase leaves the next one
//! sells. The first phase starts when the sale opens and opens as the sale does (FIFO, or the
//! lottery drawn at the opening). A later phase opens FIFO (its joins queue behind the line as
//! it stands), or by lottery: its audience joins a pre-queue from `joins_from`, which the
//! admitter does not reach until the phase starts (those still waiting from before are
//! admitted first), and at the start the pre-queue is drawn.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::sale::{is_unprintable, Admission, Sale};

/// Most phases one sale has.
pub const MAX_PHASES: usize = 10;

/// Who may join while a phase runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Audience {
    Everyone,
    /// The user ids an operator uploaded for the phase.
    List,
    /// Users who redeemed one of the phase's access codes.
    Codes,
}

impl Audience {
    pub fn as_str(self) -> &'static str {
        match self {
            Audience::Everyone => "everyone",
            Audience::List => "list",
            Audience::Codes => "codes",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "everyone" => Some(Audience::Everyone),
            "list" => Some(Audience::List),
            "codes" => Some(Audience::Codes),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Phase {
    pub name: String,
    pub starts_at: DateTime<Utc>,
    pub audience: Audience,
    /// The rate and cap the sale admits at while the phase runs (manual).
    pub admission: Admission,
    pub per_user_limit: u32,
    /// A later phase drawn by lottery: its seed (the order is SHA-1 of `<seed>:<user id>`).
    pub lottery_seed: Option<String>,
    /// A lottery phase: when its audience starts joining its pre-queue (before `starts_at`).
    pub joins_from: Option<DateTime<Utc>>,
    /// The first serial of the line joined in this phase, written when its joins began (the
    /// first phase: 0): the phase's joins, admissions and sales are counted by it, and a
    /// lottery phase's pre-queue is fenced and drawn from it.
    pub first_serial: Option<u64>,
    /// Its settings are the sale's (it has started).
    pub applied: bool,
    /// How many user ids its list holds (a list phase): the version of the list a replica
    /// keeps in memory.
    pub members: u64,
}

impl Phase {
    /// When its audience may start joining.
    pub fn joins_at(&self) -> DateTime<Utc> {
        self.joins_from.unwrap_or(self.starts_at)
    }
}

/// A phase refused: the field at fault (`phases.<name>`) and why, naming the phase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhaseError {
    pub field: String,
    pub message: String,
}

impl PhaseError {
    fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        PhaseError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// What an admin asks for, before [`parse`].
pub struct NewPhase {
    pub name: String,
    pub starts_at: DateTime<Utc>,
    pub audience: Audience,
    pub rate_per_minute: u32,
    pub max_active: u32,
    pub per_user_limit: u32,
    /// Drawn by lottery (a later phase only), with this seed (`None`: one is drawn).
    pub lottery: Option<Option<String>>,
    pub joins_from: Option<DateTime<Utc>>,
}

/// Checks a sale's phases: 1 to [`MAX_PHASES`], named, in order of start, the first starting
/// when the sale opens and every one before it closes; each with the limits a sale takes.
pub fn parse(new: Vec<NewPhase>, sale: &Sale) -> Result<Vec<Phase>, PhaseError> {
    if new.is_empty() || new.len() > MAX_PHASES {
        return Err(PhaseError::new("phases", "give 1 to 10 phases"));
    }
    let mut phases: Vec<Phase> = Vec::with_capacity(new.len());
    for (i, p) in new.into_iter().enumerate() {
        let name = p.name.trim().to_owned();
        if name.is_empty() || name.chars().count() > 100 || name.chars().any(is_unprintable) {
            return Err(PhaseError::new(
                "phases.name",
                format!("phase {i}: a name of 1 to 100 printable characters"),
            ));
        }
        if phases.iter().any(|q| q.name == name) {
            return Err(PhaseError::new(
                "phases.name",
                format!("phase {i}: the name {name:?} is used by an earlier phase"),
            ));
        }
        // The same instant to the millisecond (the embedded ledger keeps milliseconds).
        if i == 0 && p.starts_at.timestamp_millis() != sale.opens_at.timestamp_millis() {
            return Err(PhaseError::new(
                "phases.starts_at",
                "the first phase starts when the sale opens (its opens_at)",
            ));
        }
        let starts_at = if i == 0 { sale.opens_at } else { p.starts_at };
        if let Some(before) = phases.last() {
            if p.starts_at <= before.starts_at {
                return Err(PhaseError::new(
                    "phases.starts_at",
                    format!("phase {i} must start after phase {}", i - 1),
                ));
            }
        }
        if sale.closes_at.is_some_and(|end| p.starts_at >= end) {
            return Err(PhaseError::new(
                "phases.starts_at",
                format!("phase {i} starts after the sale closes"),
            ));
        }
        let admission = Admission::parse(p.rate_per_minute, p.max_active, None).map_err(|e| {
            PhaseError::new(
                format!("phases.{}", e.field),
                format!("phase {i}: {}", e.message),
            )
        })?;
        if !(1..=1000).contains(&p.per_user_limit) {
            return Err(PhaseError::new(
                "phases.per_user_limit",
                format!("phase {i}: must be between 1 and 1000"),
            ));
        }
        let lottery_seed = match (i, p.lottery) {
            (_, None) => None,
            (0, Some(_)) => return Err(PhaseError::new(
                "phases.lottery",
                "the first phase opens as the sale does: give the sale `opening: lottery_at_open`",
            )),
            (_, Some(Some(seed)))
                if seed.is_empty() || seed.len() > 64 || seed.chars().any(is_unprintable) =>
            {
                return Err(PhaseError::new(
                    "phases.lottery_seed",
                    format!("phase {i}: 1 to 64 printable characters"),
                ))
            }
            (_, Some(seed)) => {
                Some(seed.unwrap_or_else(|| hex::encode(rand::random::<[u8; 16]>())))
            }
        };
        match (&lottery_seed, p.joins_from, phases.last()) {
            (None, Some(_), _) => {
                return Err(PhaseError::new(
                    "phases.joins_from",
                    format!("phase {i}: only a lottery phase has a pre-queue (joins_from)"),
                ))
            }
            (Some(_), None, _) => {
                return Err(PhaseError::new(
                    "phases.joins_from",
                    format!(
                        "phase {i}: a lottery phase needs joins_from, when its pre-queue opens"
                    ),
                ))
            }
            (Some(_), Some(from), Some(before))
                if from <= before.starts_at || from >= p.starts_at =>
            {
                return Err(PhaseError::new(
                    "phases.joins_from",
                    format!(
                        "phase {i}: after phase {} starts and before this one does",
                        i - 1
                    ),
                ))
            }
            _ => {}
        }
        phases.push(Phase {
            name,
            starts_at,
            audience: p.audience,
            admission,
            per_user_limit: p.per_user_limit,
            lottery_seed,
            joins_from: p.joins_from,
            first_serial: None,
            applied: false,
            members: 0,
        });
    }
    Ok(phases)
}

/// The phase joins follow at `now`: the last one whose joins began, or the first before the
/// opening (joins before it wait for it, as a sale's do). A lottery phase's joins begin when
/// the admitter has opened its pre-queue (its first serial written), at `joins_from`.
pub fn in_effect(phases: &[Phase], now: DateTime<Utc>) -> Option<usize> {
    if phases.is_empty() {
        return None;
    }
    let joining =
        |p: &Phase| p.joins_at() <= now && (p.lottery_seed.is_none() || p.first_serial.is_some());
    Some(phases.iter().rposition(joining).unwrap_or(0))
}

/// What the sale's admitter does for its phases at a tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// Phase `i` starts: its settings become the sale's (and its first serial is written).
    Begin(usize),
    /// Lottery phase `i`'s pre-queue opens: its first serial is written.
    Prequeue(usize),
}

/// What is due at `now`, the earliest first. The first phase begins with the sale.
pub fn due(phases: &[Phase], now: DateTime<Utc>) -> Option<Due> {
    phases.iter().enumerate().skip(1).find_map(|(i, p)| {
        if p.starts_at <= now && !p.applied {
            Some(Due::Begin(i))
        } else if p.lottery_seed.is_some() && p.joins_at() <= now && p.first_serial.is_none() {
            Some(Due::Prequeue(i))
        } else {
            None
        }
    })
}

/// The serial admission stops below at `now`: a lottery phase's pre-queue, until it starts.
pub fn fence(phases: &[Phase], now: DateTime<Utc>) -> Option<u64> {
    phases
        .iter()
        .filter(|p| p.lottery_seed.is_some() && now < p.starts_at)
        .find_map(|p| p.first_serial)
}

/// The draw due at `now`: the last lottery phase that has started, its seed and first serial.
pub fn draw(phases: &[Phase], now: DateTime<Utc>) -> Option<(&str, u64)> {
    phases
        .iter()
        .rev()
        .find_map(|p| match (&p.lottery_seed, p.first_serial) {
            (Some(seed), Some(from)) if p.starts_at <= now => Some((seed.as_str(), from)),
            _ => None,
        })
}

/// The first phase after `from` that `may_join` lets the user into: when they can join.
pub fn next_for(
    phases: &[Phase],
    from: usize,
    may_join: impl Fn(usize, &Phase) -> bool,
) -> Option<&Phase> {
    phases
        .iter()
        .enumerate()
        .skip(from + 1)
        .find(|(i, p)| may_join(*i, p))
        .map(|(_, p)| p)
}

/// The serial range `[first, end)` each phase's joins took, for its figures: a phase not begun
/// has none; the last begun one runs to `last + 1`.
pub fn serial_ranges(phases: &[Phase], last: u64) -> Vec<Option<(u64, u64)>> {
    (0..phases.len())
        .map(|i| {
            let first = if i == 0 { 0 } else { phases[i].first_serial? };
            let end = phases[i + 1..]
                .iter()
                .find_map(|p| p.first_serial)
                .unwrap_or(last + 1);
            Some((first, end.max(first)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Duration;

    fn phase(name: &str, starts_at: DateTime<Utc>, audience: Audience) -> Phase {
        Phase {
            name: name.into(),
            starts_at,
            audience,
            admission: Admission::parse(60, 10, None).unwrap(),
            per_user_limit: 2,
            lottery_seed: None,
            joins_from: None,
            first_serial: None,
            applied: false,
            members: 0,
        }
    }

    #[test]
    fn joins_follow_the_last_phase_started_and_the_first_before_the_opening() {
        let t = Utc::now();
        let phases = vec![
            phase("members", t, Audience::List),
            phase("general", t + Duration::hours(1), Audience::Everyone),
        ];
        assert_eq!(in_effect(&phases, t - Duration::minutes(5)), Some(0));
        assert_eq!(in_effect(&phases, t + Duration::minutes(5)), Some(0));
        assert_eq!(in_effect(&phases, t + Duration::hours(2)), Some(1));
        assert_eq!(in_effect(&[], t), None);
        assert_eq!(
            due(&phases, t + Duration::minutes(5)),
            None,
            "the first begins with the sale"
        );
        assert_eq!(due(&phases, t + Duration::hours(2)), Some(Due::Begin(1)));
        let mut begun = phases.clone();
        begun[1].first_serial = Some(41);
        begun[1].applied = true;
        assert_eq!(due(&begun, t + Duration::hours(2)), None);
        assert_eq!(
            next_for(&phases, 0, |_, p| p.audience == Audience::Everyone).map(|p| &p.name),
            Some(&"general".to_owned())
        );
        assert_eq!(
            serial_ranges(&begun, 100),
            vec![Some((0, 41)), Some((41, 101))]
        );
        assert_eq!(serial_ranges(&phases, 100), vec![Some((0, 101)), None]);
    }

    #[test]
    fn a_lottery_phase_fences_its_pre_queue_until_it_starts_then_draws_it() {
        let t = Utc::now();
        let mut phases = vec![
            phase("members", t, Audience::List),
            phase("general", t + Duration::hours(1), Audience::Everyone),
        ];
        phases[1].lottery_seed = Some("s".into());
        phases[1].joins_from = Some(t + Duration::minutes(30));
        let (before, during, after) = (
            t + Duration::minutes(10),
            t + Duration::minutes(40),
            t + Duration::hours(2),
        );
        assert_eq!(due(&phases, before), None);
        assert_eq!(due(&phases, during), Some(Due::Prequeue(1)));
        // Until the pre-queue is opened, joins follow the members' phase.
        assert_eq!(in_effect(&phases, during), Some(0));
        phases[1].first_serial = Some(500);
        assert_eq!(in_effect(&phases, during), Some(1));
        assert_eq!(fence(&phases, during), Some(500));
        assert_eq!(draw(&phases, during), None);
        assert_eq!(due(&phases, after), Some(Due::Begin(1)));
        phases[1].applied = true;
        assert_eq!(fence(&phases, after), None);
        assert_eq!(draw(&phases, after), Some(("s", 500)));
    }
}
