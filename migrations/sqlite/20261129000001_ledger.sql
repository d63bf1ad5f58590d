-- The embedded ledger: the same tables as migrations/postgres, in SQLite. Times are Unix
-- milliseconds from the database's clock; ids are UUID blobs. Writers take the database lock at
-- BEGIN IMMEDIATE, so transactions are serial and each unit has at most one holder.

CREATE TABLE sales (
    id                  BLOB PRIMARY KEY,
    name                TEXT NOT NULL,
    opens_at_ms         INTEGER NOT NULL,
    closes_at_ms        INTEGER,
    stock_kind          TEXT NOT NULL CHECK (stock_kind IN ('quantity', 'seats')),
    total               INTEGER NOT NULL CHECK (total > 0),
    per_user_limit      INTEGER NOT NULL CHECK (per_user_limit > 0),
    admission_ttl_secs  INTEGER NOT NULL CHECK (admission_ttl_secs > 0),
    hold_ttl_secs       INTEGER NOT NULL CHECK (hold_ttl_secs > 0),
    payment_ttl_secs    INTEGER NOT NULL CHECK (payment_ttl_secs > 0),
    rate_per_minute     INTEGER NOT NULL CHECK (rate_per_minute > 0),
    max_active          INTEGER NOT NULL CHECK (max_active > 0),
    status              TEXT NOT NULL CHECK (status IN ('open', 'paused', 'closed')),
    created_at_ms       INTEGER NOT NULL
);

CREATE TABLE stock_units (
    sale_id     BLOB NOT NULL REFERENCES sales (id),
    unit_id     TEXT NOT NULL,
    attempt_id  BLOB,
    PRIMARY KEY (sale_id, unit_id)
);
CREATE INDEX stock_units_free ON stock_units (sale_id) WHERE attempt_id IS NULL;
CREATE INDEX stock_units_holder ON stock_units (attempt_id) WHERE attempt_id IS NOT NULL;

CREATE TABLE attempts (
    id                       BLOB PRIMARY KEY,
    sale_id                  BLOB NOT NULL REFERENCES sales (id),
    user_id                  TEXT NOT NULL,
    seq                      INTEGER NOT NULL,
    state                    TEXT NOT NULL CHECK (state IN
                               ('ADMITTED', 'HOLD', 'PAYMENT_PENDING', 'CONFIRMED', 'EXPIRED')),
    reason                   TEXT,
    admitted_at_ms           INTEGER NOT NULL,
    admission_expires_at_ms  INTEGER NOT NULL,
    hold_expires_at_ms       INTEGER,
    payment_expires_at_ms    INTEGER,
    updated_at_ms            INTEGER NOT NULL,
    CHECK ((state = 'EXPIRED') = (reason IS NOT NULL))
);
CREATE INDEX attempts_sale_state ON attempts (sale_id, state);
CREATE INDEX attempts_admission_due ON attempts (admission_expires_at_ms) WHERE state = 'ADMITTED';
CREATE INDEX attempts_hold_due ON attempts (hold_expires_at_ms) WHERE state = 'HOLD';
CREATE INDEX attempts_payment_due ON attempts (payment_expires_at_ms) WHERE state = 'PAYMENT_PENDING';

CREATE TABLE holds (
    attempt_id  BLOB PRIMARY KEY REFERENCES attempts (id),
    sale_id     BLOB NOT NULL REFERENCES sales (id),
    quantity    INTEGER NOT NULL CHECK (quantity > 0),
    -- JSON array of seat ids
    seat_ids    TEXT NOT NULL DEFAULT '[]',
    status      TEXT NOT NULL CHECK (status IN ('held', 'confirmed', 'returned')),
    created_at_ms  INTEGER NOT NULL,
    ended_at_ms    INTEGER
);

CREATE TABLE payments (
    reference      BLOB PRIMARY KEY,
    attempt_id     BLOB NOT NULL UNIQUE REFERENCES attempts (id),
    status         TEXT NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
    created_at_ms  INTEGER NOT NULL,
    updated_at_ms  INTEGER NOT NULL
);

CREATE TABLE payment_events (
    provider_event_id  TEXT PRIMARY KEY,
    payment_reference  BLOB NOT NULL,
    kind               TEXT NOT NULL,
    received_at_ms     INTEGER NOT NULL
);

CREATE TABLE attempt_transitions (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    attempt_id  BLOB NOT NULL REFERENCES attempts (id),
    from_state  TEXT NOT NULL,
    to_state    TEXT NOT NULL,
    reason      TEXT,
    cause       TEXT NOT NULL,
    at_ms       INTEGER NOT NULL
);
CREATE INDEX attempt_transitions_attempt ON attempt_transitions (attempt_id, id);

CREATE TABLE idempotency_keys (
    user_id        TEXT NOT NULL,
    key            TEXT NOT NULL,
    request_hash   TEXT NOT NULL,
    status         INTEGER NOT NULL,
    body           TEXT NOT NULL,
    created_at_ms  INTEGER NOT NULL,
    PRIMARY KEY (user_id, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at_ms);

CREATE TABLE outbox (
    id               BLOB PRIMARY KEY,
    sale_id          BLOB NOT NULL,
    event_type       TEXT NOT NULL,
    payload          TEXT NOT NULL,
    created_at_ms    INTEGER NOT NULL,
    published_at_ms  INTEGER,
    tries            INTEGER NOT NULL DEFAULT 0,
    dead_at_ms       INTEGER
);
CREATE INDEX outbox_pending ON outbox (created_at_ms, id) WHERE published_at_ms IS NULL AND dead_at_ms IS NULL;
