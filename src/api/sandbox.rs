//! The sandbox payment provider's page (embedded default only; 404 elsewhere).

use crate::api::text::Text;
use std::time::Duration;

use poem_openapi::param::Path;
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Enum, Object, OpenApi};

use super::problem::ApiError;
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
        reference: Path<Text>,
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

#[derive(Debug, Clone, Copy, Enum, PartialEq, Eq, serde::Serialize)]
#[oai(rename_all = "snake_case")]
pub enum SandboxOutcome {
    Approve,
    Decline,
}

/// What the sandbox provider should report.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct SandboxPayment {
    pub outcome: SandboxOutcome,
    /// Wait this long before sending the webhook (0 to 60000 ms).
    #[oai(default, validator(maximum(value = "60000")))]
    pub delay_ms: u64,
}

impl poem_openapi::types::Example for SandboxPayment {
    fn example() -> Self {
        SandboxPayment {
            outcome: SandboxOutcome::Approve,
            delay_ms: 500,
        }
    }
}

/// The webhook the sandbox will send.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct SandboxAccepted {
    pub event_id: String,
    pub payment_reference: String,
}

impl poem_openapi::types::Example for SandboxAccepted {
    fn example() -> Self {
        SandboxAccepted {
            event_id: "sandbox-evt-0193a0c4e1b27c3d".into(),
            payment_reference: "0193a0c4-e1b2-7c3d-9f0a-1b2c3d4e5f62".into(),
        }
    }
}
