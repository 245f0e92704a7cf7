-- +goose Up
-- A member's archive (docs/api.md, "Mail that stays useful"): the letters
-- it moved out of its inbox keep their rows, marked archived, so a
-- letter's id (its seq) is never given again and its line stays exactly
-- as stored. Which numbers are archived is also in the member's state
-- (core.ArchiveMark, in teams.state); a unit of work changes both under
-- the team's row lock. members.letters and members.inbox_bytes count the
-- inbox only: the statement that archives subtracts the rows it moved.
--
-- No index of its own: an inbox is read from its first letter not
-- archived (the mark says which number that is) and an archive through
-- the mark's last number, both ranges of the primary key.
ALTER TABLE letters ADD COLUMN archived boolean NOT NULL DEFAULT false;

-- A letter inserted already archived (import of a file store's archive)
-- is not in the inbox's count.
DROP TRIGGER letters_count ON letters;
CREATE TRIGGER letters_count AFTER INSERT ON letters FOR EACH ROW WHEN (NOT NEW.counted AND NOT NEW.archived)
    EXECUTE FUNCTION letters_count();

-- mailroom_archive moves member's letters numbered seqs (all in its
-- inbox) to its archive: marks their rows, takes them off the inbox's
-- counts and bumps the team's version (migration 00006), in one
-- statement of the unit of work's round trip. It returns the bytes of
-- the lines moved. A letter not in the inbox raises MR002 and aborts the
-- transaction: the state's mark and the rows never disagree.
-- +goose StatementBegin
CREATE FUNCTION mailroom_archive(p_team text, p_member text, seqs integer[]) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    moved integer;
    moved_bytes bigint;
BEGIN
    WITH m AS (
        UPDATE letters SET archived = true
        WHERE team = p_team AND member = p_member AND seq = ANY (seqs) AND NOT archived
        RETURNING octet_length(line) AS len
    )
    SELECT count(*), COALESCE(sum(len), 0) INTO moved, moved_bytes FROM m;
    IF moved <> cardinality(seqs) THEN
        RAISE EXCEPTION 'archive of % letters of %/% found % in the inbox', cardinality(seqs), p_team, p_member, moved
            USING ERRCODE = 'MR002';
    END IF;
    UPDATE members SET letters = letters - moved, inbox_bytes = inbox_bytes - moved_bytes
    WHERE team = p_team AND name = p_member;
    UPDATE teams SET version = version + 1 WHERE name = p_team;
    RETURN moved_bytes;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- The archived letters go back into their inboxes' counts: an older
-- Mailroom knows no archive.
UPDATE members m SET letters = m.letters + c.n, inbox_bytes = m.inbox_bytes + c.b
FROM (SELECT team, member, count(*) AS n, sum(octet_length(line)) AS b FROM letters WHERE archived GROUP BY team, member) c
WHERE m.team = c.team AND m.name = c.member;
DROP FUNCTION mailroom_archive(text, text, integer[]);
DROP TRIGGER letters_count ON letters;
CREATE TRIGGER letters_count AFTER INSERT ON letters FOR EACH ROW WHEN (NOT NEW.counted)
    EXECUTE FUNCTION letters_count();
ALTER TABLE letters DROP COLUMN archived;
