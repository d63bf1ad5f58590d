//! A gate: a waiting room in front of a site that cannot call sluice's API. The site's reverse
//! proxy asks sluice about each request (`/v1/gate/check`); a gate says which requests it
//! guards, which of them pass without a place in line, which sale's line fronts it and how long
//! an admitted visitor's session lasts. Pure: what a request is and what the rules say of it.

use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use super::{SaleError, SaleId};

/// Shortest and longest session an operator may give a gate, in minutes.
pub const SESSION_MINUTES: std::ops::RangeInclusive<u32> = 1..=30;

/// A gate as an operator declared it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gate {
    pub id: uuid::Uuid,
    pub name: String,
    /// The line in front of the site: a sale of the gate's own, whose rate, active cap,
    /// opening and pause work as for any sale. Its stock is never held.
    pub sale: SaleId,
    pub guards: Guards,
    pub passes: Passes,
    /// How long an admitted visitor's session lasts, renewed while the visitor is active.
    pub session_minutes: u32,
    pub mode: GateMode,
    /// What a request that is not a page gets while its visitor has no session: 429 or 503.
    pub refuse_status: u16,
    /// What a visitor passes before joining.
    pub challenge: Challenge,
    /// The `Domain` of the gate's cookies (`None`: the guarded host only).
    pub cookie_domain: Option<String>,
}

/// Which requests a gate guards: an empty list of paths or methods means any.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Guards {
    /// Host names, without a port (`shop.example`), compared without case: at least one (a
    /// visitor is sent back only to them).
    pub hosts: Vec<String>,
    /// Path prefixes (`/tickets/`), or patterns where `*` stands for any characters.
    pub paths: Vec<String>,
    /// Methods (`GET`, `POST`).
    pub methods: Vec<String>,
}

/// What passes without a place in line.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Passes {
    /// Static files by extension, without the dot (`css`, `js`, `png`).
    pub static_extensions: Vec<String>,
    /// Static files by path prefix (`/assets/`).
    pub static_prefixes: Vec<String>,
    /// `HEAD` and `OPTIONS` requests.
    pub head_and_options: bool,
    /// Crawlers: words of a user agent, compared without case (`googlebot`).
    pub crawlers: Vec<String>,
    /// Addresses that always pass (CIDR: `10.0.0.0/8`, `2001:db8::/32`).
    pub allow_cidrs: Vec<String>,
    /// The shop's own header for its monitors: its name, and the SHA-256 (hex) of its value.
    pub secret_header: Option<SecretHeader>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SecretHeader {
    pub name: String,
    /// SHA-256 of the value, hex: the value itself is never kept nor answered.
    pub value_sha256: String,
}

/// The operator's switches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateMode {
    /// Requests are checked by the rules.
    On,
    /// Emergency: no rule lets a request pass; only admitted visitors' sessions do.
    QueueAll,
    /// Everything passes.
    Off,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Challenge {
    /// None besides the sale's proof of work, if it asks for one.
    None,
    /// Cloudflare Turnstile, verified with its `siteverify` and the shop's secret.
    Turnstile,
    /// hCaptcha, verified with its `siteverify` and the shop's secret.
    Hcaptcha,
}

/// The request a proxy asks about, as it was sent to the site.
#[derive(Clone, Debug, Default)]
pub struct Original {
    pub method: String,
    /// `http` or `https`.
    pub proto: String,
    /// The host, without a port.
    pub host: String,
    /// The host as sent, with its port if any (where a visitor is sent back to).
    pub authority: String,
    /// Path and query, as sent.
    pub uri: String,
    pub user_agent: String,
    pub accept: String,
    /// The visitor's address, as the proxy saw it.
    pub address: Option<IpAddr>,
}

impl Original {
    pub fn path(&self) -> &str {
        self.uri.split(['?', '#']).next().unwrap_or("")
    }

    /// A browser's page request (sent to the waiting page), not an API call or a file.
    pub fn is_page(&self) -> bool {
        matches!(self.method.as_str(), "GET" | "HEAD") && self.accept.contains("text/html")
    }
}

/// What a gate's rules say of a request, before any session is looked at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No gate guards it.
    NotGuarded,
    /// Guarded, but a rule lets it pass (or the gate is off).
    Passes(Rule),
    /// Guarded: only an admitted visitor's session lets it pass.
    NeedsSession,
}

/// The rule a request passed by: a label of the metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    Off,
    Static,
    HeadOrOptions,
    Crawler,
    AllowList,
    SecretHeader,
}

impl Rule {
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::Off => "off",
            Rule::Static => "static",
            Rule::HeadOrOptions => "head_or_options",
            Rule::Crawler => "crawler",
            Rule::AllowList => "allow_list",
            Rule::SecretHeader => "secret_header",
        }
    }
}

/// `*` matches any run of characters; anything else itself.
fn glob(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    for (i, part) in parts.iter().enumerate() {
        if i == parts.len() - 1 {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

impl Gate {
    /// Whether the gate guards the request at all.
    pub fn guards(&self, req: &Original) -> bool {
        let g = &self.guards;
        let path = req.path();
        g.hosts.iter().any(|h| h.eq_ignore_ascii_case(&req.host))
            && (g.paths.is_empty()
                || g.paths.iter().any(|p| {
                    if p.contains('*') {
                        glob(p, path)
                    } else {
                        path.starts_with(p.as_str())
                    }
                }))
            && (g.methods.is_empty()
                || g.methods
                    .iter()
                    .any(|m| m.eq_ignore_ascii_case(&req.method)))
    }

    /// What the rules say of a request the gate guards; `header` gives a header of the
    /// request by name, `secret_matches` whether a value is the one whose digest the gate
    /// keeps.
    pub fn verdict(
        &self,
        req: &Original,
        header: impl Fn(&str) -> Option<String>,
        secret_matches: impl Fn(&str, &str) -> bool,
    ) -> Verdict {
        if !self.guards(req) {
            return Verdict::NotGuarded;
        }
        match self.mode {
            GateMode::Off => return Verdict::Passes(Rule::Off),
            GateMode::QueueAll => return Verdict::NeedsSession,
            GateMode::On => {}
        }
        let p = &self.passes;
        let path = req.path();
        if let Some(secret) = &p.secret_header {
            if header(&secret.name).is_some_and(|v| secret_matches(&v, &secret.value_sha256)) {
                return Verdict::Passes(Rule::SecretHeader);
            }
        }
        if p.head_and_options && matches!(req.method.as_str(), "HEAD" | "OPTIONS") {
            return Verdict::Passes(Rule::HeadOrOptions);
        }
        let extension = path
            .rsplit('/')
            .next()
            .and_then(|name| name.rsplit_once('.'))
            .map(|(_, ext)| ext);
        let is_static = extension.is_some_and(|ext| {
            p.static_extensions
                .iter()
                .any(|e| e.eq_ignore_ascii_case(ext))
        }) || p
            .static_prefixes
            .iter()
            .any(|s| path.starts_with(s.as_str()));
        if is_static {
            return Verdict::Passes(Rule::Static);
        }
        let agent = req.user_agent.to_ascii_lowercase();
        if p.crawlers
            .iter()
            .any(|c| !c.is_empty() && agent.contains(&c.to_ascii_lowercase()))
        {
            return Verdict::Passes(Rule::Crawler);
        }
        if let Some(address) = req.address {
            if p.allow_cidrs
                .iter()
                .filter_map(|c| c.parse::<IpNet>().ok())
                .any(|net| net.contains(&address))
            {
                return Verdict::Passes(Rule::AllowList);
            }
        }
        Verdict::NeedsSession
    }

    /// Checks an operator's gate whole: the first problem, named by its field.
    pub fn check(&self) -> Result<(), SaleError> {
        let bad = |field: &'static str, message: &'static str| Err(SaleError::new(field, message));
        if self.name.trim().is_empty() || self.name.chars().count() > 200 {
            return bad("name", "must be 1 to 200 characters");
        }
        if !SESSION_MINUTES.contains(&self.session_minutes) {
            return bad("session_minutes", "must be between 1 and 30");
        }
        if !matches!(self.refuse_status, 429 | 503) {
            return bad("refuse_status", "must be 429 or 503");
        }
        let g = &self.guards;
        if g.hosts.is_empty() {
            return bad(
                "hosts",
                "name at least one: a visitor is sent back only to them",
            );
        }
        if g.hosts.iter().any(|h| !is_host(h)) {
            return bad("hosts", "each must be a host name without a scheme or port");
        }
        if g.paths.iter().any(|p| !p.starts_with('/')) {
            return bad("paths", "each must start with /");
        }
        if g.methods
            .iter()
            .any(|m| m.is_empty() || !m.bytes().all(|b| b.is_ascii_alphabetic()))
        {
            return bad("methods", "each must be an HTTP method (GET, POST, ...)");
        }
        let p = &self.passes;
        if p.static_prefixes.iter().any(|s| !s.starts_with('/')) {
            return bad("static_prefixes", "each must start with /");
        }
        if p.static_extensions
            .iter()
            .any(|e| e.is_empty() || !e.bytes().all(|b| b.is_ascii_alphanumeric()))
        {
            return bad(
                "static_extensions",
                "each must be letters and digits, without the dot",
            );
        }
        if p.allow_cidrs.iter().any(|c| c.parse::<IpNet>().is_err()) {
            return bad(
                "allow_cidrs",
                "each must be an address block (10.0.0.0/8, 2001:db8::/32)",
            );
        }
        if let Some(h) = &p.secret_header {
            let token = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
            if h.name.is_empty() || !h.name.bytes().all(token) {
                return bad("secret_header", "its name must be a header name");
            }
        }
        if let Some(domain) = &self.cookie_domain {
            if !is_host(domain) {
                return bad("cookie_domain", "must be a host name");
            }
        }
        Ok(())
    }

    /// Whether a visitor may be sent back to `host` (one the gate guards).
    pub fn may_return_to(&self, authority: &str) -> bool {
        let bare = host_of(authority);
        self.guards
            .hosts
            .iter()
            .any(|h| h.eq_ignore_ascii_case(&bare))
    }
}

/// The host of an authority (`shop.example:8443`, `[::1]:80`), lowercase, without its port or
/// an IPv6 address's brackets.
pub fn host_of(authority: &str) -> String {
    let host = match authority.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) && !h.ends_with(':') => h,
        _ => authority,
    };
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

/// A host name: letters, digits, dots and dashes (no scheme, port or path).
fn is_host(h: &str) -> bool {
    !h.is_empty()
        && h.len() <= 253
        && h.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate() -> Gate {
        Gate {
            id: uuid::Uuid::nil(),
            name: "shop".into(),
            sale: SaleId::new(),
            guards: Guards {
                hosts: vec!["shop.example".into()],
                paths: vec!["/tickets/".into(), "/event-*/buy".into()],
                methods: vec![],
            },
            passes: Passes {
                static_extensions: vec!["css".into(), "js".into()],
                static_prefixes: vec!["/tickets/assets/".into()],
                head_and_options: true,
                crawlers: vec!["Googlebot".into()],
                allow_cidrs: vec!["10.1.0.0/16".into()],
                secret_header: Some(SecretHeader {
                    name: "X-Monitor".into(),
                    value_sha256: "digest".into(),
                }),
            },
            session_minutes: 10,
            mode: GateMode::On,
            refuse_status: 429,
            challenge: Challenge::None,
            cookie_domain: None,
        }
    }

    fn get(uri: &str) -> Original {
        Original {
            method: "GET".into(),
            proto: "https".into(),
            host: "shop.example".into(),
            authority: "shop.example".into(),
            uri: uri.into(),
            accept: "text/html".into(),
            ..Original::default()
        }
    }

    fn verdict(gate: &Gate, req: &Original) -> Verdict {
        gate.verdict(
            req,
            |_| None,
            |value, digest| value == "right" && digest == "digest",
        )
    }

    /// With the monitor's header `X-Monitor: <value>`.
    fn monitored(gate: &Gate, req: &Original, value: &str) -> Verdict {
        let header = |name: &str| (name == "X-Monitor").then(|| value.to_owned());
        gate.verdict(req, header, |value, digest| {
            value == "right" && digest == "digest"
        })
    }

    #[test]
    fn guards_by_host_path_prefix_and_pattern() {
        let g = gate();
        assert_eq!(verdict(&g, &get("/tickets/a?x=1")), Verdict::NeedsSession);
        assert_eq!(verdict(&g, &get("/event-42/buy")), Verdict::NeedsSession);
        assert_eq!(verdict(&g, &get("/event-42/info")), Verdict::NotGuarded);
        assert_eq!(verdict(&g, &get("/about")), Verdict::NotGuarded);
        let other = Original {
            host: "other.example".into(),
            ..get("/tickets/a")
        };
        assert_eq!(verdict(&g, &other), Verdict::NotGuarded);
    }

    #[test]
    fn each_rule_passes_what_it_names() {
        let g = gate();
        assert_eq!(
            verdict(&g, &get("/tickets/app.CSS")),
            Verdict::Passes(Rule::Static)
        );
        assert_eq!(
            verdict(&g, &get("/tickets/assets/x.bin")),
            Verdict::Passes(Rule::Static)
        );
        let head = Original {
            method: "HEAD".into(),
            ..get("/tickets/a")
        };
        assert_eq!(verdict(&g, &head), Verdict::Passes(Rule::HeadOrOptions));
        let bot = Original {
            user_agent: "Mozilla/5.0 (compatible; googlebot/2.1)".into(),
            ..get("/tickets/a")
        };
        assert_eq!(verdict(&g, &bot), Verdict::Passes(Rule::Crawler));
        let inside = Original {
            address: "10.1.2.3".parse().ok(),
            ..get("/tickets/a")
        };
        assert_eq!(verdict(&g, &inside), Verdict::Passes(Rule::AllowList));
        let outside = Original {
            address: "10.2.2.3".parse().ok(),
            ..get("/tickets/a")
        };
        assert_eq!(verdict(&g, &outside), Verdict::NeedsSession);
        assert_eq!(
            monitored(&g, &get("/tickets/a"), "right"),
            Verdict::Passes(Rule::SecretHeader)
        );
        assert_eq!(
            monitored(&g, &get("/tickets/a"), "wrong"),
            Verdict::NeedsSession
        );
    }

    #[test]
    fn queue_all_stops_every_rule_and_off_passes_all() {
        let mut g = gate();
        g.mode = GateMode::QueueAll;
        assert_eq!(verdict(&g, &get("/tickets/app.css")), Verdict::NeedsSession);
        g.mode = GateMode::Off;
        assert_eq!(verdict(&g, &get("/tickets/a")), Verdict::Passes(Rule::Off));
        assert_eq!(verdict(&g, &get("/about")), Verdict::NotGuarded);
    }

    #[test]
    fn a_page_is_a_browsers_get_of_html() {
        assert!(get("/tickets/a").is_page());
        let xhr = Original {
            accept: "application/json".into(),
            ..get("/tickets/a")
        };
        assert!(!xhr.is_page());
        let post = Original {
            method: "POST".into(),
            ..get("/tickets/a")
        };
        assert!(!post.is_page());
    }

    #[test]
    fn returns_only_to_a_guarded_host() {
        let g = gate();
        assert!(g.may_return_to("shop.example"));
        assert!(g.may_return_to("SHOP.example:8443"));
        assert!(!g.may_return_to("evil.example"));
        assert!(!g.may_return_to("shop.example.evil.example"));
    }

    #[test]
    fn check_names_the_bad_field() {
        let mut g = gate();
        assert!(g.check().is_ok());
        g.session_minutes = 31;
        assert_eq!(g.check().unwrap_err().field, "session_minutes");
        g = gate();
        g.passes.allow_cidrs = vec!["10.0.0.0/33".into()];
        assert_eq!(g.check().unwrap_err().field, "allow_cidrs");
        g = gate();
        g.guards.hosts = vec!["https://shop.example".into()];
        assert_eq!(g.check().unwrap_err().field, "hosts");
    }
}
