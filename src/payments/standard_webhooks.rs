//! Standard Webhooks signatures (<https://www.standardwebhooks.com>, a scheme providers sign
//! their webhooks with): `webhook-id`, `webhook-timestamp` (Unix seconds) and `webhook-signature`
//! (space-separated `v1,<base64>` values), each value an HMAC-SHA256 of
//! `<id>.<timestamp>.<raw body>` keyed by the secret's bytes (the base64 after `whsec_`).
//!
//! Every `v1` value is tried (a sender rotating its secret sends two); the comparison is
//! constant-time; a timestamp further than the tolerance from now is refused, so a captured
//! request cannot be replayed later.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::SignatureError;

/// The three headers of a delivery, as received.
pub struct Delivery<'a> {
    pub id: &'a str,
    pub timestamp: &'a str,
    pub signature: &'a str,
}

/// Verifies Standard Webhooks deliveries with one secret.
#[derive(Clone)]
pub struct StandardWebhooks {
    key: Vec<u8>,
    tolerance_secs: i64,
}

/// The key of a secret, given as `whsec_<base64>` or as the base64 alone; `None` when it is not
/// base64 or is empty.
pub fn secret_bytes(secret: &str) -> Option<Vec<u8>> {
    let encoded = secret.strip_prefix("whsec_").unwrap_or(secret);
    STANDARD.decode(encoded).ok().filter(|k| !k.is_empty())
}

impl StandardWebhooks {
    /// `None` when the secret is not one (see [`secret_bytes`]).
    pub fn new(secret: &str, tolerance_secs: u64) -> Option<Self> {
        Some(StandardWebhooks {
            key: secret_bytes(secret)?,
            tolerance_secs: tolerance_secs as i64,
        })
    }

    /// Checks `delivery` over the raw `body` at `now` (Unix seconds).
    pub fn verify(&self, delivery: &Delivery, body: &[u8], now: i64) -> Result<(), SignatureError> {
        if delivery.id.is_empty() || delivery.id.len() > 256 || delivery.signature.len() > 4096 {
            return Err(SignatureError::Malformed);
        }
        let timestamp: i64 = delivery
            .timestamp
            .trim()
            .parse()
            .map_err(|_| SignatureError::Malformed)?;
        if (now - timestamp).abs() > self.tolerance_secs {
            return Err(SignatureError::Stale);
        }
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key");
        mac.update(delivery.id.as_bytes());
        mac.update(b".");
        mac.update(delivery.timestamp.trim().as_bytes());
        mac.update(b".");
        mac.update(body);
        let mut seen = false;
        for value in delivery.signature.split_whitespace() {
            // Other versions (`v1a,…`: asymmetric) are not this key's to check.
            let Some(encoded) = value.strip_prefix("v1,") else {
                continue;
            };
            seen = true;
            let Ok(signature) = STANDARD.decode(encoded) else {
                continue;
            };
            if mac.clone().verify_slice(&signature).is_ok() {
                return Ok(());
            }
        }
        Err(if seen {
            SignatureError::Mismatch
        } else {
            SignatureError::Malformed
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The specification's published test vector.
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const TIMESTAMP: &str = "1614265330";
    const BODY: &[u8] = br#"{"test": 2432232314}"#;
    const SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    fn delivery(signature: &str) -> Delivery<'_> {
        Delivery {
            id: ID,
            timestamp: TIMESTAMP,
            signature,
        }
    }

    #[test]
    fn the_specifications_test_vector_verifies_with_or_without_the_prefix() {
        let now = 1_614_265_330;
        for secret in [SECRET, "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"] {
            let hooks = StandardWebhooks::new(secret, 300).unwrap();
            assert_eq!(hooks.verify(&delivery(SIGNATURE), BODY, now), Ok(()));
        }
    }

    #[test]
    fn any_of_several_signatures_may_match_and_other_versions_are_skipped() {
        let hooks = StandardWebhooks::new(SECRET, 300).unwrap();
        let now = 1_614_265_330;
        let rotated = format!("v1,bm90IGl0 v1a,c29tZXRoaW5n {SIGNATURE}");
        assert_eq!(hooks.verify(&delivery(&rotated), BODY, now), Ok(()));
    }

    #[test]
    fn a_changed_body_id_or_timestamp_and_an_old_delivery_are_refused() {
        let hooks = StandardWebhooks::new(SECRET, 300).unwrap();
        let now = 1_614_265_330;
        assert_eq!(
            hooks.verify(&delivery(SIGNATURE), br#"{"test": 2432232315}"#, now),
            Err(SignatureError::Mismatch)
        );
        let other_id = Delivery {
            id: "msg_other",
            ..delivery(SIGNATURE)
        };
        assert_eq!(
            hooks.verify(&other_id, BODY, now),
            Err(SignatureError::Mismatch)
        );
        let moved = Delivery {
            timestamp: "1614265331",
            ..delivery(SIGNATURE)
        };
        assert_eq!(
            hooks.verify(&moved, BODY, now),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            hooks.verify(&delivery(SIGNATURE), BODY, now + 301),
            Err(SignatureError::Stale)
        );
        assert_eq!(
            hooks.verify(&delivery(SIGNATURE), BODY, now - 301),
            Err(SignatureError::Stale)
        );
    }

    #[test]
    fn malformed_headers_and_secrets_are_named_so() {
        let hooks = StandardWebhooks::new(SECRET, 300).unwrap();
        let now = 1_614_265_330;
        assert_eq!(
            hooks.verify(&delivery("g0hM9SsE"), BODY, now),
            Err(SignatureError::Malformed)
        );
        let no_time = Delivery {
            timestamp: "soon",
            ..delivery(SIGNATURE)
        };
        assert_eq!(
            hooks.verify(&no_time, BODY, now),
            Err(SignatureError::Malformed)
        );
        assert!(secret_bytes("whsec_").is_none());
        assert!(secret_bytes("not base64!").is_none());
    }
}
