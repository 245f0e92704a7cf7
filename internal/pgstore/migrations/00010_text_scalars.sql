-- +goose Up
-- Every Unicode scalar value a text field holds is kept exactly, U+0000
-- included (docs/api.md, "Every Unicode scalar value round-trips").
-- PostgreSQL's text cannot hold U+0000 and jsonb refuses its escape
-- \u0000, while json keeps a document as the text Mailroom wrote, escapes
-- and all (as teams.state and the other documents already are,
-- migration 00005): the task board becomes json too. Nothing queries
-- inside it.
ALTER TABLE tasks ALTER COLUMN doc TYPE json USING doc::json;

-- A letter is its line (bytea, the inbox's exact bytes); letters.body is
-- the body's text for searching, never read back as the letter. A U+0000
-- in a body is written there as a space.
COMMENT ON COLUMN letters.body IS 'the letter''s body for searching, U+0000 written as a space; the letter itself is line';

-- +goose Down
COMMENT ON COLUMN letters.body IS NULL;
-- A task holding U+0000 cannot go back to jsonb: the down migration
-- fails on it rather than lose it.
ALTER TABLE tasks ALTER COLUMN doc TYPE jsonb USING doc::jsonb;
