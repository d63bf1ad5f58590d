//! A sale's seat map for buyers' pages (no token): each seat free, held or sold, by row, as
//! runs; cacheable for a second, `ETag` by the holdings' version.

use poem_openapi::param::{Header, Path};
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object, OpenApi};

use super::problem::ApiError;
use super::text::Text;
use super::{parse_sale_id, ApiTags};
use crate::service::seat_map::SeatMap;
use crate::service::{self, App};

pub struct SeatMapApi {
    pub app: App,
}

#[derive(Debug, Clone, Object)]
pub struct RowStatesOut {
    pub id: String,
    /// The row's seats in the layout's order, as runs of a state and a count: `f` free, `h`
    /// held, `s` sold, `x` not sold in this sale (`f12h1s3`).
    pub states: String,
}

#[derive(Debug, Clone, Object)]
pub struct SectionStatesOut {
    pub id: String,
    pub rows: Vec<RowStatesOut>,
}

#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct SeatMapOut {
    pub sale_id: String,
    /// The venue layout the seats are drawn on (sections, rows and seats in the same order).
    pub layout_id: String,
    /// Grows with every change to the sale's seats.
    pub version: u64,
    pub free: u32,
    pub held: u32,
    pub sold: u32,
    pub sections: Vec<SectionStatesOut>,
}

impl poem_openapi::types::Example for SeatMapOut {
    fn example() -> Self {
        SeatMapOut {
            sale_id: "0193a0c4-e1b2-7c3d-9f0a-1b2c3d4e5f60".into(),
            layout_id: "0193a0c4-e1b2-7c3d-9f0a-1b2c3d4e5f70".into(),
            version: 4182,
            free: 14,
            held: 1,
            sold: 3,
            sections: vec![SectionStatesOut {
                id: "A".into(),
                rows: vec![RowStatesOut {
                    id: "1".into(),
                    states: "f12h1s3f2".into(),
                }],
            }],
        }
    }
}

fn out(sale: &str, map: &SeatMap) -> SeatMapOut {
    SeatMapOut {
        sale_id: sale.to_owned(),
        layout_id: map.layout.to_string(),
        version: map.version,
        free: map.free,
        held: map.held,
        sold: map.sold,
        sections: map
            .sections
            .iter()
            .map(|s| SectionStatesOut {
                id: s.id.clone(),
                rows: s
                    .rows
                    .iter()
                    .map(|r| RowStatesOut {
                        id: r.id.clone(),
                        states: r.states.clone(),
                    })
                    .collect(),
            })
            .collect(),
    }
}

#[derive(ApiResponse)]
pub enum SeatMapResponse {
    /// The map; `ETag` names its version.
    #[oai(status = 200)]
    Ok(
        Json<SeatMapOut>,
        #[oai(header = "ETag")] String,
        #[oai(header = "Cache-Control")] String,
    ),
    /// The map is the one `If-None-Match` named.
    #[oai(status = 304)]
    NotModified(
        #[oai(header = "ETag")] String,
        #[oai(header = "Cache-Control")] String,
    ),
}

#[OpenApi(tag = "ApiTags::Attempts")]
impl SeatMapApi {
    /// Get a sale's seat map
    ///
    /// Each seat of a sale made from a venue layout, free, held or sold, row by row as runs
    /// in the layout's order; no token needed. Each replica reads the sale's seats at most
    /// once per `queue.line_refresh_ms`, however many buyers look, so the map may be that
    /// old: a hold on a seat just taken still fails with 409 `seat-taken`. Send the `ETag`
    /// back as `If-None-Match` to get 304 while the seats are unchanged.
    #[oai(
        path = "/v1/public/sales/:sale_id/seat-map",
        method = "get",
        operation_id = "getSeatMap"
    )]
    async fn seat_map(
        &self,
        sale_id: Path<Text>,
        #[oai(name = "If-None-Match")] if_none_match: Header<Option<Text>>,
    ) -> Result<SeatMapResponse, ApiError> {
        let id = parse_sale_id(&sale_id)?;
        let map = service::seat_map::seat_map(&self.app, id).await?;
        let etag = format!("\"{}-{}\"", map.layout.simple(), map.version);
        let cache = "public, max-age=1".to_owned();
        if super::offer::none_match(if_none_match.0.as_deref(), &etag) {
            return Ok(SeatMapResponse::NotModified(etag, cache));
        }
        Ok(SeatMapResponse::Ok(Json(out(&sale_id, &map)), etag, cache))
    }
}
