//! Admin operations on sales (`X-Admin-Key`): reads for every role, changes for operators,
//! each change written to the admin audit log.

use poem_openapi::param::{Header, Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, OpenApi};

use super::problem::ApiError;
use super::security::AdminAuth;
use super::text::Text;
use super::{parse_sale_id, ApiTags};
use poem_openapi::types::ToJSON;

use crate::domain::{NewPrice, NewSale, Operator, Role, SaleId, SaleStatus, Ttls, UserId};
use crate::ledger::SaleRecord;
use crate::service::sales::SaleAudit;
use crate::service::{self, idempotent, App, IdempotencyKey, ServiceError};
use types::{
    adaptive_bounds, AdmissionOut, AdmissionSettings, CreateSale, OpeningName, ProofOfWorkSettings,
    SaleFiguresOut, SaleOut, SalePage, SaleStatsOut, StockChangeIn, StoredSaleStatus, UpdateSale,
};

pub mod phases;
pub mod types;

pub struct SalesApi {
    pub app: App,
}

#[derive(ApiResponse)]
pub enum SaleCreated {
    /// The sale was created (or, with a repeated Idempotency-Key, had been).
    #[oai(status = 201)]
    Created(Json<SaleOut>, #[oai(header = "Location")] String),
}

#[derive(ApiResponse)]
pub enum SaleResponse {
    #[oai(status = 200)]
    Ok(Json<SaleOut>),
}

#[derive(ApiResponse)]
pub enum AdmissionResponse {
    #[oai(status = 200)]
    Ok(Json<AdmissionOut>),
}

#[derive(ApiResponse)]
pub enum SalePageResponse {
    #[oai(status = 200)]
    Ok(Json<SalePage>),
}

#[derive(ApiResponse)]
pub enum FiguresResponse {
    #[oai(status = 200)]
    Ok(Json<SaleFiguresOut>),
}

#[derive(ApiResponse)]
pub enum StatsResponse {
    #[oai(status = 200)]
    Ok(Json<SaleStatsOut>),
}

#[OpenApi(prefix_path = "/v1/sales", tag = "ApiTags::Sales")]
impl SalesApi {
    /// Create a sale
    ///
    /// Creates a sale with its stock (a quantity or named seats), time limits and admission
    /// settings. It is open at once, or scheduled if `opens_at` is ahead (joins wait until then).
    /// Send an `Idempotency-Key` to make retries safe.
    #[oai(path = "/", method = "post", operation_id = "createSale")]
    async fn create(
        &self,
        auth: AdminAuth,
        body: Json<CreateSale>,
        #[oai(name = "Idempotency-Key")] key: Header<Option<Text>>,
    ) -> Result<SaleCreated, ApiError> {
        let operator = auth.allows(Role::Operator)?;
        let key = key.0.as_deref().map(IdempotencyKey::parse).transpose()?;
        let admin = UserId::parse("admin").expect("static id");
        let request = body.0.clone();
        let b = body.0;
        let new = NewSale {
            name: b.name.into_inner(),
            opens_at: b.opens_at,
            closes_at: b.closes_at,
            quantity: b.quantity,
            seats: b
                .seats
                .map(|seats| seats.into_iter().map(Text::into_inner).collect()),
            per_user_limit: b.per_user_limit,
            ttls: Ttls {
                admission_secs: b.admission_ttl_secs,
                hold_secs: b.hold_ttl_secs,
                payment_secs: b.payment_ttl_secs,
            },
            rate_per_minute: b.rate_per_minute,
            max_active: b.max_active,
            adaptive: adaptive_bounds(
                b.admission_mode,
                b.min_rate_per_minute,
                b.max_rate_per_minute,
            ),
            price: NewPrice {
                currency: b.currency.map(Text::into_inner),
                unit_price: b.unit_price,
                categories: b
                    .categories
                    .unwrap_or_default()
                    .into_iter()
                    .map(|c| {
                        let seats = c.seats.into_iter().flatten().map(Text::into_inner);
                        (c.name.into_inner(), c.unit_price, seats.collect())
                    })
                    .collect(),
            },
            lottery: match b.opening {
                OpeningName::Fifo => None,
                OpeningName::LotteryAtOpen => {
                    Some(b.lottery_seed.clone().unwrap_or_default().into_inner())
                }
            },
            layout: b
                .layout_id
                .as_deref()
                .map(uuid::Uuid::parse_str)
                .transpose()
                .map_err(|_| ServiceError::validation("layout_id", "not a layout id"))?,
            instant: b.instant,
        };
        let app = &self.app;
        let sale_id = idempotent(
            app,
            &admin,
            key.as_ref(),
            &("createSale", &request),
            async {
                let audit = sale_audit(operator, "createSale");
                let created = service::sales::create(app, new, &audit).await?;
                Ok(created.sale.id)
            },
        )
        .await?;
        let record = service::sales::get(app, sale_id).await?;
        let location = format!("/v1/sales/{sale_id}");
        Ok(SaleCreated::Created(Json(record.into()), location))
    }

    /// List sales
    ///
    /// The sales, newest first, `status` only if given. Pass the answer's `next_cursor` as
    /// `cursor` for the next page; sales created meanwhile come before the first page, never
    /// inside a later one.
    #[oai(
        path = "/",
        method = "get",
        operation_id = "listSales",
        tag = "ApiTags::Support"
    )]
    async fn list_sales(
        &self,
        _auth: AdminAuth,
        status: Query<Option<StoredSaleStatus>>,
        cursor: Query<Option<Text>>,
        #[oai(validator(minimum(value = "1"), maximum(value = "100")))] limit: Query<Option<u32>>,
    ) -> Result<SalePageResponse, ApiError> {
        let page = service::support::sales(
            &self.app,
            status.0.map(Into::into),
            cursor.0.as_deref(),
            limit.0.unwrap_or(crate::api::DEFAULT_PAGE),
        )
        .await?;
        Ok(SalePageResponse::Ok(Json(page.into())))
    }

    /// Get a sale
    ///
    /// The sale's settings, status and remaining stock.
    #[oai(path = "/:sale_id", method = "get", operation_id = "getSale")]
    async fn get(&self, _auth: AdminAuth, sale_id: Path<Text>) -> Result<SaleResponse, ApiError> {
        let id = parse_sale_id(&sale_id)?;
        Ok(SaleResponse::Ok(Json(
            service::sales::get(&self.app, id).await?.into(),
        )))
    }

    /// Pause admission
    ///
    /// Stops admitting; joins are still taken and waiting users keep their place.
    #[oai(path = "/:sale_id/pause", method = "post", operation_id = "pauseSale")]
    async fn pause(&self, auth: AdminAuth, sale_id: Path<Text>) -> Result<SaleResponse, ApiError> {
        self.change(&auth, "pauseSale", &sale_id, async |app, id, audit| {
            service::sales::set_status(app, id, SaleStatus::Paused, Some(audit)).await
        })
        .await
    }

    /// Resume admission
    ///
    /// Admits again after a pause. A closed sale cannot be resumed (409).
    #[oai(
        path = "/:sale_id/resume",
        method = "post",
        operation_id = "resumeSale"
    )]
    async fn resume(&self, auth: AdminAuth, sale_id: Path<Text>) -> Result<SaleResponse, ApiError> {
        self.change(&auth, "resumeSale", &sale_id, async |app, id, audit| {
            service::sales::set_status(app, id, SaleStatus::Open, Some(audit)).await
        })
        .await
    }

    /// Close a sale
    ///
    /// Refuses new joins and stops admission for good. Attempts still waiting end EXPIRED
    /// (`sale_closed`); those already holding or paying finish normally. Like every change to
    /// a sale, it is answered once the ledger has it: should the queue store be away then, it
    /// takes the change within about a second of answering again.
    #[oai(path = "/:sale_id/close", method = "post", operation_id = "closeSale")]
    async fn close(&self, auth: AdminAuth, sale_id: Path<Text>) -> Result<SaleResponse, ApiError> {
        self.change(&auth, "closeSale", &sale_id, async |app, id, audit| {
            service::sales::set_status(app, id, SaleStatus::Closed, Some(audit)).await
        })
        .await
    }

    /// Get a sale's admission
    ///
    /// The admission settings and, in adaptive mode, the controller: the rate in force, what
    /// its last tick did and why, and each pressure signal against its target.
    #[oai(
        path = "/:sale_id/admission",
        method = "get",
        operation_id = "getAdmission"
    )]
    async fn get_admission(
        &self,
        _auth: AdminAuth,
        sale_id: Path<Text>,
    ) -> Result<AdmissionResponse, ApiError> {
        let id = parse_sale_id(&sale_id)?;
        let state = service::sales::admission(&self.app, id).await?;
        Ok(AdmissionResponse::Ok(Json(AdmissionOut::new(state))))
    }

    /// Set admission settings
    ///
    /// Changes the admission rate (users per minute), the cap on active users, and who sets
    /// the rate: `manual` (this rate) or `adaptive` (the controller, between
    /// `min_rate_per_minute` and `max_rate_per_minute`, following the back end's pressure).
    /// The admitter uses them from its next tick.
    #[oai(
        path = "/:sale_id/admission",
        method = "put",
        operation_id = "setAdmission"
    )]
    async fn admission(
        &self,
        auth: AdminAuth,
        sale_id: Path<Text>,
        body: Json<AdmissionSettings>,
    ) -> Result<SaleResponse, ApiError> {
        let b = body.0;
        let adaptive = adaptive_bounds(b.mode, b.min_rate_per_minute, b.max_rate_per_minute);
        self.change(&auth, "setAdmission", &sale_id, async |app, id, audit| {
            let (rate, max_active) = (b.rate_per_minute, b.max_active);
            service::sales::set_admission(app, id, rate, max_active, adaptive, audit).await
        })
        .await
    }

    /// Set proof of work on join
    ///
    /// Asks every join for a proof of work of `difficulty_bits` zero bits (0 turns it off), so
    /// a bot farm pays for each place. Raise it live during an attack: a new salt is drawn,
    /// and work done in advance is lost. Buyers' clients read the difficulty from `getOffer`.
    #[oai(
        path = "/:sale_id/proof-of-work",
        method = "put",
        operation_id = "setProofOfWork"
    )]
    async fn proof_of_work(
        &self,
        auth: AdminAuth,
        sale_id: Path<Text>,
        body: Json<ProofOfWorkSettings>,
    ) -> Result<SaleResponse, ApiError> {
        let bits = body.difficulty_bits;
        self.change(&auth, "setProofOfWork", &sale_id, async |app, id, audit| {
            service::sales::set_proof_of_work(app, id, bits, audit).await
        })
        .await
    }

    /// Get a sale's figures over time
    ///
    /// Waiting, active, admissions a minute, units holding, paying and sold, the rate and the
    /// adaptive controller's decisions, one point each `workers.figures_ms` over the last
    /// `minutes` (60 by default, at most a day), from samples sluice keeps in its ledger.
    #[oai(
        path = "/:sale_id/figures",
        method = "get",
        operation_id = "getSaleFigures"
    )]
    async fn figures(
        &self,
        _auth: AdminAuth,
        sale_id: Path<Text>,
        #[oai(validator(minimum(value = "1"), maximum(value = "1440")))] minutes: Query<
            Option<u32>,
        >,
    ) -> Result<FiguresResponse, ApiError> {
        let id = parse_sale_id(&sale_id)?;
        let points = service::figures::series(&self.app, id, minutes.0.unwrap_or(60)).await?;
        Ok(FiguresResponse::Ok(Json(SaleFiguresOut {
            interval_secs: self.app.config.workers.figures_ms.0 as f64 / 1000.0,
            points: points.into_iter().map(Into::into).collect(),
        })))
    }

    /// Change a sale's stock
    ///
    /// Adds units (`add`) or seats (`add_seats`), on sale at once, or withdraws free ones
    /// (`withdraw`, `withdraw_seats`): all asked or none (409 if some are held or sold, or a
    /// seat is not in the sale), and a sale keeps at least one. Works while the sale runs; the
    /// queue store follows the ledger. Written to the admin audit log.
    #[oai(
        path = "/:sale_id/stock",
        method = "post",
        operation_id = "changeStock"
    )]
    async fn change_stock(
        &self,
        auth: AdminAuth,
        sale_id: Path<Text>,
        body: Json<StockChangeIn>,
    ) -> Result<SaleResponse, ApiError> {
        let b = body.0;
        let seats = |s: Option<Vec<Text>>| s.map(|s| s.into_iter().map(Text::into_inner).collect());
        let (add_seats, withdraw_seats) = (seats(b.add_seats), seats(b.withdraw_seats));
        self.change(&auth, "changeStock", &sale_id, async |app, id, audit| {
            let (add, withdraw) = (b.add, b.withdraw);
            service::sales::change_stock(app, id, add, withdraw, add_seats, withdraw_seats, audit)
                .await
        })
        .await
    }

    /// Rename a sale or move its close
    ///
    /// A new `name` (shown to buyers) or `closes_at` (joins are refused after it); what is not
    /// given stays. Written to the admin audit log.
    #[oai(path = "/:sale_id", method = "patch", operation_id = "updateSale")]
    async fn update(
        &self,
        auth: AdminAuth,
        sale_id: Path<Text>,
        body: Json<UpdateSale>,
    ) -> Result<SaleResponse, ApiError> {
        let b = body.0;
        let name = b.name.map(Text::into_inner);
        self.change(&auth, "updateSale", &sale_id, async |app, id, audit| {
            service::sales::set_details(app, id, name, b.closes_at, audit).await
        })
        .await
    }

    /// Get a sale's counters
    ///
    /// Waiting, admitted, holding, paying, confirmed, expired by reason, and remaining stock.
    #[oai(
        path = "/:sale_id/stats",
        method = "get",
        operation_id = "getSaleStats"
    )]
    async fn stats(
        &self,
        _auth: AdminAuth,
        sale_id: Path<Text>,
    ) -> Result<StatsResponse, ApiError> {
        let id = parse_sale_id(&sale_id)?;
        Ok(StatsResponse::Ok(Json(
            service::sales::stats(&self.app, id).await?.into(),
        )))
    }
}

impl SalesApi {
    /// An operator's change to a sale: the role checked, and the change made with its entry in
    /// the admin audit log (the sale before and after it).
    async fn change(
        &self,
        auth: &AdminAuth,
        action: &str,
        sale_id: &str,
        change: impl AsyncFnOnce(&App, SaleId, &SaleAudit<'_>) -> service::ServiceResult<SaleRecord>,
    ) -> Result<SaleResponse, ApiError> {
        let operator = auth.allows(Role::Operator)?;
        let id = parse_sale_id(sale_id)?;
        let after = change(&self.app, id, &sale_audit(operator, action)).await?;
        Ok(SaleResponse::Ok(Json(after.into())))
    }
}

/// How the admin audit log shows a sale: as the API does.
pub(super) fn sale_audit<'a>(actor: &'a Operator, action: &'a str) -> SaleAudit<'a> {
    SaleAudit {
        actor,
        action,
        show: &|record| SaleOut::from(record.clone()).to_json(),
    }
}
