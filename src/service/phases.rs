//! A sale's phases (`crate::domain::phase`): set before the sale opens, begun by the sale's
//! admitter when their time comes (the phase's admission and per-user limit applied, in the
//! ledger and then in the queue store), and the gate of every join while they run: a list
//! phase lets in the user ids uploaded for it, a codes phase the users who redeemed one of its
//! access codes. A user refused is told the next phase they may join in, and when.

use chrono::Utc;
use rand::Rng;

use super::{sales, App, ServiceError, ServiceResult};
use crate::domain::phase::{self, Audience, NewPhase, Phase};
use crate::domain::{AdminAction, Operator, SaleId, Target, UserId};
use crate::ledger::{AccessCode, PhaseCounts, Redeemed};

/// Most user ids one list holds.
pub const MAX_MEMBERS: u64 = 1_000_000;
/// Most access codes one phase has.
pub const MAX_CODES: u64 = 1_000_000;

/// A phase as operators see it: its settings and what it counted.
pub struct PhaseView {
    pub phase: Phase,
    /// Joins follow it now.
    pub in_effect: bool,
    /// Users who joined the line while it ran (none before it began).
    pub joined: Option<u64>,
    pub counts: PhaseCounts,
}

/// Sets the sale's phases, before it opens. The first phase's admission and per-user limit
/// are the sale's at once (it begins with the sale).
pub async fn set(
    app: &App,
    sale: SaleId,
    new: Vec<NewPhase>,
    operator: &Operator,
) -> ServiceResult<Vec<PhaseView>> {
    let record = sales::get(app, sale).await?;
    if record.sale.opens_at <= Utc::now() {
        return Err(ServiceError::validation(
            "phases",
            "phases are set before the sale opens (its opens_at has passed)",
        ));
    }
    let phases = phase::parse(new, &record.sale)
        .map_err(|e| ServiceError::validation(e.field, e.message))?;
    let entry = entry(operator, "setPhases", sale, shown(&phases));
    app.ledger.set_phases(sale, &phases, &entry).await?;
    let first = &phases[0];
    app.ledger
        .begin_phase(sale, 0, 0, &first.admission, first.per_user_limit)
        .await?;
    sales::follow_in_queue(app, sale).await?;
    app.offers.forget(sale);
    list(app, sale).await
}

/// The sale's phases on their timeline, with their figures.
pub async fn list(app: &App, sale: SaleId) -> ServiceResult<Vec<PhaseView>> {
    let record = sales::get(app, sale).await?;
    let phases = app.ledger.phases(sale).await?;
    if phases.is_empty() {
        return Ok(Vec::new());
    }
    let last = app.queue.refresh(sale, "", 0, &[]).await?.figures.last;
    let ranges = phase::serial_ranges(&phases, last);
    let counts = app.ledger.phase_counts(sale, &ranges).await?;
    let now = Utc::now();
    let current = (record.sale.opens_at <= now)
        .then(|| phase::in_effect(&phases, now))
        .flatten();
    Ok(phases
        .into_iter()
        .zip(ranges)
        .zip(counts)
        .enumerate()
        .map(|(i, ((phase, range), counts))| PhaseView {
            phase,
            in_effect: current == Some(i),
            joined: range.map(|(from, to)| to.saturating_sub(from.max(1))),
            counts,
        })
        .collect())
}

/// Whether `user` may join now, by the sale's phases (from the offer kept in memory); `code`
/// is the access code the join carries.
pub async fn gate(
    app: &App,
    sale: SaleId,
    user: &UserId,
    code: Option<&str>,
    phases: &[Phase],
) -> ServiceResult<()> {
    let Some(current) = phase::in_effect(phases, Utc::now()) else {
        return Ok(());
    };
    let p = &phases[current];
    if may_join(app, sale, current, p, user, code).await? {
        return Ok(());
    }
    let mut next = None;
    for (i, later) in phases.iter().enumerate().skip(current + 1) {
        if may_join(app, sale, i, later, user, None).await? {
            next = Some(later);
            break;
        }
    }
    Err(ServiceError::NotInPhase {
        phase: p.name.clone(),
        code_refused: p.audience == Audience::Codes && code.is_some(),
        next: next.map(|n| (n.name.clone(), n.joins_at())),
    })
}

async fn may_join(
    app: &App,
    sale: SaleId,
    position: usize,
    p: &Phase,
    user: &UserId,
    code: Option<&str>,
) -> ServiceResult<bool> {
    let position = position as u32;
    Ok(match p.audience {
        Audience::Everyone => true,
        Audience::List => {
            let ledger: &dyn crate::ledger::PhaseLedger = &*app.ledger;
            app.member_lists
                .contains(ledger, sale, position, p.members, user)
                .await?
        }
        Audience::Codes => app.ledger.redeem(sale, position, user, code).await? == Redeemed::Yes,
    })
}

/// What the sale's admitter does for the phases at this tick: admit only below `below` (a
/// lottery phase's pre-queue before it starts), and make the `draw` (its seed and first serial)
/// once it has.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Steps {
    pub below: Option<u64>,
    pub draw: Option<(String, u64)>,
}

/// Does what the phases' times call for (the sale's admitter, each tick): a lottery phase's
/// pre-queue opened (its first serial the line's next), or a phase started (its first serial
/// and its settings the sale's, in the ledger and then the queue store); and says what
/// admission does meanwhile.
pub async fn follow(app: &App, sale: SaleId, phases: &[Phase]) -> ServiceResult<Steps> {
    let now = Utc::now();
    let mut phases = phases.to_vec();
    match phase::due(&phases, now) {
        None => {}
        Some(phase::Due::Prequeue(i)) => {
            let first = app.queue.refresh(sale, "", 0, &[]).await?.figures.last + 1;
            if app.ledger.open_prequeue(sale, i as u32, first).await? {
                tracing::info!(%sale, phase = %phases[i].name, first_serial = first, "a lottery phase's pre-queue opened");
            }
            app.offers.forget(sale);
            phases[i].first_serial.get_or_insert(first);
        }
        Some(phase::Due::Begin(i)) => {
            let p = &phases[i];
            let first = app.queue.refresh(sale, "", 0, &[]).await?.figures.last + 1;
            let begun = app
                .ledger
                .begin_phase(sale, i as u32, first, &p.admission, p.per_user_limit)
                .await?;
            app.offers.forget(sale);
            if begun {
                tracing::info!(%sale, phase = %p.name, "phase begun");
                sales::follow_in_queue(app, sale).await?;
            }
            phases[i].first_serial.get_or_insert(first);
            phases[i].applied = true;
        }
    }
    // While a pre-queue is fenced, its first serial is read from the ledger at each tick, not
    // from the offer kept for a second: a rebuild of a line the store lost, on any replica,
    // moves it to the new line (`sales::put_in_queue`), and a fence of the lost line would let
    // the new line's pre-queue in early. One indexed read a tick, while a pre-queue waits.
    if phase::fence(&phases, now).is_some() {
        phases = app.ledger.phases(sale).await?;
    }
    Ok(Steps {
        below: phase::fence(&phases, now),
        draw: phase::draw(&phases, now).map(|(seed, from)| (seed.to_owned(), from)),
    })
}

/// The admin audit log's entry of an operator's change to a sale's phases.
fn entry(operator: &Operator, action: &str, sale: SaleId, after: serde_json::Value) -> AdminAction {
    AdminAction::new(operator, action, &Target::Sale(sale), None, Some(after))
}

/// How the audit log shows a sale's phases.
fn shown(phases: &[Phase]) -> serde_json::Value {
    phases
        .iter()
        .map(|p| {
            serde_json::json!({
                "name": p.name,
                "starts_at": p.starts_at,
                "audience": p.audience.as_str(),
                "rate_per_minute": p.admission.rate_per_minute,
                "max_active": p.admission.max_active,
                "per_user_limit": p.per_user_limit,
                "lottery_seed": p.lottery_seed,
                "joins_from": p.joins_from,
            })
        })
        .collect()
}

/// The phase at `position` of the sale, which must have the audience `audience`.
async fn phase_of(
    app: &App,
    sale: SaleId,
    position: u32,
    audience: Audience,
) -> ServiceResult<Phase> {
    sales::get(app, sale).await?;
    let phases = app.ledger.phases(sale).await?;
    let p = phases
        .into_iter()
        .nth(position as usize)
        .ok_or(ServiceError::NotFound("phase"))?;
    if p.audience != audience {
        return Err(ServiceError::validation(
            "position",
            format!(
                "phase {position} lets in {} (not a {} phase)",
                p.audience.as_str(),
                audience.as_str()
            ),
        ));
    }
    Ok(p)
}

/// The user ids of a CSV file: one a line, an optional `user_id` header, blank lines
/// skipped, quotes taken off; a line that is no user id refuses the file, naming the line.
pub fn csv_user_ids(csv: &[u8]) -> ServiceResult<Vec<String>> {
    let text = std::str::from_utf8(csv)
        .map_err(|_| ServiceError::validation("body", "the CSV is not UTF-8"))?;
    let mut users = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let id = line.trim().trim_matches('"');
        if id.is_empty() || (n == 0 && id.eq_ignore_ascii_case("user_id")) {
            continue;
        }
        users.push(checked_user(id, &format!("line {}", n + 1))?);
    }
    Ok(users)
}

fn checked_user(id: &str, at: &str) -> ServiceResult<String> {
    UserId::parse(id).map(|_| id.to_owned()).map_err(|_| {
        ServiceError::validation(
            "user_ids",
            format!("{at}: {id:?} is not a user id (1 to 256 printable characters)"),
        )
    })
}

/// Adds user ids to a list phase, all or none: how many were new, how many the list holds.
pub async fn add_members(
    app: &App,
    sale: SaleId,
    position: u32,
    users: Vec<String>,
    operator: &Operator,
) -> ServiceResult<(u64, u64)> {
    phase_of(app, sale, position, Audience::List).await?;
    for (i, id) in users.iter().enumerate() {
        checked_user(id, &format!("user_ids[{i}]"))?;
    }
    if users.len() as u64 > MAX_MEMBERS {
        return Err(ServiceError::validation(
            "user_ids",
            format!("a list holds at most {MAX_MEMBERS} user ids"),
        ));
    }
    let shown = serde_json::json!({ "position": position, "user_ids": users.len() });
    let entry = entry(operator, "addPhaseMembers", sale, shown);
    Ok(app
        .ledger
        .add_members(sale, position, &users, MAX_MEMBERS, &entry)
        .await?)
}

pub async fn members(
    app: &App,
    sale: SaleId,
    position: u32,
    after: Option<&str>,
    limit: u32,
) -> ServiceResult<Vec<String>> {
    phase_of(app, sale, position, Audience::List).await?;
    Ok(app.ledger.members(sale, position, after, limit).await?)
}

/// Letters and digits a code is made of: no 0/O, 1/I/L, so that it reads back over a phone.
const CODE_ALPHABET: &[u8] = b"23456789ABCDEFGHJKMNPQRSTUVWXYZ";

/// A new code: 12 characters of [`CODE_ALPHABET`] (59 bits), in three groups.
fn new_code(rng: &mut impl Rng) -> String {
    let chars: Vec<char> = (0..12)
        .map(|_| CODE_ALPHABET[rng.gen_range(0..CODE_ALPHABET.len())] as char)
        .collect();
    chars
        .chunks(4)
        .map(|c| c.iter().collect::<String>())
        .collect::<Vec<_>>()
        .join("-")
}

/// Generates `count` codes for a codes phase, each good for `max_uses` users (once each).
pub async fn generate_codes(
    app: &App,
    sale: SaleId,
    position: u32,
    count: u32,
    max_uses: u32,
    operator: &Operator,
) -> ServiceResult<Vec<String>> {
    phase_of(app, sale, position, Audience::Codes).await?;
    let codes: Vec<String> = {
        let mut rng = rand::thread_rng();
        (0..count).map(|_| new_code(&mut rng)).collect()
    };
    // The entry says how many, never the codes.
    let shown = serde_json::json!({ "position": position, "count": count, "max_uses": max_uses });
    let entry = entry(operator, "generateAccessCodes", sale, shown);
    app.ledger
        .add_codes(sale, position, &codes, max_uses, MAX_CODES, &entry)
        .await?;
    Ok(codes)
}

pub async fn codes(
    app: &App,
    sale: SaleId,
    position: u32,
    after: Option<&str>,
    limit: u32,
) -> ServiceResult<Vec<AccessCode>> {
    phase_of(app, sale, position, Audience::Codes).await?;
    Ok(app.ledger.codes(sale, position, after, limit).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_three_groups_of_unambiguous_characters() {
        let mut rng = rand::thread_rng();
        let code = new_code(&mut rng);
        assert_eq!(code.len(), 14);
        assert!(code
            .split('-')
            .all(|g| g.len() == 4 && g.bytes().all(|b| CODE_ALPHABET.contains(&b))));
        assert_ne!(new_code(&mut rng), code);
    }
}
