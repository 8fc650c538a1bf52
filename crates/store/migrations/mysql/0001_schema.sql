-- Spindle's schema (MySQL 8.0+, MariaDB 10.6+): the tables of the SQLite and PostgreSQL
-- schemas as their migrations left them, in one step. Times are Unix microseconds (UTC);
-- states are the numeric values of proto::State.
--
-- MySQL runs DDL outside transactions, so a migration cut off halfway (its process
-- killed) cannot be rolled back: every statement here can run again (IF NOT EXISTS,
-- INSERT IGNORE, DROP before CREATE), and the store runs an interrupted migration again
-- (mysql.rs).
--
-- Every table is InnoDB in utf8mb4 with a binary collation, so that ids, names and arg
-- values compare byte for byte as in the other two databases (MySQL's default collations
-- fold case). Columns that a key or an index holds are VARCHAR (an index entry holds at
-- most 3,072 bytes); the rest are TEXT or LONGTEXT, whose defaults are expressions.

CREATE TABLE IF NOT EXISTS requests (
    request_id    VARCHAR(64) NOT NULL PRIMARY KEY,
    type          VARCHAR(255) NOT NULL,
    state         SMALLINT NOT NULL,
    user_name     VARCHAR(255) NOT NULL DEFAULT '',
    created_at    BIGINT NOT NULL,
    started_at    BIGINT,
    finished_at   BIGINT,
    total_jobs    BIGINT NOT NULL DEFAULT 0,
    finished_jobs BIGINT NOT NULL DEFAULT 0,
    jr_url        TEXT,
    -- The runner instance that owns a RUNNING request, and the epoch of its hand-over.
    jr_instance   VARCHAR(255),
    epoch         BIGINT NOT NULL DEFAULT 0,
    -- Why a request failed when no one job says it, or why a PENDING one waits.
    error         TEXT NOT NULL DEFAULT (''),
    paused        INTEGER NOT NULL DEFAULT 0,
    spec_version  VARCHAR(128),
    INDEX requests_by_created (created_at DESC, request_id),
    INDEX requests_by_type (type, created_at DESC),
    INDEX requests_by_user (user_name, created_at DESC),
    INDEX requests_by_state (state, created_at DESC),
    INDEX requests_by_finished (finished_at),
    INDEX requests_by_instance (jr_instance, state)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Immutable: written once with the request.
CREATE TABLE IF NOT EXISTS request_archives (
    request_id     VARCHAR(64) NOT NULL PRIMARY KEY,
    create_request LONGTEXT NOT NULL,
    args           LONGTEXT NOT NULL,
    job_chain      LONGTEXT NOT NULL,
    CONSTRAINT request_archives_request FOREIGN KEY (request_id) REFERENCES requests (request_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The recorded request args, for the search's arg=value filter. Strings as they are,
-- other values as JSON text. Values (a list of hosts) are often longer than an index
-- entry: the index holds the MD5 of the value, a stored column the database computes;
-- the search compares the hash, then the value.
CREATE TABLE IF NOT EXISTS request_args (
    request_id VARCHAR(64) NOT NULL,
    name       VARCHAR(255) NOT NULL,
    value      LONGTEXT NOT NULL,
    value_hash BINARY(16) AS (UNHEX(MD5(value))) STORED,
    PRIMARY KEY (request_id, name),
    INDEX request_args_by_value_hash (name, value_hash),
    CONSTRAINT request_args_request FOREIGN KEY (request_id) REFERENCES requests (request_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- One row per job try; the key makes a re-sent entry a no-op.
CREATE TABLE IF NOT EXISTS job_log (
    request_id  VARCHAR(64) NOT NULL,
    job_id      VARCHAR(255) NOT NULL,
    try         INTEGER NOT NULL,
    name        TEXT NOT NULL,
    type        TEXT NOT NULL,
    state       SMALLINT NOT NULL,
    started_at  BIGINT NOT NULL,
    finished_at BIGINT NOT NULL,
    "exit"      BIGINT NOT NULL,
    error       LONGTEXT NOT NULL,
    stdout      LONGTEXT NOT NULL,
    stderr      LONGTEXT NOT NULL,
    PRIMARY KEY (request_id, job_id, try)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- At most one per request; rm_host is the Request Manager that claimed it for resuming.
CREATE TABLE IF NOT EXISTS suspended_job_chains (
    request_id          VARCHAR(64) NOT NULL PRIMARY KEY,
    suspended_job_chain LONGTEXT NOT NULL,
    rm_host             VARCHAR(255),
    updated_at          BIGINT NOT NULL,
    suspended_at        BIGINT NOT NULL,
    INDEX suspended_by_claim (rm_host, suspended_at),
    CONSTRAINT suspended_job_chains_request FOREIGN KEY (request_id) REFERENCES requests (request_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Live job output: chunks of a try's stdout (stream 0) or stderr (stream 1); seq numbers
-- a request's chunks in the order they were stored (the cursor of GET .../output?after=).
CREATE TABLE IF NOT EXISTS job_output (
    seq         BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    request_id  VARCHAR(64) NOT NULL,
    job_id      VARCHAR(255) NOT NULL,
    try         INTEGER NOT NULL,
    stream      SMALLINT NOT NULL,
    byte_offset BIGINT NOT NULL,
    byte_len    BIGINT NOT NULL,
    data        LONGTEXT NOT NULL,
    UNIQUE INDEX job_output_by_try (request_id, job_id, try, stream, byte_offset),
    INDEX job_output_by_request (request_id, seq)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Job Runner registrations and leases (see the PostgreSQL migration 0004).
CREATE TABLE IF NOT EXISTS job_runners (
    instance_id VARCHAR(255) NOT NULL PRIMARY KEY,
    url         TEXT NOT NULL,
    host        TEXT NOT NULL DEFAULT (''),
    pid         BIGINT NOT NULL DEFAULT 0,
    started_at  BIGINT NOT NULL,
    renewed_at  BIGINT NOT NULL,
    lease_us    BIGINT NOT NULL,
    lost_at     BIGINT,
    ended_at    BIGINT
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Tries that started, as runners report them; deleted when the request finishes.
CREATE TABLE IF NOT EXISTS job_tries (
    request_id   VARCHAR(64) NOT NULL,
    job_id       VARCHAR(255) NOT NULL,
    try          INTEGER NOT NULL,
    run_try      INTEGER NOT NULL,
    sequence_try INTEGER NOT NULL,
    started_at   BIGINT NOT NULL,
    jr_instance  VARCHAR(255) NOT NULL,
    PRIMARY KEY (request_id, job_id, try)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Who did what to each request, when and from where.
CREATE TABLE IF NOT EXISTS request_audit (
    id         BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    request_id VARCHAR(64) NOT NULL,
    at         BIGINT NOT NULL,
    action     VARCHAR(64) NOT NULL,
    user_name  VARCHAR(255) NOT NULL,
    address    VARCHAR(255) NOT NULL,
    INDEX request_audit_by_request (request_id, at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Every set of spec files a Request Manager loaded, by version.
CREATE TABLE IF NOT EXISTS spec_versions (
    version    VARCHAR(128) NOT NULL PRIMARY KEY,
    files      LONGTEXT NOT NULL,
    created_at BIGINT NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The answer to each `approval` job, given once.
CREATE TABLE IF NOT EXISTS approvals (
    request_id VARCHAR(64) NOT NULL,
    job_id     VARCHAR(255) NOT NULL,
    approved   INTEGER NOT NULL,
    user_name  VARCHAR(255) NOT NULL,
    at         BIGINT NOT NULL,
    comment    TEXT NOT NULL,
    PRIMARY KEY (request_id, job_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Each run of a schedule that fell due, claimed by the Request Manager that inserted it.
CREATE TABLE IF NOT EXISTS schedule_runs (
    schedule   VARCHAR(255) NOT NULL,
    due_at     BIGINT NOT NULL,
    rm_host    VARCHAR(255) NOT NULL,
    request_id VARCHAR(64),
    skipped    TEXT NOT NULL DEFAULT (''),
    PRIMARY KEY (schedule, due_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Named locks a transaction takes by locking its row (`FOR UPDATE SKIP LOCKED`): held
-- until the transaction ends, so nothing is left held by a connection that goes back to
-- its pool. 'retention': one Request Manager removes old requests at a time.
CREATE TABLE IF NOT EXISTS spindle_locks (
    name VARCHAR(64) NOT NULL PRIMARY KEY
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
INSERT IGNORE INTO spindle_locks (name) VALUES ('retention');

-- A request's started tries are of no use once it has finished (COMPLETE 3, FAIL 4,
-- STOPPED 6): forgotten by the UPDATE that ends it, so that a finish is one statement.
DROP TRIGGER IF EXISTS requests_end_forgets_tries;
CREATE TRIGGER requests_end_forgets_tries AFTER UPDATE ON requests FOR EACH ROW
    DELETE FROM job_tries
    WHERE request_id = NEW.request_id AND NEW.state IN (3, 4, 6) AND NEW.state <> OLD.state;
