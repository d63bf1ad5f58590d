//! What a signed-in user may buy in a sale (`Authorization: Bearer <JWT>`), and the same for
//! a visitor before login (no token, no proof-of-work settings), cacheable by browsers and CDNs.

use poem_openapi::param::{Header, Path};
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

/// How long a browser or a CDN may reuse the public offer: as long as sluice itself keeps an
/// offer before reading it again.
const PUBLIC_CACHE_CONTROL: &str = "public, max-age=1";

#[derive(ApiResponse)]
pub enum PublicOfferResponse {
    /// The offer; `ETag` names this version of it.
    #[oai(status = 200)]
    Ok(
        Json<OfferOut>,
        #[oai(header = "ETag")] String,
        #[oai(header = "Cache-Control")] String,
    ),
    /// The offer is the one `If-None-Match` named.
    #[oai(status = 304)]
    NotModified(
        #[oai(header = "ETag")] String,
        #[oai(header = "Cache-Control")] String,
    ),
}

/// A strong validator of an offer's JSON: its SHA-256, shortened.
fn etag_of(offer: &OfferOut) -> String {
    use poem_openapi::types::ToJSON;
    use sha2::Digest;
    let body = offer.to_json_string();
    format!(
        "\"{}\"",
        &hex::encode(sha2::Sha256::digest(body.as_bytes()))[..32]
    )
}

/// Whether `If-None-Match` names `etag` (weak comparison: `W/` prefixes are ignored).
fn none_match(if_none_match: Option<&str>, etag: &str) -> bool {
    if_none_match.is_some_and(|header| {
        header
            .split(',')
            .map(|t| t.trim().trim_start_matches("W/"))
            .any(|t| t == "*" || t == etag)
    })
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

    /// Get a sale's public offer
    ///
    /// The offer for a visitor who has not signed in ("312 left" on the shop's page): the same
    /// as `getOffer` without the proof-of-work settings, and no token needed. Browsers and CDNs
    /// may cache it for a second (`Cache-Control`); send the `ETag` back as `If-None-Match` to
    /// get 304 while it is unchanged. Counts against the per-IP status limit.
    #[oai(
        path = "/v1/public/sales/:sale_id/offer",
        method = "get",
        operation_id = "getPublicOffer"
    )]
    async fn public_offer(
        &self,
        sale_id: Path<String>,
        #[oai(name = "If-None-Match")] if_none_match: Header<Option<String>>,
    ) -> Result<PublicOfferResponse, ApiError> {
        let id = parse_sale_id(&sale_id)?;
        let offer = service::offer::offer(&self.app, id).await?;
        let mut out: OfferOut = Offer::clone(&offer).into();
        out.proof_of_work = None;
        let etag = etag_of(&out);
        let cache = PUBLIC_CACHE_CONTROL.to_owned();
        if none_match(if_none_match.0.as_deref(), &etag) {
            return Ok(PublicOfferResponse::NotModified(etag, cache));
        }
        Ok(PublicOfferResponse::Ok(Json(out), etag, cache))
    }
}

#[cfg(test)]
mod tests {
    use super::none_match;

    #[test]
    fn if_none_match_names_the_etag_or_any() {
        let etag = "\"abc\"";
        assert!(none_match(Some("\"abc\""), etag));
        assert!(none_match(Some("W/\"abc\""), etag));
        assert!(none_match(Some("\"x\", \"abc\""), etag));
        assert!(none_match(Some("*"), etag));
        assert!(!none_match(Some("\"abd\""), etag));
        assert!(!none_match(None, etag));
    }
}
