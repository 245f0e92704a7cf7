-- +goose Up
-- The documents are kept as the text Mailroom wrote (json, not jsonb):
-- a unit of work reads the team's state, requests and permissions and,
-- at commit, compares what it would write with what it read, so that an
-- unchanged document is not written again. With the stored text equal
-- to Go's encoding that comparison needs no second encoding of what was
-- read, and the database neither parses a document into jsonb on write
-- nor prints it back on read. Nothing queries inside these columns.
-- Rows stored before this migration hold jsonb's text, which differs from
-- Go's encoding: each is rewritten once, by the first unit of work that
-- reads it, with the same content.
ALTER TABLE teams ALTER COLUMN state TYPE json USING state::json;
ALTER TABLE requests ALTER COLUMN doc TYPE json USING doc::json;
ALTER TABLE permissions ALTER COLUMN doc TYPE json USING doc::json;
ALTER TABLE idempotency ALTER COLUMN letter TYPE json USING letter::json;
ALTER TABLE turns ALTER COLUMN doc TYPE json USING doc::json;

-- +goose Down
ALTER TABLE turns ALTER COLUMN doc TYPE jsonb USING doc::jsonb;
ALTER TABLE idempotency ALTER COLUMN letter TYPE jsonb USING letter::jsonb;
ALTER TABLE permissions ALTER COLUMN doc TYPE jsonb USING doc::jsonb;
ALTER TABLE requests ALTER COLUMN doc TYPE jsonb USING doc::jsonb;
ALTER TABLE teams ALTER COLUMN state TYPE jsonb USING state::jsonb;
