-- Job Runner registrations and leases, request ownership with fencing, and job tries
-- that started (Spindle extensions). A runner instance is new at every start of a
-- runner process; it is live while renewed_at + lease_us is in the future and neither
-- lost_at nor ended_at is set. Setting lost_at (once, conditionally) is the claim of the
-- one Request Manager that recovers its requests.
CREATE TABLE job_runners (
    instance_id TEXT PRIMARY KEY NOT NULL,
    url         TEXT NOT NULL,
    host        TEXT NOT NULL DEFAULT '',
    pid         INTEGER NOT NULL DEFAULT 0,
    started_at  INTEGER NOT NULL,
    renewed_at  INTEGER NOT NULL,
    lease_us    INTEGER NOT NULL,
    lost_at     INTEGER,
    ended_at    INTEGER
);

-- The runner instance that owns a RUNNING request, and the epoch of its hand-over: it
-- grows at every hand-over and recovery, and a report naming another epoch is refused.
ALTER TABLE requests ADD COLUMN jr_instance TEXT;
ALTER TABLE requests ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;
CREATE INDEX requests_by_instance ON requests (jr_instance, state);

-- Why a request failed when no one job says it (its deadline passed, its chain could not
-- be resumed); empty otherwise.
ALTER TABLE requests ADD COLUMN error TEXT NOT NULL DEFAULT '';

-- Tries that started, as runners report them; deleted when the request finishes. A try
-- here without a job_log entry was interrupted.
CREATE TABLE job_tries (
    request_id   TEXT NOT NULL,
    job_id       TEXT NOT NULL,
    try          INTEGER NOT NULL,
    run_try      INTEGER NOT NULL,
    sequence_try INTEGER NOT NULL,
    started_at   INTEGER NOT NULL,
    jr_instance  TEXT NOT NULL,
    PRIMARY KEY (request_id, job_id, try)
);
