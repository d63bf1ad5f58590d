-- Venue layouts (sections, rows, seats with their place, category and flags), reused by
-- many sales; a named-seat sale made from one says which.
CREATE TABLE layouts (
    id          BLOB PRIMARY KEY,
    name        TEXT NOT NULL,
    body        TEXT NOT NULL,
    seats       INTEGER NOT NULL,
    created_at  INTEGER NOT NULL
);
ALTER TABLE sales ADD COLUMN layout_id BLOB REFERENCES layouts (id);
