-- A Request Manager claims the oldest unclaimed suspended chain, ties broken by request
-- id. Without the id in the index SQLite read and sorted every suspended chain at each
-- claim, so resuming N chains after a restart took time growing with N squared (issue
-- #51: 5,000 chains took 31 s); with it, a claim is one index seek.
DROP INDEX suspended_by_claim;
CREATE INDEX suspended_by_claim ON suspended_job_chains (rm_host, suspended_at, request_id);

-- The request's epoch when its chain was suspended: a hand-over of the chain at a later
-- epoch went out unrecorded (a resume whose answer or record was lost), and only then
-- may a runner have begun tries the stored chain does not know (issue #48). 0 for a
-- chain suspended before: checked as if it had.
ALTER TABLE suspended_job_chains ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;
