-- +goose Up
-- Each member's read cursor: how many letters of its inbox it has read
-- (core.TeamTx.ReadThrough). It sits beside the inbox's count, so a
-- member's unread count is letters - read_through, read with the counts
-- and never from the letters. A unit of work that moves it bumps the
-- team's version in the same statement (migration 00006).
ALTER TABLE members ADD COLUMN read_through integer NOT NULL DEFAULT 0 CHECK (read_through >= 0);

-- +goose Down
ALTER TABLE members DROP COLUMN read_through;
