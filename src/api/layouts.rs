//! Venue layouts (`X-Admin-Key`): uploaded once as JSON, checked with errors that name the
//! seat, and used by many sales (`createSale` with `layout_id`).

use chrono::{DateTime, Utc};
use poem_openapi::param::Path;
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object, OpenApi};

use super::problem::ApiError;
use super::security::AdminAuth;
use super::text::Text;
use super::ApiTags;
use crate::domain::venue::{Layout, Row, Seat, Section, Stage};
use crate::domain::Role;
use crate::service::{self, App, ServiceError};

pub struct LayoutsApi {
    pub app: App,
}

/// The stage or field, drawn as a box.
#[derive(Debug, Clone, Object)]
pub struct StageIn {
    #[oai(validator(min_length = 1, max_length = 100))]
    pub label: String,
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
}

/// A seat, where it is drawn (0 to 100,000 each way), its category and its flags.
#[derive(Debug, Clone, Object)]
pub struct SeatIn {
    /// Its number in the row; the seat's id is `<section>-<row>-<number>`.
    #[oai(validator(min_length = 1, max_length = 16))]
    pub number: String,
    pub x: f64,
    pub y: f64,
    /// Its category (priced by each sale); none: the sale's unit price.
    #[oai(
        skip_serializing_if_is_none,
        validator(min_length = 1, max_length = 32)
    )]
    pub category: Option<String>,
    #[oai(default)]
    pub wheelchair: bool,
    #[oai(default)]
    pub restricted_view: bool,
}

#[derive(Debug, Clone, Object)]
pub struct RowIn {
    #[oai(validator(min_length = 1, max_length = 16))]
    pub id: String,
    #[oai(validator(max_items = 100000))]
    pub seats: Vec<SeatIn>,
}

#[derive(Debug, Clone, Object)]
pub struct SectionIn {
    #[oai(validator(min_length = 1, max_length = 16))]
    pub id: String,
    #[oai(validator(min_length = 1, max_length = 100))]
    pub name: String,
    #[oai(validator(max_items = 100000))]
    pub rows: Vec<RowIn>,
}

/// A venue's layout.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct LayoutIn {
    #[oai(validator(min_length = 1, max_length = 200))]
    pub name: String,
    pub stage: StageIn,
    #[oai(validator(min_items = 1, max_items = 1000))]
    pub sections: Vec<SectionIn>,
    /// Best available may leave a single free seat between taken ones (by default it never
    /// does: a seat alone is hard to sell). Seats next to each other in a row's list are side
    /// by side; an aisle starts a new row or section.
    #[oai(default)]
    pub single_gaps: bool,
}

impl poem_openapi::types::Example for LayoutIn {
    fn example() -> Self {
        let seat = |n: u32, category: &str| SeatIn {
            number: n.to_string(),
            x: 1000.0 + 60.0 * n as f64,
            y: 2000.0,
            category: Some(category.into()),
            wheelchair: n == 1,
            restricted_view: false,
        };
        LayoutIn {
            name: "Olympic Hall".into(),
            stage: StageIn {
                label: "STAGE".into(),
                x: 1000.0,
                y: 100.0,
                width: 3000.0,
                height: 800.0,
            },
            sections: vec![SectionIn {
                id: "A".into(),
                name: "Floor A".into(),
                rows: vec![RowIn {
                    id: "1".into(),
                    seats: vec![seat(1, "VIP"), seat(2, "VIP"), seat(3, "R")],
                }],
            }],
            single_gaps: false,
        }
    }
}

impl From<LayoutIn> for Layout {
    fn from(l: LayoutIn) -> Self {
        Layout {
            name: l.name,
            stage: Stage {
                label: l.stage.label,
                x: l.stage.x,
                y: l.stage.y,
                width: l.stage.width,
                height: l.stage.height,
            },
            sections: l
                .sections
                .into_iter()
                .map(|s| Section {
                    id: s.id,
                    name: s.name,
                    rows: s
                        .rows
                        .into_iter()
                        .map(|r| Row {
                            id: r.id,
                            seats: r
                                .seats
                                .into_iter()
                                .map(|seat| Seat {
                                    number: seat.number,
                                    x: seat.x,
                                    y: seat.y,
                                    category: seat.category,
                                    wheelchair: seat.wheelchair,
                                    restricted_view: seat.restricted_view,
                                })
                                .collect(),
                        })
                        .collect(),
                })
                .collect(),
            single_gaps: l.single_gaps,
        }
    }
}

impl From<Layout> for LayoutIn {
    fn from(l: Layout) -> Self {
        LayoutIn {
            name: l.name,
            stage: StageIn {
                label: l.stage.label,
                x: l.stage.x,
                y: l.stage.y,
                width: l.stage.width,
                height: l.stage.height,
            },
            sections: l
                .sections
                .into_iter()
                .map(|s| SectionIn {
                    id: s.id,
                    name: s.name,
                    rows: s
                        .rows
                        .into_iter()
                        .map(|r| RowIn {
                            id: r.id,
                            seats: r
                                .seats
                                .into_iter()
                                .map(|seat| SeatIn {
                                    number: seat.number,
                                    x: seat.x,
                                    y: seat.y,
                                    category: seat.category,
                                    wheelchair: seat.wheelchair,
                                    restricted_view: seat.restricted_view,
                                })
                                .collect(),
                        })
                        .collect(),
                })
                .collect(),
            single_gaps: l.single_gaps,
        }
    }
}

/// A layout as listed, or as created.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct LayoutSummaryOut {
    pub id: String,
    pub name: String,
    pub seats: u32,
    pub created_at: DateTime<Utc>,
}

impl poem_openapi::types::Example for LayoutSummaryOut {
    fn example() -> Self {
        LayoutSummaryOut {
            id: "0193a0c4-e1b2-7c3d-9f0a-1b2c3d4e5f70".into(),
            name: "Olympic Hall".into(),
            seats: 14_730,
            created_at: super::spec::example_time(),
        }
    }
}

#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct LayoutList {
    pub layouts: Vec<LayoutSummaryOut>,
}

impl poem_openapi::types::Example for LayoutList {
    fn example() -> Self {
        LayoutList {
            layouts: vec![poem_openapi::types::Example::example()],
        }
    }
}

#[derive(ApiResponse)]
pub enum LayoutCreated {
    #[oai(status = 201)]
    Created(Json<LayoutSummaryOut>, #[oai(header = "Location")] String),
}

#[derive(ApiResponse)]
pub enum LayoutResponse {
    #[oai(status = 200)]
    Ok(Json<LayoutIn>),
}

#[derive(ApiResponse)]
pub enum LayoutListResponse {
    #[oai(status = 200)]
    Ok(Json<LayoutList>),
}

fn parse_layout_id(id: &str) -> Result<uuid::Uuid, ApiError> {
    uuid::Uuid::parse_str(id).map_err(|_| ServiceError::NotFound("layout").into())
}

#[derive(ApiResponse)]
pub enum PublicLayoutResponse {
    /// The layout; it never changes, so it may be kept as long as wanted.
    #[oai(status = 200)]
    Ok(Json<LayoutIn>, #[oai(header = "Cache-Control")] String),
}

#[OpenApi(tag = "ApiTags::Attempts")]
impl LayoutsApi {
    /// Get a venue layout for buyers
    ///
    /// The layout a sale's seats are drawn on (its offer's `layout_id`), no token needed;
    /// with `getSeatMap`, what a page draws. A layout never changes: cacheable for a day.
    #[oai(
        path = "/v1/public/layouts/:layout_id",
        method = "get",
        operation_id = "getPublicLayout"
    )]
    async fn public_layout(&self, layout_id: Path<Text>) -> Result<PublicLayoutResponse, ApiError> {
        let layout = read(&self.app, &layout_id).await?;
        Ok(PublicLayoutResponse::Ok(
            Json(layout.into()),
            "public, max-age=86400, immutable".to_owned(),
        ))
    }
}

async fn read(app: &App, id: &str) -> Result<Layout, ApiError> {
    let id = parse_layout_id(id)?;
    Ok(app
        .ledger
        .layout(id)
        .await
        .map_err(ServiceError::from)?
        .ok_or(ServiceError::NotFound("layout"))?)
}

pub struct AdminLayoutsApi {
    pub app: App,
}

#[OpenApi(prefix_path = "/v1/layouts", tag = "ApiTags::Sales")]
impl AdminLayoutsApi {
    /// Upload a venue layout
    ///
    /// A venue's stage, sections, rows and seats (up to 100,000), each seat with where it is
    /// drawn, its category and its flags (wheelchair, restricted view). Checked whole: a seat
    /// twice, a place off the drawing or an id that is not one is refused naming the seat, and
    /// nothing is kept. Sales are made from it with `createSale`'s `layout_id`; the layout
    /// itself never changes (upload a new one for a changed hall).
    #[oai(path = "/", method = "post", operation_id = "createLayout")]
    async fn create(
        &self,
        auth: AdminAuth,
        body: Json<LayoutIn>,
    ) -> Result<LayoutCreated, ApiError> {
        let operator = auth.allows(Role::Operator)?;
        let layout: Layout = body.0.into();
        let summary = service::layouts::create(&self.app, layout, operator).await?;
        let location = format!("/v1/layouts/{}", summary.id);
        Ok(LayoutCreated::Created(
            Json(LayoutSummaryOut {
                id: summary.id.to_string(),
                name: summary.name,
                seats: summary.seats,
                created_at: summary.created_at,
            }),
            location,
        ))
    }

    /// List venue layouts
    ///
    /// The layouts, newest first, with their number of seats.
    #[oai(path = "/", method = "get", operation_id = "listLayouts")]
    async fn list(&self, _auth: AdminAuth) -> Result<LayoutListResponse, ApiError> {
        let layouts = self
            .app
            .ledger
            .layouts()
            .await
            .map_err(ServiceError::from)?;
        Ok(LayoutListResponse::Ok(Json(LayoutList {
            layouts: layouts
                .into_iter()
                .map(|l| LayoutSummaryOut {
                    id: l.id.to_string(),
                    name: l.name,
                    seats: l.seats,
                    created_at: l.created_at,
                })
                .collect(),
        })))
    }

    /// Get a venue layout
    ///
    /// The layout as it was uploaded.
    #[oai(path = "/:layout_id", method = "get", operation_id = "getLayout")]
    async fn get(
        &self,
        _auth: AdminAuth,
        layout_id: Path<Text>,
    ) -> Result<LayoutResponse, ApiError> {
        let layout = read(&self.app, &layout_id).await?;
        Ok(LayoutResponse::Ok(Json(layout.into())))
    }
}
