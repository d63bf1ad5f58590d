//! Queue tickets: what a waiting user's client presents with each status question so that the
//! replica answers from its view of the line (`src/service/line`) without asking the queue
//! store where the attempt stands. A ticket carries the attempt's join serial and the line's
//! epoch, under an HMAC-SHA-256 bound to the attempt (and so the sale) and the user: another
//! user's, another attempt's or an altered ticket does not verify.
//!
//! Format: `<serial>.<epoch>.<mac>` (the MAC, base64url). The key comes from
//! `auth.admission_key_seed_hex`, so every replica verifies every replica's tickets; without
//! it each process signs with a key of its own and a ticket of another is only ignored (the
//! answer then comes from the store, as without a ticket).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::hmac;
use subtle::ConstantTimeEq;

use crate::domain::{AttemptId, UserId};

/// Where an attempt stands in its line, as its ticket says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ticket {
    pub serial: u64,
    pub epoch: String,
}

/// An HMAC-SHA-256 tag's length.
const MAC_LEN: usize = 32;

#[derive(Clone)]
pub struct QueueTickets {
    key: hmac::Key,
}

impl QueueTickets {
    /// From the admission key's seed (shared by the replicas), or a key of this process.
    pub fn new(seed: Option<[u8; 32]>) -> Self {
        let seed = seed.unwrap_or_else(rand::random);
        // A key of its own, not the admission key's seed itself.
        let derived = hmac::sign(
            &hmac::Key::new(hmac::HMAC_SHA256, b"sluice queue ticket"),
            &seed,
        );
        QueueTickets {
            key: hmac::Key::new(hmac::HMAC_SHA256, derived.as_ref()),
        }
    }

    pub fn issue(&self, attempt: AttemptId, user: &UserId, ticket: &Ticket) -> String {
        let serial = ticket.serial.to_string();
        let mac = self.mac(attempt, user, &serial, &ticket.epoch);
        format!(
            "{serial}.{}.{}",
            ticket.epoch,
            URL_SAFE_NO_PAD.encode(mac.as_ref())
        )
    }

    /// The ticket's serial and epoch if it was issued for `attempt` and `user`.
    pub fn verify(&self, ticket: &str, attempt: AttemptId, user: &UserId) -> Option<Ticket> {
        let mut parts = ticket.splitn(3, '.');
        let (serial_text, epoch, mac) = (parts.next()?, parts.next()?, parts.next()?);
        let serial: u64 = serial_text.parse().ok()?;
        let mut presented = [0u8; MAC_LEN];
        if URL_SAFE_NO_PAD.decode_slice(mac, &mut presented).ok()? != MAC_LEN {
            return None;
        }
        let expected = self.mac(attempt, user, serial_text, epoch);
        if !bool::from(expected.as_ref().ct_eq(&presented)) {
            return None;
        }
        Some(Ticket {
            serial,
            epoch: epoch.to_owned(),
        })
    }

    /// The MAC of `<attempt>\n<user>\n<serial>\n<epoch>`, fed to the HMAC in parts (a status
    /// poll verifies one, and the parts need no string of their own).
    fn mac(&self, attempt: AttemptId, user: &UserId, serial: &str, epoch: &str) -> hmac::Tag {
        let (mut sale, mut local) = ([0u8; 32], [0u8; 32]);
        let mut context = hmac::Context::with_key(&self.key);
        context.update(attempt.sale.0.simple().encode_lower(&mut sale).as_bytes());
        context.update(attempt.local.simple().encode_lower(&mut local).as_bytes());
        for part in [user.as_str(), serial, epoch] {
            context.update(b"\n");
            context.update(part.as_bytes());
        }
        context.sign()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::SaleId;

    fn user(name: &str) -> UserId {
        UserId::parse(name).unwrap()
    }

    #[test]
    fn a_ticket_verifies_only_for_its_attempt_and_user_and_as_issued() {
        let tickets = QueueTickets::new(Some([7; 32]));
        let sale = SaleId::new();
        let (attempt, other) = (AttemptId::new(sale), AttemptId::new(sale));
        let placed = Ticket {
            serial: 42,
            epoch: "1764640000000000".into(),
        };
        let ticket = tickets.issue(attempt, &user("alice"), &placed);
        assert_eq!(
            tickets.verify(&ticket, attempt, &user("alice")),
            Some(placed)
        );
        assert_eq!(tickets.verify(&ticket, attempt, &user("bob")), None);
        assert_eq!(tickets.verify(&ticket, other, &user("alice")), None);
        assert_eq!(
            tickets.verify(&ticket, AttemptId::new(SaleId::new()), &user("alice")),
            None
        );
        let moved = ticket.replacen("42.", "1.", 1);
        assert_eq!(tickets.verify(&moved, attempt, &user("alice")), None);
        for garbage in ["", "1", "1.2", "x.y.z", "1.2.!!!"] {
            assert_eq!(
                tickets.verify(garbage, attempt, &user("alice")),
                None,
                "{garbage}"
            );
        }
        // Another key (a replica without the shared seed) does not verify it.
        let elsewhere = QueueTickets::new(Some([8; 32]));
        assert_eq!(elsewhere.verify(&ticket, attempt, &user("alice")), None);
    }
}
