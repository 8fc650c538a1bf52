-- The claim reads the oldest unclaimed suspended chains (`rm_host IS NULL`, by
-- suspended_at and request id). With tens of thousands suspended at once and their
-- statistics read, PostgreSQL judged every row a match for `rm_host IS NULL` in
-- suspended_by_claim and chose to read the table whole and sort it at every claim (11 ms
-- at 50,000; the restart of 50,000 resumed 1,200 a second, the first ones slowest). A
-- partial index of the unclaimed ones, in the claim's order, is read from its start and
-- stops after the claim's batch (0.45 ms; issue #51).
CREATE INDEX suspended_unclaimed ON suspended_job_chains (suspended_at, request_id) WHERE rm_host IS NULL;
