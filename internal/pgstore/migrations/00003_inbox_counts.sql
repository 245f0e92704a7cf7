-- +goose Up
-- Each member's inbox size, kept with its letters by a trigger, so that a
-- unit of work appends a letter (id n+1, inbox_bytes limit) without reading
-- the inbox's rows; every path that inserts letters (a send, import) keeps
-- it. Letters are never deleted but with their member or team.
ALTER TABLE members ADD COLUMN letters integer NOT NULL DEFAULT 0,
    ADD COLUMN inbox_bytes bigint NOT NULL DEFAULT 0;

UPDATE members m SET letters = c.n, inbox_bytes = c.b
FROM (SELECT team, member, count(*) AS n, sum(octet_length(line)) AS b FROM letters GROUP BY team, member) c
WHERE m.team = c.team AND m.name = c.member;

-- +goose StatementBegin
CREATE FUNCTION letters_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE members SET letters = letters + 1, inbox_bytes = inbox_bytes + octet_length(NEW.line)
    WHERE team = NEW.team AND name = NEW.member;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER letters_count AFTER INSERT ON letters FOR EACH ROW EXECUTE FUNCTION letters_count();

-- The expired idempotency records of one team, found without scanning
-- the team's live ones.
CREATE INDEX idempotency_team_at ON idempotency (team, at);

-- +goose Down
DROP INDEX idempotency_team_at;
DROP TRIGGER letters_count ON letters;
DROP FUNCTION letters_count();
ALTER TABLE members DROP COLUMN letters, DROP COLUMN inbox_bytes;
