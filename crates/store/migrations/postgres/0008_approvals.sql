-- Approval gates (issue #16): the answer to each `approval` job, given once, kept so that
-- a try begun after a runner died (or a restart, or a hand-over) finds it.
CREATE TABLE approvals (
    request_id TEXT NOT NULL,
    job_id     TEXT NOT NULL,
    approved   INTEGER NOT NULL,
    user_name  TEXT NOT NULL,
    at         BIGINT NOT NULL,
    comment    TEXT NOT NULL,
    PRIMARY KEY (request_id, job_id)
);
