-- +goose Up
-- A scenario run in progress is held by the lease of the replica that runs
-- it (core.RunDoc.Lease): holder and expiry, renewed while the run goes on
-- and cleared with its result. Every replica reads a run without a result
-- as in progress while its lease is unexpired, and as interrupted (its
-- replica died) once it has expired. Rows from before have no lease.
ALTER TABLE runs ADD COLUMN holder text, ADD COLUMN expires_at timestamptz;

-- +goose Down
ALTER TABLE runs DROP COLUMN holder, DROP COLUMN expires_at;
