//! Gates in front of sites: the operators' gates (`X-Admin-Key`), and a visitor's way through
//! one on the waiting page (a visitor token behind the gate's challenge, the session an
//! admission is traded for). The proxy's own routes (the check, the renewal) are
//! `gate_check.rs`.

use chrono::{DateTime, TimeZone, Utc};
use poem::Request;
use poem_openapi::param::Path;
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Enum, Object, OpenApi};
use ring::digest::{digest, SHA256};

use super::problem::ApiError;
use super::sales::sale_audit;
use super::security::AdminAuth;
use super::text::Text;
use super::ApiTags;
use crate::auth::gate_cookies::{visitor_user, SESSION_COOKIE, VISITOR_COOKIE};
use crate::domain::gate::{Challenge, Gate, GateMode, Guards, Passes, SecretHeader};
use crate::domain::{AttemptId, NewPrice, NewSale, Role, SaleId, Ttls};
use crate::gate::challenge::Verifier;
use crate::service::gate::{admin, visitors};
use crate::service::{App, ServiceError};

pub struct GatesApi {
    pub app: App,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Enum)]
#[oai(rename_all = "snake_case")]
pub enum GateModeName {
    /// Requests are checked by the rules.
    On,
    /// Emergency: no rule lets a request pass, only admitted visitors' sessions.
    QueueAll,
    /// Everything passes.
    Off,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Enum)]
#[oai(rename_all = "snake_case")]
pub enum ChallengeName {
    /// None besides the sale's proof of work, if it asks for one.
    None,
    /// Cloudflare Turnstile (`gate.turnstile_*` settings).
    Turnstile,
    /// hCaptcha (`gate.hcaptcha_*` settings).
    Hcaptcha,
}

fn default_session_minutes() -> u32 {
    10
}
fn default_refuse_status() -> u16 {
    429
}
fn default_true() -> bool {
    true
}
fn default_mode() -> GateModeName {
    GateModeName::On
}
fn default_challenge() -> ChallengeName {
    ChallengeName::None
}

/// A gate: which requests of a site it guards, what passes without a place in line, the sale
/// whose line fronts it and how long an admitted visitor's session lasts.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct GateIn {
    /// Shown to operators (1 to 200 characters).
    #[oai(validator(min_length = 1, max_length = 200))]
    pub name: String,
    /// The gate's line: a quantity sale of its own, not instant, whose rate, active cap,
    /// opening (FIFO or lottery) and pause work as for any sale; its stock is never held. Name
    /// an existing one, or give `line` instead and the gate makes its own.
    #[oai(skip_serializing_if_is_none)]
    pub sale_id: Option<String>,
    /// A line of the gate's own, made with it (creation only, instead of `sale_id`).
    #[oai(skip_serializing_if_is_none)]
    pub line: Option<GateLineIn>,
    /// Hosts guarded (at least one), without scheme or port. A visitor is sent back only to
    /// one of them.
    #[oai(validator(min_items = 1, max_items = 50))]
    pub hosts: Vec<String>,
    /// Path prefixes (`/tickets/`) or patterns with `*` (`/event-*/buy`) guarded (none: all).
    #[oai(default, validator(max_items = 100))]
    pub paths: Vec<String>,
    /// Methods guarded (none: all).
    #[oai(default, validator(max_items = 20))]
    pub methods: Vec<String>,
    /// How long an admitted visitor's session lasts, renewed while the visitor is active
    /// (1 to 30 minutes).
    #[oai(default = "default_session_minutes")]
    pub session_minutes: u32,
    #[oai(default = "default_mode")]
    pub mode: GateModeName,
    /// What a request that is not a page gets while its visitor waits: 429 or 503.
    #[oai(default = "default_refuse_status")]
    pub refuse_status: u16,
    #[oai(default = "default_challenge")]
    pub challenge: ChallengeName,
    /// The `Domain` of the gate's cookies (none: the guarded host only).
    #[oai(skip_serializing_if_is_none)]
    pub cookie_domain: Option<String>,
    /// Static files that pass, by extension without the dot (`css`, `js`, `png`).
    #[oai(default, validator(max_items = 100))]
    pub static_extensions: Vec<String>,
    /// Static files that pass, by path prefix (`/assets/`).
    #[oai(default, validator(max_items = 100))]
    pub static_prefixes: Vec<String>,
    /// Whether `HEAD` and `OPTIONS` requests pass (default yes).
    #[oai(default = "default_true")]
    pub head_and_options: bool,
    /// Crawlers that pass: words of their user agent, without case (`googlebot`).
    #[oai(default, validator(max_items = 200))]
    pub crawlers: Vec<String>,
    /// Addresses that pass (CIDR blocks).
    #[oai(default, validator(max_items = 200))]
    pub allow_cidrs: Vec<String>,
    /// The shop's own header for its monitors: requests with this header and value pass.
    #[oai(skip_serializing_if_is_none)]
    pub secret_header_name: Option<String>,
    /// The header's value; kept as its SHA-256 and never answered. On a change of the gate,
    /// none keeps the value kept before.
    #[oai(
        skip_serializing_if_is_none,
        validator(min_length = 16, max_length = 200)
    )]
    pub secret_header_value: Option<String>,
}

fn default_line_rate() -> u32 {
    600
}
fn default_line_cap() -> u32 {
    100
}

/// A gate's own line: how fast visitors are let in and how many may be on the site at once.
#[derive(Debug, Clone, Object)]
pub struct GateLineIn {
    /// Visitors let in per minute (1 to 1,000,000).
    #[oai(
        default = "default_line_rate",
        validator(minimum(value = "1"), maximum(value = "1000000"))
    )]
    pub rate_per_minute: u32,
    /// Sessions at once at most (1 to 1,000,000).
    #[oai(
        default = "default_line_cap",
        validator(minimum(value = "1"), maximum(value = "1000000"))
    )]
    pub max_active: u32,
    /// When admission starts; visitors wait in line until then. Default: now.
    #[oai(skip_serializing_if_is_none)]
    pub opens_at: Option<DateTime<Utc>>,
    /// Those in line before `opens_at` are let in in a drawn order (a lottery), not their
    /// order of arrival.
    #[oai(default)]
    pub lottery: bool,
}

impl GateLineIn {
    /// The sale it makes: named after the gate, one unit never held, five minutes to come back
    /// once admitted (the page comes back at once).
    fn new_sale(&self, name: &str) -> NewSale {
        NewSale {
            name: name.to_owned(),
            opens_at: self.opens_at,
            closes_at: None,
            quantity: Some(1),
            seats: None,
            per_user_limit: 1,
            ttls: Ttls {
                admission_secs: 300,
                hold_secs: 60,
                payment_secs: 60,
            },
            rate_per_minute: self.rate_per_minute,
            max_active: self.max_active,
            adaptive: None,
            lottery: self.lottery.then(String::new),
            price: NewPrice {
                currency: None,
                unit_price: None,
                categories: Vec::new(),
            },
            layout: None,
            instant: false,
        }
    }
}

impl poem_openapi::types::Example for GateIn {
    fn example() -> Self {
        GateIn {
            name: "Friday drop".into(),
            sale_id: None,
            line: Some(GateLineIn {
                rate_per_minute: 1200,
                max_active: 300,
                opens_at: None,
                lottery: false,
            }),
            hosts: vec!["shop.example".into()],
            paths: vec!["/drop/".into()],
            methods: vec![],
            session_minutes: 10,
            mode: GateModeName::On,
            refuse_status: 429,
            challenge: ChallengeName::Turnstile,
            cookie_domain: None,
            static_extensions: ["css", "js", "png", "svg", "woff2"]
                .map(String::from)
                .to_vec(),
            static_prefixes: vec!["/assets/".into()],
            head_and_options: true,
            crawlers: vec!["googlebot".into(), "bingbot".into()],
            allow_cidrs: vec!["10.0.0.0/8".into()],
            secret_header_name: Some("X-Shop-Monitor".into()),
            secret_header_value: Some("a-long-random-value-of-the-shop".into()),
        }
    }
}

/// A gate as kept: its rules, and the secret header by name only.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct GateOut {
    pub id: String,
    pub name: String,
    pub sale_id: String,
    pub hosts: Vec<String>,
    pub paths: Vec<String>,
    pub methods: Vec<String>,
    pub session_minutes: u32,
    pub mode: GateModeName,
    pub refuse_status: u16,
    pub challenge: ChallengeName,
    #[oai(skip_serializing_if_is_none)]
    pub cookie_domain: Option<String>,
    pub static_extensions: Vec<String>,
    pub static_prefixes: Vec<String>,
    pub head_and_options: bool,
    pub crawlers: Vec<String>,
    pub allow_cidrs: Vec<String>,
    #[oai(skip_serializing_if_is_none)]
    pub secret_header_name: Option<String>,
}

impl poem_openapi::types::Example for GateOut {
    fn example() -> Self {
        let g = <GateIn as poem_openapi::types::Example>::example();
        let gate = gate_of(g, uuid::Uuid::nil(), None).expect("the example is a gate");
        GateOut {
            id: "0193a0c4-e1b2-7c3d-9f0a-1b2c3d4e5f71".into(),
            ..GateOut::from(&gate)
        }
    }
}

fn mode_of(m: GateModeName) -> GateMode {
    match m {
        GateModeName::On => GateMode::On,
        GateModeName::QueueAll => GateMode::QueueAll,
        GateModeName::Off => GateMode::Off,
    }
}

fn challenge_of(c: ChallengeName) -> Challenge {
    match c {
        ChallengeName::None => Challenge::None,
        ChallengeName::Turnstile => Challenge::Turnstile,
        ChallengeName::Hcaptcha => Challenge::Hcaptcha,
    }
}

fn challenge_name(c: Challenge) -> ChallengeName {
    match c {
        Challenge::None => ChallengeName::None,
        Challenge::Turnstile => ChallengeName::Turnstile,
        Challenge::Hcaptcha => ChallengeName::Hcaptcha,
    }
}

impl From<&Gate> for GateOut {
    fn from(g: &Gate) -> Self {
        GateOut {
            id: g.id.to_string(),
            name: g.name.clone(),
            sale_id: g.sale.to_string(),
            hosts: g.guards.hosts.clone(),
            paths: g.guards.paths.clone(),
            methods: g.guards.methods.clone(),
            session_minutes: g.session_minutes,
            mode: match g.mode {
                GateMode::On => GateModeName::On,
                GateMode::QueueAll => GateModeName::QueueAll,
                GateMode::Off => GateModeName::Off,
            },
            refuse_status: g.refuse_status,
            challenge: challenge_name(g.challenge),
            cookie_domain: g.cookie_domain.clone(),
            static_extensions: g.passes.static_extensions.clone(),
            static_prefixes: g.passes.static_prefixes.clone(),
            head_and_options: g.passes.head_and_options,
            crawlers: g.passes.crawlers.clone(),
            allow_cidrs: g.passes.allow_cidrs.clone(),
            secret_header_name: g.passes.secret_header.as_ref().map(|h| h.name.clone()),
        }
    }
}

/// The gate `b` asks for; `before`'s line, and its secret header value when `b` names the
/// header without a value, are kept. A gate with a line of its own to make has no sale yet
/// (the nil id, until it is made).
fn gate_of(b: GateIn, id: uuid::Uuid, before: Option<&Gate>) -> Result<Gate, ApiError> {
    let sale = match (&b.sale_id, before) {
        (Some(s), _) => {
            SaleId::parse(s).map_err(|_| ServiceError::validation("sale_id", "not a sale id"))?
        }
        (None, Some(g)) => g.sale,
        (None, None) => SaleId(uuid::Uuid::nil()),
    };
    let kept = before.and_then(|g| g.passes.secret_header.as_ref());
    let secret_header = match (b.secret_header_name, b.secret_header_value) {
        (None, _) => None,
        (Some(name), Some(value)) => Some(SecretHeader {
            name,
            value_sha256: hex::encode(digest(&SHA256, value.as_bytes())),
        }),
        (Some(name), None) => match kept {
            Some(k) => Some(SecretHeader {
                name,
                value_sha256: k.value_sha256.clone(),
            }),
            None => {
                return Err(ServiceError::validation(
                    "secret_header_value",
                    "a secret header needs its value",
                )
                .into())
            }
        },
    };
    Ok(Gate {
        id,
        name: b.name,
        sale,
        guards: Guards {
            hosts: b.hosts,
            paths: b.paths,
            methods: b.methods,
        },
        passes: Passes {
            static_extensions: b.static_extensions,
            static_prefixes: b.static_prefixes,
            head_and_options: b.head_and_options,
            crawlers: b.crawlers,
            allow_cidrs: b.allow_cidrs,
            secret_header,
        },
        session_minutes: b.session_minutes,
        mode: mode_of(b.mode),
        refuse_status: b.refuse_status,
        challenge: challenge_of(b.challenge),
        cookie_domain: b.cookie_domain,
    })
}

#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct GateList {
    pub gates: Vec<GateOut>,
}

impl poem_openapi::types::Example for GateList {
    fn example() -> Self {
        GateList {
            gates: vec![poem_openapi::types::Example::example()],
        }
    }
}

#[derive(ApiResponse)]
pub enum GateCreated {
    #[oai(status = 201)]
    Created(Json<GateOut>, #[oai(header = "Location")] String),
}

#[derive(ApiResponse)]
pub enum GateResponse {
    #[oai(status = 200)]
    Ok(Json<GateOut>),
}

#[derive(ApiResponse)]
pub enum GateListResponse {
    #[oai(status = 200)]
    Ok(Json<GateList>),
}

#[derive(ApiResponse)]
pub enum GateGone {
    /// Done.
    #[oai(status = 204)]
    Done,
}

/// What the waiting page needs before a visitor enters: the line and the challenge.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct GateEntryOut {
    pub gate_id: String,
    /// The sale whose line the visitor joins.
    pub sale_id: String,
    pub challenge: ChallengeName,
    /// The site key the page shows the challenge's widget with.
    #[oai(skip_serializing_if_is_none)]
    pub site_key: Option<String>,
    /// The widget's script, rendered explicitly (`turnstile.render`, `hcaptcha.render`).
    #[oai(skip_serializing_if_is_none)]
    pub script_url: Option<String>,
}

impl poem_openapi::types::Example for GateEntryOut {
    fn example() -> Self {
        GateEntryOut {
            gate_id: "0193a0c4-e1b2-7c3d-9f0a-1b2c3d4e5f71".into(),
            sale_id: "0193a0c4-e1b2-7c3d-9f0a-1b2c3d4e5f60".into(),
            challenge: ChallengeName::Turnstile,
            site_key: Some("0x4AAAAAAAB_example".into()),
            script_url: Some(
                "https://challenges.cloudflare.com/turnstile/v0/api.js?render=explicit".into(),
            ),
        }
    }
}

#[derive(ApiResponse)]
pub enum GateEntryResponse {
    #[oai(status = 200)]
    Ok(Json<GateEntryOut>),
}

/// The challenge's answer (none when the gate has none, or the browser is a visitor already).
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct EnterGate {
    /// Turnstile's `cf-turnstile-response`, or hCaptcha's `h-captcha-response`.
    #[oai(skip_serializing_if_is_none, validator(max_length = 4096))]
    pub challenge_answer: Option<String>,
}

impl poem_openapi::types::Example for EnterGate {
    fn example() -> Self {
        EnterGate {
            challenge_answer: Some(
                "0.zrSnRHO7h0HwSjSCU8oyzbjEtD8p.d62306d4ee00c77dda697f959ebbd7bd97".into(),
            ),
        }
    }
}

/// A visitor of the gate: the token the page joins and asks with.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct VisitorOut {
    pub visitor_id: String,
    /// The user id the visitor joins under (what a sale's proof of work is bound to).
    pub user_id: String,
    pub sale_id: String,
    /// A bearer token for `joinSale` and the attempt's routes, as a user's token is.
    pub token: String,
}

impl poem_openapi::types::Example for VisitorOut {
    fn example() -> Self {
        VisitorOut {
            visitor_id: "3f9c2a7e51b04d8c9a6e0b1c2d3e4f50".into(),
            user_id: "visitor-0193a0c4e1b27c3d9f0a1b2c3d4e5f71-3f9c2a7e51b04d8c9a6e0b1c2d3e4f50"
                .into(),
            sale_id: "0193a0c4-e1b2-7c3d-9f0a-1b2c3d4e5f60".into(),
            token: "sv1.0193a0c4e1b27c3d9f0a1b2c3d4e5f71.3f9c2a7e51b04d8c9a6e0b1c2d3e4f50.1796722580.SyZWX6nSSnN_fJHfbjhsFr20aUr1-5MoWlcsJSZ1IqM".into(),
        }
    }
}

#[derive(ApiResponse)]
pub enum VisitorResponse {
    /// The visitor; `Set-Cookie` keeps the browser's place (a refresh or a second tab is the
    /// same visitor).
    #[oai(status = 200)]
    Ok(
        Json<VisitorOut>,
        #[oai(header = "Set-Cookie")] Option<String>,
        #[oai(header = "Cache-Control")] String,
    ),
}

/// An admission traded for a session.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct TradeAdmission {
    pub attempt_id: String,
    pub admission_token: String,
    /// The `return_to` of the waiting page's address, as the gate signed it.
    #[oai(validator(max_length = 8192))]
    pub return_to: String,
}

impl poem_openapi::types::Example for TradeAdmission {
    fn example() -> Self {
        TradeAdmission {
            attempt_id: "0193a0c4e1b27c3d9f0a1b2c3d4e5f600193a0c4e1b27c3d9f0a1b2c3d4e5f61".into(),
            admission_token: "eyJ0eXAiOiJKV1QiLCJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ2aXNpdG9yLTNmOWMifQ.sig".into(),
            return_to: "1796765754.aHR0cHMKc2hvcC5leGFtcGxlCi9kcm9wL2l0ZW0_c2l6ZT00Mg.ITTaRorPoxR2-DYqoPGr90gTAs7iaTItZOBh2NUqtow".into(),
        }
    }
}

#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct SessionOut {
    /// Where the visitor goes now: the page they first asked for, query included.
    pub location: String,
    pub session_ends_at: DateTime<Utc>,
}

impl poem_openapi::types::Example for SessionOut {
    fn example() -> Self {
        SessionOut {
            location: "https://shop.example/drop/item?size=42".into(),
            session_ends_at: super::spec::example_time(),
        }
    }
}

#[derive(ApiResponse)]
pub enum SessionResponse {
    /// The session's cookie is set; the page sends the visitor to `location`.
    #[oai(status = 200)]
    Ok(
        Json<SessionOut>,
        #[oai(header = "Set-Cookie")] String,
        #[oai(header = "Cache-Control")] String,
    ),
}

fn parse_gate_id(id: &str) -> Result<uuid::Uuid, ApiError> {
    uuid::Uuid::parse_str(id).map_err(|_| ServiceError::NotFound("gate").into())
}

fn cookies(req: &Request) -> &str {
    req.headers()
        .get(poem::http::header::COOKIE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// Whether the visitor reached sluice over HTTPS (through the site's proxy).
fn is_https(req: &Request) -> bool {
    req.headers()
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .map_or(req.uri().scheme_str() == Some("https"), |p| p == "https")
}

#[OpenApi(tag = "ApiTags::Gates")]
impl GatesApi {
    /// Create a gate
    ///
    /// Puts a waiting room in front of a site the shop cannot change: its proxy asks
    /// `/v1/gate/check` about each request (docs/integrating.md, "Put sluice in front of a
    /// site"). The gate's line is a sale of its own.
    #[oai(path = "/v1/gates", method = "post", operation_id = "createGate")]
    async fn create(&self, auth: AdminAuth, body: Json<GateIn>) -> Result<GateCreated, ApiError> {
        let operator = auth.allows(Role::Operator)?;
        let line =
            match (&body.sale_id, &body.line) {
                (Some(_), None) => None,
                (None, Some(line)) => Some(line.new_sale(&body.name)),
                _ => return Err(ServiceError::validation(
                    "sale_id",
                    "give exactly one of sale_id (an existing sale) or line (a line of its own)",
                )
                .into()),
            };
        let audit = sale_audit(operator, "createSale");
        let gate = gate_of(body.0, uuid::Uuid::nil(), None)?;
        let gate = admin::create(&self.app, gate, line.map(|l| (l, &audit)), operator).await?;
        Ok(GateCreated::Created(
            Json((&gate).into()),
            format!("/v1/gates/{}", gate.id),
        ))
    }

    /// List gates
    ///
    /// Every gate, oldest first, as this replica last read them (within `gate.refresh_ms`).
    #[oai(path = "/v1/gates", method = "get", operation_id = "listGates")]
    async fn list(&self, auth: AdminAuth) -> Result<GateListResponse, ApiError> {
        auth.allows(Role::Viewer)?;
        let set = self.app.gates.set();
        Ok(GateListResponse::Ok(Json(GateList {
            gates: set.gates.iter().map(|g| GateOut::from(&**g)).collect(),
        })))
    }

    /// Get a gate
    ///
    /// Its rules; the secret header by name only.
    #[oai(path = "/v1/gates/:gate_id", method = "get", operation_id = "getGate")]
    async fn get(&self, auth: AdminAuth, gate_id: Path<Text>) -> Result<GateResponse, ApiError> {
        auth.allows(Role::Viewer)?;
        let gate = visitors::gate_of(&self.app, parse_gate_id(&gate_id)?)?;
        Ok(GateResponse::Ok(Json((&*gate).into())))
    }

    /// Change a gate
    ///
    /// Replaces its rules, switches (`mode`: `queue_all`, `off`) included; its line stays.
    /// Every replica follows within `gate.refresh_ms`.
    #[oai(
        path = "/v1/gates/:gate_id",
        method = "put",
        operation_id = "updateGate"
    )]
    async fn update(
        &self,
        auth: AdminAuth,
        gate_id: Path<Text>,
        body: Json<GateIn>,
    ) -> Result<GateResponse, ApiError> {
        let operator = auth.allows(Role::Operator)?;
        let before = visitors::gate_of(&self.app, parse_gate_id(&gate_id)?)?;
        if body.line.is_some() {
            return Err(ServiceError::validation("line", "a gate's line cannot change").into());
        }
        let gate = gate_of(body.0, before.id, Some(&before))?;
        let gate = admin::update(&self.app, gate, operator).await?;
        Ok(GateResponse::Ok(Json((&gate).into())))
    }

    /// Remove a gate
    ///
    /// Its site is no longer guarded; its sale stays.
    #[oai(
        path = "/v1/gates/:gate_id",
        method = "delete",
        operation_id = "deleteGate"
    )]
    async fn delete(&self, auth: AdminAuth, gate_id: Path<Text>) -> Result<GateGone, ApiError> {
        let operator = auth.allows(Role::Operator)?;
        admin::delete(&self.app, parse_gate_id(&gate_id)?, operator).await?;
        Ok(GateGone::Done)
    }

    /// End a visitor's session
    ///
    /// The origin's call when a visitor is done (checkout, logout), naming the visitor id the
    /// gate passed it in `X-Sluice-Visitor`: the place goes to the next visitor, and the
    /// session's cookie passes no more on any replica (within `gate.refresh_ms`). 404 when the
    /// visitor has no session.
    #[oai(
        path = "/v1/gates/:gate_id/sessions/:visitor_id/end",
        method = "post",
        operation_id = "endGateSession"
    )]
    async fn end(
        &self,
        auth: AdminAuth,
        gate_id: Path<Text>,
        visitor_id: Path<Text>,
    ) -> Result<GateGone, ApiError> {
        auth.allows(Role::Operator)?;
        let gate = parse_gate_id(&gate_id)?;
        if visitors::end(&self.app, gate, &visitor_id).await? {
            Ok(GateGone::Done)
        } else {
            Err(ServiceError::NotFound("session").into())
        }
    }

    /// How to enter a gate
    ///
    /// What the waiting page needs first: the gate's line and its challenge (with the site
    /// key the widget is shown with). No token needed.
    #[oai(
        path = "/v1/gates/:gate_id/entry",
        method = "get",
        operation_id = "getGateEntry"
    )]
    async fn entry(&self, gate_id: Path<Text>) -> Result<GateEntryResponse, ApiError> {
        let gate = visitors::gate_of(&self.app, parse_gate_id(&gate_id)?)?;
        let widget = Verifier::widget(&self.app.config.gate, gate.challenge);
        Ok(GateEntryResponse::Ok(Json(GateEntryOut {
            gate_id: gate.id.to_string(),
            sale_id: gate.sale.to_string(),
            challenge: challenge_name(gate.challenge),
            site_key: widget.map(|(key, _)| key.to_owned()),
            script_url: widget.map(|(_, script)| script.to_owned()),
        })))
    }

    /// Enter a gate as a visitor
    ///
    /// For a visitor without an account: once the gate's challenge is passed, a visitor
    /// cookie (`HttpOnly`, `SameSite=Lax`) keeps the browser's one place, and the answer's
    /// token joins the gate's line (`joinSale`) and follows the attempt. A browser that is a
    /// visitor already needs no challenge again.
    #[oai(
        path = "/v1/gates/:gate_id/visitors",
        method = "post",
        operation_id = "enterGate"
    )]
    async fn enter(
        &self,
        req: &Request,
        gate_id: Path<Text>,
        body: Json<EnterGate>,
    ) -> Result<VisitorResponse, ApiError> {
        let gate = parse_gate_id(&gate_id)?;
        let address = super::client_ip(req, self.app.config.http.trust_forwarded_for);
        let entered = visitors::enter(
            &self.app,
            gate,
            cookies(req),
            body.0.challenge_answer.as_deref(),
            address,
        )
        .await?;
        let cookie = entered.cookie.as_deref().map(|value| {
            visitors::set_cookie(
                &entered.gate,
                VISITOR_COOKIE,
                value,
                visitors::VISITOR_COOKIE_SECS,
                is_https(req),
            )
        });
        Ok(VisitorResponse::Ok(
            Json(VisitorOut {
                user_id: visitor_user(entered.gate.id, &entered.visitor).to_string(),
                visitor_id: entered.visitor,
                sale_id: entered.gate.sale.to_string(),
                token: entered.token,
            }),
            cookie,
            "no-store".into(),
        ))
    }

    /// Trade an admission for a session
    ///
    /// The waiting page's call once the visitor's turn came: the admission (the visitor's
    /// own: another visitor's is refused) becomes the session cookie of the guarded site, and
    /// the answer's `location` is the page first asked for. No token is left in the address.
    #[oai(
        path = "/v1/gates/:gate_id/session",
        method = "post",
        operation_id = "tradeAdmission"
    )]
    async fn trade(
        &self,
        req: &Request,
        gate_id: Path<Text>,
        body: Json<TradeAdmission>,
    ) -> Result<SessionResponse, ApiError> {
        let gate = parse_gate_id(&gate_id)?;
        let attempt = AttemptId::parse(&body.attempt_id)
            .map_err(|_| ServiceError::validation("attempt_id", "not an attempt id"))?;
        let given = visitors::trade(
            &self.app,
            gate,
            cookies(req),
            attempt,
            &body.admission_token,
            &body.return_to,
        )
        .await?;
        let ends = Utc::now() + chrono::Duration::seconds(given.max_age);
        let cookie = visitors::set_cookie(
            &given.gate,
            SESSION_COOKIE,
            &given.cookie,
            given.max_age,
            is_https(req),
        );
        Ok(SessionResponse::Ok(
            Json(SessionOut {
                location: given.location,
                session_ends_at: Utc
                    .timestamp_opt(ends.timestamp(), 0)
                    .single()
                    .unwrap_or(ends),
            }),
            cookie,
            "no-store".into(),
        ))
    }
}
