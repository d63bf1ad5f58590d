//! What a signed-in user may buy in a sale (`Authorization: Bearer <JWT>`), and the same for
//! a visitor before login (no token, no proof-of-work settings), cacheable by browsers and CDNs.

use crate::api::text::Text;
use poem_openapi::param::{Header, Path};
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object, OpenApi};

use super::problem::ApiError;
use chrono::{DateTime, Utc};

use super::sales::types::{OpeningName, SaleOut, SaleStatusName, StockKindName};
use super::security::UserAuth;
use super::spec::example_time;
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
        Json<Box<OfferOut>>,
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
pub(super) fn none_match(if_none_match: Option<&str>, etag: &str) -> bool {
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
    async fn offer(&self, auth: UserAuth, sale_id: Path<Text>) -> Result<OfferResponse, ApiError> {
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
        sale_id: Path<Text>,
        #[oai(name = "If-None-Match")] if_none_match: Header<Option<Text>>,
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
        Ok(PublicOfferResponse::Ok(Json(Box::new(out)), etag, cache))
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

/// A sale as a buyer sees it.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct OfferOut {
    pub sale_id: String,
    pub name: String,
    pub status: SaleStatusName,
    pub opens_at: DateTime<Utc>,
    pub stock_kind: StockKindName,
    /// Most units one user may hold or buy.
    pub per_user_limit: u32,
    /// How long a user whose turn comes has to come back and hold, in seconds.
    pub admission_ttl_secs: u32,
    /// Units free to hold now.
    pub remaining: u32,
    /// Seats still free (seated sales only).
    #[oai(skip_serializing_if_is_none)]
    pub free_seats: Option<Vec<String>>,
    #[oai(skip_serializing_if_is_none)]
    pub proof_of_work: Option<ProofOfWorkOut>,
    /// How the queue opens: with `lottery_at_open`, the order of everyone who joins before
    /// `opens_at` is drawn then, so joining earlier gives no advantage (a page should say so,
    /// and that a place shown before the opening is not yet the one that counts).
    pub opening: OpeningName,
    /// The lottery's seed (lottery sales), published so anyone can re-derive the order: SHA-1
    /// (hex) of `<lottery_seed>:<user id>`, ascending.
    #[oai(skip_serializing_if_is_none)]
    pub lottery_seed: Option<String>,
    /// The sale's phases (a member presale, then the general sale), in order: who each lets
    /// in and from when. Empty: everyone, from `opens_at`.
    pub phases: Vec<OfferPhaseOut>,
    /// The currency of the prices (a priced sale).
    #[oai(skip_serializing_if_is_none)]
    pub currency: Option<String>,
    /// A unit's price, or a seat's in no category, in the currency's smallest unit.
    #[oai(skip_serializing_if_is_none)]
    pub unit_price: Option<u64>,
    /// A named-seat sale's categories and their prices.
    pub categories: Vec<OfferCategoryOut>,
    /// A sale made from a venue layout: draw its seats with `getPublicLayout` and
    /// `getSeatMap`.
    #[oai(skip_serializing_if_is_none)]
    pub layout_id: Option<String>,
}

/// A seat category as a buyer sees it.
#[derive(Debug, Clone, Object)]
pub struct OfferCategoryOut {
    pub name: String,
    pub unit_price: u64,
}

/// A phase as a buyer sees it.
#[derive(Debug, Clone, Object)]
pub struct OfferPhaseOut {
    pub name: String,
    pub starts_at: DateTime<Utc>,
    /// `everyone`; `list` (members the shop listed); `codes` (a join sends its access code as
    /// `Sluice-Access-Code`).
    pub audience: super::sales::phases::AudienceName,
    /// `lottery_at_open`: a later phase whose pre-queue (from `joins_from`) is drawn at
    /// `starts_at` by SHA-1 (hex) of `<lottery_seed>:<user id>`; joining early in it gives no
    /// advantage. The first phase opens as the sale does (`opening`).
    pub opening: OpeningName,
    #[oai(skip_serializing_if_is_none)]
    pub lottery_seed: Option<String>,
    #[oai(skip_serializing_if_is_none)]
    pub joins_from: Option<DateTime<Utc>>,
}

/// The work a join must show, when the sale asks for it (`getOffer` only): find a nonce making SHA-256 of `<salt>:<sale id>:<user id>:<nonce>`
/// start with `difficulty_bits` zero bits; send it as `Sluice-Proof-Of-Work`.
#[derive(Debug, Clone, Object)]
pub struct ProofOfWorkOut {
    pub difficulty_bits: u32,
    pub salt: String,
}

impl poem_openapi::types::Example for OfferOut {
    fn example() -> Self {
        OfferOut {
            sale_id: "0193a0c4-e1b2-7c3d-9f0a-1b2c3d4e5f60".into(),
            name: "Summer tour — Berlin".into(),
            status: SaleStatusName::Open,
            opens_at: example_time(),
            stock_kind: StockKindName::Seats,
            per_user_limit: 4,
            admission_ttl_secs: 300,
            remaining: 3,
            free_seats: Some(vec!["A-1".into(), "A-2".into(), "B-7".into()]),
            proof_of_work: Some(ProofOfWorkOut {
                difficulty_bits: 16,
                salt: "9f2c41d07be35a18c6e0f4a2d1b87c3e".into(),
            }),
            opening: OpeningName::Fifo,
            lottery_seed: None,
            phases: vec![OfferPhaseOut {
                name: "General sale".into(),
                starts_at: example_time(),
                audience: super::sales::phases::AudienceName::Everyone,
                opening: OpeningName::Fifo,
                lottery_seed: None,
                joins_from: None,
            }],
            currency: Some("KRW".into()),
            unit_price: Some(99_000),
            categories: vec![OfferCategoryOut {
                name: "VIP".into(),
                unit_price: 150_000,
            }],
            layout_id: None,
        }
    }
}

impl From<Offer> for OfferOut {
    fn from(offer: Offer) -> Self {
        let pow = offer.sale.proof_of_work.clone();
        let price = offer.sale.price.clone();
        let layout_id = offer.sale.layout.map(|l| l.to_string());
        let phases = offer
            .phases
            .iter()
            .map(|p| OfferPhaseOut {
                name: p.name.clone(),
                starts_at: p.starts_at,
                audience: p.audience.into(),
                opening: if p.lottery_seed.is_some() {
                    OpeningName::LotteryAtOpen
                } else {
                    OpeningName::Fifo
                },
                lottery_seed: p.lottery_seed.clone(),
                joins_from: p.joins_from,
            })
            .collect();
        let sale = SaleOut::of(offer.sale, offer.remaining);
        OfferOut {
            sale_id: sale.id,
            name: sale.name,
            status: sale.status,
            opens_at: sale.opens_at,
            stock_kind: sale.stock_kind,
            per_user_limit: sale.per_user_limit,
            admission_ttl_secs: sale.admission_ttl_secs,
            remaining: sale.remaining,
            free_seats: offer.free_seats,
            proof_of_work: pow.is_on().then(|| ProofOfWorkOut {
                difficulty_bits: u32::from(pow.bits),
                salt: pow.salt,
            }),
            opening: sale.opening,
            lottery_seed: sale.lottery_seed,
            phases,
            currency: price.as_ref().map(|p| p.currency.to_string()),
            unit_price: price.as_ref().map(|p| p.unit_price),
            categories: price
                .iter()
                .flat_map(|p| &p.categories)
                .map(|c| OfferCategoryOut {
                    name: c.name.clone(),
                    unit_price: c.unit_price,
                })
                .collect(),
            layout_id,
        }
    }
}
