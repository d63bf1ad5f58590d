-- Venue layouts (sections, rows, seats with their place, category and flags), reused by
-- many sales; a named-seat sale made from one says which.
CREATE TABLE layouts (
    id          UUID PRIMARY KEY,
    name        TEXT NOT NULL,
    body        JSONB NOT NULL,
    seats       INTEGER NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
ALTER TABLE sales ADD COLUMN layout_id UUID REFERENCES layouts (id);
