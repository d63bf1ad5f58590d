//! A visitor's way through a gate: a visitor cookie and an API token behind the gate's
//! challenge (one place per browser: a refresh or a second tab keeps it), the session an
//! admission is traded for, its renewal (at most one ledger and one store write a minute per
//! visitor), and its end by the origin or an operator.

use std::net::IpAddr;
use std::sync::Arc;

use uuid::Uuid;

use super::check::{cookie, live_session, now};
use crate::auth::gate_cookies::{
    gate_of_visitor, is_visitor_user, new_visitor, visitor_user, ReturnTo, Session, VISITOR_COOKIE,
};
use crate::domain::gate::Gate;
use crate::domain::{AttemptEvent, AttemptId, UserId};
use crate::gate::challenge::ChallengeError;
use crate::ledger::AttemptQuery;
use crate::service::{App, ServiceError, ServiceResult};

/// How long a visitor's API token lasts (the page asks for a new one when it reloads).
const TOKEN_SECS: i64 = 12 * 3600;
/// How long a visitor cookie lasts.
pub const VISITOR_COOKIE_SECS: i64 = 7 * 24 * 3600;

/// A visitor let in to the gate's line.
pub struct Entered {
    pub visitor: String,
    /// The visitor cookie to set (`None`: the request's own still holds).
    pub cookie: Option<String>,
    /// The bearer token the page joins and asks its status with.
    pub token: String,
    pub gate: Arc<Gate>,
}

/// A session traded for, or renewed: its cookie's value and where the visitor goes next.
pub struct SessionGiven {
    pub cookie: String,
    pub max_age: i64,
    pub location: String,
    pub gate: Arc<Gate>,
}

pub fn gate_of(app: &App, id: Uuid) -> ServiceResult<Arc<Gate>> {
    app.gates.gate(id).ok_or(ServiceError::NotFound("gate"))
}

/// Lets a visitor into `gate`'s line: the browser's visitor cookie if it has one, else a new
/// visitor once the gate's challenge is passed.
pub async fn enter(
    app: &App,
    gate: Uuid,
    cookies: &str,
    answer: Option<&str>,
    address: Option<IpAddr>,
) -> ServiceResult<Entered> {
    let gate = gate_of(app, gate)?;
    let signer = &app.gates.signer;
    let known = cookie(cookies, VISITOR_COOKIE).and_then(|c| signer.visitor_of(gate.id, c, now()));
    let (visitor, cookie) = match known {
        Some(visitor) => (visitor, None),
        None => {
            app.gates
                .verifier
                .verify(&app.config.gate, gate.challenge, answer, address)
                .await
                .map_err(challenge_error)?;
            let visitor = new_visitor();
            let cookie = signer.visitor_cookie(gate.id, &visitor, now() + VISITOR_COOKIE_SECS);
            metrics::counter!("sluice_gate_visitors_total").increment(1);
            (visitor, Some(cookie))
        }
    };
    let token = signer.visitor_token(gate.id, &visitor, now() + TOKEN_SECS);
    Ok(Entered {
        visitor,
        cookie,
        token,
        gate,
    })
}

/// Who may join a sale: a gate's visitor its gate's line only (it passed that gate's
/// challenge, and no other sale knows it); a user with their own token a gate's line once past
/// the gate's challenge, as a visitor entering the gate is.
pub async fn check_join(
    app: &App,
    sale: crate::domain::SaleId,
    user: &UserId,
    answer: Option<&str>,
    address: Option<IpAddr>,
) -> ServiceResult<()> {
    let fronting = app.gates.set().by_sale.get(&sale).cloned();
    if is_visitor_user(user) {
        let own = gate_of_visitor(user).and_then(|g| app.gates.gate(g));
        return match (own, fronting) {
            (Some(own), Some(line)) if own.id == line.id => Ok(()),
            _ => Err(ServiceError::ChallengeFailed(
                "a gate's visitor joins that gate's line only".into(),
            )),
        };
    }
    let Some(gate) = fronting else {
        return Ok(());
    };
    if gate.challenge == crate::domain::gate::Challenge::None {
        return Ok(());
    }
    app.gates
        .verifier
        .verify(&app.config.gate, gate.challenge, answer, address)
        .await
        .map_err(challenge_error)
}

fn challenge_error(e: ChallengeError) -> ServiceError {
    match e {
        ChallengeError::Unreachable(_) => ServiceError::Unavailable("the challenge's provider"),
        other => ServiceError::ChallengeFailed(other.to_string()),
    }
}

/// The visitor whose cookie a request carries for `gate`.
fn visitor_of(app: &App, gate: &Gate, cookies: &str) -> ServiceResult<String> {
    cookie(cookies, VISITOR_COOKIE)
        .and_then(|c| app.gates.signer.visitor_of(gate.id, c, now()))
        .ok_or(ServiceError::AdmissionTokenInvalid)
}

fn return_to(app: &App, gate: &Gate, value: &str) -> ServiceResult<ReturnTo> {
    let to = app
        .gates
        .signer
        .return_to_of(gate.id, value, now())
        .ok_or_else(|| ServiceError::validation("return_to", "not a way back this gate gave"))?;
    if !gate.may_return_to(&to.authority) {
        return Err(ServiceError::validation(
            "return_to",
            "names a host the gate does not guard",
        ));
    }
    Ok(to)
}

/// Moves the attempt's deadline to a session's length from now, in the ledger and the queue
/// store; false when the attempt is no longer admitted.
async fn extend(app: &App, gate: &Gate, attempt: AttemptId) -> ServiceResult<Option<i64>> {
    let secs = gate.session_minutes * 60;
    if !app.ledger.extend_admission(attempt, secs).await? {
        return Ok(None);
    }
    let ends = now() + i64::from(secs);
    app.queue
        .restore(attempt, Some(ends * 1000))
        .await
        .inspect_err(|_| app.gates.note_store(false))?;
    Ok(Some(ends))
}

fn given(app: &App, gate: Arc<Gate>, session: &Session, to: &ReturnTo) -> SessionGiven {
    SessionGiven {
        cookie: app.gates.signer.session_cookie(gate.id, session),
        max_age: session.ends - now(),
        location: to.url(),
        gate,
    }
}

/// Trades an admission of the visitor's for a session, and sends the visitor back to
/// `return_to`. Another visitor's admission is refused.
pub async fn trade(
    app: &App,
    gate: Uuid,
    cookies: &str,
    attempt: AttemptId,
    admission_token: &str,
    return_to_value: &str,
) -> ServiceResult<SessionGiven> {
    let gate = gate_of(app, gate)?;
    let visitor = visitor_of(app, &gate, cookies)?;
    let to = return_to(app, &gate, return_to_value)?;
    let user = visitor_user(gate.id, &visitor);
    if attempt.sale != gate.sale {
        return Err(ServiceError::AdmissionTokenInvalid);
    }
    app.admission
        .verify(admission_token, attempt, &user)
        .map_err(|_| ServiceError::AdmissionTokenInvalid)?;
    let Some(ends) = extend(app, &gate, attempt).await? else {
        return Err(ServiceError::AdmissionExpired);
    };
    metrics::counter!("sluice_gate_sessions_total", "event" => "started").increment(1);
    let now = now();
    let session = Session {
        visitor,
        attempt,
        ends,
        renewed: now,
    };
    Ok(given(app, gate, &session, &to))
}

/// Renews the request's session and sends the visitor back; a session that has ended sends
/// the visitor to the line again (`Err(location)` is the waiting page).
pub async fn renew(
    app: &App,
    gate: Uuid,
    cookies: &str,
    return_to_value: &str,
) -> ServiceResult<Result<SessionGiven, String>> {
    let gate = gate_of(app, gate)?;
    let to = return_to(app, &gate, return_to_value)?;
    let now = now();
    let page = || {
        let original = crate::domain::gate::Original {
            proto: to.proto.clone(),
            authority: to.authority.clone(),
            uri: to.uri.clone(),
            ..Default::default()
        };
        super::check::waiting_page(app, &gate, &original, now)
    };
    let Some(mut session) = live_session(app, &gate, cookies, now) else {
        return Ok(Err(page()));
    };
    match extend(app, &gate, session.attempt).await? {
        Some(ends) => {
            metrics::counter!("sluice_gate_sessions_total", "event" => "renewed").increment(1);
            session.ends = ends;
            session.renewed = now;
            Ok(Ok(given(app, gate, &session, &to)))
        }
        None => Ok(Err(page())),
    }
}

/// Ends `visitor`'s session of `gate` (the origin's call: checkout done, logout; or an
/// operator's): its place goes to the next visitor, and its cookie passes no more, on any
/// replica. False when the visitor had no session.
pub async fn end(app: &App, gate: Uuid, visitor: &str) -> ServiceResult<bool> {
    let gate = gate_of(app, gate)?;
    if visitor.len() != 32 || !visitor.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ServiceError::validation(
            "visitor_id",
            "not a visitor id (32 hex digits)",
        ));
    }
    let user = visitor_user(gate.id, visitor);
    let query = AttemptQuery {
        state: Some("ADMITTED"),
        user: Some(user.clone()),
        before: None,
        limit: 10,
    };
    let admitted = app.ledger.list_attempts(gate.sale, &query).await?;
    let until = chrono::Utc::now() + chrono::Duration::minutes(i64::from(gate.session_minutes) + 1);
    for a in &admitted {
        app.ledger.end_gate_session(gate.id, a.id, until).await?;
        app.gates.note_ended(a.id).await;
        super::super::attempt_event::apply_event(app, a.id, &user, AttemptEvent::Leave).await?;
        metrics::counter!("sluice_gate_sessions_total", "event" => "ended").increment(1);
    }
    Ok(!admitted.is_empty())
}

/// The `Set-Cookie` value of a gate's cookie: HttpOnly, SameSite=Lax, Secure over HTTPS,
/// for the whole site (or the gate's cookie domain).
pub fn set_cookie(gate: &Gate, name: &str, value: &str, max_age: i64, https: bool) -> String {
    let mut c = format!("{name}={value}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Lax");
    if https {
        c.push_str("; Secure");
    }
    if let Some(domain) = &gate.cookie_domain {
        c.push_str("; Domain=");
        c.push_str(domain);
    }
    c
}
