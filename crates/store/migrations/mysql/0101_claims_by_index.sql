-- A Request Manager claims the oldest unclaimed suspended chain, ties broken by request
-- id: the index names the id as the other backends' do (InnoDB appends the primary key
-- to a secondary index anyway), so a claim is one index seek on every backend.
ALTER TABLE suspended_job_chains
    DROP INDEX suspended_by_claim,
    ADD INDEX suspended_by_claim (rm_host, suspended_at, request_id);
