//! Proof of work on join (hashcash-style): when a sale asks for `bits`, a join must carry a
//! nonce such that SHA-256 of `<salt>:<sale id>:<user id>:<nonce>` starts with `bits` zero
//! bits. One place costs a browser a moment and a bot farm a core-second per account; raising
//! the difficulty draws a new salt, so work done in advance is lost. Bound to sale, user and
//! salt, a nonce is worth nothing anywhere else.

use ring::digest::{digest, SHA256};

use super::{SaleError, SaleId, UserId};

/// Most zero bits a sale may ask for (2^32 hashes is hours of work: already no sale at all).
pub const MAX_BITS: u32 = 32;

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProofOfWork {
    /// Leading zero bits a join's hash needs; 0 is off.
    pub bits: u8,
    /// Published with the offer; new at each change of difficulty.
    pub salt: String,
}

impl ProofOfWork {
    /// A difficulty from an admin: 0 (off) to [`MAX_BITS`], with a fresh salt.
    pub fn parse(bits: u32) -> Result<Self, SaleError> {
        if bits > MAX_BITS {
            return Err(SaleError::new(
                "difficulty_bits",
                "must be between 0 (off) and 32",
            ));
        }
        let salt = if bits == 0 {
            String::new()
        } else {
            hex::encode(rand::random::<[u8; 16]>())
        };
        Ok(ProofOfWork {
            bits: bits as u8,
            salt,
        })
    }

    pub fn is_on(&self) -> bool {
        self.bits > 0
    }

    /// Whether `nonce` (1 to 64 printable characters) does the work for this sale and user.
    pub fn verify(&self, sale: SaleId, user: &UserId, nonce: &str) -> bool {
        if !self.is_on() {
            return true;
        }
        if nonce.is_empty() || nonce.len() > 64 || !nonce.bytes().all(|b| b.is_ascii_graphic()) {
            return false;
        }
        let challenge = format!("{}:{}:{}:{}", self.salt, sale, user.as_str(), nonce);
        leading_zero_bits(digest(&SHA256, challenge.as_bytes()).as_ref()) >= u32::from(self.bits)
    }
}

pub fn leading_zero_bits(bytes: &[u8]) -> u32 {
    let mut bits = 0;
    for byte in bytes {
        if *byte == 0 {
            bits += 8;
        } else {
            return bits + byte.leading_zeros();
        }
    }
    bits
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a client does: count up until the hash has enough zero bits.
    fn solve(pow: &ProofOfWork, sale: SaleId, user: &UserId) -> String {
        (0u64..)
            .map(|n| n.to_string())
            .find(|nonce| pow.verify(sale, user, nonce))
            .unwrap()
    }

    #[test]
    fn work_is_bound_to_sale_user_and_salt() {
        let pow = ProofOfWork::parse(12).unwrap();
        let sale = SaleId::new();
        let alice = UserId::parse("alice").unwrap();
        let nonce = solve(&pow, sale, &alice);
        assert!(pow.verify(sale, &alice, &nonce));
        // Not for someone else, not for another sale, not after the difficulty was raised.
        let bob = UserId::parse("bob").unwrap();
        let others = [
            pow.verify(sale, &bob, &nonce),
            pow.verify(SaleId::new(), &alice, &nonce),
            ProofOfWork::parse(12).unwrap().verify(sale, &alice, &nonce),
        ];
        assert!(others.iter().filter(|ok| **ok).count() <= 1, "{others:?}"); // 1/4096 chance each
        assert!(!pow.verify(sale, &alice, ""));
        assert!(!pow.verify(sale, &alice, &"9".repeat(65)));
    }

    #[test]
    fn off_asks_nothing_and_bits_are_counted_exactly() {
        let off = ProofOfWork::parse(0).unwrap();
        assert!(off.verify(SaleId::new(), &UserId::parse("x").unwrap(), ""));
        assert_eq!(leading_zero_bits(&[0, 0b0001_0000]), 11);
        assert_eq!(leading_zero_bits(&[0xff]), 0);
        assert_eq!(leading_zero_bits(&[0, 0]), 16);
        assert!(ProofOfWork::parse(33).is_err());
    }
}
