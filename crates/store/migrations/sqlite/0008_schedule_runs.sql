-- Schedules (issue #16): each run of a schedule that fell due, claimed by the one Request
-- Manager that inserted it (so never started twice), with the request it started, or
-- why it started none.
CREATE TABLE schedule_runs (
    schedule   TEXT NOT NULL,
    due_at     INTEGER NOT NULL,
    rm_host    TEXT NOT NULL,
    request_id TEXT,
    skipped    TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (schedule, due_at)
);
