-- +goose Up
-- A team's task board: one row per task, its number (task-<seq>) and
-- core.Task as JSON. Tasks are never removed but with their team (a
-- deleted task keeps its row and status), so the highest seq is the
-- board's length and an id is never given twice; the primary key refuses
-- a duplicate. A unit of work reads and writes them under the team's row
-- lock, which serialises claims across replicas.
CREATE TABLE tasks (
    team   text NOT NULL REFERENCES teams (name) ON DELETE CASCADE,
    seq    integer NOT NULL CHECK (seq > 0),
    status text NOT NULL,
    doc    jsonb NOT NULL,
    PRIMARY KEY (team, seq)
);

-- +goose Down
DROP TABLE tasks;
