-- Named admin keys with a role, and the admin audit log. A key is stored as the SHA-256 of
-- its secret (the secret is shown once, at creation); a revoked key keeps its row so the log
-- still names it. Times are Unix milliseconds.
CREATE TABLE admin_keys (
    id          BLOB PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    role        TEXT NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    key_hash    TEXT NOT NULL UNIQUE,
    created_by  TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
);

-- Who did what to what: one row per admin action, ordered by its UUIDv7 id.
CREATE TABLE admin_audit (
    id       BLOB PRIMARY KEY,
    actor    TEXT NOT NULL,
    action   TEXT NOT NULL,
    target   TEXT NOT NULL,
    sale_id  BLOB,
    before   TEXT,
    after    TEXT,
    at       INTEGER NOT NULL
);
CREATE INDEX admin_audit_sale ON admin_audit (sale_id, id);
