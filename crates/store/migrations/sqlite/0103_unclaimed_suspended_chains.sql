-- The claim reads the oldest unclaimed suspended chains (`rm_host IS NULL`, by
-- suspended_at and request id): a partial index of the unclaimed ones, in the claim's
-- order, read from its start (PostgreSQL chose to read the table whole and sort it at
-- 50,000 without it; SQLite sought suspended_by_claim already, and takes this one as
-- well; issue #51).
CREATE INDEX suspended_unclaimed ON suspended_job_chains (suspended_at, request_id) WHERE rm_host IS NULL;
