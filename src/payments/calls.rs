//! Every call to a payment provider goes through [`call`]: bounded by a timeout (its retries
//! included, so a request that waits on the provider never waits past it), counted by
//! provider, call and outcome (`sluice_provider_calls_total`) and timed
//! (`sluice_provider_call_duration_seconds`), and retried with backoff only when the caller
//! says the provider makes a repeat safe (an `Idempotency-Key` the provider honours).

use std::future::Future;
use std::time::{Duration, Instant};

/// Why a provider call did not give an answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// The provider could not be reached, timed out or answered 5xx or 429: try later.
    #[error("the payment provider is unavailable: {0}")]
    Unavailable(String),
    /// The provider answered and said no (a 4xx): the same call again gets the same answer.
    #[error("the payment provider refused: {0}")]
    Refused(String),
}

/// The HTTP client of a provider's API: every request bounded by `timeout`, connecting
/// included.
pub fn http_client(timeout: Duration) -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .connect_timeout(timeout)
        .timeout(timeout)
        .build()?)
}

/// Sends `request` and reads the answer: a 2xx is the answer (JSON); a 4xx other than 429 a
/// refusal in the provider's words (`words` reads them from its error body); anything else, or
/// no answer, an outage. An error carries no URL (the request's details are not its place) and
/// never the credentials, which travel in headers only.
pub async fn exchange<T: serde::de::DeserializeOwned>(
    mut request: reqwest::RequestBuilder,
    words: fn(&[u8]) -> Option<String>,
) -> Result<T, ProviderError> {
    // The provider sees the call as part of the buyer's trace (W3C Trace Context).
    for (name, value) in crate::telemetry::traces::trace_headers() {
        request = request.header(name, value);
    }
    let response = request
        .send()
        .await
        .map_err(|e| ProviderError::Unavailable(e.without_url().to_string()))?;
    let status = response.status();
    let body = response
        .bytes()
        .await
        .map_err(|e| ProviderError::Unavailable(e.without_url().to_string()))?;
    if status.is_success() {
        return serde_json::from_slice(&body)
            .map_err(|e| ProviderError::Unavailable(format!("unreadable answer: {e}")));
    }
    let detail = words(&body).unwrap_or_else(|| format!("HTTP {status}"));
    if status.is_client_error() && status != reqwest::StatusCode::TOO_MANY_REQUESTS {
        Err(ProviderError::Refused(detail))
    } else {
        Err(ProviderError::Unavailable(detail))
    }
}

/// Retries a call that may be repeated: this many attempts in all, the waits between them
/// doubling from [`FIRST_BACKOFF`].
const ATTEMPTS: u32 = 3;
const FIRST_BACKOFF: Duration = Duration::from_millis(100);

/// Whether a call may be sent again when its answer is lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repeat {
    /// The provider dedupes it (an idempotency key, or a read).
    Safe,
    /// Once only.
    Never,
}

/// `op` within `timeout` (all its tries), counted and timed as `provider`'s `name`; tried
/// again after an [`ProviderError::Unavailable`] when `repeat` allows it and the backoff ends
/// before the timeout.
pub async fn call<T, F, Fut>(
    provider: &'static str,
    name: &'static str,
    timeout: Duration,
    repeat: Repeat,
    mut op: F,
) -> Result<T, ProviderError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ProviderError>>,
{
    let tries = match repeat {
        Repeat::Safe => ATTEMPTS,
        Repeat::Never => 1,
    };
    let deadline = tokio::time::Instant::now() + timeout;
    let mut backoff = FIRST_BACKOFF;
    let mut last = None;
    for attempt in 1..=tries {
        let started = Instant::now();
        let span = crate::telemetry::traces::span(|| {
            tracing::info_span!(
                "provider.call",
                provider,
                call = name,
                attempt,
                otel.kind = "client"
            )
        });
        let tried = tracing::Instrument::instrument(tokio::time::timeout_at(deadline, op()), span);
        let result = match tried.await {
            Ok(result) => result,
            Err(_) => Err(ProviderError::Unavailable("timed out".into())),
        };
        let outcome = match &result {
            Ok(_) => "ok",
            Err(ProviderError::Refused(_)) => "refused",
            Err(ProviderError::Unavailable(_)) => "unavailable",
        };
        metrics::histogram!("sluice_provider_call_duration_seconds",
            "provider" => provider, "call" => name)
        .record(started.elapsed().as_secs_f64());
        metrics::counter!("sluice_provider_calls_total",
            "provider" => provider, "call" => name, "outcome" => outcome)
        .increment(1);
        match result {
            Err(ProviderError::Unavailable(e))
                if attempt < tries && tokio::time::Instant::now() + backoff < deadline =>
            {
                tracing::debug!(provider, call = name, error = %e, "provider call retried");
                last = Some(ProviderError::Unavailable(e));
                tokio::time::sleep(backoff).await;
                backoff *= 2;
            }
            other => return other,
        }
    }
    Err(last.unwrap_or_else(|| ProviderError::Unavailable("no attempt made".into())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test(start_paused = true)]
    async fn a_safe_call_is_tried_again_after_an_outage_and_a_refusal_is_not() {
        let tries = AtomicU32::new(0);
        let flaky = || async {
            match tries.fetch_add(1, Ordering::SeqCst) {
                0 => Err(ProviderError::Unavailable("503".into())),
                _ => Ok(7),
            }
        };
        let answer = call("test", "flaky", Duration::from_secs(1), Repeat::Safe, flaky).await;
        assert_eq!((answer, tries.load(Ordering::SeqCst)), (Ok(7), 2));

        let once = AtomicU32::new(0);
        let down = || async {
            once.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>(ProviderError::Unavailable("503".into()))
        };
        let answer = call("test", "down", Duration::from_secs(1), Repeat::Never, down).await;
        assert!(matches!(answer, Err(ProviderError::Unavailable(_))));
        assert_eq!(
            once.load(Ordering::SeqCst),
            1,
            "a call that is not safe goes once"
        );

        let refused = AtomicU32::new(0);
        let no = || async {
            refused.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>(ProviderError::Refused("card declined".into()))
        };
        let _ = call("test", "no", Duration::from_secs(1), Repeat::Safe, no).await;
        assert_eq!(refused.load(Ordering::SeqCst), 1, "a refusal is the answer");
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_that_does_not_answer_ends_at_its_timeout_retries_included() {
        let tries = AtomicU32::new(0);
        let hang = || {
            tries.fetch_add(1, Ordering::SeqCst);
            std::future::pending::<Result<(), ProviderError>>()
        };
        let began = tokio::time::Instant::now();
        let bound = Duration::from_millis(300);
        let answer = call("test", "hang", bound, Repeat::Safe, hang).await;
        assert!(matches!(answer, Err(ProviderError::Unavailable(e)) if e == "timed out"));
        assert_eq!(began.elapsed(), bound, "no retry past the bound");
        assert_eq!(tries.load(Ordering::SeqCst), 1);
    }
}
