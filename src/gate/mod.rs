//! What gates share and need nothing of the service: their settings (`[gate]`) and the
//! server-side check of a visitor's Turnstile or hCaptcha answer. The gates themselves, their
//! check and their sessions are the service's (`service::gate`); what a gate is, the domain's
//! (`domain::gate`).

pub mod challenge;
pub mod settings;
