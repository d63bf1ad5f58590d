//! The signatures an asymmetric key (RS256, ES256, EdDSA from a JWKS or a PEM) has already
//! verified. A waiting user's page presents the same token every few seconds, and checking an
//! RSA or ECDSA signature costs tens of µs where the HS256 one it replaces costs one: a token
//! seen before is found by its digest instead. The digest is SHA-256 of the whole token
//! (header, claims and signature, cut to 128 bits), so only a byte-identical token matches;
//! its claims (expiry, audience, issuer) are still checked on every use. Each key has its own
//! (a key the provider drops takes its entries with it). Bounded: 16 shards of 4,096 digests,
//! a full shard emptied at once (a user then pays one verification again).

use std::collections::HashSet;
use std::sync::Mutex;

use ring::digest::{Context, SHA256};

const SHARDS: usize = 16;
const PER_SHARD: usize = 4096;

type Digest = [u8; 16];

#[derive(Default)]
pub struct Verified {
    shards: [Mutex<HashSet<Digest>>; SHARDS],
}

impl Verified {
    /// Whether the token made of `signed` and `signature` verifies: from the digests of the
    /// tokens verified before, or else by `verify`, whose yes is then kept.
    pub fn check(&self, signed: &str, signature: &str, verify: impl FnOnce() -> bool) -> bool {
        let digest = digest(signed, signature);
        let shard = &self.shards[digest[0] as usize % SHARDS];
        if shard.lock().expect("not poisoned").contains(&digest) {
            return true;
        }
        if !verify() {
            return false;
        }
        let mut kept = shard.lock().expect("not poisoned");
        if kept.len() >= PER_SHARD {
            kept.clear();
        }
        kept.insert(digest);
        true
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().unwrap().len()).sum()
    }
}

fn digest(signed: &str, signature: &str) -> Digest {
    let mut context = Context::new(&SHA256);
    context.update(signed.as_bytes());
    context.update(b".");
    context.update(signature.as_bytes());
    let mut out = [0u8; 16];
    out.copy_from_slice(&context.finish().as_ref()[..16]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn a_token_seen_before_is_not_verified_again_and_any_other_is() {
        let verified = Verified::default();
        let calls = Cell::new(0);
        let verify = |answer: bool| {
            calls.set(calls.get() + 1);
            answer
        };
        assert!(verified.check("h.p", "sig", || verify(true)));
        assert!(verified.check("h.p", "sig", || verify(true)));
        assert_eq!(calls.get(), 1, "the second use is found, not verified");
        // One byte of the claims or of the signature changed: verified on its own.
        assert!(!verified.check("h.q", "sig", || verify(false)));
        assert!(!verified.check("h.p", "sjg", || verify(false)));
        assert_eq!(calls.get(), 3);
        // A refused token is not kept: it is checked again.
        assert!(!verified.check("h.q", "sig", || verify(false)));
        assert_eq!(calls.get(), 4);
    }

    #[test]
    fn the_digests_kept_are_bounded() {
        let verified = Verified::default();
        for i in 0..(SHARDS * PER_SHARD * 2) {
            verified.check(&format!("h.{i}"), "s", || true);
        }
        assert!(verified.len() <= SHARDS * PER_SHARD);
    }
}
