-- A Request Manager claims the oldest unclaimed suspended chain, ties broken by request
-- id: with the id in the index, a claim is one index seek, not a sort of every chain
-- suspended at the same moment (a runner's shutdown suspends them all at once).
DROP INDEX suspended_by_claim;
CREATE INDEX suspended_by_claim ON suspended_job_chains (rm_host, suspended_at, request_id);
