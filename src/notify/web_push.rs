//! Web Push as browsers implement it: the message encrypted for the subscription (RFC 8291,
//! `aes128gcm` of RFC 8188, one record) and signed for the push service with the server's
//! VAPID key (RFC 8292). Written on `ring`, which sluice already carries for its own keys: the
//! `web-push` crate would bring OpenSSL and a second JWT stack for these few steps.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::rand::{SecureRandom, SystemRandom};
use ring::{aead, agreement, hkdf, signature};
use serde::{Deserialize, Serialize};

/// The server's VAPID key pair: the public key travels with every message (`k=`) and is the
/// `applicationServerKey` a page subscribes with.
pub struct Vapid {
    pair: signature::EcdsaKeyPair,
    /// The public key, base64url (65 bytes, uncompressed P-256 point).
    public: String,
    /// `mailto:` or `https:` contact the push service may use to reach the sender.
    subject: String,
}

impl Vapid {
    /// From the two keys as `npx web-push generate-vapid-keys` prints them (base64url of the
    /// raw private scalar and of the uncompressed public point); they must be one pair.
    pub fn new(private_b64: &str, public_b64: &str, subject: &str) -> anyhow::Result<Vapid> {
        let private = decode(private_b64).ok_or_else(|| anyhow::anyhow!("not base64url"))?;
        let public = decode(public_b64).ok_or_else(|| anyhow::anyhow!("not base64url"))?;
        let pair = signature::EcdsaKeyPair::from_private_key_and_public_key(
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &private,
            &public,
            &SystemRandom::new(),
        )
        .map_err(|_| anyhow::anyhow!("the VAPID keys are not one P-256 key pair"))?;
        Ok(Vapid {
            pair,
            public: URL_SAFE_NO_PAD.encode(&public),
            subject: subject.to_owned(),
        })
    }

    /// The `Authorization` header for a message to `endpoint`: a JWT (ES256) whose audience is
    /// the push service's origin, valid 12 hours.
    pub fn authorization(&self, endpoint: &reqwest::Url, now_secs: i64) -> anyhow::Result<String> {
        let audience = endpoint.origin().ascii_serialization();
        let header = URL_SAFE_NO_PAD.encode(br#"{"typ":"JWT","alg":"ES256"}"#);
        let claims = serde_json::json!({
            "aud": audience,
            "exp": now_secs + 12 * 3600,
            "sub": self.subject,
        });
        let claims = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims)?);
        let signed = format!("{header}.{claims}");
        let sig = self
            .pair
            .sign(&SystemRandom::new(), signed.as_bytes())
            .map_err(|_| anyhow::anyhow!("signing the VAPID token failed"))?;
        let sig = URL_SAFE_NO_PAD.encode(sig.as_ref());
        Ok(format!("vapid t={signed}.{sig}, k={}", self.public))
    }
}

/// A browser's push subscription, as `PushSubscription.toJSON()` gives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subscription {
    /// The push service's URL for this browser.
    pub endpoint: String,
    /// The browser's ECDH public key (P-256, uncompressed), base64url.
    pub p256dh: String,
    /// The browser's 16-byte authentication secret, base64url.
    pub auth: String,
    /// The page's language when it subscribed (`en`, `ko`): the words of the notification.
    pub lang: String,
}

/// Why a subscription is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubscriptionError {
    #[error("endpoint: not an https URL")]
    Endpoint,
    #[error("endpoint: {0} is not a push service this sluice sends to (notify.web_push_hosts)")]
    Host(String),
    #[error("keys.p256dh: not a P-256 public key in base64url (65 bytes, uncompressed)")]
    Key,
    #[error("keys.auth: not 16 bytes in base64url")]
    Auth,
}

impl SubscriptionError {
    /// The request field at fault.
    pub fn field(&self) -> &'static str {
        match self {
            SubscriptionError::Endpoint | SubscriptionError::Host(_) => "endpoint",
            SubscriptionError::Key => "keys.p256dh",
            SubscriptionError::Auth => "keys.auth",
        }
    }
}

impl Subscription {
    /// Checks the subscription's form, and that its endpoint is on one of `hosts` (a host, or
    /// `*.` and a domain for its subdomains): sluice sends only to push services, never to a
    /// host a client names. `https` only, except a loopback host that is listed.
    pub fn check(&self, hosts: &[String]) -> Result<reqwest::Url, SubscriptionError> {
        let url = reqwest::Url::parse(&self.endpoint).map_err(|_| SubscriptionError::Endpoint)?;
        let host = url
            .host_str()
            .ok_or(SubscriptionError::Endpoint)?
            .to_owned();
        let loopback = matches!(host.as_str(), "127.0.0.1" | "localhost" | "[::1]");
        let secure = url.scheme() == "https" || (url.scheme() == "http" && loopback);
        if !secure || !url.username().is_empty() || url.password().is_some() {
            return Err(SubscriptionError::Endpoint);
        }
        let listed = hosts
            .iter()
            .any(|allowed| match allowed.strip_prefix("*.") {
                Some(domain) => host
                    .strip_suffix(domain)
                    .is_some_and(|sub| sub.len() > 1 && sub.ends_with('.')),
                None => *allowed == host,
            });
        if !listed {
            return Err(SubscriptionError::Host(host));
        }
        match decode(&self.p256dh) {
            Some(key) if key.len() == 65 && key[0] == 4 => {}
            _ => return Err(SubscriptionError::Key),
        }
        if decode(&self.auth).is_none_or(|a| a.len() != 16) {
            return Err(SubscriptionError::Auth);
        }
        Ok(url)
    }

    /// `payload` encrypted for this subscription: the body of the push message, with
    /// `Content-Encoding: aes128gcm`.
    pub fn encrypt(&self, payload: &[u8]) -> anyhow::Result<Vec<u8>> {
        let bad = |what: &str| anyhow::anyhow!("the subscription's {what} is malformed");
        let ua_public = decode(&self.p256dh).ok_or_else(|| bad("p256dh"))?;
        let auth = decode(&self.auth).ok_or_else(|| bad("auth"))?;
        encrypt(&ua_public, &auth, payload)
    }
}

/// Base64url, with or without padding (browsers send it without).
fn decode(text: &str) -> Option<Vec<u8>> {
    URL_SAFE_NO_PAD.decode(text.trim_end_matches('=')).ok()
}

/// The record size the one record is declared with (RFC 8188 §2: ≥ the record plus 17).
const RECORD_SIZE: u32 = 4096;

/// Most bytes of a payload: the record, its padding delimiter and tag fit in RECORD_SIZE.
pub const MAX_PAYLOAD: usize = RECORD_SIZE as usize - 17;

struct Len(usize);

impl hkdf::KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

fn expand(prk: &hkdf::Prk, info: &[&[u8]], len: usize) -> anyhow::Result<Vec<u8>> {
    let mut out = vec![0u8; len];
    prk.expand(info, Len(len))
        .and_then(|okm| okm.fill(&mut out))
        .map_err(|_| anyhow::anyhow!("HKDF expand failed"))?;
    Ok(out)
}

/// RFC 8291 §3.4 with a new ephemeral key and salt: the header (salt, record size, the
/// ephemeral public key as key id) and the one record, sealed.
fn encrypt(ua_public: &[u8], auth: &[u8], payload: &[u8]) -> anyhow::Result<Vec<u8>> {
    anyhow::ensure!(payload.len() <= MAX_PAYLOAD, "the payload is too large");
    let rng = SystemRandom::new();
    let ephemeral = agreement::EphemeralPrivateKey::generate(&agreement::ECDH_P256, &rng)
        .map_err(|_| anyhow::anyhow!("no ephemeral key"))?;
    let as_public = ephemeral
        .compute_public_key()
        .map_err(|_| anyhow::anyhow!("no ephemeral public key"))?;
    let as_public = as_public.as_ref().to_vec();
    let peer = agreement::UnparsedPublicKey::new(&agreement::ECDH_P256, ua_public);
    let ecdh_secret = agreement::agree_ephemeral(ephemeral, &peer, |secret| secret.to_vec())
        .map_err(|_| anyhow::anyhow!("the subscription's key is not a P-256 point"))?;
    // IKM = HKDF(auth, ecdh_secret, "WebPush: info" || 0 || ua_public || as_public, 32)
    let prk_key = hkdf::Salt::new(hkdf::HKDF_SHA256, auth).extract(&ecdh_secret);
    let ikm = expand(&prk_key, &[b"WebPush: info\0", ua_public, &as_public], 32)?;
    let mut salt = [0u8; 16];
    rng.fill(&mut salt)
        .map_err(|_| anyhow::anyhow!("no random salt"))?;
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, &salt).extract(&ikm);
    let cek = expand(&prk, &[b"Content-Encoding: aes128gcm\0"], 16)?;
    let nonce = expand(&prk, &[b"Content-Encoding: nonce\0"], 12)?;
    let key = aead::UnboundKey::new(&aead::AES_128_GCM, &cek)
        .map(aead::LessSafeKey::new)
        .map_err(|_| anyhow::anyhow!("bad content key"))?;
    // The last (and only) record ends with the delimiter 2 and no padding.
    let mut record = Vec::with_capacity(payload.len() + 17);
    record.extend_from_slice(payload);
    record.push(2);
    let nonce =
        aead::Nonce::try_assume_unique_for_key(&nonce).map_err(|_| anyhow::anyhow!("bad nonce"))?;
    key.seal_in_place_append_tag(nonce, aead::Aad::empty(), &mut record)
        .map_err(|_| anyhow::anyhow!("sealing failed"))?;
    let mut body = Vec::with_capacity(16 + 4 + 1 + as_public.len() + record.len());
    body.extend_from_slice(&salt);
    body.extend_from_slice(&RECORD_SIZE.to_be_bytes());
    body.push(as_public.len() as u8);
    body.extend_from_slice(&as_public);
    body.extend_from_slice(&record);
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subscription(endpoint: &str) -> Subscription {
        // A point from RFC 8291's appendix A (the user agent's public key) and its auth secret.
        Subscription {
            endpoint: endpoint.into(),
            p256dh: "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4".into(),
            auth: "BTBZMqHH6r4Tts7J_aSIgg".into(),
            lang: "en".into(),
        }
    }

    #[test]
    fn only_listed_push_services_over_https_are_sent_to() {
        let hosts = vec![
            "fcm.googleapis.com".to_owned(),
            "*.notify.windows.com".to_owned(),
            "127.0.0.1".to_owned(),
        ];
        let ok = |e: &str| subscription(e).check(&hosts).is_ok();
        assert!(ok("https://fcm.googleapis.com/fcm/send/abc"));
        assert!(ok("https://wns2-par02p.notify.windows.com/w/?token=x"));
        assert!(ok("http://127.0.0.1:8080/push/1"));
        assert!(!ok("http://fcm.googleapis.com/fcm/send/abc"));
        assert!(!ok("https://notify.windows.com/w"));
        assert!(!ok("https://evilnotify.windows.com/w"));
        assert!(!ok("https://169.254.169.254/latest/meta-data"));
        assert!(!ok("https://user:pw@fcm.googleapis.com/x"));
        let mut bad_key = subscription("https://fcm.googleapis.com/x");
        bad_key.p256dh = "AAAA".into();
        assert_eq!(bad_key.check(&hosts), Err(SubscriptionError::Key));
        let mut bad_auth = subscription("https://fcm.googleapis.com/x");
        bad_auth.auth = "AAAA".into();
        assert_eq!(bad_auth.check(&hosts), Err(SubscriptionError::Auth));
    }

    #[test]
    fn a_message_has_the_aes128gcm_header_and_one_sealed_record() {
        let body = subscription("https://x").encrypt(b"hello").unwrap();
        assert_eq!(&body[16..20], &RECORD_SIZE.to_be_bytes());
        assert_eq!(body[20], 65);
        assert_eq!(
            body[21], 4,
            "the key id is the sender's uncompressed public key"
        );
        assert_eq!(body.len(), 16 + 4 + 1 + 65 + 5 + 1 + 16);
    }
}
