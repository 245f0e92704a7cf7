-- +goose Up
-- A run's result document is kept byte for byte, as the file store keeps
-- result.json: jsonb would reorder its keys and respace it.
ALTER TABLE runs ALTER COLUMN result TYPE text USING result::text;

-- +goose Down
ALTER TABLE runs ALTER COLUMN result TYPE jsonb USING result::jsonb;
