//! The forward-auth check: what a proxy is told about one request of a guarded site. An
//! admitted visitor's session is its cookie's signature, its end and this replica's list of
//! sessions ended early: no queue-store call and no ledger read.

use std::sync::Arc;

use ring::digest::{digest, SHA256};
use subtle::ConstantTimeEq;

use super::App;
use crate::auth::gate_cookies::{ReturnTo, Session, SESSION_COOKIE};
use crate::domain::gate::{Gate, Original, Verdict};

/// How long a signed `return_to` may wait for its visitor (the line can be long).
const RETURN_TO_SECS: i64 = 24 * 3600;

/// What the proxy is told.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// The request goes on to the site; for an admitted visitor, who and until when.
    Pass {
        outcome: &'static str,
        visitor: Option<String>,
        session_ends: Option<i64>,
    },
    /// A page request whose session is due for renewal: through sluice's renewal and back.
    Renew { location: String },
    /// Not without a place: a page request goes to the waiting page (`location`), anything else
    /// is refused with `status` and the page's address.
    Wait {
        outcome: &'static str,
        location: String,
        page: bool,
        status: u16,
    },
}

/// The value of cookie `name` in a `Cookie` header.
pub fn cookie<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|pair| {
        let (k, v) = pair.trim().split_once('=')?;
        (k == name).then_some(v.trim_matches('"'))
    })
}

/// Seconds since the epoch.
pub fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// Whether a value's SHA-256 is `hex_digest` (the gate keeps the digest, never the value).
fn secret_matches(value: &str, hex_digest: &str) -> bool {
    let d = hex::encode(digest(&SHA256, value.as_bytes()));
    bool::from(d.as_bytes().ct_eq(hex_digest.as_bytes()))
}

/// When a session is due for renewal: a minute after the last, or half its length if shorter.
fn renewal_due(gate: &Gate, s: &Session, now: i64) -> bool {
    let every = (i64::from(gate.session_minutes) * 60 / 2).min(60);
    now - s.renewed >= every
}

/// The session a request carries for `gate`, if it still lets its visitor through.
pub fn live_session(app: &App, gate: &Gate, cookies: &str, now: i64) -> Option<Session> {
    let value = cookie(cookies, SESSION_COOKIE)?;
    let s = app.gates.signer.session_of(gate.id, value)?;
    let live =
        s.ends > now && s.attempt.sale == gate.sale && !app.gates.set().ended.contains(&s.attempt);
    live.then_some(s)
}

/// Where sluice's own paths are reached on the guarded host.
pub fn on_site(app: &App, req: &Original, path: &str) -> String {
    format!(
        "{}://{}{}{path}",
        req.proto, req.authority, app.config.gate.path_prefix
    )
}

/// The way back to `req`, signed for `gate`.
fn way_back(app: &App, gate: &Gate, req: &Original, now: i64) -> String {
    let to = ReturnTo {
        proto: req.proto.clone(),
        authority: req.authority.clone(),
        uri: req.uri.clone(),
    };
    app.gates
        .signer
        .return_to(gate.id, &to, now + RETURN_TO_SECS)
}

/// The waiting page of `gate` for a visitor of `req`, with a signed way back to it.
pub fn waiting_page(app: &App, gate: &Gate, req: &Original, now: i64) -> String {
    let back = way_back(app, gate, req, now);
    on_site(app, req, &format!("/?gate={}&return_to={back}", gate.id))
}

fn counted(outcome: &'static str) {
    metrics::counter!("sluice_gate_checks_total", "outcome" => outcome).increment(1);
}

/// What the proxy is told about `req`, whose `Cookie` header is `cookies` and whose other
/// headers `header` gives by name.
pub fn check(
    app: &App,
    req: &Original,
    cookies: &str,
    header: impl Fn(&str) -> Option<String>,
) -> Answer {
    let set = app.gates.set();
    let Some(gate) = set.gates.iter().find(|g| g.guards(req)).map(Arc::clone) else {
        counted("not_guarded");
        return pass("not_guarded");
    };
    drop(set);
    match gate.verdict(req, header, secret_matches) {
        Verdict::NotGuarded => {
            counted("not_guarded");
            return pass("not_guarded");
        }
        Verdict::Passes(rule) => {
            counted("bypass");
            metrics::counter!("sluice_gate_bypasses_total", "rule" => rule.as_str()).increment(1);
            return pass("bypass");
        }
        Verdict::NeedsSession => {}
    }
    let now = now();
    if let Some(s) = live_session(app, &gate, cookies, now) {
        if req.is_page() && renewal_due(&gate, &s, now) {
            counted("renew");
            let back = way_back(app, &gate, req, now);
            let path = format!("/v1/gates/{}/session/renew?return_to={back}", gate.id);
            return Answer::Renew {
                location: on_site(app, req, &path),
            };
        }
        counted("session");
        return Answer::Pass {
            outcome: "session",
            visitor: Some(s.visitor),
            session_ends: Some(s.ends),
        };
    }
    if !app.gates.store_up() {
        if app.config.gate.opens_on_store_down() {
            counted("store_down_open");
            return pass("store_down_open");
        }
        counted("store_down_closed");
        return wait(app, &gate, req, now, "store_down_closed");
    }
    counted("wait");
    wait(app, &gate, req, now, "wait")
}

fn pass(outcome: &'static str) -> Answer {
    Answer::Pass {
        outcome,
        visitor: None,
        session_ends: None,
    }
}

fn wait(app: &App, gate: &Gate, req: &Original, now: i64, outcome: &'static str) -> Answer {
    Answer::Wait {
        outcome,
        location: waiting_page(app, gate, req, now),
        page: req.is_page(),
        status: gate.refuse_status,
    }
}
