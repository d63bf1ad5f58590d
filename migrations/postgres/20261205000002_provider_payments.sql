-- The provider's side of a payment: which provider took it, the provider's id of it (a Stripe
-- PaymentIntent), the last failed try it reported (the buyer may try again until the
-- deadline), and the refund it took.
ALTER TABLE payments ADD COLUMN provider TEXT;
ALTER TABLE payments ADD COLUMN provider_payment_id TEXT;
ALTER TABLE payments ADD COLUMN last_failure TEXT;
ALTER TABLE payments ADD COLUMN provider_refund_id TEXT;
CREATE UNIQUE INDEX payments_provider_payment ON payments (provider, provider_payment_id)
    WHERE provider_payment_id IS NOT NULL;
