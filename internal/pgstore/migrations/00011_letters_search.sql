-- +goose Up
-- Full-text search over letters (docs/api.md, "Search"). letters.body is
-- the body's text for searching (migration 00010); its tsvector is kept
-- beside it, computed by PostgreSQL on insert, with the 'simple'
-- configuration: words are lower-cased and never stemmed nor dropped as
-- stop words, so that a letter in any language is found by its own words.
ALTER TABLE letters ADD COLUMN search tsvector
    GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, body)) STORED;
CREATE INDEX letters_search ON letters USING gin (search);

-- +goose Down
DROP INDEX letters_search;
ALTER TABLE letters DROP COLUMN search;
