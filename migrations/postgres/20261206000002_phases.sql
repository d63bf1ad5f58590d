-- A sale's phases (a member presale, then the general sale): who may join while each runs
-- and the settings it runs with; first_serial is written when the phase begins.
CREATE TABLE sale_phases (
    sale_id          UUID NOT NULL REFERENCES sales (id),
    position         INTEGER NOT NULL,
    name             TEXT NOT NULL,
    starts_at        TIMESTAMPTZ NOT NULL,
    audience         TEXT NOT NULL CHECK (audience IN ('everyone', 'list', 'codes')),
    rate_per_minute  INTEGER NOT NULL CHECK (rate_per_minute > 0),
    max_active       INTEGER NOT NULL CHECK (max_active > 0),
    per_user_limit   INTEGER NOT NULL CHECK (per_user_limit > 0),
    first_serial     BIGINT,
    PRIMARY KEY (sale_id, position)
);

-- The user ids a list phase lets in.
CREATE TABLE phase_members (
    sale_id   UUID NOT NULL,
    position  INTEGER NOT NULL,
    user_id   TEXT NOT NULL,
    PRIMARY KEY (sale_id, position, user_id)
);

-- A codes phase's access codes; `used` counts the users who redeemed each.
CREATE TABLE access_codes (
    sale_id   UUID NOT NULL,
    code      TEXT NOT NULL,
    position  INTEGER NOT NULL,
    max_uses  INTEGER NOT NULL CHECK (max_uses > 0),
    used      INTEGER NOT NULL DEFAULT 0 CHECK (used <= max_uses),
    PRIMARY KEY (sale_id, code)
);
CREATE INDEX access_codes_phase ON access_codes (sale_id, position, code);

-- Who redeemed which code: a code binds to its user, once per user.
CREATE TABLE code_redemptions (
    sale_id      UUID NOT NULL,
    code         TEXT NOT NULL,
    user_id      TEXT NOT NULL,
    position     INTEGER NOT NULL,
    redeemed_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (sale_id, code, user_id)
);
CREATE INDEX code_redemptions_user ON code_redemptions (sale_id, position, user_id);
