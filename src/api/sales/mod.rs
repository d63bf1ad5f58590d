//! Admin operations on sales (`X-Admin-Key`).

use poem_openapi::param::{Header, Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, OpenApi};

use super::problem::ApiError;
use super::security::AdminAuth;
use super::text::Text;
use super::{parse_sale_id, ApiTags};
use crate::domain::{NewSale, SaleStatus, Ttls, UserId};
use crate::service::{self, idempotent, App, IdempotencyKey};
use types::{
    adaptive_bounds, AdmissionOut, AdmissionSettings, CreateSale, OpeningName, ProofOfWorkSettings,
    SaleOut, SalePage, SaleStatsOut, StoredSaleStatus,
};

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
        _auth: AdminAuth,
        body: Json<CreateSale>,
        #[oai(name = "Idempotency-Key")] key: Header<Option<String>>,
    ) -> Result<SaleCreated, ApiError> {
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
            lottery: match b.opening {
                OpeningName::Fifo => None,
                OpeningName::LotteryAtOpen => {
                    Some(b.lottery_seed.clone().unwrap_or_default().into_inner())
                }
            },
        };
        let app = &self.app;
        let sale_id = idempotent(
            app,
            &admin,
            key.as_ref(),
            &("createSale", &request),
            async { Ok(service::sales::create(app, new).await?.sale.id) },
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
        cursor: Query<Option<String>>,
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
    async fn get(&self, _auth: AdminAuth, sale_id: Path<String>) -> Result<SaleResponse, ApiError> {
        let id = parse_sale_id(&sale_id)?;
        Ok(SaleResponse::Ok(Json(
            service::sales::get(&self.app, id).await?.into(),
        )))
    }

    /// Pause admission
    ///
    /// Stops admitting; joins are still taken and waiting users keep their place.
    #[oai(path = "/:sale_id/pause", method = "post", operation_id = "pauseSale")]
    async fn pause(
        &self,
        _auth: AdminAuth,
        sale_id: Path<String>,
    ) -> Result<SaleResponse, ApiError> {
        self.set_status(&sale_id, SaleStatus::Paused).await
    }

    /// Resume admission
    ///
    /// Admits again after a pause. A closed sale cannot be resumed (409).
    #[oai(
        path = "/:sale_id/resume",
        method = "post",
        operation_id = "resumeSale"
    )]
    async fn resume(
        &self,
        _auth: AdminAuth,
        sale_id: Path<String>,
    ) -> Result<SaleResponse, ApiError> {
        self.set_status(&sale_id, SaleStatus::Open).await
    }

    /// Close a sale
    ///
    /// Refuses new joins and stops admission for good. Attempts still waiting end EXPIRED
    /// (`sale_closed`); those already holding or paying finish normally.
    #[oai(path = "/:sale_id/close", method = "post", operation_id = "closeSale")]
    async fn close(
        &self,
        _auth: AdminAuth,
        sale_id: Path<String>,
    ) -> Result<SaleResponse, ApiError> {
        self.set_status(&sale_id, SaleStatus::Closed).await
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
        sale_id: Path<String>,
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
        _auth: AdminAuth,
        sale_id: Path<String>,
        body: Json<AdmissionSettings>,
    ) -> Result<SaleResponse, ApiError> {
        let id = parse_sale_id(&sale_id)?;
        let b = body.0;
        let adaptive = adaptive_bounds(b.mode, b.min_rate_per_minute, b.max_rate_per_minute);
        let record =
            service::sales::set_admission(&self.app, id, b.rate_per_minute, b.max_active, adaptive)
                .await?;
        Ok(SaleResponse::Ok(Json(record.into())))
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
        _auth: AdminAuth,
        sale_id: Path<String>,
        body: Json<ProofOfWorkSettings>,
    ) -> Result<SaleResponse, ApiError> {
        let id = parse_sale_id(&sale_id)?;
        let record = service::sales::set_proof_of_work(&self.app, id, body.difficulty_bits).await?;
        Ok(SaleResponse::Ok(Json(record.into())))
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
        sale_id: Path<String>,
    ) -> Result<StatsResponse, ApiError> {
        let id = parse_sale_id(&sale_id)?;
        Ok(StatsResponse::Ok(Json(
            service::sales::stats(&self.app, id).await?.into(),
        )))
    }
}

impl SalesApi {
    async fn set_status(
        &self,
        sale_id: &str,
        status: SaleStatus,
    ) -> Result<SaleResponse, ApiError> {
        let id = parse_sale_id(sale_id)?;
        let record = service::sales::set_status(&self.app, id, status).await?;
        Ok(SaleResponse::Ok(Json(record.into())))
    }
}
