-- Spindle's schema (PostgreSQL). Times are Unix microseconds (UTC); states are the numeric
-- values of proto::State.
CREATE TABLE requests (
    request_id    TEXT PRIMARY KEY NOT NULL,
    type          TEXT NOT NULL,
    state         SMALLINT NOT NULL,
    user_name     TEXT NOT NULL DEFAULT '',
    created_at    BIGINT NOT NULL,
    started_at    BIGINT,
    finished_at   BIGINT,
    total_jobs    BIGINT NOT NULL DEFAULT 0,
    finished_jobs BIGINT NOT NULL DEFAULT 0,
    jr_url        TEXT
);
CREATE INDEX requests_by_created ON requests (created_at DESC, request_id);
CREATE INDEX requests_by_type ON requests (type, created_at DESC);
CREATE INDEX requests_by_user ON requests (user_name, created_at DESC);
CREATE INDEX requests_by_state ON requests (state, created_at DESC);
CREATE INDEX requests_by_finished ON requests (finished_at);

-- Immutable: written once with the request.
CREATE TABLE request_archives (
    request_id     TEXT PRIMARY KEY NOT NULL REFERENCES requests (request_id),
    create_request TEXT NOT NULL,
    args           TEXT NOT NULL,
    job_chain      TEXT NOT NULL
);

-- The recorded request args, for the search's arg=value filter. Strings as they are,
-- other values as JSON text.
CREATE TABLE request_args (
    request_id TEXT NOT NULL REFERENCES requests (request_id),
    name       TEXT NOT NULL,
    value      TEXT NOT NULL,
    PRIMARY KEY (request_id, name)
);
CREATE INDEX request_args_by_value ON request_args (name, value);

-- One row per job try; the key makes a re-sent entry a no-op.
CREATE TABLE job_log (
    request_id  TEXT NOT NULL,
    job_id      TEXT NOT NULL,
    try         INTEGER NOT NULL,
    name        TEXT NOT NULL,
    type        TEXT NOT NULL,
    state       SMALLINT NOT NULL,
    started_at  BIGINT NOT NULL,
    finished_at BIGINT NOT NULL,
    exit        BIGINT NOT NULL,
    error       TEXT NOT NULL,
    stdout      TEXT NOT NULL,
    stderr      TEXT NOT NULL,
    PRIMARY KEY (request_id, job_id, try)
);

-- At most one per request; rm_host is the Request Manager that claimed it for resuming.
CREATE TABLE suspended_job_chains (
    request_id          TEXT PRIMARY KEY NOT NULL REFERENCES requests (request_id),
    suspended_job_chain TEXT NOT NULL,
    rm_host             TEXT,
    updated_at          BIGINT NOT NULL,
    suspended_at        BIGINT NOT NULL
);
CREATE INDEX suspended_by_claim ON suspended_job_chains (rm_host, suspended_at);
