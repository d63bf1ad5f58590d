//! What a gate signs: a visitor's cookie (one place per browser), a visitor's bearer token for
//! the API (the page joins with it), an admitted visitor's session cookie, and the `return_to`
//! a visitor is sent back to. Each is `<fields>.<mac>`: an HMAC-SHA-256 over the kind, the
//! gate and the fields, so a value of one kind, or of another gate, does not verify as
//! another. The key comes from `auth.admission_key_seed_hex` (as the queue tickets' does), so
//! every replica verifies what any replica signed, with no store call.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::hmac;
use subtle::ConstantTimeEq;
use uuid::Uuid;

use crate::domain::{AttemptId, UserId};

/// The visitor cookie's name: which browser holds which place.
pub const VISITOR_COOKIE: &str = "sluice_visitor";
/// The session cookie's name: an admitted visitor's way through the gate.
pub const SESSION_COOKIE: &str = "sluice_session";
/// The prefix of a visitor's bearer token.
const TOKEN_PREFIX: &str = "sv1.";

#[derive(Clone)]
pub struct GateSigner {
    key: hmac::Key,
}

/// An admitted visitor's session, as its cookie says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    pub visitor: String,
    pub attempt: AttemptId,
    /// When it ends unless renewed (unix seconds).
    pub ends: i64,
    /// When it was last renewed (unix seconds): renewal is due a minute later.
    pub renewed: i64,
}

/// Where a visitor goes back to once admitted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReturnTo {
    /// `http` or `https`.
    pub proto: String,
    /// The host, with its port if any.
    pub authority: String,
    /// Path and query.
    pub uri: String,
}

impl ReturnTo {
    pub fn url(&self) -> String {
        format!("{}://{}{}", self.proto, self.authority, self.uri)
    }
}

/// The user id a visitor of `gate` joins under: `visitor-<gate>-<visitor>`, so that what it
/// may join is its gate's line only ([`gate_of_visitor`]).
pub fn visitor_user(gate: Uuid, visitor: &str) -> UserId {
    UserId::parse(&format!("{VISITOR_PREFIX}{}-{visitor}", gate.simple()))
        .expect("a visitor id is hex")
}

/// The gate a visitor's user id is of (`None`: not a visitor's).
pub fn gate_of_visitor(user: &UserId) -> Option<Uuid> {
    let rest = user.as_str().strip_prefix(VISITOR_PREFIX)?;
    Uuid::try_parse(rest.split('-').next()?).ok()
}

/// What a visitor's user id starts with: a prefix no identity provider's token may claim
/// (`api::security` refuses it).
pub const VISITOR_PREFIX: &str = "visitor-";

/// Whether a user id is a gate's visitor's (`visitor-…`).
pub fn is_visitor_user(user: &UserId) -> bool {
    user.as_str().starts_with(VISITOR_PREFIX)
}

/// A new visitor id: 128 random bits, hex.
pub fn new_visitor() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

fn is_visitor(v: &str) -> bool {
    v.len() == 32 && v.bytes().all(|b| b.is_ascii_hexdigit())
}

impl GateSigner {
    /// From the admission key's seed (shared by the replicas), or a key of this process.
    pub fn new(seed: Option<[u8; 32]>) -> Self {
        let seed = seed.unwrap_or_else(rand::random);
        let derived = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, b"sluice gate"), &seed);
        GateSigner {
            key: hmac::Key::new(hmac::HMAC_SHA256, derived.as_ref()),
        }
    }

    /// The HMAC of `body` as `kind` for `gate`.
    fn tag(&self, kind: &str, gate: Uuid, body: &str) -> hmac::Tag {
        let mut ctx = hmac::Context::with_key(&self.key);
        for part in [
            kind.as_bytes(),
            b"|",
            gate.as_bytes(),
            b"|",
            body.as_bytes(),
        ] {
            ctx.update(part);
        }
        ctx.sign()
    }

    fn sign(&self, kind: &str, gate: Uuid, body: String) -> String {
        let mac = URL_SAFE_NO_PAD.encode(self.tag(kind, gate, &body).as_ref());
        format!("{body}.{mac}")
    }

    /// The fields of `value` if this key signed it as `kind` for `gate`.
    fn open<'a>(&self, kind: &str, gate: Uuid, value: &'a str) -> Option<&'a str> {
        let (body, mac) = value.rsplit_once('.')?;
        let tag = URL_SAFE_NO_PAD.decode(mac).ok()?;
        let signed = self.tag(kind, gate, body);
        // Compared in constant time.
        bool::from(signed.as_ref().ct_eq(&tag)).then_some(body)
    }

    /// `<visitor>.<expires>.<mac>`: the browser's place, until `expires` (unix seconds).
    pub fn visitor_cookie(&self, gate: Uuid, visitor: &str, expires: i64) -> String {
        self.sign("visitor", gate, format!("{visitor}.{expires}"))
    }

    /// The visitor a cookie names, if this key signed it for `gate` and it has not expired.
    pub fn visitor_of(&self, gate: Uuid, cookie: &str, now: i64) -> Option<String> {
        let (visitor, expires) = self.open("visitor", gate, cookie)?.split_once('.')?;
        let live = is_visitor(visitor) && expires.parse::<i64>().ok()? > now;
        live.then(|| visitor.to_owned())
    }

    /// A bearer token for the API: `sv1.<gate>.<visitor>.<expires>.<mac>`.
    pub fn visitor_token(&self, gate: Uuid, visitor: &str, expires: i64) -> String {
        let body = format!("{}.{visitor}.{expires}", gate.simple());
        format!("{TOKEN_PREFIX}{}", self.sign("token", gate, body))
    }

    /// Whether a bearer token is a visitor's (and not an identity provider's JWT).
    pub fn is_visitor_token(token: &str) -> bool {
        token.starts_with(TOKEN_PREFIX)
    }

    /// The gate and visitor of a visitor's bearer token, if it verifies and has not expired.
    pub fn token_visitor(&self, token: &str, now: i64) -> Option<(Uuid, String)> {
        let rest = token.strip_prefix(TOKEN_PREFIX)?;
        let gate = Uuid::parse_str(rest.split('.').next()?).ok()?;
        let body = self.open("token", gate, rest)?;
        let mut fields = body.split('.').skip(1);
        let visitor = fields.next().filter(|v| is_visitor(v))?;
        let expires: i64 = fields.next()?.parse().ok()?;
        (expires > now).then(|| (gate, visitor.to_owned()))
    }

    pub fn session_cookie(&self, gate: Uuid, s: &Session) -> String {
        let body = format!("{}.{}.{}.{}", s.visitor, s.attempt, s.ends, s.renewed);
        self.sign("session", gate, body)
    }

    /// The session a cookie names, if this key signed it for `gate` (ended or not).
    pub fn session_of(&self, gate: Uuid, cookie: &str) -> Option<Session> {
        let body = self.open("session", gate, cookie)?;
        let mut f = body.split('.');
        let visitor = f.next().filter(|v| is_visitor(v))?.to_owned();
        let attempt = AttemptId::parse(f.next()?).ok()?;
        let ends = f.next()?.parse().ok()?;
        let renewed = f.next()?.parse().ok()?;
        Some(Session {
            visitor,
            attempt,
            ends,
            renewed,
        })
    }

    /// `<expires>.<base64url of proto, authority and uri>.<mac>`.
    pub fn return_to(&self, gate: Uuid, to: &ReturnTo, expires: i64) -> String {
        let target = format!("{}\n{}\n{}", to.proto, to.authority, to.uri);
        let body = format!("{expires}.{}", URL_SAFE_NO_PAD.encode(target));
        self.sign("return_to", gate, body)
    }

    pub fn return_to_of(&self, gate: Uuid, value: &str, now: i64) -> Option<ReturnTo> {
        let body = self.open("return_to", gate, value)?;
        let (expires, target) = body.split_once('.')?;
        if expires.parse::<i64>().ok()? <= now {
            return None;
        }
        let target = String::from_utf8(URL_SAFE_NO_PAD.decode(target).ok()?).ok()?;
        let mut parts = target.splitn(3, '\n');
        let to = ReturnTo {
            proto: parts.next()?.to_owned(),
            authority: parts.next()?.to_owned(),
            uri: parts.next()?.to_owned(),
        };
        let ok = matches!(to.proto.as_str(), "http" | "https") && to.uri.starts_with('/');
        ok.then_some(to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt() -> AttemptId {
        AttemptId::parse(&"ab".repeat(32)).unwrap()
    }

    #[test]
    fn a_value_verifies_only_as_its_kind_for_its_gate() {
        let s = GateSigner::new(Some([7; 32]));
        let (g1, g2) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let visitor = new_visitor();
        let cookie = s.visitor_cookie(g1, &visitor, 100);
        assert_eq!(s.visitor_of(g1, &cookie, 99), Some(visitor.clone()));
        assert_eq!(s.visitor_of(g1, &cookie, 100), None, "expired");
        assert_eq!(s.visitor_of(g2, &cookie, 99), None, "another gate's");
        let session = Session {
            visitor: visitor.clone(),
            attempt: attempt(),
            ends: 100,
            renewed: 50,
        };
        let sc = s.session_cookie(g1, &session);
        assert_eq!(s.session_of(g1, &sc), Some(session));
        assert_eq!(s.session_of(g2, &sc), None);
        assert_eq!(
            s.visitor_of(g1, &sc, 0),
            None,
            "a session is not a visitor cookie"
        );
        let forged = sc.replacen(".100.", ".999.", 1);
        assert_eq!(s.session_of(g1, &forged), None, "an altered end");
        let other_key = GateSigner::new(Some([8; 32]));
        assert_eq!(other_key.session_of(g1, &sc), None);
    }

    #[test]
    fn tokens_and_return_to_expire() {
        let s = GateSigner::new(Some([7; 32]));
        let g = Uuid::from_u128(1);
        let v = new_visitor();
        let token = s.visitor_token(g, &v, 100);
        assert!(GateSigner::is_visitor_token(&token));
        assert_eq!(s.token_visitor(&token, 99), Some((g, v.clone())));
        assert_eq!(s.token_visitor(&token, 100), None);
        let to = ReturnTo {
            proto: "https".into(),
            authority: "shop.example".into(),
            uri: "/a?b=c".into(),
        };
        let signed = s.return_to(g, &to, 100);
        assert_eq!(s.return_to_of(g, &signed, 99), Some(to));
        assert_eq!(s.return_to_of(g, &signed, 100), None);
        assert_eq!(s.return_to_of(Uuid::from_u128(2), &signed, 99), None);
    }
}
