//! A sale's phases (`X-Admin-Key`): the timeline with each phase's figures, set by operators
//! before the sale opens; a list phase's user ids (uploaded as CSV, listed by page); a codes
//! phase's access codes (generated, exported by page).

use chrono::{DateTime, Utc};
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::{Binary, Json};
use poem_openapi::{ApiRequest, ApiResponse, Enum, Object, OpenApi};

use super::types::OpeningName;
use crate::api::problem::ApiError;
use crate::api::security::AdminAuth;
use crate::api::spec::example_time;
use crate::api::text::Text;
use crate::api::{parse_sale_id, ApiTags, DEFAULT_PAGE};
use crate::domain::phase::{Audience, NewPhase};
use crate::domain::Role;
use crate::service::phases::PhaseView;
use crate::service::{self, App, ServiceError};

pub struct PhasesApi {
    pub app: App,
}

/// Who may join while a phase runs.
#[derive(Debug, Clone, Copy, Enum, PartialEq, Eq)]
#[oai(rename_all = "lowercase")]
pub enum AudienceName {
    /// Anyone signed in.
    Everyone,
    /// The user ids uploaded for the phase (`addPhaseMembers`).
    List,
    /// Users who redeemed one of the phase's access codes (`generateAccessCodes`), sent with
    /// the join as `Sluice-Access-Code`.
    Codes,
}

impl From<AudienceName> for Audience {
    fn from(a: AudienceName) -> Self {
        match a {
            AudienceName::Everyone => Audience::Everyone,
            AudienceName::List => Audience::List,
            AudienceName::Codes => Audience::Codes,
        }
    }
}

impl From<Audience> for AudienceName {
    fn from(a: Audience) -> Self {
        match a {
            Audience::Everyone => AudienceName::Everyone,
            Audience::List => AudienceName::List,
            Audience::Codes => AudienceName::Codes,
        }
    }
}

/// One phase as an operator sets it.
#[derive(Debug, Clone, Object)]
pub struct PhaseIn {
    #[oai(validator(min_length = 1, max_length = 100))]
    pub name: Text,
    /// When it begins; the first phase begins when the sale opens (its `opens_at`).
    pub starts_at: DateTime<Utc>,
    pub audience: AudienceName,
    /// The admission rate while it runs, users per minute.
    #[oai(validator(minimum(value = "1"), maximum(value = "1000000")))]
    pub rate_per_minute: u32,
    /// The cap on admitted, holding and paying users while it runs.
    #[oai(validator(minimum(value = "1"), maximum(value = "1000000")))]
    pub max_active: u32,
    /// Most units one user may hold or buy while it runs.
    #[oai(validator(minimum(value = "1"), maximum(value = "1000")))]
    pub per_user_limit: u32,
    /// A later phase opened by lottery: its audience joins a pre-queue from `joins_from`,
    /// which is not admitted before `starts_at` (those still waiting from the phase before go
    /// first); at `starts_at` it is drawn in the order of SHA-1 (hex) of
    /// `<lottery_seed>:<user id>`. The first phase opens as the sale does (its `opening`).
    #[oai(default)]
    pub lottery: bool,
    /// The lottery's seed, published with the phase (default: drawn now).
    #[oai(
        validator(min_length = 1, max_length = 64),
        skip_serializing_if_is_none
    )]
    pub lottery_seed: Option<Text>,
    /// A lottery phase: when its pre-queue opens, after the phase before it starts.
    #[oai(skip_serializing_if_is_none)]
    pub joins_from: Option<DateTime<Utc>>,
}

/// A sale's phases, in order of start.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct PhasesIn {
    #[oai(validator(min_items = 1, max_items = 10))]
    pub phases: Vec<PhaseIn>,
}

/// A phase on the sale's timeline, with what it counted.
#[derive(Debug, Clone, Object)]
pub struct PhaseOut {
    /// Its place on the timeline (0 first); the `position` of its members and codes.
    pub position: u32,
    pub name: String,
    pub starts_at: DateTime<Utc>,
    pub audience: AudienceName,
    pub rate_per_minute: u32,
    pub max_active: u32,
    pub per_user_limit: u32,
    /// How its line opens: the first phase's as the sale's; a later one's in join order, or
    /// drawn (`lottery_at_open`) at its start.
    pub opening: OpeningName,
    /// A later lottery phase's seed.
    #[oai(skip_serializing_if_is_none)]
    pub lottery_seed: Option<String>,
    /// A later lottery phase: when its pre-queue opens.
    #[oai(skip_serializing_if_is_none)]
    pub joins_from: Option<DateTime<Utc>>,
    /// Its settings took effect (the first phase: when the phases were set).
    pub begun: bool,
    /// Joins follow it now.
    pub in_effect: bool,
    /// Users who joined the line while it ran (absent before it began).
    #[oai(skip_serializing_if_is_none)]
    pub joined: Option<u64>,
    /// Of those, admitted, and bought (CONFIRMED).
    pub admitted: u64,
    pub bought: u64,
    /// A list phase: user ids on its list.
    pub members: u64,
    /// A codes phase: its codes, and the redemptions of them.
    pub codes: u64,
    pub codes_redeemed: u64,
}

#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct PhasesOut {
    pub phases: Vec<PhaseOut>,
}

fn phase_out(position: usize, view: PhaseView, opening: OpeningName) -> PhaseOut {
    let PhaseView {
        phase,
        in_effect,
        joined,
        counts,
    } = view;
    PhaseOut {
        position: position as u32,
        name: phase.name,
        starts_at: phase.starts_at,
        audience: phase.audience.into(),
        rate_per_minute: phase.admission.rate_per_minute,
        max_active: phase.admission.max_active,
        per_user_limit: phase.per_user_limit,
        opening: match (position, &phase.lottery_seed) {
            (0, _) => opening,
            (_, Some(_)) => OpeningName::LotteryAtOpen,
            (_, None) => OpeningName::Fifo,
        },
        lottery_seed: phase.lottery_seed,
        joins_from: phase.joins_from,
        begun: phase.applied,
        in_effect,
        joined,
        admitted: counts.admitted,
        bought: counts.bought,
        members: counts.members,
        codes: counts.codes,
        codes_redeemed: counts.redeemed,
    }
}

impl poem_openapi::types::Example for PhasesIn {
    fn example() -> Self {
        let phase = |name: &str, hours: i64, audience, limit| PhaseIn {
            name: Text::from(name),
            starts_at: example_time() + chrono::Duration::hours(hours),
            audience,
            rate_per_minute: 600,
            max_active: 200,
            per_user_limit: limit,
            lottery: false,
            lottery_seed: None,
            joins_from: None,
        };
        let mut general = phase("General sale", 2, AudienceName::Everyone, 4);
        general.lottery = true;
        general.lottery_seed = Some(Text::from("2026-12-05-general"));
        general.joins_from = Some(example_time() + chrono::Duration::minutes(90));
        PhasesIn {
            phases: vec![
                phase("Fan club presale", 0, AudienceName::List, 2),
                phase("Card holders", 1, AudienceName::Codes, 2),
                general,
            ],
        }
    }
}

impl poem_openapi::types::Example for PhasesOut {
    fn example() -> Self {
        PhasesOut {
            phases: vec![PhaseOut {
                position: 0,
                name: "Fan club presale".into(),
                starts_at: example_time(),
                audience: AudienceName::List,
                rate_per_minute: 600,
                max_active: 200,
                per_user_limit: 2,
                opening: OpeningName::Fifo,
                lottery_seed: None,
                joins_from: None,
                begun: true,
                in_effect: true,
                joined: Some(1840),
                admitted: 612,
                bought: 430,
                members: 25_000,
                codes: 0,
                codes_redeemed: 0,
            }],
        }
    }
}

#[derive(ApiResponse)]
pub enum PhasesResponse {
    #[oai(status = 200)]
    Ok(Json<PhasesOut>),
}

/// User ids to add to a list.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct MembersIn {
    #[oai(validator(max_items = 1000000))]
    pub user_ids: Vec<String>,
}

impl poem_openapi::types::Example for MembersIn {
    fn example() -> Self {
        MembersIn {
            user_ids: vec!["kakao:3012345678".into(), "shop:u-1029".into()],
        }
    }
}

/// User ids as JSON, or a CSV file's bytes (one id a line; an optional `user_id` header line).
#[derive(ApiRequest)]
pub enum MembersBody {
    #[oai(content_type = "application/json")]
    Json(Json<MembersIn>),
    /// A CSV file as it is (`curl --data-binary @members.csv`).
    #[oai(content_type = "application/octet-stream")]
    Csv(Binary<Vec<u8>>),
}

#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct MembersAdded {
    /// User ids new to the list (those on it before count once).
    pub added: u64,
    /// User ids the list holds now.
    pub total: u64,
}

impl poem_openapi::types::Example for MembersAdded {
    fn example() -> Self {
        MembersAdded {
            added: 24_980,
            total: 25_000,
        }
    }
}

#[derive(ApiResponse)]
pub enum MembersAddedResponse {
    #[oai(status = 200)]
    Ok(Json<MembersAdded>),
}

#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct MemberPage {
    /// In user id order.
    pub user_ids: Vec<String>,
    /// Pass as `after` for the next page; absent on the last page.
    #[oai(skip_serializing_if_is_none)]
    pub next_cursor: Option<String>,
}

impl poem_openapi::types::Example for MemberPage {
    fn example() -> Self {
        MemberPage {
            user_ids: vec!["kakao:3012345678".into(), "shop:u-1029".into()],
            next_cursor: Some("shop:u-1029".into()),
        }
    }
}

#[derive(ApiResponse)]
pub enum MemberPageResponse {
    #[oai(status = 200)]
    Ok(Json<MemberPage>),
}

#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct GenerateCodes {
    /// How many codes to make.
    #[oai(validator(minimum(value = "1"), maximum(value = "10000")))]
    pub count: u32,
    /// How many users each code lets in (each once); 1: single-use.
    #[oai(
        default = "one",
        validator(minimum(value = "1"), maximum(value = "1000000"))
    )]
    pub max_uses: u32,
}

fn one() -> u32 {
    1
}

impl poem_openapi::types::Example for GenerateCodes {
    fn example() -> Self {
        GenerateCodes {
            count: 500,
            max_uses: 1,
        }
    }
}

#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct CodesCreated {
    pub codes: Vec<String>,
}

impl poem_openapi::types::Example for CodesCreated {
    fn example() -> Self {
        CodesCreated {
            codes: vec!["K7QX-3MPD-9TRA".into(), "H4WN-8ZCE-2FJB".into()],
        }
    }
}

#[derive(ApiResponse)]
pub enum CodesCreatedResponse {
    #[oai(status = 201)]
    Created(Json<CodesCreated>),
}

#[derive(Debug, Clone, Object)]
pub struct CodeOut {
    pub code: String,
    pub max_uses: u32,
    /// Users who redeemed it.
    pub used: u32,
}

#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct CodePage {
    /// In code order.
    pub codes: Vec<CodeOut>,
    /// Pass as `after` for the next page; absent on the last page.
    #[oai(skip_serializing_if_is_none)]
    pub next_cursor: Option<String>,
}

impl poem_openapi::types::Example for CodePage {
    fn example() -> Self {
        CodePage {
            codes: vec![CodeOut {
                code: "K7QX-3MPD-9TRA".into(),
                max_uses: 1,
                used: 1,
            }],
            next_cursor: None,
        }
    }
}

#[derive(ApiResponse)]
pub enum CodePageResponse {
    #[oai(status = 200)]
    Ok(Json<CodePage>),
}

/// The cursor of a full page: its last item.
fn next_cursor(items: &[String], limit: u32) -> Option<String> {
    (items.len() as u32 == limit)
        .then(|| items.last().cloned())
        .flatten()
}

#[OpenApi(prefix_path = "/v1/sales", tag = "ApiTags::Sales")]
impl PhasesApi {
    /// Get a sale's phases
    ///
    /// The sale's phases on their timeline: who each lets in, the settings it runs with,
    /// whether it has begun and runs now, and what it counted (joined, admitted, bought; its
    /// list's size; its codes and their redemptions). Empty for a sale without phases.
    #[oai(path = "/:sale_id/phases", method = "get", operation_id = "getPhases")]
    async fn get(&self, _auth: AdminAuth, sale_id: Path<Text>) -> Result<PhasesResponse, ApiError> {
        let sale = parse_sale_id(&sale_id)?;
        self.answer(sale, service::phases::list(&self.app, sale).await?)
            .await
    }

    /// Set a sale's phases
    ///
    /// Replaces the sale's phases, before it opens: e.g. a member presale from 19:00 (a
    /// `list`), then the general sale from 20:00 (`everyone`). The first begins when the sale
    /// opens (`starts_at` = the sale's `opens_at`) and opens as the sale does (FIFO or its
    /// lottery); each later one begins at its `starts_at`, when its rate, cap and per-user
    /// limit replace the sale's, and opens in join order or by lottery (`lottery`: its
    /// audience joins a pre-queue from `joins_from`, drawn at `starts_at`). The stock is the sale's: what one phase leaves, the next
    /// sells. While a phase runs, a join of a user it does not let in answers 403
    /// `not-in-phase` with the next phase open to them.
    #[oai(path = "/:sale_id/phases", method = "put", operation_id = "setPhases")]
    async fn set(
        &self,
        auth: AdminAuth,
        sale_id: Path<Text>,
        body: Json<PhasesIn>,
    ) -> Result<PhasesResponse, ApiError> {
        let operator = auth.allows(Role::Operator)?;
        let sale = parse_sale_id(&sale_id)?;
        let mut new = Vec::new();
        for p in body.0.phases {
            let seed = p.lottery_seed.map(Text::into_inner);
            if seed.is_some() && !p.lottery {
                let e = ServiceError::validation("phases.lottery_seed", "for a lottery phase");
                return Err(e.into());
            }
            new.push(NewPhase {
                name: p.name.into_inner(),
                starts_at: p.starts_at,
                audience: p.audience.into(),
                rate_per_minute: p.rate_per_minute,
                max_active: p.max_active,
                per_user_limit: p.per_user_limit,
                lottery: p.lottery.then_some(seed),
                joins_from: p.joins_from,
            });
        }
        let views = service::phases::set(&self.app, sale, new, operator).await?;
        self.answer(sale, views).await
    }

    /// Add user ids to a list phase
    ///
    /// User ids added to the list of the `list` phase at `position`: as JSON (`user_ids`), or
    /// a CSV file's bytes as `application/octet-stream`, one id a line (a first line `user_id`
    /// is a header; blank lines are skipped). Idempotent: an id on the list already counts
    /// once, so a failed upload is sent again whole. A list holds up to a million ids; one
    /// request may carry them all (up to 40 MiB). A bad id refuses the whole upload, naming
    /// its line.
    ///
    /// ```csv
    /// user_id
    /// kakao:3012345678
    /// shop:u-1029
    /// ```
    #[oai(
        path = "/:sale_id/phases/:position/members",
        method = "post",
        operation_id = "addPhaseMembers"
    )]
    async fn add_members(
        &self,
        auth: AdminAuth,
        sale_id: Path<Text>,
        #[oai(validator(maximum(value = "9")))] position: Path<u32>,
        body: MembersBody,
    ) -> Result<MembersAddedResponse, ApiError> {
        let operator = auth.allows(Role::Operator)?;
        let sale = parse_sale_id(&sale_id)?;
        let users = match body {
            MembersBody::Json(json) => json.0.user_ids,
            MembersBody::Csv(bytes) => service::phases::csv_user_ids(&bytes)?,
        };
        let (added, total) =
            service::phases::add_members(&self.app, sale, position.0, users, operator).await?;
        Ok(MembersAddedResponse::Ok(Json(MembersAdded {
            added,
            total,
        })))
    }

    /// List a list phase's user ids
    ///
    /// A page of the list, in user id order; pass `next_cursor` as `after` for the next.
    #[oai(
        path = "/:sale_id/phases/:position/members",
        method = "get",
        operation_id = "listPhaseMembers"
    )]
    async fn members(
        &self,
        _auth: AdminAuth,
        sale_id: Path<Text>,
        #[oai(validator(maximum(value = "9")))] position: Path<u32>,
        #[oai(validator(max_length = 256))] after: Query<Option<Text>>,
        #[oai(validator(minimum(value = "1"), maximum(value = "1000")))] limit: Query<Option<u32>>,
    ) -> Result<MemberPageResponse, ApiError> {
        let sale = parse_sale_id(&sale_id)?;
        let limit = limit.0.unwrap_or(DEFAULT_PAGE);
        let user_ids =
            service::phases::members(&self.app, sale, position.0, after.0.as_deref(), limit)
                .await?;
        let next_cursor = next_cursor(&user_ids, limit);
        Ok(MemberPageResponse::Ok(Json(MemberPage {
            user_ids,
            next_cursor,
        })))
    }

    /// Generate access codes
    ///
    /// Makes `count` new codes for the `codes` phase at `position`, each letting in up to
    /// `max_uses` users, each once: a code is bound to each user who redeems it (a join with
    /// `Sluice-Access-Code`), and that user joins the phase again without it. Hand them out
    /// as you like; `listAccessCodes` exports them with their use.
    #[oai(
        path = "/:sale_id/phases/:position/codes",
        method = "post",
        operation_id = "generateAccessCodes"
    )]
    async fn generate_codes(
        &self,
        auth: AdminAuth,
        sale_id: Path<Text>,
        #[oai(validator(maximum(value = "9")))] position: Path<u32>,
        body: Json<GenerateCodes>,
    ) -> Result<CodesCreatedResponse, ApiError> {
        let operator = auth.allows(Role::Operator)?;
        let sale = parse_sale_id(&sale_id)?;
        let codes = service::phases::generate_codes(
            &self.app,
            sale,
            position.0,
            body.count,
            body.max_uses,
            operator,
        )
        .await?;
        Ok(CodesCreatedResponse::Created(Json(CodesCreated { codes })))
    }

    /// Export a codes phase's access codes
    ///
    /// A page of the phase's codes in code order, each with its uses; pass `next_cursor` as
    /// `after` for the next. Operators only: a code lets someone in.
    #[oai(
        path = "/:sale_id/phases/:position/codes",
        method = "get",
        operation_id = "listAccessCodes"
    )]
    async fn codes(
        &self,
        auth: AdminAuth,
        sale_id: Path<Text>,
        #[oai(validator(maximum(value = "9")))] position: Path<u32>,
        #[oai(validator(max_length = 64))] after: Query<Option<Text>>,
        #[oai(validator(minimum(value = "1"), maximum(value = "1000")))] limit: Query<Option<u32>>,
    ) -> Result<CodePageResponse, ApiError> {
        auth.allows(Role::Operator)?;
        let sale = parse_sale_id(&sale_id)?;
        let limit = limit.0.unwrap_or(DEFAULT_PAGE);
        let codes =
            service::phases::codes(&self.app, sale, position.0, after.0.as_deref(), limit).await?;
        let keys: Vec<String> = codes.iter().map(|c| c.code.clone()).collect();
        Ok(CodePageResponse::Ok(Json(CodePage {
            next_cursor: next_cursor(&keys, limit),
            codes: codes
                .into_iter()
                .map(|c| CodeOut {
                    code: c.code,
                    max_uses: c.max_uses,
                    used: c.used,
                })
                .collect(),
        })))
    }
}

impl PhasesApi {
    async fn answer(
        &self,
        sale: crate::domain::SaleId,
        views: Vec<PhaseView>,
    ) -> Result<PhasesResponse, ApiError> {
        let record = service::sales::get(&self.app, sale).await?;
        let opening = super::types::SaleOut::from(record).opening;
        Ok(PhasesResponse::Ok(Json(PhasesOut {
            phases: views
                .into_iter()
                .enumerate()
                .map(|(i, v)| phase_out(i, v, opening))
                .collect(),
        })))
    }
}
