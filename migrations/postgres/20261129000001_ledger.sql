-- The ledger: the truth about sales, attempts from ADMITTED on, holds, payments, the audit
-- trail, saved idempotent responses and the outbox. Redis is rebuilt from here.

CREATE TABLE sales (
    id                  UUID PRIMARY KEY,
    name                TEXT NOT NULL,
    opens_at            TIMESTAMPTZ NOT NULL,
    closes_at           TIMESTAMPTZ,
    stock_kind          TEXT NOT NULL CHECK (stock_kind IN ('quantity', 'seats')),
    total               INTEGER NOT NULL CHECK (total > 0),
    per_user_limit      INTEGER NOT NULL CHECK (per_user_limit > 0),
    admission_ttl_secs  INTEGER NOT NULL CHECK (admission_ttl_secs > 0),
    hold_ttl_secs       INTEGER NOT NULL CHECK (hold_ttl_secs > 0),
    payment_ttl_secs    INTEGER NOT NULL CHECK (payment_ttl_secs > 0),
    rate_per_minute     INTEGER NOT NULL CHECK (rate_per_minute > 0),
    max_active          INTEGER NOT NULL CHECK (max_active > 0),
    status              TEXT NOT NULL CHECK (status IN ('open', 'paused', 'closed')),
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- One row per unit of stock: a named seat, or unit "1".."total" of a quantity sale. A unit is
-- free while attempt_id is NULL. Holding claims free units (quantities with SKIP LOCKED, so
-- concurrent holds never queue behind one hot counter; seats by name), which makes the ledger
-- the last guard against overselling: a unit has at most one holder, whatever Redis said.
CREATE TABLE stock_units (
    sale_id     UUID NOT NULL REFERENCES sales (id),
    unit_id     TEXT NOT NULL,
    attempt_id  UUID,
    PRIMARY KEY (sale_id, unit_id)
);
CREATE INDEX stock_units_free ON stock_units (sale_id) WHERE attempt_id IS NULL;
CREATE INDEX stock_units_holder ON stock_units (attempt_id) WHERE attempt_id IS NOT NULL;

-- Attempts from ADMITTED on (waiting users live only in the queue store).
CREATE TABLE attempts (
    id                    UUID PRIMARY KEY,
    sale_id               UUID NOT NULL REFERENCES sales (id),
    user_id               TEXT NOT NULL,
    -- The join sequence number: admission order is join order.
    seq                   BIGINT NOT NULL,
    state                 TEXT NOT NULL CHECK (state IN
                            ('ADMITTED', 'HOLD', 'PAYMENT_PENDING', 'CONFIRMED', 'EXPIRED')),
    reason                TEXT,
    admitted_at           TIMESTAMPTZ NOT NULL DEFAULT now(),
    admission_expires_at  TIMESTAMPTZ NOT NULL,
    hold_expires_at       TIMESTAMPTZ,
    payment_expires_at    TIMESTAMPTZ,
    updated_at            TIMESTAMPTZ NOT NULL DEFAULT now(),
    CHECK ((state = 'EXPIRED') = (reason IS NOT NULL))
);
CREATE INDEX attempts_sale_state ON attempts (sale_id, state);
CREATE INDEX attempts_admission_due ON attempts (admission_expires_at) WHERE state = 'ADMITTED';
CREATE INDEX attempts_hold_due ON attempts (hold_expires_at) WHERE state = 'HOLD';
CREATE INDEX attempts_payment_due ON attempts (payment_expires_at) WHERE state = 'PAYMENT_PENDING';

-- What an attempt holds; `status` makes giving stock back happen exactly once.
CREATE TABLE holds (
    attempt_id  UUID PRIMARY KEY REFERENCES attempts (id),
    sale_id     UUID NOT NULL REFERENCES sales (id),
    quantity    INTEGER NOT NULL CHECK (quantity > 0),
    seat_ids    TEXT[] NOT NULL DEFAULT '{}',
    status      TEXT NOT NULL CHECK (status IN ('held', 'confirmed', 'returned')),
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    ended_at    TIMESTAMPTZ
);

CREATE TABLE payments (
    reference   UUID PRIMARY KEY,
    attempt_id  UUID NOT NULL UNIQUE REFERENCES attempts (id),
    status      TEXT NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Every provider event seen, once: webhooks are idempotent by provider event id.
CREATE TABLE payment_events (
    provider_event_id  TEXT PRIMARY KEY,
    payment_reference  UUID NOT NULL,
    kind               TEXT NOT NULL,
    received_at        TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- The audit trail: every transition, with its cause.
CREATE TABLE attempt_transitions (
    id          BIGSERIAL PRIMARY KEY,
    attempt_id  UUID NOT NULL REFERENCES attempts (id),
    from_state  TEXT NOT NULL,
    to_state    TEXT NOT NULL,
    reason      TEXT,
    cause       TEXT NOT NULL,
    at          TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX attempt_transitions_attempt ON attempt_transitions (attempt_id, id);

-- Saved responses of client POSTs sent with an Idempotency-Key.
CREATE TABLE idempotency_keys (
    user_id       TEXT NOT NULL,
    key           TEXT NOT NULL,
    request_hash  TEXT NOT NULL,
    status        SMALLINT NOT NULL,
    body          JSONB NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);

-- Domain events, written in the transaction of the change they report; relayed later.
CREATE TABLE outbox (
    id            UUID PRIMARY KEY,
    sale_id       UUID NOT NULL,
    event_type    TEXT NOT NULL,
    payload       JSONB NOT NULL,
    -- The insert's own time (not the transaction's start): a transition that waited for a row
    -- lock is stamped after the one it waited for, so relaying by created_at keeps their order.
    created_at    TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    published_at  TIMESTAMPTZ,
    -- Publishing attempts the sink refused; past the limit the row is dead-lettered.
    tries         INTEGER NOT NULL DEFAULT 0,
    dead_at       TIMESTAMPTZ
);
CREATE INDEX outbox_pending ON outbox (created_at, id) WHERE published_at IS NULL AND dead_at IS NULL;
