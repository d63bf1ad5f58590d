//! Admin keys: the configured one, compared in constant time, and named keys, stored as the
//! SHA-256 of their secret and shown once, at creation.

use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The key of `auth.admin_key`: an `admin` key that needs no ledger to check.
#[derive(Clone)]
pub struct AdminKey(String);

impl AdminKey {
    pub fn new(key: &str) -> Self {
        AdminKey(key.to_owned())
    }

    pub fn matches(&self, presented: &str) -> bool {
        self.0.as_bytes().ct_eq(presented.as_bytes()).into()
    }
}

impl std::fmt::Debug for AdminKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminKey(…)")
    }
}

/// How a named key's secret begins, so a leaked one is recognisable (secret scanners).
pub const SECRET_PREFIX: &str = "sluice_ak_";

/// A new named key's secret: the prefix and 32 random bytes, base64url.
pub fn new_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    format!(
        "{SECRET_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

/// What the ledger stores of a secret and looks it up by: its SHA-256, hex. The secrets are
/// 256 random bits, so a fast hash is enough (there is no password to guess).
pub fn hash_secret(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_new_each_time_and_hash_apart() {
        let (a, b) = (new_secret(), new_secret());
        assert_ne!(a, b);
        assert!(a.starts_with(SECRET_PREFIX) && a.len() == SECRET_PREFIX.len() + 43);
        assert_eq!(hash_secret(&a), hash_secret(&a));
        assert_ne!(hash_secret(&a), hash_secret(&b));
        assert_eq!(hash_secret(&a).len(), 64);
    }
}
