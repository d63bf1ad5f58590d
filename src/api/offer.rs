//! What a signed-in user may buy in a sale (`Authorization: Bearer <JWT>`).

use poem_openapi::param::Path;
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, OpenApi};

use super::problem::ApiError;
use super::security::UserAuth;
use super::types::OfferOut;
use super::{parse_sale_id, ApiTags};
use crate::service::limits::Limited;
use crate::service::offer::Offer;
use crate::service::{self, App};

pub struct OfferApi {
    pub app: App,
}

#[derive(ApiResponse)]
pub enum OfferResponse {
    #[oai(status = 200)]
    Ok(Json<OfferOut>),
}

#[OpenApi(tag = "ApiTags::Attempts")]
impl OfferApi {
    /// Get a sale's offer
    ///
    /// The sale as a buyer sees it: its name and status, how many units one user may take,
    /// how many are left and, for a seated sale, which seats are still free. Counts as a
    /// status request for the per-user limit.
    #[oai(
        path = "/v1/sales/:sale_id/offer",
        method = "get",
        operation_id = "getOffer"
    )]
    async fn offer(
        &self,
        auth: UserAuth,
        sale_id: Path<String>,
    ) -> Result<OfferResponse, ApiError> {
        let id = parse_sale_id(&sale_id)?;
        super::attempts::limit(&self.app, Limited::Status, &auth.0)?;
        let offer = service::offer::offer(&self.app, id).await?;
        Ok(OfferResponse::Ok(Json(Offer::clone(&offer).into())))
    }
}
