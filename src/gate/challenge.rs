//! A visitor's Turnstile or hCaptcha answer, checked server-side: both take the same form POST
//! of the shop's secret, the answer and the visitor's address to their `siteverify`, and answer
//! JSON whose `success` says yes or no.
//! - Turnstile: <https://developers.cloudflare.com/turnstile/get-started/server-side-validation/>
//! - hCaptcha: <https://docs.hcaptcha.com/#verify-the-user-response-server-side>

use serde::Deserialize;

use super::settings::GateConfig;
use crate::domain::gate::Challenge;
use crate::payments::page_sources::{origin, PageSources};

/// What `siteverify` answers (the fields sluice reads).
#[derive(Deserialize)]
struct Verdict {
    success: bool,
    #[serde(default, rename = "error-codes")]
    error_codes: Vec<String>,
}

/// Why an answer was not taken.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ChallengeError {
    #[error("the challenge's answer is missing")]
    Missing,
    #[error("the challenge was not passed ({0})")]
    Failed(String),
    #[error("{0} is not set up on this sluice (its site key and secret)")]
    NotConfigured(&'static str),
    /// The provider did not answer in time, or not as documented: the visitor may try again.
    #[error("the challenge could not be checked: {0}")]
    Unreachable(String),
}

pub struct Verifier {
    client: reqwest::Client,
}

impl Verifier {
    pub fn new(config: &GateConfig) -> Self {
        let client = reqwest::Client::builder()
            .timeout(config.verify_timeout_ms.duration())
            .build()
            .expect("a client with a timeout builds");
        Verifier { client }
    }

    /// The site key and script the page shows the widget with, if `challenge` is set up.
    pub fn widget(config: &GateConfig, challenge: Challenge) -> Option<(&str, &str)> {
        let (key, script) = match challenge {
            Challenge::None => return None,
            Challenge::Turnstile => (&config.turnstile_site_key, &config.turnstile_script_url),
            Challenge::Hcaptcha => (&config.hcaptcha_site_key, &config.hcaptcha_script_url),
        };
        (!key.is_empty()).then_some((key.as_str(), script.as_str()))
    }

    /// What the waiting page loads from the challenges set up (their scripts and frames), as
    /// sources of its content policy.
    pub fn page_sources(config: &GateConfig) -> PageSources {
        let mut sources = PageSources::default();
        for challenge in [Challenge::Turnstile, Challenge::Hcaptcha] {
            if let Some(origin) = Self::widget(config, challenge).and_then(|(_, s)| origin(s)) {
                sources = sources.and(&PageSources::alike(origin, ""));
            }
        }
        sources
    }

    /// Checks `answer` with the provider of `challenge` (none: passes).
    pub async fn verify(
        &self,
        config: &GateConfig,
        challenge: Challenge,
        answer: Option<&str>,
        address: Option<std::net::IpAddr>,
    ) -> Result<(), ChallengeError> {
        let (name, url, secret, site_key) = match challenge {
            Challenge::None => return Ok(()),
            Challenge::Turnstile => (
                "Turnstile",
                &config.turnstile_verify_url,
                &config.turnstile_secret,
                &config.turnstile_site_key,
            ),
            Challenge::Hcaptcha => (
                "hCaptcha",
                &config.hcaptcha_verify_url,
                &config.hcaptcha_secret,
                &config.hcaptcha_site_key,
            ),
        };
        if secret.is_empty() {
            return Err(ChallengeError::NotConfigured(name));
        }
        let answer = answer.filter(|a| !a.is_empty() && a.len() <= 4096);
        let answer = answer.ok_or(ChallengeError::Missing)?;
        let remote = address.map(|a| a.to_string()).unwrap_or_default();
        let mut form = vec![("secret", secret.expose()), ("response", answer)];
        if !remote.is_empty() {
            form.push(("remoteip", &remote));
        }
        if challenge == Challenge::Hcaptcha {
            form.push(("sitekey", site_key));
        }
        let reply = self
            .client
            .post(url.as_str())
            .form(&form)
            .send()
            .await
            .map_err(|e| ChallengeError::Unreachable(e.without_url().to_string()))?;
        if !reply.status().is_success() {
            return Err(ChallengeError::Unreachable(format!(
                "{name} answered {}",
                reply.status()
            )));
        }
        let verdict: Verdict = reply
            .json()
            .await
            .map_err(|e| ChallengeError::Unreachable(e.without_url().to_string()))?;
        let outcome = if verdict.success { "passed" } else { "failed" };
        metrics::counter!("sluice_gate_challenges_total", "provider" => name, "outcome" => outcome)
            .increment(1);
        if verdict.success {
            Ok(())
        } else {
            Err(ChallengeError::Failed(verdict.error_codes.join(", ")))
        }
    }
}
