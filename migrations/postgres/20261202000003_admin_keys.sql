-- Named admin keys with a role, and the admin audit log. A key is stored as the SHA-256 of
-- its secret (the secret is shown once, at creation); a revoked key keeps its row so the log
-- still names it.
CREATE TABLE admin_keys (
    id          UUID PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    role        TEXT NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    key_hash    TEXT NOT NULL UNIQUE,
    created_by  TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    revoked_at  TIMESTAMPTZ
);

-- Who did what to what: one row per admin action, ordered by its UUIDv7 id.
CREATE TABLE admin_audit (
    id       UUID PRIMARY KEY,
    actor    TEXT NOT NULL,
    action   TEXT NOT NULL,
    target   TEXT NOT NULL,
    sale_id  UUID,
    before   JSONB,
    after    JSONB,
    at       TIMESTAMPTZ NOT NULL
);
CREATE INDEX admin_audit_sale ON admin_audit (sale_id, id);
