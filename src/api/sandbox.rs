//! The sandbox payment provider's page (embedded default only; 404 elsewhere).

use std::time::Duration;

use poem_openapi::param::Path;
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, OpenApi};

use super::problem::ApiError;
use super::types::{SandboxAccepted, SandboxOutcome, SandboxPayment};
use super::ApiTags;
use crate::service::sandbox::{self, Outcome};
use crate::service::{App, ServiceError};

pub struct SandboxApi {
    pub app: App,
}

#[derive(ApiResponse)]
pub enum SandboxResponse {
    /// The webhook will be sent after the delay.
    #[oai(status = 202)]
    Accepted(Json<SandboxAccepted>),
}

#[OpenApi(tag = "ApiTags::Sandbox")]
impl SandboxApi {
    /// Pay in the sandbox
    ///
    /// Plays the payment provider for the checkout's payment reference: after `delay_ms` it
    /// sends sluice a correctly signed `payment.succeeded` (approve) or `payment.failed`
    /// (decline) webhook. Served only when the sandbox is on (the embedded default).
    #[oai(
        path = "/sandbox/payments/:reference",
        method = "post",
        operation_id = "payInSandbox"
    )]
    async fn pay(
        &self,
        reference: Path<String>,
        body: Json<SandboxPayment>,
    ) -> Result<SandboxResponse, ApiError> {
        let reference =
            uuid::Uuid::parse_str(&reference).map_err(|_| ServiceError::NotFound("payment"))?;
        let outcome = match body.outcome {
            SandboxOutcome::Approve => Outcome::Approve,
            SandboxOutcome::Decline => Outcome::Decline,
        };
        let event_id = sandbox::pay(
            &self.app,
            reference,
            outcome,
            Duration::from_millis(body.delay_ms),
        )?;
        Ok(SandboxResponse::Accepted(Json(SandboxAccepted {
            event_id,
            payment_reference: reference.to_string(),
        })))
    }
}
