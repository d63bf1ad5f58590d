-- A waiting attempt's Web Push subscription, until its turn comes (then taken) or it is purged.
CREATE TABLE push_subscriptions (
    attempt_id  TEXT PRIMARY KEY,
    endpoint    TEXT NOT NULL,
    p256dh      TEXT NOT NULL,
    auth        TEXT NOT NULL,
    lang        TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX push_subscriptions_created ON push_subscriptions (created_at);
