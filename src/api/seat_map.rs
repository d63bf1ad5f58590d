//! A sale's seat map for buyers' pages (no token): each seat free, held or sold, by row, as
//! runs; cacheable for a second, `ETag` by the holdings' version.

use std::time::Duration;

use futures_util::stream::{BoxStream, StreamExt};
use poem_openapi::param::{Header, Path};
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Enum, Object, OpenApi};
use serde::Serialize;

use super::event_stream::{EventStream, Message};
use super::problem::ApiError;
use super::text::Text;
use super::{parse_sale_id, ApiTags};
use crate::service::seat_map::{SeatMap, SeatState, Update};
use crate::service::{self, App};

pub struct SeatMapApi {
    pub app: App,
}

#[derive(Debug, Clone, Object, Serialize)]
pub struct RowStatesOut {
    pub id: String,
    /// The row's seats in the layout's order, as runs of a state and a count: `f` free, `h`
    /// held, `s` sold, `x` not sold in this sale (`f12h1s3`).
    pub states: String,
}

#[derive(Debug, Clone, Object, Serialize)]
pub struct SectionStatesOut {
    pub id: String,
    /// Its seats free, held and sold (the rest are not sold in this sale).
    pub free: u32,
    pub held: u32,
    pub sold: u32,
    pub rows: Vec<RowStatesOut>,
}

#[derive(Debug, Clone, Object, Serialize)]
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
                free: 14,
                held: 1,
                sold: 3,
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
                free: s.free,
                held: s.held,
                sold: s.sold,
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

/// A seat's state.
#[derive(Debug, Clone, Copy, Enum, PartialEq, Eq, Serialize)]
#[oai(rename_all = "lowercase")]
#[serde(rename_all = "lowercase")]
pub enum SeatStateName {
    Free,
    Held,
    Sold,
    /// Not sold in this sale.
    Off,
}

impl From<SeatState> for SeatStateName {
    fn from(s: SeatState) -> Self {
        match s {
            SeatState::Free => SeatStateName::Free,
            SeatState::Held => SeatStateName::Held,
            SeatState::Sold => SeatStateName::Sold,
            SeatState::Off => SeatStateName::Off,
        }
    }
}

#[derive(Debug, Clone, Object, Serialize)]
pub struct SeatChangeOut {
    pub seat: String,
    pub state: SeatStateName,
}

/// One event of a seat-map stream: `map`, the whole map (`map` set); or `seats`, the seats
/// that changed from `from_version` to `version` (`seats` set).
#[derive(Debug, Clone, Object, Serialize)]
#[oai(example)]
pub struct SeatEventOut {
    pub version: u64,
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_version: Option<u64>,
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub map: Option<SeatMapOut>,
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seats: Option<Vec<SeatChangeOut>>,
}

impl poem_openapi::types::Example for SeatEventOut {
    fn example() -> Self {
        SeatEventOut {
            version: 4183,
            from_version: Some(4182),
            map: None,
            seats: Some(vec![SeatChangeOut {
                seat: "A-1-13".into(),
                state: SeatStateName::Held,
            }]),
        }
    }
}

fn message(sale: &str, update: Update) -> Message<SeatEventOut> {
    match update {
        Update::Map(map) => Message {
            event: "map",
            id: map.version.to_string(),
            data: SeatEventOut {
                version: map.version,
                from_version: None,
                map: Some(out(sale, &map)),
                seats: None,
            },
        },
        Update::Changes(changes) => Message {
            event: "seats",
            id: changes.to.to_string(),
            data: SeatEventOut {
                version: changes.to,
                from_version: Some(changes.from),
                map: None,
                seats: Some(
                    changes
                        .seats
                        .iter()
                        .map(|(seat, state)| SeatChangeOut {
                            seat: seat.to_string(),
                            state: (*state).into(),
                        })
                        .collect(),
                ),
            },
        },
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

    /// Stream a sale's seat map
    ///
    /// Server-Sent Events: first the whole map (`event: map`), then the seats that change
    /// (`event: seats`: each seat and its new state, from `from_version` to `version`), as
    /// this replica's view of the sale's seats sees them (at most one store read per sale per
    /// `queue.line_refresh_ms` for all its streams). Each event's `id` is its version:
    /// reconnect with `Last-Event-ID` and the changes since are sent, each once, or the whole
    /// map when this replica no longer has them.
    #[oai(
        path = "/v1/public/sales/:sale_id/seat-map/events",
        method = "get",
        operation_id = "streamSeatMap"
    )]
    async fn events(
        &self,
        sale_id: Path<Text>,
        /// The `id` of the last event received, when reconnecting.
        #[oai(name = "Last-Event-ID")]
        last_event_id: Header<Option<Text>>,
    ) -> Result<EventStream<BoxStream<'static, Message<SeatEventOut>>>, ApiError> {
        let id = parse_sale_id(&sale_id)?;
        let first = service::seat_map::seat_map(&self.app, id).await?;
        let last = last_event_id.0.and_then(|v| v.parse::<u64>().ok());
        let sale = sale_id.0.into_inner();
        let stream = service::seat_map::follow(self.app.clone(), id, first, last)
            .map(move |update| message(&sale, update))
            .boxed();
        Ok(EventStream::new(stream, Duration::from_secs(15)))
    }
}
