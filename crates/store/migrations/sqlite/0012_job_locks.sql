-- Locks held by jobs (issue #34): a job or sequence node's `locks:` and the job pools of
-- the specs' `pools:` are claims of one job of a request (`job_id`: the job that takes
-- them), queued and counted as a request's own claims are (`job_id` empty). The table is
-- made again because SQLite cannot change a primary key.
DROP TRIGGER requests_end_releases_locks;
CREATE TABLE request_locks_with_jobs (
    request_id TEXT NOT NULL,
    job_id     TEXT NOT NULL DEFAULT '',
    name       TEXT NOT NULL,
    lock_key   TEXT NOT NULL,
    lock_limit INTEGER NOT NULL,
    priority   INTEGER NOT NULL DEFAULT 0,
    queued_at  INTEGER NOT NULL,
    fair_key   TEXT NOT NULL DEFAULT '',
    held_since INTEGER,
    PRIMARY KEY (request_id, job_id, name, lock_key)
);
INSERT INTO request_locks_with_jobs
    (request_id, job_id, name, lock_key, lock_limit, priority, queued_at, fair_key, held_since)
    SELECT request_id, '', name, lock_key, lock_limit, priority, queued_at, fair_key, held_since
    FROM request_locks;
DROP TABLE request_locks;
ALTER TABLE request_locks_with_jobs RENAME TO request_locks;
CREATE INDEX request_locks_by_lock ON request_locks (name, lock_key, held_since);

CREATE TRIGGER requests_end_releases_locks AFTER UPDATE OF state ON requests
WHEN NEW.state IN (3, 4, 6) AND OLD.state <> NEW.state
BEGIN
    DELETE FROM request_locks WHERE request_id = NEW.request_id;
END;
