//! User operations on attempts (`Authorization: Bearer <JWT>`): join, status (poll or SSE),
//! leave, hold, release, checkout. Users see and act on their own attempts only; someone
//! else's attempt answers 404.

use std::time::Duration;

use futures_util::stream::{self, BoxStream, StreamExt};
use poem_openapi::param::{Header, Path};
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, OpenApi};

use super::event_stream::EventStream;
use super::problem::ApiError;
use super::security::UserAuth;
use super::types::{AttemptOut, HoldRequest};
use super::{parse_attempt_id, parse_sale_id, ApiTags};
use crate::domain::{AttemptId, UserId};
use crate::service::limits::Limited;
use crate::service::{self, idempotent, App, AttemptView, IdempotencyKey, ServiceError};

pub struct AttemptsApi {
    pub app: App,
}

/// The answer body; payment URLs point at the sandbox when it is on.
fn out(app: &App, mut view: AttemptView) -> AttemptOut {
    view.sandbox = app.config.sandbox_enabled();
    view.into()
}

/// Applies the caller's per-user limit of `kind`.
pub(super) fn limit(app: &App, kind: Limited, user: &UserId) -> Result<(), ApiError> {
    app.limits.check(kind, user).map_err(|wait| {
        ServiceError::RateLimited {
            retry_after_secs: wait.as_secs_f64().ceil().max(1.0) as u64,
        }
        .into()
    })
}

fn retry_after_secs(view: &AttemptView) -> u64 {
    view.poll_after_ms.div_ceil(1000).max(1)
}

#[derive(ApiResponse)]
pub enum JoinResponse {
    /// In the queue, or the user's existing attempt (waiting, live or CONFIRMED).
    #[oai(status = 202)]
    Accepted(
        Json<AttemptOut>,
        #[oai(header = "Location")] String,
        #[oai(header = "Retry-After")] u64,
    ),
}

#[derive(ApiResponse)]
pub enum AttemptResponse {
    /// The attempt's status. `Retry-After` mirrors `poll_after_ms`.
    #[oai(status = 200)]
    Ok(Json<AttemptOut>, #[oai(header = "Retry-After")] u64),
}

impl AttemptResponse {
    fn of(app: &App, view: AttemptView) -> Self {
        let retry = retry_after_secs(&view);
        AttemptResponse::Ok(Json(out(app, view)), retry)
    }
}

#[OpenApi(tag = "ApiTags::Attempts")]
impl AttemptsApi {
    /// Join a sale
    ///
    /// Puts the caller in the sale's queue and answers their attempt with its position. One
    /// attempt per user per sale: joining again while waiting, admitted, holding, paying or
    /// after buying (CONFIRMED) answers that same attempt; only after an attempt EXPIRED does a
    /// join make a new one, at the back of the line. Joins before `opens_at` wait for the
    /// opening; a closed sale answers 409. A sale may ask for proof of work (428 without it).
    #[oai(
        path = "/v1/sales/:sale_id/attempts",
        method = "post",
        operation_id = "joinSale"
    )]
    async fn join(
        &self,
        auth: UserAuth,
        sale_id: Path<String>,
        /// When the sale asks for proof of work (see `getOffer`): a nonce making SHA-256 of
        /// `<salt>:<sale id>:<user id>:<nonce>` start with the asked number of zero bits.
        #[oai(name = "Sluice-Proof-Of-Work")]
        work: Header<Option<String>>,
    ) -> Result<JoinResponse, ApiError> {
        let sale = parse_sale_id(&sale_id)?;
        limit(&self.app, Limited::Join, &auth.0)?;
        let view = service::join::join(&self.app, sale, &auth.0, work.0.as_deref()).await?;
        let retry = retry_after_secs(&view);
        let location = format!("/v1/attempts/{}", view.attempt);
        Ok(JoinResponse::Accepted(
            Json(out(&self.app, view)),
            location,
            retry,
        ))
    }

    /// Get an attempt's status
    ///
    /// Position, waiting count and estimated wait while queued; the admission token once
    /// admitted; the hold and payment after. Poll again after `poll_after_ms`.
    #[oai(
        path = "/v1/attempts/:attempt_id",
        method = "get",
        operation_id = "getAttempt"
    )]
    async fn status(
        &self,
        auth: UserAuth,
        attempt_id: Path<String>,
    ) -> Result<AttemptResponse, ApiError> {
        let id = parse_attempt_id(&attempt_id)?;
        limit(&self.app, Limited::Status, &auth.0)?;
        Ok(AttemptResponse::of(
            &self.app,
            service::status::status(&self.app, id, &auth.0).await?,
        ))
    }

    /// Stream an attempt's status
    ///
    /// Server-Sent Events carrying the same status as `getAttempt`, pushed every
    /// `poll_after_ms` (at most every 5 s) until the attempt ends.
    #[oai(
        path = "/v1/attempts/:attempt_id/events",
        method = "get",
        operation_id = "streamAttempt"
    )]
    async fn events(
        &self,
        auth: UserAuth,
        attempt_id: Path<String>,
    ) -> Result<EventStream<BoxStream<'static, AttemptOut>>, ApiError> {
        let id = parse_attempt_id(&attempt_id)?;
        limit(&self.app, Limited::Status, &auth.0)?;
        // The first status is computed now, so a bad id is an HTTP error, not an empty stream.
        let first = service::status::status(&self.app, id, &auth.0).await?;
        let stream = status_stream(self.app.clone(), id, auth.0, first);
        Ok(EventStream::new(stream, Duration::from_secs(15)))
    }

    /// Leave
    ///
    /// A waiting user leaves the queue; an admitted user gives the slot back; a user holding
    /// stock releases it. The attempt ends EXPIRED (`left` or `released`).
    #[oai(
        path = "/v1/attempts/:attempt_id",
        method = "delete",
        operation_id = "leaveAttempt"
    )]
    async fn leave(
        &self,
        auth: UserAuth,
        attempt_id: Path<String>,
    ) -> Result<AttemptResponse, ApiError> {
        let id = parse_attempt_id(&attempt_id)?;
        Ok(AttemptResponse::of(
            &self.app,
            service::leave::leave(&self.app, id, &auth.0).await?,
        ))
    }

    /// Hold stock
    ///
    /// Takes `quantity` units or the named `seat_ids`, all or nothing, for `hold_ttl_secs`.
    /// Needs the attempt's admission token. Repeating a hold answers the existing hold; send an
    /// `Idempotency-Key` to get the very same answer on a retry.
    #[oai(
        path = "/v1/attempts/:attempt_id/hold",
        method = "post",
        operation_id = "holdStock"
    )]
    async fn hold(
        &self,
        auth: UserAuth,
        attempt_id: Path<String>,
        body: Json<HoldRequest>,
        #[oai(name = "Idempotency-Key")] key: Header<Option<String>>,
    ) -> Result<AttemptResponse, ApiError> {
        let id = parse_attempt_id(&attempt_id)?;
        let key = key.0.as_deref().map(IdempotencyKey::parse).transpose()?;
        let seat_ids = body.seat_ids.clone().map(|seats| {
            seats
                .into_iter()
                .map(super::text::Text::into_inner)
                .collect()
        });
        let take = service::hold::parse_take(body.quantity, seat_ids)?;
        let app = &self.app;
        let user: &UserId = &auth.0;
        let request = ("holdStock", id.to_string(), &body.0);
        let view = idempotent(app, user, key.as_ref(), &request, async {
            service::hold::hold(app, id, user, &body.admission_token, take).await
        })
        .await?;
        Ok(AttemptResponse::of(&self.app, view))
    }

    /// Release a hold
    ///
    /// Gives the held units back; the attempt ends EXPIRED (`released`).
    #[oai(
        path = "/v1/attempts/:attempt_id/hold",
        method = "delete",
        operation_id = "releaseHold"
    )]
    async fn release(
        &self,
        auth: UserAuth,
        attempt_id: Path<String>,
    ) -> Result<AttemptResponse, ApiError> {
        let id = parse_attempt_id(&attempt_id)?;
        Ok(AttemptResponse::of(
            &self.app,
            service::hold::release(&self.app, id, &auth.0).await?,
        ))
    }

    /// Check out
    ///
    /// Moves a hold to PAYMENT_PENDING and answers the payment reference to give the payment
    /// provider. Repeating it answers the same reference.
    #[oai(
        path = "/v1/attempts/:attempt_id/checkout",
        method = "post",
        operation_id = "checkout"
    )]
    async fn checkout(
        &self,
        auth: UserAuth,
        attempt_id: Path<String>,
        #[oai(name = "Idempotency-Key")] key: Header<Option<String>>,
    ) -> Result<AttemptResponse, ApiError> {
        let id = parse_attempt_id(&attempt_id)?;
        let key = key.0.as_deref().map(IdempotencyKey::parse).transpose()?;
        let app = &self.app;
        let user: &UserId = &auth.0;
        let request = ("checkout", id.to_string());
        let view = idempotent(app, user, key.as_ref(), &request, async {
            service::checkout::checkout(app, id, user).await
        })
        .await?;
        Ok(AttemptResponse::of(&self.app, view))
    }
}

/// Status events until the attempt ends (or the status cannot be read any more).
fn status_stream(
    app: App,
    id: AttemptId,
    user: UserId,
    first: AttemptView,
) -> BoxStream<'static, AttemptOut> {
    /// What the stream does next: send a status now, wait and ask again, or end.
    enum Next {
        Send(AttemptView),
        After(Duration),
    }
    let drain = app.drain.subscribe();
    stream::unfold(Some(Next::Send(first)), move |next| {
        let (app, user, mut drain) = (app.clone(), user.clone(), drain.clone());
        async move {
            let view = match next? {
                Next::Send(view) => view,
                Next::After(wait) => {
                    // A drain cuts the wait short: the stream's last event is the status now.
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = service::drain::started(&mut drain) => {}
                    }
                    // An error (a store down) ends the stream; the client reconnects or polls.
                    service::status::status(&app, id, &user).await.ok()?
                }
            };
            // Sent at once; the wait comes before the next one (never in front of this one).
            // Once the process drains, this one is the last.
            let after = (!view.state.is_terminal() && !*drain.borrow())
                .then(|| Next::After(Duration::from_millis(view.poll_after_ms.min(5_000))));
            Some((out(&app, view), after))
        }
    })
    .boxed()
}
