//! Operations endpoints: liveness, readiness, the admission-token key set.

use std::time::Duration;

use poem_openapi::payload::{Json, PlainText};
use poem_openapi::{ApiResponse, OpenApi};

use super::ApiTags;
use crate::service::App;

pub struct OpsApi {
    pub app: App,
}

#[derive(ApiResponse)]
pub enum Health {
    #[oai(status = 200)]
    Ok(PlainText<String>),
    /// A store does not answer; the body names it.
    #[oai(status = 503)]
    Unavailable(PlainText<String>, #[oai(header = "Retry-After")] u64),
}

/// Readiness checks give up after this, so a dead store cannot hang the probe.
const READY_TIMEOUT: Duration = Duration::from_millis(500);

#[OpenApi(tag = "ApiTags::Operations")]
impl OpsApi {
    /// Liveness
    ///
    /// The process is up.
    #[oai(path = "/health/live", method = "get", operation_id = "liveness")]
    async fn live(&self) -> PlainText<&'static str> {
        PlainText("ok")
    }

    /// Readiness
    ///
    /// Redis and PostgreSQL both answer, and the process is not shutting down (once SIGTERM
    /// arrives it answers 503 while it drains).
    #[oai(path = "/health/ready", method = "get", operation_id = "readiness")]
    async fn ready(&self) -> Health {
        if self.app.drain.is_draining() {
            return Health::Unavailable(PlainText("unavailable: shutting down".into()), 1);
        }
        let (queue, ledger) = tokio::join!(
            tokio::time::timeout(READY_TIMEOUT, self.app.queue.ping()),
            tokio::time::timeout(READY_TIMEOUT, self.app.ledger.ping()),
        );
        let mut down = Vec::new();
        if !matches!(queue, Ok(Ok(()))) {
            down.push("queue store");
        }
        if !matches!(ledger, Ok(Ok(()))) {
            down.push("ledger");
        }
        if down.is_empty() {
            Health::Ok(PlainText("ready".into()))
        } else {
            Health::Unavailable(PlainText(format!("unavailable: {}", down.join(", "))), 1)
        }
    }

    /// Admission-token keys
    ///
    /// The JSON Web Key Set with the Ed25519 public key that signs admission tokens, so a
    /// merchant's services can verify an admission offline.
    #[oai(
        path = "/.well-known/jwks.json",
        method = "get",
        operation_id = "getJwks"
    )]
    async fn jwks(&self) -> Json<serde_json::Value> {
        Json(self.app.admission.jwks())
    }
}
