-- +goose Up
-- One row per team. state is core.TeamState as JSON without its requests
-- and permissions (tables of their own below); version counts the units of
-- work committed on the team. A unit of work locks this row (SELECT ... FOR
-- UPDATE) for its whole transaction: that serialises a team's writes across
-- replicas.
CREATE TABLE teams (
    name       text PRIMARY KEY,
    created_at timestamptz NOT NULL,
    version    bigint NOT NULL DEFAULT 1,
    state      jsonb NOT NULL
);

-- Members and their tokens: only the SHA-256 of a token is stored. The
-- member's history and counters live in teams.state; this table is the
-- token index, read without waiting for a team's lock.
CREATE TABLE members (
    team       text NOT NULL REFERENCES teams (name) ON DELETE CASCADE,
    name       text NOT NULL,
    token_hash text NOT NULL UNIQUE,
    PRIMARY KEY (team, name)
);

-- Letters, one row per inbox line. id is <member>-<seq>; the primary key
-- makes a duplicate impossible and the unit of work appends only seq = n+1.
-- line holds the exact bytes of the lesson's mailbox line, newline
-- included, so an inbox is the concatenation of its lines in seq order.
CREATE TABLE letters (
    team   text NOT NULL,
    member text NOT NULL,
    seq    integer NOT NULL CHECK (seq > 0),
    sender text NOT NULL,
    body   text NOT NULL,
    line   bytea NOT NULL,
    PRIMARY KEY (team, member, seq),
    FOREIGN KEY (team, member) REFERENCES members (team, name) ON DELETE CASCADE
);

-- Protocol requests in id order (seq), each core.Request as JSON.
CREATE TABLE requests (
    team       text NOT NULL REFERENCES teams (name) ON DELETE CASCADE,
    seq        integer NOT NULL,
    request_id text NOT NULL,
    status     text NOT NULL,
    doc        jsonb NOT NULL,
    PRIMARY KEY (team, request_id)
);

-- Host gate permissions, oldest first, each core.Permission as JSON.
CREATE TABLE permissions (
    team          text NOT NULL REFERENCES teams (name) ON DELETE CASCADE,
    seq           integer NOT NULL,
    permission_id text NOT NULL,
    doc           jsonb NOT NULL,
    PRIMARY KEY (team, permission_id)
);

-- Idempotency records: the first response to a keyed write, per member.
CREATE TABLE idempotency (
    team        text NOT NULL REFERENCES teams (name) ON DELETE CASCADE,
    member      text NOT NULL,
    key         text NOT NULL,
    fingerprint text NOT NULL,
    result      bytea,
    at          timestamptz NOT NULL,
    letter      jsonb,
    PRIMARY KEY (team, member, key)
);
CREATE INDEX idempotency_at ON idempotency (at);

-- Turn documents, oldest first (seq).
CREATE TABLE turns (
    team    text NOT NULL REFERENCES teams (name) ON DELETE CASCADE,
    turn_id text NOT NULL,
    seq     bigserial NOT NULL,
    doc     jsonb NOT NULL,
    PRIMARY KEY (team, turn_id)
);
CREATE INDEX turns_order ON turns (team, seq);

-- A member's running turn: the replica that runs it and until when it
-- holds unless renewed. Mirrors MemberState.Lease, for operators.
CREATE TABLE leases (
    team       text NOT NULL,
    member     text NOT NULL,
    holder     text NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (team, member),
    FOREIGN KEY (team, member) REFERENCES members (team, name) ON DELETE CASCADE
);

-- Scenario run documents; result is null while the run is going.
CREATE TABLE runs (
    id         text PRIMARY KEY,
    result     jsonb,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- Events too large for a NOTIFY payload travel through this table; the
-- notification carries the row's id. Rows are removed after a minute.
CREATE TABLE events (
    id         bigserial PRIMARY KEY,
    payload    text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE events;
DROP TABLE runs;
DROP TABLE leases;
DROP TABLE turns;
DROP TABLE idempotency;
DROP TABLE permissions;
DROP TABLE requests;
DROP TABLE letters;
DROP TABLE members;
DROP TABLE teams;
