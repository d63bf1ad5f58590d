//! `Sluice-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`, the scheme
//! of some providers' own signature headers too (whose secret is then the `whsec_…` string's
//! bytes).
//!
//! Several `v1` values may be sent (a provider rotating secrets); one match is enough. The
//! comparison is constant-time, and a timestamp further than the tolerance from now is refused
//! so a captured request cannot be replayed later.

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

#[derive(Clone)]
pub struct WebhookSigner {
    secret: Vec<u8>,
    tolerance_secs: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the signature header is malformed")]
    Malformed,
    #[error("the signature timestamp is outside the tolerance")]
    Stale,
    #[error("no signature matches")]
    Mismatch,
}

/// A parsed header: the timestamp and every `v1` signature.
#[derive(Debug, PartialEq, Eq)]
pub struct SignatureHeader {
    pub timestamp: i64,
    pub signatures: Vec<Vec<u8>>,
}

impl SignatureHeader {
    pub fn parse(header: &str) -> Result<Self, SignatureError> {
        if header.len() > 4096 {
            return Err(SignatureError::Malformed);
        }
        let mut timestamp = None;
        let mut signatures = Vec::new();
        for part in header.split(',') {
            let (key, value) = part
                .trim()
                .split_once('=')
                .ok_or(SignatureError::Malformed)?;
            match key {
                "t" => {
                    let t: i64 = value.parse().map_err(|_| SignatureError::Malformed)?;
                    if timestamp.replace(t).is_some() {
                        return Err(SignatureError::Malformed);
                    }
                }
                "v1" => signatures.push(hex::decode(value).map_err(|_| SignatureError::Malformed)?),
                // Unknown schemes are ignored, as future versions may add them.
                _ => {}
            }
        }
        match (timestamp, signatures.is_empty()) {
            (Some(timestamp), false) => Ok(SignatureHeader {
                timestamp,
                signatures,
            }),
            _ => Err(SignatureError::Malformed),
        }
    }
}

impl WebhookSigner {
    pub fn new(secret: &str, tolerance_secs: u64) -> Self {
        WebhookSigner {
            secret: secret.as_bytes().to_vec(),
            tolerance_secs: tolerance_secs as i64,
        }
    }

    fn mac(&self, timestamp: i64, body: &[u8]) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.secret).expect("HMAC takes any key length");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        mac
    }

    /// The header value a provider sends for `body` at `timestamp`.
    pub fn sign(&self, timestamp: i64, body: &[u8]) -> String {
        let tag = self.mac(timestamp, body).finalize().into_bytes();
        format!("t={timestamp},v1={}", hex::encode(tag))
    }

    pub fn verify(&self, header: &str, body: &[u8], now: i64) -> Result<(), SignatureError> {
        let parsed = SignatureHeader::parse(header)?;
        if (now - parsed.timestamp).abs() > self.tolerance_secs {
            return Err(SignatureError::Stale);
        }
        let matched = parsed
            .signatures
            .iter()
            .any(|sig| self.mac(parsed.timestamp, body).verify_slice(sig).is_ok());
        if matched {
            Ok(())
        } else {
            Err(SignatureError::Mismatch)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn signed_bodies_verify_and_tampering_does_not() {
        let signer = WebhookSigner::new("whsec-0123456789abcdef", 300);
        let body = br#"{"id":"evt_1"}"#;
        let header = signer.sign(1_000_000, body);
        assert_eq!(signer.verify(&header, body, 1_000_010), Ok(()));
        assert_eq!(
            signer.verify(&header, br#"{"id":"evt_2"}"#, 1_000_010),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            signer.verify(&header, body, 1_000_000 + 301),
            Err(SignatureError::Stale)
        );
        assert_eq!(
            signer.verify(&header, body, 1_000_000 - 301),
            Err(SignatureError::Stale)
        );
        let other = WebhookSigner::new("another-secret-0123456", 300);
        assert_eq!(
            other.verify(&header, body, 1_000_000),
            Err(SignatureError::Mismatch)
        );
        let rotated = format!("{header},v1={}", "00".repeat(32));
        assert_eq!(signer.verify(&rotated, body, 1_000_000), Ok(()));
        for bad in [
            "",
            "t=1",
            "v1=00",
            "t=x,v1=00",
            "t=1,v1=zz",
            "t=1,t=2,v1=00",
            "garbage",
        ] {
            assert_eq!(
                signer.verify(bad, body, 1),
                Err(SignatureError::Malformed),
                "{bad}"
            );
        }
    }

    proptest! {
        /// The parser never panics, whatever the header.
        #[test]
        fn parsing_any_header_does_not_panic(header in ".{0,200}") {
            let _ = SignatureHeader::parse(&header);
        }

        /// Any change to the signed body is caught, whichever byte it touches.
        #[test]
        fn any_tampered_body_fails(body in prop::collection::vec(any::<u8>(), 1..256), at in any::<prop::sample::Index>(), flip in 1u8..=255) {
            let signer = WebhookSigner::new("whsec-0123456789abcdef", 300);
            let header = signer.sign(1_000_000, &body);
            let mut tampered = body.clone();
            let i = at.index(tampered.len());
            tampered[i] ^= flip;
            prop_assert_eq!(signer.verify(&header, &body, 1_000_000), Ok(()));
            prop_assert_eq!(signer.verify(&header, &tampered, 1_000_000), Err(SignatureError::Mismatch));
        }

        #[test]
        fn parsing_round_trips(t in any::<i64>(), sig in prop::collection::vec(any::<u8>(), 1..64)) {
            let header = format!("t={t},v1={}", hex::encode(&sig));
            prop_assert_eq!(SignatureHeader::parse(&header), Ok(SignatureHeader { timestamp: t, signatures: vec![sig] }));
        }
    }
}
