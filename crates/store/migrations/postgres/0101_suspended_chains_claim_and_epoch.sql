-- A Request Manager claims the oldest unclaimed suspended chain, ties broken by request
-- id: with the id in the index, a claim is one index seek, not a sort of every chain
-- suspended at the same moment (a runner's shutdown suspends them all at once).
DROP INDEX suspended_by_claim;
CREATE INDEX suspended_by_claim ON suspended_job_chains (rm_host, suspended_at, request_id);

-- The request's epoch when its chain was suspended: a hand-over of the chain at a later
-- epoch went out unrecorded (a resume whose answer or record was lost), and only then
-- may a runner have begun tries the stored chain does not know (issue #48). 0 for a
-- chain suspended before: checked as if it had.
ALTER TABLE suspended_job_chains ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0;
