-- +goose Up
-- A replica remembers, for each team, what its last unit of work there
-- committed (pgstore's cache), and runs the next unit of work on it
-- without reading the team first: its one round trip locks the team's
-- row with mailroom_lock_team, which refuses unless the row is still the
-- one remembered, and writes and commits. Refused, the unit of work runs
-- again on the team read under the lock. So the row must say when
-- anything remembered has changed:
--
-- * version grows with every change of the state, the inbox counts, the
--   requests or the permissions, whoever makes it: the triggers below
--   bump it, so a replica of an older Mailroom (which bumps it only with
--   the state) never leaves it unchanged under a change;
-- * incarnation tells a team from an earlier one of the same name
--   (deleted, created again), whose versions start again.
CREATE SEQUENCE team_incarnations;
ALTER TABLE teams ADD COLUMN incarnation bigint NOT NULL DEFAULT nextval('team_incarnations');

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION letters_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE members SET letters = letters + 1, inbox_bytes = inbox_bytes + octet_length(NEW.line)
    WHERE team = NEW.team AND name = NEW.member;
    UPDATE teams SET version = version + 1 WHERE name = NEW.team;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION team_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE teams SET version = version + 1 WHERE name = COALESCE(NEW.team, OLD.team);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- A letter Mailroom inserts from now on is counted (and the version
-- bumped) by the INSERT statement itself, which says so (counted): the
-- trigger, a function call and two statements more per letter, is left
-- to the letters that do not say so (an older replica's, import's).
ALTER TABLE letters ADD COLUMN counted boolean NOT NULL DEFAULT false;
DROP TRIGGER letters_count ON letters;
CREATE TRIGGER letters_count AFTER INSERT ON letters FOR EACH ROW WHEN (NOT NEW.counted)
    EXECUTE FUNCTION letters_count();

CREATE TRIGGER requests_changed AFTER INSERT OR UPDATE OR DELETE ON requests
    FOR EACH ROW EXECUTE FUNCTION team_changed();
CREATE TRIGGER permissions_changed AFTER INSERT OR UPDATE OR DELETE ON permissions
    FOR EACH ROW EXECUTE FUNCTION team_changed();

-- mailroom_lock_team locks team's row for the transaction, as SELECT ...
-- FOR UPDATE does, and raises MR001 unless the row is still incarnation
-- seen_incarnation at version seen_version. Raised, it aborts the
-- transaction, and with it the writes queued behind it.
-- +goose StatementBegin
CREATE FUNCTION mailroom_lock_team(team text, seen_incarnation bigint, seen_version bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM teams WHERE name = team AND incarnation = seen_incarnation AND version = seen_version FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'team % changed since this replica read it', team USING ERRCODE = 'MR001';
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION mailroom_lock_team(text, bigint, bigint);
DROP TRIGGER permissions_changed ON permissions;
DROP TRIGGER requests_changed ON requests;
DROP FUNCTION team_changed();
DROP TRIGGER letters_count ON letters;
CREATE TRIGGER letters_count AFTER INSERT ON letters FOR EACH ROW EXECUTE FUNCTION letters_count();
ALTER TABLE letters DROP COLUMN counted;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION letters_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE members SET letters = letters + 1, inbox_bytes = inbox_bytes + octet_length(NEW.line)
    WHERE team = NEW.team AND name = NEW.member;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
ALTER TABLE teams DROP COLUMN incarnation;
DROP SEQUENCE team_incarnations;
