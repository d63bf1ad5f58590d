//! Toss Payments' return to sluice: the success and fail URLs Toss sends the buyer's browser
//! back to (each answers `303` to the waiting page), and the route a shop's own success page
//! posts the payment to instead. Either way sluice confirms the payment with Toss for the
//! hold's amount ([`service::toss::confirm`]).

use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object, OpenApi};

use super::problem::ApiError;
use super::security::UserAuth;
use super::text::Text;
use super::webhooks::{ProviderAckOut, ProviderWebhookResponse};
use super::{parse_attempt_id, ApiTags};
use crate::domain::AttemptId;
use crate::service::toss::Returned;
use crate::service::{self, App, ServiceError};

pub struct TossApi {
    pub app: App,
}

/// What Toss's window gave the shop's success page (its query parameters).
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct TossPaymentIn {
    /// `paymentKey` from the success URL.
    #[oai(validator(min_length = 1, max_length = 200))]
    pub payment_key: String,
    /// `orderId` from the success URL: the attempt's, as checkout gave it.
    #[oai(validator(min_length = 6, max_length = 64))]
    pub order_id: String,
    /// `amount` from the success URL; it must be the hold's, or nothing is confirmed.
    pub amount: u64,
}

impl poem_openapi::types::Example for TossPaymentIn {
    fn example() -> Self {
        TossPaymentIn {
            payment_key: "tviva20261205200001AbCd1".into(),
            order_id: "sluice-5f0c2a4e9b1d4c7e8f0a1b2c3d4e5f60".into(),
            amount: 110000,
        }
    }
}

#[derive(ApiResponse)]
pub enum BackToPage {
    /// To the waiting page, which shows the attempt as it now is (CONFIRMED, or still to pay
    /// with the reason the payment did not go through).
    #[oai(status = 303)]
    SeeOther(#[oai(header = "Location")] String),
}

/// The waiting page of the sale whose attempt it is, showing that attempt.
fn page_of(attempt: AttemptId) -> BackToPage {
    BackToPage::SeeOther(format!("/?sale={}&attempt={attempt}", attempt.sale))
}

#[OpenApi(tag = "ApiTags::Payments")]
impl TossApi {
    /// Come back from Toss: paid
    ///
    /// Checkout's `payment.toss.success_url`: Toss sends the buyer here with `paymentKey`,
    /// `orderId` and `amount`. sluice confirms the payment with Toss (`POST
    /// /v1/payments/confirm`, its `Idempotency-Key` from the order) when the amount is the
    /// hold's, and sends the buyer on to the waiting page. A refusal (a tampered amount,
    /// Toss's no) is written on the payment, where the page shows it. 404 unless
    /// `payments.provider` is `toss`.
    #[oai(
        path = "/v1/payments/toss/success",
        method = "get",
        operation_id = "tossSuccess"
    )]
    async fn success(
        &self,
        #[oai(name = "paymentKey")] payment_key: Query<Text>,
        #[oai(name = "orderId")] order_id: Query<Text>,
        amount: Query<u64>,
    ) -> Result<BackToPage, ApiError> {
        let returned = Returned {
            payment_key: &payment_key,
            order_id: &order_id,
            amount: amount.0,
        };
        match service::toss::confirm(&self.app, &returned, None).await {
            Ok((attempt, _)) => Ok(page_of(attempt)),
            // The order is one of sluice's: the buyer goes back to the page, which says why.
            Err(e) => match service::toss::failed(&self.app, &order_id, "", &e.to_string()).await {
                Ok(Some(attempt)) => Ok(page_of(attempt)),
                _ => Err(e.into()),
            },
        }
    }

    /// Come back from Toss: not paid
    ///
    /// Checkout's `payment.toss.fail_url`: Toss sends the buyer here with `code`, `message`
    /// and `orderId` when the payment did not go through. The reason is written on the payment
    /// (the buyer may try again until its deadline), and the buyer goes on to the waiting page.
    #[oai(
        path = "/v1/payments/toss/fail",
        method = "get",
        operation_id = "tossFail"
    )]
    async fn fail(
        &self,
        #[oai(name = "orderId")] order_id: Query<Text>,
        code: Query<Option<Text>>,
        message: Query<Option<Text>>,
    ) -> Result<BackToPage, ApiError> {
        let code = code.0.as_deref().unwrap_or_default();
        let message = message.0.as_deref().unwrap_or_default();
        match service::toss::failed(&self.app, &order_id, code, message).await? {
            Some(attempt) => Ok(page_of(attempt)),
            None => Err(ServiceError::NotFound("payment").into()),
        }
    }

    /// Confirm a Toss payment
    ///
    /// For a shop whose own page is Toss's success URL: post what Toss gave it. sluice
    /// confirms the payment with Toss when `order_id` is this attempt's and `amount` the hold's
    /// (422 otherwise, and nothing is confirmed); a confirm whose answer is lost is looked up.
    /// Repeating it answers `duplicate`.
    #[oai(
        path = "/v1/attempts/:attempt_id/payment/toss",
        method = "post",
        operation_id = "confirmTossPayment"
    )]
    async fn confirm(
        &self,
        auth: UserAuth,
        attempt_id: Path<Text>,
        body: Json<TossPaymentIn>,
    ) -> Result<ProviderWebhookResponse, ApiError> {
        let id = parse_attempt_id(&attempt_id)?;
        let returned = Returned {
            payment_key: &body.payment_key,
            order_id: &body.order_id,
            amount: body.amount,
        };
        let owner = Some((&auth.0, id));
        let (_, ack) = service::toss::confirm(&self.app, &returned, owner).await?;
        Ok(ProviderWebhookResponse::Ok(Json(ProviderAckOut::from(ack))))
    }
}
