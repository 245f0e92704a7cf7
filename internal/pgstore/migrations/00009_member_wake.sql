-- +goose Up
-- members.wake mirrors a member's wake setting (kept in teams.state), so
-- that a replica starting finds the members it may have to wake with one
-- query instead of reading every team. The index holds only those rows.
ALTER TABLE members ADD COLUMN wake boolean NOT NULL DEFAULT false;
CREATE INDEX members_wake ON members (team, name) WHERE wake;

-- +goose Down
DROP INDEX members_wake;
ALTER TABLE members DROP COLUMN wake;
