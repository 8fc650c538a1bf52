-- A Request Manager claims the oldest unclaimed suspended chain, ties broken by request
-- id: the index names the id as the other backends' do (InnoDB appends the primary key
-- to a secondary index anyway), so a claim is one index seek on every backend. Run
-- again (a migration cut off halfway), it builds the same index again.
ALTER TABLE suspended_job_chains
    DROP INDEX suspended_by_claim,
    ADD INDEX suspended_by_claim (rm_host, suspended_at, request_id);

-- The request's epoch when its chain was suspended: a hand-over of the chain at a later
-- epoch went out unrecorded (a resume whose answer or record was lost), and only then
-- may a runner have begun tries the stored chain does not know (issue #48). 0 for a
-- chain suspended before: checked as if it had. Added only when missing, so that the
-- migration can run again (see 0002).
SET @spindle_add_suspended_epoch := (
    SELECT IF(COUNT(*) = 0,
              'ALTER TABLE suspended_job_chains ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0',
              'DO 0')
    FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'suspended_job_chains' AND COLUMN_NAME = 'epoch'
);
PREPARE spindle_add_suspended_epoch FROM @spindle_add_suspended_epoch;
EXECUTE spindle_add_suspended_epoch;
DEALLOCATE PREPARE spindle_add_suspended_epoch;
