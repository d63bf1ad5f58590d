//! User operations on attempts (`Authorization: Bearer <JWT>`): join, status (poll or SSE),
//! leave, hold, release, checkout. Users see and act on their own attempts only; someone
//! else's attempt answers 404. And support's reads of a sale's attempts (`X-Admin-Key`): by
//! state or by user id, by page, and one attempt whole with its audit trail — what a support
//! agent needs for "I paid but have no ticket".

use std::time::Duration;

use futures_util::stream::{BoxStream, StreamExt};
use poem_openapi::param::{Header, Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, OpenApi};

use super::event_stream::{EventStream, Message};
use super::problem::ApiError;
use super::security::{AdminAuth, UserAuth};
use super::serialized::Serialized;
use super::text::Text;
use super::{parse_attempt_id, parse_sale_id, ApiTags};
use crate::domain::{AttemptState, UserId};
use crate::service::limits::Limited;
use crate::service::{self, idempotent, App, AttemptView, IdempotencyKey, ServiceError};
use crate::telemetry::caller;
use types::{AttemptFileOut, AttemptOut, AttemptPage, AttemptStateName, HoldRequest};

pub mod types;

pub struct AttemptsApi {
    pub app: App,
}

/// The answer body, with the deployment's payment provider (and what the page needs to pay
/// where the provider says it in every answer: the sandbox's URL).
fn out(app: &App, mut view: AttemptView) -> AttemptOut {
    view.provider = Some(app.provider.name().to_owned());
    if view.pay.is_none() {
        view.pay = view
            .payment_reference
            .and_then(|r| app.provider.standing_pay(r));
    }
    view.into()
}

/// Applies the caller's per-user limit of `kind`.
pub(super) fn limit(app: &App, kind: Limited, user: &UserId) -> Result<(), ApiError> {
    app.limits.check(kind, user).map_err(|wait| {
        ServiceError::RateLimited {
            retry_after_secs: crate::api::problem::rate_limited_retry_after_secs(wait),
        }
        .into()
    })
}

fn retry_after_secs(view: &AttemptView) -> u64 {
    view.poll_after_ms.div_ceil(1000).max(1)
}

#[derive(ApiResponse)]
pub enum JoinResponse {
    /// An instant sale's claim, made by this join: CONFIRMED with its unit.
    #[oai(status = 201)]
    Created(Serialized<AttemptOut>, #[oai(header = "Location")] String),
    /// In the queue, or the user's existing attempt (waiting, live or CONFIRMED: an instant
    /// sale's claim made before).
    #[oai(status = 202)]
    Accepted(
        Serialized<AttemptOut>,
        #[oai(header = "Location")] String,
        #[oai(header = "Retry-After")] u64,
    ),
}

#[derive(ApiResponse)]
pub enum AttemptResponse {
    /// The attempt's status. `Retry-After` mirrors `poll_after_ms`.
    #[oai(status = 200)]
    Ok(Serialized<AttemptOut>, #[oai(header = "Retry-After")] u64),
}

impl AttemptResponse {
    fn of(app: &App, view: AttemptView) -> Self {
        let retry = retry_after_secs(&view);
        AttemptResponse::Ok(Serialized(out(app, view)), retry)
    }
}

#[derive(ApiResponse)]
pub enum AttemptPageResponse {
    #[oai(status = 200)]
    Ok(Json<AttemptPage>),
}

#[derive(ApiResponse)]
pub enum AttemptFileResponse {
    #[oai(status = 200)]
    Ok(Json<AttemptFileOut>),
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
    /// A sale with phases lets in, while each runs, only its audience: others get 403
    /// `not-in-phase` with the next phase open to them (named in `detail`; `next_phase_at`).
    /// An instant sale's join is the claim: 201 CONFIRMED with one unit, 409 `sold-out`, 409
    /// `limit-reached`, or 202 as above (waiting while the line fronts the sale, or the claim
    /// made before).
    #[oai(
        path = "/v1/sales/:sale_id/attempts",
        method = "post",
        operation_id = "joinSale"
    )]
    async fn join(
        &self,
        req: &poem::Request,
        auth: UserAuth,
        sale_id: Path<Text>,
        /// When the sale asks for proof of work (see `getOffer`): a nonce making SHA-256 of
        /// `<salt>:<sale id>:<user id>:<nonce>` start with the asked number of zero bits.
        #[oai(name = "Sluice-Proof-Of-Work")]
        work: Header<Option<Text>>,
        /// In a phase open to holders of access codes: one of its codes. Redeemed once per
        /// user and bound to the user; a user who redeemed one joins again without it.
        #[oai(
            name = "Sluice-Access-Code",
            validator(min_length = 1, max_length = 64)
        )]
        code: Header<Option<Text>>,
        /// When the sale is the line of a gate that asks for a challenge (Turnstile,
        /// hCaptcha): its answer, for a user joining with their own token (a gate's visitor
        /// passed it when entering the gate).
        #[oai(
            name = "Sluice-Challenge-Answer",
            validator(min_length = 1, max_length = 4096)
        )]
        challenge: Header<Option<Text>>,
    ) -> Result<JoinResponse, ApiError> {
        let sale = parse_sale_id(&sale_id)?;
        limit(&self.app, Limited::Join, &auth.0)?;
        let address = crate::api::client_ip(req, self.app.config.http.trust_forwarded_for);
        service::gate::visitors::check_join(
            &self.app,
            sale,
            &auth.0,
            challenge.0.as_deref(),
            address,
        )
        .await?;
        let joined = caller::on(
            "join",
            service::join::join(
                &self.app,
                sale,
                &auth.0,
                work.0.as_deref(),
                code.0.as_deref(),
            ),
        )
        .await?;
        let view = joined.view;
        let retry = retry_after_secs(&view);
        let location = format!("/v1/attempts/{}", view.attempt);
        if joined.claimed_now {
            return Ok(JoinResponse::Created(
                Serialized(out(&self.app, view)),
                location,
            ));
        }
        Ok(JoinResponse::Accepted(
            Serialized(out(&self.app, view)),
            location,
            retry,
        ))
    }

    /// Get an attempt's status
    ///
    /// Position, waiting count and estimated wait while queued, exact as of `as_of`; the
    /// admission token once admitted; the hold and payment after. Poll again after
    /// `poll_after_ms`. Send the `queue_ticket` of the last answer as `ticket`: a waiting
    /// attempt is then answered from the replica's view of the queue (refreshed every
    /// `queue.line_refresh_ms`), without a lookup in the queue store.
    #[oai(
        path = "/v1/attempts/:attempt_id",
        method = "get",
        operation_id = "getAttempt"
    )]
    async fn status(
        &self,
        auth: UserAuth,
        attempt_id: Path<Text>,
        /// The `queue_ticket` of the attempt's last answer. One that does not verify (another
        /// user's or attempt's, or altered) is ignored.
        ticket: Query<Option<Text>>,
    ) -> Result<AttemptResponse, ApiError> {
        let id = parse_attempt_id(&attempt_id)?;
        limit(&self.app, Limited::Status, &auth.0)?;
        let status = service::status::status(&self.app, id, &auth.0, ticket.0.as_deref());
        Ok(AttemptResponse::of(
            &self.app,
            caller::on("status", status).await?,
        ))
    }

    /// Stream an attempt's status
    ///
    /// Server-Sent Events (`event: status`) carrying the same status as `getAttempt`,
    /// whenever it changes: while queued at each refresh of the replica's view of the queue
    /// (`queue.line_refresh_ms`), at once for a change made through the same replica, and at
    /// most 5 s late past the queue; until the attempt ends. Each event's `id` names its
    /// answer: reconnect with `Last-Event-ID` and an unchanged answer is not sent again.
    #[oai(
        path = "/v1/attempts/:attempt_id/events",
        method = "get",
        operation_id = "streamAttempt"
    )]
    async fn events(
        &self,
        auth: UserAuth,
        attempt_id: Path<Text>,
        /// The `queue_ticket` of the attempt's last answer (as for `getAttempt`).
        ticket: Query<Option<Text>>,
        /// The `id` of the last event received, when reconnecting.
        #[oai(name = "Last-Event-ID")]
        last_event_id: Header<Option<Text>>,
    ) -> Result<EventStream<BoxStream<'static, Message<AttemptOut>>>, ApiError> {
        let id = parse_attempt_id(&attempt_id)?;
        limit(&self.app, Limited::Status, &auth.0)?;
        // The first status is computed now, so a bad id is an HTTP error, not an empty stream.
        let first = service::status::status(&self.app, id, &auth.0, ticket.0.as_deref()).await?;
        let app = self.app.clone();
        let stream = service::status_stream::follow(
            app.clone(),
            id,
            auth.0,
            first,
            last_event_id.0.map(Text::into_inner),
        )
        .map(move |(id, view)| Message {
            event: "status",
            id,
            data: out(&app, view),
        })
        .boxed();
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
        attempt_id: Path<Text>,
    ) -> Result<AttemptResponse, ApiError> {
        let id = parse_attempt_id(&attempt_id)?;
        Ok(AttemptResponse::of(
            &self.app,
            service::leave::leave(&self.app, id, &auth.0).await?,
        ))
    }

    /// Hold stock
    ///
    /// Takes `quantity` units, the named `seat_ids`, or the `best_available` seats side by
    /// side, all or nothing, for `hold_ttl_secs`. Needs the attempt's admission token. Repeating a hold answers the existing hold; send an
    /// `Idempotency-Key` to get the very same answer on a retry.
    #[oai(
        path = "/v1/attempts/:attempt_id/hold",
        method = "post",
        operation_id = "holdStock"
    )]
    async fn hold(
        &self,
        auth: UserAuth,
        attempt_id: Path<Text>,
        body: Json<HoldRequest>,
        #[oai(name = "Idempotency-Key")] key: Header<Option<Text>>,
    ) -> Result<AttemptResponse, ApiError> {
        let id = parse_attempt_id(&attempt_id)?;
        let key = key.0.as_deref().map(IdempotencyKey::parse).transpose()?;
        let seat_ids = body
            .seat_ids
            .clone()
            .map(|seats| seats.into_iter().map(Text::into_inner).collect());
        let best = body.best_available.clone().map(|b| service::hold::BestAsk {
            count: b.count,
            category: b.category.map(Text::into_inner),
            section: b.section.map(Text::into_inner),
        });
        let take = service::hold::parse_ask(body.quantity, seat_ids, best)?;
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
        attempt_id: Path<Text>,
    ) -> Result<AttemptResponse, ApiError> {
        let id = parse_attempt_id(&attempt_id)?;
        Ok(AttemptResponse::of(
            &self.app,
            service::hold::release(&self.app, id, &auth.0).await?,
        ))
    }

    /// Check out
    ///
    /// Moves a hold to PAYMENT_PENDING, starts the payment at the deployment's provider for the
    /// hold's amount (never one the client names) and answers what the page needs to pay:
    /// the payment reference, and `payment.pay`, the provider's object (a card form's client
    /// secret, a payment window's order). Repeating it answers the same payment. A hold that
    /// costs nothing (a free claim) is CONFIRMED at once. A provider that is down answers 503 with
    /// `Retry-After`; the hold is kept, and a retry starts the payment.
    #[oai(
        path = "/v1/attempts/:attempt_id/checkout",
        method = "post",
        operation_id = "checkout"
    )]
    async fn checkout(
        &self,
        auth: UserAuth,
        attempt_id: Path<Text>,
        #[oai(name = "Idempotency-Key")] key: Header<Option<Text>>,
    ) -> Result<AttemptResponse, ApiError> {
        let id = parse_attempt_id(&attempt_id)?;
        let key = key.0.as_deref().map(IdempotencyKey::parse).transpose()?;
        let app = &self.app;
        let user: &UserId = &auth.0;
        let request = ("checkout", id.to_string());
        let mut view = idempotent(app, user, key.as_ref(), &request, async {
            service::checkout::checkout(app, id, user).await
        })
        .await?;
        service::checkout::start_payment(app, &mut view).await?;
        Ok(AttemptResponse::of(&self.app, view))
    }

    /// List a sale's attempts
    ///
    /// The sale's attempts from ADMITTED on (waiting users are in the queue only), newest
    /// first, by `state` and by `user_id` if given: find a buyer's attempts from their user id.
    /// Paged like `listSales`.
    #[oai(
        path = "/v1/sales/:sale_id/attempts",
        method = "get",
        operation_id = "listAttempts",
        tag = "ApiTags::Support"
    )]
    async fn list_attempts(
        &self,
        _auth: AdminAuth,
        sale_id: Path<Text>,
        state: Query<Option<AttemptStateName>>,
        user_id: Query<Option<Text>>,
        cursor: Query<Option<Text>>,
        #[oai(validator(minimum(value = "1"), maximum(value = "100")))] limit: Query<Option<u32>>,
    ) -> Result<AttemptPageResponse, ApiError> {
        let sale = parse_sale_id(&sale_id)?;
        let user = user_id
            .0
            .as_deref()
            .map(UserId::parse)
            .transpose()
            .map_err(|_| {
                ServiceError::validation("user_id", "1 to 128 printable ASCII characters")
            })?;
        let state = state.0.map(stored_name);
        let page = service::support::attempts(
            &self.app,
            sale,
            state,
            user,
            cursor.0.as_deref(),
            limit.0.unwrap_or(crate::api::DEFAULT_PAGE),
        )
        .await?;
        Ok(AttemptPageResponse::Ok(Json(page.into())))
    }

    /// Get an attempt's file
    ///
    /// One attempt whole: how it stands, its audit trail (every transition with its cause and
    /// time) and the payment provider's events for it. An attempt still waiting in the queue
    /// has no file until it is admitted (404): `listAttempts` with its buyer's `user_id` finds
    /// it and its place.
    #[oai(
        path = "/v1/sales/:sale_id/attempts/:attempt_id",
        method = "get",
        operation_id = "getAttemptFile",
        tag = "ApiTags::Support"
    )]
    async fn attempt_file(
        &self,
        _auth: AdminAuth,
        sale_id: Path<Text>,
        attempt_id: Path<Text>,
    ) -> Result<AttemptFileResponse, ApiError> {
        let sale = parse_sale_id(&sale_id)?;
        let attempt = parse_attempt_id(&attempt_id)?;
        let file = service::support::attempt(&self.app, sale, attempt).await?;
        Ok(AttemptFileResponse::Ok(Json(file.into())))
    }

    /// Refund a purchase
    ///
    /// Ends a CONFIRMED attempt EXPIRED (`refunded`), an operator's decision: its units go
    /// back to the sale at once (to the queue's next users while it is open). With a provider
    /// sluice calls (any but `sandbox` and `webhook`) the money goes back through it first
    /// (a refusal is a 502 and changes nothing); the event `sluice.payment.refund_required`
    /// says so (`data.refund`: `taken`), or, with none, asks the shop to (`owed`). A
    /// second refund changes nothing (the same answer); an attempt not CONFIRMED is refused
    /// (409 while live, 410 once it ended otherwise). Written to the admin audit log.
    #[oai(
        path = "/v1/sales/:sale_id/attempts/:attempt_id/refund",
        method = "post",
        operation_id = "refundAttempt",
        tag = "ApiTags::Support"
    )]
    async fn refund(
        &self,
        auth: AdminAuth,
        sale_id: Path<Text>,
        attempt_id: Path<Text>,
    ) -> Result<AttemptFileResponse, ApiError> {
        let sale = parse_sale_id(&sale_id)?;
        let attempt = parse_attempt_id(&attempt_id)?;
        let file = service::refund::refund(&self.app, &auth.0, sale, attempt).await?;
        Ok(AttemptFileResponse::Ok(Json(file.into())))
    }
}

/// The state's name as the ledger stores it: that of the domain states the name stands for.
fn stored_name(state: AttemptStateName) -> &'static str {
    AttemptState::all()
        .find(|s| AttemptStateName::from(*s) == state)
        .map(|s| s.name())
        .expect("every state name stands for a domain state")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each state the support list filters by is looked up under the name the API spells.
    #[test]
    fn each_state_filter_is_the_stored_name_the_api_spells() {
        use AttemptStateName::*;
        for name in [Queued, Admitted, Hold, PaymentPending, Confirmed, Expired] {
            let spelled = serde_json::to_value(name).unwrap();
            assert_eq!(Some(stored_name(name)), spelled.as_str());
        }
    }
}
